// Fuzz target: Marian's token-list vocabularies (.yml, and .json as Hugging Face's vocab.json),
// loaded and used to encode and decode. The first byte picks the format.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "data/vocab.h"
#include "fuzz_file.h"
#include "use_vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool json = data[0] & 1;
  tx::fuzz::NamedFile file(data + 1, size - 1, tx::fuzz::scratch_dir(),
                           json ? "vocab.json" : "vocab.yml");
  try {
    tx::fuzz::use_vocab(tx::data::Vocab::marian(file.path()), "▁Ein ▁Mann </s> <unk> fährt");
  } catch (const tx::Error&) {
  }
  return 0;
}
