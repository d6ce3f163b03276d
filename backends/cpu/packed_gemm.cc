// Weights packed once for inference (Backend::pack_weight, gemm_packed). oneDNN's sgemm copies
// both operands into its panel layout on every call; for a weight that every decoding step
// multiplies, packing it once saves that copy (docs/backends.md has the figures).
#include <omp.h>

#include "core/error.h"
#include "cpu_backend.h"
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
#if TX_DNNL_PACKED_SGEMM
  // Column-major, as oneDNN's BLAS-style pack API counts: c^T [N, M] = (w [N, K] read as the
  // transposed K x N) x a^T [K, M]; the weight is BLAS's operand A.
  namespace pack = dnnl::impl::cpu;
  const dnnl_dim_t n = p.weight.dim(0), k = p.weight.dim(1), rows = kPackRows;
  size_t bytes = 0;
  bool worth = false;
  if (pack::sgemm_pack_get_size("A", "T", "N", &n, &rows, &k, &k, &k, &bytes, &worth) !=
          dnnl_success ||
      !worth || bytes == 0)
    return;
  Tensor packed = empty({static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float))});
  if (pack::sgemm_pack("A", "T", "N", &n, &rows, &k, &k, &k, p.weight.data<float>(),
                       packed.data<float>()) != dnnl_success)
    return;
  p.packed = packed;
  p.threads = omp_get_max_threads();
#else
  (void)p;
#endif
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

void CpuBackend::gemm_packed_impl(const Tensor& a, const PackedWeight& w, const Tensor& c) {
#if TX_DNNL_PACKED_SGEMM
  // Any other thread count (fewer crash oneDNN) takes the weight as it is.
  if (packed_usable(w)) {
    // BLAS's M, N, K (column-major, as packed): the weight's rows, a's rows, the inner size.
    const dnnl_dim_t m = w.weight.dim(0), n = a.shape().rows(), k = w.weight.dim(1);
    const float beta = 0.0f;
    const dnnl_status_t status =
        dnnl::impl::cpu::sgemm_compute("P", "N", &m, &n, &k, w.packed.data<float>(), &k,
                                       a.data<float>(), &k, &beta, c.data<float>(), &m);
    TX_CHECK(status == dnnl_success, "gemm_packed: oneDNN's packed sgemm failed with status ",
             static_cast<int>(status), " for a ", a.shape().str(), " and w ",
             w.weight.shape().str());
    return;
  }
#endif
  gemm_weight_as_is(a, w, c);
}

}  // namespace tx::cpu
