// The order every top-k keeps (top_k, beam_top_k, on every backend): value descending, ties to
// the lower index, and NaN after every number (NaNs among themselves by index). A total order,
// so a row holding NaNs still yields k distinct valid indices.
#pragma once

#include <cstdint>

#include "core/half.h"  // TX_HOST_DEVICE

namespace tx::math {

// Whether value a ranks strictly above value b (a number above NaN; two NaNs tie).
TX_HOST_DEVICE inline bool ranks_above(float a, float b) {
  return a > b || (b != b && a == a);
}

// Whether (va, a) comes before (vb, b) in the order above.
TX_HOST_DEVICE inline bool ranks_before(float va, int32_t a, float vb, int32_t b) {
  if (ranks_above(va, vb)) return true;
  if (ranks_above(vb, va)) return false;
  return a < b;
}

}  // namespace tx::math
