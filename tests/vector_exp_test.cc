// The CPU backend's vector exp and swish (backends/cpu/vector_exp.h) on every instruction set
// the machine has, against double precision: the AVX2 and scalar paths are checked on AVX-512
// machines too, which never pick them.
#include "cpu/vector_exp.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "core/rng.h"

namespace {

using tx::cpu::VectorIsa;

std::vector<VectorIsa> isas_here() {
  std::vector<VectorIsa> out;
  for (VectorIsa isa : {VectorIsa::avx512, VectorIsa::avx2, VectorIsa::scalar})
    if (tx::cpu::cpu_has(isa)) out.push_back(isa);
  return out;
}

const char* name(VectorIsa isa) {
  return isa == VectorIsa::avx512 ? "avx512" : isa == VectorIsa::avx2 ? "avx2" : "scalar";
}

// |got - want| within 2e-7 relative (libmvec's expf is within a few ulp) or 1e-30 absolute.
bool close(float got, double want) {
  return std::abs(got - want) <= 2e-7 * std::abs(want) + 1e-30;
}

// Lanes past a row's end: a partial last vector must neither write them nor depend on them.
constexpr int64_t kGuard = 16;
constexpr float kSentinel = 1234.5f;

bool guard_intact(const std::vector<float>& v, int64_t n) {
  for (int64_t j = n; j < n + kGuard; ++j)
    if (v[j] != kSentinel) return false;
  return true;
}

}  // namespace

TEST_CASE("vector exp: exp(x * scale - shift) against double, every length, each instruction set",
          "[cpu][vector_exp]") {
  tx::Rng rng(3);
  for (VectorIsa isa : isas_here()) {
    INFO(name(isa));
    for (int64_t n : {1, 7, 8, 15, 16, 17, 31, 33, 1031}) {
      std::vector<float> x(n), out(n + kGuard, kSentinel);
      for (float& v : x) v = 20.0f * (rng.uniform() - 0.5f);
      tx::cpu::exp_affine(x.data(), 0.7f, 1.5f, out.data(), n, isa);
      CHECK(guard_intact(out, n));
      for (int64_t j = 0; j < n; ++j) {
        INFO("n " << n << ", j " << j << ", x " << x[j]);
        // The argument is rounded to float as the function computes it: one fused
        // multiply-add, on every path and in every build.
        CHECK(close(out[j], std::exp(double(std::fma(x[j], 0.7f, -1.5f)))));
      }
    }
  }
}

TEST_CASE("vector swish: v / (1 + exp(-v)) with and without a bias, each instruction set",
          "[cpu][vector_exp]") {
  tx::Rng rng(4);
  for (VectorIsa isa : isas_here()) {
    INFO(name(isa));
    for (int64_t n : {1, 5, 8, 16, 23, 40, 1031}) {
      std::vector<float> x(n), b(n), out(n + kGuard, kSentinel);
      for (float& v : x) v = 12.0f * (rng.uniform() - 0.5f);
      for (float& v : b) v = rng.uniform() - 0.5f;
      x[0] = n > 1 ? -120.0f : x[0];  // exp(120) overflows float: the limit is -0
      for (const bool with_bias : {false, true}) {
        tx::cpu::swish_row(x.data(), with_bias ? b.data() : nullptr, out.data(), n, isa);
        CHECK(guard_intact(out, n));
        for (int64_t j = 0; j < n; ++j) {
          const float v = with_bias ? x[j] + b[j] : x[j];
          const double want = double(v) / (1.0 + std::exp(-double(v)));
          INFO("n " << n << ", j " << j << ", v " << v << ", bias " << with_bias);
          CHECK(std::abs(out[j] - want) <= 1e-6 * std::abs(want) + 1e-30);
        }
      }
      // In place (out = x), as the backend's swish of a tensor into itself.
      std::vector<float> in_place = x;
      tx::cpu::swish_row(in_place.data(), nullptr, in_place.data(), n, isa);
      tx::cpu::swish_row(x.data(), nullptr, out.data(), n, isa);
      CHECK(std::equal(in_place.begin(), in_place.end(), out.begin()));
    }
  }
}

TEST_CASE("vector swish backward: dx += dy * swish'(x) against double, each instruction set",
          "[cpu][vector_exp]") {
  tx::Rng rng(5);
  for (VectorIsa isa : isas_here()) {
    INFO(name(isa));
    for (int64_t n : {1, 5, 8, 16, 23, 40, 1031}) {
      std::vector<float> x(n), dy(n), dx(n + kGuard, kSentinel);
      for (float& v : x) v = 12.0f * (rng.uniform() - 0.5f);
      for (float& v : dy) v = rng.uniform() - 0.5f;
      for (int64_t j = 0; j < n; ++j) dx[j] = rng.uniform() - 0.5f;
      if (n > 2) {
        x[0] = -120.0f;  // the gradient's limits: 0 far left, 1 far right
        x[1] = 95.0f;
      }
      const std::vector<float> before = dx;
      tx::cpu::swish_grad_row(dy.data(), x.data(), dx.data(), n, isa);
      CHECK(guard_intact(dx, n));
      for (int64_t j = 0; j < n; ++j) {
        const double s = 1.0 / (1.0 + std::exp(-double(x[j])));
        const double want = before[j] + double(dy[j]) * (s + double(x[j]) * s * (1.0 - s));
        INFO("n " << n << ", j " << j << ", x " << x[j]);
        CHECK(std::abs(dx[j] - want) <= 1e-6 * (std::abs(want) + std::abs(dy[j])) + 1e-7);
      }
    }
  }
}

TEST_CASE("vector swish: a value's result does not depend on its position, each instruction set",
          "[cpu][vector_exp]") {
  for (VectorIsa isa : isas_here()) {
    INFO(name(isa));
    for (float v : {-7.25f, -0.3f, 1.0e-3f, 2.5f, 11.0f}) {
      float alone = 0;
      tx::cpu::swish_row(&v, nullptr, &alone, 1, isa);
      for (int64_t n : {7, 16, 23, 1031}) {
        std::vector<float> x(n, v), out(n);
        tx::cpu::swish_row(x.data(), nullptr, out.data(), n, isa);
        INFO("value " << v << ", n " << n);
        for (float got : out) REQUIRE(got == alone);
      }
    }
  }
}
