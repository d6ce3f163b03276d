#include "nn/feed_forward.h"

namespace tx::nn {

FeedForward::FeedForward(ParamScope scope, int64_t d_model, int64_t d_ff, float relu_dropout,
                         io::Activation activation)
    : fc1_(scope.child("fc1"), d_model, d_ff),
      fc2_(scope.child("fc2"), d_ff, d_model),
      relu_dropout_(relu_dropout),
      activation_(activation) {}

Var FeedForward::forward(Graph& g, const Var& x) const {
  // Inference: the activation with fc1's bias, one pass over [rows, d_ff] instead of two.
  if (g.plain_forward(relu_dropout_))
    return fc2_.forward(
        g, fc1_.forward_fused(
               g, x, activation_ == io::Activation::swish ? ops::Fused::swish : ops::Fused::relu));
  if (activation_ == io::Activation::swish) {
    Var hidden = fc1_.forward(g, x);
    Var h = ops::swish(g, hidden);  // its backward reads hidden
    Var dropped = ops::dropout(g, h, relu_dropout_);
    if (dropped != h) ops::release(g, h);
    return fc2_.forward(g, dropped);
  }
  Var hidden = fc1_.forward(g, x);
  Var h = ops::relu_dropout(g, hidden, relu_dropout_);
  ops::release(g, hidden);  // [rows, d_ff]: the largest activation of a layer, read by no backward
  return fc2_.forward(g, h);
}

}  // namespace tx::nn
