// GEMM through cuBLAS on the backend's stream: 2-D (cublasSgemm) and strided batched
// (cublasSgemmStridedBatched), transposes, alpha and beta; exact fp32 unless the backend was
// made with tf32 (the handle's math mode).
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

}  // namespace

void CudaBackend::gemm_impl(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                            const Tensor& c, float alpha, float beta) {
  enter();
  cublasHandle_t handle = static_cast<cublasHandle_t>(cublas_);
  const int64_t m = c.dim(-2), n = c.dim(-1);
  const int64_t k = trans_a ? a.dim(-2) : a.dim(-1);
  const int lda = as_int(a.dim(-1), "lda", c);  // a as stored: [M,K], or [K,M] when trans_a
  const int ldb = as_int(b.dim(-1), "ldb", c);  // b as stored: [K,N], or [N,K] when trans_b
  const int ldc = as_int(n, "ldc", c);
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int im = as_int(m, "M", c), in = as_int(n, "N", c), ik = as_int(k, "K", c);
  cublasStatus_t status;
  if (a.ndim() == 2) {
    status = cublasSgemm(handle, op_b, op_a, in, im, ik, &alpha, b.data<float>(), ldb,
                         a.data<float>(), lda, &beta, c.data<float>(), ldc);
  } else {
    const int batch = as_int(a.dim(0), "batch", c);
    const long long stride_a = a.dim(1) * a.dim(2), stride_b = b.dim(1) * b.dim(2),
                    stride_c = c.dim(1) * c.dim(2);
    status = cublasSgemmStridedBatched(handle, op_b, op_a, in, im, ik, &alpha, b.data<float>(), ldb,
                                       stride_b, a.data<float>(), lda, stride_a, &beta,
                                       c.data<float>(), ldc, stride_c, batch);
  }
  TX_CHECK(status == CUBLAS_STATUS_SUCCESS, "gemm: cuBLAS failed with status ", int(status), " (",
           cublasGetStatusString(status), ") for a ", a.shape().str(), " b ", b.shape().str(),
           " c ", c.shape().str(),
           status == CUBLAS_STATUS_ALLOC_FAILED
               ? "; the GPU is out of memory: use smaller batches (--max-tokens)"
               : "");
}

// cuBLAS reads a weight as it is: nothing to pack.
void CudaBackend::pack_weight_impl(PackedWeight&) {}

void CudaBackend::gemm_packed_impl(const Tensor& a, const PackedWeight& w, const Tensor& c) {
  gemm_weight_as_is(a, w, c);
}

}  // namespace tx::cuda
