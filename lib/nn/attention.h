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

// Rows first .. first + rows of a decoding step's query that attend to their own keys and
// values: one DecoderState of several decoded together. Each `group` consecutive rows share
// one entry of kv (a sentence's beams), whose keys at positions >= key_lengths[entry] are
// padding.
struct AttentionSpan {
  int64_t first = 0, rows = 0, group = 1;
  AttentionKV kv;
  Tensor key_lengths;
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
  Var attend(Graph& g, const Var& query, const AttentionKV& kv, const Tensor& key_lengths,
             bool causal) const;

  // Inference (no gradient, no dropout): query [R, 1, d_model], each span of rows attending
  // to its own keys and values; the query and output projections run once over all R rows.
  Var attend_spans(Graph& g, const Var& query, const std::vector<AttentionSpan>& spans) const;

  // Linear::prepare_inference of the four projections.
  void prepare_inference(Backend& be, bool int8);

  int heads() const { return heads_; }
  int64_t d_model() const { return d_model_; }

 private:
  Var context(Graph& g, const Var& q, const AttentionKV& kv, const Tensor& key_lengths, bool causal,
              const Tensor& into = Tensor()) const;

  Linear q_proj_, k_proj_, v_proj_, out_proj_;
  int64_t d_model_ = 0;
  int heads_ = 1;
  float attention_dropout_ = 0.0f;
};

}  // namespace tx::nn
