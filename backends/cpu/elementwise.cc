// Elementwise operators: bias, residual add, axpy, scale, ReLU, dropout, positions.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/device_math.h"
#include "cpu_backend.h"
#include "parallel.h"
#include "vector_exp.h"

namespace tx::cpu {

namespace {

// y = x + bias per row, then relu_impl's select when kRelu (add_bias_relu: one pass).
template <bool kRelu>
void add_bias_rows(const Tensor& x, const Tensor& bias, const Tensor& y) {
  const int64_t rows = x.shape().rows(), cols = x.shape().cols();
  const float* px = x.data<float>();
  const float* pb = bias.data<float>();
  float* py = y.data<float>();
#pragma omp parallel for if (parallel_rows(rows, cols))
  for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) {
      const float v = px[r * cols + c] + pb[c];
      py[r * cols + c] = kRelu ? (v > 0.0f ? v : 0.0f) : v;
    }
  }
}

}  // namespace

void CpuBackend::add_bias_impl(const Tensor& x, const Tensor& bias, const Tensor& y) {
  add_bias_rows<false>(x, bias, y);
}

void CpuBackend::add_bias_relu_impl(const Tensor& x, const Tensor& bias, const Tensor& y) {
  add_bias_rows<true>(x, bias, y);
}

void CpuBackend::add_bias_swish_impl(const Tensor& x, const Tensor& bias, const Tensor& y) {
  const int64_t rows = x.shape().rows(), cols = x.shape().cols();
  const float* px = x.data<float>();
  const float* pb = bias.data<float>();
  float* py = y.data<float>();
#pragma omp parallel for if (parallel_rows(rows, cols))
  for (int64_t r = 0; r < rows; ++r) swish_row(px + r * cols, pb, py + r * cols, cols);
}

void CpuBackend::add_impl(const Tensor& a, const Tensor& b, const Tensor& y) {
  const int64_t n = a.numel();
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* py = y.data<float>();
#pragma omp parallel for simd if (n >= kElementwiseGrain)
  for (int64_t i = 0; i < n; ++i) py[i] = pa[i] + pb[i];
}

void CpuBackend::axpy_impl(float alpha, const Tensor& x, const Tensor& y) {
  const int64_t n = x.numel();
  const float* px = x.data<float>();
  float* py = y.data<float>();
#pragma omp parallel for simd if (n >= kElementwiseGrain)
  for (int64_t i = 0; i < n; ++i) py[i] += alpha * px[i];
}

void CpuBackend::scale_impl(const Tensor& x, float alpha, const Tensor& y) {
  const int64_t n = x.numel();
  const float* px = x.data<float>();
  float* py = y.data<float>();
#pragma omp parallel for simd if (n >= kElementwiseGrain)
  for (int64_t i = 0; i < n; ++i) py[i] = alpha * px[i];
}

void CpuBackend::relu_impl(const Tensor& x, const Tensor& y) {
  const int64_t n = x.numel();
  const float* px = x.data<float>();
  float* py = y.data<float>();
#pragma omp parallel for simd if (n >= kElementwiseGrain)
  for (int64_t i = 0; i < n; ++i) py[i] = px[i] > 0.0f ? px[i] : 0.0f;
}

void CpuBackend::relu_backward_impl(const Tensor& dy, const Tensor& y, const Tensor& dx,
                                    bool accumulate) {
  const int64_t n = dy.numel();
  const float* pdy = dy.data<float>();
  const float* py = y.data<float>();
  float* pdx = dx.data<float>();
  if (accumulate) {
#pragma omp parallel for simd if (n >= kElementwiseGrain)
    for (int64_t i = 0; i < n; ++i) pdx[i] += py[i] > 0.0f ? pdy[i] : 0.0f;
  } else {
#pragma omp parallel for simd if (n >= kElementwiseGrain)
    for (int64_t i = 0; i < n; ++i) pdx[i] = py[i] > 0.0f ? pdy[i] : 0.0f;
  }
}

