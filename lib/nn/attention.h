// MultiHeadAttention: scaled dot-product attention over `heads` heads (paper section 3.2.2).
//
// The query comes from one input and the keys and values from another (the "memory"): the
// same tensor for self-attention, the encoder output for cross-attention. project_kv and
// attend are separate so that a decoder can compute the encoder's keys and values once per
// sentence, or keep a cache of its own past keys and values, and attend to them step by step.
#pragma once

#include <vector>

#include "graph/ops.h"
#include "nn/linear.h"

namespace tx::nn {

// Keys and values, split into heads: [batch, heads, time, d_head] each.
struct AttentionKV {
  Var keys;
  Var values;
};

// A decoding step's self-attention cache (DecoderState): keys and values [capacity, slots,
// heads, d_head] read through rows i32 [R, capacity] (each row's slot per step), the first
// `length` steps visible (Backend::attend_cached).
struct CachedKV {
  Tensor keys, values, rows;
  int64_t length = 0;
};

// Rows first .. first + rows of a decoding step's query that attend to their own keys and
// values: one DecoderState of several decoded together. Each `group` consecutive rows share
// one entry of kv (a sentence's beams), whose keys at positions >= key_lengths[entry] are
// padding.
struct AttentionSpan {
  int64_t first = 0, rows = 0, group = 1;
  AttentionKV kv;
  Tensor key_lengths;
  CachedKV cache;  // instead of kv and key_lengths: a self-attention cache (group 1)
};

// What attend() keeps of an attention for a caller that reads it (word alignments, guided
// alignment's loss), each [B, heads, Tq, Tk].
struct AttentionTap {
  Var probs;   // the probabilities, before dropout
  Var scores;  // the unscaled, unmasked scores q k^T they are the softmax of
};

// One decoding step's self-attention queries, keys and values, each [rows, heads, 1, d_head].
struct StepProjection {
  Var queries;
  AttentionKV kv;
};

class MultiHeadAttention {
 public:
  MultiHeadAttention() = default;
  // Parameters under "<scope>.{q,k,v,out}_proj.{weight,bias}". attention_dropout applies to
  // the attention probabilities (0 in the paper).
  MultiHeadAttention(ParamScope scope, int64_t d_model, int heads, float attention_dropout = 0.0f);

  // query [B, Tq, d_model] attends to memory [B, Tk, d_model]; keys at positions >=
  // key_lengths[b] (i32 [B], optional) are padding; causal hides keys after the query's time.
  Var forward(Graph& g, const Var& query, const Var& memory, const Tensor& key_lengths,
              bool causal) const;

  AttentionKV project_kv(Graph& g, const Var& memory) const;
  // query [B, T, d_model] projected to [B, heads, T, d_head].
  Var project_queries(Graph& g, const Var& query) const;
  // With a tap, the probabilities and scores are kept there (the scores then stay allocated).
  // In inference (no gradient, no dropout, no tap) a non-causal attention sums over each
  // sentence's real keys only, never its padding (attend_unpadded).
  Var attend(Graph& g, const Var& query, const AttentionKV& kv, const Tensor& key_lengths,
             bool causal, AttentionTap* tap = nullptr) const;

  // Inference (no gradient, no dropout): query [R, 1, d_model], each span of rows attending
  // to its own keys and values (Backend::attend_memory) or cache (Backend::attend_cached); the
  // query and output projections run once over all R rows. queries: the query already
  // projected, [R, heads, 1, d_head] (project_step's).
  Var attend_spans(Graph& g, const Var& query, const std::vector<AttentionSpan>& spans,
                   const Var& queries = nullptr) const;

  // Inference: x [R, 1, d_model] projected to queries, keys and values, each [R, heads, 1,
  // d_head] — after prepare_inference by one GEMM of N = 3 * d_model (Linear::concatenated),
  // the same products as the three projections (on the CPU bit for bit at decoding's row
  // counts, up to 160 rows measured).
  StepProjection project_step(Graph& g, const Var& x) const;

  // Linear::prepare_inference of the four projections, and the joined q|k|v projection.
  void prepare_inference(Backend& be, ops::WeightForm form);

  int heads() const { return heads_; }
  int64_t d_model() const { return d_model_; }

 private:
  Var attend_unpadded(Graph& g, const Var& query, const AttentionKV& kv,
                      const Tensor& key_lengths) const;
  Var context(Graph& g, const Var& q, const AttentionKV& kv, const Tensor& key_lengths, bool causal,
              AttentionTap* tap) const;

  Linear q_proj_, k_proj_, v_proj_, out_proj_;
  Linear qkv_proj_;  // q_proj_ | k_proj_ | v_proj_, from prepare_inference on
  int64_t d_model_ = 0;
  int heads_ = 1;
  float attention_dropout_ = 0.0f;
};

}  // namespace tx::nn
