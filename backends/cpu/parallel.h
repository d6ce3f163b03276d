// Grain sizes for the OpenMP loops: below them a fork/join costs more than the work.
#pragma once

#include <cstdint>

namespace tx::cpu {

constexpr int64_t kElementwiseGrain = 1 << 15;  // elements per parallel elementwise loop
// Row loops go parallel when rows * cols reaches the elementwise grain.
inline bool parallel_rows(int64_t rows, int64_t cols) {
  return rows > 1 && rows * cols >= kElementwiseGrain;
}

}  // namespace tx::cpu
