// Argument checks for every operator, written once for all backends.
#include "backend/backend.h"

#include <chrono>
#include <cstring>
#include <functional>

namespace tx {

namespace {

// Each check names the operator, the argument and its shape, and what was expected.
void require_defined(const char* op, const char* arg, const Tensor& t) {
  // A released graph value keeps its shape and loses its memory (ops::release, drop_value).
  TX_CHECK(t.defined(), op, ": ", arg, " is an undefined tensor",
           t.ndim() > 0 ? str(" of shape ", t.shape().str(), ", a graph value ops::release freed")
                        : std::string(),
           "; pass an allocated tensor");
}

void require_dtype(const char* op, const char* arg, const Tensor& t, DType want) {
  require_defined(op, arg, t);
  TX_CHECK(t.dtype() == want, op, ": ", arg, " ", t.str(), " must be ", name_of(want));
}

void require_device(const char* op, const char* arg, const Tensor& t, const Backend& be) {
  require_defined(op, arg, t);
  TX_CHECK(t.device() == be.device(), op, ": ", arg, " ", t.str(),
           " is not on this backend's device ", be.device().str(), "; copy it there first");
}

void require_same_shape(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                        const Tensor& b) {
  TX_CHECK(a.shape() == b.shape(), op, ": shapes differ: ", a_name, " ", a.shape().str(), " vs ",
           b_name, " ", b.shape().str(), "; they must be equal");
}

// A f32 tensor on this device.
void f32_arg(const Backend& be, const char* op, const char* arg, const Tensor& t) {
  require_dtype(op, arg, t, DType::f32);
  require_device(op, arg, t, be);
}

void i32_arg(const Backend& be, const char* op, const char* arg, const Tensor& t) {
  require_dtype(op, arg, t, DType::i32);
  require_device(op, arg, t, be);
}

void require_shape(const char* op, const char* arg, const Tensor& t, const Shape& want) {
  TX_CHECK(t.shape() == want, op, ": ", arg, " has shape ", t.shape().str(), ", expected ",
           want.str());
}

void require_min_ndim(const char* op, const char* arg, const Tensor& t, int n) {
  TX_CHECK(t.ndim() >= n, op, ": ", arg, " ", t.shape().str(), " needs at least ", n,
           " dimensions");
}

void require_scalar_out(const char* op, const Tensor& out) {
  TX_CHECK(out.numel() == 1, op, ": out ", out.shape().str(), " must hold exactly 1 element");
}

}  // namespace

// ---- memory -----------------------------------------------------------------------------------

Tensor Backend::empty(const Shape& shape, DType dtype) const {
  return Tensor::allocate(allocator(), shape, dtype);
}

Tensor Backend::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  fill(t, 0.0f);
  return t;
}

Tensor Backend::upload(const std::vector<float>& host, const Shape& shape) {
  TX_CHECK(static_cast<int64_t>(host.size()) == shape.numel(), "upload: ", host.size(),
           " values do not fill shape ", shape.str());
  Tensor t = empty(shape, DType::f32);
  copy_from_host(host.data(), t);
  return t;
}

Tensor Backend::upload(const std::vector<int32_t>& host, const Shape& shape) {
  TX_CHECK(static_cast<int64_t>(host.size()) == shape.numel(), "upload: ", host.size(),
           " values do not fill shape ", shape.str());
  Tensor t = empty(shape, DType::i32);
  copy_from_host(host.data(), t);
  return t;
}

template <>
std::vector<float> Backend::download<float>(const Tensor& t) {
  require_dtype("download<float>", "tensor", t, DType::f32);
  std::vector<float> out(t.numel());
  copy_to_host(t, out.data());
  return out;
}

template <>
std::vector<int32_t> Backend::download<int32_t>(const Tensor& t) {
  require_dtype("download<int32_t>", "tensor", t, DType::i32);
  std::vector<int32_t> out(t.numel());
  copy_to_host(t, out.data());
  return out;
}

template <>
std::vector<uint16_t> Backend::download<uint16_t>(const Tensor& t) {
  require_defined("download<uint16_t>", "tensor", t);
  TX_CHECK(size_of(t.dtype()) == 2, "download<uint16_t>: ", t.str(), " is not f16 or bf16");
  std::vector<uint16_t> out(t.numel());
  copy_to_host(t, out.data());
  return out;
}

void Backend::copy_from_host(const void* src, const Tensor& dst) {
  require_defined("copy_from_host", "dst", dst);
  require_device("copy_from_host", "dst", dst, *this);
  if (dst.nbytes()) copy_from_host_impl(src, dst);
}

void Backend::copy_to_host(const Tensor& src, void* dst) {
  require_defined("copy_to_host", "src", src);
  require_device("copy_to_host", "src", src, *this);
  if (src.nbytes()) copy_to_host_impl(src, dst);
}

void Backend::copy(const Tensor& src, const Tensor& dst) {
  require_defined("copy", "src", src);
  require_device("copy", "src", src, *this);
  require_device("copy", "dst", dst, *this);
  require_same_shape("copy", "src", src, "dst", dst);
  TX_CHECK(src.dtype() == dst.dtype(), "copy: dtypes differ: src ", src.str(), " vs dst ",
           dst.str(), "; use cast() to convert");
  if (src.nbytes() && !src.same_memory(dst)) copy_impl(src, dst);
}

void Backend::fill(const Tensor& x, float value) {
  require_defined("fill", "x", x);
  require_device("fill", "x", x, *this);
  if (x.numel()) fill_impl(x, value);
}

// ---- linear algebra ---------------------------------------------------------------------------

