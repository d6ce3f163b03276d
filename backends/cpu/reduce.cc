// Reductions: sum, squared norm (for gradient clipping), column sums (bias gradients).
#include <omp.h>

#include <algorithm>
#include <vector>

#include "cpu_backend.h"
#include "parallel.h"

namespace tx::cpu {

namespace {

// Sums f(x_i) in double (a 100M-element gradient norm keeps its digits), over fixed static
// chunks whose partial sums are added in thread order: the same bits on every run.
template <typename F>
double ordered_sum(const float* p, int64_t n, F f) {
  const bool parallel = n >= kElementwiseGrain;
  const int nthreads = parallel ? omp_get_max_threads() : 1;
  std::vector<double> partial(nthreads, 0.0);
#pragma omp parallel num_threads(nthreads) if (parallel)
  {
    double local = 0.0;
#pragma omp for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) local += f(p[i]);
    partial[omp_get_thread_num()] = local;
  }
  double total = 0.0;
  for (double v : partial) total += v;
  return total;
}

}  // namespace

void CpuBackend::sum_impl(const Tensor& x, const Tensor& out) {
  double total = ordered_sum(x.data<float>(), x.numel(), [](float v) { return double(v); });
  out.data<float>()[0] = static_cast<float>(total);
}

void CpuBackend::squared_norm_impl(const Tensor& x, const Tensor& out) {
  double total =
      ordered_sum(x.data<float>(), x.numel(), [](float v) { return double(v) * double(v); });
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
