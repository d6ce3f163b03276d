// Conformance: gather_rows, scatter_add_rows, top_k, beam_top_k.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "support/backends.h"
#include "support/reference.h"

namespace {

using tx::Shape;
using tx::Tensor;
using namespace tx::test;

// Shape with the first dimension replaced.
Shape with_rows(const Shape& s, int64_t rows) {
  std::vector<int64_t> d = s.dims();
  d[0] = rows;
  return Shape(d);
}

}  // namespace

// ---- gather_rows ------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("gather_rows forward: dst[m] = scale * src[index[m]], repeated indices",
                   "[rows]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  struct Case {
    Shape src;
    int64_t m;
    float scale;
  };
  uint64_t seed = 1;
  for (const Case& c :
       {Case{{1, 1}, 1, 1.0f}, Case{{1, 7}, 5, 2.0f}, Case{{33, 65}, 7, 1.0f},
        Case{{33, 65}, 100, 8.0f}, Case{{10, 3, 5}, 12, 0.5f}, Case{{1000, 16}, 33, 22.627417f},
        Case{{7}, 9, -1.0f}, Case{{100, 512}, 100, 2.0f}}) {
    int64_t n = c.src[0], row = c.src.numel() / n;
    std::vector<float> src = random_vector(c.src.numel(), ++seed);
    std::vector<int32_t> idx = random_ints(c.m, ++seed, 0, static_cast<int32_t>(n));
    idx[0] = static_cast<int32_t>(n - 1);  // the last row
    if (c.m > 2) idx[2] = idx[1];          // a repeat
    Shape dshape = with_rows(c.src, c.m);
    Tensor dst = be->upload(random_vector(dshape.numel(), ++seed), dshape);
    be->gather_rows(be->upload(src, c.src), be->upload(idx, {c.m}), dst, c.scale);
    std::vector<double> want(dshape.numel());
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < row; ++j) want[i * row + j] = double(c.scale) * src[idx[i] * row + j];
    INFO("src " << c.src.str() << " M " << c.m << " scale " << c.scale);
    TX_REQUIRE_OK(compare(fetch(*be, dst), want, 1e-7, 0));
  }
}

TEMPLATE_TEST_CASE("gather_rows forward: an index outside -1..N-1 throws tx::Error", "[rows]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor src = be->upload(random_vector(5 * 3, 1), {5, 3});
  Tensor dst = be->empty({3, 3});
  for (std::vector<int32_t> idx : {std::vector<int32_t>{0, 5, 1}, std::vector<int32_t>{-2, 0, 0},
                                   std::vector<int32_t>{0, 1, 1000000}}) {
    Tensor index = be->upload(idx, {3});
    INFO("index " << idx[0] << " " << idx[1] << " " << idx[2] << " into 5 rows");
    CHECK_THROWS_AS(
        [&] {
          be->gather_rows(src, index, dst);
          be->synchronize();
        }(),
        tx::Error);
  }
  // An empty index is fine and leaves dst alone.
  Tensor none = be->empty({0, 3});
  be->gather_rows(src, be->upload(std::vector<int32_t>{}, {0}), none);
}

TEMPLATE_TEST_CASE("gather_rows -1 writes a zero row, scatter_add_rows skips it", "[rows]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const std::vector<float> src = random_vector(4 * 3, 5);
  const std::vector<int32_t> idx = {2, -1, 0, -1};
  Tensor dst = be->upload(random_vector(4 * 3, 6), {4, 3});  // garbage to overwrite
  be->gather_rows(be->upload(src, {4, 3}), be->upload(idx, {4}), dst, 2.0f);
  std::vector<double> want(12, 0.0);
  for (int j = 0; j < 3; ++j) {
    want[0 * 3 + j] = 2.0 * src[2 * 3 + j];
    want[2 * 3 + j] = 2.0 * src[0 * 3 + j];
  }
  TX_REQUIRE_OK(compare(fetch(*be, dst), want, 0, 0));
  const std::vector<float> grad = random_vector(4 * 3, 7), base = random_vector(4 * 3, 8);
  Tensor table = be->upload(base, {4, 3});
  be->scatter_add_rows(be->upload(grad, {4, 3}), be->upload(idx, {4}), table);
  std::vector<double> added(base.begin(), base.end());
  for (int j = 0; j < 3; ++j) {
    added[2 * 3 + j] += grad[0 * 3 + j];
    added[0 * 3 + j] += grad[2 * 3 + j];
  }
  TX_REQUIRE_OK(compare(fetch(*be, table), added, 1e-7, 0));
}

