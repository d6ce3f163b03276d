// LayerNorm over the last dimension, forward and backward. Rows: one block each, two-pass
// statistics (mean, then squared deviations) like the CPU backend, with math::layer_norm_*.
// dgamma/dbeta: column sums over the rows in a fixed order (deterministic, no atomics).
#include "backend/device_math.h"
#include "column_sum.cuh"
#include "cuda_backend.h"
#include "cuda_common.cuh"

namespace tx::cuda {

namespace {

__global__ void layer_norm_kernel(const float* x, const float* gamma, const float* beta, float eps,
                                  float* y, float* mean, float* rstd, int64_t rows, int64_t d) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = x + r * d;
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) sum += in[j];
    const float mu = block_sum(sum) / static_cast<float>(d);
    float sq = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) sq += (in[j] - mu) * (in[j] - mu);
    const float rs = math::layer_norm_rstd(block_sum(sq), d, eps);
    float* out = y + r * d;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      out[j] = math::layer_norm_apply(in[j], mu, rs, gamma[j], beta[j]);
    if (threadIdx.x == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
  }
}

// dx (+)= rstd * (gamma dy - mean(gamma dy) - xhat * mean(gamma dy xhat)), one block per row.
__global__ void layer_norm_dx_kernel(const float* dy, const float* x, const float* gamma,
                                     const float* mean, const float* rstd, float* dx, int64_t rows,
                                     int64_t d, bool accumulate) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = x + r * d;
    const float* g = dy + r * d;
    const float mu = mean[r], rs = rstd[r];
    float gdy = 0.0f, gdy_xhat = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const float t = gamma[j] * g[j];
      gdy += t;
      gdy_xhat += t * ((in[j] - mu) * rs);
    }
    const float mean_gdy = block_sum(gdy) / static_cast<float>(d);
    const float mean_gdy_xhat = block_sum(gdy_xhat) / static_cast<float>(d);
    float* out = dx + r * d;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const float v = math::layer_norm_dx(in[j], g[j], gamma[j], mu, rs, mean_gdy, mean_gdy_xhat);
      out[j] = accumulate ? out[j] + v : v;
    }
  }
}

// Row r's terms of dgamma[c] and dbeta[c]: dy[r,c] * xhat[r,c] and dy[r,c].
struct DParamsTerms {
  const float *dy, *x, *mean, *rstd;
  int64_t d;
  __device__ void operator()(int64_t r, int64_t c, float (&acc)[2]) const {
    const float g = dy[r * d + c];
    acc[0] += g * ((x[r * d + c] - mean[r]) * rstd[r]);
    acc[1] += g;
  }
};

}  // namespace

void CudaBackend::layer_norm_impl(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  float eps, const Tensor& y, const Tensor& mean,
                                  const Tensor& rstd) {
  const int64_t d = x.shape().cols(), rows = x.shape().rows();
  TX_LAUNCH(layer_norm_kernel, row_blocks(rows), row_threads(d), as_stream(enter()))
  (x.data<float>(), gamma.data<float>(), beta.data<float>(), eps, y.data<float>(),
   mean.data<float>(), rstd.data<float>(), rows, d);
  check_launch("layer_norm");
}

void CudaBackend::layer_norm_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                           const Tensor& mean, const Tensor& rstd, const Tensor& dx,
                                           const Tensor& dgamma, const Tensor& dbeta,
                                           bool accumulate) {
  const int64_t d = x.shape().cols(), rows = x.shape().rows();
  cudaStream_t s = as_stream(enter());
  TX_LAUNCH(layer_norm_dx_kernel, row_blocks(rows), row_threads(d), s)
  (dy.data<float>(), x.data<float>(), gamma.data<float>(), mean.data<float>(), rstd.data<float>(),
   dx.data<float>(), rows, d, accumulate);
  check_launch("layer_norm_backward (dx)");
  const Tensor partial = empty({2 * column_chunks(rows), d});
  column_sums<2>(
      DParamsTerms{dy.data<float>(), x.data<float>(), mean.data<float>(), rstd.data<float>(), d},
      rows, d, ColumnOutputs<2>{{dgamma.data<float>(), dbeta.data<float>()}}, 1.0f,
      partial.data<float>(), s, "layer_norm_backward (dgamma, dbeta)");
}

}  // namespace tx::cuda
