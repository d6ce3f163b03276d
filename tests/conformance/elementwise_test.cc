// Conformance: add_bias, add, axpy, scale, relu, relu_backward, dropout, dropout_backward,
// add_positions.
#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "support/backends.h"
#include "support/reference.h"

namespace {

using tx::Shape;
using tx::Tensor;
using namespace tx::test;

// Includes a shape above the CPU backend's parallel grain (32k elements).
const std::vector<Shape> kShapes = {{1},       {1, 1}, {7, 33},   {33, 65},
                                    {3, 5, 7}, {17},   {4, 1001}, {37, 1031}};

}  // namespace

// ---- add_bias -----------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("add_bias forward: y = x + bias broadcast over rows", "[elementwise]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 1;
  for (const Shape& s : kShapes) {
    int64_t c = s[-1], r = s.rows();
    std::vector<float> x = random_vector(s.numel(), ++seed), b = random_vector(c, ++seed);
    Tensor y = be->upload(random_vector(s.numel(), ++seed), s);  // garbage, overwritten
    be->add_bias(be->upload(x, s), be->upload(b, {c}), y);
    std::vector<double> want(s.numel());
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) want[i * c + j] = double(x[i * c + j]) + b[j];
    INFO("shape " << s.str());
    TX_REQUIRE_OK(compare(fetch(*be, y), want, 1e-7, 0));
  }
}

TEMPLATE_TEST_CASE("add_bias_relu forward: max(x + bias, 0), bit for bit add_bias then relu",
                   "[elementwise]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 50;
  for (const Shape& s : kShapes) {
    const int64_t c = s[-1], r = s.rows();
    std::vector<float> x = random_vector(s.numel(), ++seed), b = random_vector(c, ++seed);
    const Tensor X = be->upload(x, s), B = be->upload(b, {c});
    Tensor y = be->upload(random_vector(s.numel(), ++seed), s);  // garbage, overwritten
    be->add_bias_relu(X, B, y);
    const std::vector<float> got = fetch(*be, y);
    std::vector<double> want(s.numel());
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) want[i * c + j] = std::max(0.0, double(x[i * c + j]) + b[j]);
    INFO("shape " << s.str());
    TX_CHECK_OK(compare(got, want, 1e-7, 0));
    Tensor chained = be->empty(s);
    be->add_bias(X, B, chained);
    be->relu(chained, chained);
    TX_CHECK_OK(compare_exact(got, fetch(*be, chained)));
    be->add_bias_relu(X, B, X);  // in place
    TX_REQUIRE_OK(compare_exact(fetch(*be, X), got));
  }
  Tensor x = be->zeros({2, 4}), wrong = be->zeros({5});
  CHECK_THROWS_WITH(be->add_bias_relu(x, wrong, x), Catch::Contains("add_bias_relu: bias"));
}

TEMPLATE_TEST_CASE("add_bias backward: finite differences (dbias = sum_rows(dy), dx = dy)",
                   "[elementwise]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const Shape s{5, 7};
  std::vector<float> x = random_vector(35, 1), b = random_vector(7, 2), r = random_vector(35, 3);
  auto loss = [&](const std::vector<float>& xv, const std::vector<float>& bv) {
    Tensor y = be->empty(s);
    be->add_bias(be->upload(xv, s), be->upload(bv, {7}), y);
    return dot(fetch(*be, y), r);
  };
  Tensor R = be->upload(r, s);
  std::vector<float> db =
      check_accumulates(*be, {7}, [&](const Tensor& d) { be->sum_rows(R, d, 1.0f); });
  TX_CHECK_OK(compare_gradient(
      db,
      numeric_gradient([&](const std::vector<float>& v) -> double { return loss(x, v); }, b, 1e-2f),
      1e-3, 1e-3));
  TX_CHECK_OK(compare_gradient(
      r,
      numeric_gradient([&](const std::vector<float>& v) -> double { return loss(v, b); }, x, 1e-2f),
      1e-3, 1e-3));
}

// ---- add, axpy, scale -------------------------------------------------------------------------

