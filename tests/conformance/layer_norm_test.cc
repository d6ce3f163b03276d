// Conformance: layer_norm (y, mean, rstd) and layer_norm_backward (dx, dgamma, dbeta).
#include <cmath>

#include "support/backends.h"
#include "support/reference.h"

namespace {

using tx::Shape;
using tx::Tensor;
using namespace tx::test;

struct LnRef {
  std::vector<double> y, mean, rstd;
};

// Two-pass statistics in double; biased variance.
LnRef reference_layer_norm(const std::vector<float>& x, const std::vector<float>& gamma,
                           const std::vector<float>& beta, int64_t d, float eps) {
  int64_t rows = x.size() / d;
  LnRef r;
  r.y.resize(x.size());
  r.mean.resize(rows);
  r.rstd.resize(rows);
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = x.data() + i * d;
    double mean = 0;
    for (int64_t j = 0; j < d; ++j) mean += xr[j];
    mean /= d;
    double var = 0;
    for (int64_t j = 0; j < d; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    var /= d;
    double rstd = 1.0 / std::sqrt(var + double(eps));
    r.mean[i] = mean;
    r.rstd[i] = rstd;
    for (int64_t j = 0; j < d; ++j) r.y[i * d + j] = (xr[j] - mean) * rstd * gamma[j] + beta[j];
  }
  return r;
}

struct LnOut {
  std::vector<float> y, mean, rstd;
};

LnOut run_layer_norm(tx::Backend& be, const std::vector<float>& x, const Shape& s,
                     const std::vector<float>& gamma, const std::vector<float>& beta, float eps) {
  int64_t d = s[-1], rows = s.rows();
  Tensor y = be.empty(s), mean = be.empty({rows}), rstd = be.empty({rows});
  be.layer_norm(be.upload(x, s), be.upload(gamma, {d}), be.upload(beta, {d}), eps, y, mean, rstd);
  return {fetch(be, y), fetch(be, mean), fetch(be, rstd)};
}

}  // namespace

TEMPLATE_TEST_CASE("layer_norm forward: y, mean and rstd, odd shapes", "[layer_norm]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 1;
  for (const Shape& s : {Shape{1, 1}, Shape{1, 2}, Shape{7, 33}, Shape{33, 65}, Shape{2, 3, 7},
                         Shape{4, 512}, Shape{1, 1000}, Shape{16}, Shape{300, 129}})
    for (float eps : {1e-5f, 1e-6f, 0.1f}) {
      int64_t d = s[-1];
      std::vector<float> x = random_vector(s.numel(), ++seed, -2.0f, 2.0f);
      std::vector<float> gamma = random_vector(d, ++seed, 0.5f, 1.5f);
      std::vector<float> beta = random_vector(d, ++seed);
      LnOut got = run_layer_norm(*be, x, s, gamma, beta, eps);
      LnRef want = reference_layer_norm(x, gamma, beta, d, eps);
      INFO("shape " << s.str() << " eps " << eps);
      TX_CHECK_OK(compare(got.mean, want.mean, 1e-5, 1e-6));
      TX_CHECK_OK(compare(got.rstd, want.rstd, 2e-5, 0));
      TX_REQUIRE_OK(compare(got.y, want.y, 2e-5, 2e-5));
    }
}

