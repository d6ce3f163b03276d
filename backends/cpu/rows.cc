// Row lookup and reordering: gather (embedding, beam reorder), scatter-add, top-k.
#include <algorithm>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "cpu_backend.h"
#include "parallel.h"
#include "top_k_scan.h"

namespace tx::cpu {

namespace {
// -1 is allowed: gather_rows writes a zero row for it, scatter_add_rows skips it.
void check_index(const int32_t* index, int64_t m, int64_t n, const char* op) {
  for (int64_t i = 0; i < m; ++i)
    TX_CHECK(index[i] >= -1 && index[i] < n, op, ": index ", index[i], " at position ", i,
             " is outside [0, ", n, ") (or -1 for a zero row)");
}
}  // namespace

void CpuBackend::gather_rows_impl(const Tensor& src, const Tensor& index, const Tensor& dst,
                                  float scale) {
  const int64_t n = src.dim(0), m = dst.dim(0), row = dst.numel() / m;
  const int32_t* idx = index.data<int32_t>();
  check_index(idx, m, n, "gather_rows");
  const float* ps = src.data<float>();
  float* pd = dst.data<float>();
#pragma omp parallel for if (parallel_rows(m, row))
  for (int64_t i = 0; i < m; ++i) {
    float* out = pd + i * row;
    if (idx[i] < 0) {
      std::fill(out, out + row, 0.0f);
      continue;
    }
    const float* in = ps + idx[i] * row;
#pragma omp simd
    for (int64_t j = 0; j < row; ++j) out[j] = scale * in[j];
  }
}

void CpuBackend::scatter_add_rows_impl(const Tensor& src, const Tensor& index, const Tensor& dst,
                                       float scale) {
  const int64_t n = dst.dim(0), m = src.dim(0), row = src.numel() / m;
  const int32_t* idx = index.data<int32_t>();
  check_index(idx, m, n, "scatter_add_rows");
  const float* ps = src.data<float>();
  float* pd = dst.data<float>();
  // Threads split the columns, never the rows: repeated indices then never race, and the
  // summation order per element is fixed.
  const int64_t chunk = 64;
  const int64_t chunks = (row + chunk - 1) / chunk;
#pragma omp parallel for if (parallel_rows(chunks, m * chunk))
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * chunk, end = std::min(row, begin + chunk);
    for (int64_t i = 0; i < m; ++i) {
      if (idx[i] < 0) continue;
      const float* in = ps + i * row;
      float* out = pd + idx[i] * row;
#pragma omp simd
      for (int64_t j = begin; j < end; ++j) out[j] += scale * in[j];
    }
  }
}

void CpuBackend::top_k_impl(const Tensor& x, int k, const Tensor& values, const Tensor& indices) {
  const int64_t cols = x.shape().cols(), rows = x.shape().rows();
  const float* px = x.data<float>();
  float* pv = values.data<float>();
  int32_t* pi = indices.data<int32_t>();
  // The scan's insertions cost up to k moves each: a partial sort for a large share of a row.
  const bool scan = k <= 64 && k <= cols / 8;
#pragma omp parallel for if (parallel_rows(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = px + r * cols;
    if (scan) {
      top_k_scan(in, cols, k, pv + r * k, pi + r * k);
      continue;
    }
    std::vector<int32_t> order(cols);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [in](int32_t a, int32_t b) { return ranks_before(in[a], a, in[b], b); });
    for (int j = 0; j < k; ++j) {
      pi[r * k + j] = order[j];
      pv[r * k + j] = in[order[j]];
    }
  }
}

}  // namespace tx::cpu