void Backend::gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                   float alpha, float beta) {
  require_device("gemm", "a", a, *this);
  require_device("gemm", "b", b, *this);
  f32_arg(*this, "gemm", "c", c);
  const bool half = a.dtype() != DType::f32;
  TX_CHECK(a.dtype() == b.dtype() &&
               (a.dtype() == DType::f32 || a.dtype() == DType::bf16 || a.dtype() == DType::f16),
           "gemm: a ", a.str(), " and b ", b.str(),
           " must both be f32, both bf16 or both f16; cast one of them");
  int nd = a.ndim();
  TX_CHECK((nd == 2 || nd == 3) && b.ndim() == nd && c.ndim() == nd, "gemm: a ", a.shape().str(),
           ", b ", b.shape().str(), ", c ", c.shape().str(),
           " must all be 2-D, or all 3-D for a batched GEMM");
  if (nd == 3)
    TX_CHECK(a.dim(0) == b.dim(0) && a.dim(0) == c.dim(0), "gemm: batch sizes differ: a ",
             a.shape().str(), ", b ", b.shape().str(), ", c ", c.shape().str());
  int64_t m = trans_a ? a.dim(-1) : a.dim(-2);
  int64_t ka = trans_a ? a.dim(-2) : a.dim(-1);
  int64_t kb = trans_b ? b.dim(-1) : b.dim(-2);
  int64_t n = trans_b ? b.dim(-2) : b.dim(-1);
  TX_CHECK(ka == kb, "gemm: inner dimensions differ: a ", a.shape().str(), " (trans_a=", trans_a,
           ") has K=", ka, " but b ", b.shape().str(), " (trans_b=", trans_b, ") has K=", kb);
  TX_CHECK(c.dim(-2) == m && c.dim(-1) == n, "gemm: c ", c.shape().str(), " must be [", m, ", ", n,
           "] for a ", a.shape().str(), " (trans_a=", trans_a, ") and b ", b.shape().str(),
           " (trans_b=", trans_b, ")");
  if (c.numel() == 0) return;
  if (ka == 0) {  // an empty sum: c = beta * c (BLAS leaves c unread when beta is 0)
    if (beta == 0.0f)
      fill(c, 0.0f);
    else
      scale(c, beta, c);
    return;
  }
  auto run = [&] {
    if (half)
      gemm_half_impl(a, trans_a, b, trans_b, c, alpha, beta);
    else
      gemm_impl(a, trans_a, b, trans_b, c, alpha, beta);
  };
  if (!profiling_) {  // the common case, without a std::function per call
    run();
    return;
  }
  tally_gemm(2.0 * double(c.numel()) * double(ka), run);
}

std::string Backend::half_gemm_missing(DType dtype) const {
  return "the " + name() + " backend has no " + std::string(name_of(dtype)) + " GEMM kernels";
}

void Backend::gemm_half_impl(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                             const Tensor& c, float alpha, float beta) {
  const Tensor wide_a = empty(a.shape()), wide_b = empty(b.shape());
  cast(a, wide_a);
  cast(b, wide_b);
  gemm_impl(wide_a, trans_a, wide_b, trans_b, c, alpha, beta);
}

Backend::PackedWeight Backend::pack_weight(const Tensor& w) {
  require_device("pack_weight", "w", w, *this);
  TX_CHECK(w.dtype() == DType::f32 || w.dtype() == DType::bf16 || w.dtype() == DType::f16 ||
               w.dtype() == DType::i8,
           "pack_weight: w ", w.str(), " must be f32, bf16 or f16 (gemm_packed) or i8 (gemm_i8)");
  TX_CHECK(w.ndim() == 2, "pack_weight: w ", w.shape().str(), " must be 2-D [N, K]");
  PackedWeight p;
  p.weight = w;
  if (w.numel() > 0) pack_weight_impl(p);
  return p;
}

void Backend::gemm_packed(const Tensor& a, const PackedWeight& w, const Tensor& c,
                          const Tensor& bias, Activation act) {
  TX_CHECK(w.defined(), "gemm_packed: the weight was not packed (Backend::pack_weight)");
  require_device("gemm_packed", "w", w.weight, *this);
  require_device("gemm_packed", "a", a, *this);
  f32_arg(*this, "gemm_packed", "c", c);
  TX_CHECK(w.weight.dtype() != DType::i8, "gemm_packed: w ", w.weight.str(),
           " is i8: its product is gemm_i8");
  TX_CHECK(a.dtype() == w.weight.dtype(), "gemm_packed: a ", a.str(), " and w ", w.weight.str(),
           " must have one dtype; cast a to the weight's");
  require_min_ndim("gemm_packed", "a", a, 1);
  require_min_ndim("gemm_packed", "c", c, 1);
  const int64_t m = a.shape().rows(), n = w.weight.dim(0), k = w.weight.dim(1);
  TX_CHECK(a.dim(-1) == k, "gemm_packed: a ", a.shape().str(), " must have K = ", k,
           " columns for w ", w.weight.shape().str());
  TX_CHECK(c.shape().rows() == m && c.dim(-1) == n, "gemm_packed: c ", c.shape().str(),
           " must be [", m, ", ", n, "] (rows x columns) for a ", a.shape().str(), " and w ",
           w.weight.shape().str());
  if (bias.defined()) {
    f32_arg(*this, "gemm_packed", "bias", bias);
    require_shape("gemm_packed", "bias", bias, Shape{n});
  }
  if (c.numel() == 0) return;
  if (k == 0) {  // an empty sum
    fill(c, 0.0f);
    bias_act_impl(c.view({m, n}), bias, act);
    return;
  }
  if (!profiling_) {
    gemm_packed_impl(a, w, c, bias, act);
    return;
  }
  tally_gemm(2.0 * double(c.numel()) * double(k), [&] { gemm_packed_impl(a, w, c, bias, act); });
}

