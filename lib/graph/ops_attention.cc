// Attention ops: masked softmax and the head split/merge transposes.
#include "graph/ops.h"

namespace tx::ops {

Var softmax(Graph& g, const Var& x, float scale, const Tensor& key_lengths, bool causal) {
  const bool rec = g.recording({&x});
  Var y = g.output(x->value.shape(), rec);
  g.backend().softmax(x->value, scale, key_lengths, causal, y->value);
  // Masked keys have y == 0, so softmax_backward gives them no gradient without the mask.
  if (rec) y->value_needed = true;
  if (rec)
    g.record([x, y, scale](Graph& g) {
      if (!y->grad.defined()) return;
      const auto [dx, accumulate] = g.grad_target(x);
      g.backend().softmax_backward(y->value, y->grad, scale, dx, accumulate);
    });
  return y;
}

Var split_heads(Graph& g, const Var& x, int heads) {
  const Tensor& xv = x->value;
  TX_CHECK(xv.ndim() == 3 && heads > 0 && xv.dim(2) % heads == 0, "split_heads: x ", xv.str(),
           " must be [batch, time, d_model] with d_model divisible by heads=", heads);
  const bool rec = g.recording({&x});
  Var y = g.output({xv.dim(0), heads, xv.dim(1), xv.dim(2) / heads}, rec);
  g.backend().split_heads(xv, heads, y->value);
  if (rec)
    g.record([x, y](Graph& g) {
      if (!y->grad.defined()) return;
      const auto [dx, accumulate] = g.grad_target(x);
      g.backend().merge_heads(y->grad, dx, accumulate);
    });
  return y;
}

Var merge_heads(Graph& g, const Var& x) {
  const Tensor& xv = x->value;
  TX_CHECK(xv.ndim() == 4, "merge_heads: x ", xv.str(), " must be [batch, heads, time, d_head]");
  const int heads = static_cast<int>(xv.dim(1));
  const bool rec = g.recording({&x});
  Var y = g.output({xv.dim(0), xv.dim(2), heads * xv.dim(3)}, rec);
  g.backend().merge_heads(xv, y->value);
  if (rec)
    g.record([x, y, heads](Graph& g) {
      if (!y->grad.defined()) return;
      const auto [dx, accumulate] = g.grad_target(x);
      g.backend().split_heads(y->grad, heads, dx, accumulate);
    });
  return y;
}

}  // namespace tx::ops
