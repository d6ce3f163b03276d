// One query row and head of a decoding step's attention (attend_cached, attend_memory): the
// scores, softmax and weighted sum in the order of the few-row GEMMs and softmax of
// MultiHeadAttention::context, over `length` keys reached through key_at / value_at.
#pragma once

#include <algorithm>
#include <cstdint>

#include "row_math.h"

namespace tx::cpu {

// p: `length` floats of scratch; out: d_head floats (written, never read). With length 0 the
// output is 0, as a softmax row with no visible key is.
template <typename KeyAt, typename ValueAt>
void attend_row(const float* q, int64_t d_head, int64_t length, float scale, KeyAt key_at,
                ValueAt value_at, float* p, float* out) {
  // Rows of consecutive steps may lie apart (a cache read through an ancestry), where no
  // hardware prefetcher looks: ask for the rows a few steps ahead.
  constexpr int64_t kAhead = 4;
  auto prefetch = [d_head](const float* row) {
    for (int64_t e = 0; e < d_head; e += 16) __builtin_prefetch(row + e);
  };
  for (int64_t t = 0; t < length; ++t) {
    if (t + kAhead < length) prefetch(key_at(t + kAhead));
    const float* k = key_at(t);
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t e = 0; e < d_head; ++e) s += q[e] * k[e];
    p[t] = s;
  }
  scaled_softmax(p, scale, length, p);
  std::fill(out, out + d_head, 0.0f);
  for (int64_t t = 0; t < length; ++t) {
    if (t + kAhead < length) prefetch(value_at(t + kAhead));
    const float w = p[t];
    const float* v = value_at(t);
#pragma omp simd
    for (int64_t e = 0; e < d_head; ++e) out[e] += w * v[e];
  }
}

}  // namespace tx::cpu
