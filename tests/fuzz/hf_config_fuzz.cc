// Fuzz target: a Hugging Face MarianMTModel directory's config.json (read_huggingface), beside an
// empty model.safetensors: the architecture mapping runs, then the weights are refused.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "formats/model_file.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = tx::fuzz::scratch_dir();
  tx::fuzz::NamedFile config(data, size, dir, "config.json");
  tx::fuzz::NamedFile weights(nullptr, 0, dir, "model.safetensors");
  try {
    tx::formats::read_huggingface(dir);
  } catch (const tx::Error&) {
  }
  return 0;
}
