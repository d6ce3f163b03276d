// LayerNorm: normalises the last dimension, then a learned gain ("weight") and bias.
#pragma once

#include "graph/ops.h"
#include "nn/param_scope.h"

namespace tx::nn {

class LayerNorm {
 public:
  LayerNorm() = default;
  // Parameters "<scope>.weight" (ones) and "<scope>.bias" (zeros), both [d].
  LayerNorm(ParamScope scope, int64_t d, float eps = 1e-5f);

  Var forward(Graph& g, const Var& x) const { return ops::layer_norm(g, x, weight_, bias_, eps_); }
  // forward(g, x + sublayer) for inference, one operator (ops::residual_layer_norm).
  Var forward_residual(Graph& g, const Var& x, const Var& sublayer) const {
    return ops::residual_layer_norm(g, x, sublayer, weight_, bias_, eps_);
  }

  const Var& weight() const { return weight_; }
  const Var& bias() const { return bias_; }

 private:
  Var weight_, bias_;
  float eps_ = 1e-5f;
};

}  // namespace tx::nn
