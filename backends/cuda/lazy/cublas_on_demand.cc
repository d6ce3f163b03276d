// cuBLAS, loaded the first time a CUDA backend calls it rather than when a program starts.
//
// Linked normally, libcublas and libcublasLt (~600 MB) are mapped, relocated and initialised
// by every tx program, CPU runs included: ~0.1 s and ~190 MB resident before main, against
// 0.09 s for a whole CPU start-up without them. So the backend is not linked to cuBLAS; these
// definitions of the few entry points it calls (the names cublas_v2.h maps them to) open the
// library on first use and forward. Kept out of backends/cuda/*.cc: the host emulation of the
// kernels (tests/cuda_emu) brings its own cuBLAS.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

#include "core/error.h"

namespace {

void* library() {
  static void* handle = [] {
    // The soname first (LD_LIBRARY_PATH, the executable's run path, the loader cache), then the
    // library the build found.
    void* h = dlopen(TX_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen(TX_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = dlerror();
      throw tx::Error(tx::str("cuda: cannot load cuBLAS (", TX_CUBLAS_SONAME, " or ",
                              TX_CUBLAS_PATH, "): ", why ? why : "unknown reason",
                              "; add the CUDA toolkit's library directory to LD_LIBRARY_PATH"));
    }
    return h;
  }();
  return handle;
}

template <typename F>
F* entry(const char* name) {
  void* f = dlsym(library(), name);
  TX_CHECK(f, "cuda: cuBLAS (", TX_CUBLAS_SONAME, ") has no ", name,
           "; it is older than the toolkit tx was built with");
  return reinterpret_cast<F*>(f);
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  static auto* f = entry<decltype(cublasCreate_v2)>("cublasCreate_v2");
  return f(handle);
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  static auto* f = entry<decltype(cublasDestroy_v2)>("cublasDestroy_v2");
  return f(handle);
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  static auto* f = entry<decltype(cublasSetStream_v2)>("cublasSetStream_v2");
  return f(handle, stream);
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  static auto* f = entry<decltype(cublasSetMathMode)>("cublasSetMathMode");
  return f(handle, mode);
}

const char* cublasGetStatusString(cublasStatus_t status) {
  static auto* f = entry<decltype(cublasGetStatusString)>("cublasGetStatusString");
  return f(status);
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float* alpha,
                              const float* a, int lda, const float* b, int ldb, const float* beta,
                              float* c, int ldc) {
  static auto* f = entry<decltype(cublasSgemm_v2)>("cublasSgemm_v2");
  return f(handle, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                         cublasOperation_t transb, int m, int n, int k,
                                         const float* alpha, const float* a, int lda,
                                         long long int stride_a, const float* b, int ldb,
                                         long long int stride_b, const float* beta, float* c,
                                         int ldc, long long int stride_c, int batch_count) {
  static auto* f = entry<decltype(cublasSgemmStridedBatched)>("cublasSgemmStridedBatched");
  return f(handle, transa, transb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
           stride_c, batch_count);
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* a, cudaDataType a_type, int lda, const void* b,
                            cudaDataType b_type, int ldb, const void* beta, void* c,
                            cudaDataType c_type, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo) {
  static auto* f = entry<cublasStatus_t(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
      cudaDataType, int, const void*, cudaDataType, int, const void*, void*, cudaDataType, int,
      cublasComputeType_t, cublasGemmAlgo_t)>("cublasGemmEx");
  return f(handle, transa, transb, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, c, c_type,
           ldc, compute, algo);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* a, cudaDataType a_type,
                                          int lda, long long int stride_a, const void* b,
                                          cudaDataType b_type, int ldb, long long int stride_b,
                                          const void* beta, void* c, cudaDataType c_type, int ldc,
                                          long long int stride_c, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  static auto* f = entry<cublasStatus_t(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
      cudaDataType, int, long long int, const void*, cudaDataType, int, long long int, const void*,
      void*, cudaDataType, int, long long int, int, cublasComputeType_t, cublasGemmAlgo_t)>(
      "cublasGemmStridedBatchedEx");
  return f(handle, transa, transb, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb,
           stride_b, beta, c, c_type, ldc, stride_c, batch, compute, algo);
}

}  // extern "C"
