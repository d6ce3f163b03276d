// Conformance: cast between f32, f16, bf16, i32 and i8 against core/half.h (round to nearest even)
// and C++ conversions (i32 and i8 from float truncate towards zero; i8 saturates).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "support/backends.h"
#include "support/reference.h"

namespace {

using tx::DType;
using tx::Shape;
using tx::Tensor;
using namespace tx::test;

const DType kTypes[] = {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i8};

// Host data of one dtype as one 32-bit word per element (the low 16 bits for f16/bf16).
using Words = std::vector<uint32_t>;

Tensor upload_words(tx::Backend& be, const Words& w, DType t) {
  Shape s{static_cast<int64_t>(w.size())};
  Tensor out = be.empty(s, t);
  if (tx::size_of(t) == 2) {
    std::vector<uint16_t> h(w.begin(), w.end());
    be.copy_from_host(h.data(), out);
  } else if (tx::size_of(t) == 1) {
    std::vector<uint8_t> h(w.begin(), w.end());
    be.copy_from_host(h.data(), out);
  } else {
    be.copy_from_host(w.data(), out);
  }
  return out;
}

Words download_words(tx::Backend& be, const Tensor& t) {
  size_t n = t.numel();
  if (tx::size_of(t.dtype()) == 2) {
    std::vector<uint16_t> h(n);
    be.copy_to_host(t, h.data());
    return Words(h.begin(), h.end());
  }
  if (tx::size_of(t.dtype()) == 1) {
    std::vector<uint8_t> h(n);
    be.copy_to_host(t, h.data());
    return Words(h.begin(), h.end());
  }
  Words w(n);
  be.copy_to_host(t, w.data());
  return w;
}

// The float an element stands for (exact for f16 and bf16; i32 rounded to nearest).
float to_float(uint32_t w, DType t) {
  switch (t) {
    case DType::f32:
      return tx::bits_float(w);
    case DType::f16:
      return tx::f16_to_float(static_cast<uint16_t>(w));
    case DType::bf16:
      return tx::bf16_to_float(static_cast<uint16_t>(w));
    case DType::i32:
      return static_cast<float>(static_cast<int32_t>(w));
    case DType::i8:
      return static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(w)));
  }
  return 0;
}

uint32_t from_float(float f, DType t) {
  switch (t) {
    case DType::f32:
      return tx::float_bits(f);
    case DType::f16:
      return tx::float_to_f16(f);
    case DType::bf16:
      return tx::float_to_bf16(f);
    case DType::i32:
      return static_cast<uint32_t>(static_cast<int32_t>(std::trunc(f)));
    case DType::i8: {  // truncated, saturated at [-128, 127], NaN 0
      const float v = std::isnan(f) ? 0.0f : std::clamp(std::trunc(f), -128.0f, 127.0f);
      return static_cast<uint8_t>(static_cast<int8_t>(v));
    }
  }
  return 0;
}

bool is_nan(uint32_t w, DType t) {
  switch (t) {
    case DType::f32:
      return std::isnan(tx::bits_float(w));
    case DType::f16:
      return (w & 0x7c00u) == 0x7c00u && (w & 0x3ffu) != 0;
    case DType::bf16:
      return (w & 0x7f80u) == 0x7f80u && (w & 0x7fu) != 0;
    case DType::i32:
    case DType::i8:
      return false;
  }
  return false;
}

// The reference cast: identity for equal types (exact for any i32), otherwise via the exact
// float value, which for every pair tested here rounds only once.
uint32_t reference_cast(uint32_t w, DType from, DType to) {
  if (from == to) return w;
  if (from == DType::i32 && to == DType::f32)
    return tx::float_bits(static_cast<float>(static_cast<int32_t>(w)));
  return from_float(to_float(w, from), to);
}

