// Row helpers shared by the softmax-family kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace tx::cpu {

// log(sum_j exp(x_j)) over one row, shifted by the row maximum so that exp cannot overflow.
inline float log_sum_exp(const float* x, int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) max = std::max(max, x[j]);
  float total = 0.0f;
  for (int64_t j = 0; j < n; ++j) total += std::exp(x[j] - max);
  return max + std::log(total);
}

}  // namespace tx::cpu