void Backend::gemm_weight_as_is(const Tensor& a, const PackedWeight& w, const Tensor& c,
                                const Tensor& bias, Activation act) {
  const int64_t m = a.shape().rows(), n = w.weight.dim(0), k = w.weight.dim(1);
  if (a.dtype() == DType::f32)
    gemm_impl(a.view({m, k}), false, w.weight, true, c.view({m, n}), 1.0f, 0.0f);
  else
    gemm_half_impl(a.view({m, k}), false, w.weight, true, c.view({m, n}), 1.0f, 0.0f);
  bias_act_impl(c.view({m, n}), bias, act);
}

void Backend::bias_act_impl(const Tensor& x, const Tensor& bias, Activation act) {
  if (bias.defined() && act == Activation::relu)
    add_bias_relu_impl(x, bias, x);
  else if (bias.defined() && act == Activation::swish)
    add_bias_swish_impl(x, bias, x);
  else if (bias.defined())
    add_bias_impl(x, bias, x);
  else if (act == Activation::relu)
    relu_impl(x, x);
  else if (act == Activation::swish)
    swish_impl(x, x);
}

void Backend::tally_gemm(double flop, const std::function<void()>& run) {
  synchronize();
  const auto start = std::chrono::steady_clock::now();
  run();
  synchronize();
  gemm_tally_.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  gemm_tally_.flop += flop;
  ++gemm_tally_.calls;
}

Backend::GemmTally Backend::take_gemm_tally() {
  GemmTally t = gemm_tally_;
  gemm_tally_ = GemmTally();
  return t;
}

// ---- elementwise ------------------------------------------------------------------------------

namespace {
void check_add_bias(const Backend& be, const char* op, const Tensor& x, const Tensor& bias,
                    const Tensor& y) {
  f32_arg(be, op, "x", x);
  f32_arg(be, op, "bias", bias);
  f32_arg(be, op, "y", y);
  require_min_ndim(op, "x", x, 1);
  TX_CHECK(bias.ndim() == 1 && bias.dim(0) == x.dim(-1), op, ": bias ", bias.shape().str(),
           " must be [", x.dim(-1), "] to match the last dimension of x ", x.shape().str());
  require_same_shape(op, "x", x, "y", y);
}
}  // namespace

void Backend::add_bias(const Tensor& x, const Tensor& bias, const Tensor& y) {
  check_add_bias(*this, "add_bias", x, bias, y);
  if (x.numel()) add_bias_impl(x, bias, y);
}

void Backend::add_bias_relu(const Tensor& x, const Tensor& bias, const Tensor& y) {
  check_add_bias(*this, "add_bias_relu", x, bias, y);
  if (x.numel()) add_bias_relu_impl(x, bias, y);
}

void Backend::add_bias_relu_impl(const Tensor& x, const Tensor& bias, const Tensor& y) {
  add_bias_impl(x, bias, y);
  relu_impl(y, y);
}

void Backend::add_bias_swish(const Tensor& x, const Tensor& bias, const Tensor& y) {
  check_add_bias(*this, "add_bias_swish", x, bias, y);
  if (x.numel()) add_bias_swish_impl(x, bias, y);
}

void Backend::add_bias_swish_impl(const Tensor& x, const Tensor& bias, const Tensor& y) {
  add_bias_impl(x, bias, y);
  swish_impl(y, y);
}

void Backend::add(const Tensor& a, const Tensor& b, const Tensor& y) {
  f32_arg(*this, "add", "a", a);
  f32_arg(*this, "add", "b", b);
  f32_arg(*this, "add", "y", y);
  require_same_shape("add", "a", a, "b", b);
  require_same_shape("add", "a", a, "y", y);
  if (a.numel()) add_impl(a, b, y);
}

void Backend::axpy(float alpha, const Tensor& x, const Tensor& y) {
  f32_arg(*this, "axpy", "x", x);
  f32_arg(*this, "axpy", "y", y);
  require_same_shape("axpy", "x", x, "y", y);
  if (x.numel()) axpy_impl(alpha, x, y);
}

void Backend::scale(const Tensor& x, float alpha, const Tensor& y) {
  f32_arg(*this, "scale", "x", x);
  f32_arg(*this, "scale", "y", y);
  require_same_shape("scale", "x", x, "y", y);
  if (x.numel()) scale_impl(x, alpha, y);
}

void Backend::relu(const Tensor& x, const Tensor& y) {
  f32_arg(*this, "relu", "x", x);
  f32_arg(*this, "relu", "y", y);
  require_same_shape("relu", "x", x, "y", y);
  if (x.numel()) relu_impl(x, y);
}

void Backend::relu_backward(const Tensor& dy, const Tensor& y, const Tensor& dx, bool accumulate) {
  f32_arg(*this, "relu_backward", "dy", dy);
  f32_arg(*this, "relu_backward", "y", y);
  f32_arg(*this, "relu_backward", "dx", dx);
  require_same_shape("relu_backward", "dy", dy, "y", y);
  require_same_shape("relu_backward", "dy", dy, "dx", dx);
  if (dy.numel()) relu_backward_impl(dy, y, dx, accumulate);
}

void Backend::swish(const Tensor& x, const Tensor& y) {
  f32_arg(*this, "swish", "x", x);
  f32_arg(*this, "swish", "y", y);
  require_same_shape("swish", "x", x, "y", y);
  if (x.numel()) swish_impl(x, y);
}

