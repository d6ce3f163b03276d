// Conformance: cross_entropy (label smoothing, ignore_index, nll) and cross_entropy_backward.
#include <cmath>
#include <limits>

#include "support/backends.h"
#include "support/reference.h"

namespace {

using tx::Shape;
using tx::Tensor;
using namespace tx::test;

struct CeRef {
  std::vector<double> losses, nll, grad;  // grad: softmax - q per row (0 for ignored rows)
};

// In double: log p = x - logsumexp(x); loss = -sum_v q_v log p_v, q = (1-s) onehot + s / V.
CeRef reference_cross_entropy(const std::vector<float>& logits, int64_t v,
                              const std::vector<int32_t>& targets, float smoothing,
                              int32_t ignore) {
  int64_t rows = targets.size();
  CeRef r;
  r.losses.assign(rows, 0.0);
  r.nll.assign(rows, 0.0);
  r.grad.assign(logits.size(), 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    if (targets[i] == ignore) continue;
    const float* x = logits.data() + i * v;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < v; ++j) mx = std::max(mx, double(x[j]));
    double z = 0;
    for (int64_t j = 0; j < v; ++j) z += std::exp(x[j] - mx);
    double lz = mx + std::log(z);
    double loss = 0;
    for (int64_t j = 0; j < v; ++j) {
      double q = smoothing / double(v) + (j == targets[i] ? 1.0 - smoothing : 0.0);
      double logp = x[j] - lz;
      loss -= q * logp;
      r.grad[i * v + j] = std::exp(logp) - q;
    }
    r.losses[i] = loss;
    r.nll[i] = lz - x[targets[i]];
  }
  return r;
}

struct CeOut {
  std::vector<float> losses, nll;
};

CeOut run_cross_entropy(tx::Backend& be, const std::vector<float>& logits, const Shape& s,
                        const std::vector<int32_t>& targets, float smoothing, int32_t ignore,
                        bool with_nll = true) {
  int64_t rows = s.rows();
  // Garbage in the outputs: ignored rows must be written as 0, not skipped.
  Tensor losses = be.upload(random_vector(rows, 555, 5.0f, 9.0f), {rows});
  Tensor nll;
  if (with_nll) nll = be.upload(random_vector(rows, 556, 5.0f, 9.0f), {rows});
  be.cross_entropy(be.upload(logits, s), be.upload(targets, {rows}), smoothing, ignore, losses,
                   nll);
  CeOut out{fetch(be, losses), {}};
  if (with_nll) out.nll = fetch(be, nll);
  return out;
}

std::vector<int32_t> targets_with_ignored(int64_t rows, int64_t v, int32_t ignore, uint64_t seed) {
  std::vector<int32_t> t = random_ints(rows, seed, 0, static_cast<int32_t>(v));
  for (int64_t i = 0; i < rows; ++i)
    if (i % 3 == 1) t[i] = ignore;  // every third row is padding
  return t;
}

}  // namespace

TEMPLATE_TEST_CASE("cross_entropy forward: smoothing 0 and 0.1, nll, odd shapes", "[cross_entropy]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 1;
  for (const Shape& s : {Shape{1, 1}, Shape{1, 7}, Shape{7, 33}, Shape{33, 65}, Shape{2, 3, 17},
                         Shape{4, 1000}, Shape{40, 1000}})
    for (float smoothing : {0.0f, 0.1f}) {
      int64_t rows = s.rows(), v = s[-1];
      std::vector<float> x = random_vector(s.numel(), ++seed, -4.0f, 4.0f);
      // ignore_index -1 never matches a target here: every row counts.
      std::vector<int32_t> t = random_ints(rows, ++seed, 0, static_cast<int32_t>(v));
      CeOut got = run_cross_entropy(*be, x, s, t, smoothing, -1);
      CeRef want = reference_cross_entropy(x, v, t, smoothing, -1);
      INFO("logits " << s.str() << " smoothing " << smoothing);
      TX_CHECK_OK(compare(got.losses, want.losses, 1e-5, 1e-5));
      TX_CHECK_OK(compare(got.nll, want.nll, 1e-5, 1e-5));
      // Without the optional nll output the losses are the same.
      CeOut no_nll = run_cross_entropy(*be, x, s, t, smoothing, -1, false);
      TX_CHECK_OK(compare(no_nll.losses, want.losses, 1e-5, 1e-5));
    }
}

TEMPLATE_TEST_CASE("cross_entropy forward: large logits stay finite", "[cross_entropy]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const Shape s{5, 33};
  std::vector<float> x = random_vector(s.numel(), 7, -200.0f, 200.0f);
  std::vector<int32_t> t = random_ints(5, 8, 0, 33);
  for (float smoothing : {0.0f, 0.1f}) {
    CeOut got = run_cross_entropy(*be, x, s, t, smoothing, -1);
    CeRef want = reference_cross_entropy(x, 33, t, smoothing, -1);
    INFO("smoothing " << smoothing);
    TX_CHECK_OK(compare(got.losses, want.losses, 1e-5, 1e-4));
    TX_CHECK_OK(compare(got.nll, want.nll, 1e-5, 1e-4));
  }
}

TEMPLATE_TEST_CASE("cross_entropy forward: ignore_index rows give 0 loss and 0 nll",
                   "[cross_entropy]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (int32_t ignore : {0, -100, 3}) {
    const Shape s{10, 17};
    std::vector<float> x = random_vector(s.numel(), 10, -3.0f, 3.0f);
    std::vector<int32_t> t = targets_with_ignored(10, 17, ignore, 11);
    for (float smoothing : {0.0f, 0.1f}) {
      CeOut got = run_cross_entropy(*be, x, s, t, smoothing, ignore);
      CeRef want = reference_cross_entropy(x, 17, t, smoothing, ignore);
      INFO("ignore_index " << ignore << " smoothing " << smoothing);
      for (int i = 0; i < 10; ++i)
        if (t[i] == ignore) {
          CHECK(got.losses[i] == 0.0f);
          CHECK(got.nll[i] == 0.0f);
        }
      TX_CHECK_OK(compare(got.losses, want.losses, 1e-5, 1e-5));
      TX_CHECK_OK(compare(got.nll, want.nll, 1e-5, 1e-5));
    }
  }
}

