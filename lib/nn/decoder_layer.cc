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
      ffn_(scope.child("ffn"), config.d_model, config.d_ff, config.relu_dropout, config.activation),
      ffn_norm_(scope.child("ffn_norm"), config.d_model, config.norm_eps) {}

Var DecoderLayer::forward(Graph& g, const Var& x, const Var& memory, const Tensor& memory_lengths,
                          AttentionTap* cross, bool as_decoded) const {
  const AttentionKV memory_kv = project_memory(g, memory);
  const bool marian = as_decoded && config_.marian_prenorm_cache;
  TX_CHECK(!marian || !g.grad_enabled(), "DecoderLayer::forward as decoded is inference only");
  return run(
      g, x,
      [&](const Var& h) {
        Var out = self_attn_.attend(g, h, self_attn_.project_kv(g, h), Tensor(), /*causal=*/true);
        if (!marian) return out;
        // step(): the first position attends to its normalised key and value (out's row 0);
        // every later one to keys and values of x, the first position's included.
        Var raw = self_attn_.attend(g, h, self_attn_.project_kv(g, x), Tensor(), true);
        const Tensor first = out->value, rest = raw->value;
        const int64_t B = rest.dim(0), T = rest.dim(1), d = rest.dim(2);
        const Tensor rows = rest.view({B * T, d}), firsts = first.view({B * T, d});
        for (int64_t b = 0; b < B; ++b)
          g.backend().copy(firsts.slice(b * T, b * T + 1), rows.slice(b * T, b * T + 1));
        return raw;
      },
      [&](const Var& h) {
        return cross_attn_.attend(g, h, memory_kv, memory_lengths, false, cross);
      });
}

AttentionKV DecoderLayer::project_memory(Graph& g, const Var& memory) const {
  return cross_attn_.project_kv(g, memory);
}

Var DecoderLayer::step(Graph& g, const Var& x, const std::vector<DecoderState*>& states,
                       int layer) const {
  TX_CHECK(!g.grad_enabled(), "DecoderLayer::step is inference: turn gradients off (NoGradScope)");
  int64_t rows = 0;
  for (const DecoderState* state : states) rows += state->batch();
  TX_CHECK(x->value.ndim() == 3 && x->value.dim(0) == rows && x->value.dim(1) == 1,
           "DecoderLayer::step: x ", x->value.str(), " must be [", rows, ", 1, ", config_.d_model,
           "], one step of the states' rows");
  // Causal masking is not needed: each query is its row's newest step, and attend_cached reads
  // only the steps written so far.
  auto rows_of = [](const AttentionKV& kv, int64_t first, int64_t end) {
    return AttentionKV{make_var(kv.keys->value.slice(first, end)),
                       make_var(kv.values->value.slice(first, end))};
  };
  bool first_step = false;  // some state decodes its first step
  for (const DecoderState* state : states) first_step = first_step || state->length() == 0;
  auto self_attention = [&](const Var& h) {
    // Marian's pre-norm decoding (io::ModelConfig::marian_prenorm_cache): a state's first step
    // attends to its normalised key and value, every later step to keys and values of the
    // layer's raw input x, the first step's recomputed so. Once no state is at its first step,
    // only h's queries and x's keys and values are projected.
    const bool marian = config_.marian_prenorm_cache;
    Var queries;
    AttentionKV normed, raw;
    if (marian && !first_step) {
      queries = self_attn_.project_queries(g, h);
    } else {
      const StepProjection step = self_attn_.project_step(g, h);  // [rows, heads, 1, d_head]
      queries = step.queries;
      normed = step.kv;
    }
    if (marian) raw = self_attn_.project_kv(g, x);
    std::vector<AttentionSpan> spans;
    int64_t first = 0;
    for (DecoderState* state : states) {
      const int64_t end = first + state->batch();
      AttentionSpan span{first, state->batch(), 1, {}, Tensor(), {}};
      const bool use_normed = !marian || state->length() == 0;
      span.cache = state->append(layer, rows_of(use_normed ? normed : raw, first, end));
      spans.push_back(span);
      first = end;
    }
    Var out = self_attn_.attend_spans(g, h, spans, queries);
    if (marian && first_step) {
      first = 0;
      for (DecoderState* state : states) {
        const int64_t end = first + state->batch();
        if (state->length() == 0) state->append(layer, rows_of(raw, first, end));
        first = end;
      }
    }
    return out;
  };
  auto cross_attention = [&](const Var& h) {
    std::vector<AttentionSpan> spans;
    int64_t first = 0;
    for (const DecoderState* state : states) {
      spans.push_back({first,
                       state->batch(),
                       state->group(),
                       state->memory(layer),
                       state->memory_lengths(),
                       {}});
      first += state->batch();
    }
    return cross_attn_.attend_spans(g, h, spans);
  };
  return run(g, x, self_attention, cross_attention);
}

Var DecoderLayer::run(Graph& g, const Var& x, const Sublayer& self_attention,
                      const Sublayer& cross_attention) const {
  const float p = config_.dropout;
  if (config_.pre_norm) {
    // x = x + Dropout(Sublayer(LN(x))) for each sublayer.
    Var y = residual(g, x, self_attention(self_attn_norm_.forward(g, x)), p);
    y = residual(g, y, cross_attention(cross_attn_norm_.forward(g, y)), p);
    return residual(g, y, ffn_.forward(g, ffn_norm_.forward(g, y)), p);
  }
  // Post-norm, as in the paper: x = LN(x + Dropout(Sublayer(x))).
  Var y = residual_norm(g, self_attn_norm_, x, self_attention(x), p);
  y = residual_norm(g, cross_attn_norm_, y, cross_attention(y), p);
  return residual_norm(g, ffn_norm_, y, ffn_.forward(g, y), p);
}

}  // namespace tx::nn
