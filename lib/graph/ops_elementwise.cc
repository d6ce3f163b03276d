// Elementwise ops: add, scale, relu, swish, dropout, word dropout, positional encoding, reshape.
#include <algorithm>
#include <vector>

#include "core/rng.h"
#include "graph/ops.h"

namespace tx::ops {

namespace {
// dx (+)= alpha * dy: written, not added, when it is x's first gradient.
void pass_grad(Graph& g, const Tensor& dy, float alpha, const Var& x) {
  const auto [dx, accumulate] = g.grad_target(x);
  if (accumulate)
    g.backend().axpy(alpha, dy, dx);
  else
    g.backend().scale(dy, alpha, dx);
}
}  // namespace

Var add(Graph& g, const Var& a, const Var& b) {
  TX_CHECK(a->value.shape() == b->value.shape(), "add: shapes differ: ", a->value.str(), " vs ",
           b->value.str());
  const bool rec = g.recording({&a, &b});
  Var y = g.output(a->value.shape(), rec);
  g.backend().add(a->value, b->value, y->value);
  if (rec)
    g.record([a, b, y](Graph& g) {
      if (!y->grad.defined()) return;
      // dy passes to both: the first takes y's buffer as its own, the other gets a copy (or
      // adds it). a and b may be the same Var (x + x): then the second use doubles it in place.
      // The copy cannot be shared too: in a residual block y = x + f(x), f's backward still
      // reads its output's gradient while it adds into x's, so one buffer would alias them.
      const bool taken = a->requires_grad && g.adopt_grad(a, y->grad);
      if (a->requires_grad && !taken) pass_grad(g, y->grad, 1.0f, a);
      if (b->requires_grad && (taken || !g.adopt_grad(b, y->grad))) pass_grad(g, y->grad, 1.0f, b);
    });
  return y;
}

Var scale(Graph& g, const Var& x, float alpha) {
  const bool rec = g.recording({&x});
  Var y = g.output(x->value.shape(), rec);
  g.backend().scale(x->value, alpha, y->value);
  if (rec)
    g.record([x, y, alpha](Graph& g) {
      if (y->grad.defined()) pass_grad(g, y->grad, alpha, x);
    });
  return y;
}

Var relu(Graph& g, const Var& x) {
  const bool rec = g.recording({&x});
  Var y = g.output(x->value.shape(), rec);
  g.backend().relu(x->value, y->value);
  if (rec) y->value_needed = true;
  if (rec)
    g.record([x, y](Graph& g) {
      if (!y->grad.defined()) return;
      const auto [dx, accumulate] = g.grad_target(x);
      g.backend().relu_backward(y->grad, y->value, dx, accumulate);
    });
  return y;
}

Var swish(Graph& g, const Var& x) {
  const bool rec = g.recording({&x});
  Var y = g.output(x->value.shape(), rec);
  g.backend().swish(x->value, y->value);
  if (rec) x->value_needed = true;
  if (rec)
    g.record([x, y](Graph& g) {
      if (!y->grad.defined()) return;
      const auto [dx, accumulate] = g.grad_target(x);
      g.backend().swish_backward(y->grad, x->value, dx, accumulate);
    });
  return y;
}

Var dropout(Graph& g, const Var& x, float p) {
  if (!g.training() || p == 0.0f) return x;
  const uint64_t seed = g.rng().seed();
  const uint64_t offset = g.rng().take(static_cast<uint64_t>(x->value.numel()));
  const bool rec = g.recording({&x});
  Var y = g.output(x->value.shape(), rec);
  g.backend().dropout(x->value, p, seed, offset, y->value);
  if (rec)
    g.record([x, y, p, seed, offset](Graph& g) {
      if (!y->grad.defined()) return;
      const auto [dx, accumulate] = g.grad_target(x);
      g.backend().dropout_backward(y->grad, p, seed, offset, dx, accumulate);
    });
  return y;
}

Var relu_dropout(Graph& g, const Var& x, float p) {
  if (!g.training() || p == 0.0f) return relu(g, x);
  const uint64_t seed = g.rng().seed();
  const uint64_t offset = g.rng().take(static_cast<uint64_t>(x->value.numel()));
  const bool rec = g.recording({&x});
  Var y = g.output(x->value.shape(), rec);
  g.backend().relu(x->value, y->value);
  g.backend().dropout(y->value, p, seed, offset, y->value);
  if (rec) y->value_needed = true;
  if (rec)
    g.record([x, y, p](Graph& g) {
      if (!y->grad.defined()) return;
      // dy is this op's alone and dead after it: scaled in place. The same products as
      // dropout_backward's, so the gradient equals the two separate ops' bit for bit.
      g.backend().scale(y->grad, 1.0f / (1.0f - p), y->grad);
      const auto [dx, accumulate] = g.grad_target(x);
      g.backend().relu_backward(y->grad, y->value, dx, accumulate);
    });
  return y;
}

Var drop_rows(Graph& g, const Var& x, float p) {
  if (!g.training() || p == 0.0f) return x;
  const Shape shape = x->value.shape();
  const int64_t D = shape[-1], N = x->value.numel() / std::max<int64_t>(D, 1);
  const uint64_t seed = g.rng().seed();
  const uint64_t offset = g.rng().take(static_cast<uint64_t>(N));
  // Drawn on the host (N numbers, not N * D), as the elementwise dropout draws each element.
  std::vector<int32_t> rows(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i)
    rows[i] = dropout_uniform(seed, offset + static_cast<uint64_t>(i)) >= p
                  ? static_cast<int32_t>(i)
                  : -1;  // gather_rows writes a zero row
  Backend& be = g.backend();
  const Tensor index = be.upload(rows, {N});
  const float keep_scale = 1.0f / (1.0f - p);
  const bool rec = g.recording({&x});
  Var y = g.output(shape, rec);
  be.gather_rows(x->value.view({N, D}), index, y->value.view({N, D}), keep_scale);
  if (rec)
    g.record([x, y, index, keep_scale, N, D](Graph& g) {
      if (y->grad.defined())
        g.backend().scatter_add_rows(y->grad.view({N, D}), index, g.grad(x).view({N, D}),
                                     keep_scale);
    });
  return y;
}

void release(Graph& g, const Var& x) {
  if (!g.grad_enabled() || !x || x->persistent || x->value_needed) return;
  x->drop_value();
}

Var add_positions(Graph& g, const Var& x, int64_t start, math::PositionLayout layout) {
  const bool rec = g.recording({&x});
  Var y = g.output(x->value.shape(), rec);
  g.backend().add_positions(x->value, start, y->value, layout);
  if (rec)
    g.record([x, y](Graph& g) {
      if (y->grad.defined() && !g.adopt_grad(x, y->grad))
        g.backend().axpy(1.0f, y->grad, g.grad(x));
    });
  return y;
}

Var reshape(Graph& g, const Var& x, const Shape& shape) {
  const bool rec = g.recording({&x});
  // Tensor::view checks the element count; the value is shared, not copied.
  Var y = make_var(x->value.view(shape), rec);
  if (rec)
    g.record([x, y](Graph& g) {
      if (!y->grad.defined()) return;
      const Tensor dy = y->grad.view(x->value.shape());
      if (!g.adopt_grad(x, dy)) g.backend().axpy(1.0f, dy, g.grad(x));
    });
  return y;
}

}  // namespace tx::ops
