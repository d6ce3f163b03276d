// Gradient checks for graph/nn tests: tape gradients against finite differences, and helpers.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "core/rng.h"
#include "graph/graph.h"
#include "nn/parameters.h"

namespace tx::test {

inline std::unique_ptr<Backend> cpu_backend() {
  register_builtin_backends();
  return create_backend("cpu");
}

inline bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Moves biases and LayerNorm parameters off their 0/1 init so no gradient is special-cased.
inline void perturb_params(Backend& be, const nn::ParameterSet& params, Rng& rng) {
  for (const auto& item : params.items()) {
    if (!ends_with(item.first, ".bias") && !ends_with(item.first, "norm.weight")) continue;
    std::vector<float> h = be.download<float>(item.second->value);
    for (float& v : h) v += 0.2f * rng.normal();
    be.copy_from_host(h.data(), item.second->value);
  }
}

inline std::vector<float> random_normal(Rng& rng, int64_t n, float stddev = 1.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = stddev * rng.normal();
  return v;
}

struct GradReport {
  bool ok = true;
  int64_t checked = 0;
  int64_t remeasured = 0;  // elements measured again at a smaller step (see compare)
  double max_err = 0, max_fd = 0, rel_l2 = 0;
  std::string detail;  // the worst element

  std::string str() const {
    return std::to_string(checked) + " elements (" + std::to_string(remeasured) +
           " remeasured), max |fd| " + std::to_string(max_fd) + ", max error " +
           std::to_string(max_err) + ", relative L2 " + std::to_string(rel_l2) + "; worst " +
           detail;
  }
};

// Checks d/dv of loss = sum(forward() * r) for chosen Vars v. The loss is computed on the host
// in double from a no-grad forward, so the finite differences see only float32 forward noise.
class GradientChecker {
 public:
  GradientChecker(Backend& be, Graph& g, std::function<Var()> forward, std::vector<float> r)
      : be_(be), g_(g), forward_(std::move(forward)), r_(std::move(r)) {}

  double loss() {
    NoGradScope no_grad(g_);
    std::vector<float> y = be_.download<float>(forward_()->value);
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += double(y[i]) * r_[i];
    return s;
  }

  // One forward and backward with the tape; afterwards v->grad holds the analytic gradients.
  void run_backward() {
    Var y = forward_();
    g_.backward(y, be_.upload(r_, y->value.shape()));
  }

  // Compares v's analytic gradient (after run_backward) with central differences on every
  // element, or on a random sample of max_checks elements of larger tensors.
  // Element i passes when |g - fd| <= rtol * max|fd| + atol; the whole tensor also needs a
  // relative L2 error below rel_l2_max unless its gradient is at the noise floor.
  GradReport compare(const Var& v, double eps = 1e-2, int64_t max_checks = 256, double rtol = 2e-2,
                     double atol = 1e-3, double rel_l2_max = 1e-2) {
    const Tensor& t = v->value;
    std::vector<float> analytic =
        v->grad.defined() ? be_.download<float>(v->grad) : std::vector<float>(t.numel(), 0.0f);
    std::vector<int64_t> idx(t.numel());
    std::iota(idx.begin(), idx.end(), 0);
    if (t.numel() > max_checks) {
      Rng pick(12345 + t.numel());
      for (int64_t i = 0; i < max_checks; ++i)  // partial Fisher-Yates
        std::swap(idx[i], idx[i + int64_t(pick.uniform() * (t.numel() - i))]);
      idx.resize(max_checks);
    }
    std::vector<float> host = be_.download<float>(t);
    const double at = loss();
    // The central, forward and backward differences at step h, each divided by the step
    // actually applied after rounding to float.
    auto estimates = [&](int64_t i, double h) {
      const float orig = host[i], hi = orig + float(h), lo = orig - float(h);
      host[i] = hi;
      be_.copy_from_host(host.data(), t);
      const double up = loss();
      host[i] = lo;
      be_.copy_from_host(host.data(), t);
      const double down = loss();
      host[i] = orig;
      be_.copy_from_host(host.data(), t);
      return std::vector<double>{(up - down) / (double(hi) - double(lo)),
                                 (up - at) / (double(hi) - double(orig)),
                                 (at - down) / (double(orig) - double(lo))};
    };
    std::vector<double> fd(idx.size());
    for (size_t k = 0; k < idx.size(); ++k) fd[k] = estimates(idx[k], eps)[0];

    GradReport rep;
    rep.checked = int64_t(idx.size());
    for (double f : fd) rep.max_fd = std::max(rep.max_fd, std::abs(f));
    const double tol = rtol * rep.max_fd + atol;
    // Through whole layers one perturbation moves many ReLU inputs: a kink inside the step
    // bends a central difference (by 10% and more, measured), and an operating point right
    // beside a kink has only a one-sided derivative. So an element that disagrees by more than
    // 0.5% of the largest gradient is measured again at eps/4 and eps/16, centrally and
    // one-sidedly, and the estimate closest to the tape stands: a wrong gradient disagrees with
    // every estimate at every step; a kink bends only those whose interval holds it.
    for (size_t k = 0; k < idx.size(); ++k) {
      const double a = analytic[idx[k]];
      if (std::abs(a - fd[k]) <= 5e-3 * rep.max_fd + 1e-4) continue;
      ++rep.remeasured;
      for (double h : {eps / 4, eps / 16})
        for (double f : estimates(idx[k], h))
          if (std::abs(a - f) < std::abs(a - fd[k])) fd[k] = f;
    }
    double err2 = 0, fd2 = 0, worst = -1;
    for (size_t k = 0; k < idx.size(); ++k) {
      double a = analytic[idx[k]], e = std::abs(a - fd[k]);
      err2 += e * e;
      fd2 += fd[k] * fd[k];
      rep.max_err = std::max(rep.max_err, e);
      double excess = e - tol;
      if (excess > 0) rep.ok = false;
      if (excess > worst) {
        worst = excess;
        rep.detail = "element " + std::to_string(idx[k]) + ": tape " + std::to_string(a) +
                     " vs finite difference " + std::to_string(fd[k]);
      }
    }
    rep.rel_l2 = fd2 > 0 ? std::sqrt(err2 / fd2) : 0.0;
    if (rep.max_fd > 10 * atol && rep.rel_l2 >= rel_l2_max) rep.ok = false;
    return rep;
  }

 private:
  Backend& be_;
  Graph& g_;
  std::function<Var()> forward_;
  std::vector<float> r_;
};

}  // namespace tx::test
