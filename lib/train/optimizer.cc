#include "train/optimizer.h"

#include <algorithm>
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
  // One buffer each, so that set_flat's step updates them in one call.
  m_all_ = be_.zeros({params_.numel()});
  v_all_ = be_.zeros({params_.numel()});
  int64_t offset = 0;
  for (const auto& item : params_.items()) {
    const Tensor& w = item.second->value;
    m_.push_back(m_all_.slice(offset, offset + w.numel()).view(w.shape()));
    v_.push_back(v_all_.slice(offset, offset + w.numel()).view(w.shape()));
    offset += w.numel();
  }
  // Slots of parameters without a gradient are never written: zero keeps them out of the sum.
  norms_ = be_.zeros({std::max<int64_t>(1, static_cast<int64_t>(params_.size()))});
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

void Adam::set_flat(const Tensor& values, const Tensor& grads) {
  TX_CHECK(values.shape() == Shape{params_.numel()} && grads.shape() == Shape{params_.numel()},
           "Adam::set_flat: values ", values.str(), " and gradients ", grads.str(),
           " must both be [", params_.numel(), "], the parameters' element count");
  flat_values_ = values;
  flat_grads_ = grads;
  check_flat();
}

void Adam::check_flat() const {
  const auto* value = static_cast<const char*>(flat_values_.raw());
  const auto* grad = static_cast<const char*>(flat_grads_.raw());
  for (const auto& [name, w] : params_.items()) {
    TX_CHECK(w->value.raw() == value && w->grad.defined() && w->grad.raw() == grad,
             "Adam: parameter '", name,
             "' or its gradient is no longer its slice of the buffers given to set_flat");
    value += w->value.nbytes();
    grad += w->grad.nbytes();
  }
}

double Adam::squared_grad_norm() {
  check_params();
  if (flat_values_.defined()) {
    check_flat();
    be_.squared_norm(flat_grads_, norms_.slice(0, 1));
    return be_.download<float>(norms_.slice(0, 1))[0];
  }
  const auto& items = params_.items();
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].second->grad.defined())
      be_.squared_norm(items[i].second->grad, norms_.slice(int64_t(i), int64_t(i) + 1));
  // One download for all parameters: a transfer (and sync) per parameter would cost more than
  // the reductions on a GPU.
  std::vector<float> sq = be_.download<float>(norms_);
  double total = 0;
  for (size_t i = 0; i < items.size(); ++i)
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
  if (flat_values_.defined()) {
    be_.adam_update(flat_values_, flat_grads_, m_all_, v_all_, p);
  } else {
    const auto& items = params_.items();
    for (size_t i = 0; i < items.size(); ++i) {
      const Var& w = items[i].second;
      if (w->grad.defined()) be_.adam_update(w->value, w->grad, m_[i], v_[i], p);
    }
  }
  ++steps_;
  return info;
}

}  // namespace tx::train
