#include "gemm.h"

#include <dnnl.h>

#include <algorithm>
#include <dnnl.hpp>
#include <vector>

#include "core/error.h"
#include "few_rows_gemm.h"

namespace tx::cpu {

namespace {
using dnnl::memory;
using dims = memory::dims;
}  // namespace

struct GemmCache::Entry {
  dnnl::matmul primitive;
  memory a, b, c;  // descriptors fixed; data handles set per call
};

struct GemmCache::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::mutex mutex;
  std::map<Key, std::unique_ptr<Entry>> entries;
  std::vector<float> transposed;  // scratch of weight_gradient_swapped
};

GemmCache::GemmCache() : impl_(std::make_unique<Impl>()) {}
GemmCache::~GemmCache() = default;

size_t GemmCache::size() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->entries.size();
}

namespace {

// Row-major [rows, cols] operand stored transposed when `trans` (i.e. as [cols, rows]).
memory::desc operand(int64_t batch, int64_t rows, int64_t cols, bool trans) {
  dims strides = trans ? dims{rows * cols, 1, rows} : dims{rows * cols, cols, 1};
  if (batch == 0)
    return memory::desc({rows, cols}, memory::data_type::f32, {strides[1], strides[2]});
  return memory::desc({batch, rows, cols}, memory::data_type::f32, strides);
}

// A weight gradient dW [m, n] = dY^T X with m >= 1024 rows and n < m (the d_ff -> d_model
// layer, the output layer): oneDNN's sgemm with A transposed runs it slower than dW^T = X^T dY
// (bench/gemm, "dW FFN in": 82 against 76 GFLOP/s at K = 4000; a standalone test at K = 4095
// saw 93-106 against 59-64). So compute dW^T into scratch and add its transpose into c: m n
// extra elements against 2 m n k flops.
bool weight_gradient_swapped(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
  return trans_a && !trans_b && m >= 1024 && n < m && k >= 1024;
}

}  // namespace

void GemmCache::run(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                    float alpha, float beta) {
  const int64_t batch = a.ndim() == 3 ? a.dim(0) : 0;
  const int64_t m = c.dim(-2), n = c.dim(-1);
  const int64_t k = trans_a ? a.dim(-2) : a.dim(-1);
  if (batch == 0 && weight_gradient_swapped(trans_a, trans_b, m, n, k)) {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    std::vector<float>& t = impl_->transposed;  // [n, m]
    t.resize(static_cast<size_t>(m * n));
    dnnl_status_t status = dnnl_sgemm('T', 'N', n, m, k, alpha, b.data<float>(), n, a.data<float>(),
                                      m, 0.0f, t.data(), m);
    TX_CHECK(status == dnnl_success, "gemm: oneDNN sgemm failed with status ", int(status),
             " for c ", c.shape().str());
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
    dnnl_status_t status =
        dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a.data<float>(),
                   trans_a ? m : k, b.data<float>(), trans_b ? k : n, beta, c.data<float>(), n);
    TX_CHECK(status == dnnl_success, "gemm: oneDNN sgemm failed with status ", int(status),
             " for c ", c.shape().str());
    return;
  }
  if (!trans_a && m <= kFewRows) {
    few_rows_gemm(batch, m, n, k, a.data<float>(), b.data<float>(), trans_b, c.data<float>(), alpha,
                  beta);
    return;
  }
  Key key{batch, m, n, k, trans_a, trans_b, alpha, beta};

  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto it = impl_->entries.find(key);
  if (it == impl_->entries.end()) {
    memory::desc a_md = operand(batch, m, k, trans_a);
    memory::desc b_md = operand(batch, k, n, trans_b);
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
