// dtype conversion between f32, f16, bf16 and i32, through f32 (math::load_as_float and
// math::store_from_float, shared with the CPU backend: the same bits on both devices).
#include "backend/device_math.h"
#include "cuda_backend.h"
#include "cuda_common.cuh"

namespace tx::cuda {

namespace {
struct Cast {
  const void* x;
  void* y;
  DType from, to;
  __device__ void operator()(int64_t i) const {
    math::store_from_float(y, to, i, math::load_as_float(x, from, i));
  }
};
}  // namespace

void CudaBackend::cast_impl(const Tensor& x, const Tensor& y) {
  if (x.dtype() == y.dtype()) {
    if (!x.same_memory(y)) copy_impl(x, y);
    return;
  }
  // In place only between equal element sizes (f16 <-> bf16, f32 <-> i32): element i is read
  // before it is written, by the same thread.
  launch_map(x.numel(), as_stream(enter()), Cast{x.raw(), y.raw(), x.dtype(), y.dtype()}, "cast");
}

}  // namespace tx::cuda
