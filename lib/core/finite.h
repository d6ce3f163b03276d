// check_finite: refuses a float array that holds a NaN or an infinity, naming the element.
#pragma once

#include <cstdint>
#include <string>

namespace tx {

// Throws tx::Error naming `where`, the tensor and the element when x[0, n) holds a NaN or an
// infinity: a damaged file or a diverged run, which would otherwise show only as empty or
// NaN-scored output later.
void check_finite(const float* x, int64_t n, const std::string& where, const std::string& name);

}  // namespace tx
