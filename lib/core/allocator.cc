#include "core/allocator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/asan_poison.h"
#include "core/error.h"

namespace tx {

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes <= 512) return 512;
  // Beyond 2^62 the power of two below would overflow (and the loop never end).
  TX_CHECK(bytes <= (size_t(1) << 62), "allocator: ", bytes, " bytes asked, more than any memory");
  // Round up to steps of 1/16 of the next power of two: little waste, few distinct sizes.
  size_t p = 1;
  while (p < bytes) p <<= 1;
  size_t step = p / 16 < 512 ? 512 : p / 16;
  return (bytes + step - 1) / step * step;
}

void* CachingAllocator::allocate(size_t bytes) {
  if (exact_) {
    void* p = raw_->allocate(bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    in_use_ += bytes;
    ++raw_allocations_;
    return p;
  }
  size_t size = round_size(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (++allocations_ >= sweep_every_) sweep();
    auto it = free_.lower_bound(size);
    if (it != free_.end() && it->first <= 2 * size) {
      const size_t block = it->first;
      void* p = it->second.back().p;
      cached_ -= it->second.back().counted;
      it->second.pop_back();
      if (it->second.empty()) free_.erase(it);
      if (block != size) larger_.emplace(p, block);
      in_use_ += block;
      above_request_ += block - size;
      if (host_) asan_unpoison(p, bytes);
      return p;
    }
  }
  void* p;
  try {
    p = raw_->allocate(size);
  } catch (const Error&) {
    // Out of memory while blocks of other sizes sit cached: give them back and try once more.
    release_cached();
    p = raw_->allocate(size);
  }
  if (host_) asan_poison(static_cast<char*>(p) + bytes, size - bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  in_use_ += size;
  ++raw_allocations_;
  return p;
}

void CachingAllocator::deallocate(void* p, size_t bytes) {
  if (!p) return;
  if (exact_) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      in_use_ -= bytes;
    }
    raw_->deallocate(p, bytes);
    return;
  }
  size_t size = round_size(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = larger_.find(p); it != larger_.end()) {
      above_request_ -= it->second - size;
      size = it->second;
      larger_.erase(it);
    }
    in_use_ -= size;
    size_t counted = size;
    if (auto it = resident_.find(p); it != resident_.end()) {
      counted = std::min(size, it->second);
      resident_.erase(it);
    }
    if (cached_ + counted <= max_cached_) {
      free_[size].push_back({p, period_, counted});
      cached_ += counted;
      if (host_) asan_poison(p, size);
      return;
    }
  }
  give_back(p, size);
}

size_t CachingAllocator::discard(void* p, size_t bytes, size_t keep) {
  if (exact_) return raw_->discard(p, bytes, keep);
  size_t size = round_size(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = larger_.find(p); it != larger_.end()) size = it->second;
  }
  // The whole block, not only the request: a block handed out above its class keeps the pages
  // its earlier, larger users touched.
  const size_t resident = std::min(size, raw_->discard(p, size, keep));
  std::lock_guard<std::mutex> lock(mutex_);
  // Discarded twice: the fewer bytes count. Writes after a discard are not seen, so a user
  // discards just before it frees (DecoderState's destructor).
  auto [it, fresh] = resident_.emplace(p, resident);
  if (!fresh) it->second = std::min(it->second, resident);
  return resident;
}

void CachingAllocator::give_back(void* p, size_t size) {
  // Unpoisoned first: the system may map these addresses again for someone else.
  if (host_) asan_unpoison(p, size);
  raw_->deallocate(p, size);
}

void CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [size, blocks] : free_)
    for (const Cached& c : blocks) give_back(c.p, size);
  free_.clear();
  cached_ = 0;
}

void CachingAllocator::sweep() {
  // A list is pushed and popped at its back, so its blocks idle since before this period are
  // a prefix of it.
  for (auto it = free_.begin(); it != free_.end();) {
    std::vector<Cached>& blocks = it->second;
    size_t stale = 0;
    while (stale < blocks.size() && blocks[stale].period < period_) ++stale;
    for (size_t i = 0; i < stale; ++i) {
      give_back(blocks[i].p, it->first);
      cached_ -= blocks[i].counted;
    }
    blocks.erase(blocks.begin(), blocks.begin() + static_cast<std::ptrdiff_t>(stale));
    it = blocks.empty() ? free_.erase(it) : std::next(it);
  }
  ++period_;
  allocations_ = 0;
  if (stats_)
    std::fprintf(stderr,
                 "allocator: period %llu: in use %.1f MB (%.1f MB above the requests), cached "
                 "%.1f MB, %llu fresh blocks so far\n",
                 static_cast<unsigned long long>(period_), in_use_ / 1048576.0,
                 above_request_ / 1048576.0, cached_ / 1048576.0,
                 static_cast<unsigned long long>(raw_allocations_));
}

namespace {
bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string(v) != "0";
}
}  // namespace

bool CachingAllocator::stats_requested() {
  return env_flag("TX_ALLOCATOR_STATS");
}

bool CachingAllocator::exact_requested() {
  return env_flag("TX_ALLOCATOR_EXACT");
}

size_t CachingAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_;
}

size_t CachingAllocator::in_use_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_use_;
}

size_t CachingAllocator::above_request_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return above_request_;
}

}  // namespace tx