TEMPLATE_TEST_CASE("cross_entropy_backward: dlogits += dlosses * (softmax - q) against a loop",
                   "[cross_entropy]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 20;
  for (const Shape& s :
       {Shape{1, 1}, Shape{7, 33}, Shape{33, 65}, Shape{2, 5, 1000}, Shape{40, 1000}})
    for (float smoothing : {0.0f, 0.1f}) {
      int64_t rows = s.rows(), v = s[-1];
      std::vector<float> x = random_vector(s.numel(), ++seed, -4.0f, 4.0f);
      std::vector<int32_t> t = targets_with_ignored(rows, v, -7, ++seed);
      std::vector<float> dl = random_vector(rows, ++seed, 0.1f, 2.0f);
      std::vector<float> d0 = random_vector(s.numel(), ++seed);
      CeRef ref = reference_cross_entropy(x, v, t, smoothing, -7);
      std::vector<double> want(d0.size());
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < v; ++j)
          want[i * v + j] = d0[i * v + j] + double(dl[i]) * ref.grad[i * v + j];
      Tensor dx = be->upload(d0, s);
      be->cross_entropy_backward(be->upload(x, s), be->upload(t, {rows}), smoothing, -7,
                                 be->upload(dl, {rows}), dx);
      std::vector<float> got = fetch(*be, dx);
      INFO("logits " << s.str() << " smoothing " << smoothing);
      TX_CHECK_OK(compare(got, want, 1e-5, 1e-6));
      // Ignored rows keep their previous gradient exactly.
      for (int64_t i = 0; i < rows; ++i)
        if (t[i] == -7)
          for (int64_t j = 0; j < v; ++j) REQUIRE(got[i * v + j] == d0[i * v + j]);
    }
}

TEMPLATE_TEST_CASE(
    "cross_entropy_backward without accumulate: dlogits = dlosses * (softmax - q), "
    "in place over the logits, ignored rows 0",
    "[cross_entropy]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 60;
  for (const Shape& s : {Shape{1, 1}, Shape{7, 33}, Shape{2, 5, 1000}, Shape{40, 1000}})
    for (float smoothing : {0.0f, 0.1f}) {
      int64_t rows = s.rows(), v = s[-1];
      std::vector<float> x = random_vector(s.numel(), ++seed, -4.0f, 4.0f);
      std::vector<int32_t> t = targets_with_ignored(rows, v, -7, ++seed);
      std::vector<float> dl = random_vector(rows, ++seed, 0.1f, 2.0f);
      CeRef ref = reference_cross_entropy(x, v, t, smoothing, -7);
      std::vector<double> want(x.size());
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < v; ++j) want[i * v + j] = double(dl[i]) * ref.grad[i * v + j];
      Tensor targets = be->upload(t, {rows}), dlosses = be->upload(dl, {rows});
      INFO("logits " << s.str() << " smoothing " << smoothing);
      // Into a tensor holding garbage: overwritten, not added to.
      Tensor dx = be->upload(random_vector(s.numel(), ++seed), s);
      be->cross_entropy_backward(be->upload(x, s), targets, smoothing, -7, dlosses, dx, false);
      std::vector<float> apart = fetch(*be, dx);
      TX_CHECK_OK(compare(apart, want, 1e-5, 1e-6));
      // Over the logits themselves: the same values, bit for bit.
      Tensor logits = be->upload(x, s);
      be->cross_entropy_backward(logits, targets, smoothing, -7, dlosses, logits, false);
      std::vector<float> in_place = fetch(*be, logits);
      REQUIRE(in_place == apart);
      for (int64_t i = 0; i < rows; ++i)
        if (t[i] == -7)
          for (int64_t j = 0; j < v; ++j) REQUIRE(in_place[i * v + j] == 0.0f);
    }
}

TEMPLATE_TEST_CASE("cross_entropy backward: finite differences, ignored rows get 0 gradient",
                   "[cross_entropy]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (float smoothing : {0.0f, 0.1f})
    for (const Shape& s : {Shape{1, 1}, Shape{4, 5}, Shape{2, 3, 7}}) {
      int64_t rows = s.rows(), v = s[-1];
      std::vector<float> x = random_vector(s.numel(), 30, -2.0f, 2.0f);
      std::vector<int32_t> t = targets_with_ignored(rows, v, -1, 31);
      std::vector<float> r = random_vector(rows, 32);
      auto loss = [&](const std::vector<float>& xv) -> double {
        return dot(run_cross_entropy(*be, xv, s, t, smoothing, -1, false).losses, r);
      };
      Tensor X = be->upload(x, s), T = be->upload(t, {rows}), R = be->upload(r, {rows});
      std::vector<float> g = check_accumulates(*be, s, [&](const Tensor& dx) {
        be->cross_entropy_backward(X, T, smoothing, -1, R, dx);
      });
      INFO("logits " << s.str() << " smoothing " << smoothing);
      TX_CHECK_OK(compare_gradient(g, numeric_gradient(loss, x, 1e-2f), 2e-3, 2e-4));
      for (int64_t i = 0; i < rows; ++i)
        if (t[i] == -1)
          for (int64_t j = 0; j < v; ++j) CHECK(g[i * v + j] == 0.0f);
    }
}
