// Weights packed once for inference (Backend::pack_weight, gemm_packed): f32, f16 (widened) and
// bf16 weights in fixed_order_gemm's column panels, i8 weights in oneDNN's s8 x u8 layout. A weight
// that every decoding step multiplies is laid out once, not copied into panels on every call.
#include <omp.h>

#include "core/error.h"
#include "cpu_backend.h"
#include "fixed_order_gemm.h"
#if TX_DNNL_PACKED_SGEMM
#include "dnnl_pack_api.h"
#endif

namespace tx::cpu {

bool CpuBackend::packed_usable(const PackedWeight& p) {
  return p.packed.defined() && !omp_in_parallel() && omp_get_max_threads() == p.threads;
}

void CpuBackend::pack_weight_impl(PackedWeight& p) {
  if (p.weight.dtype() == DType::i8) {
    pack_i8_weight(p);
    return;
  }
  if (p.weight.dtype() == DType::f16) {
    // f16 (no CPU GEMM takes it): widened exactly into f32 panels, so that --precision fp16's
    // inference has the f32 kernel's fixed sums (a sentence's bits do not depend on its batch)
    // rather than oneDNN's sgemm's, which round by row count.
    const int64_t n = p.weight.dim(0), k = p.weight.dim(1);
    const Tensor wide = empty({n, k});
    cast_impl(p.weight, wide);
    Tensor packed = empty({panel_floats(n, k)});
    pack_panels(wide.data<float>(), n, k, packed.data<float>());
    p.packed = packed;
    return;
  }
  if (p.weight.dtype() == DType::bf16) {
    // bf16: the same panels in pairs of k where the CPU has VDPBF16PS; elsewhere gemm_packed
    // multiplies the weight as it is.
    const int64_t n = p.weight.dim(0), k = p.weight.dim(1);
    if (!fixed_order_bf16_available() || k % 2 != 0) return;
    Tensor packed = empty({panel_units_bf16(n, k)}, DType::i32);
    pack_panels_bf16(static_cast<const uint16_t*>(p.weight.raw()), n, k,
                     static_cast<uint32_t*>(packed.raw()));
    p.packed = packed;
    return;
  }
  if (p.weight.dtype() != DType::f32) return;
  // f32: column panels for fixed_order_gemm, whose sums do not depend on the row count (a
  // sentence decodes to the same bits in any batch) and which reads them from any thread
  // count.
  const int64_t n = p.weight.dim(0), k = p.weight.dim(1);
  Tensor packed = empty({panel_floats(n, k)});
  pack_panels(p.weight.data<float>(), n, k, packed.data<float>());
  p.packed = packed;
}

// The i8 layout is oneDNN's s8 x u8 panels followed (64-byte aligned) by one i32 per weight
// row, -128 times its sum: gemm_i8 hands the activations over as u8 (zero point 128), and the
// packed routine takes that zero point only as such a per-row offset.
void CpuBackend::pack_i8_weight(PackedWeight& p) {
#if TX_DNNL_PACKED_SGEMM
  namespace pack = dnnl::impl::cpu;
  const dnnl_dim_t n = p.weight.dim(0), k = p.weight.dim(1), rows = kPackRows;
  size_t bytes = 0;
  bool worth = false;
  if (pack::gemm_s8u8s32_pack_get_size("A", "T", "N", &n, &rows, &k, &k, &k, &bytes, &worth) !=
          dnnl_success ||
      !worth || bytes == 0)
    return;
  const size_t offsets_at = (bytes + 63) / 64 * 64;
  Tensor packed = empty({static_cast<int64_t>(offsets_at + n * sizeof(int32_t))}, DType::i8);
  if (pack::gemm_s8u8s32_pack("A", "T", "N", &n, &rows, &k, &k, &k, p.weight.raw(), packed.raw()) !=
      dnnl_success)
    return;
  auto* offsets = reinterpret_cast<int32_t*>(static_cast<char*>(packed.raw()) + offsets_at);
  const int8_t* w = p.weight.data<int8_t>();
  for (int64_t r = 0; r < n; ++r) {
    int32_t sum = 0;
    for (int64_t c = 0; c < k; ++c) sum += w[r * k + c];
    offsets[r] = -128 * sum;
  }
  p.packed = packed;
  p.threads = omp_get_max_threads();
#else
  (void)p;
#endif
}

void CpuBackend::gemm_packed_impl(const Tensor& a, const PackedWeight& w, const Tensor& c,
                                  const Tensor& bias, Activation act) {
  if (!w.packed.defined()) return gemm_weight_as_is(a, w, c, bias, act);
  const int64_t m = a.shape().rows(), n = w.weight.dim(0), k = w.weight.dim(1);
  const float* b = bias.defined() ? bias.data<float>() : nullptr;
  if (w.weight.dtype() == DType::f16) {
    // The f16 rows widened exactly: f32 sums of the f16-rounded operands, as pack_weight's
    // panels hold the weight.
    const Tensor wide = empty({m, k});
    cast_impl(a.view({m, k}), wide);
    fixed_order_gemm(wide.data<float>(), m, k, w.packed.data<float>(), n, c.data<float>(), b, act);
    return;
  }
  if (w.weight.dtype() == DType::bf16) {
    fixed_order_gemm_bf16(static_cast<const uint16_t*>(a.raw()), m, k,
                          static_cast<const uint32_t*>(w.packed.raw()), n, c.data<float>(), b, act);
    return;
  }
  fixed_order_gemm(a.data<float>(), m, k, w.packed.data<float>(), n, c.data<float>(), b, act);
}

}  // namespace tx::cpu