TEMPLATE_TEST_CASE("gather_rows backward: finite differences (scatter_add_rows is the gradient)",
                   "[rows]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const Shape ss{4, 3};
  const float scale = 1.5f;
  std::vector<float> src = random_vector(12, 1);
  std::vector<int32_t> idx = {2, 0, 2, 3, 2};  // row 1 unused, row 2 three times
  std::vector<float> r = random_vector(15, 2);
  Tensor I = be->upload(idx, {5}), R = be->upload(r, {5, 3});
  auto loss = [&](const std::vector<float>& v) -> double {
    Tensor dst = be->empty({5, 3});
    be->gather_rows(be->upload(v, ss), I, dst, scale);
    return dot(fetch(*be, dst), r);
  };
  std::vector<float> g =
      check_accumulates(*be, ss, [&](const Tensor& d) { be->scatter_add_rows(R, I, d, scale); });
  TX_CHECK_OK(compare_gradient(g, numeric_gradient(loss, src, 1e-2f), 1e-3, 1e-4));
  for (int j = 0; j < 3; ++j) CHECK(g[1 * 3 + j] == 0.0f);
}

// ---- scatter_add_rows ---------------------------------------------------------------------------

TEMPLATE_TEST_CASE("scatter_add_rows forward: dst[index[m]] += scale * src[m], repeats accumulate",
                   "[rows]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  struct Case {
    Shape dst;
    int64_t m;
    float scale;
  };
  uint64_t seed = 10;
  for (const Case& c : {Case{{1, 1}, 1, 1.0f}, Case{{1, 1}, 9, 1.0f}, Case{{7, 33}, 5, 0.5f},
                        Case{{7, 65}, 1000, 1.0f}, Case{{33, 3, 5}, 40, -2.0f},
                        Case{{1000, 16}, 257, 8.0f}, Case{{50, 200}, 600, 1.0f}}) {
    int64_t n = c.dst[0], row = c.dst.numel() / n;
    Shape sshape = with_rows(c.dst, c.m);
    std::vector<float> src = random_vector(sshape.numel(), ++seed);
    std::vector<int32_t> idx = random_ints(c.m, ++seed, 0, static_cast<int32_t>(n));
    std::vector<float> d0 = random_vector(c.dst.numel(), ++seed);
    std::vector<double> want = to_double(d0), tol(d0.size(), 1e-6);
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < row; ++j) {
        double v = double(c.scale) * src[i * row + j];
        want[idx[i] * row + j] += v;
        tol[idx[i] * row + j] += 1e-6 * std::fabs(v) * 4;
      }
    for (size_t i = 0; i < d0.size(); ++i) tol[i] += 1e-6 * std::fabs(d0[i]);
    Tensor dst = be->upload(d0, c.dst);
    be->scatter_add_rows(be->upload(src, sshape), be->upload(idx, {c.m}), dst, c.scale);
    INFO("dst " << c.dst.str() << " M " << c.m << " scale " << c.scale);
    TX_REQUIRE_OK(compare_tol(fetch(*be, dst), want, tol));
  }
}

TEMPLATE_TEST_CASE("scatter_add_rows backward: finite differences (gather_rows is the gradient)",
                   "[rows]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // d/dsrc of sum(r * scatter(src)) = scale * r[index[m]]: a gather.
  const float scale = 0.5f;
  std::vector<float> src = random_vector(5 * 3, 3);
  std::vector<int32_t> idx = {1, 1, 0, 3, 1};
  std::vector<float> r = random_vector(4 * 3, 4);
  Tensor I = be->upload(idx, {5});
  auto loss = [&](const std::vector<float>& v) -> double {
    Tensor dst = be->zeros({4, 3});
    be->scatter_add_rows(be->upload(v, {5, 3}), I, dst, scale);
    return dot(fetch(*be, dst), r);
  };
  Tensor g = be->empty({5, 3});
  be->gather_rows(be->upload(r, {4, 3}), I, g, scale);
  TX_CHECK_OK(compare_gradient(fetch(*be, g), numeric_gradient(loss, src, 1e-2f), 1e-3, 1e-4));
}

// ---- top_k ------------------------------------------------------------------------------------

namespace {
// Indices of the k largest of each row: value descending, ties by lower index, NaN after every
// number (NaNs by index).
void reference_top_k(const std::vector<float>& x, int64_t c, int k, std::vector<float>& values,
                     std::vector<int32_t>& indices) {
  int64_t rows = x.size() / c;
  values.clear();
  indices.clear();
  std::vector<int32_t> order(c);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * c;
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      const bool nan_a = std::isnan(xr[a]), nan_b = std::isnan(xr[b]);
      if (nan_a || nan_b) return nan_a == nan_b ? a < b : nan_b;
      return xr[a] > xr[b] || (xr[a] == xr[b] && a < b);
    });
    for (int i = 0; i < k; ++i) {
      values.push_back(xr[order[i]]);
      indices.push_back(order[i]);
    }
  }
}

