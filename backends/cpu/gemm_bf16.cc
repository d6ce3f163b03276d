// bf16 GEMMs through oneDNN (bf16 operands, f32 sums and output) on the CPUs where it has them:
// gemm_bf16bf16f32 for 2-D, a bf16 matmul primitive for batches; elsewhere widened to f32.
#include <dnnl.h>

#include <cstdint>
#include <string>

#include "core/half.h"
#include "cpu_backend.h"
#include "gemm.h"

// Exported by libdnnl (DNNL_API, extern "C", since oneDNN 1.2) but not declared in its public
// headers. Row-major, as dnnl_sgemm; operands are bf16 bit patterns.
extern "C" dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N,
                                               dnnl_dim_t K, float alpha, const uint16_t* A,
                                               dnnl_dim_t lda, const uint16_t* B, dnnl_dim_t ldb,
                                               float beta, float* C, dnnl_dim_t ldc);

namespace tx::cpu {

namespace {

// Why oneDNN's bf16 GEMM cannot serve here ("" when it can), found once: oneDNN answers
// "unimplemented" on CPUs without AVX-512, and a small product with both transposes must come
// out exact (its integer operands and sums are exact in bf16 and f32), so that a library
// whose convention differed from the one declared above is caught before it trains anything.
std::string probe_bf16_gemm() {
  constexpr int64_t m = 2, n = 3, k = 4;
  uint16_t a[m * k], b[k * n];
  for (int64_t i = 0; i < m * k; ++i) a[i] = float_to_bf16(float(i % 5) - 2.0f);
  for (int64_t i = 0; i < k * n; ++i) b[i] = float_to_bf16(float(i % 7) - 3.0f);
  for (const bool trans : {false, true}) {
    // trans: a read as [k, m] transposed and b as [n, k] transposed, the same buffers.
    float c[m * n];
    const dnnl_status_t status =
        dnnl_gemm_bf16bf16f32(trans ? 'T' : 'N', trans ? 'T' : 'N', m, n, k, 1.0f, a, trans ? m : k,
                              b, trans ? k : n, 0.0f, c, n);
    if (status == dnnl_unimplemented)
      return "this CPU has no bf16 GEMM in oneDNN (it needs AVX-512: AMD Zen 4 or later, Intel "
             "Xeon since Skylake-SP)";
    if (status != dnnl_success)
      return "oneDNN's bf16 GEMM failed its check with status " + std::to_string(int(status));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float want = 0;
        for (int64_t p = 0; p < k; ++p)
          want += bf16_to_float(trans ? a[p * m + i] : a[i * k + p]) *
                  bf16_to_float(trans ? b[j * k + p] : b[p * n + j]);
        if (c[i * n + j] != want)
          return "oneDNN's bf16 GEMM gave a wrong sum in tx's check (" +
                 std::to_string(c[i * n + j]) + " for " + std::to_string(want) + ")";
      }
  }
  return "";
}

const std::string& bf16_gemm_missing() {
  static const std::string reason = probe_bf16_gemm();
  return reason;
}

}  // namespace

std::string CpuBackend::half_gemm_missing(DType dtype) const {
  if (dtype == DType::bf16) return bf16_gemm_missing();
  return "oneDNN has no f16 GEMM for CPUs";
}

void CpuBackend::gemm_half_impl(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                                const Tensor& c, float alpha, float beta) {
  if (a.dtype() != DType::bf16 || !bf16_gemm_missing().empty()) {
    Backend::gemm_half_impl(a, trans_a, b, trans_b, c, alpha, beta);
    return;
  }
  // Attention's batched products (a few dozen rows a head): one matmul primitive for all heads;
  // one oneDNN GEMM call per head ran them at 0.43x f32's batched product (bench/precision).
  if (a.ndim() == 3) {
    gemm_->run_batched(a, trans_a, b, trans_b, c, alpha, beta);
    return;
  }
  const int64_t m = c.dim(0), n = c.dim(1);
  const int64_t k = trans_a ? a.dim(0) : a.dim(1);
  const dnnl_status_t status = dnnl_gemm_bf16bf16f32(
      trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha,
      static_cast<const uint16_t*>(a.raw()), trans_a ? m : k, static_cast<const uint16_t*>(b.raw()),
      trans_b ? k : n, beta, c.data<float>(), n);
  TX_CHECK(status == dnnl_success, "gemm: oneDNN's bf16 GEMM failed with status ", int(status),
           " for c ", c.shape().str());
}

}  // namespace tx::cpu
