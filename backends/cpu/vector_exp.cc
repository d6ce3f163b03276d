#include "vector_exp.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

// glibc's vector expf for AVX2 and AVX-512 (libmvec, x86-64 vector ABI names).
extern "C" __m256 _ZGVdN8v_expf(__m256 x);
extern "C" __m512 _ZGVeN16v_expf(__m512 x);

namespace tx::cpu {
namespace {

// The first min(left, 8) lanes: a row's last, partial vector goes through the same lane
// function, its other lanes neither read nor written. Whole vectors take plain loads and
// stores: a masked store (VMASKMOVPS) costs AMD Zen 3 several times a plain one, and swish and
// exp ran at half speed through it.
__attribute__((target("avx2,fma"))) inline __m256i lanes8(int64_t left) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::min<int64_t>(left, 8))), index);
}

// The lanes of the AVX2 rows are functions of their own, not lambdas: a lambda's body does not
// inherit its enclosing function's target attribute, and without -march=native (TX_NATIVE=OFF)
// its intrinsics would not compile.
// x * scale - shift as one fused multiply-add on every path, written out: whether a compiler
// fuses a product and a difference depends on the target (the AVX2 functions have FMA, a
// portable build's scalar loop does not), and the paths must round alike.
__attribute__((target("avx2,fma"))) inline __m256 exp_affine8(__m256 v, __m256 vs, __m256 vh) {
  return _ZGVdN8v_expf(_mm256_fmsub_ps(v, vs, vh));
}

__attribute__((target("avx2,fma"))) void exp_affine_avx2(const float* x, float scale, float shift,
                                                         float* out, int64_t n) {
  const __m256 vs = _mm256_set1_ps(scale), vh = _mm256_set1_ps(shift);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(out + j, exp_affine8(_mm256_loadu_ps(x + j), vs, vh));
  if (j < n) {
    const __m256i m = lanes8(n - j);
    _mm256_maskstore_ps(out + j, m, exp_affine8(_mm256_maskload_ps(x + j, m), vs, vh));
  }
}

// Sixteen lanes a call: on a CPU with AVX-512 the exp of a [160, 8000] log-softmax takes half
// the calls. The tail goes through a masked load, so every element takes the same path.
__attribute__((target("avx512f"))) void exp_affine_avx512(const float* x, float scale, float shift,
                                                          float* out, int64_t n) {
  const __m512 vs = _mm512_set1_ps(scale), vh = _mm512_set1_ps(shift);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    const __m512 a = _mm512_fmsub_ps(_mm512_maskz_loadu_ps(m, x + j), vs, vh);
    _mm512_mask_storeu_ps(out + j, m, _ZGVeN16v_expf(a));
  }
}

// x / (1 + exp(-x)).
__attribute__((target("avx2,fma"))) inline __m256 swish8(__m256 v) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  return _mm256_div_ps(v, _mm256_add_ps(one, _ZGVdN8v_expf(_mm256_xor_ps(v, sign))));
}

__attribute__((target("avx2,fma"))) void swish_row_avx2(const float* x, const float* bias,
                                                        float* out, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 v = _mm256_loadu_ps(x + j);
    if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + j));
    _mm256_storeu_ps(out + j, swish8(v));
  }
  if (j < n) {
    const __m256i m = lanes8(n - j);
    __m256 v = _mm256_maskload_ps(x + j, m);
    if (bias) v = _mm256_add_ps(v, _mm256_maskload_ps(bias + j, m));
    _mm256_maskstore_ps(out + j, m, swish8(v));
  }
}

__attribute__((target("avx512f"))) void swish_row_avx512(const float* x, const float* bias,
                                                         float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    __m512 v = _mm512_maskz_loadu_ps(m, x + j);
    if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + j));
    const __m512 e = _ZGVeN16v_expf(_mm512_sub_ps(_mm512_setzero_ps(), v));
    _mm512_mask_storeu_ps(out + j, m, _mm512_div_ps(v, _mm512_add_ps(one, e)));
  }
}

// s = 1 / (1 + e), e = exp(-x); dx += dy * (s + x s (1 - s)), one lane at a time.
__attribute__((target("avx2,fma"))) inline __m256 swish_grad8(__m256 x, __m256 e) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
  return _mm256_add_ps(s, _mm256_mul_ps(_mm256_mul_ps(x, s), _mm256_sub_ps(one, s)));
}

