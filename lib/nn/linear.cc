#include "nn/linear.h"

namespace tx::nn {

Linear::Linear(ParamScope scope, int64_t in, int64_t out, bool bias)
    : weight_(scope.xavier_uniform("weight", out, in)) {
  if (bias) bias_ = scope.constant("bias", {out}, 0.0f);
}

}  // namespace tx::nn
