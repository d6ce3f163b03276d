#include "data/subword_sampling.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "data/line_reader.h"

namespace tx::data {
namespace {

// One block's pairs: their text in, their sampled ids out.
struct Block {
  std::vector<std::string> src, tgt;
  std::vector<std::vector<int32_t>> src_ids, tgt_ids;
};

std::vector<int32_t> segment(const Vocab& vocab, const std::string& line, float alpha,
                             int64_t limit) {
  std::vector<int32_t> ids = alpha != 0 ? vocab.sample(line, alpha) : vocab.encode(line);
  if (limit > 0 && static_cast<int64_t>(ids.size()) > limit) ids.resize(static_cast<size_t>(limit));
  return ids;
}

}  // namespace

ParallelCorpus sample_corpus(const std::string& src_path, const std::string& tgt_path,
                             const Vocab& src_vocab, const Vocab& tgt_vocab,
                             const ParallelCorpus& best, int64_t epoch,
                             const SubwordSampling& options) {
  // The kept pairs' text, in blocks.
  std::vector<Block> blocks;
  {
    LineReader src(src_path), tgt(tgt_path);
    std::string s, t;
    int64_t number = 0;
    for (int64_t i = 0; i < best.size(); ++i) {
      const int64_t want = best.line(i);
      while (number < want) {
        TX_CHECK(src.next(s) && tgt.next(t), "'", src_path, "' and '", tgt_path,
                 "' end before line ", want,
                 ": the training files changed during the run, or are pipes, which can be "
                 "read only once (sampling reads them again each epoch); restart it with "
                 "regular files as it began with");
        ++number;
      }
      if (i % kSamplingBlock == 0) blocks.emplace_back();
      blocks.back().src.push_back(s);
      blocks.back().tgt.push_back(t);
    }
  }
  const int threads = options.num_threads > 0
                          ? options.num_threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  auto run = [&](Block& b) {
    const size_t n = b.src.size();
    b.src_ids.resize(n);
    b.tgt_ids.resize(n);
    for (size_t k = 0; k < n; ++k) {
      b.src_ids[k] = segment(src_vocab, b.src[k], options.src_alpha, options.max_src_tokens);
      b.tgt_ids[k] = segment(tgt_vocab, b.tgt[k], options.tgt_alpha, options.max_tgt_tokens);
    }
  };
  // Waves of `threads` blocks. A fresh thread's generator is seeded, at its first draw, from
  // the process-wide seed: each block's thread draws once (a throwaway sample of its first
  // line) before the next block's seed is set.
  std::exception_ptr error;
  std::mutex mutex;
  for (size_t first = 0; first < blocks.size(); first += static_cast<size_t>(threads)) {
    const size_t end = std::min(blocks.size(), first + static_cast<size_t>(threads));
    std::vector<std::thread> wave;
    for (size_t b = first; b < end; ++b) {
      const uint64_t key = mix64(options.seed ^ mix64(uint64_t(epoch) * 0x9e3779b97f4a7c15ull +
                                                      mix64(uint64_t(b) + 0x243f6a8885a308d3ull)));
      sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned int>(key >> 32));
      bool seeded = false;
      std::condition_variable ready;
      wave.emplace_back([&, b] {
        try {
          const Vocab& v = options.src_alpha != 0 ? src_vocab : tgt_vocab;
          const float alpha = options.src_alpha != 0 ? options.src_alpha : options.tgt_alpha;
          const std::string& line = options.src_alpha != 0 ? blocks[b].src[0] : blocks[b].tgt[0];
          if (alpha != 0) v.sample(line.empty() ? std::string("a") : line, alpha);
        } catch (...) {
        }
        {
          // Notified under the lock: the waiter cannot return (and destroy `ready`) before.
          std::lock_guard<std::mutex> lock(mutex);
          seeded = true;
          ready.notify_one();
        }
        try {
          run(blocks[b]);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mutex);
          if (!error) error = std::current_exception();
        }
      });
      std::unique_lock<std::mutex> lock(mutex);
      ready.wait(lock, [&] { return seeded; });
    }
    for (std::thread& t : wave) t.join();
    if (error) std::rethrow_exception(error);
  }
  ParallelCorpus out;
  int64_t i = 0;
  for (const Block& b : blocks)
    for (size_t k = 0; k < b.src_ids.size(); ++k)
      out.add(b.src_ids[k], b.tgt_ids[k], best.line(i++));
  out.set_stats(best.stats());
  out.shrink_to_fit();
  return out;
}

}  // namespace tx::data
