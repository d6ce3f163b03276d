#include "data/batch.h"

#include <numeric>

#include "core/error.h"
#include "data/vocab.h"

namespace tx::data {
namespace {

// Writes `prefix` (when >= 0), `ids`, `suffix` (when >= 0) into a row of `width`, pad after.
void fill_row(int32_t* row, int64_t width, int32_t prefix, const int32_t* ids, int64_t n,
              int32_t suffix) {
  int64_t k = 0;
  if (prefix >= 0) row[k++] = prefix;
  for (int64_t i = 0; i < n; ++i) row[k++] = ids[i];
  if (suffix >= 0) row[k++] = suffix;
  for (; k < width; ++k) row[k] = Vocab::kPadId;
}

int64_t sum(const std::vector<int32_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}

}  // namespace

int64_t Batch::src_tokens() const {
  return sum(src_lengths);
}
int64_t Batch::tgt_tokens() const {
  return sum(tgt_lengths);
}

Batch make_batch(const ParallelCorpus& corpus, const int64_t* indices, int64_t count) {
  Batch b;
  fill_batch(corpus, indices, count, b);
  return b;
}

void fill_batch(const ParallelCorpus& corpus, const int64_t* indices, int64_t count, Batch& b) {
  b.size = count;
  b.src_len = 0;
  b.tgt_len = 0;
  b.indices.assign(indices, indices + count);
  for (int64_t r = 0; r < count; ++r) {
    TX_CHECK(indices[r] >= 0 && indices[r] < corpus.size(), "batch row ", r, " names pair ",
             indices[r], " but the corpus has ", corpus.size());
    b.src_len = std::max(b.src_len, source_row_length(corpus.src_length(indices[r])));
    b.tgt_len = std::max(b.tgt_len, target_row_length(corpus.tgt_length(indices[r])));
  }
  b.src.resize(count * b.src_len);
  b.tgt_in.resize(count * b.tgt_len);
  b.tgt_out.resize(count * b.tgt_len);
  b.src_lengths.resize(count);
  b.tgt_lengths.resize(count);
  for (int64_t r = 0; r < count; ++r) {
    TokenSpan x = corpus.src(indices[r]), y = corpus.tgt(indices[r]);
    fill_row(&b.src[r * b.src_len], b.src_len, -1, x.data, x.size, Vocab::kEosId);
    fill_row(&b.tgt_in[r * b.tgt_len], b.tgt_len, Vocab::kBosId, y.data, y.size, -1);
    fill_row(&b.tgt_out[r * b.tgt_len], b.tgt_len, -1, y.data, y.size, Vocab::kEosId);
    b.src_lengths[r] = static_cast<int32_t>(source_row_length(x.size));
    b.tgt_lengths[r] = static_cast<int32_t>(target_row_length(y.size));
  }
}

SourceBatch make_source_batch(const std::vector<const std::vector<int32_t>*>& rows,
                              const std::vector<int64_t>& indices) {
  TX_CHECK(rows.size() == indices.size(), "make_source_batch: ", rows.size(), " rows but ",
           indices.size(), " indices");
  SourceBatch b;
  b.size = static_cast<int64_t>(rows.size());
  b.indices = indices;
  for (const auto* row : rows) {
    b.src_len = std::max(b.src_len, source_row_length(static_cast<int64_t>(row->size())));
  }
  b.src.resize(b.size * b.src_len);
  b.src_lengths.resize(b.size);
  for (int64_t r = 0; r < b.size; ++r) {
    const auto& x = *rows[r];
    int64_t n = static_cast<int64_t>(x.size());
    fill_row(&b.src[r * b.src_len], b.src_len, -1, x.data(), n, Vocab::kEosId);
    b.src_lengths[r] = static_cast<int32_t>(source_row_length(n));
  }
  return b;
}

}  // namespace tx::data
