#include "core/arena.h"

#include <algorithm>

#include "core/allocator.h"
#include "core/asan_poison.h"
#include "core/error.h"

namespace tx {

namespace {
constexpr size_t kAlign = 64;  // a cache line and any SIMD width
size_t align_up(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}
}  // namespace

// The owner of a step's tensors: their frees come back to the arena while the step lasts.
class Arena::Recycler : public Allocator {
 public:
  Recycler(Arena* arena, Device device) : arena_(arena), device_(device) {}
  void* allocate(size_t) override {
    TX_CHECK(false, "Arena: tensors are allocated through Arena::allocate");
    return nullptr;
  }
  void deallocate(void* p, size_t bytes) override {
    if (arena_) arena_->recycle(p, bytes);
  }
  Device device() const override { return device_; }
  void retire() { arena_ = nullptr; }  // its step is over: later frees are ignored

 private:
  Arena* arena_;
  Device device_;
};

Arena::Arena(std::shared_ptr<Allocator> allocator, size_t block_bytes)
    : allocator_(std::move(allocator)),
      recycler_(std::make_shared<Recycler>(this, allocator_->device())),
      block_bytes_(block_bytes),
      host_(allocator_->device().type == DeviceType::cpu),
      exact_(CachingAllocator::exact_requested() && !host_) {}

Arena::~Arena() {
  recycler_->retire();
  for (Block& b : blocks_) allocator_->deallocate(b.data, b.bytes);
}

void Arena::recycle(void* p, size_t bytes) {
  free_[bytes].push_back(p);
  if (host_) asan_poison(p, bytes);
}

void Arena::add_block(size_t size) {
  blocks_.push_back({allocator_->allocate(size), size});
  if (host_) asan_poison(blocks_.back().data, size);
}

Tensor Arena::allocate(const Shape& shape, DType dtype) {
  if (exact_) return Tensor::allocate(allocator_, shape, dtype);  // a block of its own
  // Rounded as the caching allocator rounds, so that the slightly different shapes of one
  // step (source and target lengths) share recycled blocks.
  const size_t asked = Tensor::bytes_for(shape, dtype);
  const size_t bytes = align_up(CachingAllocator::round_size(std::max<size_t>(1, asked)));
  auto it = free_.find(bytes);
  if (it != free_.end() && !it->second.empty()) {
    void* p = it->second.back();
    it->second.pop_back();
    if (host_) asan_unpoison(p, asked);
    return Tensor(std::make_shared<Storage>(p, bytes, recycler_->device(), recycler_), shape,
                  dtype);
  }
  while (current_ < blocks_.size() && offset_ + bytes > blocks_[current_].bytes) {
    ++current_;
    offset_ = 0;
  }
  if (current_ == blocks_.size()) {
    // After trim(), one block for the peak at once rather than a spill over small ones.
    const size_t want = blocks_.empty() && peak_ > 0 ? peak_ + peak_ / 8 : block_bytes_;
    add_block(std::max(bytes, want));
    offset_ = 0;
  }
  void* p = static_cast<char*>(blocks_[current_].data) + offset_;
  offset_ += bytes;
  used_ += bytes;
  if (host_) asan_unpoison(p, asked);
  return Tensor(std::make_shared<Storage>(p, bytes, recycler_->device(), recycler_), shape, dtype);
}

void Arena::reset() {
  recycler_->retire();
  recycler_ = std::make_shared<Recycler>(this, allocator_->device());
  free_.clear();
  peak_ = std::max(peak_, used_);
  if (blocks_.size() > 1) {
    for (Block& b : blocks_) allocator_->deallocate(b.data, b.bytes);
    blocks_.clear();
    allocator_->trim();  // a caching allocator would otherwise keep the old blocks too
    add_block(std::max(block_bytes_, peak_ + peak_ / 8));
  } else if (host_) {
    for (const Block& b : blocks_) asan_poison(b.data, b.bytes);  // the step's tensors are gone
  }
  current_ = 0;
  offset_ = 0;
  used_ = 0;
}

void Arena::trim() {
  reset();
  for (Block& b : blocks_) allocator_->deallocate(b.data, b.bytes);
  blocks_.clear();
  allocator_->trim();
}

size_t Arena::reserved_bytes() const {
  size_t total = 0;
  for (const Block& b : blocks_) total += b.bytes;
  return total;
}

}  // namespace tx
