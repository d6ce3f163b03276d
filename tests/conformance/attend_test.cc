// Conformance: attend_cached (a decoding step's attention over a time-major cache read through
// each row's ancestry) and attend_memory (over each row's entry of the encoder memory), against
// plain loops in double and against the softmax and batched GEMMs they replace.
#include <cmath>

#include "support/backends.h"
#include "support/reference.h"

namespace {

using Catch::Contains;
using tx::Tensor;
using namespace tx::test;

struct CachedCase {
  int64_t rows, heads, d_head, capacity, slots, length;
};

// d_head 32, 64 and 128 take the CPU's AVX-512 rows where it has them (keys in blocks of 16:
// lengths below, at and past a block); the others the plain loops.
const std::vector<CachedCase> kCases = {
    {1, 1, 1, 1, 1, 1},      {3, 2, 5, 7, 4, 7},   {5, 4, 64, 16, 5, 9},   {10, 4, 64, 40, 12, 33},
    {2, 8, 16, 300, 3, 257}, {7, 3, 33, 12, 7, 1}, {4, 2, 128, 20, 4, 16}, {3, 2, 32, 40, 3, 35}};

std::string name(const CachedCase& c) {
  return "R=" + std::to_string(c.rows) + " H=" + std::to_string(c.heads) +
         " Dh=" + std::to_string(c.d_head) + " capacity=" + std::to_string(c.capacity) +
         " slots=" + std::to_string(c.slots) + " length=" + std::to_string(c.length);
}

// Each row's slot per step, as beam reorders leave it: any slot, rows sharing ancestors.
std::vector<int32_t> random_rows(const CachedCase& c, uint64_t seed) {
  std::vector<float> u = random_vector(c.rows * c.capacity, seed, 0.0f, 1.0f);
  std::vector<int32_t> rows(u.size());
  for (size_t i = 0; i < u.size(); ++i)
    rows[i] = std::min<int32_t>(static_cast<int32_t>(u[i] * c.slots), c.slots - 1);
  return rows;
}

std::vector<double> reference(const CachedCase& c, const std::vector<float>& q,
                              const std::vector<float>& k, const std::vector<float>& v,
                              const std::vector<int32_t>& rows, float scale) {
  std::vector<double> out(c.rows * c.heads * c.d_head, 0.0);
  auto at = [&](int64_t t, int64_t slot, int64_t h) {
    return ((t * c.slots + slot) * c.heads + h) * c.d_head;
  };
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t h = 0; h < c.heads; ++h) {
      std::vector<double> s(c.length);
      double m = -INFINITY, z = 0.0;
      for (int64_t t = 0; t < c.length; ++t) {
        const int64_t base = at(t, rows[r * c.capacity + t], h);
        for (int64_t e = 0; e < c.d_head; ++e)
          s[t] += double(q[(r * c.heads + h) * c.d_head + e]) * k[base + e];
        s[t] *= scale;
        m = std::max(m, s[t]);
      }
      for (double& x : s) z += (x = std::exp(x - m));
      for (int64_t t = 0; t < c.length; ++t) {
        const int64_t base = at(t, rows[r * c.capacity + t], h);
        for (int64_t e = 0; e < c.d_head; ++e)
          out[(r * c.heads + h) * c.d_head + e] += s[t] / z * v[base + e];
      }
    }
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("attend_cached forward: softmax(scale q.k) v over each row's ancestry",
                   "[attention]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 100;
  for (const CachedCase& c : kCases) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.d_head));
    const std::vector<float> q = random_vector(c.rows * c.heads * c.d_head, ++seed, -2, 2);
    const int64_t cache = c.capacity * c.slots * c.heads * c.d_head;
    std::vector<float> k = random_vector(cache, ++seed, -2, 2);
    const std::vector<float> v = random_vector(cache, ++seed);
    std::vector<int32_t> rows = random_rows(c, ++seed);
    // Past `length` the table may hold anything: it must not be read.
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t t = c.length; t < c.capacity; ++t) rows[r * c.capacity + t] = -7;
    Tensor out = be->upload(random_vector(c.rows * c.heads * c.d_head, ++seed),
                            {c.rows, c.heads, c.d_head});  // overwritten
    be->attend_cached(be->upload(q, {c.rows, c.heads, c.d_head}),
                      be->upload(k, {c.capacity, c.slots, c.heads, c.d_head}),
                      be->upload(v, {c.capacity, c.slots, c.heads, c.d_head}),
                      be->upload(rows, {c.rows, c.capacity}), c.length, scale, out);
    INFO(name(c));
    TX_CHECK_OK(compare(fetch(*be, out), reference(c, q, k, v, rows, scale), 1e-4, 1e-5));
  }
}