void check_top_k(tx::Backend& be, const std::vector<float>& x, const Shape& s, int k) {
  int64_t rows = s.rows();
  Tensor values = be.empty({rows, k}), indices = be.empty({rows, k}, tx::DType::i32);
  be.top_k(be.upload(x, s), k, values, indices);
  std::vector<float> wv;
  std::vector<int32_t> wi;
  reference_top_k(x, s[-1], k, wv, wi);
  INFO("top_k x " << s.str() << " k " << k);
  TX_CHECK_OK(compare_exact(fetch_i32(be, indices), wi));
  TX_CHECK_OK(compare_exact(fetch(be, values), wv));
}
}  // namespace

TEMPLATE_TEST_CASE("top_k forward: k=1, k=C and between, descending values, odd shapes", "[top_k]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 40;
  for (const Shape& s :
       {Shape{1, 1}, Shape{7, 33}, Shape{3, 1000}, Shape{2, 3, 9}, Shape{1, 65}, Shape{4, 32000}})
    for (int k : {1, 2, 5, 33, static_cast<int>(s[-1])}) {
      if (k > s[-1]) continue;
      check_top_k(*be, random_vector(s.numel(), ++seed, -10.0f, 10.0f), s, k);
    }
}

TEMPLATE_TEST_CASE("top_k forward: ties keep the lower index first", "[top_k]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // Integer values in [0, 4): every row is full of ties.
  for (const Shape& s : {Shape{5, 17}, Shape{2, 100}, Shape{1, 8}}) {
    std::vector<int32_t> ints = random_ints(s.numel(), 50, 0, 4);
    std::vector<float> x(ints.begin(), ints.end());
    for (int k : {1, 3, 8, static_cast<int>(s[-1])}) check_top_k(*be, x, s, k);
  }
  // All equal: indices 0, 1, 2, ...
  std::vector<float> same(9, 0.5f);
  check_top_k(*be, same, {1, 9}, 9);
  // Rising and falling rows (every element replaces the kept list's last, or none after the
  // first k), runs of equal values across the CPU scan's 16-value chunks, and -inf.
  std::vector<float> rising(2 * 1000);
  for (int i = 0; i < 1000; ++i) {
    rising[i] = static_cast<float>(i / 3);
    rising[1000 + i] = -static_cast<float>(i / 40);
  }
  rising[1500] = -INFINITY;
  for (int k : {1, 5, 10, 64}) check_top_k(*be, rising, {2, 1000}, k);
  // Negative and very large values.
  std::vector<float> x = {-1e30f, 3.0f, -2.0f, 1e30f, 3.0f, -1e30f, 0.0f};
  check_top_k(*be, x, {1, 7}, 7);
  check_top_k(*be, x, {1, 7}, 2);
}

TEMPLATE_TEST_CASE("top_k forward: NaN ranks after every number, and every index is valid",
                   "[top_k]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // A NaN logit (a diverged model, a bad weight) must not cost beam search its candidates: the
  // k results are k distinct valid indices, the numbers first.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> first(300), within(300), all(300, nan), mixed(300);
  for (int i = 0; i < 300; ++i) {
    first[i] = within[i] = static_cast<float>((i * 37) % 101) - 50.0f;
    mixed[i] = i % 3 == 0 ? nan : (i % 3 == 1 ? -INFINITY : static_cast<float>(i % 7));
  }
  first[0] = nan;                 // the CPU scan's first list, and its last slot
  within[3] = within[250] = nan;  // inside the first k, and in a later chunk
  within[1] = -INFINITY;
  std::vector<float> rows;
  for (const auto* r : {&first, &within, &all, &mixed})
    rows.insert(rows.end(), r->begin(), r->end());
  for (int k : {1, 2, 4, 10, 64, 300}) check_top_k(*be, rows, {4, 300}, k);
  // A NaN among the first k: the CPU scan's list ends in a NaN when the scan starts.
  std::vector<float> second(64);
  for (int i = 0; i < 64; ++i) second[i] = static_cast<float>((i * 13) % 29) - 10.0f;
  second[1] = nan;
  for (int k : {1, 2, 3, 8}) check_top_k(*be, second, {1, 64}, k);
}

// ---- beam_top_k -------------------------------------------------------------------------------

namespace {
struct BeamCase {
  int64_t groups, beam, vocab;
  int k;
};

// log_softmax, add_bias, the rank-1 gemm and top_k: what beam_top_k fuses.
void composed_beam_top_k(tx::Backend& be, const Tensor& logits, const Tensor& mask,
                         const Tensor& offsets, const BeamCase& c, const Tensor& values,
                         const Tensor& indices) {
  const int64_t rows = c.groups * c.beam;
  Tensor scores = be.empty({rows, c.vocab}), ones = be.empty({1, c.vocab});
  be.fill(ones, 1.0f);
  be.log_softmax(logits, scores);
  be.add_bias(scores, mask, scores);
  be.gemm(offsets.view({rows, 1}), false, ones, false, scores, 1.0f, 1.0f);
  be.top_k(scores.view({c.groups, c.beam * c.vocab}), c.k, values, indices);
}
}  // namespace

