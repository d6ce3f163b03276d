// One query row and head of a decoding step's attention (attend_cached, attend_memory): the
// scores, softmax and weighted sum over `length` keys reached through key_at / value_at. The
// generic form sums in the order of the few-row GEMMs and softmax of
// MultiHeadAttention::context; the AVX-512 and AVX2 forms each in their own order (equal within
// rounding).
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "row_math.h"

namespace tx::cpu {

// Any d_head, in plain loops the compiler vectorises.
template <typename KeyAt, typename ValueAt>
void attend_row_generic(const float* q, int64_t d_head, int64_t length, float scale, KeyAt key_at,
                        ValueAt value_at, float* p, float* out) {
  // Rows of consecutive steps may lie apart (a cache read through an ancestry), where no
  // hardware prefetcher looks: ask for the rows a few steps ahead.
  constexpr int64_t kAhead = 4;
  auto prefetch = [d_head](const float* row) {
    for (int64_t e = 0; e < d_head; e += 16) __builtin_prefetch(row + e);
  };
  for (int64_t t = 0; t < length; ++t) {
    if (t + kAhead < length) prefetch(key_at(t + kAhead));
    const float* k = key_at(t);
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t e = 0; e < d_head; ++e) s += q[e] * k[e];
    p[t] = s;
  }
  scaled_softmax(p, scale, length, p);
  std::fill(out, out + d_head, 0.0f);
  for (int64_t t = 0; t < length; ++t) {
    if (t + kAhead < length) prefetch(value_at(t + kAhead));
    const float w = p[t];
    const float* v = value_at(t);
#pragma omp simd
    for (int64_t e = 0; e < d_head; ++e) out[e] += w * v[e];
  }
}

