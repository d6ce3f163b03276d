#include "data/inference_batcher.h"

#include <algorithm>

#include "core/error.h"
#include "core/saturating.h"

namespace tx::data {
namespace {

void check(const InferenceBatcherOptions& options) {
  TX_CHECK(options.max_tokens > 0, "--max-tokens must be > 0 (e.g. 4096)");
  TX_CHECK(options.max_sentences >= 0, "--mini-batch must be >= 0 (0: no cap)");
  TX_CHECK(options.maxi_batch >= 0, "--maxi-batch must be >= 0 (0: the whole input)");
  TX_CHECK(options.max_source_tokens >= 0, "the source token limit must be >= 0 (0: none)");
}

}  // namespace

bool crop_source(std::vector<int32_t>& ids, int64_t max_tokens) {
  if (max_tokens <= 0 || static_cast<int64_t>(ids.size()) <= max_tokens) return false;
  ids.resize(static_cast<size_t>(max_tokens));
  return true;
}

std::vector<SourceBatch> make_source_batches(const std::vector<std::vector<int32_t>>& lines,
                                             int64_t first_index,
                                             const InferenceBatcherOptions& options) {
  check(options);
  const int64_t n = static_cast<int64_t>(lines.size());
  auto width = [&](int64_t i) { return source_row_length(static_cast<int64_t>(lines[i].size())); };
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  // Longest first: the largest batch, and so the memory peak, shows at once, not at the end of
  // a long input.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return lines[a].size() > lines[b].size(); });
  std::vector<SourceBatch> batches;
  std::vector<const std::vector<int32_t>*> rows;
  std::vector<int64_t> indices;
  auto emit = [&] {
    batches.push_back(make_source_batch(rows, indices, options.ids));
    rows.clear();
    indices.clear();
  };
  int64_t batch_width = 0;
  for (int64_t i : order) {
    // Sorted longest first, so the first row of a batch sets its width.
    int64_t count = static_cast<int64_t>(rows.size());
    bool full = (count + 1) * std::max(batch_width, width(i)) > options.max_tokens ||
                (options.max_sentences > 0 && count == options.max_sentences);
    if (count > 0 && full) emit();
    if (rows.empty()) batch_width = width(i);
    rows.push_back(&lines[i]);
    indices.push_back(first_index + i);
  }
  if (!rows.empty()) emit();
  return batches;
}

InferenceBatcher::InferenceBatcher(std::istream& in, std::string name, const Vocab& vocab,
                                   const InferenceBatcherOptions& options)
    : reader_(in, std::move(name)), vocab_(vocab), options_(options) {
  check(options);
}

bool InferenceBatcher::next(SourceBatch& batch) {
  if (next_ == window_.size()) {
    if (error_) std::rethrow_exception(error_);
    int64_t first = reader_.line_number();
    std::vector<std::vector<int32_t>> lines;
    std::string line;
    const int64_t m = options_.maxi_batch;
    int64_t tokens = 0;
    // Stop before reading a line the window does not need: on a pipe that read would block.
    auto full = [&] {
      const auto count = static_cast<int64_t>(lines.size());
      return m > 0 &&
             (tokens >= saturating_mul(m, options_.max_tokens) ||
              (options_.max_sentences > 0 && count >= saturating_mul(m, options_.max_sentences)));
    };
    std::vector<std::vector<int32_t>> prefixes;
    auto read = [&] {
      bool cropped = false;
      if (options_.prefix_vocab) {
        const size_t tab = line.find('\t');
        prefixes.push_back(tab == std::string::npos ? std::vector<int32_t>()
                                                    : options_.prefix_vocab->encode_head(
                                                          std::string_view(line).substr(tab + 1),
                                                          options_.max_prefix_tokens));
        if (tab != std::string::npos) line.resize(tab);
        // (Text such as "</s>" in a Marian token list or a fairseq dictionary encodes to one.)
        const Vocab& v = *options_.prefix_vocab;
        for (int32_t id : prefixes.back())
          TX_CHECK(id != v.eos_id() && id != v.bos_id() && id != v.pad_id(), "'", reader_.name(),
                   "' line ", reader_.line_number(), ": its --force-decode prefix holds '",
                   v.piece(id), "', a special token; a prefix is target words only");
        // A prefix beyond the positions cannot be forced whole either (the search would cut
        // it there): cropped here, so that the log counts it.
        cropped = crop_source(prefixes.back(), options_.max_prefix_tokens);
      }
      // Cropped below: a runaway line's tail is never split into pieces.
      lines.push_back(vocab_.encode_head(line, options_.max_source_tokens));
      cropped = crop_source(lines.back(), options_.max_source_tokens) || cropped;
      if (cropped && lines_cropped_++ == 0) first_cropped_line_ = reader_.line_number();
      tokens += source_row_length(static_cast<int64_t>(lines.back().size()));
    };
    try {
      while (!full() && reader_.next(line)) read();
    } catch (const Error&) {
      if (lines.empty()) throw;
      // The lines before the bad one are searched first: a pipe's output keeps them (the next
      // call throws).
      error_ = std::current_exception();
      if (prefixes.size() > lines.size()) prefixes.pop_back();
    }
    if (lines.empty()) return false;
    lines_read_ = first + static_cast<int64_t>(lines.size());
    window_ = make_source_batches(lines, first, options_);
    if (options_.prefix_vocab)
      for (SourceBatch& b : window_)
        for (int64_t index : b.indices) b.prefixes.push_back(std::move(prefixes[index - first]));
    next_ = 0;
  }
  batch = std::move(window_[next_++]);
  return true;
}

}  // namespace tx::data