// Source values for a cast from `from` to `to`: special values, random values, and for f16 and
// bf16 every bit pattern; all representable in `to` when `to` is i32.
Words sources(DType from, DType to) {
  Words w;
  auto add_float = [&](float f) {
    if (to == DType::i32 && !(std::fabs(f) < 2.0e9f)) return;  // NaN, inf, out of range
    w.push_back(from_float(f, from));
  };
  switch (from) {
    case DType::f32: {
      const float specials[] = {0.0f,
                                -0.0f,
                                1.0f,
                                -1.0f,
                                0.5f,
                                -0.5f,
                                0.99f,
                                -1.99f,
                                2.5f,
                                -2.5f,
                                3.5f,
                                65504.0f,
                                65519.0f,
                                65520.0f,
                                1e6f,
                                -1e9f,
                                1.0f + 0x1.0p-11f,
                                1.0f + 0x3.0p-11f,
                                1.0f + 0x1.0p-8f,
                                1.0f + 0x3.0p-8f,
                                0x1.0p-24f,
                                0x1.0p-25f,
                                0x3.0p-25f,
                                0x1.0p-14f,
                                0x1.ffcp-15f,
                                1e-30f,
                                3.0e38f,
                                -3.4e38f,
                                INFINITY,
                                -INFINITY,
                                NAN};
      for (float f : specials) add_float(f);
      for (float f : random_vector(2000, 7, -100.0f, 100.0f)) add_float(f);
      for (float f : random_vector(500, 8, -1e-4f, 1e-4f)) add_float(f);
      for (float f : random_vector(500, 9, -7e4f, 7e4f)) add_float(f);
      break;
    }
    case DType::f16:
    case DType::bf16:
      for (uint32_t h = 0; h < 65536; ++h) {
        float f = to_float(h, from);
        if (to == DType::i32 && !(std::fabs(f) < 2.0e9f)) continue;
        w.push_back(h);
      }
      break;
    case DType::i32: {
      for (int32_t v : random_ints(2000, 10, -70000, 70000)) w.push_back(static_cast<uint32_t>(v));
      const int32_t specials[] = {0, 1, -1, 2047, 2049, 65504, 65519, 65520, 65536, 257, 259, -259};
      for (int32_t v : specials) w.push_back(static_cast<uint32_t>(v));
      if (to == DType::f32 || to == DType::i32) {
        const int32_t big[] = {16777216, 16777217, 16777219, -16777217,
                               INT_MAX,  INT_MIN,  123456789};
        for (int32_t v : big) w.push_back(static_cast<uint32_t>(v));
      }
      break;
    }
    case DType::i8:
      for (uint32_t b = 0; b < 256; ++b) w.push_back(b);  // every value
      break;
  }
  return w;
}

}  // namespace

TEMPLATE_TEST_CASE("cast forward: every pair of f32, f16, bf16, i32, i8 against half.h", "[cast]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (DType from : kTypes)
    for (DType to : kTypes) {
      Words src = sources(from, to);
      Tensor x = upload_words(*be, src, from);
      Tensor y = be->empty(x.shape(), to);
      be->cast(x, y);
      Words got = download_words(*be, y);
      INFO("cast " << tx::name_of(from) << " -> " << tx::name_of(to) << " on " << src.size()
                   << " values");
      REQUIRE(got.size() == src.size());
      size_t bad = 0;
      std::string first;
      for (size_t i = 0; i < src.size(); ++i) {
        uint32_t want = reference_cast(src[i], from, to);
        bool ok = is_nan(want, to) ? is_nan(got[i], to) : got[i] == want;
        if (!ok && bad++ == 0) {
          char buf[160];
          snprintf(buf, sizeof buf,
                   "first mismatch at [%zu]: source bits 0x%x (%.9g) -> got 0x%x, want 0x%x", i,
                   src[i], double(to_float(src[i], from)), got[i], want);
          first = buf;
        }
      }
      INFO(first);
      CHECK(bad == 0);
    }
}

TEMPLATE_TEST_CASE("cast forward: known bit patterns (round to nearest even, inf, NaN, subnormal)",
                   "[cast]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // Values written out by hand, independent of half.h.
  struct Case {
    float in;
    uint16_t f16, bf16;
  };
  const Case cases[] = {
      {1.0f, 0x3c00, 0x3f80},
      {-2.0f, 0xc000, 0xc000},
      {0.0f, 0x0000, 0x0000},
      {-0.0f, 0x8000, 0x8000},
      {65504.0f, 0x7bff, 0x4780},           // f16 max; bf16 rounds 65504 up to 65536
      {65520.0f, 0x7c00, 0x4780},           // f16: tie between max and 2^16 -> even (inf)
      {1.0f + 0x1.0p-11f, 0x3c00, 0x3f80},  // f16 tie -> even (down)
      {1.0f + 0x3.0p-11f, 0x3c02, 0x3f80},  // f16 tie -> even (up)
      {1.0f + 0x1.0p-8f, 0x3c04, 0x3f80},   // bf16 tie -> even (down)
      {1.0f + 0x3.0p-8f, 0x3c0c, 0x3f82},   // bf16 tie -> even (up)
      {0x1.0p-24f, 0x0001, 0x3380},         // smallest f16 subnormal
      {0x1.0p-25f, 0x0000, 0x3300},         // tie with 0 -> even (0)
      {0x3.0p-25f, 0x0002, 0x33c0},         // 1.5 ulp -> 2
      {0x1.ffcp-15f, 0x0400, 0x3880},       // tie between largest subnormal and 2^-14 -> 2^-14
      {INFINITY, 0x7c00, 0x7f80},
      {-INFINITY, 0xfc00, 0xff80},
  };
  Words f32;
  for (const Case& c : cases) f32.push_back(tx::float_bits(c.in));
  Tensor x = upload_words(*be, f32, DType::f32);
  Tensor h = be->empty(x.shape(), DType::f16), b = be->empty(x.shape(), DType::bf16);
  be->cast(x, h);
  be->cast(x, b);
  Words gh = download_words(*be, h), gb = download_words(*be, b);
  for (size_t i = 0; i < std::size(cases); ++i) {
    INFO("value " << cases[i].in << " (case " << i << ")");
    CHECK(gh[i] == cases[i].f16);
    CHECK(gb[i] == cases[i].bf16);
  }
  // NaN stays NaN (not inf) in both.
  Tensor xn = upload_words(*be, {tx::float_bits(NAN), 0x7f800001u}, DType::f32);
  Tensor hn = be->empty({2}, DType::f16), bn = be->empty({2}, DType::bf16);
  be->cast(xn, hn);
  be->cast(xn, bn);
  for (uint32_t w : download_words(*be, hn)) CHECK(is_nan(w, DType::f16));
  for (uint32_t w : download_words(*be, bn)) CHECK(is_nan(w, DType::bf16));
}