#if defined(__AVX512F__)
// GCC 12 warns of the unused pass-through operand inside the shuffle intrinsics (fixed in 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Lane j of the result = the sum of acc[j]'s lanes: sixteen keys' partial dot products to their
// sixteen scores by a transpose-and-add tree (~3 shuffles a key, where a reduction per key
// takes ~8).
inline __m512 sum_16_rows(const __m512 (&acc)[16]) {
  __m512 r[8], u[4], v[2];
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3]
    r[i] = _mm512_add_ps(_mm512_unpacklo_ps(acc[2 * i], acc[2 * i + 1]),
                         _mm512_unpackhi_ps(acc[2 * i], acc[2 * i + 1]));
  for (int i = 0; i < 4; ++i)  // per 128-bit lane: the lane's sums of four keys
    u[i] = _mm512_add_ps(_mm512_shuffle_ps(r[2 * i], r[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(r[2 * i], r[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  for (int i = 0; i < 2; ++i)  // lanes 0+1 and 2+3 of two groups of four keys
    v[i] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(v[0], v[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(v[0], v[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// d_head = 16 * C: the query and the output held in registers. GCC 12 leaves the generic loops
// a horizontal sum through memory per key and a load-add-store of the output per key.
template <int C, typename KeyAt, typename ValueAt>
void attend_row_avx512(const float* q, int64_t length, float scale, KeyAt key_at, ValueAt value_at,
                       float* p, float* out) {
  constexpr int64_t kAhead = 4;
  auto prefetch = [](const float* row) {
    for (int c = 0; c < C; ++c)
      _mm_prefetch(reinterpret_cast<const char*>(row + 16 * c), _MM_HINT_T0);
  };
  __m512 qv[C];
  for (int c = 0; c < C; ++c) qv[c] = _mm512_loadu_ps(q + 16 * c);
  for (int64_t t0 = 0; t0 < length; t0 += 16) {
    const int64_t n = std::min<int64_t>(16, length - t0);
    __m512 acc[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {  // unrolled, so that acc stays in registers
      __m512 a = _mm512_setzero_ps();
      if (j < n) {
        const int64_t t = t0 + j;
        if (t + kAhead < length) prefetch(key_at(t + kAhead));
        const float* k = key_at(t);
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) a = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(k + 16 * c), a);
      }
      acc[j] = a;
    }
    _mm512_mask_storeu_ps(p + t0, __mmask16((1u << n) - 1), sum_16_rows(acc));
  }
  scaled_softmax(p, scale, length, p);
  __m512 even[C], odd[C];  // two chains of additions per output vector
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) even[c] = odd[c] = _mm512_setzero_ps();
  auto add = [&](__m512(&o)[C], int64_t t) {
    if (t + kAhead < length) prefetch(value_at(t + kAhead));
    const __m512 w = _mm512_set1_ps(p[t]);
    const float* v = value_at(t);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) o[c] = _mm512_fmadd_ps(w, _mm512_loadu_ps(v + 16 * c), o[c]);
  };
  int64_t t = 0;
  for (; t + 1 < length; t += 2) {
    add(even, t);
    add(odd, t + 1);
  }
  if (t < length) add(even, t);
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) _mm512_storeu_ps(out + 16 * c, _mm512_add_ps(even[c], odd[c]));
}
#pragma GCC diagnostic pop
#endif

#if defined(__AVX2__) && defined(__FMA__)
// Lane j of the result = the sum of acc[j]'s lanes: eight keys' partial dot products to their
// eight scores by a transpose-and-add tree, as sum_16_rows for 256-bit vectors.
inline __m256 sum_8_rows(const __m256 (&acc)[8]) {
  __m256 r[4], u[2];
  for (int i = 0; i < 4; ++i)  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3]
    r[i] = _mm256_add_ps(_mm256_unpacklo_ps(acc[2 * i], acc[2 * i + 1]),
                         _mm256_unpackhi_ps(acc[2 * i], acc[2 * i + 1]));
  for (int i = 0; i < 2; ++i)  // per 128-bit lane: the lane's sums of four keys
    u[i] = _mm256_add_ps(_mm256_shuffle_ps(r[2 * i], r[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(r[2 * i], r[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm256_add_ps(_mm256_permute2f128_ps(u[0], u[1], 0x20),
                       _mm256_permute2f128_ps(u[0], u[1], 0x31));
}

// d_head = 8 * C, C <= 8. Scores eight keys at a time, each key's chain in its own register
// with q read from L1 (sixteen registers hold no more); the weighted sum in registers, in two
// chains when C is small enough for both to fit.
template <int C, typename KeyAt, typename ValueAt>
void attend_row_avx2(const float* q, int64_t length, float scale, KeyAt key_at, ValueAt value_at,
                     float* p, float* out) {
  static_assert(C >= 1 && C <= 8, "attend_row_avx2 holds d_head / 8 output vectors");
  constexpr int64_t kAhead = 4;
  auto prefetch = [](const float* row) {
    for (int c = 0; c < C; c += 2)
      _mm_prefetch(reinterpret_cast<const char*>(row + 8 * c), _MM_HINT_T0);
  };
  for (int64_t t0 = 0; t0 < length; t0 += 8) {
    const int64_t n = std::min<int64_t>(8, length - t0);
    const float* k[8];
    for (int j = 0; j < 8; ++j) {
      const int64_t t = t0 + std::min<int64_t>(j, n - 1);  // past the end: a real key, unused
      if (j < n && t + kAhead < length) prefetch(key_at(t + kAhead));
      k[j] = key_at(t);
    }
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const __m256 qc = _mm256_loadu_ps(q + 8 * c);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j)
        acc[j] = _mm256_fmadd_ps(qc, _mm256_loadu_ps(k[j] + 8 * c), acc[j]);
    }
    const __m256 sums = sum_8_rows(acc);
    if (n == 8) {
      _mm256_storeu_ps(p + t0, sums);
    } else {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, sums);
      std::copy(lanes, lanes + n, p + t0);
    }
  }
  scaled_softmax(p, scale, length, p);
  constexpr int kChains = C <= 4 ? 2 : 1;  // 8 chains of a 4-cycle FMA keep both units busy
  __m256 o[kChains][C];
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c)
    for (int i = 0; i < kChains; ++i) o[i][c] = _mm256_setzero_ps();
  auto add = [&](__m256(&acc)[C], int64_t t) {
    if (t + kAhead < length) prefetch(value_at(t + kAhead));
    const __m256 w = _mm256_set1_ps(p[t]);
    const float* v = value_at(t);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[c] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8 * c), acc[c]);
  };
  int64_t t = 0;
  if constexpr (kChains == 2)
    for (; t + 1 < length; t += 2) {
      add(o[0], t);
      add(o[1], t + 1);
    }
  for (; t < length; ++t) add(o[0], t);
#pragma GCC unroll 8
  for (int c = 0; c < C; ++c) {
    __m256 sum = o[0][c];
    if constexpr (kChains == 2) sum = _mm256_add_ps(sum, o[1][c]);
    _mm256_storeu_ps(out + 8 * c, sum);
  }
}
#endif

// p: `length` floats of scratch; out: d_head floats (written, never read).
// With length 0 the output is 0, as a softmax row with no visible key is.
template <typename KeyAt, typename ValueAt>
void attend_row(const float* q, int64_t d_head, int64_t length, float scale, KeyAt key_at,
                ValueAt value_at, float* p, float* out) {
#if defined(__AVX512F__)
  switch (d_head) {
    case 32:
      return attend_row_avx512<2>(q, length, scale, key_at, value_at, p, out);
    case 64:
      return attend_row_avx512<4>(q, length, scale, key_at, value_at, p, out);
    case 128:
      return attend_row_avx512<8>(q, length, scale, key_at, value_at, p, out);
    default:
      break;
  }
#elif defined(__AVX2__) && defined(__FMA__)
  switch (d_head) {
    case 32:
      return attend_row_avx2<4>(q, length, scale, key_at, value_at, p, out);
    case 64:
      return attend_row_avx2<8>(q, length, scale, key_at, value_at, p, out);
    default:
      break;
  }
#endif
  attend_row_generic(q, d_head, length, scale, key_at, value_at, p, out);
}

}  // namespace tx::cpu
