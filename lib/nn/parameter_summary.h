// Parameter counts per component of a model (tx-train --dry-run): embeddings, each stack's
// layers, norms, the output projection.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/parameters.h"

namespace tx::nn {

struct ComponentCount {
  std::string name;        // "encoder.layers", "embed_tokens", "decoder.output_proj", ...
  int64_t parameters = 0;  // elements
  int64_t repeats = 1;     // layers in a stack (parameters is their sum); 1 otherwise
};

// Groups the parameters by component, in the order they first appear: a name's last segment
// (weight, bias, gamma, ...) is dropped, and "<stack>.layers.<i>.*" is one component per
// stack whose `repeats` counts the layers.
std::vector<ComponentCount> parameter_summary(const ParameterSet& params);

}  // namespace tx::nn
