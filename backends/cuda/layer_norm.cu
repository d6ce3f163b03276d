// LayerNorm over the last dimension, forward and backward. Rows: one block each, two-pass
// statistics (mean, then squared deviations) like the CPU backend, with math::layer_norm_*.
// dgamma/dbeta: column sums over the rows in a fixed order (deterministic, no atomics).
#include "backend/device_math.h"
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

// dx += rstd * (gamma dy - mean(gamma dy) - xhat * mean(gamma dy xhat)), one block per row.
__global__ void layer_norm_dx_kernel(const float* dy, const float* x, const float* gamma,
                                     const float* mean, const float* rstd, float* dx, int64_t rows,
                                     int64_t d) {
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
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      out[j] += math::layer_norm_dx(in[j], g[j], gamma[j], mu, rs, mean_gdy, mean_gdy_xhat);
  }
}

constexpr int kColumns = 32;   // columns per block (one warp wide)
constexpr int kRowLanes = 16;  // threads splitting the rows of each column

// dgamma[c] += sum_r dy[r,c] * xhat[r,c]; dbeta[c] += sum_r dy[r,c]. Block (32, 16): thread
// (tx, ty) sums rows ty, ty + 16, ... of column c; the 16 partials are added in order.
__global__ void layer_norm_dparams_kernel(const float* dy, const float* x, const float* mean,
                                          const float* rstd, float* dgamma, float* dbeta,
                                          int64_t rows, int64_t d) {
  __shared__ float sg[kRowLanes][kColumns + 1];
  __shared__ float sb[kRowLanes][kColumns + 1];
  const int64_t c = blockIdx.x * int64_t(kColumns) + threadIdx.x;
  float acc_g = 0.0f, acc_b = 0.0f;
  if (c < d) {
    for (int64_t r = threadIdx.y; r < rows; r += kRowLanes) {
      const float g = dy[r * d + c];
      acc_g += g * ((x[r * d + c] - mean[r]) * rstd[r]);
      acc_b += g;
    }
  }
  sg[threadIdx.y][threadIdx.x] = acc_g;
  sb[threadIdx.y][threadIdx.x] = acc_b;
  __syncthreads();
  if (threadIdx.y == 0 && c < d) {
    float tg = 0.0f, tb = 0.0f;
    for (int i = 0; i < kRowLanes; ++i) {
      tg += sg[i][threadIdx.x];
      tb += sb[i][threadIdx.x];
    }
    dgamma[c] += tg;
    dbeta[c] += tb;
  }
}

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
                                           const Tensor& dgamma, const Tensor& dbeta) {
  const int64_t d = x.shape().cols(), rows = x.shape().rows();
  cudaStream_t s = as_stream(enter());
  TX_LAUNCH(layer_norm_dx_kernel, row_blocks(rows), row_threads(d), s)
  (dy.data<float>(), x.data<float>(), gamma.data<float>(), mean.data<float>(), rstd.data<float>(),
   dx.data<float>(), rows, d);
  check_launch("layer_norm_backward (dx)");
  const int64_t column_blocks = (d + kColumns - 1) / kColumns;
  TX_CHECK(column_blocks <= 0x7fffffff, "layer_norm_backward: d_model ", d, " is too large");
  TX_LAUNCH(layer_norm_dparams_kernel, static_cast<unsigned>(column_blocks),
            dim3(kColumns, kRowLanes), s)
  (dy.data<float>(), x.data<float>(), mean.data<float>(), rstd.data<float>(), dgamma.data<float>(),
   dbeta.data<float>(), rows, d);
  check_launch("layer_norm_backward (dgamma, dbeta)");
}

}  // namespace tx::cuda
