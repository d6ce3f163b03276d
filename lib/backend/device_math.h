// Device math: the formulas both backends need, written once as inline functions that compile
// for the host (backends/cpu) and for the GPU (backends/cuda, TX_HOST_DEVICE = __host__
// __device__ under nvcc). The CPU conformance tests therefore exercise the arithmetic the GPU
// runs: Adam's step, LayerNorm's normalisation and gradient, the label-smoothed loss, R-Drop's
// symmetric KL, the dropout mask (bit-identical on every device: a pure function of (seed,
// index)), the sinusoidal position tables, swish, the attention mask rule and the dtype
// conversions.
//
// Only plain arithmetic lives here: no loops over rows (each backend parallelises its own way),
// no allocation, no virtual calls.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "core/half.h"  // TX_HOST_DEVICE, f16/bf16/i32 conversions
#include "core/rng.h"   // dropout_uniform

namespace tx::math {

// ---- Adam ---------------------------------------------------------------------------------------

// Per-call constants of the fused Adam step (computed once on the host from AdamParams).
struct AdamCoefficients {
  float beta1, beta2, lr, eps;
  float correct1, correct2;  // 1 / (1 - beta^t), the bias corrections
  float grad_scale;          // gradients are multiplied by this first
  float decay;               // lr * weight_decay (decoupled, AdamW)
};

inline AdamCoefficients adam_coefficients(float lr, float beta1, float beta2, float eps,
                                          int64_t step, float grad_scale, float weight_decay) {
  const double t = static_cast<double>(step);
  AdamCoefficients c;
  c.beta1 = beta1;
  c.beta2 = beta2;
  c.lr = lr;
  c.eps = eps;
  c.correct1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(beta1), t)));
  c.correct2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(beta2), t)));
  c.grad_scale = grad_scale;
  c.decay = lr * weight_decay;
  return c;
}

// One element: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// w -= lr * (m * c1) / (sqrt(v * c2) + eps) + lr * wd * w.
TX_HOST_DEVICE inline void adam_step(float& w, float grad, float& m, float& v,
                                     const AdamCoefficients& c) {
  const float g = grad * c.grad_scale;
  m = c.beta1 * m + (1.0f - c.beta1) * g;
  v = c.beta2 * v + (1.0f - c.beta2) * g * g;
  const float update = (m * c.correct1) / (sqrtf(v * c.correct2) + c.eps);
  w -= c.lr * update + c.decay * w;
}

// ---- LayerNorm ----------------------------------------------------------------------------------

// rstd = 1 / sqrt(var + eps) from the sum of squared deviations over d elements (biased).
TX_HOST_DEVICE inline float layer_norm_rstd(float squared_deviations, int64_t d, float eps) {
  return 1.0f / sqrtf(squared_deviations / static_cast<float>(d) + eps);
}

// y = (x - mean) * rstd * gamma + beta
TX_HOST_DEVICE inline float layer_norm_apply(float x, float mean, float rstd, float gamma,
                                             float beta) {
  return (x - mean) * rstd * gamma + beta;
}

// dx_j = rstd * (gamma_j dy_j - mean(gamma dy) - xhat_j * mean(gamma dy xhat)).
TX_HOST_DEVICE inline float layer_norm_dx(float x, float dy, float gamma, float mean, float rstd,
                                          float mean_gdy, float mean_gdy_xhat) {
  const float xhat = (x - mean) * rstd;
  return rstd * (gamma * dy - mean_gdy - xhat * mean_gdy_xhat);
}

// ---- label-smoothed cross-entropy ---------------------------------------------------------------

// losses = -sum_v q_v log p_v with q = (1 - s) onehot + s / V, from the row's log-partition log_z,
// its target logit and the sum of its logits:
//   (1 - s) (log_z - x_t) + (s / V) (V log_z - sum_v x_v).
TX_HOST_DEVICE inline float smoothed_loss(float log_z, float target_logit, float sum_logits,
                                          int64_t vocab, float smoothing) {
  const float uniform = smoothing / static_cast<float>(vocab);
  const float nll = log_z - target_logit;
  return (1.0f - smoothing) * nll + uniform * (static_cast<float>(vocab) * log_z - sum_logits);
}

