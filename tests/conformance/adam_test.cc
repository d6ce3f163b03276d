// Conformance: adam_update (bias correction, grad_scale, decoupled weight decay).
#include <cmath>

#include "support/backends.h"
#include "support/reference.h"

namespace {

using tx::Shape;
using tx::Tensor;
using namespace tx::test;
using Adam = tx::Backend::AdamParams;

// One step of the documented update in double.
void reference_adam(std::vector<double>& param, const std::vector<float>& grad,
                    std::vector<double>& m, std::vector<double>& v, const Adam& p) {
  double b1 = p.beta1, b2 = p.beta2;
  double c1 = 1.0 - std::pow(b1, double(p.step)), c2 = 1.0 - std::pow(b2, double(p.step));
  for (size_t i = 0; i < param.size(); ++i) {
    double g = double(grad[i]) * p.grad_scale;
    m[i] = b1 * m[i] + (1.0 - b1) * g;
    v[i] = b2 * v[i] + (1.0 - b2) * g * g;
    double update = double(p.lr) * (m[i] / c1) / (std::sqrt(v[i] / c2) + double(p.eps));
    param[i] -= update + double(p.lr) * p.weight_decay * param[i];
  }
}

void check_adam_steps(tx::Backend& be, const Shape& s, Adam p, int steps, int64_t first_step,
                      uint64_t seed) {
  size_t n = s.numel();
  std::vector<float> param0 = random_vector(n, seed, -2.0f, 2.0f);
  std::vector<double> param = to_double(param0), m(n, 0.0), v(n, 0.0);
  Tensor P = be.upload(param0, s), M = be.zeros(s), V = be.zeros(s);
  if (first_step > 1) {  // resume from a saved state
    std::vector<float> m0 = random_vector(n, seed + 7, -0.1f, 0.1f);
    std::vector<float> v0 = random_vector(n, seed + 8, 0.0f, 0.01f);
    m = to_double(m0);
    v = to_double(v0);
    M = be.upload(m0, s);
    V = be.upload(v0, s);
  }
  for (int k = 0; k < steps; ++k) {
    p.step = first_step + k;
    std::vector<float> g = random_vector(n, seed + 100 + k);
    be.adam_update(P, be.upload(g, s), M, V, p);
    reference_adam(param, g, m, v, p);
    INFO("adam shape " << s.str() << " step " << p.step << " lr " << p.lr << " eps " << p.eps
                       << " grad_scale " << p.grad_scale << " weight_decay " << p.weight_decay);
    // Absolute tolerances of a few float ulps of the terms (m can cancel to near zero, a
    // parameter can cross zero); a wrong formula errs by orders of magnitude more.
    TX_REQUIRE_OK(compare(fetch(be, M), m, 1e-5, 1e-7 * p.grad_scale));
    TX_REQUIRE_OK(compare(fetch(be, V), v, 1e-5, 1e-9));
    TX_REQUIRE_OK(compare(fetch(be, P), param, 1e-5, 5e-7));
  }
}

}  // namespace

TEMPLATE_TEST_CASE("adam_update forward: several steps against a plain loop (paper defaults)",
                   "[adam]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 1;
  for (const Shape& s : {Shape{1}, Shape{7}, Shape{33, 65}, Shape{100003}}) {
    Adam p;  // lr 1e-3, betas 0.9 / 0.98, eps 1e-9
    check_adam_steps(*be, s, p, 5, 1, seed += 10);
  }
}

TEMPLATE_TEST_CASE("adam_update forward: weight_decay and grad_scale", "[adam]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 100;
  for (const Shape& s : {Shape{1}, Shape{7, 33}, Shape{1000}}) {
    Adam p;
    p.lr = 1e-2f;
    p.weight_decay = 0.01f;
    check_adam_steps(*be, s, p, 4, 1, seed += 10);
    p.weight_decay = 0.0f;
    p.grad_scale = 0.25f;
    check_adam_steps(*be, s, p, 4, 1, seed += 10);
    p.weight_decay = 0.1f;
    p.grad_scale = 3.0f;
    p.beta1 = 0.8f;
    p.beta2 = 0.999f;
    p.eps = 1e-6f;
    check_adam_steps(*be, s, p, 4, 1, seed += 10);
  }
}

TEMPLATE_TEST_CASE("adam_update forward: late steps (bias correction near 1) from saved state",
                   "[adam]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Adam p;
  p.lr = 5e-4f;
  check_adam_steps(*be, {7, 33}, p, 3, 1000, 300);
  check_adam_steps(*be, {7, 33}, p, 3, 17, 310);
}

TEMPLATE_TEST_CASE("adam_update forward: first step moves each parameter by ~lr", "[adam]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // With bias correction the first update is lr * g / (|g| + eps) = lr * sign(g).
  std::vector<float> g = {0.5f, -2.0f, 1e-3f, -1e-3f, 10.0f};
  Tensor P = be->zeros({5}), M = be->zeros({5}), V = be->zeros({5});
  Adam p;
  p.lr = 0.1f;
  be->adam_update(P, be->upload(g, {5}), M, V, p);
  std::vector<float> got = fetch(*be, P);
  for (size_t i = 0; i < g.size(); ++i)
    CHECK(got[i] == Approx(g[i] > 0 ? -0.1 : 0.1).epsilon(1e-5));
}
