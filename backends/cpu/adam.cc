// Fused Adam update with bias correction (and optional decoupled weight decay).
#include "backend/device_math.h"
#include "cpu_backend.h"
#include "parallel.h"

namespace tx::cpu {

void CpuBackend::adam_update_impl(const Tensor& param, const Tensor& grad, const Tensor& m,
                                  const Tensor& v, const AdamParams& p) {
  const int64_t n = param.numel();
  float* w = param.data<float>();
  const float* g = grad.data<float>();
  float* pm = m.data<float>();
  float* pv = v.data<float>();
  const math::AdamCoefficients c =
      math::adam_coefficients(p.lr, p.beta1, p.beta2, p.eps, p.step, p.grad_scale, p.weight_decay);
#pragma omp parallel for simd if (n >= kElementwiseGrain)
  for (int64_t i = 0; i < n; ++i) math::adam_step(w[i], g[i], pm[i], pv[i], c);
}

}  // namespace tx::cpu
