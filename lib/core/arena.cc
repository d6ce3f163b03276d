#include "core/arena.h"

#include <algorithm>

namespace tx {

namespace {
constexpr size_t kAlign = 64;  // a cache line and any SIMD width
size_t align_up(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}
}  // namespace

Arena::Arena(std::shared_ptr<Allocator> allocator, size_t block_bytes)
    : allocator_(std::move(allocator)), block_bytes_(block_bytes) {}

Arena::~Arena() {
  for (Block& b : blocks_) allocator_->deallocate(b.data, b.bytes);
}

Tensor Arena::allocate(const Shape& shape, DType dtype) {
  size_t bytes = align_up(static_cast<size_t>(shape.numel()) * size_of(dtype));
  while (current_ < blocks_.size() && offset_ + bytes > blocks_[current_].bytes) {
    ++current_;
    offset_ = 0;
  }
  if (current_ == blocks_.size()) {
    size_t size = bytes > block_bytes_ ? bytes : block_bytes_;
    blocks_.push_back({allocator_->allocate(size), size});
    offset_ = 0;
  }
  void* p = static_cast<char*>(blocks_[current_].data) + offset_;
  offset_ += bytes;
  used_ += bytes;
  return Tensor::borrow(p, shape, dtype, allocator_->device());
}

void Arena::reset() {
  peak_ = std::max(peak_, used_);
  if (blocks_.size() > 1) {
    for (Block& b : blocks_) allocator_->deallocate(b.data, b.bytes);
    blocks_.clear();
    allocator_->trim();  // a caching allocator would otherwise keep the old blocks too
    size_t size = std::max(block_bytes_, peak_ + peak_ / 4);
    blocks_.push_back({allocator_->allocate(size), size});
  }
  current_ = 0;
  offset_ = 0;
  used_ = 0;
}

size_t Arena::reserved_bytes() const {
  size_t total = 0;
  for (const Block& b : blocks_) total += b.bytes;
  return total;
}

}  // namespace tx
