// The translation training loss: label-smoothed cross-entropy summed over target tokens.
#pragma once

#include "graph/ops.h"

namespace tx::nn {

// logits [B, T, V], targets i32 [B, T] (the target shifted left; pad_id where there is no
// token). Returns the sum over non-pad tokens as a [1] tensor: dividing by the token count
// (or not) is the trainer's choice. nll, when given, receives -log p(target) per token [B*T]
// (0 at pads) for reporting perplexity. With release_logits, the backward writes the logits'
// gradient over their value (see ops::cross_entropy): for a caller that reads them no more.
Var label_smoothed_loss(Graph& g, const Var& logits, const Tensor& targets, float smoothing,
                        int32_t pad_id, Tensor* nll = nullptr, bool release_logits = false);

}  // namespace tx::nn