TEMPLATE_TEST_CASE("add forward: y = a + b, also in place", "[elementwise]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 10;
  for (const Shape& s : kShapes) {
    std::vector<float> a = random_vector(s.numel(), ++seed), b = random_vector(s.numel(), ++seed);
    std::vector<double> want(s.numel());
    for (size_t i = 0; i < want.size(); ++i) want[i] = double(a[i]) + b[i];
    Tensor ta = be->upload(a, s), tb = be->upload(b, s), y = be->empty(s);
    be->add(ta, tb, y);
    INFO("shape " << s.str());
    TX_REQUIRE_OK(compare(fetch(*be, y), want, 1e-7, 0));
    be->add(ta, tb, ta);  // in place: y is a
    TX_REQUIRE_OK(compare(fetch(*be, ta), want, 1e-7, 0));
  }
}

TEMPLATE_TEST_CASE("add backward: finite differences (da = db = dy)", "[elementwise]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // add has no backward operator: its gradient is dy for both inputs; check the forward is
  // exactly that linear map.
  const Shape s{3, 7};
  std::vector<float> a = random_vector(21, 1), b = random_vector(21, 2), r = random_vector(21, 3);
  auto loss = [&](const std::vector<float>& av, const std::vector<float>& bv) -> double {
    Tensor y = be->empty(s);
    be->add(be->upload(av, s), be->upload(bv, s), y);
    return dot(fetch(*be, y), r);
  };
  TX_CHECK_OK(compare_gradient(
      r, numeric_gradient([&](const std::vector<float>& v) { return loss(v, b); }, a, 1e-2f), 1e-3,
      1e-3));
  TX_CHECK_OK(compare_gradient(
      r, numeric_gradient([&](const std::vector<float>& v) { return loss(a, v); }, b, 1e-2f), 1e-3,
      1e-3));
}

TEMPLATE_TEST_CASE("scale, axpy, add_positions backward: finite differences of the linear maps",
                   "[elementwise]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // No backward operators: d/dx of sum(r * scale(x)) is scale(r) (into an accumulating axpy),
  // of sum(r * (y + alpha x)) is alpha r, of sum(r * add_positions(x)) is r.
  const Shape s{2, 3, 5};
  const float alpha = -1.75f;
  std::vector<float> x = random_vector(30, 4), r = random_vector(30, 5), y0 = random_vector(30, 6);
  Tensor R = be->upload(r, s);
  std::vector<float> g = check_accumulates(*be, s, [&](const Tensor& dx) {
    Tensor t = be->empty(s);
    be->scale(R, alpha, t);
    be->axpy(1.0f, t, dx);
  });
  auto scale_loss = [&](const std::vector<float>& v) -> double {
    Tensor y = be->empty(s);
    be->scale(be->upload(v, s), alpha, y);
    return dot(fetch(*be, y), r);
  };
  auto axpy_loss = [&](const std::vector<float>& v) -> double {
    Tensor y = be->upload(y0, s);
    be->axpy(alpha, be->upload(v, s), y);
    return dot(fetch(*be, y), r);
  };
  auto positions_loss = [&](const std::vector<float>& v) -> double {
    Tensor y = be->empty(s);
    be->add_positions(be->upload(v, s), 3, y);
    return dot(fetch(*be, y), r);
  };
  {
    // The analytic gradient alpha * r comes from a host loop, so a wrong factor in scale()
    // fails one of the two checks.
    INFO("scale");
    std::vector<float> alpha_r(r.size());
    for (size_t i = 0; i < r.size(); ++i) alpha_r[i] = alpha * r[i];
    TX_CHECK_OK(compare(g, alpha_r, 1e-6, 1e-6));
    TX_CHECK_OK(compare_gradient(alpha_r, numeric_gradient(scale_loss, x, 1e-2f), 1e-3, 1e-3));
  }
  {
    INFO("axpy");
    TX_CHECK_OK(compare_gradient(g, numeric_gradient(axpy_loss, x, 1e-2f), 1e-3, 1e-3));
  }
  {
    INFO("add_positions");
    TX_CHECK_OK(compare_gradient(r, numeric_gradient(positions_loss, x, 1e-2f), 1e-3, 1e-3));
  }
}

TEMPLATE_TEST_CASE("axpy forward: y += alpha * x", "[elementwise]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 20;
  for (float alpha : {1.0f, -0.5f, 3.0f, 0.0f})
    for (const Shape& s : kShapes) {
      std::vector<float> x = random_vector(s.numel(), ++seed),
                         y0 = random_vector(s.numel(), ++seed);
      std::vector<double> want(s.numel());
      for (size_t i = 0; i < want.size(); ++i) want[i] = double(y0[i]) + double(alpha) * x[i];
      Tensor y = be->upload(y0, s);
      be->axpy(alpha, be->upload(x, s), y);
      INFO("shape " << s.str() << " alpha " << alpha);
      TX_REQUIRE_OK(compare(fetch(*be, y), want, 1e-6, 1e-7));
    }
}

