// R-Drop's symmetric KL between a batch's two dropout passes, forward and backward.
#include <algorithm>

#include "backend/device_math.h"
#include "cpu_backend.h"
#include "parallel.h"
#include "row_math.h"

namespace tx::cpu {

namespace {

// A pair's rows a and b: their log-partitions, KL(p_a || p_b) and KL(p_b || p_a).
struct PairStats {
  float log_z_a, log_z_b, kl_ab, kl_ba;
};

PairStats pair_stats(const float* a, const float* b, int64_t vocab) {
  const float log_z_a = log_sum_exp(a, vocab), log_z_b = log_sum_exp(b, vocab);
  float kl_ab = 0.0f, kl_ba = 0.0f;
  float ea[kExpChunk], eb[kExpChunk];
  for (int64_t j0 = 0; j0 < vocab; j0 += kExpChunk) {
    const int64_t len = std::min(kExpChunk, vocab - j0);
    exp_affine(a + j0, 1.0f, log_z_a, ea, len);
    exp_affine(b + j0, 1.0f, log_z_b, eb, len);
#pragma omp simd reduction(+ : kl_ab, kl_ba)
    for (int64_t j = 0; j < len; ++j) {
      const float lp_a = a[j0 + j] - log_z_a, lp_b = b[j0 + j] - log_z_b;
      kl_ab += math::kl_term(ea[j], lp_a, lp_b);
      kl_ba += math::kl_term(eb[j], lp_b, lp_a);
    }
  }
  return {log_z_a, log_z_b, kl_ab, kl_ba};
}

}  // namespace

void CpuBackend::symmetric_kl_impl(const Tensor& logits, const Tensor& targets,
                                   int32_t ignore_index, const Tensor& losses) {
  const int64_t vocab = logits.shape().cols(), pairs = targets.numel();
  const float* px = logits.data<float>();
  const int32_t* pt = targets.data<int32_t>();
  float* pl = losses.data<float>();
#pragma omp parallel for if (parallel_rows(pairs, 2 * vocab))
  for (int64_t r = 0; r < pairs; ++r) {
    if (pt[r] == ignore_index) {
      pl[r] = 0.0f;
      continue;
    }
    const PairStats s = pair_stats(px + r * vocab, px + (pairs + r) * vocab, vocab);
    pl[r] = 0.5f * (s.kl_ab + s.kl_ba);
  }
}

void CpuBackend::symmetric_kl_backward_impl(const Tensor& logits, const Tensor& targets,
                                            int32_t ignore_index, const Tensor& dlosses,
                                            const Tensor& dlogits) {
  const int64_t vocab = logits.shape().cols(), pairs = targets.numel();
  const float* px = logits.data<float>();
  const int32_t* pt = targets.data<int32_t>();
  const float* pdl = dlosses.data<float>();
  float* pdx = dlogits.data<float>();
#pragma omp parallel for if (parallel_rows(pairs, 2 * vocab))
  for (int64_t r = 0; r < pairs; ++r) {
    if (pt[r] == ignore_index) continue;
    const float *a = px + r * vocab, *b = px + (pairs + r) * vocab;
    float *da = pdx + r * vocab, *db = pdx + (pairs + r) * vocab;
    const PairStats s = pair_stats(a, b, vocab);
    const float g = pdl[r];
    float ea[kExpChunk], eb[kExpChunk];
    for (int64_t j0 = 0; j0 < vocab; j0 += kExpChunk) {
      const int64_t len = std::min(kExpChunk, vocab - j0);
      exp_affine(a + j0, 1.0f, s.log_z_a, ea, len);
      exp_affine(b + j0, 1.0f, s.log_z_b, eb, len);
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) {
        const float lp_a = a[j0 + j] - s.log_z_a, lp_b = b[j0 + j] - s.log_z_b;
        da[j0 + j] += g * math::symmetric_kl_grad(ea[j], eb[j], lp_a, lp_b, s.kl_ab);
        db[j0 + j] += g * math::symmetric_kl_grad(eb[j], ea[j], lp_b, lp_a, s.kl_ba);
      }
    }
  }
}

}  // namespace tx::cpu