void Backend::swish_backward(const Tensor& dy, const Tensor& x, const Tensor& dx, bool accumulate) {
  f32_arg(*this, "swish_backward", "dy", dy);
  f32_arg(*this, "swish_backward", "x", x);
  f32_arg(*this, "swish_backward", "dx", dx);
  require_same_shape("swish_backward", "dy", dy, "x", x);
  require_same_shape("swish_backward", "dy", dy, "dx", dx);
  if (dy.numel()) swish_backward_impl(dy, x, dx, accumulate);
}

void Backend::dropout(const Tensor& x, float p, uint64_t seed, uint64_t offset, const Tensor& y) {
  f32_arg(*this, "dropout", "x", x);
  f32_arg(*this, "dropout", "y", y);
  require_same_shape("dropout", "x", x, "y", y);
  TX_CHECK(p >= 0.0f && p < 1.0f, "dropout: probability ", p, " must be in [0, 1)");
  if (x.numel()) dropout_impl(x, p, seed, offset, y);
}

void Backend::dropout_backward(const Tensor& dy, float p, uint64_t seed, uint64_t offset,
                               const Tensor& dx, bool accumulate) {
  f32_arg(*this, "dropout_backward", "dy", dy);
  f32_arg(*this, "dropout_backward", "dx", dx);
  require_same_shape("dropout_backward", "dy", dy, "dx", dx);
  TX_CHECK(p >= 0.0f && p < 1.0f, "dropout_backward: probability ", p, " must be in [0, 1)");
  if (dy.numel()) dropout_backward_impl(dy, p, seed, offset, dx, accumulate);
}

void Backend::add_positions(const Tensor& x, int64_t start, const Tensor& y,
                            math::PositionLayout layout) {
  f32_arg(*this, "add_positions", "x", x);
  f32_arg(*this, "add_positions", "y", y);
  TX_CHECK(x.ndim() == 3, "add_positions: x ", x.shape().str(), " must be [batch, time, d_model]");
  require_same_shape("add_positions", "x", x, "y", y);
  // Positions are computed in double and 32-bit kernels index them: 2^30 is far past any
  // model's max_length (and start + time cannot overflow).
  TX_CHECK(start >= 0 && start <= (int64_t(1) << 30), "add_positions: start position ", start,
           " must be between 0 and 2^30");
  TX_CHECK(layout == math::PositionLayout::interleaved || x.dim(2) % 2 == 0,
           "add_positions: the [sin | cos] halves layout needs an even d_model, got ", x.dim(2));
  if (x.numel()) add_positions_impl(x, start, y, layout);
}

void Backend::cast(const Tensor& x, const Tensor& y) {
  require_defined("cast", "x", x);
  require_defined("cast", "y", y);
  require_device("cast", "x", x, *this);
  require_device("cast", "y", y, *this);
  require_same_shape("cast", "x", x, "y", y);
  TX_CHECK(!x.same_memory(y) || size_of(x.dtype()) == size_of(y.dtype()), "cast: cannot convert ",
           x.str(), " to ", name_of(y.dtype()),
           " in place (the element sizes differ); use a "
           "separate output tensor");
  if (x.numel()) cast_impl(x, y);
}

// ---- attention --------------------------------------------------------------------------------

void Backend::softmax(const Tensor& x, float scale, const Tensor& key_lengths, bool causal,
                      const Tensor& y) {
  f32_arg(*this, "softmax", "x", x);
  f32_arg(*this, "softmax", "y", y);
  require_same_shape("softmax", "x", x, "y", y);
  require_min_ndim("softmax", "x", x, 2);
  if (key_lengths.defined()) {
    i32_arg(*this, "softmax", "key_lengths", key_lengths);
    TX_CHECK(key_lengths.ndim() == 1 && key_lengths.dim(0) == x.dim(0), "softmax: key_lengths ",
             key_lengths.shape().str(), " must be [", x.dim(0),
             "], one length per batch entry of x ", x.shape().str());
  }
  if (x.numel()) softmax_impl(x, scale, key_lengths, causal, y);
}

namespace {
// The arguments attend_cached and attend_memory share: f32 q [R, heads, d_head] and out alike,
// f32 keys and values alike [.., .., .., d_head] (4-D, `layout` naming the axes) whose axis
// `heads_axis` is q's heads, and the i32 index (`index_name`).
void check_attend_args(const Backend& be, const char* op, const Tensor& q, const Tensor& keys,
                       const Tensor& values, const Tensor& out, const char* index_name,
                       const Tensor& index, const char* layout, int heads_axis) {
  f32_arg(be, op, "q", q);
  f32_arg(be, op, "keys", keys);
  f32_arg(be, op, "values", values);
  f32_arg(be, op, "out", out);
  i32_arg(be, op, index_name, index);
  TX_CHECK(q.ndim() == 3 && keys.ndim() == 4, op, ": q ", q.shape().str(),
           " must be [R, heads, d_head] and keys ", keys.shape().str(), " ", layout);
  require_same_shape(op, "keys", keys, "values", values);
  require_same_shape(op, "q", q, "out", out);
  TX_CHECK(keys.dim(heads_axis) == q.dim(1) && keys.dim(3) == q.dim(2), op, ": keys ",
           keys.shape().str(), " must have q's heads and d_head (q ", q.shape().str(), ")");
}
}  // namespace

