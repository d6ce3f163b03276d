// linear and batched matmul: the GEMMs, forward and backward.
#include "graph/ops.h"

namespace tx::ops {

Var linear(Graph& g, const Var& x, const Var& w, const Var& b) {
  const Tensor& xv = x->value;
  const Tensor& wv = w->value;
  TX_CHECK(wv.ndim() == 2 && xv.ndim() >= 1 && xv.dim(-1) == wv.dim(1), "linear: input ", xv.str(),
           " does not match weight ", wv.str(), " (stored [out, in])");
  TX_CHECK(!b || (b->value.ndim() == 1 && b->value.dim(0) == wv.dim(0)), "linear: bias ",
           b->value.str(), " must be [", wv.dim(0), "] for weight ", wv.str());
  const int64_t rows = xv.shape().rows(), in = wv.dim(1), out = wv.dim(0);
  std::vector<int64_t> dims = xv.shape().dims();
  dims.back() = out;

  Backend& be = g.backend();
  const bool rec = g.recording({&x, &w, &b});
  Var y = g.output(Shape(dims), rec);
  Tensor y2 = y->value.view({rows, out});
  // The GEMMs' operands: x and w themselves, or with a reduced gemm_dtype their rounded copies,
  // which the backward then reads in place of x.
  const Tensor X = g.gemm_operand(xv.view({rows, in}));
  const Tensor W = g.weight_operand(w);
  be.gemm(X, false, W, true, y2);
  if (b) be.add_bias(y2, b->value, y2);

  if (rec && g.gemm_dtype() == DType::f32) x->value_needed = true;  // the weight gradient reads it
  if (rec)
    g.record([x, w, b, y, X, W, rows, in, out](Graph& g) {
      if (!y->grad.defined()) return;
      Backend& be = g.backend();
      const Tensor dy = y->grad.view({rows, out});
      const Tensor DY = g.gemm_operand(dy);
      if (x->requires_grad) {
        const Graph::GradTarget t = g.grad_target(x);
        be.gemm(DY, false, W, false, t.dx.view({rows, in}), 1.0f, t.beta());
      }
      if (w->requires_grad) be.gemm(DY, true, X, false, g.grad(w), 1.0f, 1.0f);
      if (b && b->requires_grad) be.sum_rows(dy, g.grad(b), 1.0f);
    });
  return y;
}

Int8Weight Int8Weight::quantize(Backend& be, const Tensor& w) {
  TX_CHECK(w.ndim() == 2, "Int8Weight: weight ", w.str(), " must be 2-D [out, in]");
  Int8Weight q;
  q.values = be.empty(w.shape(), DType::i8);
  q.scales = be.empty({w.dim(0)});
  be.quantize_rows(w, Backend::kInt8WeightLevel, q.values, q.scales);
  q.packed = be.pack_weight(q.values);
  return q;
}

Var linear_int8(Graph& g, const Var& x, const Int8Weight& w, const Var& b) {
  const Tensor& xv = x->value;
  TX_CHECK(w.defined() && xv.ndim() >= 1 && xv.dim(-1) == w.values.dim(1), "linear_int8: input ",
           xv.str(), " does not match weight ", w.values.str(), " (stored [out, in])");
  TX_CHECK(!g.recording({&x, &b}),
           "linear_int8: int8 weights are for inference; gradients need the f32 weights");
  const int64_t rows = xv.shape().rows(), in = w.values.dim(1), out = w.values.dim(0);
  std::vector<int64_t> dims = xv.shape().dims();
  dims.back() = out;

  Backend& be = g.backend();
  Var y = g.output(Shape(dims), false);
  Tensor xq = be.empty({rows, in}, DType::i8), x_scales = be.empty({rows});
  be.quantize_rows(xv.view({rows, in}), 127, xq, x_scales);
  be.gemm_i8(xq, x_scales, w.packed, w.scales, b ? b->value : Tensor(), y->value.view({rows, out}));
  return y;
}

namespace {

// y2 = act(y2) in place.
void activate(Backend& be, const Tensor& y2, Fused act) {
  if (act == Fused::relu) be.relu(y2, y2);
  if (act == Fused::swish) be.swish(y2, y2);
}

// y2 = act(x w^T + b): the GEMM adds the bias and applies the activation as it stores y2.
void packed_then_bias_act(Backend& be, const Tensor& x, const Backend::PackedWeight& w,
                          const Tensor& y2, const Var& b, Fused act) {
  const Activation a = act == Fused::relu    ? Activation::relu
                       : act == Fused::swish ? Activation::swish
                                             : Activation::none;
  be.gemm_packed(x, w, y2, b ? b->value : Tensor(), a);
}

// linear() for inference with a bf16 / f16 weight: x rounded to its dtype for the GEMM.
Var linear_low(Graph& g, const Var& x, const Backend::PackedWeight& packed, const Var& b,
               Fused act) {
  const Tensor& w = packed.weight;
  const Tensor& xv = x->value;
  TX_CHECK(xv.ndim() >= 1 && xv.dim(-1) == w.dim(1), "linear: input ", xv.str(),
           " does not match weight ", w.str(), " (stored [out, in])");
  TX_CHECK(!g.recording({&x, &b}), "linear: ", name_of(w.dtype()),
           " weights are for inference; gradients need the f32 weights");
  const int64_t rows = xv.shape().rows(), in = w.dim(1), out = w.dim(0);
  std::vector<int64_t> dims = xv.shape().dims();
  dims.back() = out;
  Backend& be = g.backend();
  Var y = g.output(Shape(dims), false);
  Tensor X = g.alloc({rows, in}, w.dtype());
  be.cast(xv.view({rows, in}), X);
  Tensor y2 = y->value.view({rows, out});
  packed_then_bias_act(be, X, packed, y2, b, act);
  return y;
}

}  // namespace

Var linear_packed(Graph& g, const Var& x, const Backend::PackedWeight& w, const Var& b, Fused act) {
  const Tensor& xv = x->value;
  TX_CHECK(w.defined() && xv.ndim() >= 1 && xv.dim(-1) == w.weight.dim(1), "linear_packed: input ",
           xv.str(), " does not match weight ", w.weight.str(), " (stored [out, in])");
  TX_CHECK(!g.recording({&x, &b}),
           "linear_packed: packed weights are for inference; gradients need the plain weights");
  std::vector<int64_t> dims = xv.shape().dims();
  dims.back() = w.weight.dim(0);
  Backend& be = g.backend();
  Var y = g.output(Shape(dims), false);
  packed_then_bias_act(be, xv, w, y->value.view({y->value.shape().rows(), dims.back()}), b, act);
  return y;
}

PreparedWeight PreparedWeight::prepare(Backend& be, const Tensor& w, WeightForm form) {
  PreparedWeight p;
  if (form == WeightForm::int8) {
    p.int8 = Int8Weight::quantize(be, w);
  } else if (form == WeightForm::bf16 || form == WeightForm::f16) {
    p.low = be.empty(w.shape(), form == WeightForm::bf16 ? DType::bf16 : DType::f16);
    be.cast(w, p.low);
    p.packed = be.pack_weight(p.low);
  } else {
    p.packed = be.pack_weight(w);
  }
  return p;
}

Var linear(Graph& g, const Var& x, const Var& w, const Var& b, const PreparedWeight& prepared) {
  if (prepared.low.defined()) return linear_low(g, x, prepared.packed, b, Fused::none);
  if (prepared.int8.defined()) return linear_int8(g, x, prepared.int8, b);
  if (prepared.packed.defined()) return linear_packed(g, x, prepared.packed, b);
  return linear(g, x, w, b);
}

Var linear_fused(Graph& g, const Var& x, const Var& w, const Var& b, const PreparedWeight& prepared,
                 Fused act) {
  TX_CHECK(!g.recording({&x, &w, &b}),
           "linear_fused: inference only; with gradients use linear then the activation");
  if (prepared.low.defined()) return linear_low(g, x, prepared.packed, b, act);
  if (!prepared.int8.defined() && prepared.packed.defined())
    return linear_packed(g, x, prepared.packed, b, act);
  Var y = linear(g, x, w, b, prepared);
  activate(g.backend(), y->value, act);
  return y;
}

namespace {
// A tensor [..., R, C] as the 3-D [batch, R, C] that Backend::gemm takes.
Tensor as_batched(const Tensor& t) {
  int64_t batch = 1;
  for (int i = 0; i + 2 < t.ndim(); ++i) batch *= t.dim(i);
  return t.view({batch, t.dim(-2), t.dim(-1)});
}
}  // namespace

Var matmul(Graph& g, const Var& a, bool trans_a, const Var& b, bool trans_b, float alpha) {
  const Tensor& av = a->value;
  const Tensor& bv = b->value;
  TX_CHECK(av.ndim() >= 2 && av.ndim() == bv.ndim(), "matmul: a ", av.str(), " and b ", bv.str(),
           " need the same number (>= 2) of dimensions");
  std::vector<int64_t> lead_a(av.shape().begin(), av.shape().end() - 2);
  std::vector<int64_t> lead_b(bv.shape().begin(), bv.shape().end() - 2);
  TX_CHECK(lead_a == lead_b, "matmul: batch dimensions of a ", av.str(), " and b ", bv.str(),
           " differ");
  const int64_t m = trans_a ? av.dim(-1) : av.dim(-2);
  const int64_t n = trans_b ? bv.dim(-2) : bv.dim(-1);
  std::vector<int64_t> dims = lead_a;
  dims.push_back(m);
  dims.push_back(n);

  Backend& be = g.backend();
  const bool rec = g.recording({&a, &b});
  Var c = g.output(Shape(dims), rec);
  // The operands as they are, or rounded to a reduced gemm_dtype (the backward reads these).
  const Tensor A = g.gemm_operand(as_batched(av)), B = g.gemm_operand(as_batched(bv));
  // Backend::gemm checks the inner dimensions and names the shapes when they differ.
  be.gemm(A, trans_a, B, trans_b, as_batched(c->value), alpha, 0.0f);

  if (rec && g.gemm_dtype() == DType::f32) a->value_needed = b->value_needed = true;
  if (rec)
    g.record([a, b, c, A, B, trans_a, trans_b, alpha](Graph& g) {
      if (!c->grad.defined()) return;
      Backend& be = g.backend();
      const Tensor dc = g.gemm_operand(as_batched(c->grad));
      // With C = op(A) op(B): d op(A) = dC op(B)^T and d op(B) = op(A)^T dC, then undo op.
      if (a->requires_grad) {
        const Graph::GradTarget t = g.grad_target(a);
        const Tensor da = as_batched(t.dx);
        const float beta = t.beta();
        if (!trans_a)
          be.gemm(dc, false, B, !trans_b, da, alpha, beta);  // dA = dC op(B)^T
        else
          be.gemm(B, trans_b, dc, true, da, alpha, beta);  // dA = op(B) dC^T
      }
      if (b->requires_grad) {
        const Graph::GradTarget t = g.grad_target(b);
        const Tensor db = as_batched(t.dx);
        const float beta = t.beta();
        if (!trans_b)
          be.gemm(A, !trans_a, dc, false, db, alpha, beta);  // dB = op(A)^T dC
        else
          be.gemm(dc, true, A, trans_a, db, alpha, beta);  // dB = dC^T op(A)
      }
    });
  return c;
}

}  // namespace tx::ops
