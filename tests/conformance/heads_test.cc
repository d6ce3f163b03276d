// Conformance: split_heads and merge_heads (with and without accumulate).
#include "support/backends.h"
#include "support/reference.h"

namespace {

using tx::Shape;
using tx::Tensor;
using namespace tx::test;

struct HeadsCase {
  int64_t b, t, h, dh;
};

const std::vector<HeadsCase> kCases = {{1, 1, 1, 1},  {2, 7, 3, 5},  {3, 33, 4, 16},
                                       {1, 5, 8, 8},  {2, 1, 2, 7},  {1, 65, 1, 33},
                                       {2, 9, 16, 1}, {2, 64, 8, 64}};

// Offset of x[b, t, h * dh + d] in [B, T, H * Dh] and of y[b, h, t, d] in [B, H, T, Dh].
int64_t merged_at(const HeadsCase& c, int64_t b, int64_t t, int64_t h, int64_t d) {
  return (b * c.t + t) * c.h * c.dh + h * c.dh + d;
}
int64_t split_at(const HeadsCase& c, int64_t b, int64_t t, int64_t h, int64_t d) {
  return ((b * c.h + h) * c.t + t) * c.dh + d;
}

// want[split_at] = base[split_at] + x[merged_at] (split) or the reverse (merge).
std::vector<float> permute(const HeadsCase& c, const std::vector<float>& x,
                           const std::vector<float>& base, bool split) {
  std::vector<float> out = base;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t t = 0; t < c.t; ++t)
      for (int64_t h = 0; h < c.h; ++h)
        for (int64_t d = 0; d < c.dh; ++d) {
          int64_t from = split ? merged_at(c, b, t, h, d) : split_at(c, b, t, h, d);
          int64_t to = split ? split_at(c, b, t, h, d) : merged_at(c, b, t, h, d);
          out[to] += x[from];
        }
  return out;
}

Shape merged_shape(const HeadsCase& c) {
  return {c.b, c.t, c.h * c.dh};
}
Shape split_shape(const HeadsCase& c) {
  return {c.b, c.h, c.t, c.dh};
}

std::string name(const HeadsCase& c) {
  return "B=" + std::to_string(c.b) + " T=" + std::to_string(c.t) + " H=" + std::to_string(c.h) +
         " Dh=" + std::to_string(c.dh);
}

}  // namespace

TEMPLATE_TEST_CASE("split_heads forward: [B,T,H*Dh] -> [B,H,T,Dh] index formula", "[heads]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 1;
  for (const HeadsCase& c : kCases) {
    size_t n = c.b * c.t * c.h * c.dh;
    std::vector<float> x = random_vector(n, ++seed);
    Tensor y = be->upload(random_vector(n, ++seed), split_shape(c));  // overwritten
    be->split_heads(be->upload(x, merged_shape(c)), static_cast<int>(c.h), y);
    INFO(name(c));
    TX_REQUIRE_OK(compare_exact(fetch(*be, y), permute(c, x, std::vector<float>(n, 0.0f), true)));
  }
}

TEMPLATE_TEST_CASE("merge_heads forward: [B,H,T,Dh] -> [B,T,H*Dh] index formula", "[heads]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 10;
  for (const HeadsCase& c : kCases) {
    size_t n = c.b * c.t * c.h * c.dh;
    std::vector<float> x = random_vector(n, ++seed);
    Tensor y = be->upload(random_vector(n, ++seed), merged_shape(c));
    be->merge_heads(be->upload(x, split_shape(c)), y);
    INFO(name(c));
    TX_REQUIRE_OK(compare_exact(fetch(*be, y), permute(c, x, std::vector<float>(n, 0.0f), false)));
  }
}

TEMPLATE_TEST_CASE("split_heads/merge_heads: accumulate=true adds onto y", "[heads]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 20;
  for (const HeadsCase& c : kCases) {
    size_t n = c.b * c.t * c.h * c.dh;
    std::vector<float> x = random_vector(n, ++seed), y0 = random_vector(n, ++seed);
    INFO(name(c));
    Tensor ys = be->upload(y0, split_shape(c));
    be->split_heads(be->upload(x, merged_shape(c)), static_cast<int>(c.h), ys, true);
    TX_CHECK_OK(compare(fetch(*be, ys), permute(c, x, y0, true), 1e-7, 0));
    Tensor ym = be->upload(y0, merged_shape(c));
    be->merge_heads(be->upload(x, split_shape(c)), ym, true);
    TX_CHECK_OK(compare(fetch(*be, ym), permute(c, x, y0, false), 1e-7, 0));
  }
}

TEMPLATE_TEST_CASE("split_heads/merge_heads: round trip is the identity", "[heads]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 30;
  for (const HeadsCase& c : kCases) {
    size_t n = c.b * c.t * c.h * c.dh;
    std::vector<float> x = random_vector(n, ++seed);
    Tensor s = be->empty(split_shape(c)), m = be->empty(merged_shape(c));
    be->split_heads(be->upload(x, merged_shape(c)), static_cast<int>(c.h), s);
    be->merge_heads(s, m);
    INFO(name(c));
    TX_CHECK_OK(compare_exact(fetch(*be, m), x));
    Tensor s2 = be->empty(split_shape(c));
    be->split_heads(m, static_cast<int>(c.h), s2);
    TX_CHECK_OK(compare_exact(fetch(*be, s2), fetch(*be, s)));
  }
}

TEMPLATE_TEST_CASE(
    "split_heads backward: finite differences (merge_heads accumulates the gradient)", "[heads]",
    TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (const HeadsCase& c : {HeadsCase{2, 3, 2, 3}, HeadsCase{1, 2, 3, 1}}) {
    size_t n = c.b * c.t * c.h * c.dh;
    std::vector<float> x = random_vector(n, 40), r = random_vector(n, 41);
    Tensor R = be->upload(r, split_shape(c));
    auto loss = [&](const std::vector<float>& v) -> double {
      Tensor y = be->empty(split_shape(c));
      be->split_heads(be->upload(v, merged_shape(c)), static_cast<int>(c.h), y);
      return dot(fetch(*be, y), r);
    };
    std::vector<float> g = check_accumulates(
        *be, merged_shape(c), [&](const Tensor& dx) { be->merge_heads(R, dx, true); });
    INFO(name(c));
    TX_CHECK_OK(compare_gradient(g, numeric_gradient(loss, x, 1e-2f), 1e-3, 1e-4));
  }
}

TEMPLATE_TEST_CASE(
    "merge_heads backward: finite differences (split_heads accumulates the gradient)", "[heads]",
    TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (const HeadsCase& c : {HeadsCase{2, 3, 2, 3}, HeadsCase{1, 2, 3, 1}}) {
    size_t n = c.b * c.t * c.h * c.dh;
    std::vector<float> x = random_vector(n, 50), r = random_vector(n, 51);
    Tensor R = be->upload(r, merged_shape(c));
    auto loss = [&](const std::vector<float>& v) -> double {
      Tensor y = be->empty(merged_shape(c));
      be->merge_heads(be->upload(v, split_shape(c)), y);
      return dot(fetch(*be, y), r);
    };
    std::vector<float> g = check_accumulates(*be, split_shape(c), [&](const Tensor& dx) {
      be->split_heads(R, static_cast<int>(c.h), dx, true);
    });
    INFO(name(c));
    TX_CHECK_OK(compare_gradient(g, numeric_gradient(loss, x, 1e-2f), 1e-3, 1e-4));
  }
}