// d loss / d x_j (before the row's upstream gradient) without the target's -(1 - s) term:
// softmax_j - s / V.
TX_HOST_DEVICE inline float smoothed_grad(float logit, float log_z, float uniform) {
  return expf(logit - log_z) - uniform;
}

// ---- R-Drop's symmetric KL ----------------------------------------------------------------------

// A pair of rows a, b (one batch's two dropout passes) with log-probabilities lp = x - log_z:
// loss = 1/2 (KL(p_a || p_b) + KL(p_b || p_a)). One element's share of KL(p_self || p_other):
TX_HOST_DEVICE inline float kl_term(float p_self, float lp_self, float lp_other) {
  return p_self * (lp_self - lp_other);
}

// d loss / d x_self,j (before the pair's upstream gradient), kl_self = KL(p_self || p_other):
// 1/2 (p_self (lp_self - lp_other - kl_self) + p_self - p_other); the first term is KL(self ||
// other)'s gradient through the log-softmax, the second KL(other || self)'s.
TX_HOST_DEVICE inline float symmetric_kl_grad(float p_self, float p_other, float lp_self,
                                              float lp_other, float kl_self) {
  return 0.5f * (p_self * (lp_self - lp_other - kl_self) + p_self - p_other);
}

// ---- dropout ------------------------------------------------------------------------------------

// x * keep / (1 - p) given keep_scale = 1 / (1 - p), where element `index` is kept when
// dropout_uniform(seed, index) >= p (core/rng.h): the same bits on every device. The keyed form
// takes dropout_key(seed, index) and the index's low 32 bits, so a loop over indices that share
// their high bits computes the key once.
TX_HOST_DEVICE inline float dropout_value_keyed(float x, uint32_t key, uint32_t index_low, float p,
                                                float keep_scale) {
  // A multiply by a selected scale, not a branch, so loops vectorise; a dropped inf or NaN stays
  // NaN (visible to the non-finite gradient check) instead of becoming 0.
  const float scale = dropout_uniform_keyed(key, index_low) >= p ? keep_scale : 0.0f;
  return x * scale;
}
TX_HOST_DEVICE inline float dropout_value(float x, uint64_t seed, uint64_t index, float p,
                                          float keep_scale) {
  return dropout_value_keyed(x, dropout_key(seed, index), static_cast<uint32_t>(index), p,
                             keep_scale);
}

// ---- sinusoidal positions -----------------------------------------------------------------------

// Where sin and cos go in a row of the table, and their frequencies. The models tx reads were
// trained with one of three tables; a model computes with its own or translates wrongly.
enum class PositionLayout : int {
  // tx (the paper, section 3.5): PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos.
  interleaved = 0,
  // Marian, fairseq, tensor2tensor: [sin | cos] halves, PE(pos, i) = sin(pos * f_i) and
  // PE(pos, D/2 + i) = cos(pos * f_i) for i < D/2, f_i = exp(-i ln(10000) / (D/2 - 1)).
  halves = 1,
  // Hugging Face's MarianMTModel: the same halves with f_i = 10000^(-2i/D) (its
  // MarianSinusoidalPositionalEmbedding), slightly other frequencies than Marian's own.
  halves_hf = 2,
};

// PE(pos, i) of `layout`, in double: positions reach thousands, where a float angle loses the
// low digits of sin and cos. The halves layouts need an even D.
TX_HOST_DEVICE inline float sinusoid(int64_t pos, int64_t i, int64_t d_model,
                                     PositionLayout layout = PositionLayout::interleaved) {
  if (layout == PositionLayout::interleaved) {
    const double freq =
        pow(10000.0, -static_cast<double>(i - i % 2) / static_cast<double>(d_model));
    const double angle = static_cast<double>(pos) * freq;
    return static_cast<float>(i % 2 == 0 ? sin(angle) : cos(angle));
  }
  const int64_t half = d_model / 2, j = i < half ? i : i - half;
  const double steps =
      layout == PositionLayout::halves ? static_cast<double>(half - 1) : static_cast<double>(half);
  const double freq = ::exp(-static_cast<double>(j) * ::log(10000.0) / (steps > 0 ? steps : 1.0));
  const double angle = static_cast<double>(pos) * freq;
  return static_cast<float>(i < half ? sin(angle) : cos(angle));
}

