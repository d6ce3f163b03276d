// GemmCache: GEMMs through oneDNN: sgemm for 2-D, matmul primitives (created once per shape,
// transposes, alpha and beta) for strided batches; batches of a few rows (decoding) as loops.
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
  size_t size() const;

 private:
  struct Entry;
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool, float, float>;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tx::cpu
