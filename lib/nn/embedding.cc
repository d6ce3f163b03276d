#include "nn/embedding.h"

#include <cmath>

namespace tx::nn {

Embedding::Embedding(ParamScope scope, int64_t vocab, int64_t d_model)
    : weight_(
          scope.normal("weight", {vocab, d_model}, 1.0f / std::sqrt(static_cast<float>(d_model)))),
      vocab_(vocab),
      d_model_(d_model) {}

Var Embedding::forward(Graph& g, const Tensor& ids, float scale) const {
  return ops::embedding(g, weight_, ids, scale);
}

}  // namespace tx::nn
