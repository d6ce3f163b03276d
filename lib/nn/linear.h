// Linear: y = x W^T + b, W stored [out, in] (PyTorch/fairseq layout), Xavier-initialised.
#pragma once

#include "graph/ops.h"
#include "nn/param_scope.h"

namespace tx::nn {

class Linear {
 public:
  Linear() = default;
  // Parameters "<scope>.weight" [out, in] and, with bias, "<scope>.bias" [out] (zeros).
  Linear(ParamScope scope, int64_t in, int64_t out, bool bias = true);

  Var forward(Graph& g, const Var& x) const { return ops::linear(g, x, weight_, bias_); }

  const Var& weight() const { return weight_; }
  const Var& bias() const { return bias_; }  // null without bias

 private:
  Var weight_, bias_;
};

}  // namespace tx::nn
