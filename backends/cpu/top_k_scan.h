// The k best of a row in one pass (top_k's scan), and the order every top-k keeps.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/rank_order.h"

namespace tx::cpu {

using math::ranks_above;
using math::ranks_before;

// The k best of one row in one pass: a sorted list of the best so far, and a scan that skips
// 64 values at a time while none beats the list's last (16 skipped 2.8% of beam 5 x 32's
// samples on an AVX-512 machine, 64 1.7%: after the first few hundred, few chunks hold one).
// Elements arrive in index order, so a later element equal to the last ranks after it and is
// skipped too. Beam search's [sentences, beam x vocab] rows (k = 2 x beam, 40,000 columns) take
// O(cols) vector work instead of a partial sort of an index vector.
inline void top_k_scan(const float* in, int64_t cols, int k, float* values, int32_t* indices) {
  for (int j = 0; j < k; ++j) {
    // Insertion of element j into the sorted first j: ties keep index order.
    int pos = j;
    while (pos > 0 && ranks_above(in[j], values[pos - 1])) {
      values[pos] = values[pos - 1];
      indices[pos] = indices[pos - 1];
      --pos;
    }
    values[pos] = in[j];
    indices[pos] = j;
  }
  constexpr int64_t kChunk = 64;
  float last = values[k - 1];
  for (int64_t start = k; start < cols; start += kChunk) {
    const int64_t end = std::min(cols, start + kChunk);
    // A NaN never passes `> last`, which is its rank (after every number); while the list's
    // last is a NaN, any number beats it, and the plain compare would skip them all.
    if (last == last) {
      // An int, not a bool: GCC 12 leaves a bool |-reduction scalar (a compare, set and or per
      // value, most of the scan's time); this one becomes a vector compare.
      int any = 0;
#pragma omp simd reduction(| : any)
      for (int64_t c = start; c < end; ++c) any |= in[c] > last ? 1 : 0;
      if (!any) continue;
    }
    for (int64_t c = start; c < end; ++c) {
      if (!ranks_above(in[c], last)) continue;
      int pos = k - 1;
      while (pos > 0 && ranks_above(in[c], values[pos - 1])) {
        values[pos] = values[pos - 1];
        indices[pos] = indices[pos - 1];
        --pos;
      }
      values[pos] = in[c];
      indices[pos] = static_cast<int32_t>(c);
      last = values[k - 1];
    }
  }
}

}  // namespace tx::cpu
