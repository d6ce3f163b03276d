// attend_cached: a decoding step's attention over a time-major cache read through each row's
// ancestry. Per (row, head): the scores, softmax and weighted sum as the batched GEMM, softmax
// and GEMM of MultiHeadAttention::context compute them (the same sums in the same order), over
// the `length` written steps only.
#include <algorithm>
#include <limits>
#include <vector>

#include "core/error.h"
#include "cpu_backend.h"
#include "parallel.h"
#include "vector_exp.h"

namespace tx::cpu {
namespace {

constexpr int64_t kAhead = 4;  // steps ahead to prefetch

void prefetch_row(const float* row, int64_t n) {
  for (int64_t e = 0; e < n; e += 16) __builtin_prefetch(row + e);
}

}  // namespace

void CpuBackend::attend_cached_impl(const Tensor& q, const Tensor& keys, const Tensor& values,
                                    const Tensor& rows, int64_t length, float scale,
                                    const Tensor& out) {
  const int64_t count = q.dim(0), heads = q.dim(1), d_head = q.dim(2);
  const int64_t capacity = keys.dim(0), slots = keys.dim(1);
  const int32_t* anc = rows.data<int32_t>();
  for (int64_t r = 0; r < count; ++r)
    for (int64_t t = 0; t < length; ++t) {
      const int32_t s = anc[r * capacity + t];
      TX_CHECK(s >= 0 && s < slots, "attend_cached: rows[", r, ", ", t, "] = ", s,
               " is outside the cache's ", slots, " slots");
    }
  const float* pq = q.data<float>();
  const float* pk = keys.data<float>();
  const float* pv = values.data<float>();
  float* po = out.data<float>();
  const int64_t step = slots * heads * d_head;  // one time slot
#pragma omp parallel if (parallel_rows(count * heads, length * d_head))
  {
    std::vector<float> p(static_cast<size_t>(length));
    std::vector<float> acc(static_cast<size_t>(d_head));
#pragma omp for schedule(static)
    for (int64_t rh = 0; rh < count * heads; ++rh) {
      const int64_t r = rh / heads, h = rh % heads;
      const float* qi = pq + rh * d_head;
      const int32_t* a = anc + r * capacity;
      auto at = [&](const float* base, int64_t t) {
        return base + t * step + (a[t] * heads + h) * d_head;
      };
      for (int64_t t = 0; t < length; ++t) {
        // The steps' rows lie apart in the cache, where no hardware prefetcher looks.
        if (t + kAhead < length) prefetch_row(at(pk, t + kAhead), d_head);
        const float* k = at(pk, t);
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t e = 0; e < d_head; ++e) s += qi[e] * k[e];
        p[t] = s;
      }
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t t = 0; t < length; ++t) max = std::max(max, p[t] * scale);
      exp_affine(p.data(), scale, max, p.data(), length);
      float total = 0.0f;
      for (int64_t t = 0; t < length; ++t) total += p[t];
      const float inv = 1.0f / total;
      for (int64_t t = 0; t < length; ++t) p[t] *= inv;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t t = 0; t < length; ++t) {
        if (t + kAhead < length) prefetch_row(at(pv, t + kAhead), d_head);
        const float w = p[t];
        const float* v = at(pv, t);
#pragma omp simd
        for (int64_t e = 0; e < d_head; ++e) acc[e] += w * v[e];
      }
      std::copy(acc.begin(), acc.end(), po + rh * d_head);
    }
  }
}

}  // namespace tx::cpu
