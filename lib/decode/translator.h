// Translator: text in, text out — encodes lines with the source vocabulary, batches them,
// runs beam search and writes one result per input line, in input order.
//
// Output of translate_stream, one entry per input line, in input order:
// - n_best == 1: the best translation, one line (an empty input line gives an empty line).
// - n_best > 1: Marian's n-best format, one line per hypothesis, best first:
//     <line index, 0-based> ||| <translation> ||| F0= <log-prob> ||| <normalised score>
//   An ensemble prints each model's log-prob, F0= <model 1's> F1= <model 2's> ..., and its
//   score is that of their weighted sum.
//   An empty input line gives one entry, `i |||  ||| F0= 0 ||| 0`, so every index appears.
// - With an alignment (TranslatorOptions::alignment), Marian's layout: `translation ||| 0-0 1-2`
//   and `i ||| translation ||| 0-0 1-2 ||| F0= ... ||| score`; an empty line's aligns eos to eos
//   (` ||| 0-0`), as marian-decoder's.
// Empty lines are not searched: a model given only eos would still invent words.
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "data/inference_batcher.h"
#include "data/vocab.h"
#include "decode/beam_search.h"

namespace tx::decode {

struct TranslatorOptions {
  BeamSearchOptions search;
  data::InferenceBatcherOptions batching;
  // Each sentence searched in a batch of its own, so that its translation and scores are
  // bit-identical whatever else is in the input and whatever the batch options: oneDNN's GEMM
  // rounds a row differently for different row counts, and padding changes the reductions of
  // attention (docs/determinism.md).
  bool deterministic = false;
  // Each input line may hold a tab and then a prefix (target text) its translation must start
  // with (tx-translate --force-decode; BeamSearch's SourceSentence::prefix).
  bool force_decode = false;
  // --alignment: each entry's translation followed by ` ||| ` and its alignment
  // (decode/alignment.h), in tokens (SentencePiece pieces and eos, as Marian prints them) or,
  // with words, in words.
  AlignmentOptions alignment;
};

class Translator {
 public:
  // Everything passed in must outlive the Translator. The vocabularies' sizes must match the
  // model's.
  Translator(Backend& be, const nn::Transformer& model, const data::Vocab& src_vocab,
             const data::Vocab& tgt_vocab, TranslatorOptions options = {});
  // An ensemble (BeamSearch's rule and weights): the vocabularies are every model's.
  Translator(Backend& be, std::vector<const nn::Transformer*> models, const data::Vocab& src_vocab,
             const data::Vocab& tgt_vocab, TranslatorOptions options = {},
             std::vector<float> weights = {});

  // Translates every line of `in` (named `name` in errors) to `out`, as described above;
  // returns the number of lines. A source longer than the model's positions cover (its
  // max_length, eos included) is cropped to fit; see lines_cropped(). Output for a line appears
  // as soon as it and every line before it are translated. `on_batch`, when given, is called
  // as lines finish with the number translated so far.
  int64_t translate_stream(std::istream& in, std::ostream& out, const std::string& name = "<stdin>",
                           const std::function<void(int64_t lines_done)>& on_batch = nullptr);

  // The best translation of each line, in order (validation BLEU). Throws tx::Error naming
  // the line for invalid UTF-8.
  std::vector<std::string> translate_lines(const std::vector<std::string>& lines);

  // One input line's output entry (see the top of this file), without a final newline.
  std::string format(int64_t index, const NBest& nbest) const;
  // With the alignment's words: format() of a sentence of source ids `source`.
  std::string format(int64_t index, const NBest& nbest, const std::vector<int32_t>& source) const;

  const TranslatorOptions& options() const { return options_; }
  // Lines the last translate_stream or translate_lines cropped, and the 1-based number of the
  // first of them: for the program's warning.
  int64_t lines_cropped() const { return lines_cropped_; }
  int64_t first_cropped_line() const { return first_cropped_line_; }

 private:
  // The batch options as the search's limits on the sentences decoded together.
  SearchLimits limits() const;

  // The alignment field of one hypothesis (source: its sentence's ids, for words).
  std::string alignment_of(const Hypothesis& h, const std::vector<int32_t>* source) const;

  const data::Vocab& src_vocab_;
  const data::Vocab& tgt_vocab_;
  TranslatorOptions options_;
  BeamSearch search_;
  Hypothesis empty_;  // an empty line's entry (an ensemble's scores each model's 0)
  int64_t lines_cropped_ = 0, first_cropped_line_ = 0;
};

}  // namespace tx::decode
