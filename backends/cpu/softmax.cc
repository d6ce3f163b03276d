// Row softmax with scale and prefix masks (key padding, causal), log-softmax, and backwards.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/device_math.h"
#include "cpu_backend.h"
#include "parallel.h"
#include "row_math.h"

namespace tx::cpu {

void CpuBackend::softmax_impl(const Tensor& x, float scale, const Tensor& key_lengths, bool causal,
                              const Tensor& y) {
  const int64_t tk = x.dim(-1), tq = x.dim(-2);
  const int64_t rows = x.shape().rows();
  const int64_t batch = x.dim(0);
  const int64_t rows_per_batch = rows / batch;
  const int32_t* lengths = key_lengths.defined() ? key_lengths.data<int32_t>() : nullptr;
  const float* px = x.data<float>();
  float* py = y.data<float>();
#pragma omp parallel for if (parallel_rows(rows, tk))
  for (int64_t r = 0; r < rows; ++r) {
    // Both masks hide a suffix of the keys: key j is visible iff j < visible.
    const int64_t length = lengths ? std::max<int32_t>(lengths[r / rows_per_batch], 0) : -1;
    const int64_t visible = math::visible_keys(r % tq, tq, tk, length, causal);
    const float* in = px + r * tk;
    float* out = py + r * tk;
    scaled_softmax(in, scale, visible, out);
    for (int64_t j = visible; j < tk; ++j) out[j] = 0.0f;
  }
}

void CpuBackend::softmax_backward_impl(const Tensor& y, const Tensor& dy, float scale,
                                       const Tensor& dx, bool accumulate) {
  const int64_t cols = y.shape().cols(), rows = y.shape().rows();
  const float* py = y.data<float>();
  const float* pdy = dy.data<float>();
  float* pdx = dx.data<float>();
#pragma omp parallel for if (parallel_rows(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = py + r * cols;
    const float* dyr = pdy + r * cols;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < cols; ++j) dot += yr[j] * dyr[j];
    float* dxr = pdx + r * cols;
    if (accumulate) {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) dxr[j] += scale * yr[j] * (dyr[j] - dot);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) dxr[j] = scale * yr[j] * (dyr[j] - dot);
    }
  }
}

void CpuBackend::log_softmax_impl(const Tensor& x, const Tensor& y) {
  const int64_t cols = x.shape().cols(), rows = x.shape().rows();
  const float* px = x.data<float>();
  float* py = y.data<float>();
#pragma omp parallel for if (parallel_rows(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = px + r * cols;
    float* out = py + r * cols;
    const float log_z = log_sum_exp(in, cols);
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) out[j] = in[j] - log_z;
  }
}

void CpuBackend::log_softmax_backward_impl(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  const int64_t cols = y.shape().cols(), rows = y.shape().rows();
  const float* py = y.data<float>();
  const float* pdy = dy.data<float>();
  float* pdx = dx.data<float>();
#pragma omp parallel for if (parallel_rows(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = pdy + r * cols;
    float total = 0.0f;
#pragma omp simd reduction(+ : total)
    for (int64_t j = 0; j < cols; ++j) total += dyr[j];
    const float* yr = py + r * cols;
    float* dxr = pdx + r * cols;
    float e[kExpChunk];
    for (int64_t j0 = 0; j0 < cols; j0 += kExpChunk) {
      const int64_t len = std::min(kExpChunk, cols - j0);
      exp_affine(yr + j0, 1.0f, 0.0f, e, len);
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) dxr[j0 + j] += dyr[j0 + j] - e[j] * total;
    }
  }
}

}  // namespace tx::cpu