namespace {
// out[i] (+)= in[i] * keep_i / (1 - p); the mask is a pure function of (seed, offset + i).
// Each block runs a loop of 32-bit integer math that the compiler vectorises, with the key taken
// once per run of indices that share their high 32 bits (a block crossing 2^32 runs twice).
template <bool kAccumulate>
void apply_dropout(const float* in, float p, uint64_t seed, uint64_t offset, float* out,
                   int64_t n) {
  const float keep_scale = 1.0f / (1.0f - p);
  const auto run = [&](int64_t begin, int64_t end) {
    const uint64_t first = offset + static_cast<uint64_t>(begin);
    const uint32_t key = dropout_key(seed, first);
    const uint32_t low = static_cast<uint32_t>(first);
#pragma omp simd
    for (int64_t j = 0; j < end - begin; ++j) {
      const float v = math::dropout_value_keyed(in[begin + j], key, low + static_cast<uint32_t>(j),
                                                p, keep_scale);
      out[begin + j] = kAccumulate ? out[begin + j] + v : v;
    }
  };
  constexpr int64_t kBlock = 4096;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for if (n >= kElementwiseGrain)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kBlock, end = std::min(n, begin + kBlock);
    // The first element whose index has the next high 32 bits, relative to the block.
    const uint64_t first = offset + static_cast<uint64_t>(begin);
    const uint64_t to_boundary = (((first >> 32) + 1) << 32) - first;
    const int64_t split =
        to_boundary < static_cast<uint64_t>(end - begin) ? begin + int64_t(to_boundary) : end;
    run(begin, split);
    if (split < end) run(split, end);
  }
}
}  // namespace

void CpuBackend::dropout_impl(const Tensor& x, float p, uint64_t seed, uint64_t offset,
                              const Tensor& y) {
  apply_dropout<false>(x.data<float>(), p, seed, offset, y.data<float>(), x.numel());
}

void CpuBackend::dropout_backward_impl(const Tensor& dy, float p, uint64_t seed, uint64_t offset,
                                       const Tensor& dx, bool accumulate) {
  if (accumulate)
    apply_dropout<true>(dy.data<float>(), p, seed, offset, dx.data<float>(), dy.numel());
  else
    apply_dropout<false>(dy.data<float>(), p, seed, offset, dx.data<float>(), dy.numel());
}

void CpuBackend::swish_impl(const Tensor& x, const Tensor& y) {
  const int64_t n = x.numel();
  const float* px = x.data<float>();
  float* py = y.data<float>();
  // In chunks of whole vectors, each through the vector expf (vector_exp.h).
  constexpr int64_t kChunk = 1024;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for if (n >= kElementwiseGrain)
  for (int64_t c = 0; c < chunks; ++c)
    swish_row(px + c * kChunk, nullptr, py + c * kChunk, std::min(kChunk, n - c * kChunk));
}

void CpuBackend::swish_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& dx,
                                     bool accumulate) {
  const int64_t n = dy.numel();
  const float* pdy = dy.data<float>();
  const float* px = x.data<float>();
  float* pdx = dx.data<float>();
  constexpr int64_t kChunk = 1024;  // whole vectors, each through the vector expf
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for if (n >= kElementwiseGrain)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t len = std::min(kChunk, n - c * kChunk);
    // swish_grad_row adds; a chunk is zeroed while it sits in L1, not as a separate pass.
    if (!accumulate) std::fill(pdx + c * kChunk, pdx + c * kChunk + len, 0.0f);
    swish_grad_row(pdy + c * kChunk, px + c * kChunk, pdx + c * kChunk, len);
  }
}

void CpuBackend::add_positions_impl(const Tensor& x, int64_t start, const Tensor& y,
                                    math::PositionLayout layout) {
  const int64_t batch = x.dim(0), time = x.dim(1), d_model = x.dim(2);
  // math::sinusoid works in double. Positions up to kKeptPositions are computed once and kept
  // (grown by doubling); beyond, each call computes its own rows.
  constexpr int64_t kKeptPositions = 1 << 14;
  std::vector<float> own;
  const float* table = nullptr;
  if (start + time <= kKeptPositions) {
    if (positions_width_ != d_model || positions_layout_ != layout) {
      positions_.clear();
      positions_width_ = d_model;
      positions_layout_ = layout;
    }
    const auto known = static_cast<int64_t>(positions_.size()) / d_model;
    if (known < start + time) {
      const int64_t rows = std::min(kKeptPositions, std::max(start + time, 2 * known));
      positions_.resize(static_cast<size_t>(rows * d_model));
      for (int64_t t = known; t < rows; ++t)
        for (int64_t i = 0; i < d_model; ++i)
          positions_[t * d_model + i] = math::sinusoid(t, i, d_model, layout);
    }
    table = positions_.data() + start * d_model;
  } else {
    own.resize(static_cast<size_t>(time * d_model));
    for (int64_t t = 0; t < time; ++t)
      for (int64_t i = 0; i < d_model; ++i)
        own[t * d_model + i] = math::sinusoid(start + t, i, d_model, layout);
    table = own.data();
  }
  const float* px = x.data<float>();
  float* py = y.data<float>();
  const int64_t row = time * d_model;
#pragma omp parallel for if (parallel_rows(batch, row))
  for (int64_t b = 0; b < batch; ++b) {
#pragma omp simd
    for (int64_t i = 0; i < row; ++i) py[b * row + i] = px[b * row + i] + table[i];
  }
}

}  // namespace tx::cpu