void Backend::attend_cached(const Tensor& q, const Tensor& keys, const Tensor& values,
                            const Tensor& rows, int64_t length, float scale, const Tensor& out) {
  check_attend_args(*this, "attend_cached", q, keys, values, out, "rows", rows,
                    "[capacity, slots, heads, d_head]", 2);
  TX_CHECK(rows.shape() == Shape({q.dim(0), keys.dim(0)}), "attend_cached: rows ",
           rows.shape().str(), " must be [", q.dim(0), ", ", keys.dim(0), "] (R, capacity)");
  TX_CHECK(length >= 1 && length <= keys.dim(0), "attend_cached: length ", length,
           " must be in [1, capacity = ", keys.dim(0), "]");
  if (q.numel()) attend_cached_impl(q, keys, values, rows, length, scale, out);
}

void Backend::attend_memory(const Tensor& q, const Tensor& keys, const Tensor& values,
                            const Tensor& lengths, float scale, const Tensor& out) {
  check_attend_args(*this, "attend_memory", q, keys, values, out, "lengths", lengths,
                    "[entries, heads, time, d_head]", 1);
  TX_CHECK(keys.dim(0) > 0 && q.dim(0) % keys.dim(0) == 0, "attend_memory: q's ", q.dim(0),
           " rows must be a multiple of the ", keys.dim(0), " memory entries");
  TX_CHECK(lengths.shape() == Shape({keys.dim(0)}), "attend_memory: lengths ",
           lengths.shape().str(), " must be [", keys.dim(0), "], one per memory entry");
  if (q.numel()) attend_memory_impl(q, keys, values, lengths, scale, out);
}

void Backend::softmax_backward(const Tensor& y, const Tensor& dy, float scale, const Tensor& dx,
                               bool accumulate) {
  f32_arg(*this, "softmax_backward", "y", y);
  f32_arg(*this, "softmax_backward", "dy", dy);
  f32_arg(*this, "softmax_backward", "dx", dx);
  require_same_shape("softmax_backward", "y", y, "dy", dy);
  require_same_shape("softmax_backward", "y", y, "dx", dx);
  if (y.numel()) softmax_backward_impl(y, dy, scale, dx, accumulate);
}

void Backend::split_heads(const Tensor& x, int heads, const Tensor& y, bool accumulate) {
  f32_arg(*this, "split_heads", "x", x);
  f32_arg(*this, "split_heads", "y", y);
  TX_CHECK(x.ndim() == 3, "split_heads: x ", x.shape().str(), " must be [batch, time, d_model]");
  TX_CHECK(heads > 0 && x.dim(2) % heads == 0, "split_heads: d_model ", x.dim(2),
           " of x is not divisible by heads=", heads);
  require_shape("split_heads", "y", y, Shape{x.dim(0), heads, x.dim(1), x.dim(2) / heads});
  if (x.numel()) split_heads_impl(x, heads, y, accumulate);
}

void Backend::merge_heads(const Tensor& x, const Tensor& y, bool accumulate) {
  f32_arg(*this, "merge_heads", "x", x);
  f32_arg(*this, "merge_heads", "y", y);
  TX_CHECK(x.ndim() == 4, "merge_heads: x ", x.shape().str(),
           " must be [batch, heads, time, d_head]");
  require_shape("merge_heads", "y", y, Shape{x.dim(0), x.dim(2), x.dim(1) * x.dim(3)});
  if (x.numel()) merge_heads_impl(x, y, accumulate);
}

// ---- normalisation and losses -----------------------------------------------------------------

void Backend::log_softmax(const Tensor& x, const Tensor& y) {
  f32_arg(*this, "log_softmax", "x", x);
  f32_arg(*this, "log_softmax", "y", y);
  require_min_ndim("log_softmax", "x", x, 1);
  require_same_shape("log_softmax", "x", x, "y", y);
  if (x.numel()) log_softmax_impl(x, y);
}

void Backend::log_softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx) {
  f32_arg(*this, "log_softmax_backward", "y", y);
  f32_arg(*this, "log_softmax_backward", "dy", dy);
  f32_arg(*this, "log_softmax_backward", "dx", dx);
  require_same_shape("log_softmax_backward", "y", y, "dy", dy);
  require_same_shape("log_softmax_backward", "y", y, "dx", dx);
  if (y.numel()) log_softmax_backward_impl(y, dy, dx);
}

namespace {
void check_layer_norm_params(const Backend& be, const char* op, const Tensor& x,
                             const Tensor& gamma, const Tensor& mean, const Tensor& rstd) {
  f32_arg(be, op, "x", x);
  f32_arg(be, op, "gamma", gamma);
  f32_arg(be, op, "mean", mean);
  f32_arg(be, op, "rstd", rstd);
  require_min_ndim(op, "x", x, 1);
  require_shape(op, "gamma", gamma, Shape{x.dim(-1)});
  require_shape(op, "mean", mean, Shape{x.shape().rows()});
  require_shape(op, "rstd", rstd, Shape{x.shape().rows()});
}
}  // namespace

void Backend::residual_layer_norm(const Tensor& x, const Tensor& sublayer, const Tensor& gamma,
                                  const Tensor& beta, float eps, const Tensor& y) {
  const char* op = "residual_layer_norm";
  f32_arg(*this, op, "x", x);
  f32_arg(*this, op, "sublayer", sublayer);
  f32_arg(*this, op, "gamma", gamma);
  f32_arg(*this, op, "beta", beta);
  f32_arg(*this, op, "y", y);
  require_min_ndim(op, "x", x, 1);
  require_same_shape(op, "x", x, "sublayer", sublayer);
  require_same_shape(op, "x", x, "y", y);
  require_shape(op, "gamma", gamma, Shape{x.dim(-1)});
  require_shape(op, "beta", beta, Shape{x.dim(-1)});
  TX_CHECK(eps > 0.0f, op, ": eps ", eps, " must be > 0");
  if (x.numel()) residual_layer_norm_impl(x, sublayer, gamma, beta, eps, y);
}

