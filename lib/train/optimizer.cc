#include "train/optimizer.h"

#include <cmath>

namespace tx::train {
namespace {

void validate(const AdamOptions& o) {
  TX_CHECK(o.beta1 >= 0 && o.beta1 < 1, "Adam: beta1 = ", o.beta1, " must lie in [0, 1)");
  TX_CHECK(o.beta2 >= 0 && o.beta2 < 1, "Adam: beta2 = ", o.beta2, " must lie in [0, 1)");
  TX_CHECK(o.eps > 0, "Adam: eps = ", o.eps, " must be positive");
  TX_CHECK(o.weight_decay >= 0, "Adam: weight_decay = ", o.weight_decay, " must be >= 0");
  TX_CHECK(o.clip_norm >= 0, "Adam: clip_norm = ", o.clip_norm, " must be >= 0 (0 = no clipping)");
}

}  // namespace

Adam::Adam(Backend& be, const nn::ParameterSet& params, AdamOptions options)
    : be_(be), params_(params), options_(options) {
  validate(options_);
  for (const auto& item : params_.items()) {
    m_.push_back(be_.zeros(item.second->value.shape()));
    v_.push_back(be_.zeros(item.second->value.shape()));
  }
  // Slots of parameters without a gradient are never written: zero keeps them out of the sum.
  norms_ = be_.zeros({static_cast<int64_t>(params_.size())});
}

void Adam::set_steps(int64_t steps) {
  TX_CHECK(steps >= 0, "Adam: step count ", steps, " must be >= 0");
  steps_ = steps;
}

void Adam::set_options(const AdamOptions& options) {
  validate(options);
  options_ = options;
}

void Adam::check_params() const {
  TX_CHECK(params_.size() == m_.size(), "Adam: the parameter set grew from ", m_.size(), " to ",
           params_.size(), " parameters after the optimiser was made; build the model first");
}

double Adam::squared_grad_norm() {
  check_params();
  const auto& items = params_.items();
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].second->grad.defined())
      be_.squared_norm(items[i].second->grad, norms_.slice(int64_t(i), int64_t(i) + 1));
  // One download for all parameters: a transfer (and sync) per parameter would cost more than
  // the reductions on a GPU.
  std::vector<float> sq = be_.download<float>(norms_);
  double total = 0;
  for (size_t i = 0; i < sq.size(); ++i)
    if (items[i].second->grad.defined()) total += sq[i];
  return total;
}

double Adam::grad_norm(float grad_scale) {
  return std::sqrt(squared_grad_norm()) * std::abs(double(grad_scale));
}

AdamStepInfo Adam::step(float lr, float grad_scale) {
  TX_CHECK(std::isfinite(lr) && lr >= 0, "Adam: learning rate ", lr, " must be >= 0");
  TX_CHECK(std::isfinite(grad_scale), "Adam: grad_scale ", grad_scale, " must be finite");
  check_params();
  AdamStepInfo info;
  info.applied_scale = grad_scale;
  // The norm is measured even without clipping: an overflowed or NaN gradient must skip the
  // update rather than poison every weight (one reduction per parameter, one download).
  info.grad_norm = grad_norm(grad_scale);
  if (!std::isfinite(info.grad_norm)) {
    info.skipped = true;
    return info;
  }
  if (options_.clip_norm > 0) {
    if (info.grad_norm > options_.clip_norm) {
      info.clipped = true;
      info.applied_scale =
          static_cast<float>(double(grad_scale) * (options_.clip_norm / info.grad_norm));
    }
  }
  Backend::AdamParams p;
  p.lr = lr;
  p.beta1 = options_.beta1;
  p.beta2 = options_.beta2;
  p.eps = options_.eps;
  p.weight_decay = options_.weight_decay;
  p.step = steps_ + 1;
  p.grad_scale = info.applied_scale;
  const auto& items = params_.items();
  for (size_t i = 0; i < items.size(); ++i) {
    const Var& w = items[i].second;
    if (w->grad.defined()) be_.adam_update(w->value, w->grad, m_[i], v_[i], p);
  }
  ++steps_;
  return info;
}

}  // namespace tx::train
