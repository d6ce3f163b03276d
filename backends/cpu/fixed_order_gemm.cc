#include "fixed_order_gemm.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/error.h"
#include "parallel.h"
#include "vector_exp.h"

// The bf16 kernel needs VDPBF16PS at compile time (-march=native on AMD Zen 4 and later, Intel
// Cooper Lake and Sapphire Rapids and later); elsewhere pack_weight leaves bf16 weights to the
// oneDNN path.
#if defined(__AVX512F__) && defined(__AVX512BF16__)
#define TX_FIXED_ORDER_BF16 1
#else
#define TX_FIXED_ORDER_BF16 0
#endif

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
inline vec vadd(vec a, vec b) {
  return _mm512_add_ps(a, b);
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
inline vec vadd(vec a, vec b) {
  return _mm256_add_ps(a, b);
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
inline vec vadd(vec a, vec b) {
  for (int i = 0; i < W; ++i) a.v[i] += b.v[i];
  return a;
}
#endif

// What one step of a chain multiplies in: one f32 k, or (with AVX512-BF16) a pair of bf16 k in
// one VDPBF16PS. Both are 4-byte units, so panels, slices and blocking are one code in units.
struct F32 {
  using unit = float;
  using avec = vec;
  static avec bcast(const unit* p) { return vbroadcast(p); }
  static vec madd(avec a, const unit* b, vec acc) { return vfma(a, vload(b), acc); }
};
#if TX_FIXED_ORDER_BF16
struct Bf16Pairs {
  using unit = uint32_t;
  using avec = __m512bh;
  // memcpy: a is bf16 data read two at a time.
  static avec bcast(const unit* p) {
    uint32_t u;
    std::memcpy(&u, p, sizeof u);
    return (__m512bh)_mm512_set1_epi32(static_cast<int>(u));
  }
  static vec madd(avec a, const unit* b, vec acc) {
    return _mm512_dpbf16_ps(acc, a, (__m512bh)_mm512_loadu_si512(b));
  }
};
#endif

constexpr int64_t kPanel = 2 * W;    // columns per panel: two vectors
constexpr int kRows = 6;             // rows per kernel call: 12 accumulators in AVX2's 16 registers
constexpr int64_t kDepth = 256;      // units of k per pass: a panel's slice (16-32 kB) stays in L1
constexpr int64_t kBlockRows = 192;  // rows per pass: their slice of a stays in L2
constexpr int kSpinsBeforeYield = 2000;  // ~20-40 us of PAUSE

// c[0..R) x [0..kPanel) (row stride ldc) continues its chains over `depth` more units of k: zero
// first when `first`; the panel's kPanel bias values added to the sums when `bias` is not null
// (the last pass). a: the rows' slice of a packed k-major (a[k * kRows + r]); b: the panel's.
// kernel and run_kernel are always inlined into gemm_panel: called out of line, GCC kept the
// accumulators on the stack (a third of the speed).
template <class E, int R>
[[gnu::always_inline]] inline void kernel(const typename E::unit* a, const typename E::unit* b,
                                          int64_t depth, float* c, int64_t ldc, bool first,
                                          const float* bias) {
  vec acc[R][2];
  for (int r = 0; r < R; ++r) {
    acc[r][0] = first ? vzero() : vload(c + r * ldc);
    acc[r][1] = first ? vzero() : vload(c + r * ldc + W);
  }
  for (int64_t k = 0; k < depth; ++k) {
    const typename E::unit* bk = b + k * kPanel;
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const typename E::avec ar = E::bcast(a + k * kRows + r);
      acc[r][0] = E::madd(ar, bk, acc[r][0]);
      acc[r][1] = E::madd(ar, bk + W, acc[r][1]);
    }
  }
  if (bias) {
    const vec b0 = vload(bias), b1 = vload(bias + W);
    for (int r = 0; r < R; ++r) {
      acc[r][0] = vadd(acc[r][0], b0);
      acc[r][1] = vadd(acc[r][1], b1);
    }
  }
  for (int r = 0; r < R; ++r) {
    vstore(c + r * ldc, acc[r][0]);
    vstore(c + r * ldc + W, acc[r][1]);
  }
}

template <class E>
[[gnu::always_inline]] inline void run_kernel(int rows, const typename E::unit* a,
                                              const typename E::unit* b, int64_t depth, float* c,
                                              int64_t ldc, bool first, const float* bias) {
  switch (rows) {
    case 1:
      return kernel<E, 1>(a, b, depth, c, ldc, first, bias);
    case 2:
      return kernel<E, 2>(a, b, depth, c, ldc, first, bias);
    case 3:
      return kernel<E, 3>(a, b, depth, c, ldc, first, bias);
    case 4:
      return kernel<E, 4>(a, b, depth, c, ldc, first, bias);
    case 5:
      return kernel<E, 5>(a, b, depth, c, ldc, first, bias);
    default:
      return kernel<E, 6>(a, b, depth, c, ldc, first, bias);
  }
}

// One row against P whole panels side by side (b: the first; the others follow k * kPanel
// apart), over all of k: one row alone has 2 chains per panel, too few to hide the FMA's latency,
// so P panels give 2P. Each output's chain is the same as kernel's.
template <class E, int P>
void row_kernel(const typename E::unit* a, const typename E::unit* b, int64_t k, float* c,
                const float* bias) {
  vec acc[P][2];
  for (int j = 0; j < P; ++j) acc[j][0] = acc[j][1] = vzero();
  for (int64_t q = 0; q < k; ++q) {
    const typename E::avec aq = E::bcast(a + q);
#pragma GCC unroll 4
    for (int j = 0; j < P; ++j) {
      const typename E::unit* bq = b + (j * k + q) * kPanel;
      acc[j][0] = E::madd(aq, bq, acc[j][0]);
      acc[j][1] = E::madd(aq, bq + W, acc[j][1]);
    }
  }
  if (bias)
    for (int j = 0; j < P; ++j) {
      acc[j][0] = vadd(acc[j][0], vload(bias + j * kPanel));
      acc[j][1] = vadd(acc[j][1], vload(bias + j * kPanel + W));
    }
  for (int j = 0; j < P; ++j) {
    vstore(c + j * kPanel, acc[j][0]);
    vstore(c + j * kPanel + W, acc[j][1]);
  }
}

#if defined(__AVX2__)
// One whole group's units [q, q + 8): to[j * kRows + r] = from[r][j], an 8 x 8 transpose of the
// 6 rows and two zero rows. Column j's 8-lane store writes 2 lanes past its 6, which column
// j + 1's store overwrites; the last column stores its 6 alone, so nothing lands past the block.
template <class U>
inline void pack_6x8(const U* const from[kRows], U* to) {
  __m256 r[kRows];
  for (int i = 0; i < kRows; ++i) r[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(from[i]));
  const __m256 zero = _mm256_setzero_ps();
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, zero, 0x44), s5 = _mm256_shuffle_ps(t4, zero, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, zero, 0x44), s7 = _mm256_shuffle_ps(t5, zero, 0xEE);
  float* out = reinterpret_cast<float*>(to);
  _mm256_storeu_ps(out + 0 * kRows, _mm256_permute2f128_ps(s0, s4, 0x20));
  _mm256_storeu_ps(out + 1 * kRows, _mm256_permute2f128_ps(s1, s5, 0x20));
  _mm256_storeu_ps(out + 2 * kRows, _mm256_permute2f128_ps(s2, s6, 0x20));
  _mm256_storeu_ps(out + 3 * kRows, _mm256_permute2f128_ps(s3, s7, 0x20));
  _mm256_storeu_ps(out + 4 * kRows, _mm256_permute2f128_ps(s0, s4, 0x31));
  _mm256_storeu_ps(out + 5 * kRows, _mm256_permute2f128_ps(s1, s5, 0x31));
  _mm256_storeu_ps(out + 6 * kRows, _mm256_permute2f128_ps(s2, s6, 0x31));
  const __m256 last = _mm256_permute2f128_ps(s3, s7, 0x31);
  _mm_storeu_ps(out + 7 * kRows, _mm256_castps256_ps128(last));
  _mm_storel_pi(reinterpret_cast<__m64*>(out + 7 * kRows + 4), _mm256_extractf128_ps(last, 1));
}
#endif

