// Label-smoothed cross-entropy fused with log-softmax, forward and backward: one block per row,
// the loss formula from math::smoothed_loss / math::smoothed_grad (shared with the CPU backend).
// A target outside [0, V) (other than ignore_index) is recorded for synchronize() to raise, and
// its row is left alone.
#include "backend/device_math.h"
#include "cuda_backend.h"
#include "cuda_common.cuh"

namespace tx::cuda {

namespace {

__global__ void cross_entropy_kernel(const float* logits, const int32_t* targets, float smoothing,
                                     int32_t ignore_index, float* losses, float* nll, int64_t rows,
                                     int64_t vocab, IndexErrorRecord* errors) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int32_t t = targets[r];
    if (t == ignore_index) {
      if (threadIdx.x == 0) {
        losses[r] = 0.0f;
        if (nll) nll[r] = 0.0f;
      }
      continue;
    }
    if (t < 0 || t >= vocab) {
      if (threadIdx.x == 0) record_index_error(errors, kCrossEntropy, t, r, vocab);
      continue;
    }
    const float* x = logits + r * vocab;
    const float log_z = block_log_sum_exp(x, vocab);
    float sum_x = 0.0f;
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) sum_x += x[j];
    sum_x = block_sum(sum_x);
    if (threadIdx.x == 0) {
      losses[r] = math::smoothed_loss(log_z, x[t], sum_x, vocab, smoothing);
      if (nll) nll[r] = log_z - x[t];
    }
  }
}

// dlogits[r] (+)= dlosses[r] * (softmax(logits[r]) - q_r). In place (dlogits == logits, only
// without accumulate) is safe: the row's log-sum-exp is reduced, with the block's barriers,
// before any thread writes, and then each thread reads and writes only its own elements.
__global__ void cross_entropy_backward_kernel(const float* logits, const int32_t* targets,
                                              float smoothing, int32_t ignore_index,
                                              const float* dlosses, float* dlogits, int64_t rows,
                                              int64_t vocab, bool accumulate,
                                              IndexErrorRecord* errors) {
  const float uniform = smoothing / static_cast<float>(vocab);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int32_t t = targets[r];
    if (t == ignore_index) {
      if (!accumulate)
        for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) dlogits[r * vocab + j] = 0.0f;
      continue;
    }
    if (t < 0 || t >= vocab) {
      if (threadIdx.x == 0) record_index_error(errors, kCrossEntropyBackward, t, r, vocab);
      continue;
    }
    const float* x = logits + r * vocab;
    const float log_z = block_log_sum_exp(x, vocab);
    const float g = dlosses[r];
    float* dx = dlogits + r * vocab;
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      const float grad = g * math::smoothed_grad(x[j], log_z, uniform);
      float v = accumulate ? dx[j] + grad : grad;
      if (j == t) v -= g * (1.0f - smoothing);  // in the CPU's order: the row, then the target
      dx[j] = v;
    }
  }
}

}  // namespace

void CudaBackend::cross_entropy_impl(const Tensor& logits, const Tensor& targets, float smoothing,
                                     int32_t ignore_index, const Tensor& losses,
                                     const Tensor& nll) {
  const int64_t vocab = logits.shape().cols(), rows = logits.shape().rows();
  TX_LAUNCH(cross_entropy_kernel, row_blocks(rows), row_threads(vocab), as_stream(enter()))
  (logits.data<float>(), targets.data<int32_t>(), smoothing, ignore_index, losses.data<float>(),
   nll.defined() ? nll.data<float>() : nullptr, rows, vocab, errors_device_);
  check_launch("cross_entropy");
}

void CudaBackend::cross_entropy_backward_impl(const Tensor& logits, const Tensor& targets,
                                              float smoothing, int32_t ignore_index,
                                              const Tensor& dlosses, const Tensor& dlogits,
                                              bool accumulate) {
  const int64_t vocab = logits.shape().cols(), rows = logits.shape().rows();
  TX_LAUNCH(cross_entropy_backward_kernel, row_blocks(rows), row_threads(vocab), as_stream(enter()))
  (logits.data<float>(), targets.data<int32_t>(), smoothing, ignore_index, dlosses.data<float>(),
   dlogits.data<float>(), rows, vocab, accumulate, errors_device_);
  check_launch("cross_entropy_backward");
}

}  // namespace tx::cuda
