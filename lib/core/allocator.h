// Allocator: raw device memory for tensors, and a caching layer so steady-state steps never
// reach the system allocator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/device.h"

namespace tx {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p, size_t bytes) = 0;
  virtual Device device() const = 0;
  // Gives memory held for reuse back to the system (a caching allocator's free lists).
  virtual void trim() {}
  // The block p (allocated for `bytes`) will not be read beyond its first `keep` bytes until
  // written again: the system may take back those pages (a host allocator's madvise), so that a
  // block reused by shorter work does not keep the pages of the longest work it ever held.
  // Returns how many of the block's bytes may still be resident (`bytes` when none were taken).
  virtual size_t discard(void* /*p*/, size_t bytes, size_t /*keep*/) { return bytes; }
};

// Keeps freed blocks in per-size free lists and hands them out again; sizes are rounded up
// so that a training step's varying batch shapes reuse the same blocks. A request takes the
// smallest cached block that fits it and is at most twice its size: a beam search that shrinks
// its batch every few steps asks for sizes it has never asked for, and a fresh block costs a
// page fault per 4 KiB on first touch where a cached one costs nothing. At most
// max_cached_bytes sit in the lists: beyond that a freed block goes back to the raw allocator.
// A block discarded before it was freed counts what the raw allocator says may still be
// resident: a beam search's self-attention caches are sized for the longest output and written
// for a fraction of it, and counted whole they pushed every other block out of a 128 MiB cache
// (each cohort's caches and outputs then faulted in fresh pages: 354,000 faults in 1,000 lines).
// Every sweep_every allocations, the blocks that sat cached through the whole last period go
// back too: a stream whose shapes keep changing (tx-translate for hours) would otherwise leave
// a block of every size it ever used in the lists, and its memory would grow with the stream.
class CachingAllocator : public Allocator {
 public:
  explicit CachingAllocator(std::unique_ptr<Allocator> raw,
                            size_t max_cached_bytes = size_t(1) << 30,
                            uint64_t sweep_every = uint64_t(1) << 16)
      : raw_(std::move(raw)),
        max_cached_(max_cached_bytes),
        sweep_every_(sweep_every),
        stats_(stats_requested()),
        host_(raw_->device().type == DeviceType::cpu),
        exact_(exact_requested() && !host_) {}
  ~CachingAllocator() override { release_cached(); }

  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) override;
  Device device() const override { return raw_->device(); }
  void trim() override { release_cached(); }
  size_t discard(void* p, size_t bytes, size_t keep) override;

  // Returns every cached block to the raw allocator.
  void release_cached();
  // What the cached blocks count against max_cached_bytes: their sizes, or what may still be
  // resident of the blocks discarded before they were freed.
  size_t cached_bytes() const;
  // Bytes of the blocks handed out (their full sizes), and how many of them lie above what
  // their requests needed (a block up to twice a request's size may serve it).
  size_t in_use_bytes() const;
  size_t above_request_bytes() const;
  // Rounded size that allocate() really reserves for `bytes`.
  static size_t round_size(size_t bytes);
  // TX_ALLOCATOR_EXACT=1, on a device other than the CPU: every request gets a raw block of
  // exactly its size, freed at once, and arenas hand out one such block a tensor, so a checker
  // of the raw blocks (compute-sanitizer, the CUDA emulation's guard pages) sees an access past
  // a tensor's end, which inside a rounded or cached block lands in memory it counts as valid.
  // For checks, not for speed. The CPU keeps its blocks: AddressSanitizer already sees one byte
  // past a tensor there (the rest of a block is poisoned), and would not see into mmap'd ones.
  static bool exact_requested();

 private:
  std::unique_ptr<Allocator> raw_;
  mutable std::mutex mutex_;
  struct Cached {
    void* p;
    uint64_t period;  // the sweep period it was cached in
    size_t counted;   // what it counts in cached_
  };
  // Returns a block to the raw allocator.
  void give_back(void* p, size_t size);
  // Releases the blocks cached before the current period (under mutex_), then starts a new one.
  void sweep();
  static bool stats_requested();

  std::map<size_t, std::vector<Cached>> free_;  // no empty lists: lower_bound finds a block
  std::unordered_map<void*, size_t> larger_;    // blocks handed out above their request's class
  std::unordered_map<void*, size_t> resident_;  // blocks handed out and discarded: what may stay
  size_t max_cached_;
  size_t cached_ = 0;  // bytes in free_
  uint64_t sweep_every_;
  uint64_t allocations_ = 0;  // since the last sweep
  uint64_t period_ = 0;
  // What the blocks handed out hold (their full sizes) and how much of that lies above the
  // requests' own rounded sizes; printed at each sweep with TX_ALLOCATOR_STATS=1.
  size_t in_use_ = 0, above_request_ = 0;
  uint64_t raw_allocations_ = 0;
  bool stats_ = false;
  bool host_ = false;  // ASan sees its memory (core/asan_poison.h)
  bool exact_ = false;
};

}  // namespace tx
