// LexicalShortlist: Marian's lexical shortlist (--shortlist FILE FIRST BEST): the target words
// a batch may produce are the FIRST most frequent ones (the lowest ids), eos and unk, and for
// each source word its BEST most probable translations in a lexical table. Decoding then
// computes the output layer over that union instead of the whole vocabulary.
//
// The table is Marian's text format (`lex.s2t`, as extract_lex writes it): one line per pair,
//   <target word> <source word> <probability>
// with the words as the vocabularies spell their pieces (SentencePiece pieces when the model
// reads SentencePiece). As in Marian: words a vocabulary lacks count as its unk, a repeated
// pair's last line wins, pairs of probability 0 or less are left out, and equal probabilities
// rank the higher id first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/vocab.h"

namespace tx::decode {

class LexicalShortlist {
 public:
  // Throws tx::Error naming the file and line for a line that is not "word word number", and
  // when no line names words of both vocabularies.
  // `shared`: one vocabulary for both sides (Marian: the same file twice); each source
  // piece is then a candidate too, so that names and numbers can be copied.
  LexicalShortlist(const std::string& path, const data::Vocab& src_vocab,
                   const data::Vocab& tgt_vocab, int64_t first, int64_t best, bool shared);
  // A shortlist given in ids: `always` (sorted) and each source id's translations.
  LexicalShortlist(std::vector<int32_t> always, std::vector<std::vector<int32_t>> translations);

  // Adds the target ids the source ids may translate into (unsorted, with repeats) to `into`:
  // each source id's best translations (and the source ids themselves when shared). The ids
  // every sentence may produce are always().
  void add_translations(const std::vector<int32_t>& source_ids, std::vector<int32_t>& into) const;
  // The first FIRST ids, eos and unk (sorted).
  const std::vector<int32_t>& always() const { return always_; }
  int64_t pairs() const { return pairs_; }  // the table's pairs both vocabularies know

 private:
  bool shared_ = false;
  std::vector<int32_t> always_;
  std::vector<std::vector<int32_t>> best_;  // per source id: its best target ids
  int64_t pairs_ = 0;
};

}  // namespace tx::decode
