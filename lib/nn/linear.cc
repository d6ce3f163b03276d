#include "nn/linear.h"

namespace tx::nn {

Linear::Linear(ParamScope scope, int64_t in, int64_t out, bool bias)
    : weight_(scope.xavier_uniform("weight", out, in)) {
  if (bias) bias_ = scope.constant("bias", {out}, 0.0f);
}

Linear Linear::concatenated(Backend& be, const std::vector<const Linear*>& parts,
                            ops::WeightForm form) {
  TX_CHECK(!parts.empty(), "Linear::concatenated: no layers given");
  const int64_t in = parts.front()->weight_->value.dim(1);
  const bool bias = static_cast<bool>(parts.front()->bias_);
  int64_t out = 0;
  for (const Linear* part : parts) {
    TX_CHECK(part->weight_->value.dim(1) == in && static_cast<bool>(part->bias_) == bias,
             "Linear::concatenated: the layers must share their input size (", in,
             ") and all have a bias or none");
    out += part->weight_->value.dim(0);
  }
  Linear joined;
  Tensor w = be.empty({out, in});
  Tensor b = bias ? be.empty({out}) : Tensor();
  int64_t first = 0;
  for (const Linear* part : parts) {
    const int64_t rows = part->weight_->value.dim(0);
    be.copy(part->weight_->value, w.slice(first, first + rows));
    if (bias) be.copy(part->bias_->value, b.slice(first, first + rows));
    first += rows;
  }
  joined.weight_ = make_var(w);
  if (bias) joined.bias_ = make_var(b);
  joined.prepare_inference(be, form);
  return joined;
}

}  // namespace tx::nn