// acc + d * swish'(v).
__attribute__((target("avx2,fma"))) inline __m256 swish_grad_add8(__m256 v, __m256 d, __m256 acc) {
  const __m256 g = swish_grad8(v, _ZGVdN8v_expf(_mm256_xor_ps(v, _mm256_set1_ps(-0.0f))));
  return _mm256_add_ps(acc, _mm256_mul_ps(d, g));
}

__attribute__((target("avx2,fma"))) void swish_grad_row_avx2(const float* dy, const float* x,
                                                             float* dx, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(dx + j, swish_grad_add8(_mm256_loadu_ps(x + j), _mm256_loadu_ps(dy + j),
                                             _mm256_loadu_ps(dx + j)));
  if (j < n) {
    const __m256i m = lanes8(n - j);
    _mm256_maskstore_ps(dx + j, m,
                        swish_grad_add8(_mm256_maskload_ps(x + j, m), _mm256_maskload_ps(dy + j, m),
                                        _mm256_maskload_ps(dx + j, m)));
  }
}

__attribute__((target("avx512f"))) void swish_grad_row_avx512(const float* dy, const float* x,
                                                              float* dx, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + j);
    const __m512 e = _ZGVeN16v_expf(_mm512_sub_ps(_mm512_setzero_ps(), v));
    const __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, e));
    const __m512 g = _mm512_add_ps(s, _mm512_mul_ps(_mm512_mul_ps(v, s), _mm512_sub_ps(one, s)));
    const __m512 d = _mm512_add_ps(_mm512_maskz_loadu_ps(m, dx + j),
                                   _mm512_mul_ps(_mm512_maskz_loadu_ps(m, dy + j), g));
    _mm512_mask_storeu_ps(dx + j, m, d);
  }
}

// The widest instruction set this CPU has.
VectorIsa widest() {
  static const VectorIsa isa = cpu_has(VectorIsa::avx512) ? VectorIsa::avx512
                               : cpu_has(VectorIsa::avx2) ? VectorIsa::avx2
                                                          : VectorIsa::scalar;
  return isa;
}

}  // namespace

bool cpu_has(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::avx512:
      return __builtin_cpu_supports("avx512f");
    case VectorIsa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case VectorIsa::scalar:
      return true;
  }
  return false;
}

void exp_affine(const float* x, float scale, float shift, float* out, int64_t n) {
  exp_affine(x, scale, shift, out, n, widest());
}

void exp_affine(const float* x, float scale, float shift, float* out, int64_t n, VectorIsa isa) {
  if (isa == VectorIsa::avx512) return exp_affine_avx512(x, scale, shift, out, n);
  if (isa == VectorIsa::avx2) return exp_affine_avx2(x, scale, shift, out, n);
  for (int64_t j = 0; j < n; ++j) out[j] = std::exp(std::fma(x[j], scale, -shift));
}

void swish_grad_row(const float* dy, const float* x, float* dx, int64_t n) {
  swish_grad_row(dy, x, dx, n, widest());
}

void swish_grad_row(const float* dy, const float* x, float* dx, int64_t n, VectorIsa isa) {
  if (isa == VectorIsa::avx512) return swish_grad_row_avx512(dy, x, dx, n);
  if (isa == VectorIsa::avx2) return swish_grad_row_avx2(dy, x, dx, n);
  for (int64_t j = 0; j < n; ++j) {
    const float s = 1.0f / (1.0f + std::exp(-x[j]));
    dx[j] += dy[j] * (s + x[j] * s * (1.0f - s));
  }
}

void swish_row(const float* x, const float* bias, float* out, int64_t n) {
  swish_row(x, bias, out, n, widest());
}

void swish_row(const float* x, const float* bias, float* out, int64_t n, VectorIsa isa) {
  if (isa == VectorIsa::avx512) return swish_row_avx512(x, bias, out, n);
  if (isa == VectorIsa::avx2) return swish_row_avx2(x, bias, out, n);
  for (int64_t j = 0; j < n; ++j) {
    const float v = bias ? x[j] + bias[j] : x[j];
    out[j] = v / (1.0f + std::exp(-v));
  }
}

}  // namespace tx::cpu
