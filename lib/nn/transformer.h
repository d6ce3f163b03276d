// Transformer: the encoder-decoder model of the paper — embeddings with sinusoidal positions,
// N encoder layers, N decoder layers and the projection to target-vocabulary logits.
//
// forward() is teacher-forced training and scoring; encode() / decode() are its two halves;
// start_decoding() + decode_step() run the decoder one token at a time with cached state
// (nn/decoder_state.h) for beam search.
#pragma once

#include <vector>

#include "io/model_config.h"
#include "nn/decoder_layer.h"
#include "nn/decoder_state.h"
#include "nn/embedding.h"
#include "nn/encoder_layer.h"
#include "nn/layer_norm.h"

namespace tx::nn {

// The output layer restricted to some target ids (a lexical shortlist, decode/shortlist.h):
// their rows of the projection and its bias, prepared as the model's own (prepare_inference).
struct OutputSubset {
  std::vector<int32_t> ids;  // target ids, sorted; logit k is ids[k]'s
  Var weight;                // [K, d_model]
  Var bias;                  // [K]; null without output_bias
  ops::PreparedWeight prepared;
};

class Transformer {
 public:
  Transformer() = default;
  // Parameters, in this order (root = scope):
  //   encoder.embed_tokens.weight [src_vocab, d_model]    (tied none | decoder)
  //   embed_tokens.weight [vocab, d_model]                 (tied all: source, target, output)
  //   encoder.embed_norm.*                                 (embed_norm only)
  //   encoder.layers.<i>.*, encoder.final_norm.*           (final norm: pre_norm and final_norm)
  //   decoder.embed_tokens.weight [tgt_vocab, d_model]    (tied none | decoder)
  //   decoder.embed_norm.*                                 (embed_norm only)
  //   decoder.layers.<i>.*, decoder.final_norm.*           (final norm: pre_norm and final_norm)
  //   decoder.output_proj.weight [tgt_vocab, d_model]     (tied none)
  //   decoder.output_proj.bias [tgt_vocab]                 (output_bias; none in the paper)
  // The model the config describes; config.validate() must pass (vocabulary sizes known).
  Transformer(ParamScope scope, const io::ModelConfig& config);

  // Teacher-forced logits [B, T, tgt_vocab]. src_ids i32 [B, S] right-padded, src_lengths
  // i32 [B]; tgt_in_ids i32 [B, T]: the target shifted right (BOS first). Position t sees
  // target inputs 0..t only.
  // With `tapped`, the cross-attention of decoder layer tapped->layer (0-based) is kept: a loss
  // on it (tx-train --guided-alignment), or word alignments (cross_attention).
  struct TappedLayer {
    int layer = 0;
    AttentionTap tap;
  };
  Var forward(Graph& g, const Tensor& src_ids, const Tensor& src_lengths, const Tensor& tgt_in_ids,
              TappedLayer* tapped = nullptr) const;
  // The encoder output ("memory") [B, S, d_model].
  Var encode(Graph& g, const Tensor& src_ids, const Tensor& src_lengths) const;
  // Logits [B, T, tgt_vocab] of the target inputs given the memory.
  Var decode(Graph& g, const Var& memory, const Tensor& src_lengths, const Tensor& tgt_in_ids,
             TappedLayer* tapped = nullptr) const;

  // The cross-attention probabilities [B, heads, T, S] of decoder layer `layer` (0-based)
  // for the target inputs, as incremental decoding computes them (DecoderLayer::forward's
  // as_decoded): the word alignments of decode/alignment.h. Inference only.
  Var cross_attention(Graph& g, const Var& memory, const Tensor& src_lengths,
                      const Tensor& tgt_in_ids, int layer) const;

