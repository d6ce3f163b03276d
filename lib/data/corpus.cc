#include "data/corpus.h"

#include <algorithm>
#include <exception>
#include <thread>

#include "core/error.h"
#include "core/format.h"
#include "data/line_reader.h"

namespace tx::data {
namespace {

std::string limit_text(int64_t limit) {
  return limit > 0 ? std::to_string(limit) : "any";
}

// Encodes lines [0, count) of both sides into src_ids/tgt_ids on `threads` threads. Each thread
// takes a contiguous range, so the result does not depend on the thread count.
void encode_chunk(const std::vector<std::string>& src_lines,
                  const std::vector<std::string>& tgt_lines, size_t count, const Vocab& src_vocab,
                  const Vocab& tgt_vocab, int64_t max_src, int64_t max_tgt, int threads,
                  std::vector<std::vector<int32_t>>& src_ids,
                  std::vector<std::vector<int32_t>>& tgt_ids) {
  src_ids.resize(count);
  tgt_ids.resize(count);
  auto work = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      // A pair over a limit is dropped: its tail need not be split into pieces.
      src_ids[i] = src_vocab.encode_head(src_lines[i], max_src);
      tgt_ids[i] = tgt_vocab.encode_head(tgt_lines[i], max_tgt);
    }
  };
  size_t n_threads = std::min<size_t>(static_cast<size_t>(threads), count / 256 + 1);
  if (n_threads <= 1) {
    work(0, count);
    return;
  }
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(n_threads);
  for (size_t t = 0; t < n_threads; ++t) {
    size_t begin = count * t / n_threads, end = count * (t + 1) / n_threads;
    pool.emplace_back([&, t, begin, end] {
      try {
        work(begin, end);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  }
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

std::string CorpusStats::summary(const CorpusOptions& options) const {
  std::string out = str("read ", grouped(pairs_read), " pairs: kept ", grouped(kept));
  if (dropped_empty > 0 || dropped_too_long > 0) {
    out += str(", dropped ", grouped(dropped_empty), " empty and ", grouped(dropped_too_long),
               " too long (> ", limit_text(options.max_src_tokens), "/",
               limit_text(options.max_tgt_tokens), " tokens)");
  }
  return out +
         str("; ", grouped(src_tokens), " source and ", grouped(tgt_tokens), " target tokens");
}

void ParallelCorpus::add(const std::vector<int32_t>& src, const std::vector<int32_t>& tgt,
                         int64_t line) {
  src_.push_back(src);
  tgt_.push_back(tgt);
  lines_.push_back(line);
}

void ParallelCorpus::shrink_to_fit() {
  src_.shrink_to_fit();
  tgt_.shrink_to_fit();
  lines_.shrink_to_fit();
}

ParallelCorpus load_parallel_corpus(const std::string& src_path, const std::string& tgt_path,
                                    const Vocab& src_vocab, const Vocab& tgt_vocab,
                                    const CorpusOptions& options) {
  LineReader src(src_path), tgt(tgt_path);
  return load_parallel_corpus(src, tgt, src_vocab, tgt_vocab, options);
}

ParallelCorpus load_parallel_corpus(LineReader& src, LineReader& tgt, const Vocab& src_vocab,
                                    const Vocab& tgt_vocab, const CorpusOptions& options) {
  TX_CHECK(options.max_src_tokens >= 0 && options.max_tgt_tokens >= 0,
           "maximum sentence lengths must be >= 0 (0: no limit)");
  const std::string& src_path = src.name();
  const std::string& tgt_path = tgt.name();
  int threads = options.num_threads > 0
                    ? options.num_threads
                    : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  ParallelCorpus corpus;
  CorpusStats stats;
  // Lines are read in chunks (reading is serial, encoding parallel) so memory holds one chunk
  // of text at a time, never the whole corpus as strings.
  constexpr size_t kChunk = 16384;
  std::vector<std::string> src_lines(kChunk), tgt_lines(kChunk);
  std::vector<std::vector<int32_t>> src_ids, tgt_ids;
  bool more = true;
  while (more) {
    size_t count = 0;
    while (count < kChunk) {
      bool has_src = src.next(src_lines[count]);
      bool has_tgt = tgt.next(tgt_lines[count]);
      if (has_src != has_tgt) {
        int64_t src_total = src.line_number() + src.count_rest();
        int64_t tgt_total = tgt.line_number() + tgt.count_rest();
        throw Error(str("parallel files differ in length: '", src_path, "' has ", src_total,
                        " lines but '", tgt_path, "' has ", tgt_total,
                        "; each line of one must be the translation of the same line of the "
                        "other (check that both files are complete and aligned)"));
      }
      if (!has_src) {
        more = false;
        break;
      }
      ++count;
    }
    encode_chunk(src_lines, tgt_lines, count, src_vocab, tgt_vocab,
                 options.max_src_tokens > 0 ? options.max_src_tokens : options.split_limit,
                 options.max_tgt_tokens > 0 ? options.max_tgt_tokens : options.split_limit, threads,
                 src_ids, tgt_ids);
    for (size_t i = 0; i < count; ++i) {
      int64_t line = ++stats.pairs_read;
      const auto& s = src_ids[i];
      const auto& t = tgt_ids[i];
      if (s.empty() || t.empty()) {
        if (options.empty_lines == EmptyLines::kReject) {
          throw Error(str("'", s.empty() ? src_path : tgt_path, "' line ", line,
                          " is empty; remove the pair from both files or let tx skip empty "
                          "lines"));
        }
        if (options.empty_lines == EmptyLines::kSkip) {
          ++stats.dropped_empty;
          continue;
        }
      }
      if ((options.max_src_tokens > 0 && static_cast<int64_t>(s.size()) > options.max_src_tokens) ||
          (options.max_tgt_tokens > 0 && static_cast<int64_t>(t.size()) > options.max_tgt_tokens)) {
        ++stats.dropped_too_long;
        continue;
      }
      corpus.add(s, t, line);
      ++stats.kept;
      stats.src_tokens += static_cast<int64_t>(s.size());
      stats.tgt_tokens += static_cast<int64_t>(t.size());
    }
  }
  corpus.set_stats(stats);
  corpus.shrink_to_fit();
  return corpus;
}

}  // namespace tx::data
