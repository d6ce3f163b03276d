// LayerNorm over the last dimension, forward and backward.
#include <omp.h>

#include <cmath>
#include <vector>

#include "backend/device_math.h"
#include "cpu_backend.h"
#include "parallel.h"

namespace tx::cpu {

namespace {

// One row of layer_norm: out may be in (each element is read before it is written).
void normalize_row(const float* in, const float* gamma, const float* beta, float eps, int64_t d,
                   float* out, float* mean, float* rstd) {
  // Two passes: the one-pass E[x^2] - E[x]^2 cancels catastrophically for large means.
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < d; ++j) sum += in[j];
  const float mu = sum / static_cast<float>(d);
  float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
  for (int64_t j = 0; j < d; ++j) sq += (in[j] - mu) * (in[j] - mu);
  const float rs = math::layer_norm_rstd(sq, d, eps);
#pragma omp simd
  for (int64_t j = 0; j < d; ++j) out[j] = math::layer_norm_apply(in[j], mu, rs, gamma[j], beta[j]);
  *mean = mu;
  *rstd = rs;
}

}  // namespace

void CpuBackend::layer_norm_impl(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 float eps, const Tensor& y, const Tensor& mean,
                                 const Tensor& rstd) {
  const int64_t d = x.shape().cols(), rows = x.shape().rows();
  const float* px = x.data<float>();
  const float* pg = gamma.data<float>();
  const float* pb = beta.data<float>();
  float* py = y.data<float>();
  float* pm = mean.data<float>();
  float* ps = rstd.data<float>();
#pragma omp parallel for if (parallel_rows(rows, d))
  for (int64_t r = 0; r < rows; ++r)
    normalize_row(px + r * d, pg, pb, eps, d, py + r * d, pm + r, ps + r);
}

void CpuBackend::residual_layer_norm_impl(const Tensor& x, const Tensor& sublayer,
                                          const Tensor& gamma, const Tensor& beta, float eps,
                                          const Tensor& y) {
  const int64_t d = x.shape().cols(), rows = x.shape().rows();
  const float* px = x.data<float>();
  const float* psub = sublayer.data<float>();
  const float* pg = gamma.data<float>();
  const float* pb = beta.data<float>();
  float* py = y.data<float>();
#pragma omp parallel for if (parallel_rows(rows, d))
  for (int64_t r = 0; r < rows; ++r) {
    float* out = py + r * d;
    // The residual sum into the output row (add_impl's sums), then normalised in place.
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) out[j] = px[r * d + j] + psub[r * d + j];
    float mean = 0.0f, rstd = 0.0f;
    normalize_row(out, pg, pb, eps, d, out, &mean, &rstd);
  }
}

void CpuBackend::layer_norm_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                          const Tensor& mean, const Tensor& rstd, const Tensor& dx,
                                          const Tensor& dgamma, const Tensor& dbeta,
                                          bool accumulate) {
  const int64_t d = x.shape().cols(), rows = x.shape().rows();
  const float* pdy = dy.data<float>();
  const float* px = x.data<float>();
  const float* pg = gamma.data<float>();
  const float* pm = mean.data<float>();
  const float* ps = rstd.data<float>();
  float* pdx = dx.data<float>();
  const bool parallel = parallel_rows(rows, d);
  const int nthreads = parallel ? omp_get_max_threads() : 1;
  // Per-thread partial sums of dgamma and dbeta, added in thread order: deterministic.
  std::vector<float> partial(static_cast<size_t>(nthreads) * 2 * d, 0.0f);
#pragma omp parallel num_threads(nthreads) if (parallel)
  {
    float* dg = partial.data() + static_cast<size_t>(omp_get_thread_num()) * 2 * d;
    float* db = dg + d;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = px + r * d;
      const float* g = pdy + r * d;
      const float mu = pm[r], rs = ps[r];
      // dx = rstd * (gdy - mean(gdy) - xhat * mean(gdy * xhat)), gdy = gamma * dy
      float mean_gdy = 0.0f, mean_gdy_xhat = 0.0f;
      for (int64_t j = 0; j < d; ++j) {
        const float xhat = (in[j] - mu) * rs;
        const float gdy = pg[j] * g[j];
        mean_gdy += gdy;
        mean_gdy_xhat += gdy * xhat;
        dg[j] += g[j] * xhat;
        db[j] += g[j];
      }
      mean_gdy /= static_cast<float>(d);
      mean_gdy_xhat /= static_cast<float>(d);
      float* out = pdx + r * d;
      for (int64_t j = 0; j < d; ++j) {
        const float v = math::layer_norm_dx(in[j], g[j], pg[j], mu, rs, mean_gdy, mean_gdy_xhat);
        out[j] = accumulate ? out[j] + v : v;
      }
    }
  }
  float* pdg = dgamma.data<float>();
  float* pdb = dbeta.data<float>();
  for (int t = 0; t < nthreads; ++t) {
    const float* dg = partial.data() + static_cast<size_t>(t) * 2 * d;
    for (int64_t j = 0; j < d; ++j) {
      pdg[j] += dg[j];
      pdb[j] += dg[d + j];
    }
  }
}

}  // namespace tx::cpu
