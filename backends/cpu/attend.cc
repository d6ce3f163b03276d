// attend_cached: a decoding step's attention over a time-major cache read through each row's
// ancestry; attend_memory: over each row's entry of the encoder memory (cross-attention). Per
// (row, head) attend_row, parallel over the pairs.
#include <vector>

#include "attend_row.h"
#include "core/error.h"
#include "cpu_backend.h"
#include "parallel.h"

namespace tx::cpu {

void CpuBackend::attend_cached_impl(const Tensor& q, const Tensor& keys, const Tensor& values,
                                    const Tensor& rows, int64_t length, float scale,
                                    const Tensor& out) {
  const int64_t count = q.dim(0), heads = q.dim(1), d_head = q.dim(2);
  const int64_t capacity = keys.dim(0), slots = keys.dim(1);
  const int32_t* anc = rows.data<int32_t>();
  // Checked on the main thread while the other waits: a vector min/max over the table, the
  // offender found only when there is one.
  int32_t lo = 0, hi = 0;
  for (int64_t r = 0; r < count; ++r) {
    const int32_t* a = anc + r * capacity;
#pragma omp simd reduction(min : lo) reduction(max : hi)
    for (int64_t t = 0; t < length; ++t) {
      lo = a[t] < lo ? a[t] : lo;
      hi = a[t] > hi ? a[t] : hi;
    }
  }
  if (lo < 0 || hi >= slots)
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
#pragma omp for schedule(static)
    for (int64_t rh = 0; rh < count * heads; ++rh) {
      const int64_t r = rh / heads, h = rh % heads;
      const int32_t* a = anc + r * capacity;
      auto at = [&](const float* base) {
        return [=](int64_t t) { return base + t * step + (a[t] * heads + h) * d_head; };
      };
      attend_row(pq + rh * d_head, d_head, length, scale, at(pk), at(pv), p.data(),
                 po + rh * d_head);
    }
  }
}

void CpuBackend::attend_memory_impl(const Tensor& q, const Tensor& keys, const Tensor& values,
                                    const Tensor& lengths, float scale, const Tensor& out) {
  const int64_t count = q.dim(0), heads = q.dim(1), d_head = q.dim(2);
  const int64_t entries = keys.dim(0), time = keys.dim(2), group = count / entries;
  const int32_t* len = lengths.data<int32_t>();
  const float* pq = q.data<float>();
  const float* pk = keys.data<float>();
  const float* pv = values.data<float>();
  float* po = out.data<float>();
#pragma omp parallel if (parallel_rows(count * heads, time * d_head))
  {
    std::vector<float> p(static_cast<size_t>(time));
    // An entry's rows (a sentence's beams) one after the other per head: its keys and values
    // for that head are read from memory once and from L1 for the other rows. Sentences are
    // taken one at a time as threads finish: their lengths differ, so halves by count do not
    // take equal time.
#pragma omp for schedule(dynamic, heads)
    for (int64_t eh = 0; eh < entries * heads; ++eh) {
      const int64_t e = eh / heads, h = eh % heads;
      const int64_t visible = std::clamp<int64_t>(len[e], 0, time);
      const float* k = pk + eh * time * d_head;
      const float* v = pv + eh * time * d_head;
      for (int64_t r = e * group; r < (e + 1) * group; ++r) {
        const int64_t rh = r * heads + h;
        attend_row(
            pq + rh * d_head, d_head, visible, scale, [&](int64_t t) { return k + t * d_head; },
            [&](int64_t t) { return v + t * d_head; }, p.data(), po + rh * d_head);
      }
    }
  }
}

}  // namespace tx::cpu