void Backend::residual_layer_norm_impl(const Tensor& x, const Tensor& sublayer, const Tensor& gamma,
                                       const Tensor& beta, float eps, const Tensor& y) {
  const int64_t rows = x.shape().rows();
  Tensor sum = empty(x.shape()), mean = empty({rows}), rstd = empty({rows});
  add_impl(x, sublayer, sum);
  layer_norm_impl(sum, gamma, beta, eps, y, mean, rstd);
}

void Backend::layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                         const Tensor& y, const Tensor& mean, const Tensor& rstd) {
  check_layer_norm_params(*this, "layer_norm", x, gamma, mean, rstd);
  f32_arg(*this, "layer_norm", "beta", beta);
  f32_arg(*this, "layer_norm", "y", y);
  require_shape("layer_norm", "beta", beta, Shape{x.dim(-1)});
  require_same_shape("layer_norm", "x", x, "y", y);
  TX_CHECK(eps > 0.0f, "layer_norm: eps ", eps, " must be > 0");
  if (x.numel()) layer_norm_impl(x, gamma, beta, eps, y, mean, rstd);
}

void Backend::layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                  const Tensor& mean, const Tensor& rstd, const Tensor& dx,
                                  const Tensor& dgamma, const Tensor& dbeta, bool accumulate) {
  check_layer_norm_params(*this, "layer_norm_backward", x, gamma, mean, rstd);
  f32_arg(*this, "layer_norm_backward", "dy", dy);
  f32_arg(*this, "layer_norm_backward", "dx", dx);
  f32_arg(*this, "layer_norm_backward", "dgamma", dgamma);
  f32_arg(*this, "layer_norm_backward", "dbeta", dbeta);
  require_same_shape("layer_norm_backward", "x", x, "dy", dy);
  require_same_shape("layer_norm_backward", "x", x, "dx", dx);
  require_same_shape("layer_norm_backward", "gamma", gamma, "dgamma", dgamma);
  require_same_shape("layer_norm_backward", "gamma", gamma, "dbeta", dbeta);
  if (x.numel()) layer_norm_backward_impl(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, accumulate);
}

namespace {
void check_cross_entropy(const Backend& be, const char* op, const Tensor& logits,
                         const Tensor& targets, float smoothing, const char* rows_name,
                         const Tensor& rows) {
  f32_arg(be, op, "logits", logits);
  i32_arg(be, op, "targets", targets);
  f32_arg(be, op, rows_name, rows);
  require_min_ndim(op, "logits", logits, 1);
  int64_t r = logits.shape().rows();
  TX_CHECK(r == 0 || logits.shape().cols() > 0, op, ": logits ", logits.shape().str(),
           " have rows but no classes; a distribution needs at least one");
  TX_CHECK(targets.numel() == r, op, ": targets ", targets.shape().str(),
           " must hold one id per row of logits ", logits.shape().str(), " (", r, " rows)");
  TX_CHECK(rows.numel() == r, op, ": ", rows_name, " ", rows.shape().str(),
           " must hold one value per row of logits ", logits.shape().str(), " (", r, " rows)");
  TX_CHECK(smoothing >= 0.0f && smoothing < 1.0f, op, ": label smoothing ", smoothing,
           " must be in [0, 1)");
}
}  // namespace

void Backend::cross_entropy(const Tensor& logits, const Tensor& targets, float smoothing,
                            int32_t ignore_index, const Tensor& losses, const Tensor& nll) {
  check_cross_entropy(*this, "cross_entropy", logits, targets, smoothing, "losses", losses);
  if (nll.defined()) {
    f32_arg(*this, "cross_entropy", "nll", nll);
    require_same_shape("cross_entropy", "losses", losses, "nll", nll);
  }
  if (logits.numel()) cross_entropy_impl(logits, targets, smoothing, ignore_index, losses, nll);
}

void Backend::cross_entropy_backward(const Tensor& logits, const Tensor& targets, float smoothing,
                                     int32_t ignore_index, const Tensor& dlosses,
                                     const Tensor& dlogits, bool accumulate) {
  check_cross_entropy(*this, "cross_entropy_backward", logits, targets, smoothing, "dlosses",
                      dlosses);
  f32_arg(*this, "cross_entropy_backward", "dlogits", dlogits);
  require_same_shape("cross_entropy_backward", "logits", logits, "dlogits", dlogits);
  if (logits.numel())
    cross_entropy_backward_impl(logits, targets, smoothing, ignore_index, dlosses, dlogits,
                                accumulate);
}

namespace {
void check_symmetric_kl(const Backend& be, const char* op, const Tensor& logits,
                        const Tensor& targets, const char* pairs_name, const Tensor& pairs) {
  f32_arg(be, op, "logits", logits);
  i32_arg(be, op, "targets", targets);
  f32_arg(be, op, pairs_name, pairs);
  require_min_ndim(op, "logits", logits, 1);
  const int64_t r = logits.shape().rows();
  TX_CHECK(r == 0 || logits.shape().cols() > 0, op, ": logits ", logits.shape().str(),
           " have rows but no classes; a distribution needs at least one");
  TX_CHECK(r % 2 == 0, op, ": logits ", logits.shape().str(), " have ", r,
           " rows; they must be two passes of one batch, an even number");
  TX_CHECK(targets.numel() == r / 2, op, ": targets ", targets.shape().str(),
           " must hold one id per pair of rows of logits ", logits.shape().str(), " (", r / 2,
           " pairs)");
  TX_CHECK(pairs.numel() == r / 2, op, ": ", pairs_name, " ", pairs.shape().str(),
           " must hold one value per pair of rows of logits ", logits.shape().str(), " (", r / 2,
           " pairs)");
}
}  // namespace