// Copies rows [r0, r0 + rows) x k [k0, k0 + depth) of a (row stride k) k-major per kRows rows:
// the kernel then reads one stream of it. Each thread packs its own copy: a pass then needs no
// barrier (packing is 1/n of the pass's work, a barrier a wait for the slower thread). Whole
// groups go 8 units at a time through vector transposes (unit by unit, packing took 4% of a
// beam 5 x 32 decoding run's samples, 1.8% this way); the rest, unit by unit. Only copies: the
// slice is the same either way.
template <class U>
void pack_slice(const U* a, int64_t k, int64_t r0, int64_t rows, int64_t k0, int64_t depth,
                U* slice) {
  static_assert(sizeof(U) == 4, "packing moves 4-byte units");
  const int64_t groups = (rows + kRows - 1) / kRows;
  for (int64_t g = 0; g < groups; ++g) {
    U* to = slice + g * kRows * depth;
    const int64_t n_rows = std::min<int64_t>(kRows, rows - g * kRows);
    int64_t done = 0;
#if defined(__AVX2__)
    if (n_rows == kRows) {
      const U* from[kRows];
      for (int r = 0; r < kRows; ++r) from[r] = a + (r0 + g * kRows + r) * k + k0;
      for (; done + 8 <= depth; done += 8) {
        pack_6x8(from, to + done * kRows);
        for (int r = 0; r < kRows; ++r) from[r] += 8;
      }
    }
#endif
    for (int64_t r = 0; r < n_rows; ++r) {
      const U* from = a + (r0 + g * kRows + r) * k + k0;
      for (int64_t q = done; q < depth; ++q) std::memcpy(to + q * kRows + r, from + q, sizeof(U));
    }
  }
}

