// Row helpers shared by the softmax-family kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "vector_exp.h"

namespace tx::cpu {

// Rows are walked in chunks of this many floats: exp into a stack buffer, then use it.
constexpr int64_t kExpChunk = 512;

// log(sum_j exp(x_j)) over one row, shifted by the row maximum so that exp cannot overflow.
inline float log_sum_exp(const float* x, int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  // Written as a compare-select: GCC 12 leaves `std::max(max, x[j])` here scalar (one
  // dependent vmaxss per element, most of the function's time); this form becomes vmaxps.
#pragma omp simd reduction(max : max)
  for (int64_t j = 0; j < n; ++j) max = x[j] > max ? x[j] : max;
  float total = 0.0f;
  float e[kExpChunk];
  for (int64_t j0 = 0; j0 < n; j0 += kExpChunk) {
    const int64_t len = std::min(kExpChunk, n - j0);
    exp_affine(x + j0, 1.0f, max, e, len);
#pragma omp simd reduction(+ : total)
    for (int64_t j = 0; j < len; ++j) total += e[j];
  }
  return max + std::log(total);
}

// out[j] = softmax(scale * x)[j] for j < n (out may be x); nothing written when n == 0.
inline void scaled_softmax(const float* x, float scale, int64_t n, float* out) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) max = std::max(max, x[j] * scale);
  exp_affine(x, scale, max, out, n);
  float total = 0.0f;
  for (int64_t j = 0; j < n; ++j) total += out[j];
  const float inv = 1.0f / total;
  for (int64_t j = 0; j < n; ++j) out[j] *= inv;
}

}  // namespace tx::cpu
