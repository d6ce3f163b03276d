// The int8 operators on the host: per-row quantisation, and the int8 linear layer through
// oneDNN's u8 x s8 -> s32 GEMM with the dequantisation (and bias) in one pass after it.
#include <dnnl.h>

#include <algorithm>
#include <cmath>

#include "backend/device_math.h"
#include "core/error.h"
#include "cpu_backend.h"
#include "parallel.h"
#if TX_DNNL_PACKED_SGEMM
#include "dnnl_pack_api.h"
#endif

namespace tx::cpu {

void CpuBackend::quantize_rows_impl(const Tensor& x, int max_level, const Tensor& q,
                                    const Tensor& scales) {
  const int64_t rows = x.shape().rows(), cols = x.dim(-1);
  const float* px = x.data<float>();
  int8_t* pq = q.data<int8_t>();
  float* ps = scales.data<float>();
#pragma omp parallel for if (parallel_rows(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = px + r * cols;
    float absmax = 0.0f;
#pragma omp simd reduction(max : absmax)
    for (int64_t c = 0; c < cols; ++c) {
      const float a = std::fabs(xr[c]);
      absmax = a > absmax ? a : absmax;  // vectorises where std::max does not (row_math.h)
    }
    const float scale = math::quantize_scale(absmax, max_level);
    ps[r] = scale;
    int8_t* qr = pq + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) qr[c] = math::quantize_value(xr[c], scale, max_level);
  }
}

void CpuBackend::gemm_i8_impl(const Tensor& a, const Tensor& a_scales, const PackedWeight& packed,
                              const Tensor& b_scales, const Tensor& bias, const Tensor& c) {
  const Tensor& b = packed.weight;
  const int64_t m = a.shape().rows(), n = b.dim(0), k = b.dim(1);
  // oneDNN's AVX2 kernels multiply u8 by s8: a + 128 (the sign bit flipped) with 128 as a's
  // zero point gives the same sums.
  i8_shifted_.resize(static_cast<size_t>(m * k));
  const int8_t* pa = a.data<int8_t>();
  uint8_t* shifted = i8_shifted_.data();
#pragma omp parallel for simd if (m * k >= kElementwiseGrain)
  for (int64_t i = 0; i < m * k; ++i) shifted[i] = static_cast<uint8_t>(pa[i]) ^ 0x80u;
  // The i32 sums go into c's own memory (4 bytes each, as the floats that replace them).
  auto* sums = static_cast<int32_t*>(c.raw());
  dnnl_status_t status = dnnl_unimplemented;
#if TX_DNNL_PACKED_SGEMM
  if (packed_usable(packed)) {
    // Column-major as packed: sums^T [n, m] = w [n, k] x shifted^T, the zero point as -128 x
    // each weight row's sum (pack_i8_weight) added to that row.
    const dnnl_dim_t bm = n, bk = k;
    const float beta = 0.0f;
    const auto* offsets =
        reinterpret_cast<const int32_t*>(static_cast<const char*>(packed.packed.raw()) +
                                         packed.packed.nbytes() - n * sizeof(int32_t));
    status = dnnl_success;
    for (int64_t r0 = 0; r0 < m && status == dnnl_success; r0 += kPackRows) {
      const dnnl_dim_t bn = std::min(kPackRows, m - r0);
      status = dnnl::impl::cpu::gemm_s8u8s32_compute(
          "P", "N", "C", &bm, &bn, &bk, packed.packed.data<int8_t>(), &bk, shifted + r0 * k, &bk,
          &beta, sums + r0 * n, &bm, offsets);
    }
  }
#endif
  if (status == dnnl_unimplemented) {
    const int32_t no_offset = 0;
    status = dnnl_gemm_u8s8s32('N', 'T', 'F', m, n, k, 1.0f, shifted, k, 128, b.data<int8_t>(), k,
                               0, 0.0f, sums, n, &no_offset);
  }
  TX_CHECK(status == dnnl_success, "gemm_i8: oneDNN's u8 x s8 GEMM failed (status ",
           static_cast<int>(status), ") for [", m, ", ", k, "] x [", n, ", ", k, "]^T");
  const float* sa = a_scales.data<float>();
  const float* sb = b_scales.data<float>();
  const float* pbias = bias.defined() ? bias.data<float>() : nullptr;
  float* out = c.data<float>();
#pragma omp parallel for if (parallel_rows(m, n))
  for (int64_t r = 0; r < m; ++r) {
    const int32_t* sr = sums + r * n;
    float* yr = out + r * n;
    const float s = sa[r];
    // Each element is read as i32 and written back as f32 in the same slot.
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      yr[j] = math::dequantize(sr[j], s, sb[j], pbias ? pbias[j] : 0.0f);
  }
}

}  // namespace tx::cpu