TEMPLATE_TEST_CASE("scale forward: y = alpha * x, also in place", "[elementwise]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 30;
  for (float alpha : {2.0f, -0.25f, 0.0f, 1.0f / 3.0f})
    for (const Shape& s : kShapes) {
      std::vector<float> x = random_vector(s.numel(), ++seed);
      std::vector<double> want(s.numel());
      for (size_t i = 0; i < want.size(); ++i) want[i] = double(alpha) * x[i];
      Tensor tx_ = be->upload(x, s), y = be->upload(random_vector(s.numel(), ++seed), s);
      be->scale(tx_, alpha, y);
      INFO("shape " << s.str() << " alpha " << alpha);
      TX_REQUIRE_OK(compare(fetch(*be, y), want, 1e-7, 0));
      be->scale(tx_, alpha, tx_);
      TX_REQUIRE_OK(compare(fetch(*be, tx_), want, 1e-7, 0));
    }
}

// ---- relu -------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("relu forward: y = max(x, 0)", "[elementwise]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 40;
  for (const Shape& s : kShapes) {
    std::vector<float> x = random_vector(s.numel(), ++seed);
    if (!x.empty()) x[0] = 0.0f;
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = x[i] > 0 ? x[i] : 0.0f;
    Tensor y = be->upload(random_vector(s.numel(), ++seed), s);
    be->relu(be->upload(x, s), y);
    INFO("shape " << s.str());
    TX_REQUIRE_OK(compare(fetch(*be, y), want, 0, 0));
  }
}

TEMPLATE_TEST_CASE("relu_backward: dx += dy * (y > 0) against a loop", "[elementwise]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 50;
  for (const Shape& s : kShapes) {
    std::vector<float> y = random_vector(s.numel(), ++seed);
    for (float& v : y) v = v > 0 ? v : 0.0f;  // a relu output: zeros and positives
    std::vector<float> dy = random_vector(s.numel(), ++seed), d0 = random_vector(s.numel(), ++seed);
    std::vector<double> want(d0.size());
    for (size_t i = 0; i < y.size(); ++i) want[i] = double(d0[i]) + (y[i] > 0 ? dy[i] : 0.0);
    Tensor dx = be->upload(d0, s);
    be->relu_backward(be->upload(dy, s), be->upload(y, s), dx);
    INFO("shape " << s.str());
    TX_REQUIRE_OK(compare(fetch(*be, dx), want, 1e-7, 0));
  }
}

TEMPLATE_TEST_CASE("relu backward: finite differences, accumulates into dx", "[elementwise]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (const Shape& s : {Shape{1, 1}, Shape{3, 7}, Shape{2, 3, 5}}) {
    // Inputs at least 0.1 from the kink, steps of 0.01.
    std::vector<float> x = random_away_from_zero(s.numel(), 61, 0.1f, 1.0f);
    std::vector<float> r = random_vector(s.numel(), 62);
    Tensor X = be->upload(x, s), Y = be->empty(s), R = be->upload(r, s);
    be->relu(X, Y);
    std::vector<float> g = check_accumulates(*be, s, [&](const Tensor& dx, bool accumulate) {
      be->relu_backward(R, Y, dx, accumulate);
    });
    auto loss = [&](const std::vector<float>& v) -> double {
      Tensor y = be->empty(s);
      be->relu(be->upload(v, s), y);
      return dot(fetch(*be, y), r);
    };
    INFO("shape " << s.str());
    TX_CHECK_OK(compare_gradient(g, numeric_gradient(loss, x, 1e-2f), 1e-3, 1e-3));
  }
}

// ---- dropout ----------------------------------------------------------------------------------

namespace {
// The documented mask: keep_i = dropout_uniform(seed, offset + i) >= p.
std::vector<bool> dropout_mask(size_t n, float p, uint64_t seed, uint64_t offset) {
  std::vector<bool> keep(n);
  for (size_t i = 0; i < n; ++i) keep[i] = tx::dropout_uniform(seed, offset + i) >= p;
  return keep;
}
}  // namespace

