// Adam: the paper's optimiser over a ParameterSet, with global gradient-norm clipping.
//
// Per parameter it keeps the first and second moment estimates (m, v) as device tensors and
// calls Backend::adam_update once per parameter per step. Clipping and loss normalisation do
// not touch the gradients: both fold into adam_update's grad_scale, so a step reads each
// gradient twice: once for the norm (always: a non-finite norm skips the update, clipping or
// not) and once for the update.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "nn/parameters.h"

namespace tx::train {

struct AdamOptions {
  // Paper section 5.3: beta1 0.9, beta2 0.98, epsilon 1e-9.
  float beta1 = 0.9f;
  float beta2 = 0.98f;
  float eps = 1e-9f;
  float weight_decay = 0.0f;  // decoupled (AdamW); 0 = the paper's Adam
  // Scale the gradients down so their global L2 norm is at most clip_norm; 0 = no clipping.
  float clip_norm = 0.0f;
};

// What one step did, for the training log.
struct AdamStepInfo {
  // The global L2 norm of the gradients after `grad_scale` and before clipping.
  double grad_norm = 0;
  float applied_scale = 1;  // grad_scale times the clipping factor: what adam_update used
  bool clipped = false;
  // The norm was inf or NaN: nothing was updated and the step count did not advance.
  bool skipped = false;
};

class Adam {
 public:
  // m and v start at zero, one pair per parameter of `params`, which must outlive the Adam.
  Adam(Backend& be, const nn::ParameterSet& params, AdamOptions options = {});

  // One update with learning rate lr from the gradients accumulated since zero_grad.
  // grad_scale multiplies them first (1 / tokens for a token-normalised loss, or 1 / loss
  // scale); clipping applies to the scaled gradients. Parameters with no gradient yet are
  // left alone (as PyTorch does), their m and v included. Does not zero the gradients.
  AdamStepInfo step(float lr, float grad_scale = 1.0f);

  // The global L2 norm of grad_scale * gradients: one squared_norm per gradient into a slot
  // of one small device tensor, downloaded once, summed in double.
  double grad_norm(float grad_scale = 1.0f);

  // From now on every parameter's value is the matching slice of `values` and its gradient of
  // `grads` (both f32 [params.numel()], in params() order: ParameterSet::make_contiguous and
  // UpdateStep's flat gradients): each step is then one squared norm and one adam_update over
  // the whole buffers, instead of one of each per parameter (two kernel launches on a GPU
  // instead of ~400 for a Transformer). The same update, element for element; the norm is one
  // sum instead of a sum of per-parameter sums, so it may differ in the last bits (clipping
  // reads it). Checked at every step: a parameter or gradient moved elsewhere is an error.
  void set_flat(const Tensor& values, const Tensor& grads);

  // Updates done so far; the next update's bias correction uses steps() + 1.
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps);  // restoring a checkpoint

  const AdamOptions& options() const { return options_; }
  void set_options(const AdamOptions& options);

  const nn::ParameterSet& params() const { return params_; }
  // The moments of parameter i (in params().items() order): device tensors of its shape.
  const Tensor& m(size_t i) const { return m_[i]; }
  const Tensor& v(size_t i) const { return v_[i]; }

 private:
  // Squared norms of the defined gradients into slots of norms_; returns the sum (unscaled).
  double squared_grad_norm();
  void check_params() const;
  void check_flat() const;

  Backend& be_;
  const nn::ParameterSet& params_;
  AdamOptions options_;
  std::vector<Tensor> m_, v_;  // views of m_all_, v_all_
  Tensor m_all_, v_all_;
  Tensor flat_values_, flat_grads_;  // set_flat's; undefined: one call per parameter
  Tensor norms_;                     // f32 [params.size()]: slot i receives |grad_i|^2
  int64_t steps_ = 0;
};

}  // namespace tx::train
