// --precision: the dtype of the GEMMs' operands, checked against what the backend has.
#pragma once

#include "backend/backend.h"
#include "common/options.h"

namespace tx::app {

// f32, bf16 or f16 for --precision fp32, bf16 or fp16. A reduced precision the backend has no
// kernels for (Backend::half_gemm_missing): bf16 is refused in one line (it is asked for speed,
// and widened it would be slower than fp32); fp16 runs widened, with a line saying so (on a
// CPU it checks a GPU recipe's numerics, loss scaling included, before the GPU time is spent).
DType checked_precision(const Options& options, const Backend& be);

}  // namespace tx::app
