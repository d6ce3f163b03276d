// Fuzz target: loading a SentencePiece model file, then encoding and decoding with it.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "data/vocab.h"
#include "fuzz_file.h"
#include "use_vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tx::fuzz::MemFile file(data, size);
  try {
    tx::fuzz::use_vocab(tx::data::Vocab(file.path()), "Ein Mann fährt Fahrrad. ⁇ 123");
  } catch (const tx::Error&) {
  }
  return 0;
}