TEMPLATE_TEST_CASE(
    "residual_layer_norm: layer_norm of x + sublayer against double, bit for bit add then "
    "layer_norm, in place",
    "[layer_norm]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 40;
  for (const Shape& s :
       {Shape{1, 1}, Shape{7, 33}, Shape{2, 3, 7}, Shape{160, 256}, Shape{300, 129}, Shape{16}}) {
    const int64_t d = s[-1], rows = s.rows();
    std::vector<float> x = random_vector(s.numel(), ++seed, -2.0f, 2.0f);
    std::vector<float> sub = random_vector(s.numel(), ++seed, -2.0f, 2.0f);
    std::vector<float> gamma = random_vector(d, ++seed, 0.5f, 1.5f);
    std::vector<float> beta = random_vector(d, ++seed);
    const Tensor X = be->upload(x, s), Sub = be->upload(sub, s);
    const Tensor G = be->upload(gamma, {d}), B = be->upload(beta, {d});
    Tensor y = be->empty(s);
    be->residual_layer_norm(X, Sub, G, B, 1e-5f, y);
    const std::vector<float> got = fetch(*be, y);
    INFO("shape " << s.str());
    // Against double: the float sum x + sublayer is the input the reference normalises.
    std::vector<float> sum(x.size());
    for (size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + sub[i];
    TX_CHECK_OK(compare(got, reference_layer_norm(sum, gamma, beta, d, 1e-5f).y, 2e-5, 2e-5));
    // The chain it replaces, bit for bit.
    Tensor added = be->empty(s), chained = be->empty(s), mean = be->empty({rows}),
           rstd = be->empty({rows});
    be->add(X, Sub, added);
    be->layer_norm(added, G, B, 1e-5f, chained, mean, rstd);
    TX_CHECK_OK(compare_exact(got, fetch(*be, chained)));
    // In place over the sublayer's output, as the decoder may call it.
    be->residual_layer_norm(X, Sub, G, B, 1e-5f, Sub);
    TX_CHECK_OK(compare_exact(fetch(*be, Sub), got));
  }
  // Shapes that disagree are refused.
  Tensor a = be->zeros({2, 4}), b = be->zeros({2, 5}), g4 = be->zeros({4});
  CHECK_THROWS_WITH(be->residual_layer_norm(a, b, g4, g4, 1e-5f, a),
                    Catch::Contains("residual_layer_norm"));
}

TEMPLATE_TEST_CASE("layer_norm forward: large common offset (numerically stable variance)",
                   "[layer_norm]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // Rows of 100 + U(-1, 1): E[x^2] - E[x]^2 in float loses ~3 digits here.
  for (const Shape& s : {Shape{5, 64}, Shape{3, 513}}) {
    int64_t d = s[-1];
    std::vector<float> x = random_vector(s.numel(), 11, 99.0f, 101.0f);
    std::vector<float> gamma(d, 1.0f), beta(d, 0.0f);
    LnOut got = run_layer_norm(*be, x, s, gamma, beta, 1e-5f);
    LnRef want = reference_layer_norm(x, gamma, beta, d, 1e-5f);
    INFO("shape " << s.str());
    TX_CHECK_OK(compare(got.rstd, want.rstd, 1e-3, 0));
    TX_REQUIRE_OK(compare(got.y, want.y, 1e-3, 2e-4));
  }
}

TEMPLATE_TEST_CASE("layer_norm backward: finite differences for x, gamma and beta", "[layer_norm]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const float eps = 1e-5f;
  for (const Shape& s : {Shape{3, 7}, Shape{2, 2, 5}, Shape{2, 1}, Shape{1, 16}}) {
    int64_t d = s[-1], rows = s.rows();
    std::vector<float> x = random_vector(s.numel(), 21, -1.0f, 1.0f);
    std::vector<float> gamma = random_vector(d, 22, 0.5f, 1.5f);
    std::vector<float> beta = random_vector(d, 23);
    std::vector<float> r = random_vector(s.numel(), 24);

    Tensor X = be->upload(x, s), G = be->upload(gamma, {d});
    Tensor Y = be->empty(s), M = be->empty({rows}), Rs = be->empty({rows});
    be->layer_norm(X, G, be->upload(beta, {d}), eps, Y, M, Rs);
    Tensor R = be->upload(r, s);

    // Into zeros, then into nonzero gradients: each output must be before + gradient.
    Tensor dx = be->zeros(s), dg = be->zeros({d}), db = be->zeros({d});
    be->layer_norm_backward(R, X, G, M, Rs, dx, dg, db);
    std::vector<float> gx = fetch(*be, dx), gg = fetch(*be, dg), gb = fetch(*be, db);
    std::vector<float> px = random_vector(s.numel(), 25), pg = random_vector(d, 26),
                       pb = random_vector(d, 27);
    Tensor dx2 = be->upload(px, s), dg2 = be->upload(pg, {d}), db2 = be->upload(pb, {d});
    be->layer_norm_backward(R, X, G, M, Rs, dx2, dg2, db2);
    auto plus = [](const std::vector<float>& a, const std::vector<float>& b) {
      std::vector<double> out(a.size());
      for (size_t i = 0; i < a.size(); ++i) out[i] = double(a[i]) + b[i];
      return out;
    };
    INFO("shape " << s.str());
    {
      INFO("layer_norm_backward must ADD into dx, dgamma and dbeta");
      TX_CHECK_OK(compare(fetch(*be, dx2), plus(px, gx), 1e-5, 1e-6));
      TX_CHECK_OK(compare(fetch(*be, dg2), plus(pg, gg), 1e-5, 1e-6));
      TX_CHECK_OK(compare(fetch(*be, db2), plus(pb, gb), 1e-5, 1e-6));
    }
    {
      INFO("accumulate off: dx overwritten (it held NaN), dgamma and dbeta still added");
      Tensor dx3 = be->upload(std::vector<float>(s.numel(), std::nanf("")), s);
      Tensor dg3 = be->upload(pg, {d}), db3 = be->upload(pb, {d});
      be->layer_norm_backward(R, X, G, M, Rs, dx3, dg3, db3, /*accumulate=*/false);
      const std::vector<float> got = fetch(*be, dx3);
      for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == gx[i]);  // +0 and -0 equal
      TX_CHECK_OK(compare_exact(fetch(*be, dg3), fetch(*be, dg2)));
      TX_CHECK_OK(compare_exact(fetch(*be, db3), fetch(*be, db2)));
    }

    auto loss = [&](const std::vector<float>& xv, const std::vector<float>& gv,
                    const std::vector<float>& bv) {
      return dot(run_layer_norm(*be, xv, s, gv, bv, eps).y, r);
    };
    auto fx = numeric_gradient(
        [&](const std::vector<float>& v) -> double { return loss(v, gamma, beta); }, x, 5e-3f);
    auto fg = numeric_gradient(
        [&](const std::vector<float>& v) -> double { return loss(x, v, beta); }, gamma, 5e-3f);
    auto fb = numeric_gradient(
        [&](const std::vector<float>& v) -> double { return loss(x, gamma, v); }, beta, 5e-3f);
    {
      INFO("dx");
      TX_CHECK_OK(compare_gradient(gx, fx, 5e-3, 1e-3));
    }
    {
      INFO("dgamma");
      TX_CHECK_OK(compare_gradient(gg, fg, 5e-3, 1e-3));
    }
    {
      INFO("dbeta");
      TX_CHECK_OK(compare_gradient(gb, fb, 5e-3, 1e-3));
    }
  }
}