TEMPLATE_TEST_CASE("cast forward: i32 <-> f32 (truncation towards zero)", "[cast]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  std::vector<float> f = {0.0f, 0.99f, -0.99f, 1.5f, -1.5f, 2.5f, -2.5f, 1e9f, -123456.7f, 7.0f};
  std::vector<int32_t> want = {0, 0, 0, 1, -1, 2, -2, 1000000000, -123456, 7};
  Tensor x = be->upload(f, {2, 5});
  Tensor y = be->empty({2, 5}, DType::i32);
  be->cast(x, y);
  TX_CHECK_OK(compare_exact(fetch_i32(*be, y), want));
  std::vector<int32_t> ints = {0, -7, 33, 16777217, -2147483647 - 1};
  Tensor xi = be->upload(ints, {5});
  Tensor yf = be->empty({5});
  be->cast(xi, yf);
  TX_CHECK_OK(compare_exact(fetch(*be, yf), {0.0f, -7.0f, 33.0f, 16777216.0f, -2147483648.0f}));
}

TEMPLATE_TEST_CASE("cast forward: f32 -> f16 -> f32 round trip of odd-shaped tensors", "[cast]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (const Shape& s : {Shape{1, 1}, Shape{7, 33}, Shape{33, 65}, Shape{3, 5, 7}}) {
    std::vector<float> x = random_vector(s.numel(), 3, -4.0f, 4.0f);
    for (DType half : {DType::f16, DType::bf16}) {
      Tensor h = be->empty(s, half), back = be->empty(s);
      be->cast(be->upload(x, s), h);
      be->cast(h, back);
      std::vector<float> want(x.size());
      for (size_t i = 0; i < x.size(); ++i)
        want[i] = half == DType::f16 ? tx::f16_to_float(tx::float_to_f16(x[i]))
                                     : tx::bf16_to_float(tx::float_to_bf16(x[i]));
      INFO("shape " << s.str() << " via " << tx::name_of(half));
      TX_CHECK_OK(compare_exact(fetch(*be, back), want));
      // And within half an ulp of the input (2^-11 and 2^-8 relative).
      TX_CHECK_OK(compare(fetch(*be, back), x, half == DType::f16 ? 0x1.0p-11 : 0x1.0p-8, 0));
    }
  }
}

TEMPLATE_TEST_CASE("cast forward: f32 -> i32 saturates at the i32 range, NaN gives 0", "[cast]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> f = {3e9f, -3e9f, inf, -inf, std::nanf(""), 2147483520.0f, -2147483648.0f};
  std::vector<int32_t> want = {2147483647, -2147483647 - 1, 2147483647,     -2147483647 - 1,
                               0,          2147483520,      -2147483647 - 1};
  Tensor y = be->empty({7}, DType::i32);
  be->cast(be->upload(f, {7}), y);
  TX_CHECK_OK(compare_exact(fetch_i32(*be, y), want));
}

TEMPLATE_TEST_CASE("cast errors: in place between dtypes of different sizes is refused", "[cast]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor x = be->zeros({4, 6});
  // An f16 view of the same memory: converting into it would overwrite unread input.
  Tensor half = Tensor::borrow(x.raw(), {4, 6}, DType::f16, x.device());
  REQUIRE_THROWS_WITH(be->cast(x, half), Catch::Contains("cast") && Catch::Contains("in place"));
}
