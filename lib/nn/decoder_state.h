// DecoderState: what incremental decoding keeps between steps, per decoder layer — the encoder
// output's keys and values (computed once per sentence) and a cache of the layer's own past
// self-attention keys and values.
//
// Rows and memory: the batch rows come in groups of group() consecutive rows that share one
// memory entry (row r reads entry r / group()): a sentence's beams. Cross-attention reads each
// row's entry in place (Backend::attend_memory), so the memory is never copied per beam, and a
// reorder moves it only when sentences leave or change places.
//
// Cache layout: time-major, [capacity, slots, heads, d_head] per layer: time slot t holds the
// keys and values of the rows decoded at step t, row r in slot r. Each row keeps its ancestry,
// the slot of its ancestor at every step (a host table, uploaded as i32 [batch, capacity] each
// step), and attention reads the cache through it (Backend::attend_cached) over the steps
// written so far only. A beam step's reorder then gathers that table, a few integers per row,
// instead of every layer's keys and values (which the [batch, heads, capacity, d_head] cache
// of before copied in full each step: 6% of a beam 5 x 32 run). A slot stays allocated until
// the state ends, whether a row still reads it or not; `slots` is the most rows the state has
// had. When a step finds the cache full, the capacity doubles (one copy of the written part),
// and more rows than slots add slots (a copy too), so the first capacity and slots are hints:
// beam search gives the longest output and the rows after the fan-out, and never copies.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "nn/attention.h"

namespace tx::nn {

class DecoderState {
 public:
  DecoderState() = default;
  // memory: each decoder layer's cross-attention keys and values [B, heads, S, d_head];
  // memory_lengths i32 [B]: the source lengths. capacity: steps to preallocate (>= 1); slots:
  // rows to preallocate (at least B).
  DecoderState(Backend& be, std::vector<AttentionKV> memory, Tensor memory_lengths,
               int64_t capacity, int64_t slots = 0);
  // Gives the caches' never-written steps back to the allocator as untouched (discard_after):
  // the caches are sized for the longest possible output, and a reused block would otherwise
  // keep resident every page the longest state that ever held it wrote.
  ~DecoderState();
  DecoderState(DecoderState&&) = default;
  DecoderState& operator=(DecoderState&&) = default;

  int64_t batch() const { return batch_; }
  int64_t group() const { return group_; }    // rows per memory entry; batch() = entries * group()
  int64_t length() const { return length_; }  // steps decoded so far
  int64_t capacity() const { return capacity_; }
  int64_t slots() const { return slots_; }  // rows the caches hold (>= batch())
  int layers() const { return static_cast<int>(memory_.size()); }

  // Layer `layer`'s memory keys and values [batch() / group(), heads, S, d_head].
  const AttentionKV& memory(int layer) const { return memory_.at(layer); }
  const Tensor& memory_lengths() const { return memory_lengths_; }  // i32 [batch() / group()]

  // Prepares step length() for every layer: grows the caches when full and extends each row's
  // ancestry by its own slot.
  void begin_step();
  // Writes one step's self-attention keys and values [B, heads, 1, d_head] of `layer` into
  // time slot length() and returns that layer's cache with the rows' ancestry, length() + 1
  // steps visible.
  CachedKV append(int layer, const AttentionKV& step);
  // Counts the prepared step as decoded.
  void end_step();

  // Keeps the batch rows `rows` (each new row's old row) in that order — beams as batch rows:
  // reorder after each step to the surviving hypotheses' parents; repeat rows to fan a
  // sentence out into beams; leave rows out when hypotheses finish. The ancestry is gathered
  // (the caches grow by slots when there are more rows than ever before); the memory is
  // regrouped: the largest group size whose blocks of new rows each read one memory entry is
  // kept, and the memory is gathered only when those entries are not the current ones in
  // order (sentences left, or rows moved across sentences). Rows that all stay in place
  // (0, 1, ..., batch() - 1) copy nothing.
  void reorder(const std::vector<int32_t>& rows);

 private:
  // Reallocates the caches as [capacity, slots, heads, d_head], keeping the written steps.
  void grow(int64_t capacity, int64_t slots);

  Backend* be_ = nullptr;
  std::vector<AttentionKV> memory_;    // per layer, [B, heads, S, d_head]
  std::vector<Tensor> keys_, values_;  // per layer, [capacity, slots, heads, d_head]
  Tensor memory_lengths_;              // i32 [B]
  std::vector<int32_t> ancestry_;      // [B, capacity]: row r's slot at step t
  Tensor rows_;                        // ancestry_ on the backend, for the prepared step
  int64_t batch_ = 0, group_ = 1, heads_ = 0, d_head_ = 0, capacity_ = 0, length_ = 0;
  int64_t slots_ = 0;
  bool in_step_ = false;
};

}  // namespace tx::nn
