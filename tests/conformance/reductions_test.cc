// Conformance: sum, squared_norm, sum_rows.
#include <cmath>

#include "support/backends.h"
#include "support/reference.h"

namespace {

using tx::Shape;
using tx::Tensor;
using namespace tx::test;

float run_reduction(tx::Backend& be, const std::vector<float>& x, const Shape& s, bool squares) {
  Tensor out = be.upload(std::vector<float>{12345.0f}, {1});  // garbage to overwrite
  Tensor tx_ = be.upload(x, s);
  if (squares)
    be.squared_norm(tx_, out);
  else
    be.sum(tx_, out);
  return fetch(be, out)[0];
}

// |got - want| <= rtol * sum |terms| + atol, in double.
void check_reduction(tx::Backend& be, const std::vector<float>& x, const Shape& s, bool squares,
                     double rtol) {
  double want = 0, mag = 0;
  for (float v : x) {
    double t = squares ? double(v) * v : double(v);
    want += t;
    mag += std::fabs(t);
  }
  float got = run_reduction(be, x, s, squares);
  INFO((squares ? "squared_norm" : "sum")
       << " of " << s.str() << ": got " << got << " want " << want);
  REQUIRE(std::fabs(double(got) - want) <= rtol * mag + 1e-6);
}

}  // namespace

TEMPLATE_TEST_CASE("sum forward: odd sizes against a double loop", "[reductions]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 1;
  for (const Shape& s :
       {Shape{1}, Shape{7}, Shape{33}, Shape{7, 33}, Shape{3, 5, 7}, Shape{1003}, Shape{65, 65}})
    check_reduction(*be, random_vector(s.numel(), ++seed, 0.5f, 1.5f), s, false, 1e-6);
}

TEMPLATE_TEST_CASE("sum forward: 100k+ elements, relative tolerance", "[reductions]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  check_reduction(*be, random_vector(100003, 11), {100003}, false, 1e-5);
  check_reduction(*be, random_vector(262147, 12, 0.0f, 1.0f), {262147}, false, 1e-4);
  check_reduction(*be, random_vector(1031 * 129, 13), {1031, 129}, false, 1e-5);
  // Integers below 2^24 sum exactly in float: a dropped or doubled element shows.
  std::vector<float> ones(100003, 1.0f);
  CHECK(run_reduction(*be, ones, {100003}, false) == 100003.0f);
}

TEMPLATE_TEST_CASE("squared_norm forward: odd sizes against a double loop", "[reductions]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 20;
  for (const Shape& s :
       {Shape{1}, Shape{7}, Shape{33}, Shape{7, 33}, Shape{3, 5, 7}, Shape{1003}, Shape{65, 65}})
    check_reduction(*be, random_vector(s.numel(), ++seed), s, true, 1e-6);
}

TEMPLATE_TEST_CASE("squared_norm forward: 100k+ elements, relative tolerance", "[reductions]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  check_reduction(*be, random_vector(100003, 31), {100003}, true, 1e-4);
  check_reduction(*be, random_vector(262147, 32, -3.0f, 3.0f), {262147, 1}, true, 1e-4);
  std::vector<float> twos(100003, -2.0f);
  CHECK(run_reduction(*be, twos, {100003}, true) == 400012.0f);
}

TEMPLATE_TEST_CASE("sum and squared_norm backward: finite differences (d sum = 1, d norm = 2x)",
                   "[reductions]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (const Shape& s : {Shape{1}, Shape{3, 7}}) {
    std::vector<float> x = random_vector(s.numel(), 60);
    auto fd = [&](bool squares) {
      return numeric_gradient(
          [&](const std::vector<float>& v) -> double { return run_reduction(*be, v, s, squares); },
          x, 1e-2f);
    };
    std::vector<float> ones(x.size(), 1.0f), twice(x.size());
    for (size_t i = 0; i < x.size(); ++i) twice[i] = 2.0f * x[i];
    INFO("shape " << s.str());
    TX_CHECK_OK(compare_gradient(ones, fd(false), 1e-3, 1e-3));
    TX_CHECK_OK(compare_gradient(twice, fd(true), 1e-3, 1e-3));
  }
}

