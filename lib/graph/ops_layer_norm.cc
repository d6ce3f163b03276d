// LayerNorm over the last dimension.
#include "graph/ops.h"

namespace tx::ops {

Var layer_norm(Graph& g, const Var& x, const Var& gamma, const Var& beta, float eps) {
  const Tensor& xv = x->value;
  TX_CHECK(xv.ndim() >= 1, "layer_norm: x ", xv.str(), " needs at least one dimension");
  const bool rec = g.recording({&x, &gamma, &beta});
  Var y = g.output(xv.shape(), rec);
  // The statistics are saved for the backward, which then need not recompute them.
  Tensor mean = g.alloc({xv.shape().rows()});
  Tensor rstd = g.alloc({xv.shape().rows()});
  g.backend().layer_norm(xv, gamma->value, beta->value, eps, y->value, mean, rstd);
  if (rec) x->value_needed = true;
  if (rec)
    g.record([x, gamma, beta, y, mean, rstd](Graph& g) {
      if (!y->grad.defined()) return;
      // The operator writes all three gradients; those nobody wants go to scratch. dx is
      // written rather than added when it is x's first gradient (or scratch).
      auto grad_or_scratch = [&g](const Var& v) {
        return v->requires_grad ? g.grad(v) : g.alloc(v->value.shape());
      };
      const auto [dx, accumulate] =
          x->requires_grad ? g.grad_target(x) : Graph::GradTarget{g.alloc(x->value.shape()), false};
      g.backend().layer_norm_backward(y->grad, x->value, gamma->value, mean, rstd, dx,
                                      grad_or_scratch(gamma), grad_or_scratch(beta), accumulate);
    });
  return y;
}

Var residual_layer_norm(Graph& g, const Var& x, const Var& sublayer, const Var& gamma,
                        const Var& beta, float eps) {
  TX_CHECK(!g.recording({&x, &sublayer, &gamma, &beta}),
           "residual_layer_norm: inference only; with gradients use add then layer_norm");
  Var y = g.output(x->value.shape(), false);
  g.backend().residual_layer_norm(x->value, sublayer->value, gamma->value, beta->value, eps,
                                  y->value);
  return y;
}

}  // namespace tx::ops
