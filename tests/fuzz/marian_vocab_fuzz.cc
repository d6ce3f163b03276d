// Fuzz target: Marian's token-list vocabularies (.yml, and .json as Hugging Face's vocab.json),
// loaded and used to encode and decode. The first byte picks the format.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "data/vocab.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool json = data[0] & 1;
  tx::fuzz::NamedFile file(data + 1, size - 1, tx::fuzz::scratch_dir(),
                           json ? "vocab.json" : "vocab.yml");
  try {
    const tx::data::Vocab vocab = tx::data::Vocab::marian(file.path());
    const std::vector<int32_t> ids = vocab.encode("▁Ein ▁Mann </s> <unk> fährt");
    vocab.decode(ids);
    std::vector<int32_t> all;
    for (int32_t id = 0; id < vocab.size() && id < 64; ++id) all.push_back(id);
    vocab.decode(all);
  } catch (const tx::Error&) {
  }
  return 0;
}
