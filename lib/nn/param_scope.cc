#include "nn/param_scope.h"

#include <cmath>
#include <vector>

namespace tx::nn {

ParamScope ParamScope::child(const std::string& name) const {
  ParamScope c = *this;
  c.prefix_ = full_name(name);
  return c;
}

ParamScope ParamScope::scaled(float gain) const {
  ParamScope c = *this;
  c.gain_ *= gain;
  return c;
}

ParamScope ParamScope::with_depth_scaling(bool on) const {
  ParamScope c = *this;
  c.depth_scaling_ = on;
  return c;
}

std::string ParamScope::full_name(const std::string& leaf) const {
  return prefix_.empty() ? leaf : prefix_ + "." + leaf;
}

Var ParamScope::xavier_uniform(const std::string& name, int64_t out, int64_t in) {
  if (!rng_) return params_->add(full_name(name), be_->empty({out, in}));
  const float bound = gain_ * std::sqrt(6.0f / static_cast<float>(in + out));
  std::vector<float> host(static_cast<size_t>(out * in));
  for (float& v : host) v = (2.0f * rng_->uniform() - 1.0f) * bound;
  return params_->add(full_name(name), be_->upload(host, {out, in}));
}

Var ParamScope::normal(const std::string& name, const Shape& shape, float stddev) {
  if (!rng_) return params_->add(full_name(name), be_->empty(shape));
  std::vector<float> host(static_cast<size_t>(shape.numel()));
  for (float& v : host) v = stddev * rng_->normal();
  return params_->add(full_name(name), be_->upload(host, shape));
}

Var ParamScope::constant(const std::string& name, const Shape& shape, float value) {
  Tensor t = be_->empty(shape);
  if (rng_) be_->fill(t, value);
  return params_->add(full_name(name), t);
}

}  // namespace tx::nn
