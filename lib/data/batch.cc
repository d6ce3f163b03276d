#include "data/batch.h"

#include <numeric>

#include "core/error.h"

namespace tx::data {
namespace {

// A row's first or last id, or none.
struct Edge {
  bool present = false;
  int32_t id = 0;
};
constexpr Edge kNone{};

// Writes `prefix`, `ids`, `suffix` into a row of `width`, pad after.
void fill_row(int32_t* row, int64_t width, Edge prefix, const int32_t* ids, int64_t n, Edge suffix,
              int32_t pad) {
  int64_t k = 0;
  if (prefix.present) row[k++] = prefix.id;
  for (int64_t i = 0; i < n; ++i) row[k++] = ids[i];
  if (suffix.present) row[k++] = suffix.id;
  for (; k < width; ++k) row[k] = pad;
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

Batch doubled(const Batch& b) {
  const auto twice = [](auto v) {
    v.insert(v.end(), v.begin(), v.end());
    return v;
  };
  Batch d;
  d.size = 2 * b.size;
  d.src_len = b.src_len;
  d.tgt_len = b.tgt_len;
  d.src = twice(b.src);
  d.src_lengths = twice(b.src_lengths);
  d.tgt_in = twice(b.tgt_in);
  d.tgt_out = twice(b.tgt_out);
  d.tgt_lengths = twice(b.tgt_lengths);
  d.indices = twice(b.indices);
  return d;
}

Batch make_batch(const ParallelCorpus& corpus, const int64_t* indices, int64_t count,
                 const SpecialIds& ids) {
  Batch b;
  fill_batch(corpus, indices, count, b, ids);
  return b;
}

void fill_batch(const ParallelCorpus& corpus, const int64_t* indices, int64_t count, Batch& b,
                const SpecialIds& ids) {
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
    fill_row(&b.src[r * b.src_len], b.src_len, kNone, x.data, x.size, {true, ids.eos}, ids.pad);
    fill_row(&b.tgt_in[r * b.tgt_len], b.tgt_len, {true, ids.start}, y.data, y.size, kNone,
             ids.pad);
    fill_row(&b.tgt_out[r * b.tgt_len], b.tgt_len, kNone, y.data, y.size, {true, ids.eos}, ids.pad);
    b.src_lengths[r] = static_cast<int32_t>(source_row_length(x.size));
    b.tgt_lengths[r] = static_cast<int32_t>(target_row_length(y.size));
  }
}

SourceBatch make_source_batch(const std::vector<const std::vector<int32_t>*>& rows,
                              const std::vector<int64_t>& indices, const SpecialIds& ids) {
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
    fill_row(&b.src[r * b.src_len], b.src_len, kNone, x.data(), n, {true, ids.eos}, ids.pad);
    b.src_lengths[r] = static_cast<int32_t>(source_row_length(n));
  }
  return b;
}

}  // namespace tx::data