TEMPLATE_TEST_CASE(
    "attend_cached forward: equals softmax and two batched gemms on the rows' "
    "own caches",
    "[attention]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // The cache the decoder kept before: [R, heads, capacity, d_head] per row, gathered along the
  // ancestry; the same sums, so equal up to the order of the additions.
  const CachedCase c{6, 4, 64, 20, 6, 13};
  const float scale = 0.125f;
  const std::vector<float> q = random_vector(c.rows * c.heads * c.d_head, 1);
  const int64_t cache = c.capacity * c.slots * c.heads * c.d_head;
  const std::vector<float> k = random_vector(cache, 2), v = random_vector(cache, 3);
  const std::vector<int32_t> rows = random_rows(c, 4);
  std::vector<float> kr(c.rows * c.heads * c.capacity * c.d_head, 0.0f), vr(kr.size(), 0.0f);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t t = 0; t < c.length; ++t)
        for (int64_t e = 0; e < c.d_head; ++e) {
          const int64_t from =
              ((t * c.slots + rows[r * c.capacity + t]) * c.heads + h) * c.d_head + e;
          const int64_t to = ((r * c.heads + h) * c.capacity + t) * c.d_head + e;
          kr[to] = k[from];
          vr[to] = v[from];
        }
  const int64_t batch = c.rows * c.heads;
  Tensor qt = be->upload(q, {batch, 1, c.d_head});
  Tensor scores = be->empty({c.rows, c.heads, 1, c.capacity});
  be->gemm(qt, false, be->upload(kr, {batch, c.capacity, c.d_head}), true,
           scores.view({batch, 1, c.capacity}));
  Tensor lengths =
      be->upload(std::vector<int32_t>(c.rows, static_cast<int32_t>(c.length)), {c.rows});
  be->softmax(scores, scale, lengths, false, scores);
  Tensor want = be->empty({batch, 1, c.d_head});
  be->gemm(scores.view({batch, 1, c.capacity}), false,
           be->upload(vr, {batch, c.capacity, c.d_head}), false, want);
  Tensor got = be->empty({c.rows, c.heads, c.d_head});
  be->attend_cached(qt.view({c.rows, c.heads, c.d_head}),
                    be->upload(k, {c.capacity, c.slots, c.heads, c.d_head}),
                    be->upload(v, {c.capacity, c.slots, c.heads, c.d_head}),
                    be->upload(rows, {c.rows, c.capacity}), c.length, scale, got);
  TX_CHECK_OK(compare(fetch(*be, got), fetch(*be, want), 1e-5, 1e-6));
}

