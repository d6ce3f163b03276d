#include "nn/attention.h"

#include <cmath>

namespace tx::nn {

MultiHeadAttention::MultiHeadAttention(ParamScope scope, int64_t d_model, int heads,
                                       float attention_dropout)
    : d_model_(d_model), heads_(heads), attention_dropout_(attention_dropout) {
  TX_CHECK(heads > 0 && d_model % heads == 0, "MultiHeadAttention: d_model ", d_model,
           " must be divisible by heads=", heads);
  q_proj_ = Linear(scope.child("q_proj"), d_model, d_model);
  k_proj_ = Linear(scope.child("k_proj"), d_model, d_model);
  v_proj_ = Linear(scope.child("v_proj"), d_model, d_model);
  out_proj_ = Linear(scope.child("out_proj"), d_model, d_model);
}

void MultiHeadAttention::prepare_inference(Backend& be, bool int8) {
  for (Linear* proj : {&q_proj_, &k_proj_, &v_proj_, &out_proj_}) proj->prepare_inference(be, int8);
  qkv_proj_ = Linear::concatenated(be, {&q_proj_, &k_proj_, &v_proj_}, int8);
}

Var MultiHeadAttention::forward(Graph& g, const Var& query, const Var& memory,
                                const Tensor& key_lengths, bool causal) const {
  return attend(g, query, project_kv(g, memory), key_lengths, causal);
}

namespace {
// split_heads(linear(x)); the projection's output, read by no backward, is freed at once.
Var project_heads(Graph& g, const Linear& proj, const Var& x, int heads) {
  Var flat = proj.forward(g, x);
  Var split = ops::split_heads(g, flat, heads);
  ops::release(g, flat);
  return split;
}
}  // namespace

AttentionKV MultiHeadAttention::project_kv(Graph& g, const Var& memory) const {
  return {project_heads(g, k_proj_, memory, heads_), project_heads(g, v_proj_, memory, heads_)};
}

// softmax(q k^T / sqrt(d_head)) v for q [B, H, Tq, dh] and kv [B, H, Tk, dh]: [B, H, Tq, dh],
// written into `into` when given (inference: no tape).
Var MultiHeadAttention::context(Graph& g, const Var& q, const AttentionKV& kv,
                                const Tensor& key_lengths, bool causal, const Tensor& into) const {
  Var scores = ops::matmul(g, q, false, kv.keys, true);  // [B, H, Tq, Tk]
  // The 1/sqrt(d_head) scale is fused into the softmax.
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_model_ / heads_));
  Var probs = ops::softmax(g, scores, scale, key_lengths, causal);
  ops::release(g, scores);
  probs = ops::dropout(g, probs, attention_dropout_);
  if (!into.defined()) return ops::matmul(g, probs, false, kv.values, false);
  const Shape& p = probs->value.shape();  // [B, H, Tq, Tk]
  const int64_t batch = p[0] * p[1], tq = p[2], tk = p[3], dh = kv.values->value.dim(3);
  g.backend().gemm(probs->value.view({batch, tq, tk}), false,
                   kv.values->value.view({batch, tk, dh}), false, into.view({batch, tq, dh}));
  return make_var(into);
}

Var MultiHeadAttention::attend(Graph& g, const Var& query, const AttentionKV& kv,
                               const Tensor& key_lengths, bool causal) const {
  Var q = project_heads(g, q_proj_, query, heads_);  // [B, H, Tq, dh]
  Var ctx = context(g, q, kv, key_lengths, causal);
  Var merged = ops::merge_heads(g, ctx);
  ops::release(g, ctx);
  return out_proj_.forward(g, merged);
}

