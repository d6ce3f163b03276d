// GEMM through cuBLAS on the backend's stream: 2-D (cublasSgemm) and strided batched
// (cublasSgemmStridedBatched), transposes, alpha and beta; exact fp32 unless the backend was
// made with tf32 (the handle's math mode). bf16 / f16 operands through cublasGemmEx and
// cublasGemmStridedBatchedEx with f32 output and f32 sums.
//
// Row-major C[M,N] = op(A) op(B) is column-major C^T[N,M] = op(B)^T op(A)^T, so cuBLAS gets the
// operands swapped: (B, A) with the same transpose flags, m = N, n = M, and the row-major leading
// dimensions (the row lengths as stored).
#include <cublas_v2.h>

#include <limits>

#include "cuda_backend.h"

namespace tx::cuda {

namespace {

int as_int(int64_t v, const char* what, const Tensor& c) {
  TX_CHECK(v <= std::numeric_limits<int>::max(), "gemm: ", what, " = ", v,
           " exceeds cuBLAS's 32-bit limit for c ", c.shape().str(), "; use smaller batches");
  return static_cast<int>(v);
}

// One GEMM as cuBLAS takes it (the operands swapped, see the top of this file).
struct CublasGemm {
  cublasOperation_t op_a, op_b;
  int m, n, k, lda, ldb, ldc;
  int batch = 0;  // 0: a 2-D GEMM
  long long stride_a = 0, stride_b = 0, stride_c = 0;
};

CublasGemm cublas_gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                       const Tensor& c) {
  CublasGemm g;
  const int64_t k = trans_a ? a.dim(-2) : a.dim(-1);
  g.lda = as_int(a.dim(-1), "lda", c);  // a as stored: [M,K], or [K,M] when trans_a
  g.ldb = as_int(b.dim(-1), "ldb", c);  // b as stored: [K,N], or [N,K] when trans_b
  g.ldc = as_int(c.dim(-1), "ldc", c);
  g.op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  g.op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  g.m = as_int(c.dim(-2), "M", c);
  g.n = as_int(c.dim(-1), "N", c);
  g.k = as_int(k, "K", c);
  if (a.ndim() == 3) {
    g.batch = as_int(a.dim(0), "batch", c);
    g.stride_a = a.dim(1) * a.dim(2);
    g.stride_b = b.dim(1) * b.dim(2);
    g.stride_c = c.dim(1) * c.dim(2);
  }
  return g;
}

void check_gemm(cublasStatus_t status, const Tensor& a, const Tensor& b, const Tensor& c) {
  TX_CHECK(status == CUBLAS_STATUS_SUCCESS, "gemm: cuBLAS failed with status ", int(status), " (",
           cublasGetStatusString(status), ") for a ", a.str(), " b ", b.str(), " c ",
           c.shape().str(),
           status == CUBLAS_STATUS_ALLOC_FAILED
               ? "; the GPU is out of memory: use smaller batches (--max-tokens)"
               : "");
}

}  // namespace

void CudaBackend::gemm_impl(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                            const Tensor& c, float alpha, float beta) {
  enter();
  cublasHandle_t handle = static_cast<cublasHandle_t>(cublas_);
  const CublasGemm g = cublas_gemm(a, trans_a, b, trans_b, c);
  cublasStatus_t status;
  if (g.batch == 0)
    status = cublasSgemm(handle, g.op_b, g.op_a, g.n, g.m, g.k, &alpha, b.data<float>(), g.ldb,
                         a.data<float>(), g.lda, &beta, c.data<float>(), g.ldc);
  else
    status = cublasSgemmStridedBatched(
        handle, g.op_b, g.op_a, g.n, g.m, g.k, &alpha, b.data<float>(), g.ldb, g.stride_b,
        a.data<float>(), g.lda, g.stride_a, &beta, c.data<float>(), g.ldc, g.stride_c, g.batch);
  check_gemm(status, a, b, c);
}

// bf16 / f16 operands on the tensor cores, products summed in f32 (CUBLAS_COMPUTE_32F).
void CudaBackend::gemm_half_impl(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                                 const Tensor& c, float alpha, float beta) {
  enter();
  cublasHandle_t handle = static_cast<cublasHandle_t>(cublas_);
  const CublasGemm g = cublas_gemm(a, trans_a, b, trans_b, c);
  const cudaDataType type = a.dtype() == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  cublasStatus_t status;
  if (g.batch == 0)
    status = cublasGemmEx(handle, g.op_b, g.op_a, g.n, g.m, g.k, &alpha, b.raw(), type, g.ldb,
                          a.raw(), type, g.lda, &beta, c.raw(), CUDA_R_32F, g.ldc,
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  else
    status = cublasGemmStridedBatchedEx(handle, g.op_b, g.op_a, g.n, g.m, g.k, &alpha, b.raw(),
                                        type, g.ldb, g.stride_b, a.raw(), type, g.lda, g.stride_a,
                                        &beta, c.raw(), CUDA_R_32F, g.ldc, g.stride_c, g.batch,
                                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  check_gemm(status, a, b, c);
}

// cuBLAS reads a weight as it is: nothing to pack.
void CudaBackend::pack_weight_impl(PackedWeight&) {}

void CudaBackend::gemm_packed_impl(const Tensor& a, const PackedWeight& w, const Tensor& c,
                                   const Tensor& bias, Activation act) {
  gemm_weight_as_is(a, w, c, bias, act);
}

}  // namespace tx::cuda