TEMPLATE_TEST_CASE("dropout forward: p=0 is the identity", "[dropout]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (const Shape& s : kShapes) {
    std::vector<float> x = random_vector(s.numel(), 70);
    Tensor y = be->empty(s);
    be->dropout(be->upload(x, s), 0.0f, 1234, 0, y);
    INFO("shape " << s.str());
    TX_REQUIRE_OK(compare_exact(fetch(*be, y), x));
  }
}

TEMPLATE_TEST_CASE(
    "dropout forward: mask is dropout_uniform(seed, offset+i) >= p, kept scaled 1/(1-p)",
    "[dropout]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  struct Case {
    Shape shape;
    float p;
    uint64_t seed, offset;
  };
  for (const Case& c :
       {Case{{7, 33}, 0.3f, 1, 0}, Case{{1, 1}, 0.5f, 2, 17}, Case{{33, 65}, 0.1f, 42, 1000},
        Case{{3, 5, 7}, 0.9f, 7, 5}, Case{{4, 1001}, 0.3f, 0xdeadbeefcafeull, 123456789012ull},
        Case{{37, 1031}, 0.2f, 3, 99},
        // Across a 2^32 boundary of the index, where the key changes: small and parallel sizes.
        Case{{3, 1001}, 0.3f, 9, (1ull << 32) - 1500},
        Case{{40, 1000}, 0.3f, 5, (1ull << 33) - 20000}}) {
    size_t n = c.shape.numel();
    // Nonzero inputs, so a zero output means "dropped".
    std::vector<float> x = random_away_from_zero(n, 71, 0.25f, 2.0f);
    Tensor y = be->empty(c.shape);
    be->dropout(be->upload(x, c.shape), c.p, c.seed, c.offset, y);
    std::vector<float> got = fetch(*be, y);
    std::vector<bool> keep = dropout_mask(n, c.p, c.seed, c.offset);
    std::vector<double> want(n);
    for (size_t i = 0; i < n; ++i) want[i] = keep[i] ? double(x[i]) / (1.0 - c.p) : 0.0;
    INFO("shape " << c.shape.str() << " p=" << c.p << " seed=" << c.seed << " offset=" << c.offset);
    size_t mask_errors = 0;
    for (size_t i = 0; i < n; ++i) mask_errors += (got[i] != 0.0f) != keep[i];
    CHECK(mask_errors == 0);
    TX_REQUIRE_OK(compare(got, want, 1e-6, 0));
  }
}

TEMPLATE_TEST_CASE("dropout forward: p=0.3 keeps ~70% of 100k elements", "[dropout]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const int64_t n = 100003;
  Tensor x = be->empty({n});
  be->fill(x, 1.0f);
  Tensor y = be->empty({n});
  be->dropout(x, 0.3f, 2024, 0, y);
  std::vector<float> got = fetch(*be, y);
  int64_t kept = 0;
  for (float v : got) {
    if (v != 0.0f) {
      ++kept;
      REQUIRE(v == Approx(1.0 / 0.7).epsilon(1e-6));
    }
  }
  // Binomial(100003, 0.7): sd ~ 145, so 1000 is ~7 sd.
  CHECK(std::abs(double(kept) / n - 0.7) < 0.01);
}

TEMPLATE_TEST_CASE("dropout determinism: same seed and offset give bit-identical outputs",
                   "[dropout][determinism]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const Shape s{33, 65};
  std::vector<float> x = random_vector(s.numel(), 80);
  Tensor X = be->upload(x, s);
  auto run = [&](uint64_t seed, uint64_t offset) {
    Tensor y = be->empty(s);
    be->dropout(X, 0.3f, seed, offset, y);
    return fetch(*be, y);
  };
  std::vector<float> a = run(5, 100);
  TX_REQUIRE_OK(compare_exact(run(5, 100), a));
  // Another backend object replays the same mask too.
  auto be2 = backend_or_skip(TestType::name);
  REQUIRE(be2);
  Tensor y2 = be2->empty(s);
  be2->dropout(be2->upload(x, s), 0.3f, 5, 100, y2);
  TX_REQUIRE_OK(compare_exact(fetch(*be2, y2), a));
  // A different offset or seed gives a different mask.
  CHECK(!compare_exact(run(5, 101), a).empty());
  CHECK(!compare_exact(run(6, 100), a).empty());
}

