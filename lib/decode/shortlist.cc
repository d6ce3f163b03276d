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
                                   const data::Vocab& tgt_vocab, int64_t first, int64_t best,
                                   bool shared)
    : shared_(shared) {
  TX_CHECK(first >= 0 && best >= 0, "--shortlist: FIRST ", first, " and BEST ", best,
           " must be 0 or more");
  check_readable_file(path, "lexical shortlist (--shortlist)");
  std::ifstream in(path, std::ios::binary);
  TX_CHECK(in, "cannot read the lexical shortlist '", path, "'; check the path");
  const auto src_ids = ids_of(src_vocab), tgt_ids = ids_of(tgt_vocab);
  // Marian's table: per source id, target id -> probability, the last line of a pair winning;
  // words a vocabulary lacks are its unk (as Marian maps them).
  std::vector<std::unordered_map<int32_t, float>> table(static_cast<size_t>(src_vocab.size()));
  int64_t known = 0;
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
    known += s != src_ids.end() && t != tgt_ids.end();
    const int32_t s_id = s != src_ids.end() ? s->second : src_vocab.unk_id();
    const int32_t t_id = t != tgt_ids.end() ? t->second : tgt_vocab.unk_id();
    if (s_id < 0 || t_id < 0) continue;
    table[static_cast<size_t>(s_id)][t_id] = prob;
  }
  TX_CHECK(known > 0, "lexical shortlist '", path,
           "' names no pair of words the vocabularies know; it was made for other vocabularies "
           "(its words must be the vocabularies' pieces)");
  best_.resize(table.size());
  for (size_t s = 0; s < table.size(); ++s) {
    std::vector<std::pair<float, int32_t>> entries;
    for (const auto& [t, prob] : table[s])
      if (prob > 0) entries.emplace_back(prob, t);  // Marian keeps positive probabilities
    pairs_ += static_cast<int64_t>(entries.size());
    // Most probable first; equal probabilities the higher id first (Marian's order).
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second > b.second;
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
  TX_CHECK(std::is_sorted(always_.begin(), always_.end()),
           "LexicalShortlist: `always` must be sorted");
  for (const auto& t : best_) pairs_ += static_cast<int64_t>(t.size());
}

void LexicalShortlist::add_translations(const std::vector<int32_t>& source_ids,
                                        std::vector<int32_t>& into) const {
  // A joint vocabulary: each source piece may also be copied (names, numbers).
  if (shared_) into.insert(into.end(), source_ids.begin(), source_ids.end());
  for (int32_t s : source_ids)
    if (s >= 0 && static_cast<size_t>(s) < best_.size())
      into.insert(into.end(), best_[static_cast<size_t>(s)].begin(),
                  best_[static_cast<size_t>(s)].end());
}

}  // namespace tx::decode
