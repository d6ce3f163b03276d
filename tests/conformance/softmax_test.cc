// Conformance: softmax (scale, key_lengths, causal), softmax_backward, log_softmax,
// log_softmax_backward.
#include <cmath>
#include <limits>

#include "support/backends.h"
#include "support/reference.h"

namespace {

using tx::Shape;
using tx::Tensor;
using namespace tx::test;

// softmax(scale * x) along the last dim of x [B, ..., Tq, Tk] in double. Key j of query i in
// batch entry b is visible when j < lengths[b] (if any) and, when causal, j <= i + Tk - Tq.
// Rows with no visible key are all zeros.
std::vector<double> reference_softmax(const std::vector<float>& x, const Shape& s, float scale,
                                      const std::vector<int32_t>* lengths, bool causal) {
  int64_t tk = s[-1], tq = s[-2], b = s[0];
  int64_t rows = s.rows(), rows_per_batch = rows / b;
  std::vector<double> y(x.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t bi = r / rows_per_batch, qi = r % tq;
    int64_t visible = lengths ? std::min<int64_t>((*lengths)[bi], tk) : tk;
    if (causal) visible = std::min<int64_t>(visible, qi + tk - tq + 1);
    if (visible <= 0) continue;
    const float* xr = x.data() + r * tk;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < visible; ++j) mx = std::max(mx, double(scale) * xr[j]);
    double z = 0;
    for (int64_t j = 0; j < visible; ++j) z += std::exp(double(scale) * xr[j] - mx);
    for (int64_t j = 0; j < visible; ++j) y[r * tk + j] = std::exp(double(scale) * xr[j] - mx) / z;
  }
  return y;
}

std::vector<float> run_softmax(tx::Backend& be, const std::vector<float>& x, const Shape& s,
                               float scale, const std::vector<int32_t>* lengths, bool causal) {
  Tensor kl;
  if (lengths) kl = be.upload(*lengths, {s[0]});
  Tensor y = be.upload(random_vector(s.numel(), 999, -5.0f, 5.0f), s);  // garbage to overwrite
  be.softmax(be.upload(x, s), scale, kl, causal, y);
  return fetch(be, y);
}

void check_softmax(tx::Backend& be, const Shape& s, float scale,
                   const std::vector<int32_t>* lengths, bool causal, uint64_t seed,
                   float range = 3.0f) {
  std::vector<float> x = random_vector(s.numel(), seed, -range, range);
  std::vector<float> got = run_softmax(be, x, s, scale, lengths, causal);
  std::vector<double> want = reference_softmax(x, s, scale, lengths, causal);
  std::string lens;
  if (lengths)
    for (int32_t l : *lengths) lens += std::to_string(l) + " ";
  INFO("softmax x " << s.str() << " scale " << scale << " causal " << causal << " key_lengths "
                    << (lengths ? lens : "none"));
  TX_REQUIRE_OK(compare(got, want, 2e-5, 1e-7));
  // Masked keys are exactly zero.
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] == 0.0) REQUIRE(got[i] == 0.0f);
}

}  // namespace

TEMPLATE_TEST_CASE("softmax forward: scale, 2-D/3-D/4-D x, odd shapes", "[softmax]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 1;
  for (const Shape& s :
       {Shape{1, 1}, Shape{7, 33}, Shape{33, 65}, Shape{3, 5, 9}, Shape{2, 3, 7, 33},
        Shape{1, 1, 1, 1}, Shape{2, 1000}, Shape{4, 4, 33, 65}})
    for (float scale : {1.0f, 0.125f, 2.5f}) check_softmax(*be, s, scale, nullptr, false, ++seed);
}

TEMPLATE_TEST_CASE("softmax forward: key_lengths padding (length 0 row -> zeros, length == Tk)",
                   "[softmax]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  std::vector<int32_t> l3 = {0, 7, 3, 1};
  check_softmax(*be, {4, 5, 7}, 1.0f, &l3, false, 11);
  check_softmax(*be, {4, 5, 7}, 0.3f, &l3, false, 12);
  std::vector<int32_t> l4 = {9, 0, 5};
  check_softmax(*be, {3, 2, 4, 9}, 0.5f, &l4, false, 13);
  std::vector<int32_t> l1 = {1};
  check_softmax(*be, {1, 1, 1}, 1.0f, &l1, false, 14);
  std::vector<int32_t> l65 = {65, 64, 33, 1};
  check_softmax(*be, {4, 2, 3, 65}, 0.125f, &l65, false, 15);
}

