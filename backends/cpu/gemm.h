// GemmCache: GEMMs through oneDNN: sgemm for 2-D, matmul primitives (created once per shape,
// transposes, alpha, beta and operand type) for strided batches; batches of a few rows
// (decoding) as loops.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "core/tensor.h"

namespace tx::cpu {

class GemmCache {
 public:
  GemmCache();
  ~GemmCache();
  // c = alpha * op(a) @ op(b) + beta * c for 2-D or batched 3-D f32 tensors (already checked).
  void run(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
           float alpha, float beta);
  // The same for batched 3-D tensors through one matmul primitive: a and b both f32, or both
  // bf16 (f32 sums into f32 c: --precision bf16's attention products, one call for all heads).
  void run_batched(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                   float alpha, float beta);
  size_t size() const;

 private:
  struct Entry;
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool, float, float, bool>;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tx::cpu
