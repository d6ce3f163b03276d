#include "nn/encoder_layer.h"

#include "nn/residual.h"

namespace tx::nn {

EncoderLayer::EncoderLayer(ParamScope scope, const EncoderLayerConfig& config)
    : config_(config),
      self_attn_(scope.child("self_attn"), config.d_model, config.heads, config.attention_dropout),
      self_attn_norm_(scope.child("self_attn_norm"), config.d_model, config.norm_eps),
      ffn_(scope.child("ffn"), config.d_model, config.d_ff, config.relu_dropout, config.activation),
      ffn_norm_(scope.child("ffn_norm"), config.d_model, config.norm_eps) {}

Var EncoderLayer::forward(Graph& g, const Var& x, const Tensor& key_lengths) const {
  const float p = config_.dropout;
  if (config_.pre_norm) {
    Var h = self_attn_norm_.forward(g, x);
    Var y = residual(g, x, self_attn_.forward(g, h, h, key_lengths, false), p);
    return residual(g, y, ffn_.forward(g, ffn_norm_.forward(g, y)), p);
  }
  Var attn = self_attn_.forward(g, x, x, key_lengths, /*causal=*/false);
  Var y = residual_norm(g, self_attn_norm_, x, attn, p);
  return residual_norm(g, ffn_norm_, y, ffn_.forward(g, y), p);
}

}  // namespace tx::nn
