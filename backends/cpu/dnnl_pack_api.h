// oneDNN's sgemm pack/compute pair: exported by libdnnl (DNNL_API) for its own tests but not
// declared in its public headers, so declared here; CMake checks that they link
// (TX_DNNL_PACKED_SGEMM). Column-major BLAS conventions; a packed operand is passed with
// trans "P". Since oneDNN 1.x: src/cpu/gemm/gemm_pack.hpp.
#pragma once

#include <dnnl.h>

#include <cstddef>
#include <cstdint>

namespace dnnl::impl::cpu {

// Bytes of the packed form of operand `identifier` ("A" or "B") of the product sized M, N, K;
// *pack is false where oneDNN would read the operand as it is.
dnnl_status_t sgemm_pack_get_size(const char* identifier, const char* transa, const char* transb,
                                  const dnnl_dim_t* M, const dnnl_dim_t* N, const dnnl_dim_t* K,
                                  const dnnl_dim_t* lda, const dnnl_dim_t* ldb, size_t* size,
                                  bool* pack);
dnnl_status_t sgemm_pack(const char* identifier, const char* transa, const char* transb,
                         const dnnl_dim_t* M, const dnnl_dim_t* N, const dnnl_dim_t* K,
                         const dnnl_dim_t* lda, const dnnl_dim_t* ldb, const float* src,
                         float* dst);
// C = op(A) op(B) + beta C with alpha 1; transa or transb "P" for a packed operand.
dnnl_status_t sgemm_compute(const char* transa, const char* transb, const dnnl_dim_t* M,
                            const dnnl_dim_t* N, const dnnl_dim_t* K, const float* A,
                            const dnnl_dim_t* lda, const float* B, const dnnl_dim_t* ldb,
                            const float* beta, float* C, const dnnl_dim_t* ldc);

// The int8 pair: A s8, B u8, i32 sums; offsetc "C" adds co[i] to row i of C (column-major).
dnnl_status_t gemm_s8u8s32_pack_get_size(const char* identifier, const char* transa,
                                         const char* transb, const dnnl_dim_t* M,
                                         const dnnl_dim_t* N, const dnnl_dim_t* K,
                                         const dnnl_dim_t* lda, const dnnl_dim_t* ldb, size_t* size,
                                         bool* pack);
dnnl_status_t gemm_s8u8s32_pack(const char* identifier, const char* transa, const char* transb,
                                const dnnl_dim_t* M, const dnnl_dim_t* N, const dnnl_dim_t* K,
                                const dnnl_dim_t* lda, const dnnl_dim_t* ldb, const void* src,
                                void* dst);
dnnl_status_t gemm_s8u8s32_compute(const char* transa, const char* transb, const char* offsetc,
                                   const dnnl_dim_t* M, const dnnl_dim_t* N, const dnnl_dim_t* K,
                                   const int8_t* A, const dnnl_dim_t* lda, const uint8_t* B,
                                   const dnnl_dim_t* ldb, const float* beta, int32_t* C,
                                   const dnnl_dim_t* ldc, const int32_t* co);

}  // namespace dnnl::impl::cpu
