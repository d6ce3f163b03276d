#include "nn/loss.h"

namespace tx::nn {

Var label_smoothed_loss(Graph& g, const Var& logits, const Tensor& targets, float smoothing,
                        int32_t pad_id, Tensor* nll, bool release_logits) {
  const Tensor& lv = logits->value;
  TX_CHECK(
      targets.defined() && targets.dtype() == DType::i32 && targets.numel() == lv.shape().rows(),
      "label_smoothed_loss: targets ", targets.str(), " must be i32 with one id per row of ",
      "logits ", lv.str());
  Var losses = ops::cross_entropy(g, logits, targets.view({targets.numel()}), smoothing, pad_id,
                                  nll, release_logits);
  return ops::sum(g, losses);
}

}  // namespace tx::nn
