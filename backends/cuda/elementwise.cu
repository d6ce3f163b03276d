// Elementwise operators: bias, residual add, axpy, scale, ReLU, dropout, positions. Each is one
// grid-stride map over the elements (in place allowed: element i reads then writes only i).
#include "backend/device_math.h"
#include "cuda_backend.h"
#include "cuda_common.cuh"

namespace tx::cuda {

namespace {

struct AddBias {
  const float* x;
  const float* bias;
  float* y;
  int64_t cols;
  __device__ void operator()(int64_t i) const { y[i] = x[i] + bias[i % cols]; }
};

struct Add {
  const float* a;
  const float* b;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = a[i] + b[i]; }
};

struct Axpy {
  float alpha;
  const float* x;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] += alpha * x[i]; }
};

struct Scale {
  const float* x;
  float alpha;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = alpha * x[i]; }
};

struct Relu {
  const float* x;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = x[i] > 0.0f ? x[i] : 0.0f; }
};

struct ReluBackward {
  const float* dy;
  const float* y;
  float* dx;
  bool accumulate;
  __device__ void operator()(int64_t i) const {
    const float v = y[i] > 0.0f ? dy[i] : 0.0f;
    dx[i] = accumulate ? dx[i] + v : v;
  }
};

struct Swish {
  const float* x;
  float* y;
  __device__ void operator()(int64_t i) const { y[i] = math::swish(x[i]); }
};

struct SwishBackward {
  const float* dy;
  const float* x;
  float* dx;
  bool accumulate;
  __device__ void operator()(int64_t i) const {
    const float v = dy[i] * math::swish_grad(x[i]);
    dx[i] = accumulate ? dx[i] + v : v;
  }
};

// out[i] (+)= in[i] * keep_i / (1 - p), the mask a pure function of (seed, offset + i).
struct Dropout {
  const float* in;
  float* out;
  float p, keep_scale;
  uint64_t seed, offset;
  bool accumulate;
  __device__ void operator()(int64_t i) const {
    const float v =
        math::dropout_value(in[i], seed, offset + static_cast<uint64_t>(i), p, keep_scale);
    out[i] = accumulate ? out[i] + v : v;
  }
};

// One thread per (t, i) of the [time, d_model] table, looping over the batch: the sinusoid (in
// double) is computed once per position and feature.
struct Positions {
  const float* x;
  float* y;
  int64_t start, d_model, row, batch;
  math::PositionLayout layout;
  __device__ void operator()(int64_t i) const {
    const float pe = math::sinusoid(start + i / d_model, i % d_model, d_model, layout);
    for (int64_t b = 0; b < batch; ++b) y[b * row + i] = x[b * row + i] + pe;
  }
};

}  // namespace

void CudaBackend::add_bias_impl(const Tensor& x, const Tensor& bias, const Tensor& y) {
  launch_map(x.numel(), as_stream(enter()),
             AddBias{x.data<float>(), bias.data<float>(), y.data<float>(), x.shape().cols()},
             "add_bias");
}

void CudaBackend::add_impl(const Tensor& a, const Tensor& b, const Tensor& y) {
  launch_map(a.numel(), as_stream(enter()), Add{a.data<float>(), b.data<float>(), y.data<float>()},
             "add");
}

void CudaBackend::axpy_impl(float alpha, const Tensor& x, const Tensor& y) {
  launch_map(x.numel(), as_stream(enter()), Axpy{alpha, x.data<float>(), y.data<float>()}, "axpy");
}

void CudaBackend::scale_impl(const Tensor& x, float alpha, const Tensor& y) {
  launch_map(x.numel(), as_stream(enter()), Scale{x.data<float>(), alpha, y.data<float>()},
             "scale");
}

void CudaBackend::relu_impl(const Tensor& x, const Tensor& y) {
  launch_map(x.numel(), as_stream(enter()), Relu{x.data<float>(), y.data<float>()}, "relu");
}

void CudaBackend::relu_backward_impl(const Tensor& dy, const Tensor& y, const Tensor& dx,
                                     bool accumulate) {
  launch_map(dy.numel(), as_stream(enter()),
             ReluBackward{dy.data<float>(), y.data<float>(), dx.data<float>(), accumulate},
             "relu_backward");
}

void CudaBackend::dropout_impl(const Tensor& x, float p, uint64_t seed, uint64_t offset,
                               const Tensor& y) {
  launch_map(x.numel(), as_stream(enter()),
             Dropout{x.data<float>(), y.data<float>(), p, 1.0f / (1.0f - p), seed, offset, false},
             "dropout");
}

void CudaBackend::dropout_backward_impl(const Tensor& dy, float p, uint64_t seed, uint64_t offset,
                                        const Tensor& dx, bool accumulate) {
  launch_map(
      dy.numel(), as_stream(enter()),
      Dropout{dy.data<float>(), dx.data<float>(), p, 1.0f / (1.0f - p), seed, offset, accumulate},
      "dropout_backward");
}

void CudaBackend::swish_impl(const Tensor& x, const Tensor& y) {
  launch_map(x.numel(), as_stream(enter()), Swish{x.data<float>(), y.data<float>()}, "swish");
}

void CudaBackend::swish_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& dx,
                                      bool accumulate) {
  launch_map(dy.numel(), as_stream(enter()),
             SwishBackward{dy.data<float>(), x.data<float>(), dx.data<float>(), accumulate},
             "swish_backward");
}

void CudaBackend::add_positions_impl(const Tensor& x, int64_t start, const Tensor& y,
                                     math::PositionLayout layout) {
  const int64_t batch = x.dim(0), time = x.dim(1), d_model = x.dim(2);
  const int64_t row = time * d_model;
  launch_map(row, as_stream(enter()),
             Positions{x.data<float>(), y.data<float>(), start, d_model, row, batch, layout},
             "add_positions");
}

}  // namespace tx::cuda
