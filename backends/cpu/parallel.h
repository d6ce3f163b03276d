// Grain sizes for the OpenMP loops: below them a fork/join costs more than the work.
#pragma once

#include <cstdint>

namespace tx::cpu {

// Elements per parallel elementwise loop. 4096 measured best on 2 cores for decoding, whose
// ops are [rows, d_model] with rows 5-32: against 32768, greedy x 32 and beam 5 x 1 run ~4%
// faster, beam 5 x 32 the same (2048 no better); training's tensors are far above either.
constexpr int64_t kElementwiseGrain = 1 << 12;
// Bytes from which a copy is split between the threads.
constexpr int64_t kCopyGrainBytes = 1 << 16;
// Row loops go parallel when rows * cols reaches the elementwise grain.
inline bool parallel_rows(int64_t rows, int64_t cols) {
  return rows > 1 && rows * cols >= kElementwiseGrain;
}

}  // namespace tx::cpu
