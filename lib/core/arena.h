// Arena: bump allocation of a step's activations from a few large blocks, rewound per step.
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"

namespace tx {

// Tensors handed out are borrowed: they stay valid until reset() or the arena's destruction.
// Blocks are kept across resets, so a steady-state step allocates nothing.
class Arena {
 public:
  explicit Arena(std::shared_ptr<Allocator> allocator, size_t block_bytes = size_t(64) << 20);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  Tensor allocate(const Shape& shape, DType dtype);
  // Makes all memory reusable; the tensors handed out before must no longer be used. When the
  // step spilled over several blocks, they are replaced by one holding the peak (plus 25%), so
  // steps of varying shapes stop growing the arena once the largest has been seen.
  void reset();
  size_t reserved_bytes() const;
  size_t used_bytes() const { return used_; }

 private:
  struct Block {
    void* data;
    size_t bytes;
  };
  std::shared_ptr<Allocator> allocator_;
  size_t block_bytes_;
  std::vector<Block> blocks_;
  size_t current_ = 0;  // index of the block being filled
  size_t offset_ = 0;   // bytes used in that block
  size_t used_ = 0;
  size_t peak_ = 0;  // the most bytes any step has used
};

}  // namespace tx
