#include "nn/layer_norm.h"

namespace tx::nn {

LayerNorm::LayerNorm(ParamScope scope, int64_t d, float eps)
    : weight_(scope.constant("weight", {d}, 1.0f)),
      bias_(scope.constant("bias", {d}, 0.0f)),
      eps_(eps) {}

}  // namespace tx::nn