TEMPLATE_TEST_CASE("sum and squared_norm forward: an empty tensor gives 0", "[reductions]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  CHECK(run_reduction(*be, {}, {0}, false) == 0.0f);
  CHECK(run_reduction(*be, {}, {0, 5}, true) == 0.0f);
}

namespace {
void check_sum_rows(tx::Backend& be, const Shape& s, float beta, uint64_t seed) {
  int64_t c = s[-1], rows = s.rows();
  std::vector<float> x = random_vector(s.numel(), seed);
  std::vector<float> o0 =
      beta == 0.0f ? random_vector(c, seed + 1, -1e4f, 1e4f) : random_vector(c, seed + 1);
  std::vector<double> want(c, 0.0), tol(c, 1e-6);
  for (int64_t j = 0; j < c; ++j) {
    if (beta != 0.0f) {
      want[j] = double(beta) * o0[j];
      tol[j] += 1e-6 * std::fabs(want[j]);
    }
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < c; ++j) {
      want[j] += x[i * c + j];
      tol[j] += 1e-5 * std::fabs(x[i * c + j]);
    }
  Tensor out = be.upload(o0, {c});
  be.sum_rows(be.upload(x, s), out, beta);
  INFO("sum_rows x " << s.str() << " beta " << beta);
  TX_REQUIRE_OK(compare_tol(fetch(be, out), want, tol));
}
}  // namespace

TEMPLATE_TEST_CASE("sum_rows forward: beta 0 (ignores out) and beta 1 (accumulates), odd shapes",
                   "[reductions]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 40;
  for (const Shape& s : {Shape{1, 1}, Shape{1, 7}, Shape{7, 1}, Shape{7, 33}, Shape{33, 65},
                         Shape{3, 5, 7}, Shape{9}})
    for (float beta : {0.0f, 1.0f, 0.5f}) check_sum_rows(*be, s, beta, seed += 2);
}

TEMPLATE_TEST_CASE("sum_rows forward: 100k+ elements", "[reductions]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  check_sum_rows(*be, {1031, 129}, 0.0f, 50);
  check_sum_rows(*be, {4099, 33}, 1.0f, 52);
  check_sum_rows(*be, {64, 2048}, 1.0f, 54);
  // Exact with integers.
  const int64_t rows = 20011, c = 7;
  Tensor x = be->empty({rows, c}), out = be->zeros({c});
  be->fill(x, 1.0f);
  be->sum_rows(x, out, 1.0f);
  be->sum_rows(x, out, 1.0f);
  TX_REQUIRE_OK(compare_exact(fetch(*be, out), std::vector<float>(c, 2.0f * rows)));
}

TEMPLATE_TEST_CASE("sum_rows forward: zero rows gives beta * out", "[reductions]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor out = be->upload(std::vector<float>{1.0f, -2.0f, 3.0f}, {3});
  be->sum_rows(be->empty({0, 3}), out, 1.0f);
  TX_CHECK_OK(compare_exact(fetch(*be, out), {1.0f, -2.0f, 3.0f}));
  be->sum_rows(be->empty({0, 3}), out, 0.0f);
  TX_CHECK_OK(compare_exact(fetch(*be, out), {0.0f, 0.0f, 0.0f}));
}

TEMPLATE_TEST_CASE("sum_rows and layer_norm forward: an empty last dimension is no error",
                   "[reductions]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor out = be->empty({0});
  be->sum_rows(be->empty({3, 0}), out, 0.0f);
  Tensor x = be->empty({2, 0});
  be->layer_norm(x, be->empty({0}), be->empty({0}), 1e-5f, be->empty({2, 0}), be->empty({2}),
                 be->empty({2}));
  SUCCEED("no division by the empty dimension");
}
