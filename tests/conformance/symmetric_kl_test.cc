// Conformance: symmetric_kl (R-Drop's consistency loss between a batch's two passes) and
// symmetric_kl_backward.
#include <cmath>

#include "support/backends.h"
#include "support/reference.h"

namespace {

using tx::Shape;
using tx::Tensor;
using namespace tx::test;

// In double, pair r = rows r and pairs + r: loss = 1/2 (KL(p || q) + KL(q || p)), and its
// gradient by the chain rule through each row's log-softmax written out element by element:
// d loss / d x_a,j = sum_v d loss / d lp_a,v * (delta_vj - p_a,j), with d loss / d lp_a,v =
// 1/2 (p_a,v (lp_a,v - lp_b,v) + p_a,v - p_b,v).
struct KlRef {
  std::vector<double> losses, grad;
};

KlRef reference_symmetric_kl(const std::vector<float>& logits, int64_t v,
                             const std::vector<int32_t>& targets, int32_t ignore) {
  const int64_t pairs = targets.size();
  KlRef r;
  r.losses.assign(pairs, 0.0);
  r.grad.assign(logits.size(), 0.0);
  for (int64_t i = 0; i < pairs; ++i) {
    if (targets[i] == ignore) continue;
    const int64_t rows[2] = {i, pairs + i};
    const std::vector<double> lp[2] = {log_softmax_row(logits.data() + rows[0] * v, v),
                                       log_softmax_row(logits.data() + rows[1] * v, v)};
    double loss = 0;
    for (int64_t j = 0; j < v; ++j)
      loss += 0.5 * (std::exp(lp[0][j]) - std::exp(lp[1][j])) * (lp[0][j] - lp[1][j]);
    r.losses[i] = loss;
    for (int side = 0; side < 2; ++side) {
      const std::vector<double>&self = lp[side], &other = lp[1 - side];
      std::vector<double> d_lp(v);
      for (int64_t k = 0; k < v; ++k)
        d_lp[k] = 0.5 * (std::exp(self[k]) * (self[k] - other[k]) + std::exp(self[k]) -
                         std::exp(other[k]));
      for (int64_t j = 0; j < v; ++j) {
        double g = 0;
        for (int64_t k = 0; k < v; ++k) g += d_lp[k] * ((k == j ? 1.0 : 0.0) - std::exp(self[j]));
        r.grad[rows[side] * v + j] = g;
      }
    }
  }
  return r;
}

std::vector<float> run_symmetric_kl(tx::Backend& be, const std::vector<float>& logits,
                                    const Shape& s, const std::vector<int32_t>& targets,
                                    int32_t ignore) {
  const int64_t pairs = targets.size();
  // Garbage in the output: ignored pairs must be written as 0, not skipped.
  Tensor losses = be.upload(random_vector(pairs, 557, 5.0f, 9.0f), {pairs});
  be.symmetric_kl(be.upload(logits, s), be.upload(targets, {pairs}), ignore, losses);
  return fetch(be, losses);
}

std::vector<int32_t> pair_targets(int64_t pairs, int32_t ignore, uint64_t seed) {
  std::vector<int32_t> t = random_ints(pairs, seed, 0, 50);
  for (int64_t i = 0; i < pairs; ++i)
    if (i % 3 == 1) t[i] = ignore;  // every third pair is padding
  return t;
}

}  // namespace

TEMPLATE_TEST_CASE("symmetric_kl forward: against loops in double, ignored pairs 0",
                   "[symmetric_kl]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 1;
  for (const Shape& s : {Shape{2, 1}, Shape{2, 7}, Shape{14, 33}, Shape{2, 3, 65}, Shape{8, 1000},
                         Shape{4, 2, 1500}})
    for (float spread : {1.0f, 4.0f}) {
      const int64_t pairs = s.rows() / 2, v = s[-1];
      std::vector<float> x = random_vector(s.numel(), ++seed, -spread, spread);
      std::vector<int32_t> t = pair_targets(pairs, -3, ++seed);
      std::vector<float> got = run_symmetric_kl(*be, x, s, t, -3);
      KlRef want = reference_symmetric_kl(x, v, t, -3);
      INFO("logits " << s.str() << " spread " << spread);
      TX_CHECK_OK(compare(got, want.losses, 1e-4, 1e-6));
      for (int64_t i = 0; i < pairs; ++i) {
        if (t[i] == -3) CHECK(got[i] == 0.0f);
        if (t[i] != -3 && v > 1) CHECK(got[i] > 0.0f);  // two random rows differ
      }
    }
}