TEMPLATE_TEST_CASE("beam_top_k forward: log_softmax, mask, running score and top_k bit for bit",
                   "[top_k]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  constexpr float kDead = -1e30f;  // beam search's masked tokens and dead rows
  uint64_t seed = 700;
  for (const BeamCase& c : {BeamCase{1, 1, 8000, 2}, BeamCase{3, 1, 50, 2},
                            BeamCase{1, 5, 8000, 10}, BeamCase{7, 5, 301, 10}, BeamCase{2, 4, 3, 8},
                            BeamCase{4, 2, 1000, 1}, BeamCase{2, 3, 17, 51}}) {
    const int64_t rows = c.groups * c.beam;
    std::vector<float> logits = random_vector(rows * c.vocab, ++seed, -8.0f, 8.0f);
    // Rows of equal logits: ties across a group's rows and within a row.
    for (int64_t v = 0; v < c.vocab; ++v) logits[v] = std::round(logits[v]);
    std::vector<float> mask(c.vocab, 0.0f);
    for (int64_t v = 0; v < c.vocab; v += 3) mask[v] = kDead;
    std::vector<float> offsets = random_vector(rows, ++seed, -20.0f, 0.0f);
    for (int64_t r = 1; r < rows; r += 2) offsets[r] = kDead;  // filler rows
    const Tensor x = be->upload(logits, {rows, c.vocab}), m = be->upload(mask, {c.vocab}),
                 o = be->upload(offsets, {rows});
    Tensor values = be->empty({c.groups, c.k}),
           indices = be->empty({c.groups, c.k}, tx::DType::i32);
    Tensor want_values = be->empty({c.groups, c.k}),
           want_indices = be->empty({c.groups, c.k}, tx::DType::i32);
    be->beam_top_k(x, m, o, static_cast<int>(c.beam), c.k, values, indices);
    composed_beam_top_k(*be, x, m, o, c, want_values, want_indices);
    INFO("groups " << c.groups << " beam " << c.beam << " vocab " << c.vocab << " k " << c.k);
    TX_CHECK_OK(compare_exact(fetch_i32(*be, indices), fetch_i32(*be, want_indices)));
    TX_CHECK_OK(compare_exact(fetch(*be, values), fetch(*be, want_values)));
    CHECK(fetch(*be, x) == logits);  // the logits are read, not written
  }
}

TEMPLATE_TEST_CASE("beam_top_k forward: each group's best log-probs plus scores, in double",
                   "[top_k]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const int64_t groups = 3, beam = 4, vocab = 500;
  const int k = 8;
  const int64_t rows = groups * beam;
  const std::vector<float> logits = random_vector(rows * vocab, 801, -6.0f, 6.0f);
  const std::vector<float> offsets = random_vector(rows, 802, -5.0f, 0.0f);
  std::vector<float> mask(vocab, 0.0f);
  mask[7] = -1e30f;
  Tensor values = be->empty({groups, k}), indices = be->empty({groups, k}, tx::DType::i32);
  be->beam_top_k(be->upload(logits, {rows, vocab}), be->upload(mask, {vocab}),
                 be->upload(offsets, {rows}), beam, k, values, indices);
  const std::vector<float> got = fetch(*be, values);
  const std::vector<int32_t> ids = fetch_i32(*be, indices);
  for (int64_t g = 0; g < groups; ++g) {
    std::vector<double> score(beam * vocab);
    for (int64_t b = 0; b < beam; ++b) {
      const float* x = logits.data() + (g * beam + b) * vocab;
      double max = x[0], sum = 0;
      for (int64_t v = 0; v < vocab; ++v) max = std::max<double>(max, x[v]);
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(x[v] - max);
      for (int64_t v = 0; v < vocab; ++v)
        score[b * vocab + v] = x[v] - max - std::log(sum) + mask[v] + offsets[g * beam + b];
    }
    std::vector<double> sorted = score;
    std::sort(sorted.begin(), sorted.end(), std::greater<double>());
    INFO("group " << g);
    for (int j = 0; j < k; ++j) {
      CHECK(std::abs(got[g * k + j] - sorted[j]) < 1e-4);  // the k best values, in order
      CHECK(std::abs(score[ids[g * k + j]] - got[g * k + j]) < 1e-4);  // and whose they are
      for (int i = 0; i < j; ++i) CHECK(ids[g * k + i] != ids[g * k + j]);
    }
  }
}
