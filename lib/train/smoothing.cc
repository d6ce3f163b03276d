#include "train/smoothing.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tx::train {

double smoothing_decay(const SmoothingOptions& o, int64_t updates_before, int64_t target_words) {
  double beta = 1.0 - o.factor;
  double u = static_cast<double>(updates_before);
  if (o.reference_words > 0 && target_words > o.reference_words) {
    const double ratio = static_cast<double>(target_words) / static_cast<double>(o.reference_words);
    beta = std::pow(beta, ratio);
    u = std::floor(u * ratio);
  }
  return std::max(1.0 - beta, 1.0 - (u + 1.0) / (u + 10.0));
}

ExponentialSmoothing::ExponentialSmoothing(Backend& be, const nn::ParameterSet& params,
                                           Tensor flat_weights, SmoothingOptions options)
    : be_(be), options_(options), weights_(std::move(flat_weights)) {
  TX_CHECK(weights_.numel() == params.numel(), "exponential smoothing: the flat weights hold ",
           weights_.numel(), " numbers but the parameters ", params.numel());
  if (!enabled()) return;
  smoothed_ = be_.empty({weights_.numel()});
  int64_t offset = 0;
  for (const auto& [name, var] : params.items()) {
    const Tensor& w = var->value;
    named_.emplace_back("ema." + name, smoothed_.slice(offset, offset + w.numel()).view(w.shape()));
    offset += w.numel();
  }
  reset();
}

void ExponentialSmoothing::reset() {
  if (enabled()) be_.copy(weights_, smoothed_);
}

void ExponentialSmoothing::update(int64_t updates_before, int64_t target_words) {
  if (!enabled()) return;
  const auto d = static_cast<float>(smoothing_decay(options_, updates_before, target_words));
  be_.scale(smoothed_, 1.0f - d, smoothed_);
  be_.axpy(d, weights_, smoothed_);
}

void ExponentialSmoothing::swap() {
  if (!enabled()) return;
  const Tensor held = be_.empty({weights_.numel()});
  be_.copy(weights_, held);
  be_.copy(smoothed_, weights_);
  be_.copy(held, smoothed_);
}

}  // namespace tx::train
