// Fuzz target: a converted fairseq model directory's fairseq.json (read_fairseq), beside an
// empty model.safetensors and two dictionaries: the architecture mapping runs, then the
// weights are refused.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "formats/model_file.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = tx::fuzz::scratch_dir();
  static const uint8_t kDict[] = "der 10\nHaus 7\n";
  tx::fuzz::NamedFile options(data, size, dir, "fairseq.json");
  tx::fuzz::NamedFile weights(nullptr, 0, dir, "model.safetensors");
  tx::fuzz::NamedFile source(kDict, sizeof kDict - 1, dir, "dict.en.txt");
  tx::fuzz::NamedFile target(kDict, sizeof kDict - 1, dir, "dict.de.txt");
  try {
    tx::formats::read_fairseq(dir);
  } catch (const tx::Error&) {
  }
  return 0;
}