TEMPLATE_TEST_CASE("softmax forward: causal with Tq == Tk", "[softmax]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  check_softmax(*be, {2, 7, 7}, 1.0f, nullptr, true, 21);
  check_softmax(*be, {1, 2, 33, 33}, 0.125f, nullptr, true, 22);
  check_softmax(*be, {1, 1, 1}, 1.0f, nullptr, true, 23);
  // Row 0 sees only key 0: probability exactly 1.
  std::vector<float> got = run_softmax(*be, random_vector(9, 24), {1, 3, 3}, 1.0f, nullptr, true);
  CHECK(got[0] == Approx(1.0f).epsilon(1e-6));
  CHECK(got[1] == 0.0f);
  CHECK(got[2] == 0.0f);
}

TEMPLATE_TEST_CASE("softmax forward: causal with Tq < Tk (incremental decoding)", "[softmax]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // Query i sees keys j <= i + Tk - Tq.
  check_softmax(*be, {2, 1, 9}, 1.0f, nullptr, true, 31);  // the last query sees every key
  check_softmax(*be, {2, 3, 8}, 0.5f, nullptr, true, 32);
  check_softmax(*be, {2, 2, 3, 8}, 0.5f, nullptr, true, 33);
  check_softmax(*be, {1, 4, 5, 33}, 1.0f, nullptr, true, 34);
  // Tq = 1, Tk = 9: nothing is masked, so causal equals non-causal.
  std::vector<float> x = random_vector(18, 35);
  std::vector<float> a = run_softmax(*be, x, {2, 1, 9}, 1.0f, nullptr, true);
  std::vector<float> b = run_softmax(*be, x, {2, 1, 9}, 1.0f, nullptr, false);
  TX_REQUIRE_OK(compare(a, b, 1e-6, 1e-9));
}

TEMPLATE_TEST_CASE("softmax forward: causal combined with key_lengths", "[softmax]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  std::vector<int32_t> l3 = {6, 2, 0};
  check_softmax(*be, {3, 4, 6}, 1.0f, &l3, true, 41);
  check_softmax(*be, {3, 6, 6}, 0.7f, &l3, true, 42);
  std::vector<int32_t> l2 = {4, 7};
  check_softmax(*be, {2, 2, 3, 7}, 0.5f, &l2, true, 43);
  std::vector<int32_t> l1 = {3};
  check_softmax(*be, {1, 1, 1, 9}, 1.0f, &l1, true, 44);
  std::vector<int32_t> l8 = {40, 1, 0, 39, 20, 40, 7, 33};
  check_softmax(*be, {8, 4, 40, 40}, 0.125f, &l8, true, 45);
  check_softmax(*be, {8, 4, 40, 40}, 0.125f, &l8, false, 46);
}

TEMPLATE_TEST_CASE("softmax forward: large logits stay finite (max subtraction)", "[softmax]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  check_softmax(*be, {5, 33}, 4.0f, nullptr, false, 51, 100.0f);
  std::vector<int32_t> l = {3, 33};
  check_softmax(*be, {2, 4, 33}, 4.0f, &l, true, 52, 100.0f);
}

TEMPLATE_TEST_CASE("softmax_backward: dx += scale * y * (dy - sum(dy * y)) against a loop",
                   "[softmax]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 60;
  for (const Shape& s : {Shape{1, 1}, Shape{7, 33}, Shape{2, 3, 5, 65}, Shape{4, 4, 33, 65}})
    for (float scale : {1.0f, 0.125f}) {
      int64_t c = s[-1];
      std::vector<float> x = random_vector(s.numel(), ++seed, -3.0f, 3.0f);
      std::vector<float> y = run_softmax(*be, x, s, 1.0f, nullptr, false);
      std::vector<float> dy = random_vector(s.numel(), ++seed);
      std::vector<float> d0 = random_vector(s.numel(), ++seed);
      std::vector<double> want(d0.size());
      for (int64_t r = 0; r < s.rows(); ++r) {
        double dot_ = 0;
        for (int64_t j = 0; j < c; ++j) dot_ += double(dy[r * c + j]) * y[r * c + j];
        for (int64_t j = 0; j < c; ++j)
          want[r * c + j] = d0[r * c + j] + scale * double(y[r * c + j]) * (dy[r * c + j] - dot_);
      }
      Tensor dx = be->upload(d0, s);
      be->softmax_backward(be->upload(y, s), be->upload(dy, s), scale, dx);
      INFO("shape " << s.str() << " scale " << scale);
      TX_REQUIRE_OK(compare(fetch(*be, dx), want, 1e-5, 1e-6));
    }
}

