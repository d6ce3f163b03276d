// Label-smoothed cross-entropy fused with log-softmax, forward and backward.
#include <algorithm>
#include <cmath>

#include "backend/device_math.h"
#include "core/error.h"
#include "cpu_backend.h"
#include "parallel.h"
#include "row_math.h"

namespace tx::cpu {

namespace {

void check_targets(const int32_t* targets, int64_t rows, int64_t vocab, int32_t ignore_index,
                   const char* op) {
  for (int64_t r = 0; r < rows; ++r) {
    int32_t t = targets[r];
    TX_CHECK(t == ignore_index || (t >= 0 && t < vocab), op, ": target id ", t, " in row ", r,
             " is outside the vocabulary [0, ", vocab, "); check the vocabulary matches the model");
  }
}

}  // namespace

void CpuBackend::cross_entropy_impl(const Tensor& logits, const Tensor& targets, float smoothing,
                                    int32_t ignore_index, const Tensor& losses, const Tensor& nll) {
  const int64_t vocab = logits.shape().cols(), rows = logits.shape().rows();
  const float* px = logits.data<float>();
  const int32_t* pt = targets.data<int32_t>();
  check_targets(pt, rows, vocab, ignore_index, "cross_entropy");
  float* pl = losses.data<float>();
  float* pn = nll.defined() ? nll.data<float>() : nullptr;
#pragma omp parallel for if (parallel_rows(rows, vocab))
  for (int64_t r = 0; r < rows; ++r) {
    if (pt[r] == ignore_index) {
      pl[r] = 0.0f;
      if (pn) pn[r] = 0.0f;
      continue;
    }
    const float* x = px + r * vocab;
    const float log_z = log_sum_exp(x, vocab);
    float sum_x = 0.0f;
#pragma omp simd reduction(+ : sum_x)
    for (int64_t j = 0; j < vocab; ++j) sum_x += x[j];
    pl[r] = math::smoothed_loss(log_z, x[pt[r]], sum_x, vocab, smoothing);
    if (pn) pn[r] = log_z - x[pt[r]];
  }
}

void CpuBackend::cross_entropy_backward_impl(const Tensor& logits, const Tensor& targets,
                                             float smoothing, int32_t ignore_index,
                                             const Tensor& dlosses, const Tensor& dlogits,
                                             bool accumulate) {
  const int64_t vocab = logits.shape().cols(), rows = logits.shape().rows();
  const float* px = logits.data<float>();
  const int32_t* pt = targets.data<int32_t>();
  check_targets(pt, rows, vocab, ignore_index, "cross_entropy_backward");
  const float* pdl = dlosses.data<float>();
  float* pdx = dlogits.data<float>();
  const float uniform = smoothing / static_cast<float>(vocab);
#pragma omp parallel for if (parallel_rows(rows, vocab))
  for (int64_t r = 0; r < rows; ++r) {
    float* dx = pdx + r * vocab;
    if (pt[r] == ignore_index) {
      if (!accumulate) std::fill(dx, dx + vocab, 0.0f);
      continue;
    }
    const float* x = px + r * vocab;
    const float log_z = log_sum_exp(x, vocab);
    const float g = pdl[r];
    // math::smoothed_grad(x, log_z, uniform) = exp(x - log_z) - uniform, its exp taken a chunk
    // at a time into e before dx is written: dx may be x itself.
    float e[kExpChunk];
    for (int64_t j0 = 0; j0 < vocab; j0 += kExpChunk) {
      const int64_t len = std::min(kExpChunk, vocab - j0);
      exp_affine(x + j0, 1.0f, log_z, e, len);
      if (accumulate) {
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) dx[j0 + j] += g * (e[j] - uniform);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) dx[j0 + j] = g * (e[j] - uniform);
      }
    }
    dx[pt[r]] -= g * (1.0f - smoothing);
  }
}

}  // namespace tx::cpu
