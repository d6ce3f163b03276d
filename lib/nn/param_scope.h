// ParamScope: where a module creates its parameters — the set, the name prefix, the init RNG.
#pragma once

#include <string>

#include "backend/backend.h"
#include "core/rng.h"
#include "nn/parameters.h"

namespace tx::nn {

// Values are generated on the host from the seeded Rng and uploaded, so a seed gives the
// same model on every backend.
class ParamScope {
 public:
  ParamScope(Backend& be, ParameterSet& params, Rng& rng, std::string prefix = "")
      : be_(&be), params_(&params), rng_(&rng), prefix_(std::move(prefix)) {}
  // Parameters left uninitialised, for a model whose every parameter a checkpoint then
  // overwrites (load_model checks that the file has them all): drawing 60M random numbers
  // for a transformer-big only to discard them costs a translation's start-up a second.
  static ParamScope for_loading(Backend& be, ParameterSet& params) {
    return ParamScope(be, params, nullptr, "");
  }

  // The scope of a submodule: prefix "a.b" + "c" -> "a.b.c".
  ParamScope child(const std::string& name) const;
  // This scope with Glorot's range multiplied by `gain` (its children inherit it).
  ParamScope scaled(float gain) const;
  // Marian's --transformer-depth-scaling (DS-Init, Zhang et al. 2019): the model built in this
  // scope draws layer l's Glorot weights (l = 1, 2, ... in each stack) in 1/sqrt(l) of the
  // range, so that a deep post-norm stack starts closer to the identity.
  ParamScope with_depth_scaling(bool on) const;
  bool depth_scaling() const { return depth_scaling_; }
  std::string full_name(const std::string& leaf) const;

  // Weight [out, in], uniform in +-gain * sqrt(6 / (in + out)) (Glorot and Bengio, 2010).
  Var xavier_uniform(const std::string& name, int64_t out, int64_t in);
  // Normal(0, stddev) (embeddings).
  Var normal(const std::string& name, const Shape& shape, float stddev);
  // Every element `value` (biases 0, LayerNorm gain 1).
  Var constant(const std::string& name, const Shape& shape, float value);

  Backend& backend() const { return *be_; }

 private:
  ParamScope(Backend& be, ParameterSet& params, Rng* rng, std::string prefix)
      : be_(&be), params_(&params), rng_(rng), prefix_(std::move(prefix)) {}

  Backend* be_;
  ParameterSet* params_;
  Rng* rng_;  // null: for_loading
  std::string prefix_;
  float gain_ = 1.0f;
  bool depth_scaling_ = false;
};

}  // namespace tx::nn
