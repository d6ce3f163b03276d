#include "data/batcher.h"

#include <algorithm>

#include "core/error.h"
#include "core/rng.h"
#include "core/saturating.h"

namespace tx::data {
namespace {

// Fisher-Yates driven by tx's counter-based hash rather than std::shuffle, whose algorithm
// differs between standard libraries: the same seed gives the same order everywhere.
template <typename T>
void shuffle(std::vector<T>& v, uint64_t seed, uint64_t epoch, uint64_t stream) {
  uint64_t key = mix64(seed ^ mix64(epoch * 2 + stream + 0x5851f42d4c957f2dull));
  for (size_t i = v.size(); i > 1; --i) {
    uint64_t h = mix64(key + mix64(i));
    // Lemire's multiply-shift maps h to [0, i) without a division.
    size_t j = static_cast<size_t>((static_cast<unsigned __int128>(h) * i) >> 64);
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace

Batcher::Batcher(const ParallelCorpus& corpus, const BatcherOptions& options)
    : corpus_(&corpus), options_(options) {
  TX_CHECK(options.max_tokens > 0, "--max-tokens must be > 0 (e.g. 4096)");
  TX_CHECK(options.max_sentences >= 0, "--mini-batch must be >= 0 (0: no cap)");
  TX_CHECK(options.maxi_batch >= 0, "--maxi-batch must be >= 0 (0: sort the whole corpus)");
  TX_CHECK(corpus.size() > 0,
           "the training corpus has no sentence pair (after filtering); check the files and "
           "the length limits");
  measure();
}

void Batcher::measure() {
  const ParallelCorpus& corpus = *corpus_;
  cost_.resize(corpus.size());
  for (int64_t i = 0; i < corpus.size(); ++i) {
    int64_t s = source_row_length(corpus.src_length(i));
    int64_t t = target_row_length(corpus.tgt_length(i));
    cost_[i] = std::max(s, t);
    TX_CHECK(cost_[i] <= options_.max_tokens, "the sentence pair at line ", corpus.line(i),
             options_.corpus_name.empty() ? "" : " of " + options_.corpus_name, " is ", s,
             " source and ", t, " target tokens wide (with eos/bos), more than ", "--max-tokens ",
             options_.max_tokens, "; raise --max-tokens or drop long pairs with a length limit");
  }
}

void Batcher::set_resampling(std::function<ParallelCorpus(int64_t epoch)> resample) {
  resample_ = std::move(resample);
  plan_epoch_ = -1;  // the next plan samples its epoch
}

EpochPlan Batcher::plan(int64_t epoch) const {
  const ParallelCorpus& corpus = *corpus_;
  const int64_t n = corpus.size();
  EpochPlan plan;
  plan.order.resize(n);
  for (int64_t i = 0; i < n; ++i) plan.order[i] = i;
  if (options_.shuffle) shuffle(plan.order, options_.seed, static_cast<uint64_t>(epoch), 0);

  const int64_t window_tokens = saturating_mul(options_.maxi_batch, options_.max_tokens);
  const int64_t window_rows = saturating_mul(options_.maxi_batch, options_.max_sentences);
  auto by_length = [&](int64_t a, int64_t b) {
    if (cost_[a] != cost_[b]) return cost_[a] < cost_[b];
    if (corpus.src_length(a) != corpus.src_length(b))
      return corpus.src_length(a) < corpus.src_length(b);
    return corpus.tgt_length(a) < corpus.tgt_length(b);
  };
  int64_t begin = 0;
  while (begin < n) {
    int64_t end = n;
    if (options_.maxi_batch > 0) {
      int64_t tokens = 0;
      end = begin;
      while (end < n && (end == begin || tokens + cost_[plan.order[end]] <= window_tokens) &&
             (window_rows == 0 || end - begin < window_rows)) {
        tokens += cost_[plan.order[end++]];
      }
    }
    // Stable: pairs of equal length keep their shuffled order.
    std::stable_sort(plan.order.begin() + begin, plan.order.begin() + end, by_length);
    // Greedy cut; sorted ascending, so the newest pair is the widest.
    int64_t rows = 0, width = 0;
    for (int64_t i = begin; i < end; ++i) {
      int64_t w = std::max(width, cost_[plan.order[i]]);
      bool full = (rows + 1) * w > options_.max_tokens ||
                  (options_.max_sentences > 0 && rows == options_.max_sentences);
      if (rows > 0 && full) {
        plan.starts.push_back(i);
        rows = 0;
        w = cost_[plan.order[i]];
      }
      ++rows;
      width = w;
    }
    plan.starts.push_back(end);
    begin = end;
  }

  if (options_.shuffle) {
    // Shuffle whole batches: permute (start, end) pairs, then lay the indices out anew.
    std::vector<int64_t> ids(plan.batches());
    for (int64_t b = 0; b < plan.batches(); ++b) ids[b] = b;
    shuffle(ids, options_.seed, static_cast<uint64_t>(epoch), 1);
    EpochPlan out;
    out.order.reserve(n);
    for (int64_t b : ids) {
      out.order.insert(out.order.end(), plan.order.begin() + plan.starts[b],
                       plan.order.begin() + plan.starts[b + 1]);
      out.starts.push_back(static_cast<int64_t>(out.order.size()));
    }
    return out;
  }
  return plan;
}

void Batcher::ensure_plan() {
  if (plan_epoch_ == position_.epoch) return;
  if (resample_) {
    ParallelCorpus sampled = resample_(position_.epoch);
    TX_CHECK(sampled.size() == corpus_->size(), "subword sampling gave ", sampled.size(),
             " pairs for a corpus of ", corpus_->size());
    sampled_ = std::move(sampled);
    corpus_ = &sampled_;
    measure();
  }
  plan_ = plan(position_.epoch);
  plan_epoch_ = position_.epoch;
}

int64_t Batcher::batches_in_epoch() {
  ensure_plan();
  return plan_.batches();
}

bool Batcher::next(Batch& batch) {
  ensure_plan();
  if (position_.batch >= plan_.batches()) {
    position_ = {position_.epoch + 1, 0};
    return false;
  }
  int64_t b = position_.batch++;
  int64_t first = plan_.starts[b];
  fill_batch(*corpus_, plan_.order.data() + first, plan_.starts[b + 1] - first, batch,
             options_.ids);
  return true;
}

void Batcher::seek(const BatchPosition& position) {
  TX_CHECK(position.epoch >= 0 && position.batch >= 0, "cannot resume at epoch ", position.epoch,
           ", batch ", position.batch, ": both must be >= 0");
  position_ = position;
  int64_t count = batches_in_epoch();
  TX_CHECK(position.batch <= count, "cannot resume at batch ", position.batch, " of epoch ",
           position.epoch, ": it has ", count,
           " batches with these data and options; resume with the corpus, --max-tokens, "
           "--mini-batch, --maxi-batch and --seed of the saved run, or with "
           "--no-restore-corpus");
}

}  // namespace tx::data
