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

Var MultiHeadAttention::forward(Graph& g, const Var& query, const Var& memory,
                                const Tensor& key_lengths, bool causal) const {
  return attend(g, query, project_kv(g, memory), key_lengths, causal);
}

AttentionKV MultiHeadAttention::project_kv(Graph& g, const Var& memory) const {
  return {ops::split_heads(g, k_proj_.forward(g, memory), heads_),
          ops::split_heads(g, v_proj_.forward(g, memory), heads_)};
}

Var MultiHeadAttention::attend(Graph& g, const Var& query, const AttentionKV& kv,
                               const Tensor& key_lengths, bool causal) const {
  Var q = ops::split_heads(g, q_proj_.forward(g, query), heads_);  // [B, H, Tq, dh]
  Var scores = ops::matmul(g, q, false, kv.keys, true);            // [B, H, Tq, Tk]
  // The 1/sqrt(d_head) scale is fused into the softmax.
  const float scale = 1.0f / std::sqrt(static_cast<float>(d_model_ / heads_));
  Var probs = ops::softmax(g, scores, scale, key_lengths, causal);
  probs = ops::dropout(g, probs, attention_dropout_);
  Var context = ops::matmul(g, probs, false, kv.values, false);  // [B, H, Tq, dh]
  return out_proj_.forward(g, ops::merge_heads(g, context));
}

}  // namespace tx::nn
