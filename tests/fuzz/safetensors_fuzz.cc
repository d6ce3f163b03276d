// Fuzz target: the safetensors reader (length prefix, JSON header, tensor table, offsets) and
// the model config JSON a tx model carries in its metadata.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz_file.h"
#include "io/model_config.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tx::fuzz::MemFile file(data, size);
  try {
    tx::io::SafetensorsReader reader(file.path());
    for (const tx::io::TensorEntry& e : reader.entries()) reader.read(e);
    const auto it = reader.metadata().find(tx::io::kModelConfigKey);
    if (it != reader.metadata().end()) tx::io::ModelConfig::from_json_string(it->second);
  } catch (const tx::Error&) {
    // A clear error is the right answer to bad bytes; anything else is a finding.
  }
  return 0;
}