TEMPLATE_TEST_CASE("attend_cached errors: shapes, length and slots outside the cache",
                   "[attention][errors]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor q = be->zeros({2, 4, 8}), out = be->zeros({2, 4, 8});
  Tensor k = be->zeros({5, 3, 4, 8}), v = be->zeros({5, 3, 4, 8});
  Tensor rows = be->zeros({2, 5}, tx::DType::i32);
  CHECK_THROWS_WITH(be->attend_cached(q, k, v, rows, 0, 1.0f, out),
                    Contains("attend_cached") && Contains("length 0"));
  CHECK_THROWS_WITH(be->attend_cached(q, k, v, rows, 6, 1.0f, out),
                    Contains("attend_cached") && Contains("length 6"));
  CHECK_THROWS_WITH(be->attend_cached(q, k, v, be->zeros({2, 4}, tx::DType::i32), 2, 1.0f, out),
                    Contains("attend_cached") && Contains("[2, 4]"));
  CHECK_THROWS_WITH(be->attend_cached(q, be->zeros({5, 3, 2, 8}), v, rows, 2, 1.0f, out),
                    Contains("attend_cached") && Contains("[5, 3, 2, 8]"));
  CHECK_THROWS_WITH(be->attend_cached(q, k, v, rows, 2, 1.0f, be->zeros({2, 4, 7})),
                    Contains("attend_cached") && Contains("[2, 4, 7]"));
  // A slot outside [0, 3) within the visible steps.
  Tensor bad = be->upload(std::vector<int32_t>{0, 1, 2, 0, 0, 1, 3, 0, 0, 0}, {2, 5});
  CHECK_THROWS_WITH(
      [&] {
        be->attend_cached(q, k, v, bad, 3, 1.0f, out);
        be->synchronize();
      }(),
      Contains("attend_cached") && Contains("3"));
}

namespace {

struct MemoryCase {
  int64_t entries, group, heads, d_head, time;
  std::vector<int32_t> lengths;  // one per entry; 0 and > time included
};

// out[r, h] over entry r / group's keys s < clamp(lengths[e], 0, time); 0 with none visible.
std::vector<double> memory_reference(const MemoryCase& c, const std::vector<float>& q,
                                     const std::vector<float>& k, const std::vector<float>& v,
                                     float scale) {
  const int64_t rows = c.entries * c.group;
  std::vector<double> out(rows * c.heads * c.d_head, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < c.heads; ++h) {
      const int64_t e = r / c.group;
      const int64_t visible = std::min<int64_t>(std::max(c.lengths[e], 0), c.time);
      std::vector<double> s(visible, 0.0);
      double m = -INFINITY, z = 0.0;
      for (int64_t t = 0; t < visible; ++t) {
        for (int64_t d = 0; d < c.d_head; ++d)
          s[t] += double(q[(r * c.heads + h) * c.d_head + d]) *
                  k[((e * c.heads + h) * c.time + t) * c.d_head + d];
        s[t] *= scale;
        m = std::max(m, s[t]);
      }
      for (double& x : s) z += (x = std::exp(x - m));
      for (int64_t t = 0; t < visible; ++t)
        for (int64_t d = 0; d < c.d_head; ++d)
          out[(r * c.heads + h) * c.d_head + d] +=
              s[t] / z * v[((e * c.heads + h) * c.time + t) * c.d_head + d];
    }
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("attend_memory forward: each row's entry, padding keys hidden, groups of rows",
                   "[attention]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const std::vector<MemoryCase> cases = {
      {1, 1, 1, 1, 1, {1}},           {3, 1, 4, 8, 6, {6, 2, 0}}, {2, 5, 4, 64, 17, {17, 9}},
      {4, 2, 2, 33, 5, {7, 5, 1, 3}}, {1, 3, 8, 16, 300, {257}},  {3, 2, 2, 128, 20, {20, 0, 16}},
      {2, 1, 3, 32, 40, {33, 1}}};
  uint64_t seed = 300;
  for (const MemoryCase& c : cases) {
    const int64_t rows = c.entries * c.group;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.d_head));
    const std::vector<float> q = random_vector(rows * c.heads * c.d_head, ++seed, -2, 2);
    const int64_t n = c.entries * c.heads * c.time * c.d_head;
    const std::vector<float> k = random_vector(n, ++seed, -2, 2), v = random_vector(n, ++seed);
    Tensor out = be->upload(random_vector(rows * c.heads * c.d_head, ++seed),
                            {rows, c.heads, c.d_head});  // overwritten
    be->attend_memory(be->upload(q, {rows, c.heads, c.d_head}),
                      be->upload(k, {c.entries, c.heads, c.time, c.d_head}),
                      be->upload(v, {c.entries, c.heads, c.time, c.d_head}),
                      be->upload(c.lengths, {c.entries}), scale, out);
    INFO("E=" << c.entries << " group=" << c.group << " H=" << c.heads << " Dh=" << c.d_head
              << " S=" << c.time);
    TX_CHECK_OK(compare(fetch(*be, out), memory_reference(c, q, k, v, scale), 1e-4, 1e-5));
  }
}

