// Row softmax with scale and prefix masks (key padding, causal), log-softmax, and backwards.
// One block per row (the grid strides over more rows); block reductions in a fixed order. In
// place is safe: every output is written after the row's reductions, by the thread that read
// that element.
#include "backend/device_math.h"
#include "cuda_backend.h"
#include "cuda_common.cuh"

namespace tx::cuda {

namespace {

__global__ void softmax_kernel(const float* x, float* y, int64_t rows, int64_t tq, int64_t tk,
                               int64_t rows_per_batch, const int32_t* lengths, bool causal,
                               float scale) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t length = lengths ? max(lengths[r / rows_per_batch], 0) : -1;
    const int64_t visible = math::visible_keys(r % tq, tq, tk, length, causal);
    const float* in = x + r * tk;
    float* out = y + r * tk;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) m = fmaxf(m, in[j] * scale);
    m = block_max(m);
    float total = 0.0f;
    for (int64_t j = threadIdx.x; j < visible; j += blockDim.x) total += expf(in[j] * scale - m);
    total = block_sum(total);
    const float inv = visible > 0 ? 1.0f / total : 0.0f;
    for (int64_t j = threadIdx.x; j < tk; j += blockDim.x)
      out[j] = j < visible ? expf(in[j] * scale - m) * inv : 0.0f;
  }
}

// dx (+)= scale * y * (dy - sum(dy * y))
__global__ void softmax_backward_kernel(const float* y, const float* dy, float* dx, int64_t rows,
                                        int64_t cols, float scale, bool accumulate) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* yr = y + r * cols;
    const float* dyr = dy + r * cols;
    float dot = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) dot += yr[j] * dyr[j];
    dot = block_sum(dot);
    float* dxr = dx + r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float v = scale * yr[j] * (dyr[j] - dot);
      dxr[j] = accumulate ? dxr[j] + v : v;
    }
  }
}

__global__ void log_softmax_kernel(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = x + r * cols;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, in[j]);
    m = block_max(m);
    float total = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) total += expf(in[j] - m);
    const float log_z = m + logf(block_sum(total));
    float* out = y + r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) out[j] = in[j] - log_z;
  }
}

// dx += dy - exp(y) * sum(dy)
__global__ void log_softmax_backward_kernel(const float* y, const float* dy, float* dx,
                                            int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* dyr = dy + r * cols;
    float total = 0.0f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) total += dyr[j];
    total = block_sum(total);
    const float* yr = y + r * cols;
    float* dxr = dx + r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) dxr[j] += dyr[j] - expf(yr[j]) * total;
  }
}

}  // namespace

void CudaBackend::softmax_impl(const Tensor& x, float scale, const Tensor& key_lengths, bool causal,
                               const Tensor& y) {
  const int64_t tk = x.dim(-1), tq = x.dim(-2), rows = x.shape().rows();
  const int64_t rows_per_batch = rows / x.dim(0);
  const int32_t* lengths = key_lengths.defined() ? key_lengths.data<int32_t>() : nullptr;
  TX_LAUNCH(softmax_kernel, row_blocks(rows), row_threads(tk), as_stream(enter()))
  (x.data<float>(), y.data<float>(), rows, tq, tk, rows_per_batch, lengths, causal, scale);
  check_launch("softmax");
}

void CudaBackend::softmax_backward_impl(const Tensor& y, const Tensor& dy, float scale,
                                        const Tensor& dx, bool accumulate) {
  const int64_t cols = y.shape().cols(), rows = y.shape().rows();
  TX_LAUNCH(softmax_backward_kernel, row_blocks(rows), row_threads(cols), as_stream(enter()))
  (y.data<float>(), dy.data<float>(), dx.data<float>(), rows, cols, scale, accumulate);
  check_launch("softmax_backward");
}

void CudaBackend::log_softmax_impl(const Tensor& x, const Tensor& y) {
  const int64_t cols = x.shape().cols(), rows = x.shape().rows();
  TX_LAUNCH(log_softmax_kernel, row_blocks(rows), row_threads(cols), as_stream(enter()))
  (x.data<float>(), y.data<float>(), rows, cols);
  check_launch("log_softmax");
}

void CudaBackend::log_softmax_backward_impl(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  const int64_t cols = y.shape().cols(), rows = y.shape().rows();
  TX_LAUNCH(log_softmax_backward_kernel, row_blocks(rows), row_threads(cols), as_stream(enter()))
  (y.data<float>(), dy.data<float>(), dx.data<float>(), rows, cols);
  check_launch("log_softmax_backward");
}

}  // namespace tx::cuda
