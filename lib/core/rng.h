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
