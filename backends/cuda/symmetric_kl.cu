// R-Drop's symmetric KL between a batch's two dropout passes, forward and backward: one block per
// pair of rows, the formula from math::kl_term / math::symmetric_kl_grad (shared with the CPU
// backend).
#include "backend/device_math.h"
#include "cuda_backend.h"
#include "cuda_common.cuh"

namespace tx::cuda {

namespace {

// A pair's rows a and b: their log-partitions, KL(p_a || p_b) and KL(p_b || p_a), by the whole
// block (every thread gets them).
struct PairStats {
  float log_z_a, log_z_b, kl_ab, kl_ba;
};

__device__ PairStats block_pair_stats(const float* a, const float* b, int64_t vocab) {
  const float log_z_a = block_log_sum_exp(a, vocab), log_z_b = block_log_sum_exp(b, vocab);
  float kl_ab = 0.0f, kl_ba = 0.0f;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float lp_a = a[j] - log_z_a, lp_b = b[j] - log_z_b;
    kl_ab += math::kl_term(expf(lp_a), lp_a, lp_b);
    kl_ba += math::kl_term(expf(lp_b), lp_b, lp_a);
  }
  kl_ab = block_sum(kl_ab);
  kl_ba = block_sum(kl_ba);
  return {log_z_a, log_z_b, kl_ab, kl_ba};
}

__global__ void symmetric_kl_kernel(const float* logits, const int32_t* targets,
                                    int32_t ignore_index, float* losses, int64_t pairs,
                                    int64_t vocab) {
  for (int64_t r = blockIdx.x; r < pairs; r += gridDim.x) {
    if (targets[r] == ignore_index) {
      if (threadIdx.x == 0) losses[r] = 0.0f;
      continue;
    }
    const PairStats s = block_pair_stats(logits + r * vocab, logits + (pairs + r) * vocab, vocab);
    if (threadIdx.x == 0) losses[r] = 0.5f * (s.kl_ab + s.kl_ba);
  }
}

__global__ void symmetric_kl_backward_kernel(const float* logits, const int32_t* targets,
                                             int32_t ignore_index, const float* dlosses,
                                             float* dlogits, int64_t pairs, int64_t vocab) {
  for (int64_t r = blockIdx.x; r < pairs; r += gridDim.x) {
    if (targets[r] == ignore_index) continue;
    const float *a = logits + r * vocab, *b = logits + (pairs + r) * vocab;
    float *da = dlogits + r * vocab, *db = dlogits + (pairs + r) * vocab;
    const PairStats s = block_pair_stats(a, b, vocab);
    const float g = dlosses[r];
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      const float lp_a = a[j] - s.log_z_a, lp_b = b[j] - s.log_z_b;
      const float p_a = expf(lp_a), p_b = expf(lp_b);
      da[j] += g * math::symmetric_kl_grad(p_a, p_b, lp_a, lp_b, s.kl_ab);
      db[j] += g * math::symmetric_kl_grad(p_b, p_a, lp_b, lp_a, s.kl_ba);
    }
  }
}

}  // namespace

void CudaBackend::symmetric_kl_impl(const Tensor& logits, const Tensor& targets,
                                    int32_t ignore_index, const Tensor& losses) {
  const int64_t vocab = logits.shape().cols(), pairs = targets.numel();
  TX_LAUNCH(symmetric_kl_kernel, row_blocks(pairs), row_threads(vocab), as_stream(enter()))
  (logits.data<float>(), targets.data<int32_t>(), ignore_index, losses.data<float>(), pairs, vocab);
  check_launch("symmetric_kl");
}

void CudaBackend::symmetric_kl_backward_impl(const Tensor& logits, const Tensor& targets,
                                             int32_t ignore_index, const Tensor& dlosses,
                                             const Tensor& dlogits) {
  const int64_t vocab = logits.shape().cols(), pairs = targets.numel();
  TX_LAUNCH(symmetric_kl_backward_kernel, row_blocks(pairs), row_threads(vocab), as_stream(enter()))
  (logits.data<float>(), targets.data<int32_t>(), ignore_index, dlosses.data<float>(),
   dlogits.data<float>(), pairs, vocab);
  check_launch("symmetric_kl_backward");
}

}  // namespace tx::cuda
