#include "core/finite.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace tx {

void check_finite(const float* x, int64_t n, const std::string& where, const std::string& name) {
  // An all-ones exponent is NaN or infinity: an integer test the compiler vectorises.
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  if (!bad) return;
  const int64_t i = std::find_if(x, x + n, [](float v) { return !std::isfinite(v); }) - x;
  throw Error(str(where, ": tensor '", name, "' holds ", x[i], " at element ", i,
                  "; the file is damaged or its training diverged (use an earlier checkpoint)"));
}

}  // namespace tx