// ---- activations --------------------------------------------------------------------------------

// Swish (SiLU): x * sigmoid(x), Marian's --transformer-ffn-activation swish and Hugging Face's
// "swish"/"silu". exp(-x) overflows to inf for x < -88, giving x / inf = -0: the right limit.
TX_HOST_DEVICE inline float swish(float x) {
  return x / (1.0f + expf(-x));
}
// d swish / dx = s + x s (1 - s), s = sigmoid(x).
TX_HOST_DEVICE inline float swish_grad(float x) {
  const float s = 1.0f / (1.0f + expf(-x));
  return s + x * s * (1.0f - s);
}

// ---- attention mask -----------------------------------------------------------------------------

// How many leading keys row `query` (of tq queries over tk keys) sees: keys j >= key_length are
// padding; causal lets query i see keys j <= i + tk - tq. Both masks hide a suffix.
TX_HOST_DEVICE inline int64_t visible_keys(int64_t query, int64_t tq, int64_t tk,
                                           int64_t key_length, bool causal) {
  int64_t visible = tk;
  if (key_length >= 0) visible = visible < key_length ? visible : key_length;
  if (causal) {
    int64_t limit = query + tk - tq + 1;
    if (limit < 0) limit = 0;
    visible = visible < limit ? visible : limit;
  }
  return visible;
}

// ---- int8 quantisation --------------------------------------------------------------------------

// Symmetric per-row quantisation: a row whose largest |value| is absmax maps onto
// [-max_level, max_level] with this scale (1 for an all-zero row, which stays zero).
TX_HOST_DEVICE inline float quantize_scale(float absmax, int max_level) {
  return absmax > 0.0f ? absmax / static_cast<float>(max_level) : 1.0f;
}

// x / scale rounded to the nearest integer (ties to even), clamped to +-max_level; NaN gives 0.
// Comparisons rather than fminf/fmaxf: those keep NaN rules that stop a compiler from
// vectorising the row loop (a libm call per element was a quarter of an --int8 translation).
TX_HOST_DEVICE inline int8_t quantize_value(float x, float scale, int max_level) {
  const float level = static_cast<float>(max_level);
  const float q = rintf(x / scale);
  return static_cast<int8_t>(q > level ? level : q < -level ? -level : q == q ? q : 0.0f);
}

// One output of the int8 linear layer from its exact i32 sum.
TX_HOST_DEVICE inline float dequantize(int32_t sum, float a_scale, float b_scale, float bias) {
  return static_cast<float>(sum) * (a_scale * b_scale) + bias;
}

// ---- dtype conversion ---------------------------------------------------------------------------

// Element i of a buffer of dtype t, as float (i32 converts exactly up to 2^24).
TX_HOST_DEVICE inline float load_as_float(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(p)[i];
    case DType::f16:
      return f16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::bf16:
      return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::i32:
      return static_cast<float>(static_cast<const int32_t*>(p)[i]);
    case DType::i8:
      return static_cast<float>(static_cast<const int8_t*>(p)[i]);
  }
  return 0.0f;
}

// Stores v as element i of a buffer of dtype t (round to nearest even; i32 truncates and
// saturates, as does i8).
TX_HOST_DEVICE inline void store_from_float(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(p)[i] = v;
      break;
    case DType::f16:
      static_cast<uint16_t*>(p)[i] = float_to_f16(v);
      break;
    case DType::bf16:
      static_cast<uint16_t*>(p)[i] = float_to_bf16(v);
      break;
    case DType::i32:
      static_cast<int32_t*>(p)[i] = float_to_i32(v);
      break;
    case DType::i8:
      static_cast<int8_t*>(p)[i] = float_to_i8(v);
      break;
  }
}

}  // namespace tx::math
