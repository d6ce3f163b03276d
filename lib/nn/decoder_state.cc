#include "nn/decoder_state.h"

#include <utility>

namespace tx::nn {

DecoderState::DecoderState(Backend& be, std::vector<AttentionKV> memory, Tensor memory_lengths,
                           int64_t capacity)
    : be_(&be), memory_(std::move(memory)), memory_lengths_(std::move(memory_lengths)) {
  TX_CHECK(!memory_.empty(),
           "DecoderState: needs the memory keys and values of at least one layer");
  const Tensor& k = memory_.front().keys->value;
  TX_CHECK(k.ndim() == 4, "DecoderState: memory keys ", k.str(),
           " must be [batch, heads, time, d_head]");
  TX_CHECK(capacity >= 1, "DecoderState: capacity ", capacity, " must be at least 1");
  TX_CHECK(memory_lengths_.defined() && memory_lengths_.dtype() == DType::i32 &&
               memory_lengths_.shape() == Shape{k.dim(0)},
           "DecoderState: memory_lengths ", memory_lengths_.str(), " must be i32 [", k.dim(0), "]");
  batch_ = k.dim(0);
  heads_ = k.dim(1);
  d_head_ = k.dim(3);
  capacity_ = capacity;
  for (size_t i = 0; i < memory_.size(); ++i) {
    keys_.push_back(be.zeros({batch_, heads_, capacity_, d_head_}));
    values_.push_back(be.zeros({batch_, heads_, capacity_, d_head_}));
  }
}

void DecoderState::begin_step() {
  TX_CHECK(!in_step_, "DecoderState: begin_step twice without end_step");
  if (length_ == capacity_) grow(2 * capacity_);
  std::vector<int32_t> slots(static_cast<size_t>(batch_ * heads_));
  for (int64_t bh = 0; bh < batch_ * heads_; ++bh)
    slots[bh] = static_cast<int32_t>(bh * capacity_ + length_);
  slots_ = be_->upload(slots, {batch_ * heads_});
  self_lengths_ = be_->empty({batch_}, DType::i32);
  be_->fill(self_lengths_, static_cast<float>(length_ + 1));
  in_step_ = true;
}

AttentionKV DecoderState::append(int layer, const AttentionKV& step) {
  TX_CHECK(in_step_, "DecoderState::append outside begin_step/end_step");
  TX_CHECK(layer >= 0 && layer < layers(), "DecoderState::append: layer ", layer, " of ", layers());
  const Shape want{batch_, heads_, 1, d_head_};
  TX_CHECK(step.keys->value.shape() == want && step.values->value.shape() == want,
           "DecoderState::append: step keys ", step.keys->value.str(), " and values ",
           step.values->value.str(), " must be ", want.str());
  // The slot is still zero (slots are written once, in order), so adding writes it exactly.
  const Shape rows{batch_ * heads_ * capacity_, d_head_};
  be_->scatter_add_rows(step.keys->value.view({batch_ * heads_, d_head_}), slots_,
                        keys_[layer].view(rows));
  be_->scatter_add_rows(step.values->value.view({batch_ * heads_, d_head_}), slots_,
                        values_[layer].view(rows));
  return {make_var(keys_[layer]), make_var(values_[layer])};
}

void DecoderState::end_step() {
  TX_CHECK(in_step_, "DecoderState: end_step without begin_step");
  in_step_ = false;
  ++length_;
}

void DecoderState::grow(int64_t capacity) {
  // Row (bh, t) of the old cache moves to row (bh, t) of the new one.
  std::vector<int32_t> moves(static_cast<size_t>(batch_ * heads_ * capacity_));
  for (int64_t bh = 0; bh < batch_ * heads_; ++bh)
    for (int64_t t = 0; t < capacity_; ++t)
      moves[bh * capacity_ + t] = static_cast<int32_t>(bh * capacity + t);
  Tensor index = be_->upload(moves, {static_cast<int64_t>(moves.size())});
  auto regrow = [&](Tensor& cache) {
    Tensor bigger = be_->zeros({batch_, heads_, capacity, d_head_});
    be_->scatter_add_rows(cache.view({batch_ * heads_ * capacity_, d_head_}), index,
                          bigger.view({batch_ * heads_ * capacity, d_head_}));
    cache = bigger;
  };
  for (Tensor& k : keys_) regrow(k);
  for (Tensor& v : values_) regrow(v);
  capacity_ = capacity;
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

void check_index(const Tensor& index, bool in_step, const char* what) {
  TX_CHECK(!in_step, "DecoderState::", what, " inside a step");
  TX_CHECK(index.defined() && index.dtype() == DType::i32 && index.ndim() == 1,
           "DecoderState::", what, ": index ", index.str(), " must be i32 [new batch]");
}

}  // namespace

void DecoderState::reorder_caches(const Tensor& index) {
  for (Tensor& k : keys_) k = gather_batch(*be_, k, batch_, index);
  for (Tensor& v : values_) v = gather_batch(*be_, v, batch_, index);
}

void DecoderState::reorder(const Tensor& index) {
  check_index(index, in_step_, "reorder");
  const int64_t rows = index.dim(0);
  for (AttentionKV& kv : memory_)
    kv = {make_var(gather_batch(*be_, kv.keys->value, batch_, index)),
          make_var(gather_batch(*be_, kv.values->value, batch_, index))};
  reorder_caches(index);
  // gather_rows moves f32 rows; lengths are small integers, exact in f32.
  Tensor lengths = be_->empty({batch_}), picked = be_->empty({rows});
  be_->cast(memory_lengths_, lengths);
  be_->gather_rows(lengths, index, picked);
  memory_lengths_ = be_->empty({rows}, DType::i32);
  be_->cast(picked, memory_lengths_);
  batch_ = rows;
}

void DecoderState::reorder_within(const Tensor& index) {
  check_index(index, in_step_, "reorder_within");
  TX_CHECK(index.dim(0) == batch_, "DecoderState::reorder_within: index ", index.str(),
           " must keep the batch of ", batch_, " rows; use reorder to change it");
  reorder_caches(index);
}

}  // namespace tx::nn