TEMPLATE_TEST_CASE("dropout forward: offset shifts the mask (offset + i)", "[dropout]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // dropout of elements [10, 50) with offset 10 equals elements [10, 50) of one call with
  // offset 0: how a tensor split in pieces sees one mask.
  const int64_t n = 64;
  std::vector<float> x = random_away_from_zero(n, 81, 0.5f, 1.0f);
  Tensor X = be->upload(x, {n}), Y = be->empty({n});
  be->dropout(X, 0.5f, 9, 0, Y);
  std::vector<float> whole = fetch(*be, Y);
  Tensor part = be->empty({40});
  be->dropout(X.slice(10, 50), 0.5f, 9, 10, part);
  std::vector<float> want(whole.begin() + 10, whole.begin() + 50);
  TX_REQUIRE_OK(compare_exact(fetch(*be, part), want));
}

TEMPLATE_TEST_CASE("dropout backward: same mask as forward, finite differences, accumulates",
                   "[dropout]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (float p : {0.0f, 0.3f, 0.6f}) {
    const Shape s{7, 9};
    size_t n = s.numel();
    const uint64_t seed = 31, offset = 77;
    std::vector<float> x = random_vector(n, 90), r = random_vector(n, 91);
    Tensor R = be->upload(r, s);
    std::vector<float> g = check_accumulates(*be, s, [&](const Tensor& dx, bool accumulate) {
      be->dropout_backward(R, p, seed, offset, dx, accumulate);
    });
    // Against the documented mask.
    std::vector<bool> keep = dropout_mask(n, p, seed, offset);
    std::vector<double> want(n);
    for (size_t i = 0; i < n; ++i) want[i] = keep[i] ? double(r[i]) / (1.0 - p) : 0.0;
    INFO("p=" << p);
    TX_CHECK_OK(compare(g, want, 1e-6, 0));
    // Against finite differences of the forward.
    auto loss = [&](const std::vector<float>& v) -> double {
      Tensor y = be->empty(s);
      be->dropout(be->upload(v, s), p, seed, offset, y);
      return dot(fetch(*be, y), r);
    };
    TX_CHECK_OK(compare_gradient(g, numeric_gradient(loss, x, 1e-2f), 1e-3, 1e-3));
  }
}

// ---- add_positions ----------------------------------------------------------------------------

namespace {
// PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(pos / 10000^(2i/D)); for an odd D
// the last (even) index gets a sin.
double positional(int64_t pos, int64_t j, int64_t d) {
  int64_t even = j - (j % 2);
  double angle = double(pos) / std::pow(10000.0, double(even) / double(d));
  return j % 2 == 0 ? std::sin(angle) : std::cos(angle);
}
}  // namespace

TEMPLATE_TEST_CASE("add_positions forward: sinusoidal formula, start 0 / 5 / 1000, odd d_model",
                   "[positions]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 100;
  for (const Shape& s : {Shape{1, 1, 1}, Shape{2, 7, 7}, Shape{3, 33, 16}, Shape{2, 5, 65},
                         Shape{1, 3, 512}, Shape{2, 1, 2}, Shape{4, 64, 512}})
    for (int64_t start : {0, 5, 1000, 20000}) {  // 20000: past the CPU's kept table
      int64_t b = s[0], t = s[1], d = s[2];
      std::vector<float> x = random_vector(s.numel(), ++seed);
      Tensor y = be->empty(s);
      be->add_positions(be->upload(x, s), start, y);
      std::vector<double> want(s.numel()), tol(s.numel());
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t ti = 0; ti < t; ++ti)
          for (int64_t j = 0; j < d; ++j) {
            int64_t i = (bi * t + ti) * d + j;
            int64_t pos = start + ti;
            want[i] = x[i] + positional(pos, j, d);
            // Float angles err by a few ulps of pos.
            tol[i] = 1e-5 + 4e-7 * double(pos);
          }
      INFO("shape " << s.str() << " start " << start);
      TX_REQUIRE_OK(compare_tol(fetch(*be, y), want, tol));
    }
}

TEMPLATE_TEST_CASE("add_positions: a start past 2^30 is refused, not read from wild memory",
                   "[positions]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor x = be->zeros({1, 2, 4}), y = be->empty({1, 2, 4});
  CHECK_NOTHROW(be->add_positions(x, int64_t(1) << 30, y));
  CHECK_THROWS_WITH(be->add_positions(x, (int64_t(1) << 30) + 1, y),
                    Catch::Contains("must be between 0 and 2^30"));
  CHECK_THROWS_AS(be->add_positions(x, INT64_MAX - 1, y), tx::Error);
  CHECK_THROWS_AS(be->add_positions(x, -1, y), tx::Error);
}

