// ParallelCorpus: sentence pairs read from a source and a target file, held as token ids.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/line_reader.h"
#include "data/token_buffer.h"
#include "data/vocab.h"

namespace tx::data {

// What to do with a pair where either side encodes to no token (an empty or blank line).
enum class EmptyLines {
  kSkip,    // drop the pair and count it (training)
  kReject,  // throw tx::Error naming the file and line
  kKeep,    // keep it (scoring: one output line per input pair)
};

struct CorpusOptions {
  EmptyLines empty_lines = EmptyLines::kSkip;
  // Drop pairs with more pieces than this on a side (0: no limit). Counted in SentencePiece
  // pieces, without the eos/bos the batcher adds.
  int64_t max_src_tokens = 0;
  int64_t max_tgt_tokens = 0;
  // Where no drop limit is set: pieces beyond which a line is not split (Vocab::encode_head),
  // for a caller that refuses longer pairs itself (tx-score); 0: split every line whole.
  int64_t split_limit = 0;
  // Threads that encode (0: the number of cores). Ids do not depend on it.
  int32_t num_threads = 0;
};

struct CorpusStats {
  int64_t pairs_read = 0;
  int64_t kept = 0;
  int64_t dropped_empty = 0;
  int64_t dropped_too_long = 0;
  int64_t src_tokens = 0;  // in the kept pairs
  int64_t tgt_tokens = 0;
  // "read 29,000 pairs: kept 28,990, dropped 3 empty and 7 too long (> 100/100 tokens)".
  std::string summary(const CorpusOptions& options) const;
};

class ParallelCorpus {
 public:
  ParallelCorpus() = default;
  // Appends a pair; `line` is its 1-based line number in the files (for messages).
  void add(const std::vector<int32_t>& src, const std::vector<int32_t>& tgt, int64_t line);

  int64_t size() const { return src_.size(); }
  TokenSpan src(int64_t i) const { return src_[i]; }
  TokenSpan tgt(int64_t i) const { return tgt_[i]; }
  int64_t src_length(int64_t i) const { return src_.length(i); }
  int64_t tgt_length(int64_t i) const { return tgt_.length(i); }
  int64_t line(int64_t i) const { return lines_[i]; }
  // What loading read and dropped (all zero for a corpus built with add()).
  const CorpusStats& stats() const { return stats_; }
  void set_stats(const CorpusStats& stats) { stats_ = stats; }
  void shrink_to_fit();

 private:
  TokenBuffer src_, tgt_;
  std::vector<int64_t> lines_;
  CorpusStats stats_;
};

// Reads both files line by line, encodes each side with its vocabulary (the same Vocab twice
// for a joint one) and filters by options. Throws tx::Error naming both files and their line
// counts when they differ, and naming the file and line of invalid UTF-8 (or of an empty line
// under kReject).
ParallelCorpus load_parallel_corpus(const std::string& src_path, const std::string& tgt_path,
                                    const Vocab& src_vocab, const Vocab& tgt_vocab,
                                    const CorpusOptions& options = {});
// The same from two readers (text held in memory, stdin); their names stand for the files.
ParallelCorpus load_parallel_corpus(LineReader& src, LineReader& tgt, const Vocab& src_vocab,
                                    const Vocab& tgt_vocab, const CorpusOptions& options = {});

}  // namespace tx::data
