// Conformance: quantize_rows and gemm_i8 (int8 inference) against plain integer loops.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "support/backends.h"
#include "support/reference.h"

namespace {

using tx::DType;
using tx::Shape;
using tx::Tensor;
using namespace tx::test;

Tensor upload_i8(tx::Backend& be, const std::vector<int8_t>& v, const Shape& shape) {
  Tensor t = be.empty(shape, DType::i8);
  be.copy_from_host(v.data(), t);
  return t;
}

std::vector<int8_t> fetch_i8(tx::Backend& be, const Tensor& t) {
  std::vector<int8_t> v(static_cast<size_t>(t.numel()));
  be.copy_to_host(t, v.data());
  return v;
}

// n values in [-level, level], with runs of the extremes (where a saturating kernel fails).
std::vector<int8_t> random_levels(size_t n, uint64_t seed, int level) {
  std::vector<int32_t> r = random_ints(n, seed, -level, level + 1);
  std::vector<int8_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<int8_t>(r[i]);
    if (i % 7 < 3) v[i] = static_cast<int8_t>(i % 2 ? level : -level);
  }
  return v;
}

// c = (a b^T) * sa[m] * sb[n] + bias[n], the sums in 64-bit integers.
std::vector<double> reference_gemm_i8(const std::vector<int8_t>& a, const std::vector<float>& sa,
                                      const std::vector<int8_t>& b, const std::vector<float>& sb,
                                      const std::vector<float>& bias, int64_t m, int64_t n,
                                      int64_t k) {
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t s = 0;
      for (int64_t q = 0; q < k; ++q) s += int64_t(a[i * k + q]) * int64_t(b[j * k + q]);
      c[i * n + j] = double(s) * sa[i] * sb[j] + (bias.empty() ? 0.0 : bias[j]);
    }
  return c;
}

}  // namespace

TEMPLATE_TEST_CASE("quantize_rows: per-row scale max|x| / level, values rounded and clamped",
                   "[int8]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const int64_t rows = 6, cols = 37;
  for (int level : {127, tx::Backend::kInt8WeightLevel, 1}) {
    std::vector<float> x = random_vector(rows * cols, 700 + level, -3.0f, 3.0f);
    for (int64_t c = 0; c < cols; ++c) {
      x[1 * cols + c] *= 1e-4f;  // a row of small values: its own scale
      x[2 * cols + c] = 0.0f;    // an all-zero row: scale 1, zeros
    }
    x[3 * cols + 5] = -40.0f;  // a negative extreme sets the scale
    Tensor q = be->empty({rows, cols}, DType::i8), scales = be->empty({rows});
    be->quantize_rows(be->upload(x, {rows, cols}), level, q, scales);
    const std::vector<int8_t> got = fetch_i8(*be, q);
    const std::vector<float> got_scales = fetch(*be, scales);
    INFO("level " << level);
    for (int64_t r = 0; r < rows; ++r) {
      float absmax = 0.0f;
      for (int64_t c = 0; c < cols; ++c) absmax = std::max(absmax, std::fabs(x[r * cols + c]));
      const float scale = absmax > 0.0f ? absmax / static_cast<float>(level) : 1.0f;
      REQUIRE(got_scales[r] == scale);
      bool hits_level = false;
      for (int64_t c = 0; c < cols; ++c) {
        const float want = std::clamp(std::nearbyint(x[r * cols + c] / scale),
                                      -static_cast<float>(level), static_cast<float>(level));
        INFO("row " << r << " col " << c << " x " << x[r * cols + c]);
        REQUIRE(got[r * cols + c] == static_cast<int8_t>(want));
        hits_level |= std::abs(got[r * cols + c]) == level;
      }
      REQUIRE(hits_level == (absmax > 0.0f));  // the largest value maps onto +-level
    }
  }
}

