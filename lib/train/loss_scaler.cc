#include "train/loss_scaler.h"

#include <cmath>

#include "core/error.h"

namespace tx::train {

LossScaler::LossScaler(LossScalerOptions options) : options_(options), scale_(options.initial) {
  TX_CHECK(std::isfinite(options_.initial) && options_.initial > 0 && options_.growth_interval > 0,
           "loss scaler: the initial scale (", options_.initial, ") and the growth interval (",
           options_.growth_interval, ") must be positive");
}

void LossScaler::update(bool overflowed) {
  if (!options_.enabled) return;
  if (!overflowed) {
    if (++clean_ >= options_.growth_interval) {
      scale_ *= 2;
      clean_ = 0;
    }
    return;
  }
  scale_ /= 2;
  clean_ = 0;
  TX_CHECK(scale_ >= options_.minimum, "--precision fp16: the loss scale fell below ",
           options_.minimum,
           " after updates whose gradients overflowed in a row: the loss diverges or the model "
           "overflows fp16 in its forward pass; train with --precision fp32, or bf16 (fp32's "
           "range) where the device has it, or lower the learning rate");
}

void LossScaler::restore(double scale, int64_t clean_updates) {
  TX_CHECK(std::isfinite(scale) && scale > 0 && clean_updates >= 0,
           "loss scaler: a checkpoint's scale ", scale, " and clean-update count ", clean_updates,
           " must be positive and non-negative; the checkpoint is damaged");
  scale_ = scale;
  clean_ = clean_updates;
}

}  // namespace tx::train
