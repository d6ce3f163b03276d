// beam_top_k: a beam-search step's log-softmax, mask, running score and top-k in two reads of
// the logits (log-sum-exp, then scores into a row buffer that stays in cache), never writing
// the [rows, vocab] scores.
#include <algorithm>
#include <numeric>
#include <vector>

#include "cpu_backend.h"
#include "parallel.h"
#include "row_math.h"
#include "top_k_scan.h"

namespace tx::cpu {

void CpuBackend::beam_top_k_impl(const Tensor& logits, const Tensor& mask, const Tensor& offsets,
                                 int beam, int k, const Tensor& values, const Tensor& indices) {
  const int64_t vocab = logits.shape().cols(), rows = logits.shape().rows();
  const int64_t groups = rows / beam;
  // A group's k best are among its rows' own k best: a candidate with fewer than k ahead of it
  // in the group has fewer than k ahead of it in its row.
  const int row_k = static_cast<int>(std::min<int64_t>(k, vocab));
  std::vector<float> row_values(static_cast<size_t>(rows * row_k));
  std::vector<int32_t> row_ids(static_cast<size_t>(rows * row_k));
  const float* px = logits.data<float>();
  const float* pm = mask.data<float>();
  const float* po = offsets.data<float>();
#pragma omp parallel if (parallel_rows(rows, vocab))
  {
    std::vector<float> scores(static_cast<size_t>(vocab));
    float* s = scores.data();
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = px + r * vocab;
      // The same expression, in the same order, as log_softmax, add_bias and the rank-1 gemm.
      const float log_z = log_sum_exp(in, vocab);
      const float offset = po[r];
#pragma omp simd
      for (int64_t j = 0; j < vocab; ++j) s[j] = ((in[j] - log_z) + pm[j]) + offset;
      top_k_scan(s, vocab, row_k, row_values.data() + r * row_k, row_ids.data() + r * row_k);
    }
  }
  float* pv = values.data<float>();
  int32_t* pi = indices.data<int32_t>();
  std::vector<int32_t> order(static_cast<size_t>(beam * row_k));
  std::vector<float> value(order.size());
  std::vector<int32_t> id(order.size());
  for (int64_t g = 0; g < groups; ++g) {
    for (int b = 0; b < beam; ++b)
      for (int j = 0; j < row_k; ++j) {
        const int64_t from = (g * beam + b) * row_k + j;
        value[b * row_k + j] = row_values[from];
        id[b * row_k + j] = static_cast<int32_t>(b * vocab + row_ids[from]);
      }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return ranks_before(value[a], id[a], value[b], id[b]);
    });
    for (int j = 0; j < k; ++j) {
      pv[g * k + j] = value[order[j]];
      pi[g * k + j] = id[order[j]];
    }
  }
}

}  // namespace tx::cpu
