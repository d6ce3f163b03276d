// Arena: bump allocation of a step's activations from a few large blocks, rewound per step.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace tx {

// Tensors handed out stay valid until reset() or the arena's destruction. One freed before
// then (its last handle dropped) is recycled: a later request of the same rounded size in the
// same step gets its memory, so the backward pass reuses the activations it has finished with
// for gradients. A tensor freed after the reset that ended its step is ignored. Blocks are kept
// across resets, so a steady-state step allocates nothing.
class Arena {
 public:
  explicit Arena(std::shared_ptr<Allocator> allocator, size_t block_bytes = size_t(64) << 20);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  Tensor allocate(const Shape& shape, DType dtype);
  // Makes all memory reusable; the tensors handed out before must no longer be used. When the
  // step spilled over several blocks, they are replaced by one holding the peak (plus 1/8), so
  // steps of varying shapes stop growing the arena once the largest has been seen.
  void reset();
  // reset(), then gives every block back: for rare work between steps (a checkpoint save,
  // validation) that would otherwise hold its memory on top of the arena's. The next step
  // takes one block for the peak seen so far.
  void trim();
  size_t reserved_bytes() const;
  // Bytes bump-allocated in this step (recycled requests add nothing): the step's high-water mark.
  size_t used_bytes() const { return used_; }

 private:
  class Recycler;
  struct Block {
    void* data;
    size_t bytes;
  };
  void recycle(void* p, size_t bytes);
  void add_block(size_t size);

  std::shared_ptr<Allocator> allocator_;
  std::shared_ptr<Recycler> recycler_;         // owner of this step's tensors
  std::map<size_t, std::vector<void*>> free_;  // freed in this step, by rounded size
  size_t block_bytes_;
  std::vector<Block> blocks_;
  size_t current_ = 0;  // index of the block being filled
  size_t offset_ = 0;   // bytes used in that block
  size_t used_ = 0;
  size_t peak_ = 0;     // the most bytes any step has used
  bool host_ = false;   // ASan sees its memory (core/asan_poison.h)
  bool exact_ = false;  // TX_ALLOCATOR_EXACT off the CPU: each tensor its own block (allocator.h)
};

}  // namespace tx
