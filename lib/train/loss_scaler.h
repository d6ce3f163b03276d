// LossScaler: dynamic loss scaling for fp16 training (--precision fp16), as fairseq and Marian
// do it: the loss's gradient is multiplied by the scale before backward, so that small
// gradients survive fp16's range, and the optimiser divides it out again.
//
// An update whose gradients came out non-finite (fp16 overflowed) is skipped and the scale
// halved; after growth_interval clean updates in a row it doubles. Its state is part of the
// checkpoint (TrainingState), so a resumed run scales as the uninterrupted one would.
#pragma once

#include <cstdint>

namespace tx::train {

struct LossScalerOptions {
  bool enabled = false;    // off: scale() is 1 and update() does nothing
  double initial = 32768;  // 2^15
  int64_t growth_interval = 2000;
  // Below this the run is diverging (or overflows fp16 in its forward pass, which no scale
  // mends): update() throws rather than skip forever. fairseq's --min-loss-scale.
  double minimum = 1e-4;
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options = {});

  bool enabled() const { return options_.enabled; }
  // The factor of the loss's gradient (1 when disabled).
  double scale() const { return options_.enabled ? scale_ : 1.0; }
  // Clean updates since the last change of scale.
  int64_t clean_updates() const { return clean_; }

  // After an update: `overflowed` when its gradients were not finite (the update was skipped).
  // Throws tx::Error naming the way out when the scale falls below the minimum.
  void update(bool overflowed);

  // A checkpoint's state (TrainingState::loss_scale, loss_scale_clean).
  void restore(double scale, int64_t clean_updates);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t clean_ = 0;
};

}  // namespace tx::train
