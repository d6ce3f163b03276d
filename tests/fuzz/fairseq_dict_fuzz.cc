// Fuzz target: fairseq's dictionaries (dict.LANG.txt), loaded and used to encode and decode.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "data/vocab.h"
#include "fuzz_file.h"
#include "use_vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tx::fuzz::NamedFile file(data, size, tx::fuzz::scratch_dir(), "dict.en.txt");
  try {
    tx::fuzz::use_vocab(tx::data::Vocab::fairseq(file.path()), "▁Ein ▁Mann </s> <unk> fährt");
  } catch (const tx::Error&) {
  }
  return 0;
}
