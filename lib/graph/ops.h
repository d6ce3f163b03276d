// Differentiable ops: each runs its forward operator now and records its backward on the tape.
//
// Shapes follow backend/backend.h; "[..., C]" is any shape viewed as rows x C. Weights are
// stored [out, in] as in PyTorch and fairseq, so linear computes x @ W^T + b.
#pragma once

#include <cstdint>

#include "graph/graph.h"

namespace tx::ops {

// ---- linear algebra (ops_matmul.cc) ---------------------------------------------------------
// y [..., out] = x [..., in] @ w^T + b; w [out, in], b [out] (b may be null: no bias).
Var linear(Graph& g, const Var& x, const Var& w, const Var& b);
// c = alpha * op(a) @ op(b), batched over all leading dimensions, which a and b share:
// a [..., M, K] (or [..., K, M] when trans_a), b [..., K, N] (or [..., N, K]) -> [..., M, N].
Var matmul(Graph& g, const Var& a, bool trans_a, const Var& b, bool trans_b, float alpha = 1.0f);

// A weight [out, in] quantised per output row for int8 inference: values i8 [out, in] at
// Backend::kInt8WeightLevel, scales f32 [out] (Backend::quantize_rows).
struct Int8Weight {
  Tensor values, scales;
  Backend::PackedWeight packed;  // values prepared for gemm_i8 (Backend::pack_weight)
  bool defined() const { return values.defined(); }
  static Int8Weight quantize(Backend& be, const Tensor& w);
};
// linear() with an int8 weight: x is quantised per row on the fly (8 bits), the products are
// summed exactly in i32 and scaled back to f32 (Backend::gemm_i8). Inference only: an error
// when x or b would need a gradient.
Var linear_int8(Graph& g, const Var& x, const Int8Weight& w, const Var& b);
// The activation an inference linear layer applies with its bias in one pass
// (Backend::add_bias_relu, add_bias_swish).
enum class Fused { none, relu, swish };
// linear() with a weight packed once for the backend's GEMM (Backend::pack_weight): the same
// values up to rounding, then `act`. Inference only: an error when x or b would need a
// gradient.
Var linear_packed(Graph& g, const Var& x, const Backend::PackedWeight& w, const Var& b,
                  Fused act = Fused::none);
// How inference prepares its weights once: f32 packed for the backend's GEMM (the default),
// int8 (--int8), or a bf16 / f16 copy (--precision) whose GEMMs take x rounded to it per call
// and sum in f32.
enum class WeightForm { f32, int8, bf16, f16 };
// A weight prepared once for inference: quantised to int8, packed, or rounded to bf16 / f16
// (one of them), or empty.
struct PreparedWeight {
  Int8Weight int8;
  Backend::PackedWeight packed;  // of the f32 weight, or of low
  Tensor low;                    // bf16 or f16 [out, in]
  static PreparedWeight prepare(Backend& be, const Tensor& w, WeightForm form);
};
// linear(g, x, w, b) through w's prepared form when it has one (linear_int8, linear_packed, or
// the rounded copy).
Var linear(Graph& g, const Var& x, const Var& w, const Var& b, const PreparedWeight& prepared);
// act(linear(g, x, w, b, prepared)) for inference (an error when anything would need a
// gradient): bias and activation in one pass where the weight is packed or rounded, the
// activation in place otherwise.
Var linear_fused(Graph& g, const Var& x, const Var& w, const Var& b, const PreparedWeight& prepared,
                 Fused act);

// ---- elementwise (ops_elementwise.cc) -------------------------------------------------------
Var add(Graph& g, const Var& a, const Var& b);   // a + b, same shapes (residuals)
Var scale(Graph& g, const Var& x, float alpha);  // alpha * x
Var relu(Graph& g, const Var& x);
Var swish(Graph& g, const Var& x);  // x * sigmoid(x); its backward reads x
// Inverted dropout with probability p; the identity (x itself) when the graph is not training
// or p == 0. The mask comes from the graph's Rng and is recomputed in the backward.
Var dropout(Graph& g, const Var& x, float p);
// Word dropout: each row of x [..., D] (a token's embedding) zeroed with probability p, the
// others scaled by 1 / (1 - p); the identity when the graph is not training or p == 0. The
// rows' draws come from the graph's Rng.
Var drop_rows(Graph& g, const Var& x, float p);
// x [B, T, D] + the sinusoidal encoding of positions start, start+1, ... in `layout`.
Var add_positions(Graph& g, const Var& x, int64_t start = 0,
                  math::PositionLayout layout = math::PositionLayout::interleaved);
// The same elements seen with another shape (same element count).
Var reshape(Graph& g, const Var& x, const Shape& shape);
// dropout(relu(x), p) in one op whose backward reads only its output: a kept element is
// positive exactly where relu passed it, so dx = dy / (1 - p) where y > 0. relu(x) when not
// training or p == 0.
Var relu_dropout(Graph& g, const Var& x, float p);
// Frees x's value while its gradient can still flow: for an activation the forward will not
// read again and no backward reads (an op whose backward reads a value marks it, and then
// release leaves it alone, as it leaves parameters). x keeps its shape. Without gradient
// recording it does nothing: a value is freed with its last handle then.
void release(Graph& g, const Var& x);

// ---- attention (ops_attention.cc) -----------------------------------------------------------
// softmax(scale * x) over the last dim of x [B, ..., Tq, Tk]; key_lengths (i32 [B], optional)
// masks right padding; causal hides future keys. See Backend::softmax.
Var softmax(Graph& g, const Var& x, float scale, const Tensor& key_lengths, bool causal);
// [B, T, heads * d_head] <-> [B, heads, T, d_head].
Var split_heads(Graph& g, const Var& x, int heads);
Var merge_heads(Graph& g, const Var& x);

// ---- normalisation (ops_layer_norm.cc) ------------------------------------------------------
// (x - mean) / sqrt(var + eps) * gamma + beta over the last dim of x [..., D].
Var layer_norm(Graph& g, const Var& x, const Var& gamma, const Var& beta, float eps);
// layer_norm(x + sublayer) for inference, one operator (Backend::residual_layer_norm): an error
// when anything would need a gradient.
Var residual_layer_norm(Graph& g, const Var& x, const Var& sublayer, const Var& gamma,
                        const Var& beta, float eps);

// ---- embedding (ops_embedding.cc) -----------------------------------------------------------
// y [..., D] = scale * table[ids] for table [V, D] and ids i32 of any shape [...].
Var embedding(Graph& g, const Var& table, const Tensor& ids, float scale = 1.0f);

// ---- losses and reductions (ops_loss.cc) ----------------------------------------------------
// Label-smoothed cross-entropy per row of logits [..., V] for targets i32 (one per row):
// returns losses [rows]; rows whose target is ignore_index give 0. When nll is non-null it
// receives -log p(target) per row (not differentiable: for reporting). With release_logits
// the backward writes the logits' gradient over their value, which nothing may read after
// (no zeroed [rows, V] gradient beside the logits: a step's largest tensor, once instead of
// twice); the caller must read the logits no more.
Var cross_entropy(Graph& g, const Var& logits, const Tensor& targets, float smoothing,
                  int32_t ignore_index, Tensor* nll = nullptr, bool release_logits = false);
// R-Drop's consistency loss per pair of rows of logits [..., V] that hold two passes of one
// batch, the first pass's rows then the second's: losses [rows / 2], pair r = 1/2 (KL(p_r ||
// p_{R+r}) + KL(p_{R+r} || p_r)); pairs whose target (targets i32, one per pair) is
// ignore_index give 0 (Backend::symmetric_kl).
Var symmetric_kl(Graph& g, const Var& logits, const Tensor& targets, int32_t ignore_index);
// The sum of all elements, as a [1] tensor (the scalar loss).
Var sum(Graph& g, const Var& x);

}  // namespace tx::ops
