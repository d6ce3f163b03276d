// DecoderLayer: masked self-attention, cross-attention over the encoder output and
// feed-forward sublayers, each with dropout, residual and LayerNorm (paper section 3.1).
#pragma once

#include <functional>
#include <vector>

#include "graph/ops.h"
#include "nn/attention.h"
#include "nn/decoder_state.h"
#include "nn/encoder_layer.h"
#include "nn/feed_forward.h"
#include "nn/layer_norm.h"

namespace tx::nn {

// The decoder layer has the encoder layer's sizes, dropouts and norm placement.
using DecoderLayerConfig = EncoderLayerConfig;

class DecoderLayer {
 public:
  DecoderLayer() = default;
  // Parameters under "<scope>.self_attn", "<scope>.self_attn_norm", "<scope>.cross_attn",
  // "<scope>.cross_attn_norm", "<scope>.ffn", "<scope>.ffn_norm".
  DecoderLayer(ParamScope scope, const DecoderLayerConfig& config);

  // Training and scoring: x [B, T, d_model] (target positions, each seeing itself and those
  // before it) attends to memory [B, S, d_model], the encoder output, whose positions >=
  // memory_lengths[b] (i32 [B]) are padding.
  // cross, when given, keeps the cross-attention's probabilities and scores [B, heads, T, S].
  // as_decoded (inference only) makes a pre-norm layer attend as step() does under
  // marian_prenorm_cache (the self-attention of positions after the first over keys and values
  // of the un-normalised input), so that the probabilities are those of decoding.
  Var forward(Graph& g, const Var& x, const Var& memory, const Tensor& memory_lengths,
              AttentionTap* cross = nullptr, bool as_decoded = false) const;
  // Linear::prepare_inference of every linear layer.
  void prepare_inference(Backend& be, ops::WeightForm form) {
    self_attn_.prepare_inference(be, form);
    cross_attn_.prepare_inference(be, form);
    ffn_.prepare_inference(be, form);
  }

  // The cross-attention keys and values of the encoder output, computed once per sentence.
  AttentionKV project_memory(Graph& g, const Var& memory) const;

  // Incremental decoding, no gradient: x [B, 1, d_model] holds one step of each state's rows,
  // the states' rows one after another (each state at its own length()). A row's
  // self-attention keys and values are appended to layer `layer` of its state, whose cache
  // and memory it then attends to; the linear layers run once over all rows. The caller
  // brackets the layers with begin_step()/end_step() of every state.
  Var step(Graph& g, const Var& x, const std::vector<DecoderState*>& states, int layer) const;

  const DecoderLayerConfig& config() const { return config_; }

 private:
  // The three sublayers, given the two attentions of a (normalised) layer input: over the
  // whole target and memory in training, over the caches and the states' memories when
  // decoding.
  using Sublayer = std::function<Var(const Var&)>;
  Var run(Graph& g, const Var& x, const Sublayer& self_attention,
          const Sublayer& cross_attention) const;

  DecoderLayerConfig config_;
  MultiHeadAttention self_attn_;
  LayerNorm self_attn_norm_;
  MultiHeadAttention cross_attn_;
  LayerNorm cross_attn_norm_;
  FeedForward ffn_;
  LayerNorm ffn_norm_;
};

}  // namespace tx::nn
