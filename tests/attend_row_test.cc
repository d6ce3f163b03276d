// The CPU backend's attention rows (backends/cpu/attend_row.h) in each form the build has,
// against plain loops in double: the AVX2 form is checked on AVX-512 machines too, whose
// attend_row never picks it.
#include "cpu/attend_row.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/rng.h"

namespace {

// q [d_head], keys and values [length, d_head] in rows `stride` floats apart (as a cache's
// slots lie apart), the softmax of the scaled scores weighting the values.
struct Row {
  int64_t d_head, length, stride;
  std::vector<float> q, k, v;
  Row(int64_t d_head, int64_t length, uint64_t seed)
      : d_head(d_head), length(length), stride(d_head + 24) {
    tx::Rng rng(seed);
    auto fill = [&](std::vector<float>& x, size_t n, float lo, float hi) {
      x.resize(n);
      for (float& e : x) e = lo + (hi - lo) * rng.uniform();
    };
    fill(q, d_head, -2, 2);
    fill(k, std::max<int64_t>(length, 1) * stride, -2, 2);
    fill(v, std::max<int64_t>(length, 1) * stride, -1, 1);
  }
  std::vector<double> want(float scale) const {
    std::vector<double> s(length), out(d_head, 0.0);
    double m = -INFINITY, z = 0;
    for (int64_t t = 0; t < length; ++t) {
      for (int64_t e = 0; e < d_head; ++e) s[t] += double(q[e]) * k[t * stride + e];
      m = std::max(m, s[t] *= scale);
    }
    for (double& x : s) z += (x = std::exp(x - m));
    for (int64_t t = 0; t < length; ++t)
      for (int64_t e = 0; e < d_head; ++e) out[e] += s[t] / z * v[t * stride + e];
    return out;
  }
};

using Form = std::function<void(const Row&, float, float*, float*)>;

void check(const std::string& form, int64_t d_head, const Form& run) {
  for (int64_t length : {0, 1, 7, 8, 9, 15, 16, 17, 33, 100}) {
    const Row row(d_head, length, 1000 * d_head + length);
    const float scale = 1.0f / std::sqrt(float(d_head));
    std::vector<float> p(length + 1), out(d_head + 8, 1234.5f);
    run(row, scale, p.data(), out.data());
    const std::vector<double> want = row.want(scale);
    INFO(form << " d_head " << d_head << " length " << length);
    for (int64_t e = 0; e < d_head; ++e) {
      INFO("output " << e);
      CHECK(std::abs(out[e] - want[e]) <= 1e-5 + 1e-5 * std::abs(want[e]));
    }
    for (int64_t e = d_head; e < d_head + 8; ++e) CHECK(out[e] == 1234.5f);  // nothing past it
  }
}

template <typename Call>
Form form(Call call) {
  return [call](const Row& r, float scale, float* p, float* out) {
    const float* k = r.k.data();
    const float* v = r.v.data();
    const int64_t stride = r.stride;
    call(
        r, scale, [=](int64_t t) { return k + t * stride; },
        [=](int64_t t) { return v + t * stride; }, p, out);
  };
}

}  // namespace

TEST_CASE("attend_row: every form of a decoding step's attention row equals the double loops",
          "[attention][cpu]") {
  for (int64_t d_head : {8, 32, 64, 128})
    check("generic", d_head,
          form([](const Row& r, float scale, auto k, auto v, float* p, float* out) {
            tx::cpu::attend_row_generic(r.q.data(), r.d_head, r.length, scale, k, v, p, out);
          }));
#if defined(__AVX2__) && defined(__FMA__)
  check("avx2", 32, form([](const Row& r, float scale, auto k, auto v, float* p, float* out) {
          tx::cpu::attend_row_avx2<4>(r.q.data(), r.length, scale, k, v, p, out);
        }));
  check("avx2", 64, form([](const Row& r, float scale, auto k, auto v, float* p, float* out) {
          tx::cpu::attend_row_avx2<8>(r.q.data(), r.length, scale, k, v, p, out);
        }));
#endif
#if defined(__AVX512F__)
  check("avx512", 32, form([](const Row& r, float scale, auto k, auto v, float* p, float* out) {
          tx::cpu::attend_row_avx512<2>(r.q.data(), r.length, scale, k, v, p, out);
        }));
  check("avx512", 64, form([](const Row& r, float scale, auto k, auto v, float* p, float* out) {
          tx::cpu::attend_row_avx512<4>(r.q.data(), r.length, scale, k, v, p, out);
        }));
  check("avx512", 128, form([](const Row& r, float scale, auto k, auto v, float* p, float* out) {
          tx::cpu::attend_row_avx512<8>(r.q.data(), r.length, scale, k, v, p, out);
        }));
#endif
}
