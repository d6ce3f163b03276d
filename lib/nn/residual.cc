#include "nn/residual.h"

namespace tx::nn {

Var residual(Graph& g, const Var& x, const Var& sublayer_out, float p) {
  Var dropped = ops::dropout(g, sublayer_out, p);  // sublayer_out itself when p == 0
  Var sum = ops::add(g, x, dropped);
  ops::release(g, dropped);
  ops::release(g, sublayer_out);
  return sum;
}

}  // namespace tx::nn
