// dtype conversion between f32, f16, bf16, i32 and i8, through f32.
#include "backend/device_math.h"
#include "cpu_backend.h"
#include "parallel.h"

namespace tx::cpu {
namespace {

// y[i] = convert(x[i]) over typed pointers: the dtype switch of load_as_float /
// store_from_float hoisted out of the loop so that the compiler vectorises it. The casts of
// bf16 training (every GEMM's activation operand, each step) spent 18% of a step in the
// per-element switch on an AMD Zen 4.
template <typename From, typename To, typename Convert>
void convert(const void* px, void* py, int64_t n, Convert f) {
  const From* x = static_cast<const From*>(px);
  To* y = static_cast<To*>(py);
#pragma omp parallel for simd if (n >= kElementwiseGrain)
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
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
  if (from == DType::f32 && to == DType::bf16)
    return convert<float, uint16_t>(px, py, n, [](float v) { return float_to_bf16(v); });
  if (from == DType::bf16 && to == DType::f32)
    return convert<uint16_t, float>(px, py, n, [](uint16_t h) { return bf16_to_float(h); });
  if (from == DType::f32 && to == DType::f16)
    return convert<float, uint16_t>(px, py, n, [](float v) { return float_to_f16(v); });
  if (from == DType::f16 && to == DType::f32)
    return convert<uint16_t, float>(px, py, n, [](uint16_t h) { return f16_to_float(h); });
#pragma omp parallel for if (n >= kElementwiseGrain)
  for (int64_t i = 0; i < n; ++i)
    math::store_from_float(py, to, i, math::load_as_float(px, from, i));
}

}  // namespace tx::cpu
