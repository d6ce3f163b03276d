#include "nn/decoder_state.h"

#include <algorithm>
#include <utility>

namespace tx::nn {

DecoderState::DecoderState(Backend& be, std::vector<AttentionKV> memory, Tensor memory_lengths,
                           int64_t capacity, int64_t slots)
    : be_(&be), memory_(std::move(memory)), memory_lengths_(std::move(memory_lengths)) {
  TX_CHECK(!memory_.empty(),
           "DecoderState: needs the memory keys and values of at least one layer");
  const Tensor& k = memory_.front().keys->value;
  TX_CHECK(k.ndim() == 4, "DecoderState: memory keys ", k.str(),
           " must be [batch, heads, time, d_head]");
  TX_CHECK(capacity >= 1, "DecoderState: capacity ", capacity, " must be at least 1");
  TX_CHECK(slots >= 0, "DecoderState: slots ", slots, " must not be negative");
  TX_CHECK(memory_lengths_.defined() && memory_lengths_.dtype() == DType::i32 &&
               memory_lengths_.shape() == Shape{k.dim(0)},
           "DecoderState: memory_lengths ", memory_lengths_.str(), " must be i32 [", k.dim(0), "]");
  batch_ = k.dim(0);
  heads_ = k.dim(1);
  d_head_ = k.dim(3);
  slots_ = std::max(batch_, slots);
  grow(capacity, slots_);
}

DecoderState::~DecoderState() {
  const auto written = static_cast<size_t>(length_ * slots_ * heads_ * d_head_) * sizeof(float);
  for (const Tensor& cache : keys_) cache.discard_after(written);
  for (const Tensor& cache : values_) cache.discard_after(written);
}

void DecoderState::begin_step() {
  TX_CHECK(!in_step_, "DecoderState: begin_step twice without end_step");
  if (length_ == capacity_) grow(2 * capacity_, slots_);
  for (int64_t r = 0; r < batch_; ++r) ancestry_[r * capacity_ + length_] = static_cast<int32_t>(r);
  rows_ = be_->upload(ancestry_, {batch_, capacity_});
  in_step_ = true;
}

CachedKV DecoderState::append(int layer, const AttentionKV& step) {
  TX_CHECK(in_step_, "DecoderState::append outside begin_step/end_step");
  TX_CHECK(layer >= 0 && layer < layers(), "DecoderState::append: layer ", layer, " of ", layers());
  const Shape want{batch_, heads_, 1, d_head_};
  TX_CHECK(step.keys->value.shape() == want && step.values->value.shape() == want,
           "DecoderState::append: step keys ", step.keys->value.str(), " and values ",
           step.values->value.str(), " must be ", want.str());
  // Time slot length() as [slots, heads * d_head] rows: the step's rows go to its first batch_.
  const Shape rows{capacity_ * slots_, heads_ * d_head_};
  const int64_t first = length_ * slots_;
  be_->copy(step.keys->value.view({batch_, heads_ * d_head_}),
            keys_[layer].view(rows).slice(first, first + batch_));
  be_->copy(step.values->value.view({batch_, heads_ * d_head_}),
            values_[layer].view(rows).slice(first, first + batch_));
  return {keys_[layer], values_[layer], rows_, length_ + 1};
}

void DecoderState::end_step() {
  TX_CHECK(in_step_, "DecoderState: end_step without begin_step");
  in_step_ = false;
  ++length_;
}

void DecoderState::grow(int64_t capacity, int64_t slots) {
  std::vector<int32_t> ancestry(static_cast<size_t>(batch_ * capacity), 0);
  for (int64_t r = 0; r < batch_; ++r)
    std::copy_n(ancestry_.begin() + r * capacity_, length_, ancestry.begin() + r * capacity);
  ancestry_ = std::move(ancestry);
  // Written rows (t, s) of the old cache, seen as [capacity * slots, heads * d_head], move to
  // row (t, s) of the new one; with the same slots that is its first length_ * slots rows.
  const int64_t row = heads_ * d_head_;
  Tensor moves;
  if (slots != slots_ && length_ > 0) {
    std::vector<int32_t> to(static_cast<size_t>(length_ * slots_));
    for (int64_t t = 0; t < length_; ++t)
      for (int64_t s = 0; s < slots_; ++s) to[t * slots_ + s] = static_cast<int32_t>(t * slots + s);
    moves = be_->upload(to, {length_ * slots_});
  }
  auto regrow = [&](Tensor& cache) {
    Tensor bigger = slots == slots_ ? be_->empty({capacity, slots, heads_, d_head_})
                                    : be_->zeros({capacity, slots, heads_, d_head_});
    if (length_ > 0) {
      const Tensor written = cache.view({capacity_ * slots_, row}).slice(0, length_ * slots_);
      Tensor into = bigger.view({capacity * slots, row});
      if (moves.defined())
        be_->scatter_add_rows(written, moves, into);
      else
        be_->copy(written, into.slice(0, length_ * slots_));
    }
    cache = bigger;
  };
  if (keys_.empty()) {
    keys_.resize(memory_.size());
    values_.resize(memory_.size());
  }
  for (Tensor& k : keys_) regrow(k);
  for (Tensor& v : values_) regrow(v);
  capacity_ = capacity;
  slots_ = slots;
}

namespace {

// The batch rows `index` of `t` ([B, everything else] seen as B rows), as a new tensor.
Tensor gather_batch(Backend& be, const Tensor& t, int64_t batch, const Tensor& index) {
  const int64_t rows = index.dim(0);
  std::vector<int64_t> dims = t.shape().dims();
  dims[0] = rows;
  Tensor out = be.empty(Shape(dims));
  // gather_rows checks the ids.
  be.gather_rows(t.view({batch, t.numel() / batch}), index, out.view({rows, t.numel() / batch}));
  return out;
}

// The largest group size g dividing rows.size() whose blocks of g new rows each read one memory
// entry (entry[r] of new row r), and those entries, one per block.
std::vector<int32_t> regroup(const std::vector<int32_t>& entry, int64_t* group) {
  const auto n = static_cast<int64_t>(entry.size());
  for (int64_t g = n; g >= 1; --g) {
    if (n % g) continue;
    bool uniform = true;
    for (int64_t r = 0; r < n && uniform; ++r) uniform = entry[r] == entry[r - r % g];
    if (!uniform) continue;
    *group = g;
    std::vector<int32_t> blocks;
    for (int64_t r = 0; r < n; r += g) blocks.push_back(entry[r]);
    return blocks;
  }
  *group = 1;
  return entry;  // n == 0
}

}  // namespace

void DecoderState::reorder(const std::vector<int32_t>& rows) {
  TX_CHECK(!in_step_, "DecoderState::reorder inside a step");
  const auto count = static_cast<int64_t>(rows.size());
  // Every row stays where it is (greedy search until a sentence ends): nothing moves.
  bool identity = count == batch_;
  for (int64_t r = 0; r < count && identity; ++r) identity = rows[r] == r;
  if (identity) return;
  std::vector<int32_t> entry(rows.size());
  for (int64_t r = 0; r < count; ++r) {
    TX_CHECK(rows[r] >= 0 && rows[r] < batch_, "DecoderState::reorder: row ", rows[r],
             " at position ", r, " is outside the batch of ", batch_, " rows");
    entry[r] = static_cast<int32_t>(rows[r] / group_);
  }
  std::vector<int32_t> ancestry(static_cast<size_t>(count * capacity_), 0);
  for (int64_t r = 0; r < count; ++r)
    std::copy_n(ancestry_.begin() + rows[r] * capacity_, length_, ancestry.begin() + r * capacity_);
  ancestry_ = std::move(ancestry);

  int64_t group = 1;
  const std::vector<int32_t> entries = regroup(entry, &group);
  const int64_t old_entries = batch_ / group_;
  bool same = static_cast<int64_t>(entries.size()) == old_entries;
  for (size_t e = 0; e < entries.size() && same; ++e) same = entries[e] == static_cast<int32_t>(e);
  if (!same) {
    const auto n = static_cast<int64_t>(entries.size());
    const Tensor pick = be_->upload(entries, {n});
    for (AttentionKV& kv : memory_)
      kv = {make_var(gather_batch(*be_, kv.keys->value, old_entries, pick)),
            make_var(gather_batch(*be_, kv.values->value, old_entries, pick))};
    // gather_rows moves f32 rows; lengths are small integers, exact in f32.
    Tensor lengths = be_->empty({old_entries}), picked = be_->empty({n});
    be_->cast(memory_lengths_, lengths);
    be_->gather_rows(lengths, pick, picked);
    memory_lengths_ = be_->empty({n}, DType::i32);
    be_->cast(picked, memory_lengths_);
  }
  batch_ = count;
  group_ = group;
  if (count > slots_) grow(capacity_, count);
}

}  // namespace tx::nn