TEMPLATE_TEST_CASE("add_positions forward: known values PE(1, 0) = sin 1, PE(1, 1) = cos 1",
                   "[positions]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // Zero input, D = 4, positions 0..2: PE(p, 2) = sin(p / 100), PE(p, 3) = cos(p / 100).
  Tensor x = be->zeros({1, 3, 4}), y = be->empty({1, 3, 4});
  be->add_positions(x, 0, y);
  std::vector<double> want = {0,
                              1,
                              0,
                              1,  // position 0
                              std::sin(1.0),
                              std::cos(1.0),
                              std::sin(0.01),
                              std::cos(0.01),
                              std::sin(2.0),
                              std::cos(2.0),
                              std::sin(0.02),
                              std::cos(0.02)};
  TX_REQUIRE_OK(compare(fetch(*be, y), want, 1e-6, 1e-6));
}

// ---- add_positions: the imported models' layouts --------------------------------------------

namespace {
// Marian's table (models/transformer.h, inits::sinusoidalPositionEmbeddings): for i < D/2,
// PE(p, i) = sin(p * exp(-i * ln(1e4) / (D/2 - 1))), PE(p, D/2 + i) = cos(the same).
double marian_positional(int64_t pos, int64_t j, int64_t d) {
  const int64_t half = d / 2, i = j % half;
  const double v = double(pos) * std::exp(-double(i) * std::log(1e4) / double(half - 1));
  return j < half ? std::sin(v) : std::cos(v);
}
// Hugging Face's MarianSinusoidalPositionalEmbedding: pos / 10000^(2 (j // 2) / D) for column
// j, then sin of the even columns into the first half, cos of the odd ones into the second.
double hf_positional(int64_t pos, int64_t j, int64_t d) {
  const int64_t half = d / 2;
  const int64_t column = j < half ? 2 * j : 2 * (j - half) + 1;
  const double v = double(pos) / std::pow(10000.0, 2.0 * double(column / 2) / double(d));
  return j < half ? std::sin(v) : std::cos(v);
}
}  // namespace

TEMPLATE_TEST_CASE("add_positions forward: Marian's and Hugging Face's [sin | cos] halves",
                   "[positions]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  using tx::math::PositionLayout;
  uint64_t seed = 300;
  for (PositionLayout layout : {PositionLayout::halves, PositionLayout::halves_hf})
    for (const Shape& s : {Shape{1, 1, 4}, Shape{2, 7, 32}, Shape{3, 5, 512}})
      for (int64_t start : {0, 3, 20000}) {
        const int64_t b = s[0], t = s[1], d = s[2];
        std::vector<float> x = random_vector(s.numel(), ++seed);
        Tensor y = be->empty(s);
        be->add_positions(be->upload(x, s), start, y, layout);
        std::vector<double> want(s.numel()), tol(s.numel());
        for (int64_t bi = 0; bi < b; ++bi)
          for (int64_t ti = 0; ti < t; ++ti)
            for (int64_t j = 0; j < d; ++j) {
              const int64_t i = (bi * t + ti) * d + j, pos = start + ti;
              want[i] = x[i] + (layout == PositionLayout::halves ? marian_positional(pos, j, d)
                                                                 : hf_positional(pos, j, d));
              tol[i] = 1e-5 + 4e-7 * double(pos);
            }
        INFO("layout " << static_cast<int>(layout) << " shape " << s.str() << " start " << start);
        TX_REQUIRE_OK(compare_tol(fetch(*be, y), want, tol));
      }
  // The two halves layouts differ (Marian's frequencies step by 1 / (D/2 - 1)): a model read
  // with the other's table would be off.
  Tensor a = be->empty({1, 2, 8}), h = be->empty({1, 2, 8});
  be->add_positions(be->zeros({1, 2, 8}), 0, a, PositionLayout::halves);
  be->add_positions(be->zeros({1, 2, 8}), 0, h, PositionLayout::halves_hf);
  CHECK(fetch(*be, a)[9] != fetch(*be, h)[9]);
  CHECK_THROWS_WITH(
      be->add_positions(be->zeros({1, 2, 5}), 0, be->empty({1, 2, 5}), PositionLayout::halves),
      Catch::Contains("even d_model"));
}

