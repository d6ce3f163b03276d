// residual: x + Dropout(Sublayer(x)), the paper's residual connection (section 5.4).
#pragma once

#include "graph/ops.h"
#include "nn/layer_norm.h"

namespace tx::nn {

// x + dropout(sublayer_out, p). The sublayer's output and its dropped copy are read by no
// backward, so they are freed once summed: a layer keeps only what its gradients need.
Var residual(Graph& g, const Var& x, const Var& sublayer_out, float p);
// norm(x + dropout(sublayer_out, p)): a post-norm sublayer's end. At inference (no gradient, no
// dropout) one operator that never writes the sum (LayerNorm::forward_residual).
Var residual_norm(Graph& g, const LayerNorm& norm, const Var& x, const Var& sublayer_out, float p);

}  // namespace tx::nn
