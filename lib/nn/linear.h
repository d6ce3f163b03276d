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

  Var forward(Graph& g, const Var& x) const {
    return int8_.defined() ? ops::linear_int8(g, x, int8_, bias_)
                           : ops::linear(g, x, weight_, bias_);
  }
  // Quantises the weight for int8 inference (tx-translate --int8): forward uses it from then on.
  void quantize_int8(Backend& be) { int8_ = ops::Int8Weight::quantize(be, weight_->value); }

  const Var& weight() const { return weight_; }
  const Var& bias() const { return bias_; }  // null without bias

 private:
  Var weight_, bias_;
  ops::Int8Weight int8_;  // empty unless quantize_int8 was called
};

}  // namespace tx::nn
