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

void MultiHeadAttention::prepare_inference(Backend& be, ops::WeightForm form) {
  for (Linear* proj : {&q_proj_, &k_proj_, &v_proj_, &out_proj_}) proj->prepare_inference(be, form);
  qkv_proj_ = Linear::concatenated(be, {&q_proj_, &k_proj_, &v_proj_}, form);
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

Var MultiHeadAttention::project_queries(Graph& g, const Var& query) const {
  return project_heads(g, q_proj_, query, heads_);
}

AttentionKV MultiHeadAttention::project_kv(Graph& g, const Var& memory) const {
  return {project_heads(g, k_proj_, memory, heads_), project_heads(g, v_proj_, memory, heads_)};
}

// softmax(q k^T / sqrt(d_head)) v for q [B, H, Tq, dh] and kv [B, H, Tk, dh]: [B, H, Tq, dh].
Var MultiHeadAttention::context(Graph& g, const Var& q, const AttentionKV& kv,
                                const Tensor& key_lengths, bool causal, AttentionTap* tap) const {
  Var scores = ops::matmul(g, q, false, kv.keys, true);  // [B, H, Tq, Tk]
  // The 1/sqrt(d_head) scale is fused into the softmax.
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_model_ / heads_));
  Var probs = ops::softmax(g, scores, scale, key_lengths, causal);
  if (tap)
    *tap = {probs, scores};
  else
    ops::release(g, scores);
  probs = ops::dropout(g, probs, attention_dropout_);
  return ops::matmul(g, probs, false, kv.values, false);
}

Var MultiHeadAttention::attend(Graph& g, const Var& query, const AttentionKV& kv,
                               const Tensor& key_lengths, bool causal, AttentionTap* tap) const {
  if (!g.grad_enabled() && !g.training() && !causal && !tap)
    return attend_unpadded(g, query, kv, key_lengths);
  Var q = project_heads(g, q_proj_, query, heads_);  // [B, H, Tq, dh]
  Var ctx = context(g, q, kv, key_lengths, causal, tap);
  Var merged = ops::merge_heads(g, ctx);
  ops::release(g, ctx);
  return out_proj_.forward(g, merged);
}

// Each query row attends to its own sentence's real keys in one attend_row loop
// (Backend::attend_memory with the sentence's Tq rows as its group): the sums never reach the
// padding, so a sentence's encoding does not depend on the batch's longest source
// (docs/determinism.md). Inference only; the queries and output need no head split or merge.
Var MultiHeadAttention::attend_unpadded(Graph& g, const Var& query, const AttentionKV& kv,
                                        const Tensor& key_lengths) const {
  const Shape& shape = query->value.shape();
  TX_CHECK(shape.ndim() == 3 && shape[2] == d_model_, "attend: query ", shape.str(),
           " must be [B, T, ", d_model_, "]");
  const int64_t batch = shape[0], rows = shape[0] * shape[1], d_head = d_model_ / heads_;
  Backend& be = g.backend();
  Tensor lengths = key_lengths;
  if (!lengths.defined())
    lengths = be.upload(std::vector<int32_t>(static_cast<size_t>(batch),
                                             static_cast<int32_t>(kv.keys->value.dim(2))),
                        {batch});
  const Var q = q_proj_.forward(g, query);  // [B, Tq, heads * d_head]
  const Tensor merged = g.alloc(shape);
  be.attend_memory(q->value.view({rows, heads_, d_head}), kv.keys->value, kv.values->value, lengths,
                   1.0f / std::sqrt(static_cast<float>(d_head)),
                   merged.view({rows, heads_, d_head}));
  ops::release(g, q);
  return out_proj_.forward(g, make_var(merged));
}

StepProjection MultiHeadAttention::project_step(Graph& g, const Var& x) const {
  if (!qkv_proj_.weight()) {
    const AttentionKV kv = project_kv(g, x);
    return {project_heads(g, q_proj_, x, heads_), kv};
  }
  const Shape& shape = x->value.shape();
  TX_CHECK(shape.ndim() == 3 && shape[1] == 1 && shape[2] == d_model_, "project_step: x ",
           shape.str(), " must be [rows, 1, ", d_model_, "]");
  const int64_t rows = shape[0], d_head = d_model_ / heads_;
  Var qkv = qkv_proj_.forward(g, x);  // [R, 1, 3 * d_model]: row r is q_r | k_r | v_r
  // With one query step a head split is no copy ([R, 1, heads * d_head] and
  // [R, heads, 1, d_head] are the same layout), so only the three parts need parting: seen as
  // [1, R, 3 * d_model], qkv split into 3 "heads" of d_model is [3, R, d_model], the three parts
  // one after another (no host-built index to upload, as a gather needed).
  Backend& be = g.backend();
  const Tensor parts = g.alloc({3 * rows, heads_, 1, d_head});
  be.split_heads(qkv->value.view({1, rows, 3 * d_model_}), 3, parts.view({1, 3, rows, d_model_}));
  auto third = [&](int which) { return make_var(parts.slice(which * rows, (which + 1) * rows)); };
  StepProjection p{third(0), {third(1), third(2)}};
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
  const int64_t rows = shape[0], d_head = d_model_ / heads_;
  // One query step: [R, 1, heads * d_head] and [R, heads, 1, d_head] are the same layout, so
  // the queries and the output need no head split or merge, and each span is one operator.
  const Var q = queries ? queries : q_proj_.forward(g, query);
  TX_CHECK(q->value.numel() == rows * d_model_, "attend_spans: queries ", q->value.str(),
           " must be [", rows, ", ", heads_, ", 1, ", d_head, "]");
  const Tensor q_heads = q->value.view({rows, heads_, d_head});
  const Tensor merged = g.alloc(shape);
  const Tensor out_heads = merged.view({rows, heads_, d_head});
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_head));
  Backend& be = g.backend();
  int64_t next = 0;
  for (const AttentionSpan& span : spans) {
    TX_CHECK(span.first == next && span.rows % span.group == 0 && span.first + span.rows <= rows,
             "attend_spans: span of rows ", span.first, " + ", span.rows, " (groups of ",
             span.group, ") does not continue the spans before it within ", rows, " rows");
    next += span.rows;
    const Tensor q_span = q_heads.slice(span.first, next);
    const Tensor out_span = out_heads.slice(span.first, next);
    if (span.cache.rows.defined()) {
      TX_CHECK(span.group == 1, "attend_spans: a cached span has one row per entry");
      be.attend_cached(q_span, span.cache.keys, span.cache.values, span.cache.rows,
                       span.cache.length, scale, out_span);
      continue;
    }
    TX_CHECK(span.kv.keys->value.dim(0) * span.group == span.rows, "attend_spans: ", span.rows,
             " rows in groups of ", span.group, " do not match the ", span.kv.keys->value.dim(0),
             " memory entries");
    be.attend_memory(q_span, span.kv.keys->value, span.kv.values->value, span.key_lengths, scale,
                     out_span);
  }
  TX_CHECK(next == rows, "attend_spans: the spans cover ", next, " of ", rows, " rows");
  return out_proj_.forward(g, make_var(merged));
}

}  // namespace tx::nn
