// Host emulation of the cuBLAS calls backends/cuda makes: column-major SGEMM, plain and strided
// batched, written from the BLAS definition (double accumulation); under
// CUBLAS_TF32_TENSOR_OP_MATH the operands are first rounded to TF32 (10-bit mantissas, to
// nearest even), as tensor cores read them. See cuda_runtime.h here.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "cuda_runtime.h"

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cudaDataType { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 };
struct cublasContext {
  bool tf32 = false;
};

// x rounded to TF32's 10 mantissa bits, to nearest even (infinities and NaN as they are).
inline float emulated_tf32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7f800000u) != 0x7f800000u) bits = (bits + 0xfffu + ((bits >> 13) & 1u)) & ~0x1fffu;
  std::memcpy(&x, &bits, sizeof bits);
  return x;
}
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
inline cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) {
  h->tf32 = mode == CUBLAS_TF32_TENSOR_OP_MATH;
  return CUBLAS_STATUS_SUCCESS;
}
inline const char* cublasGetStatusString(cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS ? "success" : "invalid value";
}

// C (m x n, ldc) = alpha op(A) op(B) + beta C, column-major; op(A) is m x k, op(B) k x n. Checks
// the leading dimensions as cuBLAS does.
inline cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta,
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
  const auto operand = [h](float x) { return h->tf32 ? emulated_tf32(x) : x; };
  for (int b = 0; b < batch; ++b) {
    const float* a = A + b * sa;
    const float* bb = B + b * sb;
    float* c = C + b * sc;
    for (int l = 0; l < k; ++l)
      for (int i = 0; i < m; ++i)
        op_a[size_t(l) * m + i] =
            operand(ta == CUBLAS_OP_N ? a[i + int64_t(l) * lda] : a[l + int64_t(i) * lda]);
    for (int j = 0; j < n; ++j) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int l = 0; l < k; ++l) {
        const double bv =
            operand(tb == CUBLAS_OP_N ? bb[l + int64_t(j) * ldb] : bb[j + int64_t(l) * ldb]);
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

// The Ex GEMMs with bf16 or f16 operands, f32 output and f32 compute: the operands widened to
// f32 (exactly) over the spans the leading dimensions and strides cover, then the SGEMM above.
inline std::vector<float> emulated_widen(const void* p, cudaDataType type, int ld, int rows,
                                         int cols, long long stride, int batch) {
  if (batch == 0 || rows == 0 || cols == 0) return {};
  const size_t n =
      size_t(stride) * size_t(batch - 1) + size_t(ld) * size_t(cols - 1) + size_t(rows);
  std::vector<float> out(n);
  const uint16_t* h = static_cast<const uint16_t*>(p);
  for (size_t i = 0; i < n; ++i)
    out[i] = type == CUDA_R_16BF ? tx::bf16_to_float(h[i]) : tx::f16_to_float(h[i]);
  return out;
}

inline cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void* alpha, const void* A, cudaDataType a_type, int lda, long long sa, const void* B,
    cudaDataType b_type, int ldb, long long sb, const void* beta, void* C, cudaDataType c_type,
    int ldc, long long sc, int batch, cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (a_type != b_type || (a_type != CUDA_R_16BF && a_type != CUDA_R_16F) || c_type != CUDA_R_32F ||
      compute != CUBLAS_COMPUTE_32F)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m < 0 || n < 0 || k < 0 || batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  // Column-major: A is (ta == N ? m x k : k x m) in columns of lda, B likewise with ldb.
  const bool na = ta == CUBLAS_OP_N, nb = tb == CUBLAS_OP_N;
  const std::vector<float> a = emulated_widen(A, a_type, lda, na ? m : k, na ? k : m, sa, batch);
  const std::vector<float> b = emulated_widen(B, b_type, ldb, nb ? k : n, nb ? n : k, sb, batch);
  return cublasSgemmStridedBatched(h, ta, tb, m, n, k, static_cast<const float*>(alpha), a.data(),
                                   lda, sa, b.data(), ldb, sb, static_cast<const float*>(beta),
                                   static_cast<float*>(C), ldc, sc, batch);
}

inline cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                   int m, int n, int k, const void* alpha, const void* A,
                                   cudaDataType a_type, int lda, const void* B, cudaDataType b_type,
                                   int ldb, const void* beta, void* C, cudaDataType c_type, int ldc,
                                   cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, a_type, lda, 0, B, b_type, ldb, 0,
                                    beta, C, c_type, ldc, 0, 1, compute, algo);
}
