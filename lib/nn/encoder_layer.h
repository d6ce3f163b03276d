// EncoderLayer: self-attention and feed-forward sublayers, each with dropout, residual and
// LayerNorm (paper section 3.1).
#pragma once

#include "graph/ops.h"
#include "nn/attention.h"
#include "nn/feed_forward.h"
#include "nn/layer_norm.h"

namespace tx::nn {

struct EncoderLayerConfig {
  int64_t d_model = 512;
  int heads = 8;
  int64_t d_ff = 2048;
  float dropout = 0.1f;            // on each sublayer's output, before the residual add
  float attention_dropout = 0.0f;  // on the attention probabilities
  float relu_dropout = 0.0f;       // inside the feed-forward network
  // false: post-norm as in the paper, x = LN(x + Dropout(Sublayer(x))).
  // true: pre-norm, x = x + Dropout(Sublayer(LN(x))); the encoder then needs a final LN.
  bool pre_norm = false;
  float norm_eps = 1e-5f;
  io::Activation activation = io::Activation::relu;  // the feed-forward's
  bool marian_prenorm_cache = false;                 // decoder steps only: io::ModelConfig's
};

class EncoderLayer {
 public:
  EncoderLayer() = default;
  // Parameters under "<scope>.self_attn", "<scope>.self_attn_norm", "<scope>.ffn",
  // "<scope>.ffn_norm".
  EncoderLayer(ParamScope scope, const EncoderLayerConfig& config);

  // x [B, T, d_model]; key_lengths i32 [B] marks right padding (optional).
  Var forward(Graph& g, const Var& x, const Tensor& key_lengths) const;
  // Linear::prepare_inference of every linear layer.
  void prepare_inference(Backend& be, ops::WeightForm form) {
    self_attn_.prepare_inference(be, form);
    ffn_.prepare_inference(be, form);
  }

  const EncoderLayerConfig& config() const { return config_; }

 private:
  EncoderLayerConfig config_;
  MultiHeadAttention self_attn_;
  LayerNorm self_attn_norm_;
  FeedForward ffn_;
  LayerNorm ffn_norm_;
};

}  // namespace tx::nn
