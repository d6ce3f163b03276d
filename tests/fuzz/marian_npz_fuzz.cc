// Fuzz target: reading a Marian model.npz (zip, .npy headers, its model.yml, the name mapping).
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "formats/model_file.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tx::fuzz::MemFile file(data, size);
  try {
    tx::formats::read_marian(file.path());
  } catch (const tx::Error&) {
  }
  return 0;
}
