// dtype conversion between f32, f16, bf16 and i32, through f32.
#include "core/half.h"
#include "cpu_backend.h"
#include "parallel.h"

namespace tx::cpu {

namespace {

float load(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(p)[i];
    case DType::f16:
      return f16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::bf16:
      return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::i32:
      return static_cast<float>(static_cast<const int32_t*>(p)[i]);
  }
  return 0.0f;
}

void store(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(p)[i] = v;
      break;
    case DType::f16:
      static_cast<uint16_t*>(p)[i] = float_to_f16(v);
      break;
    case DType::bf16:
      static_cast<uint16_t*>(p)[i] = float_to_bf16(v);
      break;
    case DType::i32:
      static_cast<int32_t*>(p)[i] = float_to_i32(v);
      break;
  }
}

}  // namespace

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
  for (int64_t i = 0; i < n; ++i) store(py, to, i, load(px, from, i));
}

}  // namespace tx::cpu
