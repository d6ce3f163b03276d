#include "few_rows_gemm.h"

#include <algorithm>

#include "parallel.h"

namespace tx::cpu {
namespace {

// Dot products c[j] = alpha * a . b[j] (+ beta c[j]) for the n rows of b, four at a time: four
// independent sums hide the FMA latency that one sum's chain would wait on.
void dots(const float* a, const float* b, int64_t n, int64_t k, float* c, float alpha, float beta) {
  auto put = [&](int64_t j, float s) { c[j] = beta == 0.0f ? alpha * s : alpha * s + beta * c[j]; };
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const float *b0 = b + j * k, *b1 = b0 + k, *b2 = b1 + k, *b3 = b2 + k;
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
    for (int64_t l = 0; l < k; ++l) {
      s0 += a[l] * b0[l];
      s1 += a[l] * b1[l];
      s2 += a[l] * b2[l];
      s3 += a[l] * b3[l];
    }
    put(j, s0);
    put(j + 1, s1);
    put(j + 2, s2);
    put(j + 3, s3);
  }
  for (; j < n; ++j) {
    const float* bj = b + j * k;
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t l = 0; l < k; ++l) s += a[l] * bj[l];
    put(j, s);
  }
}

// c = alpha * a @ b (+ beta c) for one row a [k] and b [k, n]: columns in chunks of kChunk kept
// in a local accumulator across the k rows of b, so that c is written once per chunk.
void row_times(const float* a, const float* b, int64_t n, int64_t k, float* c, float alpha,
               float beta) {
  constexpr int64_t kChunk = 32;
  for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
    const int64_t width = std::min(kChunk, n - j0);
    float acc[kChunk] = {};
    if (width == kChunk) {
      for (int64_t l = 0; l < k; ++l) {
        const float w = a[l];
        const float* bl = b + l * n + j0;
#pragma omp simd
        for (int64_t jj = 0; jj < kChunk; ++jj) acc[jj] += w * bl[jj];
      }
    } else {
      for (int64_t l = 0; l < k; ++l) {
        const float w = a[l];
        const float* bl = b + l * n + j0;
        for (int64_t jj = 0; jj < width; ++jj) acc[jj] += w * bl[jj];
      }
    }
    float* cj = c + j0;
    for (int64_t jj = 0; jj < width; ++jj)
      cj[jj] = beta == 0.0f ? alpha * acc[jj] : alpha * acc[jj] + beta * cj[jj];
  }
}

}  // namespace

void few_rows_gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                   bool trans_b, float* c, float alpha, float beta) {
  const int64_t a_size = m * k, b_size = k * n, c_size = m * n;
#pragma omp parallel for schedule(static) if (parallel_rows(batch, m * n * k))
  for (int64_t e = 0; e < batch; ++e)
    for (int64_t i = 0; i < m; ++i) {
      const float* ai = a + e * a_size + i * k;
      float* ci = c + e * c_size + i * n;
      if (trans_b)
        dots(ai, b + e * b_size, n, k, ci, alpha, beta);
      else
        row_times(ai, b + e * b_size, n, k, ci, alpha, beta);
    }
}

}  // namespace tx::cpu
