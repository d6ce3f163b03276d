// dtype conversion between f32, f16, bf16 and i32, through f32.
#include "backend/device_math.h"
#include "cpu_backend.h"
#include "parallel.h"

namespace tx::cpu {

void CpuBackend::cast_impl(const Tensor& x, const Tensor& y) {
  const int64_t n = x.numel();
  const DType from = x.dtype(), to = y.dtype();
  const void* px = x.raw();
  void* py = y.raw();
  if (from == to) {
    copy_impl(x, y);
    return;
  }
#pragma omp parallel for if (n >= kElementwiseGrain)
  for (int64_t i = 0; i < n; ++i)
    math::store_from_float(py, to, i, math::load_as_float(px, from, i));
}

}  // namespace tx::cpu