// The weight slice the thread reads after this one (`next`, `lines` cache lines long) is
// fetched into L2 while this one is computed, a share before each row group: decoding reads
// every weight from memory once a step (~100 MB at d512), and the hardware prefetcher restarts
// at each panel.
struct Prefetch {
  const char* next = nullptr;
  int64_t lines = 0, done = 0;
  void some(int64_t groups_left) {
    const int64_t to = done + (lines - done + groups_left - 1) / std::max<int64_t>(groups_left, 1);
    for (; done < to; ++done) __builtin_prefetch(next + done * 64, 0, 2);
  }
};

// c[0..rows) x [0..cols) (row stride ldc) = act(itself): relu with relu_impl's select, swish
// through swish_row, so that the bits are those of the separate passes.
void activate(float* c, int64_t rows, int64_t cols, int64_t ldc, Activation act) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = c + r * ldc;
    if (act == Activation::swish) {
      swish_row(row, nullptr, row, cols);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) row[j] = row[j] > 0.0f ? row[j] : 0.0f;
    }
  }
}

// Panel p of c's rows [i0, i0 + rows), continuing its chains over the pass [k0, k0 + depth)
// whose slice of a is `slice`. `next`: the weights this thread reads after this panel (null if
// none or unknown), `next_units` their length. bias, then act: applied in the last pass.
template <class E>
void gemm_panel(const typename E::unit* slice, int64_t i0, int64_t rows, int64_t k, int64_t k0,
                int64_t depth, const typename E::unit* panels, int64_t n, float* c, int64_t p,
                const typename E::unit* next, int64_t next_units, const float* bias,
                Activation act) {
  constexpr int64_t kUnitsPerLine = 64 / sizeof(typename E::unit);
  // The last panel's padded columns land in a tile and only the real ones are copied out.
  float tile[kBlockRows * kPanel];
  const int64_t groups = (rows + kRows - 1) / kRows;
  const typename E::unit* b = panels + p * k * kPanel + k0 * kPanel;
  Prefetch ahead;
  // A few rows are bound by memory, not by the FMAs: nothing to overlap, leave it to the
  // hardware prefetcher.
  if (groups > 1 && next) {
    ahead.next = reinterpret_cast<const char*>(next);
    ahead.lines = next_units / kUnitsPerLine;
  }
  const int64_t col = p * kPanel, cols = std::min(kPanel, n - col);
  const bool whole = cols == kPanel;
  // The last panel's bias padded to the panel's width (its padded columns are dropped).
  float padded[kPanel];
  const float* panel_bias = nullptr;
  if (bias && k0 + depth == k) {
    panel_bias = bias + col;
    if (!whole) {
      std::fill(std::copy(bias + col, bias + col + cols, padded), padded + kPanel, 0.0f);
      panel_bias = padded;
    }
  }
  float* out = whole ? c + i0 * n + col : tile;
  const int64_t ldc = whole ? n : kPanel;
  if (!whole && k0 > 0)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(tile + r * kPanel, c + (i0 + r) * n + col, cols * sizeof(float));
  const bool last = k0 + depth == k && act != Activation::none;
  for (int64_t r = 0, g = 0; r < rows; r += kRows, ++g) {
    ahead.some(groups - g);
    const int group = static_cast<int>(std::min<int64_t>(kRows, rows - r));
    run_kernel<E>(group, slice + r * depth, b, depth, out + r * ldc, ldc, k0 == 0, panel_bias);
    // The group's outputs, just stored, are still in L1.
    if (last) activate(out + r * ldc, group, cols, ldc, act);
  }
  if (!whole)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(c + (i0 + r) * n + col, tile + r * kPanel, cols * sizeof(float));
}

