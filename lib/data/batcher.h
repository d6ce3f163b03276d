// Batcher: cuts a ParallelCorpus into token-bounded training batches, epoch after epoch.
//
// Each epoch, as in Marian and fairseq: shuffle the pairs (seeded), sort them by length within
// a window of about `maxi_batch` batches, cut each window greedily into batches whose padded
// size stays <= max_tokens (and <= max_sentences rows), then shuffle the order of the batches.
// Sorting puts sentences of one length together, so little of a batch is padding; the window
// and the final shuffle keep the order random. The epoch's plan is a pure function of the
// corpus lengths, the options, the seed and the epoch number, so a run resumed at
// (epoch, batch) sees exactly the batches it would have seen.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/corpus.h"

namespace tx::data {

struct BatcherOptions {
  // Padded tokens per batch: rows * max(S, T) (Batch::padded_tokens) stays <= this.
  int64_t max_tokens = 4096;
  // Rows per batch at most (0: no cap beyond max_tokens).
  int64_t max_sentences = 0;
  // Pairs sorted together: about this many batches' worth of tokens (0: the whole corpus, as
  // fairseq does; 1: no sorting across batches).
  int64_t maxi_batch = 100;
  uint64_t seed = 1;
  // false: no shuffling; windows in corpus order and batches in sorted order (validation,
  // scoring).
  bool shuffle = true;
  SpecialIds ids;  // the model's pad, eos and decoder start (data::special_ids)
  // What the corpus is, for messages ("the training data 'a' and 'b'"); empty: unnamed.
  std::string corpus_name;
};

// Where the batcher is: the next batch it returns is batch `batch` of epoch `epoch`
// (both from 0; logs show epoch + 1).
struct BatchPosition {
  int64_t epoch = 0;
  int64_t batch = 0;
  bool operator==(const BatchPosition& o) const { return epoch == o.epoch && batch == o.batch; }
};

// An epoch's batches as corpus pair indices: batch i is order[starts[i] .. starts[i + 1]).
struct EpochPlan {
  std::vector<int64_t> order;
  std::vector<int64_t> starts{0};
  int64_t batches() const { return static_cast<int64_t>(starts.size()) - 1; }
};

class Batcher {
 public:
  // Keeps a reference to `corpus`, which must outlive the batcher. Throws tx::Error when the
  // corpus is empty or a pair alone is wider than max_tokens (naming its line and the fix).
  Batcher(const ParallelCorpus& corpus, const BatcherOptions& options);

  // The next batch of the current epoch; false (and no batch) once the epoch is done, which
  // moves the position to the start of the next epoch:
  //   while (batcher.next(batch)) train(batch);   // one epoch
  bool next(Batch& batch);

  BatchPosition position() const { return position_; }
  // Continues from a saved position(); batch may equal the epoch's batch count (its end).
  void seek(const BatchPosition& position);
  // Batches in the current epoch (the count varies a little between epochs).
  int64_t batches_in_epoch();

  // The batches of `epoch`, without touching the position. With resampling, from the lengths
  // of the segmentation in use (the current epoch's; another epoch's are an estimate).
  EpochPlan plan(int64_t epoch) const;

  // Subword sampling (data/subword_sampling.h): `resample(epoch)` gives the epoch's pairs,
  // the corpus's pairs in its order with other ids; called once per epoch when its plan is
  // made, the plan then from its lengths. A sample wider than max_tokens is an error, so the
  // sampler crops to fit.
  void set_resampling(std::function<ParallelCorpus(int64_t epoch)> resample);
  const BatcherOptions& options() const { return options_; }

 private:
  void ensure_plan();
  // cost_ from corpus_'s lengths; throws naming a pair wider than max_tokens.
  void measure();

  const ParallelCorpus* corpus_;
  std::function<ParallelCorpus(int64_t)> resample_;
  ParallelCorpus sampled_;  // the current epoch's, with resampling
  BatcherOptions options_;
  std::vector<int64_t> cost_;  // per pair: max(source row, target row) width
  BatchPosition position_;
  EpochPlan plan_;
  int64_t plan_epoch_ = -1;
};

}  // namespace tx::data