  // Incremental decoding (inference: no gradient, no dropout). start_decoding computes each
  // decoder layer's cross-attention keys and values of the memory once and preallocates
  // `capacity` steps of self-attention cache for `slots` rows (at least the batch; both grow
  // when exceeded, DecoderState).
  DecoderState start_decoding(Graph& g, const Var& memory, const Tensor& src_lengths,
                              int64_t capacity = 64, int64_t slots = 0) const;
  // tgt_ids i32 [B, 1]: the target input at position `step` (== state.length()); returns the
  // logits [B, tgt_vocab] of the next token, equal to decode()'s at that position.
  Var decode_step(Graph& g, DecoderState& state, const Tensor& tgt_ids, int64_t step) const;
  // One step of several states decoded together (continuous batching: each at its own
  // length()): tgt_ids i32 [R, 1] holds the states' rows one after another; returns their
  // logits [R, tgt_vocab], each row equal to its state's decode_step alone (up to the GEMM's
  // rounding for another row count). The linear layers run once over all R rows.
  // With `subset`, the logits [R, K] of its ids only.
  Var decode_step(Graph& g, const std::vector<DecoderState*>& states, const Tensor& tgt_ids,
                  const OutputSubset* subset = nullptr) const;
  // The rows of `ids` (sorted, unique target ids) of the output layer, for decode_step.
  OutputSubset output_subset(Backend& be, std::vector<int32_t> ids) const;

  // Inference only from here on (tx-translate, tx-score): every linear layer of the encoder
  // and decoder and the projection to the vocabulary run on weights prepared once in `form`:
  // int8 (--int8) quantised per output row (Backend::gemm_i8); bf16 / f16 (--precision)
  // rounded copies, each GEMM taking its input rounded the same way; f32 packed for the
  // backend's GEMM (Backend::gemm_packed). Embeddings, LayerNorms and attention are unchanged.
  // Gradients through the prepared layers are an error.
  void prepare_inference(Backend& be, ops::WeightForm form);
  ops::WeightForm weight_form() const { return weight_form_; }

  const io::ModelConfig& config() const { return config_; }
  const Embedding& src_embedding() const { return src_embed_; }
  const Embedding& tgt_embedding() const { return tgt_embed_; }
  const Var& output_weight() const { return output_weight_; }  // [tgt_vocab, d_model]

 private:
  // sqrt(d_model) * table[ids] + PE(start + t), then dropout (paper section 3.4-3.5, 5.4);
  // the config's scale, position layout and offset, and embedding norm.
  Var embed(Graph& g, const Embedding& table, const LayerNorm& norm, const Tensor& ids,
            int64_t start, float word_dropout = 0.0f) const;
  // What follows the positions: the embedding norm (embed_norm) and dropout.
  Var embed_end(Graph& g, const LayerNorm& norm, const Var& x) const;
  float embed_scale() const;
  math::PositionLayout position_layout() const;
  bool final_norm() const { return config_.pre_norm && config_.final_norm; }
  // Decoder layers 0 .. last over x (the embedded target inputs), tapped's layer tapped.
  Var decoder_stack(Graph& g, Var x, const Var& memory, const Tensor& src_lengths, int last,
                    TappedLayer* tapped, bool as_decoded) const;
  // embed() of one decoding step of `states`' rows, each state's at its own position.
  Var embed_step(Graph& g, const Tensor& ids, const std::vector<DecoderState*>& states) const;
  // The final norm (pre-norm only) and the pre-softmax projection (of `subset`'s rows only).
  Var logits(Graph& g, const Var& x, const OutputSubset* subset = nullptr) const;

  io::ModelConfig config_;
  Embedding src_embed_, tgt_embed_;
  std::vector<EncoderLayer> encoder_;
  std::vector<DecoderLayer> decoder_;
  LayerNorm encoder_norm_, decoder_norm_;      // final_norm() only
  LayerNorm src_embed_norm_, tgt_embed_norm_;  // embed_norm only
  Var output_weight_;
  Var output_bias_;                      // output_bias only
  ops::PreparedWeight output_prepared_;  // empty until prepare_inference
  ops::WeightForm weight_form_ = ops::WeightForm::f32;
};

}  // namespace tx::nn
