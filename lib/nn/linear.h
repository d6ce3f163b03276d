// Linear: y = x W^T + b, W stored [out, in] (PyTorch/fairseq layout), Xavier-initialised.
#pragma once

#include <vector>

#include "graph/ops.h"
#include "nn/param_scope.h"

namespace tx::nn {

class Linear {
 public:
  Linear() = default;
  // Parameters "<scope>.weight" [out, in] and, with bias, "<scope>.bias" [out] (zeros).
  Linear(ParamScope scope, int64_t in, int64_t out, bool bias = true);

  Var forward(Graph& g, const Var& x) const { return ops::linear(g, x, weight_, bias_, prepared_); }
  // act(forward(g, x)) for inference: bias and activation in one pass (ops::linear_fused).
  Var forward_fused(Graph& g, const Var& x, ops::Fused act) const {
    return ops::linear_fused(g, x, weight_, bias_, prepared_, act);
  }
  // Inference only from here on (forward records no gradient; call once the weights are
  // final): the weight in `form` (ops::PreparedWeight): quantised to int8 (--int8), rounded to
  // bf16 / f16 (--precision), or packed for the backend's GEMM (Backend::pack_weight).
  void prepare_inference(Backend& be, ops::WeightForm form) {
    prepared_ = ops::PreparedWeight::prepare(be, weight_->value, form);
  }

  // Inference: one layer whose output is the outputs of `parts` side by side (their weights'
  // rows and biases concatenated, in order; all with a bias or none), prepared as above. One
  // GEMM of N = sum of outs instead of one per part: the same products, fewer and larger calls.
  static Linear concatenated(Backend& be, const std::vector<const Linear*>& parts,
                             ops::WeightForm form);

  const Var& weight() const { return weight_; }
  const Var& bias() const { return bias_; }  // null without bias

 private:
  Var weight_, bias_;
  ops::PreparedWeight prepared_;  // empty until prepare_inference
};

}  // namespace tx::nn
