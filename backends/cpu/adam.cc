// Fused Adam update with bias correction (and optional decoupled weight decay).
#include <cmath>

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
  const double t = static_cast<double>(p.step);
  const float correct1 = static_cast<float>(1.0 / (1.0 - std::pow(p.beta1, t)));
  const float correct2 = static_cast<float>(1.0 / (1.0 - std::pow(p.beta2, t)));
  const float b1 = p.beta1, b2 = p.beta2, lr = p.lr, eps = p.eps;
  const float gs = p.grad_scale, decay = p.lr * p.weight_decay;
#pragma omp parallel for simd if (n >= kElementwiseGrain)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * gs;
    pm[i] = b1 * pm[i] + (1.0f - b1) * gi;
    pv[i] = b2 * pv[i] + (1.0f - b2) * gi * gi;
    const float update = (pm[i] * correct1) / (std::sqrt(pv[i] * correct2) + eps);
    w[i] -= lr * update + decay * w[i];
  }
}

}  // namespace tx::cpu