void Backend::symmetric_kl(const Tensor& logits, const Tensor& targets, int32_t ignore_index,
                           const Tensor& losses) {
  check_symmetric_kl(*this, "symmetric_kl", logits, targets, "losses", losses);
  if (logits.numel()) symmetric_kl_impl(logits, targets, ignore_index, losses);
}

void Backend::symmetric_kl_backward(const Tensor& logits, const Tensor& targets,
                                    int32_t ignore_index, const Tensor& dlosses,
                                    const Tensor& dlogits) {
  check_symmetric_kl(*this, "symmetric_kl_backward", logits, targets, "dlosses", dlosses);
  f32_arg(*this, "symmetric_kl_backward", "dlogits", dlogits);
  require_same_shape("symmetric_kl_backward", "logits", logits, "dlogits", dlogits);
  if (logits.numel()) symmetric_kl_backward_impl(logits, targets, ignore_index, dlosses, dlogits);
}

// ---- lookup and reordering --------------------------------------------------------------------

namespace {
// src [N, rest...] and dst [M, rest...] share the row size; index holds M ids.
void check_rows(const Backend& be, const char* op, const Tensor& table, const char* table_name,
                const Tensor& rows, const char* rows_name, const Tensor& index) {
  f32_arg(be, op, table_name, table);
  f32_arg(be, op, rows_name, rows);
  i32_arg(be, op, "index", index);
  require_min_ndim(op, table_name, table, 1);
  require_min_ndim(op, rows_name, rows, 1);
  // The product of the trailing dimensions: a table of no rows still has a row size.
  auto row_size = [](const Tensor& t) {
    int64_t n = 1;
    for (int i = 1; i < t.ndim(); ++i) n *= t.dim(i);
    return n;
  };
  const int64_t row = row_size(table), rows_row = row_size(rows);
  TX_CHECK(index.ndim() == 1 && index.dim(0) == rows.dim(0), op, ": index ", index.shape().str(),
           " must be [", rows.dim(0), "], one id per row of ", rows_name, " ", rows.shape().str());
  TX_CHECK(rows.dim(0) == 0 || row == rows_row, op, ": row sizes differ: ", table_name, " ",
           table.shape().str(), " vs ", rows_name, " ", rows.shape().str());
}
}  // namespace

void Backend::gather_rows(const Tensor& src, const Tensor& index, const Tensor& dst, float scale) {
  check_rows(*this, "gather_rows", src, "src", dst, "dst", index);
  if (dst.numel()) gather_rows_impl(src, index, dst, scale);
}

void Backend::scatter_add_rows(const Tensor& src, const Tensor& index, const Tensor& dst,
                               float scale) {
  check_rows(*this, "scatter_add_rows", dst, "dst", src, "src", index);
  if (src.numel()) scatter_add_rows_impl(src, index, dst, scale);
}

void Backend::top_k(const Tensor& x, int k, const Tensor& values, const Tensor& indices) {
  f32_arg(*this, "top_k", "x", x);
  f32_arg(*this, "top_k", "values", values);
  i32_arg(*this, "top_k", "indices", indices);
  require_min_ndim("top_k", "x", x, 1);
  TX_CHECK(k >= 1 && k <= x.dim(-1), "top_k: k=", k, " must be in [1, ", x.dim(-1), "] for x ",
           x.shape().str());
  Shape want{x.shape().rows(), k};
  TX_CHECK(values.numel() == want.numel(), "top_k: values ", values.shape().str(), " must be ",
           want.str());
  TX_CHECK(indices.numel() == want.numel(), "top_k: indices ", indices.shape().str(), " must be ",
           want.str());
  if (x.numel()) top_k_impl(x, k, values, indices);
}

void Backend::beam_top_k(const Tensor& logits, const Tensor& mask, const Tensor& offsets, int beam,
                         int k, const Tensor& values, const Tensor& indices) {
  f32_arg(*this, "beam_top_k", "logits", logits);
  f32_arg(*this, "beam_top_k", "mask", mask);
  f32_arg(*this, "beam_top_k", "offsets", offsets);
  f32_arg(*this, "beam_top_k", "values", values);
  i32_arg(*this, "beam_top_k", "indices", indices);
  require_min_ndim("beam_top_k", "logits", logits, 1);
  const int64_t rows = logits.shape().rows(), vocab = logits.dim(-1);
  TX_CHECK(beam >= 1 && rows % beam == 0, "beam_top_k: beam ", beam, " must divide the ", rows,
           " rows of logits ", logits.shape().str());
  TX_CHECK(k >= 1 && k <= beam * vocab, "beam_top_k: k=", k, " must be in [1, ", beam * vocab,
           "] (beam * vocabulary) for logits ", logits.shape().str());
  require_shape("beam_top_k", "mask", mask, Shape{vocab});
  require_shape("beam_top_k", "offsets", offsets, Shape{rows});
  const Shape want{rows / beam, k};
  require_shape("beam_top_k", "values", values, want);
  require_shape("beam_top_k", "indices", indices, want);
  if (logits.numel()) beam_top_k_impl(logits, mask, offsets, beam, k, values, indices);
}