TEMPLATE_TEST_CASE("softmax backward: finite differences (scale, key_lengths, causal)", "[softmax]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  struct Case {
    Shape shape;
    float scale;
    std::vector<int32_t> lengths;  // empty: none
    bool causal;
  };
  for (const Case& c : {Case{{1, 1}, 1.0f, {}, false}, Case{{3, 5}, 1.0f, {}, false},
                        Case{{2, 3, 5}, 0.5f, {5, 2}, false}, Case{{2, 4, 4}, 1.5f, {}, true},
                        Case{{2, 2, 3, 5}, 0.7f, {4, 0}, true}, Case{{1, 2, 6}, 1.0f, {}, true}}) {
    const Shape& s = c.shape;
    const std::vector<int32_t>* lens = c.lengths.empty() ? nullptr : &c.lengths;
    std::vector<float> x = random_vector(s.numel(), 70, -2.0f, 2.0f);
    std::vector<float> r = random_vector(s.numel(), 71);
    auto loss = [&](const std::vector<float>& v) -> double {
      return dot(run_softmax(*be, v, s, c.scale, lens, c.causal), r);
    };
    Tensor Y = be->upload(run_softmax(*be, x, s, c.scale, lens, c.causal), s);
    Tensor R = be->upload(r, s);
    std::vector<float> g = check_accumulates(*be, s, [&](const Tensor& dx, bool accumulate) {
      be->softmax_backward(Y, R, c.scale, dx, accumulate);
    });
    INFO("shape " << s.str() << " scale " << c.scale << " causal " << c.causal);
    TX_CHECK_OK(compare_gradient(g, numeric_gradient(loss, x, 1e-2f), 2e-3, 2e-4));
  }
}

// ---- log_softmax ------------------------------------------------------------------------------

namespace {
std::vector<double> reference_log_softmax(const std::vector<float>& x, int64_t c) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / c; ++r) {
    const float* xr = x.data() + r * c;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < c; ++j) mx = std::max(mx, double(xr[j]));
    double z = 0;
    for (int64_t j = 0; j < c; ++j) z += std::exp(xr[j] - mx);
    for (int64_t j = 0; j < c; ++j) y[r * c + j] = xr[j] - mx - std::log(z);
  }
  return y;
}
}  // namespace

TEMPLATE_TEST_CASE("log_softmax forward: odd shapes and large logits", "[log_softmax]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 80;
  for (const Shape& s : {Shape{1}, Shape{1, 1}, Shape{7, 33}, Shape{33, 65}, Shape{2, 3, 7},
                         Shape{3, 1001}, Shape{37, 1031}})
    for (float range : {3.0f, 80.0f}) {
      std::vector<float> x = random_vector(s.numel(), ++seed, -range, range);
      Tensor y = be->empty(s);
      be->log_softmax(be->upload(x, s), y);
      INFO("shape " << s.str() << " range " << range);
      TX_REQUIRE_OK(compare(fetch(*be, y), reference_log_softmax(x, s[-1]), 1e-5, 1e-5));
    }
}

TEMPLATE_TEST_CASE("log_softmax_backward: dx += dy - exp(y) * sum(dy) against a loop",
                   "[log_softmax]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 90;
  for (const Shape& s : {Shape{1, 1}, Shape{7, 33}, Shape{2, 5, 65}, Shape{37, 1031}}) {
    int64_t c = s[-1];
    std::vector<float> x = random_vector(s.numel(), ++seed, -3.0f, 3.0f);
    Tensor Y = be->empty(s);
    be->log_softmax(be->upload(x, s), Y);
    std::vector<float> y = fetch(*be, Y);
    std::vector<float> dy = random_vector(s.numel(), ++seed), d0 = random_vector(s.numel(), ++seed);
    std::vector<double> want(d0.size());
    for (int64_t r = 0; r < s.rows(); ++r) {
      double sum = 0;
      for (int64_t j = 0; j < c; ++j) sum += dy[r * c + j];
      for (int64_t j = 0; j < c; ++j)
        want[r * c + j] = d0[r * c + j] + dy[r * c + j] - std::exp(double(y[r * c + j])) * sum;
    }
    Tensor dx = be->upload(d0, s);
    be->log_softmax_backward(Y, be->upload(dy, s), dx);
    INFO("shape " << s.str());
    TX_REQUIRE_OK(compare(fetch(*be, dx), want, 1e-5, 1e-5));
  }
}

TEMPLATE_TEST_CASE("log_softmax backward: finite differences", "[log_softmax]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (const Shape& s : {Shape{1, 1}, Shape{3, 5}, Shape{2, 2, 7}}) {
    std::vector<float> x = random_vector(s.numel(), 100, -2.0f, 2.0f);
    std::vector<float> r = random_vector(s.numel(), 101);
    auto forward = [&](const std::vector<float>& v) {
      Tensor y = be->empty(s);
      be->log_softmax(be->upload(v, s), y);
      return y;
    };
    Tensor Y = forward(x), R = be->upload(r, s);
    std::vector<float> g =
        check_accumulates(*be, s, [&](const Tensor& dx) { be->log_softmax_backward(Y, R, dx); });
    auto loss = [&](const std::vector<float>& v) -> double {
      return dot(fetch(*be, forward(v)), r);
    };
    INFO("shape " << s.str());
    TX_CHECK_OK(compare_gradient(g, numeric_gradient(loss, x, 1e-2f), 2e-3, 2e-4));
  }
}