TEMPLATE_TEST_CASE("attend_memory forward: equals softmax and two batched gemms per entry",
                   "[attention]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // The path it replaces: queries [E, H, G, Dh] (each entry's group of rows per head), scores
  // [E, H, G, S], softmax with the entries' lengths, then the values.
  const int64_t E = 3, G = 5, H = 4, Dh = 64, S = 11;
  const std::vector<int32_t> lengths = {11, 4, 7};
  const float scale = 0.125f;
  const std::vector<float> q = random_vector(E * G * H * Dh, 1);
  const std::vector<float> k = random_vector(E * H * S * Dh, 2),
                           v = random_vector(E * H * S * Dh, 3);
  std::vector<float> qs(q.size());  // [E, G, H, Dh] -> [E, H, G, Dh]
  for (int64_t e = 0; e < E; ++e)
    for (int64_t g = 0; g < G; ++g)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < Dh; ++d)
          qs[((e * H + h) * G + g) * Dh + d] = q[((e * G + g) * H + h) * Dh + d];
  Tensor scores = be->empty({E, H * G, S});
  be->gemm(be->upload(qs, {E * H, G, Dh}), false, be->upload(k, {E * H, S, Dh}), true,
           scores.view({E * H, G, S}));
  be->softmax(scores, scale, be->upload(lengths, {E}), false, scores);
  Tensor ctx = be->empty({E * H, G, Dh});
  be->gemm(scores.view({E * H, G, S}), false, be->upload(v, {E * H, S, Dh}), false, ctx);
  const std::vector<float> split = fetch(*be, ctx);
  std::vector<float> want(q.size());
  for (int64_t e = 0; e < E; ++e)
    for (int64_t g = 0; g < G; ++g)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < Dh; ++d)
          want[((e * G + g) * H + h) * Dh + d] = split[((e * H + h) * G + g) * Dh + d];
  Tensor got = be->empty({E * G, H, Dh});
  be->attend_memory(be->upload(q, {E * G, H, Dh}), be->upload(k, {E, H, S, Dh}),
                    be->upload(v, {E, H, S, Dh}), be->upload(lengths, {E}), scale, got);
  TX_CHECK_OK(compare(fetch(*be, got), want, 1e-5, 1e-6));
}

TEMPLATE_TEST_CASE("attend_memory errors: shapes, entries and lengths", "[attention][errors]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor q = be->zeros({6, 4, 8}), out = be->zeros({6, 4, 8});
  Tensor k = be->zeros({3, 4, 5, 8}), v = be->zeros({3, 4, 5, 8});
  Tensor lengths = be->zeros({3}, tx::DType::i32);
  CHECK_THROWS_WITH(be->attend_memory(q, k, v, be->zeros({2}, tx::DType::i32), 1.0f, out),
                    Contains("attend_memory") && Contains("[2]"));
  CHECK_THROWS_WITH(be->attend_memory(q, be->zeros({4, 4, 5, 8}), be->zeros({4, 4, 5, 8}),
                                      be->zeros({4}, tx::DType::i32), 1.0f, out),
                    Contains("attend_memory") && Contains("multiple"));
  CHECK_THROWS_WITH(be->attend_memory(q, k, be->zeros({3, 4, 6, 8}), lengths, 1.0f, out),
                    Contains("attend_memory") && Contains("[3, 4, 6, 8]"));
  CHECK_THROWS_WITH(
      be->attend_memory(q, be->zeros({3, 2, 5, 8}), be->zeros({3, 2, 5, 8}), lengths, 1.0f, out),
      Contains("attend_memory") && Contains("[3, 2, 5, 8]"));
  CHECK_THROWS_WITH(be->attend_memory(q, k, v, be->zeros({3}), 1.0f, out),
                    Contains("attend_memory") && Contains("i32"));
}
