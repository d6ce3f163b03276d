// ASan poisoning of memory that tx's own pools hold: what they keep for reuse, and the bytes of a
// block beyond what its tensor asked for, are unaddressable to AddressSanitizer.
#pragma once

#include <cstddef>

// Without this, the caching allocator and the step arena hide from ASan a write past a tensor's
// end (it lands in the same pooled block or its neighbour's) and a use after the tensor was
// given back (the block is still allocated to the pool): the errors that surface later as heap
// corruption far from their cause. Host memory only; no-ops in other builds.
#if defined(__SANITIZE_ADDRESS__)
#define TX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TX_ASAN 1
#endif
#endif

#ifdef TX_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace tx {

inline void asan_poison(const void* p, size_t bytes) {
#ifdef TX_ASAN
  if (p && bytes) ASAN_POISON_MEMORY_REGION(p, bytes);
#else
  (void)p, (void)bytes;
#endif
}

inline void asan_unpoison(const void* p, size_t bytes) {
#ifdef TX_ASAN
  if (p && bytes) ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#else
  (void)p, (void)bytes;
#endif
}

}  // namespace tx