void Backend::beam_top_k_impl(const Tensor& logits, const Tensor& mask, const Tensor& offsets,
                              int beam, int k, const Tensor& values, const Tensor& indices) {
  const int64_t rows = logits.shape().rows(), vocab = logits.dim(-1);
  Tensor scores = empty({rows, vocab}), ones = empty({1, vocab});
  fill(ones, 1.0f);
  log_softmax(logits.view({rows, vocab}), scores);
  add_bias(scores, mask, scores);
  gemm(offsets.view({rows, 1}), false, ones, false, scores, 1.0f, 1.0f);
  top_k(scores.view({rows / beam, beam * vocab}), k, values, indices);
}

// ---- int8 inference ---------------------------------------------------------------------------

void Backend::quantize_rows(const Tensor& x, int max_level, const Tensor& q, const Tensor& scales) {
  f32_arg(*this, "quantize_rows", "x", x);
  require_dtype("quantize_rows", "q", q, DType::i8);
  require_device("quantize_rows", "q", q, *this);
  f32_arg(*this, "quantize_rows", "scales", scales);
  require_min_ndim("quantize_rows", "x", x, 1);
  require_same_shape("quantize_rows", "x", x, "q", q);
  require_shape("quantize_rows", "scales", scales, Shape{x.shape().rows()});
  TX_CHECK(max_level >= 1 && max_level <= 127, "quantize_rows: max_level ", max_level,
           " must be in [1, 127]");
  if (x.numel()) quantize_rows_impl(x, max_level, q, scales);
}

void Backend::gemm_i8(const Tensor& a, const Tensor& a_scales, const Tensor& b,
                      const Tensor& b_scales, const Tensor& bias, const Tensor& c) {
  require_defined("gemm_i8", "b", b);
  PackedWeight as_is;
  as_is.weight = b;
  gemm_i8(a, a_scales, as_is, b_scales, bias, c);
}

void Backend::gemm_i8(const Tensor& a, const Tensor& a_scales, const PackedWeight& packed,
                      const Tensor& b_scales, const Tensor& bias, const Tensor& c) {
  const Tensor& b = packed.weight;
  require_dtype("gemm_i8", "a", a, DType::i8);
  require_device("gemm_i8", "a", a, *this);
  require_dtype("gemm_i8", "b", b, DType::i8);
  require_device("gemm_i8", "b", b, *this);
  f32_arg(*this, "gemm_i8", "a_scales", a_scales);
  f32_arg(*this, "gemm_i8", "b_scales", b_scales);
  f32_arg(*this, "gemm_i8", "c", c);
  require_min_ndim("gemm_i8", "a", a, 1);
  TX_CHECK(b.ndim() == 2, "gemm_i8: b ", b.shape().str(), " must be 2-D [N, K]");
  const int64_t m = a.shape().rows(), n = b.dim(0), k = b.dim(1);
  TX_CHECK(a.dim(-1) == k, "gemm_i8: a ", a.shape().str(), " must have K = ", k, " columns for b ",
           b.shape().str());
  TX_CHECK(c.shape().rows() == m && c.dim(-1) == n, "gemm_i8: c ", c.shape().str(), " must be [", m,
           ", ", n, "] (rows x columns) for a ", a.shape().str(), " and b ", b.shape().str());
  require_shape("gemm_i8", "a_scales", a_scales, Shape{m});
  require_shape("gemm_i8", "b_scales", b_scales, Shape{n});
  if (bias.defined()) {
    f32_arg(*this, "gemm_i8", "bias", bias);
    require_shape("gemm_i8", "bias", bias, Shape{n});
  }
  if (c.numel() == 0) return;
  if (k == 0) {  // an empty sum
    fill(c, 0.0f);
    if (bias.defined()) add_bias(c, bias, c);
    return;
  }
  if (!profiling_) {
    gemm_i8_impl(a, a_scales, packed, b_scales, bias, c);
    return;
  }
  tally_gemm(2.0 * double(c.numel()) * double(k),
             [&] { gemm_i8_impl(a, a_scales, packed, b_scales, bias, c); });
}

// ---- reductions -------------------------------------------------------------------------------

void Backend::sum(const Tensor& x, const Tensor& out) {
  f32_arg(*this, "sum", "x", x);
  f32_arg(*this, "sum", "out", out);
  require_scalar_out("sum", out);
  sum_impl(x, out);
}

void Backend::squared_norm(const Tensor& x, const Tensor& out) {
  f32_arg(*this, "squared_norm", "x", x);
  f32_arg(*this, "squared_norm", "out", out);
  require_scalar_out("squared_norm", out);
  squared_norm_impl(x, out);
}

void Backend::sum_rows(const Tensor& x, const Tensor& out, float beta) {
  f32_arg(*this, "sum_rows", "x", x);
  f32_arg(*this, "sum_rows", "out", out);
  require_min_ndim("sum_rows", "x", x, 1);
  require_shape("sum_rows", "out", out, Shape{x.dim(-1)});
  sum_rows_impl(x, out, beta);
}

// ---- optimiser --------------------------------------------------------------------------------

void Backend::adam_update(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                          const AdamParams& p) {
  f32_arg(*this, "adam_update", "param", param);
  f32_arg(*this, "adam_update", "grad", grad);
  f32_arg(*this, "adam_update", "m", m);
  f32_arg(*this, "adam_update", "v", v);
  require_same_shape("adam_update", "param", param, "grad", grad);
  require_same_shape("adam_update", "param", param, "m", m);
  require_same_shape("adam_update", "param", param, "v", v);
  TX_CHECK(p.step >= 1, "adam_update: step ", p.step, " must be >= 1 (it is 1-based)");
  if (param.numel()) adam_update_impl(param, grad, m, v, p);
}

}  // namespace tx
