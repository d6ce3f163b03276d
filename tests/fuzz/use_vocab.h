// Fuzz support: what the vocabulary fuzz targets do with a vocabulary that loaded: encode
// `line`, decode the result, and decode its first 64 ids.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "data/vocab.h"

namespace tx::fuzz {

inline void use_vocab(const data::Vocab& vocab, std::string_view line) {
  vocab.decode(vocab.encode(line));
  std::vector<int32_t> all;
  for (int32_t id = 0; id < vocab.size() && id < 64; ++id) all.push_back(id);
  vocab.decode(all);
}

}  // namespace tx::fuzz
