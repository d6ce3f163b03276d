// ExponentialSmoothing: a smoothed copy of the weights kept beside the trained ones (Marian's
// --exponential-smoothing, fairseq's --ema-decay), the weights tx-train validates and saves.
//
// After each update: smoothed = (1 - d) * smoothed + d * weights, with Marian's decay
//   d = max(factor, 1 - (u + 1) / (u + 10)),   u = updates before this one,
// so the first updates follow the weights closely (d = 0.9, 0.82, ...) until d reaches the
// factor. With a reference of R target words per update (Marian's second number) and an
// update of W > R target words, the factor applies as if the update were W / R updates of R:
// beta = (1 - factor)^(W / R), d = max(1 - beta, ...), and u counts in those units.
// The smoothed weights start as the weights; they are in the training checkpoint as
// "ema.<parameter>" tensors and resume exactly.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "nn/parameters.h"

namespace tx::train {

struct SmoothingOptions {
  double factor = 0;            // 0: off; Marian's default when the flag is given alone: 1e-4
  int64_t reference_words = 0;  // target words per update the factor is meant for; 0: any
};

// The decay d of the update after `updates_before` updates, with `target_words` in it.
double smoothing_decay(const SmoothingOptions& options, int64_t updates_before,
                       int64_t target_words);

class ExponentialSmoothing {
 public:
  // `flat_weights` holds every parameter of `params` in order (ParameterSet::make_contiguous).
  ExponentialSmoothing(Backend& be, const nn::ParameterSet& params, Tensor flat_weights,
                       SmoothingOptions options);

  bool enabled() const { return options_.factor > 0; }
  // Sets the smoothed weights to the weights (a fresh run, or a checkpoint without them).
  void reset();
  // After an update that changed the weights.
  void update(int64_t updates_before, int64_t target_words);
  // Exchanges the weights and the smoothed weights in place: validation and saving run on the
  // smoothed ones between two calls.
  void swap();
  // Each parameter's smoothed tensor, named "ema.<parameter>" (the checkpoint's names).
  const std::vector<std::pair<std::string, Tensor>>& tensors() const { return named_; }

 private:
  Backend& be_;
  SmoothingOptions options_;
  Tensor weights_, smoothed_;
  std::vector<std::pair<std::string, Tensor>> named_;
};

}  // namespace tx::train
