// Batch and SourceBatch: sentences as right-padded id matrices in host memory, ready to upload.
//
// Layout (tx's ids pad = 0, bos = 2, eos = 3, or a model's SpecialIds; x a source sentence, y
// its target):
//   src     [B, S]  x + [eos], then pad     src_lengths [B] = len(x) + 1
//   tgt_in  [B, T]  [bos] + y, then pad     tgt_lengths [B] = len(y) + 1
//   tgt_out [B, T]  y + [eos], then pad     (the loss skips pad)
// The source ends in eos as in fairseq and Marian: the encoder sees where a sentence ends, and
// an empty line is still one token. Training and translation build source rows the same way.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "data/corpus.h"
#include "io/model_config.h"

namespace tx::data {

// The ids a batch is built with: a model's (io::ModelConfig pad_id, eos_id, decoder_start_id).
// pad -1 pads with -1 (embedded as zero rows, ignored by the loss); start -1 starts the
// decoder from a zero vector (Marian).
struct SpecialIds {
  int32_t pad = 0;
  int32_t eos = 3;
  int32_t start = 2;
};

// The ids batches of a model are built with.
inline SpecialIds special_ids(const io::ModelConfig& c) {
  return {c.pad_id, c.eos_id, c.decoder_start_id};
}

struct Batch {
  int64_t size = 0;     // B: sentence pairs
  int64_t src_len = 0;  // S: the longest source row
  int64_t tgt_len = 0;  // T: the longest target row
  std::vector<int32_t> src, src_lengths;
  std::vector<int32_t> tgt_in, tgt_out, tgt_lengths;
  std::vector<int64_t> indices;  // [B]: each row's pair index in the corpus

  int64_t src_tokens() const;  // non-pad source tokens
  int64_t tgt_tokens() const;  // non-pad target tokens: what the loss sums over
  // What --max-tokens limits: both sides are counted at the longer one's width.
  int64_t padded_tokens() const { return size * std::max(src_len, tgt_len); }
};

// The source side only, for translation.
struct SourceBatch {
  int64_t size = 0;
  int64_t src_len = 0;
  std::vector<int32_t> src, src_lengths;
  std::vector<int64_t> indices;  // [B]: each row's 0-based line number in the input
  // [B] target prefixes, ids without bos or eos (--force-decode); empty: none in this batch.
  std::vector<std::vector<int32_t>> prefixes;

  // Row r's ids, eos included, without the padding.
  std::vector<int32_t> row(int64_t r) const {
    const auto first = src.begin() + r * src_len;
    return std::vector<int32_t>(first, first + src_lengths[r]);
  }
};

// The batch with its rows twice, [b; b] (2B rows, the same widths): R-Drop's two passes of one
// batch (tx-train --rdrop-alpha) as one forward, each row drawing dropout masks of its own.
Batch doubled(const Batch& b);

// Row widths of a pair, as a batch counts them.
inline int64_t source_row_length(int64_t tokens) {
  return tokens + 1;
}  // + eos
inline int64_t target_row_length(int64_t tokens) {
  return tokens + 1;
}  // + bos or eos

// The batch of corpus pairs `indices[0..count)`, rows in that order.
Batch make_batch(const ParallelCorpus& corpus, const int64_t* indices, int64_t count,
                 const SpecialIds& ids = {});
// The same into `batch`, reusing its buffers: a training loop allocates only while batches
// still grow.
void fill_batch(const ParallelCorpus& corpus, const int64_t* indices, int64_t count, Batch& batch,
                const SpecialIds& ids = {});

// The source batch of `rows` (ids without eos), tagged with their input line numbers.
SourceBatch make_source_batch(const std::vector<const std::vector<int32_t>*>& rows,
                              const std::vector<int64_t>& indices, const SpecialIds& ids = {});

}  // namespace tx::data