// The work of one GEMM as a sequence of items, each a run of panels in one pass of one row
// block, in the order (row block, pass, panel run). Threads take items from a shared counter
// as they finish the last, so a thread slowed by the host (another guest on the core's twin,
// an interrupt, a late wake-up) does less of the work instead of holding the other at the
// barrier: a static split left one thread idle for 9-12% of a beam 5 x 32 run's GEMM time.
// A panel's passes still run in order: an item waits (rarely: a pass of the panel run is
// `runs` items earlier) until its run's previous pass is done, so every sum is the same chain
// over k whichever thread continues it.
struct Schedule {
  int64_t m, k, count;  // rows, units of k, panels
  int64_t run;          // panels per item
  int64_t runs, passes, blocks;
  int64_t items() const { return blocks * passes * runs; }
  int64_t block(int64_t i) const { return i / (passes * runs); }
  int64_t pass(int64_t i) const { return i / runs % passes; }
  int64_t first_panel(int64_t i) const { return i % runs * run; }
};

Schedule make_schedule(int64_t m, int64_t k, int64_t count) {
  Schedule s{m, k, count, 1, 0, (k + kDepth - 1) / kDepth, (m + kBlockRows - 1) / kBlockRows};
  // At least ~256 kFLOP an item (a few microseconds): a shared counter's cache line moving
  // between the cores costs ~0.1 us a take.
  const int64_t rows = std::min(m, kBlockRows), depth = std::min(k, kDepth);
  const int64_t flop = 2 * rows * depth * kPanel;
  s.run = std::clamp<int64_t>((int64_t{1} << 18) / std::max<int64_t>(flop, 1), 1, count);
  s.runs = (count + s.run - 1) / s.run;
  return s;
}

// c [m, n] = a [m, k units] @ panels^T: what fixed_order_gemm and fixed_order_gemm_bf16 share.
template <class E>
void gemm_units(const typename E::unit* a, int64_t m, int64_t k, const typename E::unit* panels,
                int64_t n, float* c, const float* bias, Activation act) {
  using unit = typename E::unit;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * n + j] = bias ? 0.0f + bias[j] : 0.0f;  // as fill, add
    if (act != Activation::none) activate(c, m, n, n, act);
    return;
  }
  const int64_t count = (n + kPanel - 1) / kPanel;
  const Schedule s = make_schedule(m, k, count);
  std::atomic<int64_t> taken{0};
  // Per panel run: its (row block, pass) steps done, each published by a release store. The
  // calling thread's buffer, kept between calls: a decoding step makes hundreds of GEMMs.
  thread_local std::unique_ptr<std::atomic<int64_t>[]> done_buffer;
  thread_local int64_t done_capacity = 0;
  if (done_capacity < s.runs) {
    done_buffer = std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(s.runs));
    done_capacity = s.runs;
  }
  std::atomic<int64_t>* const done = done_buffer.get();  // the team shares this pointer
  for (int64_t r = 0; r < s.runs; ++r) done[r].store(0, std::memory_order_relaxed);
    // Columns are split between the threads, never rows or k: a row's sums are the same chains
    // whoever computes them.
