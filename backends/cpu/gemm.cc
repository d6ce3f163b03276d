#include "gemm.h"

#include <dnnl.h>

#include <algorithm>
#include <cstring>
#include <dnnl.hpp>
#include <vector>

#include "core/error.h"
#include "few_rows_gemm.h"
#include "parallel.h"

namespace tx::cpu {

namespace {
using dnnl::memory;
using dims = memory::dims;
}  // namespace

struct GemmCache::Entry {
  dnnl::matmul primitive;
  memory a, b, c;  // descriptors fixed; data handles set per call
};

// Batched shapes whose primitives are kept: a training run meets a few hundred.
constexpr size_t kMaxShapes = 1024;

struct GemmCache::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::mutex mutex;
  std::map<Key, std::unique_ptr<Entry>> entries;
  std::vector<float> transposed;  // scratch of weight_gradient_swapped
  std::vector<float> padded;      // scratch of padded_operand
};

GemmCache::GemmCache() : impl_(std::make_unique<Impl>()) {}
GemmCache::~GemmCache() = default;

size_t GemmCache::size() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->entries.size();
}

namespace {

// Row-major [rows, cols] operand stored transposed when `trans` (i.e. as [cols, rows]).
memory::desc operand(int64_t batch, int64_t rows, int64_t cols, bool trans,
                     memory::data_type type = memory::data_type::f32) {
  dims strides = trans ? dims{rows * cols, 1, rows} : dims{rows * cols, cols, 1};
  if (batch == 0) return memory::desc({rows, cols}, type, {strides[1], strides[2]});
  return memory::desc({batch, rows, cols}, type, strides);
}

// Row-major c [m, n] = alpha op(a) op(b) + beta c through oneDNN's sgemm, a failure an error.
void sgemm(char trans_a, char trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const dnnl_status_t status =
      dnnl_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  TX_CHECK(status == dnnl_success, "gemm: oneDNN sgemm failed with status ", int(status),
           " for c [", m, ", ", n, "]");
}

// A weight gradient dW [m, n] = dY^T X with m >= 1024 rows and n < m (the d_ff -> d_model
// layer, the output layer): oneDNN's sgemm with A transposed runs it slower than dW^T = X^T dY
// (bench/gemm, "dW FFN in": 82 against 76 GFLOP/s at K = 4000; a standalone test at K = 4095
// saw 93-106 against 59-64). So compute dW^T into scratch and add its transpose into c: m n
// extra elements against 2 m n k flops.
bool weight_gradient_swapped(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
  return trans_a && !trans_b && m >= 1024 && n < m && k >= 1024;
}

// A weight gradient c [m, n] = a^T b with one side at most 256 wide and the other side's
// operand in rows of a multiple of 4 KiB (1,024 floats: d_ff 1024 beside d_model 256):
// oneDNN's sgemm reads that operand down its rows, every one in the same cache sets, at half
// speed (84 against 171 GFLOP/s for [256, 1024] at K = 4000, 2 threads). A copy with rows 16
// floats longer takes one pass over it and gives back most of that (154 with the copy;
// [512, 2048] and wider run at full speed either way). Returns 'a', 'b' or 0 (no copy).
char padded_operand(bool trans_a, bool trans_b, int64_t m, int64_t n) {
  if (!trans_a || trans_b) return 0;
  constexpr int64_t kNarrow = 256, kAliasFloats = 1024;
  if (m <= kNarrow && n > kNarrow && n % kAliasFloats == 0) return 'b';
  if (n <= kNarrow && m > kNarrow && m % kAliasFloats == 0) return 'a';
  return 0;
}

}  // namespace

