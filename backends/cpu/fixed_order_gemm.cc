#include "fixed_order_gemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#include "parallel.h"

namespace tx::cpu {

namespace {

// One vector of W floats and the three operations the kernel needs. Each lane is its own
// output, so the width changes the speed, never the bits.
#if defined(__AVX512F__)
constexpr int W = 16;
using vec = __m512;
inline vec vzero() {
  return _mm512_setzero_ps();
}
inline vec vload(const float* p) {
  return _mm512_loadu_ps(p);
}
inline void vstore(float* p, vec v) {
  _mm512_storeu_ps(p, v);
}
inline vec vbroadcast(const float* p) {
  return _mm512_set1_ps(*p);
}
inline vec vfma(vec a, vec b, vec c) {
  return _mm512_fmadd_ps(a, b, c);
}
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int W = 8;
using vec = __m256;
inline vec vzero() {
  return _mm256_setzero_ps();
}
inline vec vload(const float* p) {
  return _mm256_loadu_ps(p);
}
inline void vstore(float* p, vec v) {
  _mm256_storeu_ps(p, v);
}
inline vec vbroadcast(const float* p) {
  return _mm256_broadcast_ss(p);
}
inline vec vfma(vec a, vec b, vec c) {
  return _mm256_fmadd_ps(a, b, c);
}
#else
// No FMA unit assumed: std::fma keeps the single rounding (slowly, in software if need be).
constexpr int W = 8;
struct vec {
  float v[W];
};
inline vec vzero() {
  return vec{};
}
inline vec vload(const float* p) {
  vec r;
  std::memcpy(r.v, p, sizeof r.v);
  return r;
}
inline void vstore(float* p, vec v) {
  std::memcpy(p, v.v, sizeof v.v);
}
inline vec vbroadcast(const float* p) {
  vec r;
  std::fill(r.v, r.v + W, *p);
  return r;
}
inline vec vfma(vec a, vec b, vec c) {
  for (int i = 0; i < W; ++i) c.v[i] = std::fma(a.v[i], b.v[i], c.v[i]);
  return c;
}
#endif

constexpr int64_t kPanel = 2 * W;    // columns per panel: two vectors
constexpr int kRows = 6;             // rows per kernel call: 12 accumulators in AVX2's 16 registers
constexpr int64_t kDepth = 256;      // k per pass: a panel's slice (16-32 kB) stays in L1
constexpr int64_t kBlockRows = 192;  // rows per pass: their slice of a stays in L2

// c[0..R) x [0..kPanel) (row stride ldc) continues its chains over `depth` more k: zero first
// when `first`. a: the rows' slice of a packed k-major (a[k * kRows + r]); b: the panel's.
template <int R>
void kernel(const float* a, const float* b, int64_t depth, float* c, int64_t ldc, bool first) {
  vec acc[R][2];
  for (int r = 0; r < R; ++r) {
    acc[r][0] = first ? vzero() : vload(c + r * ldc);
    acc[r][1] = first ? vzero() : vload(c + r * ldc + W);
  }
  for (int64_t k = 0; k < depth; ++k) {
    const vec b0 = vload(b + k * kPanel), b1 = vload(b + k * kPanel + W);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const vec ar = vbroadcast(a + k * kRows + r);
      acc[r][0] = vfma(ar, b0, acc[r][0]);
      acc[r][1] = vfma(ar, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) {
    vstore(c + r * ldc, acc[r][0]);
    vstore(c + r * ldc + W, acc[r][1]);
  }
}

void run_kernel(int rows, const float* a, const float* b, int64_t depth, float* c, int64_t ldc,
                bool first) {
  switch (rows) {
    case 1:
      return kernel<1>(a, b, depth, c, ldc, first);
    case 2:
      return kernel<2>(a, b, depth, c, ldc, first);
    case 3:
      return kernel<3>(a, b, depth, c, ldc, first);
    case 4:
      return kernel<4>(a, b, depth, c, ldc, first);
    case 5:
      return kernel<5>(a, b, depth, c, ldc, first);
    default:
      return kernel<6>(a, b, depth, c, ldc, first);
  }
}

// One row against P whole panels side by side (b: the first; the others follow k * kPanel
// apart), over all of k: one row alone has 2 chains per panel, too few to hide the FMA's latency,
// so P panels give 2P. Each output's chain is the same as kernel's.
template <int P>
void row_kernel(const float* a, const float* b, int64_t k, float* c) {
  vec acc[P][2];
  for (int j = 0; j < P; ++j) acc[j][0] = acc[j][1] = vzero();
  for (int64_t q = 0; q < k; ++q) {
    const vec aq = vbroadcast(a + q);
#pragma GCC unroll 4
    for (int j = 0; j < P; ++j) {
      const float* bq = b + (j * k + q) * kPanel;
      acc[j][0] = vfma(aq, vload(bq), acc[j][0]);
      acc[j][1] = vfma(aq, vload(bq + W), acc[j][1]);
    }
  }
  for (int j = 0; j < P; ++j) {
    vstore(c + j * kPanel, acc[j][0]);
    vstore(c + j * kPanel + W, acc[j][1]);
  }
}

// Copies rows [r0, r0 + rows) x k [k0, k0 + depth) of a (row stride k) k-major per kRows rows:
// the kernel then reads one stream of it. Each thread packs its own copy: a pass then needs no
// barrier (packing is 1/n of the pass's work, a barrier a wait for the slower thread).
void pack_slice(const float* a, int64_t k, int64_t r0, int64_t rows, int64_t k0, int64_t depth,
                float* slice) {
  const int64_t groups = (rows + kRows - 1) / kRows;
  for (int64_t g = 0; g < groups; ++g) {
    float* to = slice + g * kRows * depth;
    const int64_t n_rows = std::min<int64_t>(kRows, rows - g * kRows);
    for (int64_t r = 0; r < n_rows; ++r) {
      const float* from = a + (r0 + g * kRows + r) * k + k0;
      for (int64_t q = 0; q < depth; ++q) to[q * kRows + r] = from[q];
    }
  }
}

// The weight slice the thread reads after this one (`next`, `floats` long) is fetched into L2
// while this one is computed, a share before each row group: decoding reads every weight from
// memory once a step (~100 MB at d512), and the hardware prefetcher restarts at each panel.
struct Prefetch {
  const char* next = nullptr;
  int64_t lines = 0, done = 0;
  void some(int64_t groups_left) {
    const int64_t to = done + (lines - done + groups_left - 1) / std::max<int64_t>(groups_left, 1);
    for (; done < to; ++done) __builtin_prefetch(next + done * 64, 0, 2);
  }
};

// This thread's panels [p0, p1) of c's rows [i0, i0 + rows), continuing their chains over the
// pass [k0, k0 + depth) whose slice of a is `slice`. `after`: the weight slice this thread
// reads first in the next pass or row block (null if none), `after_floats` its length.
void gemm_panels(const float* slice, int64_t i0, int64_t rows, int64_t k, int64_t k0, int64_t depth,
                 const float* panels, int64_t n, float* c, int64_t p0, int64_t p1,
                 const float* after, int64_t after_floats) {
  // The last panel's padded columns land in a tile and only the real ones are copied out.
  float tile[kBlockRows * kPanel];
  const int64_t groups = (rows + kRows - 1) / kRows;
  for (int64_t p = p0; p < p1; ++p) {
    const float* b = panels + p * k * kPanel + k0 * kPanel;
    Prefetch ahead;
    // A few rows are bound by memory, not by the FMAs: nothing to overlap, leave it to the
    // hardware prefetcher.
    if (groups > 1) ahead.next = reinterpret_cast<const char*>(p + 1 < p1 ? b + k * kPanel : after);
    ahead.lines = ahead.next ? (p + 1 < p1 ? depth * kPanel : after_floats) * 4 / 64 : 0;
    const int64_t col = p * kPanel, cols = std::min(kPanel, n - col);
    const bool whole = cols == kPanel;
    float* out = whole ? c + i0 * n + col : tile;
    const int64_t ldc = whole ? n : kPanel;
    if (!whole && k0 > 0)
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(tile + r * kPanel, c + (i0 + r) * n + col, cols * sizeof(float));
    for (int64_t r = 0, g = 0; r < rows; r += kRows, ++g) {
      ahead.some(groups - g);
      run_kernel(static_cast<int>(std::min<int64_t>(kRows, rows - r)), slice + r * depth, b, depth,
                 out + r * ldc, ldc, k0 == 0);
    }
    if (!whole)
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(c + (i0 + r) * n + col, tile + r * kPanel, cols * sizeof(float));
  }
}

}  // namespace

int64_t panel_floats(int64_t n, int64_t k) {
  return (n + kPanel - 1) / kPanel * kPanel * k;
}

void pack_panels(const float* w, int64_t n, int64_t k, float* panels) {
  const int64_t count = (n + kPanel - 1) / kPanel;
  // A model's weights are packed once at load, all of them (~190 MB at d512): the team shares it.
#pragma omp parallel for if (!omp_in_parallel() && n * k >= 64 * kElementwiseGrain)
  for (int64_t p = 0; p < count; ++p)
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t j = 0; j < kPanel; ++j) {
        const int64_t row = p * kPanel + j;
        panels[(p * k + kk) * kPanel + j] = row < n ? w[row * k + kk] : 0.0f;
      }
}

void fixed_order_gemm(const float* a, int64_t m, int64_t k, const float* panels, int64_t n,
                      float* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(c, c + m * n, 0.0f);
    return;
  }
  const int64_t count = (n + kPanel - 1) / kPanel;
  // Columns are split between the threads, never rows or k: a row's sums are the same chains
  // whoever computes them.
#pragma omp parallel if (!omp_in_parallel() && count > 1 && m * n * k >= 64 * kElementwiseGrain)
  {
    // This thread's slice of a.
    thread_local std::vector<float> slice;
    slice.resize(static_cast<size_t>(kBlockRows * kDepth));
    float* own = slice.data();
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t p0 = count * t / threads;
    const int64_t p1 = count * (t + 1) / threads;
    if (m == 1) {  // a decoding step of one sentence and beam 1: a is the one row
      constexpr int kSide = 4;
      for (; p0 + kSide <= p1 && (p0 + kSide) * kPanel <= n; p0 += kSide)
        row_kernel<kSide>(a, panels + p0 * k * kPanel, k, c + p0 * kPanel);
    }
    for (int64_t i0 = 0; i0 < m; i0 += kBlockRows) {
      const int64_t rows = std::min(kBlockRows, m - i0);
      for (int64_t k0 = 0; k0 < k; k0 += kDepth) {
        const int64_t depth = std::min(kDepth, k - k0);
        if (p0 == p1) break;
        pack_slice(a, k, i0, rows, k0, depth, own);
        // What this thread reads first after this pass: its first panel's next slice of k,
        // or of the next row block its first slice.
        const float* after = nullptr;
        int64_t after_floats = 0;
        if (p0 < p1 && (k0 + depth < k || i0 + rows < m)) {
          const int64_t k1 = k0 + depth < k ? k0 + depth : 0;
          after = panels + p0 * k * kPanel + k1 * kPanel;
          after_floats = std::min(kDepth, k - k1) * kPanel;
        }
        gemm_panels(own, i0, rows, k, k0, depth, panels, n, c, p0, p1, after, after_floats);
      }
    }
  }
}

}  // namespace tx::cpu
