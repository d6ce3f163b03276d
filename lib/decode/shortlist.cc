#include "decode/shortlist.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "core/text_file.h"

namespace tx::decode {
namespace {

std::unordered_map<std::string, int32_t> ids_of(const data::Vocab& vocab) {
  std::unordered_map<std::string, int32_t> ids;
  for (int32_t id = 0; id < vocab.size(); ++id) ids.emplace(vocab.piece(id), id);
  return ids;
}

}  // namespace

LexicalShortlist::LexicalShortlist(const std::string& path, const data::Vocab& src_vocab,
                                   const data::Vocab& tgt_vocab, int64_t first, int64_t best) {
  TX_CHECK(first >= 0 && best >= 0, "--shortlist: FIRST ", first, " and BEST ", best,
           " must be 0 or more");
  check_readable_file(path, "lexical shortlist (--shortlist)");
  std::ifstream in(path, std::ios::binary);
  TX_CHECK(in, "cannot read the lexical shortlist '", path, "'; check the path");
  const auto src_ids = ids_of(src_vocab), tgt_ids = ids_of(tgt_vocab);
  std::vector<std::vector<std::pair<float, int32_t>>> table(static_cast<size_t>(src_vocab.size()));
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    std::istringstream fields(line);
    std::string tgt, src, rest;
    float prob = 0;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    TX_CHECK((fields >> tgt >> src >> prob) && !(fields >> rest), "lexical shortlist '", path,
             "' line ", number, ": '", line.substr(0, 80),
             "' is not '<target word> <source word> <probability>' (Marian's lex.s2t format)");
    const auto s = src_ids.find(src), t = tgt_ids.find(tgt);
    if (s == src_ids.end() || t == tgt_ids.end()) continue;
    table[static_cast<size_t>(s->second)].emplace_back(prob, t->second);
    ++pairs_;
  }
  TX_CHECK(pairs_ > 0, "lexical shortlist '", path,
           "' names no pair of words the vocabularies know; it was made for other vocabularies "
           "(its words must be the vocabularies' pieces)");
  best_.resize(table.size());
  for (size_t s = 0; s < table.size(); ++s) {
    auto& entries = table[s];
    // Most probable first; equal probabilities by id, so that the choice is reproducible.
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    for (size_t i = 0; i < entries.size() && static_cast<int64_t>(i) < best; ++i)
      best_[s].push_back(entries[i].second);
  }
  for (int32_t id = 0; id < tgt_vocab.size() && id < first; ++id) always_.push_back(id);
  always_.push_back(tgt_vocab.eos_id());
  if (tgt_vocab.unk_id() >= 0) always_.push_back(tgt_vocab.unk_id());
  std::sort(always_.begin(), always_.end());
  always_.erase(std::unique(always_.begin(), always_.end()), always_.end());
}

LexicalShortlist::LexicalShortlist(std::vector<int32_t> always,
                                   std::vector<std::vector<int32_t>> translations)
    : always_(std::move(always)), best_(std::move(translations)) {
  for (const auto& t : best_) pairs_ += static_cast<int64_t>(t.size());
}

void LexicalShortlist::add_translations(const std::vector<int32_t>& source_ids,
                                        std::vector<int32_t>& into) const {
  for (int32_t s : source_ids)
    if (s >= 0 && static_cast<size_t>(s) < best_.size())
      into.insert(into.end(), best_[static_cast<size_t>(s)].begin(),
                  best_[static_cast<size_t>(s)].end());
}

}  // namespace tx::decode
