// Fuzz target: loading a SentencePiece model file, then encoding and decoding with it.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "data/vocab.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tx::fuzz::MemFile file(data, size);
  try {
    const tx::data::Vocab vocab(file.path());
    const std::vector<int32_t> ids = vocab.encode("Ein Mann fährt Fahrrad. ⁇ 123");
    vocab.decode(ids);
    std::vector<int32_t> all;
    for (int32_t id = 0; id < vocab.size() && id < 64; ++id) all.push_back(id);
    vocab.decode(all);
  } catch (const tx::Error&) {
  }
  return 0;
}
