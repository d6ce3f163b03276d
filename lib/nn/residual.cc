#include "nn/residual.h"

namespace tx::nn {

Var residual(Graph& g, const Var& x, const Var& sublayer_out, float p) {
  Var dropped = ops::dropout(g, sublayer_out, p);  // sublayer_out itself when p == 0
  Var sum = ops::add(g, x, dropped);
  ops::release(g, dropped);
  ops::release(g, sublayer_out);
  return sum;
}

Var residual_norm(Graph& g, const LayerNorm& norm, const Var& x, const Var& sublayer_out, float p) {
  if (g.plain_forward(p)) return norm.forward_residual(g, x, sublayer_out);
  return norm.forward(g, residual(g, x, sublayer_out, p));
}

}  // namespace tx::nn
