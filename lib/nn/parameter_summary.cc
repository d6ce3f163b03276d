#include "nn/parameter_summary.h"

#include <set>

namespace tx::nn {

std::vector<ComponentCount> parameter_summary(const ParameterSet& params) {
  std::vector<ComponentCount> out;
  std::vector<std::set<std::string>> layers;  // per component: the layer indices seen
  for (const auto& [name, var] : params.items()) {
    std::string component = name.substr(0, name.rfind('.'));
    std::string layer;
    const std::string marker = ".layers.";
    const size_t at = name.find(marker);
    if (at != std::string::npos) {
      component = name.substr(0, at + marker.size() - 1);
      const size_t begin = at + marker.size();
      layer = name.substr(begin, name.find('.', begin) - begin);
    }
    size_t i = 0;
    while (i < out.size() && out[i].name != component) ++i;
    if (i == out.size()) {
      out.push_back({component, 0, 0});
      layers.emplace_back();
    }
    out[i].parameters += var->value.numel();
    layers[i].insert(layer);
  }
  for (size_t i = 0; i < out.size(); ++i) out[i].repeats = static_cast<int64_t>(layers[i].size());
  return out;
}

}  // namespace tx::nn