// ---- swish ------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("swish forward: x * sigmoid(x) against double, large |x| finite",
                   "[elementwise]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 400;
  for (const Shape& s : kShapes) {
    std::vector<float> x = random_vector(s.numel(), ++seed);
    for (size_t i = 0; i < x.size(); ++i) x[i] *= 6.0f;
    if (x.size() > 2) {
      x[0] = -120.0f;  // exp(120) overflows float: the limit is -0
      x[1] = 95.0f;
    }
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = double(x[i]) / (1.0 + std::exp(-double(x[i])));
    Tensor y = be->empty(s);
    be->swish(be->upload(x, s), y);
    INFO("shape " << s.str());
    TX_REQUIRE_OK(compare(fetch(*be, y), want, 1e-6, 1e-6));
  }
}

TEMPLATE_TEST_CASE("swish forward: a value's result does not depend on its position or count",
                   "[elementwise]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // Lengths across the CPU's vector widths, tails and 1024-float chunks: every element must
  // take the same path (decoding's batch invariance rests on it).
  const std::vector<float> values = {-7.25f, -0.3f, 0.0f, 1.0e-3f, 2.5f, 11.0f};
  for (float v : values) {
    Tensor one = be->empty({1});
    be->swish(be->upload(std::vector<float>{v}, {1}), one);
    const float alone = fetch(*be, one)[0];
    for (int64_t n : {7, 16, 23, 1024, 2085}) {
      Tensor y = be->empty({n});
      be->swish(be->upload(std::vector<float>(n, v), {n}), y);
      INFO("value " << v << ", n " << n);
      for (float got : fetch(*be, y)) REQUIRE(got == alone);
    }
  }
}

TEMPLATE_TEST_CASE("add_bias_swish forward: swish(x + bias), bit for bit add_bias then swish",
                   "[elementwise]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 450;
  for (const Shape& s : kShapes) {
    const int64_t c = s[-1], r = s.rows();
    std::vector<float> x = random_vector(s.numel(), ++seed), b = random_vector(c, ++seed);
    for (float& v : x) v *= 6.0f;
    const Tensor X = be->upload(x, s), B = be->upload(b, {c});
    Tensor y = be->upload(random_vector(s.numel(), ++seed), s);  // garbage, overwritten
    be->add_bias_swish(X, B, y);
    const std::vector<float> got = fetch(*be, y);
    std::vector<double> want(s.numel());
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) {
        const double v = double(x[i * c + j]) + b[j];
        want[i * c + j] = v / (1.0 + std::exp(-v));
      }
    INFO("shape " << s.str());
    TX_CHECK_OK(compare(got, want, 1e-6, 1e-6));
    Tensor chained = be->empty(s);
    be->add_bias(X, B, chained);
    be->swish(chained, chained);
    TX_CHECK_OK(compare_exact(got, fetch(*be, chained)));
    be->add_bias_swish(X, B, X);  // in place
    TX_REQUIRE_OK(compare_exact(fetch(*be, X), got));
  }
  Tensor x = be->zeros({2, 4}), wrong = be->zeros({5});
  CHECK_THROWS_WITH(be->add_bias_swish(x, wrong, x), Catch::Contains("add_bias_swish: bias"));
}

TEMPLATE_TEST_CASE("swish backward: finite differences, accumulates into dx", "[elementwise]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (const Shape& s : {Shape{1, 1}, Shape{3, 7}, Shape{2, 3, 5}}) {
    std::vector<float> x = random_vector(s.numel(), 71);
    for (float& v : x) v *= 4.0f;
    std::vector<float> r = random_vector(s.numel(), 72);
    Tensor X = be->upload(x, s), R = be->upload(r, s);
    std::vector<float> g = check_accumulates(*be, s, [&](const Tensor& dx, bool accumulate) {
      be->swish_backward(R, X, dx, accumulate);
    });
    auto loss = [&](const std::vector<float>& v) -> double {
      Tensor y = be->empty(s);
      be->swish(be->upload(v, s), y);
      return dot(fetch(*be, y), r);
    };
    INFO("shape " << s.str());
    TX_CHECK_OK(compare_gradient(g, numeric_gradient(loss, x, 1e-2f), 1e-3, 1e-3));
  }
}