TEMPLATE_TEST_CASE(
    "gemm_i8: exact i32 sums at the extremes, scaled back, with and without bias, b as it is "
    "and packed once",
    "[int8]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  struct Case {
    int64_t m, n, k;
  };
  uint64_t seed = 800;
  // K up to 1030: 127 * 63 * 1030 sums stay exact in f32 (< 2^24), so a sum the kernel
  // saturated anywhere on the way shows as a wrong value.
  for (const Case& s : {Case{1, 1, 1}, Case{7, 33, 65}, Case{33, 65, 7}, Case{17, 9, 1030},
                        Case{160, 130, 256}, Case{37, 1000, 256}, Case{300, 256, 1030}})
    for (int variant = 0; variant < 4; ++variant) {
      const bool with_bias = variant & 1, packed = variant & 2;
      ++seed;
      const std::vector<int8_t> a = random_levels(s.m * s.k, seed, 127);
      const std::vector<int8_t> b =
          random_levels(s.n * s.k, seed + 1, tx::Backend::kInt8WeightLevel);
      const std::vector<float> sa = random_vector(s.m, seed + 2, 0.001f, 0.1f);
      const std::vector<float> sb = random_vector(s.n, seed + 3, 0.001f, 0.1f);
      const std::vector<float> bias =
          with_bias ? random_vector(s.n, seed + 4) : std::vector<float>();
      // c starts as large garbage: it must be overwritten, not accumulated into.
      Tensor c = be->upload(random_vector(s.m * s.n, seed + 5, -1e4f, 1e4f), {s.m, s.n});
      const Tensor bt = upload_i8(*be, b, {s.n, s.k});
      const Tensor at = upload_i8(*be, a, {s.m, s.k});
      const Tensor bias_t = with_bias ? be->upload(bias, {s.n}) : Tensor();
      if (packed)
        be->gemm_i8(at, be->upload(sa, {s.m}), be->pack_weight(bt), be->upload(sb, {s.n}), bias_t,
                    c);
      else
        be->gemm_i8(at, be->upload(sa, {s.m}), bt, be->upload(sb, {s.n}), bias_t, c);
      INFO("M=" << s.m << " N=" << s.n << " K=" << s.k << " bias=" << with_bias
                << " packed=" << packed);
      TX_REQUIRE_OK(
          compare(fetch(*be, c), reference_gemm_i8(a, sa, b, sb, bias, s.m, s.n, s.k), 1e-6, 1e-6));
    }
}

TEMPLATE_TEST_CASE("gemm_i8 after quantize_rows approximates the f32 product", "[int8]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const int64_t m = 24, n = 40, k = 256;
  const std::vector<float> x = random_vector(m * k, 900),
                           w = random_vector(n * k, 901, -0.2f, 0.2f);
  Tensor xq = be->empty({m, k}, DType::i8), xs = be->empty({m});
  Tensor wq = be->empty({n, k}, DType::i8), ws = be->empty({n});
  be->quantize_rows(be->upload(x, {m, k}), 127, xq, xs);
  be->quantize_rows(be->upload(w, {n, k}), tx::Backend::kInt8WeightLevel, wq, ws);
  Tensor c = be->empty({m, n});
  be->gemm_i8(xq, xs, wq, ws, Tensor(), c);
  const std::vector<float> got = fetch(*be, c);
  // Rounding errors of at most half a step per factor: |error| <= sum_k (|x| dw + |w| dx + dx dw)
  // with dx = scale_x / 2 and dw = scale_w / 2, far below the product's own size.
  double err2 = 0, ref2 = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t q = 0; q < k; ++q) s += double(x[i * k + q]) * w[j * k + q];
      err2 += (got[i * n + j] - s) * (got[i * n + j] - s);
      ref2 += s * s;
    }
  INFO("relative error " << std::sqrt(err2 / ref2));
  REQUIRE(std::sqrt(err2 / ref2) < 0.02);
  REQUIRE(std::sqrt(err2 / ref2) > 0.0);  // it did quantise
}