TEMPLATE_TEST_CASE("layer_norm_backward: closed form on larger shapes", "[layer_norm]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // dx = rstd * (g dy - mean(g dy) - xhat * mean(g dy xhat)), dgamma = sum_r dy xhat,
  // dbeta = sum_r dy, all in double from the reference statistics.
  const float eps = 1e-5f;
  uint64_t seed = 30;
  for (const Shape& s : {Shape{33, 65}, Shape{7, 512}, Shape{130, 33}, Shape{300, 129},
                         Shape{64, 1024}, Shape{1100, 40}}) {
    int64_t d = s[-1], rows = s.rows();
    std::vector<float> x = random_vector(s.numel(), ++seed, -2.0f, 2.0f);
    std::vector<float> gamma = random_vector(d, ++seed, 0.5f, 1.5f);
    std::vector<float> beta = random_vector(d, ++seed);
    std::vector<float> dy = random_vector(s.numel(), ++seed);
    LnRef ref = reference_layer_norm(x, gamma, beta, d, eps);

    Tensor X = be->upload(x, s), G = be->upload(gamma, {d});
    Tensor Y = be->empty(s), M = be->empty({rows}), Rs = be->empty({rows});
    be->layer_norm(X, G, be->upload(beta, {d}), eps, Y, M, Rs);
    Tensor dx = be->zeros(s), dg = be->zeros({d}), db = be->zeros({d});
    be->layer_norm_backward(be->upload(dy, s), X, G, M, Rs, dx, dg, db);

    std::vector<double> wx(s.numel()), wg(d, 0.0), wb(d, 0.0);
    std::vector<double> tg(d, 0.0);  // tolerance scale of the column sums
    for (int64_t i = 0; i < rows; ++i) {
      double m1 = 0, m2 = 0;
      for (int64_t j = 0; j < d; ++j) {
        double xhat = (x[i * d + j] - ref.mean[i]) * ref.rstd[i];
        double gdy = double(gamma[j]) * dy[i * d + j];
        m1 += gdy;
        m2 += gdy * xhat;
        wg[j] += dy[i * d + j] * xhat;
        wb[j] += dy[i * d + j];
        tg[j] += std::fabs(dy[i * d + j] * xhat) + std::fabs(dy[i * d + j]);
      }
      m1 /= d;
      m2 /= d;
      for (int64_t j = 0; j < d; ++j) {
        double xhat = (x[i * d + j] - ref.mean[i]) * ref.rstd[i];
        wx[i * d + j] = ref.rstd[i] * (double(gamma[j]) * dy[i * d + j] - m1 - xhat * m2);
      }
    }
    std::vector<double> tol(d);
    for (int64_t j = 0; j < d; ++j) tol[j] = 1e-5 * tg[j] + 1e-5;
    INFO("shape " << s.str());
    TX_CHECK_OK(compare(fetch(*be, dx), wx, 1e-4, 1e-4));
    TX_CHECK_OK(compare_tol(fetch(*be, dg), wg, tol));
    TX_CHECK_OK(compare_tol(fetch(*be, db), wb, tol));
  }
}
