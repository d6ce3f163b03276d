// Host emulation of the cuBLAS calls backends/cuda makes: column-major SGEMM, plain and strided
// batched, written from the BLAS definition (double accumulation). See cuda_runtime.h here.
#pragma once

#include <vector>

#include "cuda_runtime.h"

enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 };
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0 };
struct cublasContext {};
using cublasHandle_t = cublasContext*;

inline cublasStatus_t cublasCreate(cublasHandle_t* h) {
  *h = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t h) {
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) {
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) {
  return CUBLAS_STATUS_SUCCESS;
}
inline const char* cublasGetStatusString(cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS ? "success" : "invalid value";
}

// C (m x n, ldc) = alpha op(A) op(B) + beta C, column-major; op(A) is m x k, op(B) k x n. Checks
// the leading dimensions as cuBLAS does.
inline cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t, cublasOperation_t ta,
                                                cublasOperation_t tb, int m, int n, int k,
                                                const float* alpha, const float* A, int lda,
                                                long long sa, const float* B, int ldb, long long sb,
                                                const float* beta, float* C, int ldc, long long sc,
                                                int batch) {
  if (m < 0 || n < 0 || k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < std::max(1, ta == CUBLAS_OP_N ? m : k)) return CUBLAS_STATUS_INVALID_VALUE;
  if (ldb < std::max(1, tb == CUBLAS_OP_N ? k : n)) return CUBLAS_STATUS_INVALID_VALUE;
  if (ldc < std::max(1, m)) return CUBLAS_STATUS_INVALID_VALUE;
  std::vector<float> op_a(static_cast<size_t>(m) * k);  // op(A), m x k, column-major, contiguous
  std::vector<double> acc(static_cast<size_t>(m));
  for (int b = 0; b < batch; ++b) {
    const float* a = A + b * sa;
    const float* bb = B + b * sb;
    float* c = C + b * sc;
    for (int l = 0; l < k; ++l)
      for (int i = 0; i < m; ++i)
        op_a[size_t(l) * m + i] =
            ta == CUBLAS_OP_N ? a[i + int64_t(l) * lda] : a[l + int64_t(i) * lda];
    for (int j = 0; j < n; ++j) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int l = 0; l < k; ++l) {
        const double bv = tb == CUBLAS_OP_N ? bb[l + int64_t(j) * ldb] : bb[j + int64_t(l) * ldb];
        const float* col = op_a.data() + size_t(l) * m;
        for (int i = 0; i < m; ++i) acc[size_t(i)] += double(col[i]) * bv;
      }
      for (int i = 0; i < m; ++i) {
        float& out = c[i + int64_t(j) * ldc];
        out = float(*alpha * acc[size_t(i)] + (*beta == 0.0f ? 0.0 : double(*beta) * out));
      }
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                  int m, int n, int k, const float* alpha, const float* A, int lda,
                                  const float* B, int ldb, const float* beta, float* C, int ldc) {
  return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0,
                                   1);
}
