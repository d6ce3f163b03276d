// Fused Adam update with bias correction (and optional decoupled weight decay): math::adam_step,
// shared with the CPU backend, one thread per element.
#include "backend/device_math.h"
#include "cuda_backend.h"
#include "cuda_common.cuh"

namespace tx::cuda {

namespace {
struct Adam {
  float* w;
  const float* g;
  float* m;
  float* v;
  math::AdamCoefficients c;
  __device__ void operator()(int64_t i) const { math::adam_step(w[i], g[i], m[i], v[i], c); }
};
}  // namespace

void CudaBackend::adam_update_impl(const Tensor& param, const Tensor& grad, const Tensor& m,
                                   const Tensor& v, const AdamParams& p) {
  const math::AdamCoefficients c =
      math::adam_coefficients(p.lr, p.beta1, p.beta2, p.eps, p.step, p.grad_scale, p.weight_decay);
  launch_map(param.numel(), as_stream(enter()),
             Adam{param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(), c},
             "adam_update");
}

}  // namespace tx::cuda
