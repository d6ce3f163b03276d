// saturating_mul: a product of non-negative int64 counts that stops at INT64_MAX instead of
// wrapping (a flag given as "no bound in practice" times a window of batches).
#pragma once

#include <cstdint>
#include <limits>

namespace tx {

inline int64_t saturating_mul(int64_t a, int64_t b) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  return a > 0 && b > kMax / a ? kMax : a * b;
}

}  // namespace tx
