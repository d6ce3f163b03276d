// Counter-based random numbers: the same (seed, index) gives the same value on every backend.
#pragma once

#include <cstdint>

#include "core/half.h"  // TX_HOST_DEVICE

namespace tx {

// SplitMix64 finaliser: a bijective mix good enough for dropout masks and init.
TX_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) from the 24 high bits, so it is exact in float.
TX_HOST_DEVICE inline float uniform01(uint64_t seed, uint64_t index) {
  uint64_t h = mix64(seed * 0x9e3779b97f4a7c15ull + mix64(index + 0x632be59bd9b4e019ull));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

// Dropout's uniform in [0, 1): one 64-bit mix per 2^32 indices (the key) and a 32-bit hash per
// index, so a CPU loop vectorises it with AVX2 (which has no 64-bit multiply); two mix64 per
// element cost 14% of a training step. lowbias32 (Wellons' hash-prospector) avalanches well
// enough that masks of neighbouring elements and of different keys look independent.
TX_HOST_DEVICE inline uint32_t dropout_key(uint64_t seed, uint64_t index) {
  return static_cast<uint32_t>(mix64(seed * 0x9e3779b97f4a7c15ull + (index >> 32)) >> 32);
}
TX_HOST_DEVICE inline float dropout_uniform_keyed(uint32_t key, uint32_t index_low) {
  uint32_t x = index_low ^ key;
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  // Through int32: exact (24 bits) and a single AVX2 conversion.
  return static_cast<float>(static_cast<int32_t>(x >> 8)) * (1.0f / 16777216.0f);
}
TX_HOST_DEVICE inline float dropout_uniform(uint64_t seed, uint64_t index) {
  return dropout_uniform_keyed(dropout_key(seed, index), static_cast<uint32_t>(index));
}

// Host-side stream: hands out disjoint (seed, offset) ranges so each random op draws fresh numbers
// and a run replays exactly from the same seed and counter.
class Rng {
 public:
  explicit Rng(uint64_t seed = 1) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t counter() const { return counter_; }
  void set_counter(uint64_t c) { counter_ = c; }
  // Reserves n draws; returns the first index of the range.
  uint64_t take(uint64_t n) {
    uint64_t first = counter_;
    counter_ += n;
    return first;
  }
  float uniform() { return uniform01(seed_, take(1)); }
  // Standard normal by Box-Muller, for parameter initialisation on the host.
  float normal();

 private:
  uint64_t seed_;
  uint64_t counter_ = 0;
};

}  // namespace tx
