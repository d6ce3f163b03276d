#include "dot_peak.h"

#include <immintrin.h>

#include <chrono>

namespace {

constexpr long kIterations = 50'000'000;  // per chain group: ~0.1-0.3 s a measurement
constexpr int kChains = 12;               // enough to cover a 4-5 cycle latency on two ports

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Each measurement: kChains accumulators, each updated kIterations times by one instruction;
// the sum is kept so that the chains are not optimised away. (No shared template: a lambda in
// a target("...") function is compiled without that target.)
volatile float g_sink;

__attribute__((target("avx512f"))) double fma512() {
  const __m512 x = _mm512_set1_ps(1.0001f), y = _mm512_set1_ps(0.9999f);
  __m512 acc[kChains];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  const auto start = std::chrono::steady_clock::now();
  for (long k = 0; k < kIterations; ++k)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(x, y, acc[i]);
  const double secs = seconds_since(start);
  for (__m512& a : acc) g_sink = g_sink + _mm512_reduce_add_ps(a);
  return 32.0 * kChains * kIterations / secs / 1e9;
}

__attribute__((target("avx2,fma"))) double fma256() {
  const __m256 x = _mm256_set1_ps(1.0001f), y = _mm256_set1_ps(0.9999f);
  __m256 acc[kChains];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  const auto start = std::chrono::steady_clock::now();
  for (long k = 0; k < kIterations; ++k)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(x, y, acc[i]);
  const double secs = seconds_since(start);
  float v[8];
  for (__m256& a : acc) {
    _mm256_storeu_ps(v, a);
    g_sink = g_sink + v[0];
  }
  return 16.0 * kChains * kIterations / secs / 1e9;
}

__attribute__((target("avx512f,avx512bf16"))) double dpbf16() {
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80);
  __m512 acc[kChains];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  const auto start = std::chrono::steady_clock::now();
  for (long k = 0; k < kIterations; ++k)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], x, x);
  const double secs = seconds_since(start);
  for (__m512& a : acc) g_sink = g_sink + _mm512_reduce_add_ps(a);
  // 32 bf16 products, summed in pairs into 16 f32 lanes, per instruction.
  return 64.0 * kChains * kIterations / secs / 1e9;
}

}  // namespace

DotPeak measure_dot_peak() {
  DotPeak p;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    p.fma_gflops = fma512();
    p.fma_width = "512-bit";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    p.fma_gflops = fma256();
    p.fma_width = "256-bit";
  }
  if (__builtin_cpu_supports("avx512bf16")) p.bf16_gflops = dpbf16();
  return p;
}
