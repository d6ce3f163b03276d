#include "vector_exp.h"

#include <immintrin.h>

#include <cmath>

// glibc's vector expf for AVX2 (libmvec, x86-64 vector ABI name).
extern "C" __m256 _ZGVdN8v_expf(__m256 x);

namespace tx::cpu {
namespace {

__attribute__((target("avx2,fma"))) void exp_affine_avx2(const float* x, float scale, float shift,
                                                         float* out, int64_t n) {
  const __m256 vs = _mm256_set1_ps(scale), vh = _mm256_set1_ps(shift);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    // x * scale - shift rounded as the scalar tail below computes it (no fused multiply-add).
    const __m256 a = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j), vs), vh);
    _mm256_storeu_ps(out + j, _ZGVdN8v_expf(a));
  }
  if (j < n) {
    alignas(32) float tail[8] = {};
    for (int64_t k = j; k < n; ++k) tail[k - j] = x[k] * scale - shift;
    alignas(32) float e[8];
    _mm256_store_ps(e, _ZGVdN8v_expf(_mm256_load_ps(tail)));
    for (int64_t k = j; k < n; ++k) out[k] = e[k - j];
  }
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}

}  // namespace

void exp_affine(const float* x, float scale, float shift, float* out, int64_t n) {
  if (has_avx2()) return exp_affine_avx2(x, scale, shift, out, n);
  for (int64_t j = 0; j < n; ++j) out[j] = std::exp(x[j] * scale - shift);
}

}  // namespace tx::cpu
