// Device: where a tensor's storage lives (host memory or one GPU).
#pragma once

#include <string>

namespace tx {

enum class DeviceType { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const {
    return type == DeviceType::cpu ? "cpu" : "cuda:" + std::to_string(index);
  }
};

}  // namespace tx
