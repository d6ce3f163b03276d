#include "nn/decoder_layer.h"

#include "nn/residual.h"

namespace tx::nn {

DecoderLayer::DecoderLayer(ParamScope scope, const DecoderLayerConfig& config)
    : config_(config),
      self_attn_(scope.child("self_attn"), config.d_model, config.heads, config.attention_dropout),
      self_attn_norm_(scope.child("self_attn_norm"), config.d_model, config.norm_eps),
      cross_attn_(scope.child("cross_attn"), config.d_model, config.heads,
                  config.attention_dropout),
      cross_attn_norm_(scope.child("cross_attn_norm"), config.d_model, config.norm_eps),
      ffn_(scope.child("ffn"), config.d_model, config.d_ff, config.relu_dropout),
      ffn_norm_(scope.child("ffn_norm"), config.d_model, config.norm_eps) {}

Var DecoderLayer::forward(Graph& g, const Var& x, const Var& memory,
                          const Tensor& memory_lengths) const {
  auto self_kv = [&](const Var& h) { return self_attn_.project_kv(g, h); };
  return run(g, x, self_kv, Tensor(), /*causal=*/true, project_memory(g, memory), memory_lengths,
             1);
}

AttentionKV DecoderLayer::project_memory(Graph& g, const Var& memory) const {
  return cross_attn_.project_kv(g, memory);
}

Var DecoderLayer::step(Graph& g, const Var& x, DecoderState& state, int layer) const {
  TX_CHECK(!g.grad_enabled(), "DecoderLayer::step is inference: turn gradients off (NoGradScope)");
  TX_CHECK(x->value.ndim() == 3 && x->value.dim(0) == state.batch() && x->value.dim(1) == 1,
           "DecoderLayer::step: x ", x->value.str(), " must be [", state.batch(), ", 1, ",
           config_.d_model, "], one step of the state's batch");
  auto self_kv = [&](const Var& h) { return state.append(layer, self_attn_.project_kv(g, h)); };
  // Causal masking is not needed: the one query is the newest step, and the self lengths
  // hide the cache slots not written yet.
  return run(g, x, self_kv, state.self_lengths(), /*causal=*/false, state.memory(layer),
             state.memory_lengths(), state.group());
}

Var DecoderLayer::run(Graph& g, const Var& x, const std::function<AttentionKV(const Var&)>& self_kv,
                      const Tensor& self_lengths, bool causal, const AttentionKV& memory,
                      const Tensor& memory_lengths, int64_t group) const {
  const float p = config_.dropout;
  // Cross-attention of `group` consecutive rows of one time step to one memory entry: those
  // rows are that entry's queries, [entries, group, d_model] (DecoderState's beams).
  auto cross = [&](const Var& h) {
    if (group == 1) return cross_attn_.attend(g, h, memory, memory_lengths, false);
    const Shape& shape = h->value.shape();
    Var q = ops::reshape(g, h, {shape[0] / group, group * shape[1], shape[2]});
    return ops::reshape(g, cross_attn_.attend(g, q, memory, memory_lengths, false), shape);
  };
  if (config_.pre_norm) {
    // x = x + Dropout(Sublayer(LN(x))) for each sublayer.
    Var h = self_attn_norm_.forward(g, x);
    Var y = residual(g, x, self_attn_.attend(g, h, self_kv(h), self_lengths, causal), p);
    h = cross_attn_norm_.forward(g, y);
    y = residual(g, y, cross(h), p);
    return residual(g, y, ffn_.forward(g, ffn_norm_.forward(g, y)), p);
  }
  // Post-norm, as in the paper: x = LN(x + Dropout(Sublayer(x))).
  Var attn = self_attn_.attend(g, x, self_kv(x), self_lengths, causal);
  Var y = self_attn_norm_.forward(g, residual(g, x, attn, p));
  attn = cross(y);
  y = cross_attn_norm_.forward(g, residual(g, y, attn, p));
  return ffn_norm_.forward(g, residual(g, y, ffn_.forward(g, y), p));
}

}  // namespace tx::nn