StepProjection MultiHeadAttention::project_step(Graph& g, const Var& x) const {
  if (!qkv_proj_.weight()) {
    const AttentionKV kv = project_kv(g, x);
    return {project_heads(g, q_proj_, x, heads_), kv};
  }
  const Shape& shape = x->value.shape();
  TX_CHECK(shape.ndim() == 3 && shape[1] == 1 && shape[2] == d_model_, "project_step: x ",
           shape.str(), " must be [rows, 1, ", d_model_, "]");
  const int64_t rows = shape[0], d_head = d_model_ / heads_, pieces = 3 * heads_;
  Var qkv = qkv_proj_.forward(g, x);  // [R, 1, 3 * d_model]: row r is q_r | k_r | v_r
  // Seen as [R * 3 * heads, d_head], row r * 3 * heads + h is head h of q_r; k_r's and v_r's
  // heads follow heads and 2 * heads rows later. With one query step a head split is such a
  // row selection: [R, 1, heads * d_head] and [R, heads, 1, d_head] are the same layout.
  std::vector<int32_t> pick(static_cast<size_t>(rows * heads_));
  for (int64_t r = 0; r < rows; ++r)
    for (int h = 0; h < heads_; ++h) pick[r * heads_ + h] = static_cast<int32_t>(r * pieces + h);
  Backend& be = g.backend();
  const Tensor index = be.upload(pick, {rows * heads_});
  const Tensor all = qkv->value.view({rows * pieces, d_head});
  auto part = [&](int which) {
    Tensor out = g.alloc({rows, heads_, 1, d_head});
    be.gather_rows(all.slice(which * heads_, rows * pieces), index,
                   out.view({rows * heads_, d_head}));
    return make_var(out);
  };
  StepProjection p{part(0), {part(1), part(2)}};
  ops::release(g, qkv);
  return p;
}

Var MultiHeadAttention::attend_spans(Graph& g, const Var& query,
                                     const std::vector<AttentionSpan>& spans,
                                     const Var& queries) const {
  TX_CHECK(!g.grad_enabled(), "MultiHeadAttention::attend_spans is inference: no gradients");
  const Shape& shape = query->value.shape();
  TX_CHECK(shape.ndim() == 3 && shape[1] == 1 && shape[2] == d_model_, "attend_spans: query ",
           shape.str(), " must be [rows, 1, ", d_model_, "]");
  Tensor merged = g.alloc(shape);
  // With one row per entry everywhere (greedy search; every self-attention) the heads are
  // split and merged once for all rows, and each span works on slices: two operators per span
  // and attention fewer, of the ~36 a cohort adds to a decoding step.
  bool single_rows = true;
  for (const AttentionSpan& span : spans) single_rows &= span.group == 1;
  TX_CHECK(!queries || single_rows,
           "attend_spans: projected queries need one row per key/value entry in every span");
  Var flat = queries ? Var() : q_proj_.forward(g, query);  // [R, 1, d_model]
  Var q_all = queries;
  Tensor ctx_all;
  if (single_rows) {
    if (!q_all) q_all = ops::split_heads(g, flat, heads_);  // [R, H, 1, dh]
    ctx_all = g.alloc(q_all->value.shape());
  }
  int64_t next = 0;
  for (const AttentionSpan& span : spans) {
    TX_CHECK(
        span.first == next && span.rows % span.group == 0 && span.first + span.rows <= shape[0],
        "attend_spans: span of rows ", span.first, " + ", span.rows, " (groups of ", span.group,
        ") does not continue the spans before it within ", shape[0], " rows");
    next += span.rows;
    if (span.cache.rows.defined()) {
      TX_CHECK(single_rows, "attend_spans: a cached span needs one row per entry");
      const int64_t d_head = d_model_ / heads_;
      const Shape rows{span.rows, heads_, d_head};
      g.backend().attend_cached(q_all->value.slice(span.first, next).view(rows), span.cache.keys,
                                span.cache.values, span.cache.rows, span.cache.length,
                                1.0f / std::sqrt(static_cast<float>(d_head)),
                                ctx_all.slice(span.first, next).view(rows));
      continue;
    }
    if (single_rows) {
      context(g, make_var(q_all->value.slice(span.first, next)), span.kv, span.key_lengths, false,
              ctx_all.slice(span.first, next));
      continue;
    }
    // A span's groups of rows are its entries' queries: [entries, group, d_model].
    const Shape rows{span.rows / span.group, span.group, d_model_};
    Var q = ops::split_heads(g, make_var(flat->value.slice(span.first, next).view(rows)), heads_);
    Var ctx = context(g, q, span.kv, span.key_lengths, false);
    g.backend().merge_heads(ctx->value, merged.slice(span.first, next).view(rows));
  }
  TX_CHECK(next == shape[0], "attend_spans: the spans cover ", next, " of ", shape[0], " rows");
  if (single_rows) g.backend().merge_heads(ctx_all, merged);
  return out_proj_.forward(g, make_var(merged));
}

}  // namespace tx::nn