TEMPLATE_TEST_CASE("symmetric_kl forward: equal rows give 0, large logits stay finite",
                   "[symmetric_kl]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const int64_t v = 33;
  std::vector<float> half = random_vector(3 * v, 70, -200.0f, 200.0f);
  std::vector<float> x = half;
  x.insert(x.end(), half.begin(), half.end());
  std::vector<int32_t> t{1, 2, 3};
  std::vector<float> same = run_symmetric_kl(*be, x, {6, v}, t, -1);
  for (float l : same) CHECK(std::abs(l) < 1e-5f);
  // The second pass's rows in another order: finite and equal to the reference.
  std::vector<float> y = half;
  for (int64_t i = 0; i < 3; ++i)
    y.insert(y.end(), half.begin() + ((i + 1) % 3) * v, half.begin() + ((i + 1) % 3 + 1) * v);
  std::vector<float> got = run_symmetric_kl(*be, y, {6, v}, t, -1);
  KlRef want = reference_symmetric_kl(y, v, t, -1);
  for (float l : got) CHECK(std::isfinite(l));
  TX_CHECK_OK(compare(got, want.losses, 1e-4, 1e-3));
}

TEMPLATE_TEST_CASE("symmetric_kl_backward: adds dlosses * the gradient, against loops",
                   "[symmetric_kl]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 20;
  for (const Shape& s : {Shape{2, 1}, Shape{14, 33}, Shape{2, 3, 65}, Shape{8, 600}}) {
    const int64_t pairs = s.rows() / 2, v = s[-1];
    std::vector<float> x = random_vector(s.numel(), ++seed, -3.0f, 3.0f);
    std::vector<int32_t> t = pair_targets(pairs, -7, ++seed);
    std::vector<float> dl = random_vector(pairs, ++seed, 0.1f, 2.0f);
    std::vector<float> d0 = random_vector(s.numel(), ++seed);
    KlRef ref = reference_symmetric_kl(x, v, t, -7);
    std::vector<double> want(d0.size());
    for (int64_t row = 0; row < s.rows(); ++row)
      for (int64_t j = 0; j < v; ++j)
        want[row * v + j] = d0[row * v + j] + double(dl[row % pairs]) * ref.grad[row * v + j];
    Tensor dx = be->upload(d0, s);
    be->symmetric_kl_backward(be->upload(x, s), be->upload(t, {pairs}), -7, be->upload(dl, {pairs}),
                              dx);
    std::vector<float> got = fetch(*be, dx);
    INFO("logits " << s.str());
    TX_CHECK_OK(compare(got, want, 1e-4, 1e-6));
    // Both rows of an ignored pair keep their previous gradient exactly.
    for (int64_t row = 0; row < s.rows(); ++row)
      if (t[row % pairs] == -7)
        for (int64_t j = 0; j < v; ++j) REQUIRE(got[row * v + j] == d0[row * v + j]);
  }
}

TEMPLATE_TEST_CASE("symmetric_kl backward: finite differences", "[symmetric_kl]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (const Shape& s : {Shape{2, 2}, Shape{6, 5}, Shape{2, 3, 7}}) {
    const int64_t pairs = s.rows() / 2;
    std::vector<float> x = random_vector(s.numel(), 30, -2.0f, 2.0f);
    std::vector<int32_t> t = pair_targets(pairs, -1, 31);
    std::vector<float> r = random_vector(pairs, 32);
    auto loss = [&](const std::vector<float>& xv) -> double {
      return dot(run_symmetric_kl(*be, xv, s, t, -1), r);
    };
    Tensor X = be->upload(x, s), T = be->upload(t, {pairs}), R = be->upload(r, {pairs});
    std::vector<float> g = check_accumulates(
        *be, s, [&](const Tensor& dx) { be->symmetric_kl_backward(X, T, -1, R, dx); });
    INFO("logits " << s.str());
    TX_CHECK_OK(compare_gradient(g, numeric_gradient(loss, x, 1e-2f), 2e-3, 2e-4));
  }
}

TEMPLATE_TEST_CASE("symmetric_kl: shape errors name the operator and the rule", "[symmetric_kl]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  using Catch::Contains;
  Tensor odd = be->zeros({3, 5}), even = be->zeros({4, 5});
  Tensor t2 = be->upload(std::vector<int32_t>{1, 2}, {2});
  Tensor t3 = be->upload(std::vector<int32_t>{1, 2, 3}, {3});
  CHECK_THROWS_WITH(be->symmetric_kl(odd, t2, -1, be->zeros({2})),
                    Contains("symmetric_kl") && Contains("even"));
  CHECK_THROWS_WITH(be->symmetric_kl(even, t3, -1, be->zeros({3})), Contains("one id per pair"));
  CHECK_THROWS_WITH(be->symmetric_kl_backward(even, t2, -1, be->zeros({2}), be->zeros({2, 5})),
                    Contains("symmetric_kl_backward"));
}
