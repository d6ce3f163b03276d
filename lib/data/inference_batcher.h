// InferenceBatcher: reads lines to translate, groups them by length into batches.
//
// It reads a window of lines, encodes them, sorts them by length (so a batch holds similar
// lengths and little padding) and hands out batches whose rows carry their input line
// numbers; OrderedOutput (data/ordered_output.h) then writes the results back in input order.
#pragma once

#include <cstdint>
#include <exception>
#include <istream>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/line_reader.h"
#include "data/vocab.h"

namespace tx::data {

struct InferenceBatcherOptions {
  // Padded source tokens per batch: rows * S <= this. A line wider than this alone gets a
  // batch of its own: translation never refuses a line.
  int64_t max_tokens = 4096;
  int64_t max_sentences = 0;  // rows per batch at most (0: no cap)
  // Lines read and sorted together: about this many batches' worth (lines until their source
  // tokens reach maxi_batch * max_tokens, or maxi_batch * max_sentences lines when that is
  // set), as training's Batcher counts its window; 0: the whole input. Output for a line
  // appears once its window is translated, so interactive use (one line in, one line out)
  // wants maxi_batch 1 with max_sentences 1.
  int64_t maxi_batch = 100;
  // Source tokens a line keeps at most (0: no limit): longer lines are cropped, as Marian's
  // --max-length-crop and CTranslate2's max_input_length do. The Translator sets it to what
  // the model's positions cover, which also bounds attention memory for a runaway line.
  int64_t max_source_tokens = 0;
  // The model's pad and eos (the Translator sets them from the model's config).
  SpecialIds ids;
  // --force-decode: a tab ends a line's source, and what follows, encoded with this (target)
  // vocabulary, is its translation's prefix (SourceBatch::prefixes). Null: a tab is text.
  const Vocab* prefix_vocab = nullptr;
  // Prefix tokens a line keeps at most (0: no limit): the Translator sets it to the model's
  // positions, beyond which the search could not force them.
  int64_t max_prefix_tokens = 0;
};

// Crops `ids` to `max_tokens` (0: no limit); returns whether it did.
bool crop_source(std::vector<int32_t>& ids, int64_t max_tokens);

// The batches of encoded `lines` (ids without eos), longest first, row r of the whole tagged
// `first_index` + its position in `lines`. For text already in memory (a validation set).
std::vector<SourceBatch> make_source_batches(const std::vector<std::vector<int32_t>>& lines,
                                             int64_t first_index,
                                             const InferenceBatcherOptions& options);

class InferenceBatcher {
 public:
  // Reads `in` (stdin, a file) that the caller keeps open; `name` is what errors call it.
  InferenceBatcher(std::istream& in, std::string name, const Vocab& vocab,
                   const InferenceBatcherOptions& options);

  // The next batch; false at the end of the input. Throws tx::Error naming the input and line
  // for invalid UTF-8 (or a --force-decode prefix holding a special token) once the batches
  // of the lines before it are handed out: a window ends before a bad line, and the next call
  // throws.
  bool next(SourceBatch& batch);

  // Lines of the batches read so far; at the end, or after the error, the number of output
  // lines due.
  int64_t lines_read() const { return lines_read_; }
  // Lines whose source (or --force-decode prefix) was cropped so far, and
  // the 1-based number of the first.
  int64_t lines_cropped() const { return lines_cropped_; }
  int64_t first_cropped_line() const { return first_cropped_line_; }

 private:
  LineReader reader_;
  const Vocab& vocab_;
  InferenceBatcherOptions options_;
  std::vector<SourceBatch> window_;  // the current window's batches
  size_t next_ = 0;
  int64_t lines_read_ = 0;
  std::exception_ptr error_;  // the bad line's, thrown once the window before it is out
  int64_t lines_cropped_ = 0, first_cropped_line_ = 0;
};

}  // namespace tx::data
