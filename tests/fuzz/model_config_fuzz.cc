// Fuzz target: the model config JSON (presets overridden by keys, then validated).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "io/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const tx::io::ModelConfig c = tx::io::ModelConfig::from_json_string(text);
    // What validated must survive its own round trip.
    if (tx::io::ModelConfig::from_json_string(c.to_json_string()) != c) __builtin_trap();
  } catch (const tx::Error&) {
  }
  return 0;
}
