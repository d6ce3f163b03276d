#include "nn/feed_forward.h"

namespace tx::nn {

FeedForward::FeedForward(ParamScope scope, int64_t d_model, int64_t d_ff, float relu_dropout)
    : fc1_(scope.child("fc1"), d_model, d_ff),
      fc2_(scope.child("fc2"), d_ff, d_model),
      relu_dropout_(relu_dropout) {}

Var FeedForward::forward(Graph& g, const Var& x) const {
  Var h = ops::relu(g, fc1_.forward(g, x));
  return fc2_.forward(g, ops::dropout(g, h, relu_dropout_));
}

}  // namespace tx::nn