void GemmCache::run(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                    float alpha, float beta) {
  const int64_t batch = a.ndim() == 3 ? a.dim(0) : 0;
  const int64_t m = c.dim(-2), n = c.dim(-1);
  const int64_t k = trans_a ? a.dim(-2) : a.dim(-1);
  if (const char side = batch == 0 ? padded_operand(trans_a, trans_b, m, n) : 0) {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    const int64_t width = side == 'a' ? m : n, ld = width + 16;
    const float* src = side == 'a' ? a.data<float>() : b.data<float>();
    std::vector<float>& p = impl_->padded;  // [k, ld]
    p.resize(static_cast<size_t>(k * ld));
#pragma omp parallel for if (k * width >= kElementwiseGrain)
    for (int64_t r = 0; r < k; ++r)
      std::memcpy(p.data() + r * ld, src + r * width, static_cast<size_t>(width) * sizeof(float));
    const bool pad_a = side == 'a';
    sgemm('T', 'N', m, n, k, alpha, pad_a ? p.data() : a.data<float>(), pad_a ? ld : m,
          pad_a ? b.data<float>() : p.data(), pad_a ? n : ld, beta, c.data<float>(), n);
    return;
  }
  if (batch == 0 && weight_gradient_swapped(trans_a, trans_b, m, n, k)) {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    std::vector<float>& t = impl_->transposed;  // [n, m]
    t.resize(static_cast<size_t>(m * n));
    sgemm('T', 'N', n, m, k, alpha, b.data<float>(), n, a.data<float>(), m, 0.0f, t.data(), m);
    float* pc = c.data<float>();
    constexpr int64_t kTile = 32;
#pragma omp parallel for collapse(2)
    for (int64_t i0 = 0; i0 < m; i0 += kTile)
      for (int64_t j0 = 0; j0 < n; j0 += kTile)
        for (int64_t i = i0; i < std::min(m, i0 + kTile); ++i)
          for (int64_t j = j0; j < std::min(n, j0 + kTile); ++j) {
            const float v = t[static_cast<size_t>(j * m + i)];
            // beta == 0 must not read c (it may hold NaN), as BLAS does not.
            pc[i * n + j] = beta == 0.0f ? v : beta * pc[i * n + j] + v;
          }
    return;
  }
  if (batch == 0) {
    // Plain 2-D GEMMs go to oneDNN's sgemm: on the Transformer shapes it is 5-11% faster than
    // the matmul primitive (bench/gemm), and it needs no primitive at all.
    sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a.data<float>(),
          trans_a ? m : k, b.data<float>(), trans_b ? k : n, beta, c.data<float>(), n);
    return;
  }
  if (!trans_a && m <= kFewRows) {
    few_rows_gemm(batch, m, n, k, a.data<float>(), b.data<float>(), trans_b, c.data<float>(), alpha,
                  beta);
    return;
  }
  run_batched(a, trans_a, b, trans_b, c, alpha, beta);
}

void GemmCache::run_batched(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                            const Tensor& c, float alpha, float beta) {
  const int64_t batch = a.dim(0), m = c.dim(-2), n = c.dim(-1);
  const int64_t k = trans_a ? a.dim(-2) : a.dim(-1);
  const bool bf16 = a.dtype() == DType::bf16;
  Key key{batch, m, n, k, trans_a, trans_b, alpha, beta, bf16};

  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto it = impl_->entries.find(key);
  if (it == impl_->entries.end()) {
    // Shapes that vary with every batch (token batching, tx-score's pairs) would otherwise keep
    // a primitive each for the life of the process: past kMaxShapes the cache starts afresh.
    if (impl_->entries.size() >= kMaxShapes) impl_->entries.clear();
    const auto type = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    memory::desc a_md = operand(batch, m, k, trans_a, type);
    memory::desc b_md = operand(batch, k, n, trans_b, type);
    memory::desc c_md = operand(batch, m, n, false);
    dnnl::primitive_attr attr;
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    if (beta != 0.0f) {
      dnnl::post_ops ops;
      ops.append_sum(beta);
      attr.set_post_ops(ops);
    }
    // oneDNN 2.x API (Debian 12 ships 2.6); 3.x replaced op descriptors and output scales.
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, impl_->engine);
    auto entry = std::make_unique<Entry>(
        Entry{dnnl::matmul(pd), memory(a_md, impl_->engine, nullptr),
              memory(b_md, impl_->engine, nullptr), memory(c_md, impl_->engine, nullptr)});
    it = impl_->entries.emplace(key, std::move(entry)).first;
  }
  Entry& e = *it->second;
  e.a.set_data_handle(a.raw());
  e.b.set_data_handle(b.raw());
  e.c.set_data_handle(c.raw());
  e.primitive.execute(impl_->stream,
                      {{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}});
  impl_->stream.wait();
}

}  // namespace tx::cpu