#pragma omp parallel if (!omp_in_parallel() && count > 1 && m * n * k >= 64 * kElementwiseGrain)
  {
    // This thread's slice of a: the pass it last packed.
    thread_local std::vector<unit> slice;
    slice.resize(static_cast<size_t>(kBlockRows * kDepth));
    unit* own = slice.data();
    int64_t packed_step = -1;  // block * passes + pass of `own`
    if (m == 1) {
      // A decoding step of one sentence and beam 1 (a is the one row): whole row kernels over
      // all of k on this thread's share of the panels, then the rest panel by panel. One row
      // alone is bound by memory: the split hardly matters, and the row kernel wants runs of
      // kSide panels.
      constexpr int kSide = 4;
      const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      int64_t p0 = count * t / threads;
      const int64_t p1 = count * (t + 1) / threads;
      for (; p0 + kSide <= p1 && (p0 + kSide) * kPanel <= n; p0 += kSide) {
        row_kernel<E, kSide>(a, panels + p0 * k * kPanel, k, c + p0 * kPanel,
                             bias ? bias + p0 * kPanel : nullptr);
        if (act != Activation::none) activate(c + p0 * kPanel, 1, kSide * kPanel, n, act);
      }
      for (int64_t k0 = 0; k0 < k && p0 < p1; k0 += kDepth) {
        const int64_t depth = std::min(kDepth, k - k0);
        pack_slice(a, k, 0, 1, k0, depth, own);
        for (int64_t p = p0; p < p1; ++p)
          gemm_panel<E>(own, 0, 1, k, k0, depth, panels, n, c, p, nullptr, 0, bias, act);
      }
    }
    int64_t item = m == 1 ? s.items() : taken.fetch_add(1, std::memory_order_relaxed);
    while (item < s.items()) {
      // The next item is taken before this one runs: its weights are fetched meanwhile.
      const int64_t next = taken.fetch_add(1, std::memory_order_relaxed);
      const int64_t b = s.block(item), q = s.pass(item), first = s.first_panel(item);
      const int64_t run = item % s.runs, step = b * s.passes + q;
      const int64_t i0 = b * kBlockRows, rows = std::min(kBlockRows, m - i0);
      const int64_t k0 = q * kDepth, depth = std::min(kDepth, k - k0);
      if (packed_step != step) {
        pack_slice(a, k, i0, rows, k0, depth, own);
        packed_step = step;
      }
      // The run's previous pass (another thread's, perhaps) must be done and its c visible. A
      // wait longer than a few microseconds means that thread lost its core (more threads than
      // cores: another program, the host): yield it rather than spin a time slice away.
      for (int spins = 0; done[run].load(std::memory_order_acquire) != step;) {
        if (spins == kSpinsBeforeYield) {
          std::this_thread::yield();
          continue;
        }
        ++spins;
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
      }
      const int64_t last = std::min(first + s.run, count);
      for (int64_t p = first; p < last; ++p) {
        // What this thread reads after panel p: the item's next panel, or the next item's first.
        const unit* after = nullptr;
        int64_t after_units = 0;
        if (p + 1 < last) {
          after = panels + (p + 1) * k * kPanel + k0 * kPanel;
          after_units = depth * kPanel;
        } else if (next < s.items()) {
          const int64_t nq = s.pass(next);
          after = panels + s.first_panel(next) * k * kPanel + nq * kDepth * kPanel;
          after_units = std::min(kDepth, k - nq * kDepth) * kPanel;
        }
        gemm_panel<E>(own, i0, rows, k, k0, depth, panels, n, c, p, after, after_units, bias, act);
      }
      done[run].store(step + 1, std::memory_order_release);
      item = next;
    }
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
                      float* c, const float* bias, Activation act) {
  gemm_units<F32>(a, m, k, panels, n, c, bias, act);
}

bool fixed_order_bf16_available() {
  return TX_FIXED_ORDER_BF16;
}

int64_t panel_units_bf16(int64_t n, int64_t k) {
  return panel_floats(n, (k + 1) / 2);
}

void pack_panels_bf16(const uint16_t* w, int64_t n, int64_t k, uint32_t* panels) {
  const int64_t count = (n + kPanel - 1) / kPanel, pairs = (k + 1) / 2;
#pragma omp parallel for if (!omp_in_parallel() && n * k >= 64 * kElementwiseGrain)
  for (int64_t p = 0; p < count; ++p)
    for (int64_t q = 0; q < pairs; ++q)
      for (int64_t j = 0; j < kPanel; ++j) {
        const int64_t row = p * kPanel + j;
        uint32_t pair = 0;
        if (row < n) {
          // The lower half holds the even k, as a's pairs read from memory (little-endian).
          pair = w[row * k + 2 * q];
          if (2 * q + 1 < k) pair |= uint32_t(w[row * k + 2 * q + 1]) << 16;
        }
        panels[(p * pairs + q) * kPanel + j] = pair;
      }
}

void fixed_order_gemm_bf16(const uint16_t* a, int64_t m, int64_t k, const uint32_t* panels,
                           int64_t n, float* c, const float* bias, Activation act) {
  TX_CHECK(k % 2 == 0, "fixed_order_gemm_bf16: K = ", k, " must be even (a is read in pairs)");
#if TX_FIXED_ORDER_BF16
  gemm_units<Bf16Pairs>(reinterpret_cast<const uint32_t*>(a), m, k / 2, panels, n, c, bias, act);
#else
  (void)a, (void)m, (void)panels, (void)n, (void)c, (void)bias, (void)act;
  TX_CHECK(false, "fixed_order_gemm_bf16: this build has no AVX512-BF16 kernel");
#endif
}

}  // namespace tx::cpu
