// DecoderState: what incremental decoding keeps between steps, per decoder layer — the encoder
// output's keys and values (computed once per sentence) and a cache of the layer's own past
// self-attention keys and values.
//
// Rows and memory: the batch rows come in groups of group() consecutive rows that share one
// memory entry (row r reads entry r / group()): a sentence's beams. Cross-attention then runs
// per entry with the group's rows as its queries ([entries, group, d_model]), so the memory is
// never copied per beam, and a reorder moves it only when sentences leave or change places.
//
// Cache layout: [B, heads, capacity, d_head] per layer, preallocated and zero beyond the steps
// written so far. Step t writes its keys and values into time slot t (a scatter of B * heads
// rows) and its query attends to the whole capacity with key length t + 1 for every row, so
// the unwritten slots get probability exactly 0. Appending copies nothing else; a beam step's
// reorder gathers each layer's cache rows into their new order (one copy per step). Why not a view
// of the first t + 1 slots: ops take dense row-major tensors, and that view of a batch-outermost
// cache is strided; a time-outermost cache would make it dense, but the batched GEMM needs the
// batch outermost. The price is attention over `capacity` keys instead of t + 1: about
// 2 * capacity * d_model multiply-adds per token and layer beside ~12 * d_model^2 for the
// projections and the feed-forward network (< 10% for capacity 256, d_model 512). When a step
// finds the cache full, the capacity doubles (one copy), so the first capacity is a hint.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "nn/attention.h"

namespace tx::nn {

class DecoderState {
 public:
  DecoderState() = default;
  // memory: each decoder layer's cross-attention keys and values [B, heads, S, d_head];
  // memory_lengths i32 [B]: the source lengths. capacity: steps to preallocate (>= 1).
  DecoderState(Backend& be, std::vector<AttentionKV> memory, Tensor memory_lengths,
               int64_t capacity);

  int64_t batch() const { return batch_; }
  int64_t group() const { return group_; }    // rows per memory entry; batch() = entries * group()
  int64_t length() const { return length_; }  // steps decoded so far
  int64_t capacity() const { return capacity_; }
  int layers() const { return static_cast<int>(memory_.size()); }

  // Layer `layer`'s memory keys and values [batch() / group(), heads, S, d_head].
  const AttentionKV& memory(int layer) const { return memory_.at(layer); }
  const Tensor& memory_lengths() const { return memory_lengths_; }  // i32 [batch() / group()]

  // Prepares step length() for every layer: grows the caches when full and sets the slots
  // the step writes and the self-attention key lengths (length() + 1 for every row).
  void begin_step();
  // Writes one step's self-attention keys and values [B, heads, 1, d_head] of `layer` into
  // slot length() and returns that layer's whole cache [B, heads, capacity, d_head].
  AttentionKV append(int layer, const AttentionKV& step);
  // Counts the prepared step as decoded.
  void end_step();
  // i32 [B]: the self-attention key lengths of the prepared step.
  const Tensor& self_lengths() const { return self_lengths_; }

  // Keeps the batch rows `rows` (each new row's old row) in that order — beams as batch rows:
  // reorder after each step to the surviving hypotheses' parents; repeat rows to fan a
  // sentence out into beams; leave rows out when hypotheses finish. The self-attention caches
  // are gathered; the memory is regrouped: the largest group size whose blocks of new rows
  // each read one memory entry is kept, and the memory is gathered only when those entries
  // are not the current ones in order (sentences left, or rows moved across sentences). Rows
  // that all stay in place (0, 1, ..., batch() - 1) copy nothing.
  void reorder(const std::vector<int32_t>& rows);

 private:
  void grow(int64_t capacity);

  Backend* be_ = nullptr;
  std::vector<AttentionKV> memory_;    // per layer, [B, heads, S, d_head]
  std::vector<Tensor> keys_, values_;  // per layer, [B, heads, capacity, d_head]
  Tensor memory_lengths_;              // i32 [B]
  Tensor slots_;                       // i32 [B * heads]: rows of a cache seen as [rows, d_head]
  Tensor self_lengths_;                // i32 [B]
  int64_t batch_ = 0, group_ = 1, heads_ = 0, d_head_ = 0, capacity_ = 0, length_ = 0;
  bool in_step_ = false;
};

}  // namespace tx::nn
