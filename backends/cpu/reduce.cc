// Reductions: sum, squared norm (for gradient clipping), column sums (bias gradients).
#include <algorithm>

#include "cpu_backend.h"
#include "parallel.h"

namespace tx::cpu {

// Sums accumulate in double: a 100M-element gradient norm keeps its digits.
void CpuBackend::sum_impl(const Tensor& x, const Tensor& out) {
  const int64_t n = x.numel();
  const float* p = x.data<float>();
  double total = 0.0;
#pragma omp parallel for simd reduction(+ : total) schedule(static) if (n >= kElementwiseGrain)
  for (int64_t i = 0; i < n; ++i) total += p[i];
  out.data<float>()[0] = static_cast<float>(total);
}

void CpuBackend::squared_norm_impl(const Tensor& x, const Tensor& out) {
  const int64_t n = x.numel();
  const float* p = x.data<float>();
  double total = 0.0;
#pragma omp parallel for simd reduction(+ : total) schedule(static) if (n >= kElementwiseGrain)
  for (int64_t i = 0; i < n; ++i) total += static_cast<double>(p[i]) * p[i];
  out.data<float>()[0] = static_cast<float>(total);
}

void CpuBackend::sum_rows_impl(const Tensor& x, const Tensor& out, float beta) {
  const int64_t cols = x.shape().cols(), rows = x.shape().rows();
  const float* px = x.data<float>();
  float* po = out.data<float>();
  // Threads own column chunks and walk all rows: contiguous loads, no reduction across threads.
  const int64_t chunk = 64;
  const int64_t chunks = (cols + chunk - 1) / chunk;
#pragma omp parallel for if (parallel_rows(chunks, rows * chunk))
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * chunk, end = std::min(cols, begin + chunk);
    float acc[chunk] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = px + r * cols;
#pragma omp simd
      for (int64_t j = begin; j < end; ++j) acc[j - begin] += in[j];
    }
    for (int64_t j = begin; j < end; ++j)
      po[j] = (beta == 0.0f ? 0.0f : beta * po[j]) + acc[j - begin];
  }
}

}  // namespace tx::cpu
