// Core: Shape, Tensor views and slices, Arena, CachingAllocator, half.h conversions, Rng,
// error messages and the backend registry.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <set>
#include <vector>

#include "backend/registry.h"
#include "core/allocator.h"
#include "core/arena.h"
#include "core/asan_poison.h"
#include "core/error.h"
#include "core/half.h"
#include "core/rng.h"
#include "core/tensor.h"

using Catch::Contains;
using tx::DType;
using tx::Shape;
using tx::Tensor;

namespace {

// Host memory from malloc, counting what is outstanding.
class CountingAllocator : public tx::Allocator {
 public:
  void* allocate(size_t bytes) override {
    ++allocations;
    live_bytes += bytes;
    return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  }
  void deallocate(void* p, size_t bytes) override {
    ++deallocations;
    live_bytes -= bytes;
    std::free(p);
  }
  // Takes everything past `keep` when takes_pages (as madvise would, to the byte), else nothing.
  size_t discard(void* p, size_t bytes, size_t keep) override {
    discarded.push_back({p, bytes, keep});
    return takes_pages ? keep : bytes;
  }
  tx::Device device() const override { return tx::Device{}; }

  struct Discard {
    void* p;
    size_t bytes, keep;
  };
  int allocations = 0;
  int deallocations = 0;
  size_t live_bytes = 0;
  std::vector<Discard> discarded;
  bool takes_pages = true;
};

bool is_f16_nan(uint16_t h) {
  return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}
bool is_bf16_nan(uint16_t h) {
  return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
}

}  // namespace

// ---- Shape --------------------------------------------------------------------------------------

TEST_CASE("core Shape: numel, rows, cols, negative indices, str", "[core]") {
  Shape s{2, 3, 5};
  CHECK(s.ndim() == 3);
  CHECK(s.numel() == 30);
  CHECK(s.rows() == 6);
  CHECK(s.cols() == 5);
  CHECK(s[0] == 2);
  CHECK(s[-1] == 5);
  CHECK(s[-3] == 2);
  CHECK(s.str() == "[2, 3, 5]");
  CHECK(Shape{}.numel() == 1);
  CHECK(Shape{}.rows() == 1);
  CHECK(Shape{}.str() == "[]");
  CHECK(Shape{7}.rows() == 1);
  CHECK(Shape{7}.cols() == 7);
  CHECK(Shape{4, 0, 3}.numel() == 0);
  // rows() is the product of the leading dimensions, also when the last one is empty.
  CHECK(Shape{3, 0}.rows() == 3);
  CHECK(Shape{2, 5, 0}.rows() == 10);
  CHECK(Shape{0}.rows() == 1);
  CHECK(Shape{2, 3} == Shape{2, 3});
  CHECK(Shape{2, 3} != Shape{3, 2});
  CHECK(Shape(std::vector<int64_t>{1, 2}) == Shape{1, 2});
  // Dimensions are held inline, up to kMaxDims; equality compares only the dimensions in use.
  CHECK(Shape{2, 3} != Shape{2, 3, 1});
  CHECK(Shape{} == Shape(std::vector<int64_t>{}));
  CHECK(Shape{1, 2, 3, 4, 5, 6}.numel() == 720);
  CHECK(Shape{1, 2, 3, 4, 5, 6}.dims() == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  CHECK_THROWS_AS(Shape({1, 2, 3, 4, 5, 6, 7}), tx::Error);
}

// ---- Tensor -------------------------------------------------------------------------------------

TEST_CASE("core Tensor: allocate, view and slice share memory at the right offset", "[core]") {
  auto alloc = std::make_shared<CountingAllocator>();
  {
    Tensor t = Tensor::allocate(alloc, {5, 3}, DType::f32);
    CHECK(t.defined());
    CHECK(t.nbytes() == 60);
    CHECK(t.str() == "f32[5, 3] on cpu");
    float* base = t.data<float>();
    for (int i = 0; i < 15; ++i) base[i] = float(i);

    Tensor v = t.view({3, 5});
    CHECK(v.raw() == t.raw());
    CHECK(v.shape() == Shape{3, 5});
    CHECK(v.same_memory(t));

    Tensor s = t.slice(1, 4);
    CHECK(s.shape() == Shape{3, 3});
    CHECK(s.data<float>() == base + 3);
    CHECK(s.data<float>()[0] == 3.0f);
    CHECK_FALSE(s.same_memory(t));
    CHECK(t.slice(5, 5).numel() == 0);
    Tensor ss = s.slice(1, 2);  // a slice of a slice
    CHECK(ss.data<float>() == base + 6);

    Tensor h = Tensor::allocate(alloc, {4, 2, 3}, DType::f16);
    CHECK(h.nbytes() == 48);
    CHECK(static_cast<char*>(h.slice(2, 4).raw()) == static_cast<char*>(h.raw()) + 2 * 6 * 2);
    CHECK(alloc->allocations == 2);
  }
  // Views and slices keep the storage alive; it is freed once, with the last of them.
  CHECK(alloc->deallocations == 2);
  CHECK(alloc->live_bytes == 0);
}

TEST_CASE("core Tensor: view and slice errors name the shapes", "[core]") {
  auto alloc = std::make_shared<CountingAllocator>();
  Tensor t = Tensor::allocate(alloc, {4, 6}, DType::f32);
  CHECK_THROWS_AS(t.view({5, 5}), tx::Error);
  CHECK_THROWS_WITH(t.view({5, 5}), Contains("view") && Contains("[4, 6]") && Contains("[5, 5]"));
  CHECK_THROWS_WITH(t.slice(3, 5), Contains("slice") && Contains("[4, 6]"));
  CHECK_THROWS_AS(t.slice(-1, 2), tx::Error);
  CHECK_THROWS_AS(t.slice(3, 2), tx::Error);
  CHECK_NOTHROW(t.slice(0, 4));
  Tensor scalar = Tensor::allocate(alloc, Shape{}, DType::f32);
  CHECK_THROWS_AS(scalar.slice(0, 1), tx::Error);
}

TEST_CASE("core Tensor: negative dimensions and too-small storage are rejected", "[core]") {
  auto alloc = std::make_shared<CountingAllocator>();
  CHECK_THROWS_AS(Tensor::allocate(alloc, {2, -3}, DType::f32), tx::Error);
  float buf[6];
  Tensor b = Tensor::borrow(buf, {2, 3}, DType::f32, tx::Device{});
  CHECK(b.data<float>() == buf);
  auto storage = std::make_shared<tx::Storage>(buf, sizeof buf, tx::Device{}, nullptr);
  CHECK_THROWS_WITH(Tensor(storage, {2, 4}, DType::f32), Contains("[2, 4]"));
  CHECK_THROWS_AS(Tensor(storage, {2, 3}, DType::f32, 4), tx::Error);
  CHECK_NOTHROW(Tensor(storage, {5}, DType::f32, 4));
  CHECK_FALSE(Tensor().defined());
  CHECK(Tensor().str() == "undefined tensor");
}

TEST_CASE("core Shape and Tensor: an index past the rank, a size no memory holds", "[core]") {
  const Shape s{2, 3};
  CHECK(s[-1] == 3);
  CHECK(s[-2] == 2);
  CHECK_THROWS_WITH(s[2], Contains("dimension 2 of [2, 3], which has 2"));
  CHECK_THROWS_AS(s[-3], tx::Error);
  CHECK_THROWS_AS(Shape{}[0], tx::Error);
  CHECK(Tensor::bytes_for({2, 3}, DType::f16) == 12);
  CHECK(Tensor::bytes_for({0, int64_t(1) << 62}, DType::f32) == 0);
  CHECK_THROWS_WITH(Tensor::bytes_for({4, -1}, DType::f32), Contains("negative dimension"));
  // Products that wrap around 2^64 into a small block, or past what the allocator can round: a
  // damaged model file's sizes hung the loader in round_size's loop.
  CHECK_THROWS_WITH(Tensor::bytes_for({int64_t(1) << 31, int64_t(1) << 31, 64}, DType::f32),
                    Contains("more than 2^56 bytes"));
  CHECK_THROWS_AS(Tensor::bytes_for({int64_t(1) << 62, 4}, DType::f32), tx::Error);
  auto alloc = std::make_shared<CountingAllocator>();
  CHECK_THROWS_AS(Tensor::allocate(alloc, {int64_t(1) << 40, int64_t(1) << 40}, DType::f32),
                  tx::Error);
  CHECK(alloc->allocations == 0);
  CHECK(tx::CachingAllocator::round_size(size_t(1) << 62) == size_t(1) << 62);
  CHECK_THROWS_WITH(tx::CachingAllocator::round_size((size_t(1) << 62) + 1),
                    Contains("more than any memory"));
  CHECK_THROWS_AS(tx::CachingAllocator::round_size(SIZE_MAX), tx::Error);
}

TEST_CASE("core Tensor: empty tensors still get storage", "[core]") {
  auto alloc = std::make_shared<CountingAllocator>();
  Tensor t = Tensor::allocate(alloc, {0, 7}, DType::f32);
  CHECK(t.defined());
  CHECK(t.numel() == 0);
  CHECK(t.nbytes() == 0);
}

// ---- Arena --------------------------------------------------------------------------------------

TEST_CASE("core Arena: aligned, non-overlapping, reset reuses the same blocks", "[core]") {
  auto alloc = std::make_shared<CountingAllocator>();
  {
    tx::Arena arena(alloc, 8192);  // room for all of them: sizes round up to 512 bytes or more
    std::vector<Tensor> ts;
    for (int64_t n : {1, 7, 33, 100, 200, 3, 500}) ts.push_back(arena.allocate({n}, DType::f32));
    for (size_t i = 0; i < ts.size(); ++i) {
      auto a = reinterpret_cast<uintptr_t>(ts[i].raw());
      CHECK(a % 64 == 0);
      for (size_t j = 0; j < i; ++j) {
        auto b = reinterpret_cast<uintptr_t>(ts[j].raw());
        bool disjoint = a + ts[i].nbytes() <= b || b + ts[j].nbytes() <= a;
        CHECK(disjoint);
      }
    }
    int blocks = alloc->allocations;
    CHECK(blocks == 1);
    CHECK(arena.reserved_bytes() >= 8192);
    CHECK(arena.used_bytes() >= (1 + 7 + 33 + 100 + 200 + 3 + 500) * 4);
    void* first = ts[0].raw();

    arena.reset();
    CHECK(arena.used_bytes() == 0);
    Tensor again = arena.allocate({1}, DType::f32);
    CHECK(again.raw() == first);  // rewound, not reallocated
    for (int64_t n : {7, 33, 100, 200, 3, 500}) arena.allocate({n}, DType::f32);
    CHECK(alloc->allocations == blocks);  // steady state: nothing new

    // A request larger than a block gets a block of its own.
    Tensor big = arena.allocate({10000}, DType::f32);
    CHECK(big.nbytes() == 40000);
    CHECK(arena.reserved_bytes() >= 40000 + 4096);
    CHECK(reinterpret_cast<uintptr_t>(big.raw()) % 64 == 0);
  }
  CHECK(alloc->live_bytes == 0);
  CHECK(alloc->deallocations == alloc->allocations);
}

TEST_CASE("core Arena: a tensor freed within its step is recycled, one freed after reset is not",
          "[core]") {
  auto alloc = std::make_shared<CountingAllocator>();
  tx::Arena arena(alloc, 1 << 20);
  void* freed;
  {
    Tensor a = arena.allocate({1000}, DType::f32);
    freed = a.raw();
  }
  const size_t used = arena.used_bytes();
  Tensor b = arena.allocate({1000}, DType::f32);  // the same rounded size: a's memory again
  CHECK(b.raw() == freed);
  CHECK(arena.used_bytes() == used);
  Tensor c = arena.allocate({1000}, DType::f32);  // a's memory is taken: new memory
  CHECK(c.raw() != freed);
  CHECK(arena.used_bytes() > used);
  Tensor other = arena.allocate({3000}, DType::f32);  // another size never gets a's block
  CHECK(other.raw() != freed);

  arena.reset();
  b = Tensor();  // freed after its step: must not be handed out beside the bump allocation
  Tensor d = arena.allocate({1000}, DType::f32);
  Tensor e = arena.allocate({1000}, DType::f32);
  CHECK(d.raw() != e.raw());
  CHECK(arena.used_bytes() >= 2 * 1000 * sizeof(float));
}

TEST_CASE("core Arena: trim gives every block back, and the next step takes one block for the peak",
          "[core]") {
  auto alloc = std::make_shared<CountingAllocator>();
  tx::Arena arena(alloc, 4096);
  std::vector<Tensor> live;
  for (int i = 0; i < 3; ++i) live.push_back(arena.allocate({750}, DType::f32));  // 3 blocks
  live.clear();
  arena.trim();
  CHECK(arena.reserved_bytes() == 0);
  CHECK(alloc->live_bytes == 0);
  const int before = alloc->allocations;
  for (int i = 0; i < 3; ++i) live.push_back(arena.allocate({750}, DType::f32));
  CHECK(alloc->allocations == before + 1);  // one block holds the whole step again
  CHECK(arena.reserved_bytes() >= 3 * 3072);
}

// ---- CachingAllocator ---------------------------------------------------------------------------

TEST_CASE(
    "core Arena and CachingAllocator under ASan: pooled bytes and bytes past a tensor are "
    "unaddressable",
    "[core]") {
#ifndef TX_ASAN
  std::cout << "SKIPPED: not an AddressSanitizer build (TX_SANITIZE=ON)" << std::endl;
#else
  auto poisoned = [](const void* p) { return __asan_address_is_poisoned(p) != 0; };
  auto cache = std::make_shared<tx::CachingAllocator>(std::make_unique<CountingAllocator>());
  {
    tx::Arena arena(cache, 1 << 16);
    Tensor a = arena.allocate({100}, DType::f32);
    const char* pa = static_cast<const char*>(a.raw());
    CHECK_FALSE(poisoned(pa));
    CHECK_FALSE(poisoned(pa + 399));
    CHECK(poisoned(pa + 400));  // past the 100 floats, inside the rounded 512 bytes
    Tensor b = arena.allocate({10}, DType::f32);
    CHECK(poisoned(static_cast<const char*>(b.raw()) + 40));
    a = Tensor();  // back to the arena within the step
    CHECK(poisoned(pa));
    Tensor c = arena.allocate({50}, DType::f32);  // a's block again, 200 bytes of it
    CHECK(c.raw() == pa);
    CHECK_FALSE(poisoned(pa + 199));
    CHECK(poisoned(pa + 200));
    const char* pb = static_cast<const char*>(b.raw());
    arena.reset();  // the step's tensors are gone though b and c are still held
    CHECK(poisoned(pb));
    CHECK(poisoned(pa));
  }
  void* p = cache->allocate(1000);
  const char* q = static_cast<const char*>(p);
  CHECK_FALSE(poisoned(q + 999));
  CHECK(poisoned(q + 1000));
  cache->deallocate(p, 1000);
  CHECK(poisoned(q));  // cached: a use after free is reported
  void* again = cache->allocate(600);
  CHECK(again == p);
  CHECK_FALSE(poisoned(q + 599));
  CHECK(poisoned(q + 600));
  cache->deallocate(again, 600);
  cache->release_cached();  // back to the system: addressable to its next owner
  CHECK(cache->cached_bytes() == 0);
#endif
}

TEST_CASE("core CachingAllocator::round_size: 512-byte minimum, at most 12.5% waste", "[core]") {
  using CA = tx::CachingAllocator;
  CHECK(CA::round_size(1) == 512);
  CHECK(CA::round_size(512) == 512);
  CHECK(CA::round_size(513) == 1024);
  CHECK(CA::round_size(1024) == 1024);
  CHECK(CA::round_size(10000) == 10240);
  CHECK(CA::round_size(size_t(1) << 20) == size_t(1) << 20);
  CHECK(CA::round_size((size_t(1) << 20) + 1) == (size_t(1) << 20) + (size_t(1) << 17));
  size_t prev = 0;
  for (size_t b = 1; b < (size_t(1) << 22); b = b * 9 / 8 + 1) {
    size_t r = CA::round_size(b);
    INFO("bytes " << b << " -> " << r);
    CHECK(r >= b);
    CHECK(r % 512 == 0);
    CHECK(r >= prev);  // monotonic
    if (b > 4096) CHECK(r - b <= b / 8);
    CHECK(CA::round_size(r) == r);  // idempotent: a cached block fits its own class
    prev = r;
  }
}

TEST_CASE("core CachingAllocator: freed blocks are reused, release_cached returns them", "[core]") {
  auto raw = std::make_unique<CountingAllocator>();
  CountingAllocator* counter = raw.get();
  tx::CachingAllocator cache(std::move(raw));
  void* a = cache.allocate(1000);
  CHECK(counter->allocations == 1);
  cache.deallocate(a, 1000);
  CHECK(cache.cached_bytes() == tx::CachingAllocator::round_size(1000));
  void* b = cache.allocate(900);  // same size class
  CHECK(b == a);
  CHECK(counter->allocations == 1);
  void* c = cache.allocate(5000);  // another class
  CHECK(counter->allocations == 2);
  cache.deallocate(b, 900);
  cache.deallocate(c, 5000);
  cache.release_cached();
  CHECK(cache.cached_bytes() == 0);
  CHECK(counter->deallocations == 2);
  CHECK(counter->live_bytes == 0);
}

TEST_CASE("core CachingAllocator: a smaller request takes a cached block up to twice its size",
          "[core]") {
  using CA = tx::CachingAllocator;
  auto raw = std::make_unique<CountingAllocator>();
  CountingAllocator* counter = raw.get();
  CA cache(std::move(raw));
  void* big = cache.allocate(8192);
  cache.deallocate(big, 8192);
  void* small = cache.allocate(3000);  // 8192 > 2 * 3072: a block of its own
  CHECK(small != big);
  CHECK(counter->allocations == 2);
  CHECK(cache.in_use_bytes() == CA::round_size(3000));
  void* mid = cache.allocate(5000);  // class 5120: the 8192 block fits within twice that
  CHECK(mid == big);
  CHECK(counter->allocations == 2);
  CHECK(cache.cached_bytes() == 0);
  CHECK(cache.in_use_bytes() == 8192 + CA::round_size(3000));
  CHECK(cache.above_request_bytes() == 8192 - CA::round_size(5000));
  // Freed, the block goes back under its own size, not the request's.
  cache.deallocate(mid, 5000);
  CHECK(cache.cached_bytes() == 8192);
  CHECK(cache.in_use_bytes() == CA::round_size(3000));
  CHECK(cache.above_request_bytes() == 0);
  CHECK(cache.allocate(8192) == big);
  cache.deallocate(big, 8192);
  cache.deallocate(small, 3000);
  CHECK(cache.cached_bytes() == 8192 + CA::round_size(3000));
  cache.release_cached();
  CHECK(counter->live_bytes == 0);
}

TEST_CASE("core Tensor::discard_after: the whole block past the kept bytes, and only for owners",
          "[core]") {
  using CA = tx::CachingAllocator;
  auto raw = std::make_unique<CountingAllocator>();
  CountingAllocator* counter = raw.get();
  auto cache = std::make_shared<CA>(std::move(raw));
  void* big = cache->allocate(8192);
  cache->deallocate(big, 8192);
  {
    // 5000 bytes served from the cached 8192-byte block: the discard covers the block's end.
    Tensor t = Tensor::allocate(cache, {1250}, DType::f32);
    REQUIRE(t.raw() == big);
    t.discard_after(400);
    REQUIRE(counter->discarded.size() == 1);
    CHECK(counter->discarded[0].p == big);
    CHECK(counter->discarded[0].bytes == 8192);
    CHECK(counter->discarded[0].keep == 400);
    // A slice: the kept bytes count from the slice's start within the block.
    t.view({125, 10}).slice(25, 125).discard_after(40);
    REQUIRE(counter->discarded.size() == 2);
    CHECK(counter->discarded[1].keep == 25 * 40 + 40);
    // Nothing to discard, a slice that does not reach the storage's end, borrowed memory.
    t.discard_after(5000);
    t.view({125, 10}).slice(0, 100).discard_after(0);
    float local[4];
    Tensor::borrow(local, {4}, DType::f32, tx::Device{}).discard_after(0);
    CHECK(counter->discarded.size() == 2);
  }
  cache->release_cached();
}

TEST_CASE(
    "core CachingAllocator: a block idle through a whole sweep period goes back, a busy one "
    "stays",
    "[core]") {
  using CA = tx::CachingAllocator;
  auto raw = std::make_unique<CountingAllocator>();
  CountingAllocator* counter = raw.get();
  CA cache(std::move(raw), size_t(1) << 30, 4);  // a sweep every 4 allocations
  void* idle = cache.allocate(100000);
  void* busy = cache.allocate(1000);
  cache.deallocate(idle, 100000);
  cache.deallocate(busy, 1000);
  // Allocations 3 to 7 reuse `busy`; the 4th sweeps the blocks cached before period 0 (none).
  for (int i = 0; i < 5; ++i) {
    void* b = cache.allocate(1000);
    CHECK(b == busy);
    cache.deallocate(b, 1000);
  }
  CHECK(counter->deallocations == 0);
  CHECK(cache.cached_bytes() == CA::round_size(100000) + CA::round_size(1000));
  // The 8th sweeps again: `idle` sat cached through all of period 1, `busy` was used in it.
  void* b = cache.allocate(1000);
  CHECK(b == busy);
  CHECK(counter->deallocations == 1);
  CHECK(counter->live_bytes == CA::round_size(1000));
  CHECK(cache.cached_bytes() == 0);
  cache.deallocate(b, 1000);
  void* again = cache.allocate(100000);
  CHECK(again != nullptr);
  CHECK(counter->allocations == 3);  // `idle` is gone: a fresh block
  cache.deallocate(again, 100000);
}

TEST_CASE(
    "core CachingAllocator: a block discarded before it is freed counts only what may stay "
    "resident against max_cached_bytes",
    "[core]") {
  using CA = tx::CachingAllocator;
  const size_t mib = size_t(1) << 20;
  auto raw = std::make_unique<CountingAllocator>();
  CountingAllocator* counter = raw.get();
  CA cache(std::move(raw), mib / 2, 4);  // a cache smaller than the block; a sweep every 4
  void* p = cache.allocate(mib);
  // Written for its first 100 kB (a beam search's cache, sized for the longest output).
  CHECK(cache.discard(p, mib, 100000) == 100000);
  cache.deallocate(p, mib);
  CHECK(counter->deallocations == 0);  // counted whole, it would not fit
  CHECK(cache.cached_bytes() == 100000);
  // Handed out again, then freed undiscarded: counted whole, it goes back.
  CHECK(cache.allocate(mib) == p);
  CHECK(cache.cached_bytes() == 0);
  cache.deallocate(p, mib);
  CHECK(counter->deallocations == 1);
  CHECK(cache.cached_bytes() == 0);
  // Discarded twice, the fewer resident bytes count.
  void* q = cache.allocate(mib);
  cache.discard(q, mib, 200000);
  cache.discard(q, mib, 50000);
  cache.deallocate(q, mib);
  CHECK(cache.cached_bytes() == 50000);
  // A raw allocator that keeps the pages: the block counts whole and goes back.
  counter->takes_pages = false;
  void* r = cache.allocate(mib);
  CHECK(r == q);
  CHECK(cache.discard(r, mib, 1000) == mib);
  cache.deallocate(r, mib);
  CHECK(counter->deallocations == 2);
  CHECK(cache.cached_bytes() == 0);
  // A sweep gives back an idle discarded block and takes off what it counted.
  counter->takes_pages = true;
  void* s = cache.allocate(mib);
  cache.discard(s, mib, 3000);
  cache.deallocate(s, mib);
  CHECK(cache.cached_bytes() == 3000);
  for (int i = 0; i < 8; ++i) cache.deallocate(cache.allocate(100), 100);
  CHECK(counter->deallocations == 3);
  CHECK(cache.cached_bytes() == CA::round_size(100));
  cache.release_cached();
  CHECK(counter->live_bytes == 0);
}

// ---- half.h -------------------------------------------------------------------------------------

TEST_CASE("core half: f16 known values, round to nearest even, inf, NaN, subnormals", "[core]") {
  CHECK(tx::float_to_f16(1.0f) == 0x3c00);
  CHECK(tx::float_to_f16(-2.0f) == 0xc000);
  CHECK(tx::float_to_f16(0.0f) == 0x0000);
  CHECK(tx::float_to_f16(-0.0f) == 0x8000);
  CHECK(tx::float_to_f16(65504.0f) == 0x7bff);
  CHECK(tx::float_to_f16(65519.0f) == 0x7bff);  // below the midpoint
  CHECK(tx::float_to_f16(65520.0f) == 0x7c00);  // midpoint, ties to even = inf
  CHECK(tx::float_to_f16(1e10f) == 0x7c00);
  CHECK(tx::float_to_f16(-1e10f) == 0xfc00);
  CHECK(tx::float_to_f16(INFINITY) == 0x7c00);
  CHECK(tx::float_to_f16(-INFINITY) == 0xfc00);
  CHECK(is_f16_nan(tx::float_to_f16(NAN)));
  CHECK(is_f16_nan(tx::float_to_f16(tx::bits_float(0x7f800001u))));  // not inf
  // Ties to even in the normal range: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  CHECK(tx::float_to_f16(1.0f + 0x1.0p-11f) == 0x3c00);
  CHECK(tx::float_to_f16(1.0f + 0x3.0p-11f) == 0x3c02);
  CHECK(tx::float_to_f16(1.0f + 0x1.0p-11f + 0x1.0p-20f) == 0x3c01);     // above halfway
  CHECK(tx::float_to_f16(1.0f + 0x1.0p-11f - 0x1.0p-20f) == 0x3c00);     // below halfway
  CHECK(tx::float_to_f16(2047.0f + 0.5f) == tx::float_to_f16(2048.0f));  // mantissa carry
  // Subnormals: 2^-24 is the smallest.
  CHECK(tx::float_to_f16(0x1.0p-24f) == 0x0001);
  CHECK(tx::float_to_f16(0x1.0p-25f) == 0x0000);  // tie -> even (0)
  CHECK(tx::float_to_f16(0x1.8p-25f) == 0x0001);  // 0.75 ulp -> 1
  CHECK(tx::float_to_f16(0x3.0p-25f) == 0x0002);  // 1.5 ulp -> 2 (even)
  CHECK(tx::float_to_f16(0x5.0p-25f) == 0x0002);  // 2.5 ulp -> 2 (even)
  CHECK(tx::float_to_f16(-0x1.0p-24f) == 0x8001);
  CHECK(tx::float_to_f16(0x1.ffcp-15f) == 0x0400);  // 1023.5 ulp -> smallest normal
  CHECK(tx::float_to_f16(0x1.0p-14f) == 0x0400);
  CHECK(tx::float_to_f16(1e-10f) == 0x0000);
  // And back.
  CHECK(tx::f16_to_float(0x0001) == 0x1.0p-24f);
  CHECK(tx::f16_to_float(0x03ff) == 1023.0f * 0x1.0p-24f);
  CHECK(tx::f16_to_float(0x0400) == 0x1.0p-14f);
  CHECK(tx::f16_to_float(0x3555) == 0.333251953125f);
  CHECK(tx::f16_to_float(0x7bff) == 65504.0f);
  CHECK(tx::f16_to_float(0x7c00) == INFINITY);
  CHECK(tx::f16_to_float(0xfc00) == -INFINITY);
  CHECK(std::isnan(tx::f16_to_float(0x7e00)));
  CHECK(std::signbit(tx::f16_to_float(0x8000)));
}

TEST_CASE("core half: every f16 bit pattern round-trips through float", "[core]") {
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = tx::f16_to_float(static_cast<uint16_t>(h));
    uint16_t back = tx::float_to_f16(f);
    bool ok = is_f16_nan(static_cast<uint16_t>(h)) ? is_f16_nan(back) : back == h;
    if (!ok && bad++ < 5) FAIL_CHECK("f16 0x" << std::hex << h << " -> " << f << " -> 0x" << back);
  }
  CHECK(bad == 0);
}

TEST_CASE("core half: f16 rounding matches a double reference on random floats", "[core]") {
  // Independent reference: the nearest f16 value found by decoding candidates, ties to even.
  uint64_t state = 12345;
  int bad = 0;
  for (int i = 0; i < 200000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    // Exponents from 2^-27 to 2^17: subnormals, normals and overflow.
    double mant = 1.0 + double(state >> 41) / double(1ull << 23);
    int e = int((state >> 20) % 45) - 27;
    float f = static_cast<float>(std::ldexp(mant, e) * ((state >> 19) & 1 ? -1 : 1));
    uint16_t got = tx::float_to_f16(f);
    // Candidates: truncation toward zero and the next f16 up in magnitude.
    double a = std::fabs(double(f));
    uint16_t lo = 0;
    for (int step = 1 << 14; step; step >>= 1)
      if (lo + step <= 0x7c00 && tx::f16_to_float(static_cast<uint16_t>(lo + step)) <= a)
        lo = static_cast<uint16_t>(lo + step);
    uint16_t hi = static_cast<uint16_t>(lo + 1);
    double dl = a - tx::f16_to_float(lo);
    double dh = hi >= 0x7c00 ? (65536.0 - a) : tx::f16_to_float(hi) - a;  // 2^16 acts as inf
    uint16_t want = lo == 0x7c00 ? 0x7c00 : (dl < dh || (dl == dh && !(lo & 1))) ? lo : hi;
    if (f < 0) want |= 0x8000;
    if (got != want && bad++ < 5)
      FAIL_CHECK("float " << f << ": got 0x" << std::hex << got << " want 0x" << want);
  }
  CHECK(bad == 0);
}

TEST_CASE("core half: bf16 known values, ties to even, inf, NaN", "[core]") {
  CHECK(tx::float_to_bf16(1.0f) == 0x3f80);
  CHECK(tx::float_to_bf16(-2.0f) == 0xc000);
  CHECK(tx::float_to_bf16(-0.0f) == 0x8000);
  CHECK(tx::float_to_bf16(1.0f + 0x1.0p-8f) == 0x3f80);  // tie -> even (down)
  CHECK(tx::float_to_bf16(1.0f + 0x3.0p-8f) == 0x3f82);  // tie -> even (up)
  CHECK(tx::float_to_bf16(1.0f + 0x1.0p-8f + 0x1.0p-20f) == 0x3f81);
  CHECK(tx::float_to_bf16(65504.0f) == 0x4780);
  CHECK(tx::float_to_bf16(3.3895314e38f) == 0x7f7f);  // the largest bf16
  CHECK(tx::float_to_bf16(3.4028235e38f) == 0x7f80);  // FLT_MAX rounds to inf
  CHECK(tx::float_to_bf16(INFINITY) == 0x7f80);
  CHECK(tx::float_to_bf16(-INFINITY) == 0xff80);
  CHECK(is_bf16_nan(tx::float_to_bf16(NAN)));
  CHECK(is_bf16_nan(tx::float_to_bf16(tx::bits_float(0x7f800001u))));  // not inf
  CHECK(tx::float_to_bf16(tx::bits_float(0x00010000u)) == 0x0001);     // float subnormal
  CHECK(tx::bf16_to_float(0x3f80) == 1.0f);
  CHECK(tx::bf16_to_float(0x4049) == 3.140625f);
  CHECK(tx::bf16_to_float(0xff80) == -INFINITY);
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    uint16_t back = tx::float_to_bf16(tx::bf16_to_float(static_cast<uint16_t>(h)));
    bool ok = is_bf16_nan(static_cast<uint16_t>(h)) ? is_bf16_nan(back) : back == h;
    bad += !ok;
  }
  CHECK(bad == 0);
}

// ---- Rng ----------------------------------------------------------------------------------------

TEST_CASE("core Rng: determinism, ranges, counters and moments", "[core]") {
  // uniform01 is a pure function of (seed, index), in [0, 1), a multiple of 2^-24.
  CHECK(tx::uniform01(7, 123) != tx::uniform01(7, 124));
  CHECK(tx::uniform01(7, 123) != tx::uniform01(8, 123));
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    float u = tx::uniform01(42, uint64_t(i));
    REQUIRE(u >= 0.0f);
    REQUIRE(u < 1.0f);
    REQUIRE(u * 16777216.0f == std::floor(u * 16777216.0f));
    sum += u;
  }
  CHECK(std::fabs(sum / n - 0.5) < 0.005);

  // dropout_uniform: the same properties, and no visible correlation between neighbours (the
  // lag-1 correlation of 100k draws, on both sides of a 2^32 boundary where the key changes).
  CHECK(tx::dropout_uniform(7, 123) != tx::dropout_uniform(7, 124));
  CHECK(tx::dropout_uniform(7, 123) != tx::dropout_uniform(8, 123));
  for (uint64_t start : {uint64_t(0), (uint64_t(1) << 32) - uint64_t(n / 2)}) {
    double s1 = 0, s2 = 0, lag = 0;
    float prev = 0;
    for (int i = 0; i < n; ++i) {
      float u = tx::dropout_uniform(42, start + uint64_t(i));
      REQUIRE(u >= 0.0f);
      REQUIRE(u < 1.0f);
      REQUIRE(u * 16777216.0f == std::floor(u * 16777216.0f));
      s1 += u;
      s2 += double(u) * u;
      if (i > 0) lag += double(u) * prev;
      prev = u;
    }
    const double mean = s1 / n, var = s2 / n - mean * mean;
    CHECK(std::fabs(mean - 0.5) < 0.005);
    CHECK(std::fabs(var - 1.0 / 12) < 0.002);
    CHECK(std::fabs((lag / (n - 1) - mean * mean) / var) < 0.02);
  }
  // The keyed form is the same function with the key hoisted.
  CHECK(tx::dropout_uniform_keyed(tx::dropout_key(3, (uint64_t(5) << 32) + 9), 9) ==
        tx::dropout_uniform(3, (uint64_t(5) << 32) + 9));

  tx::Rng a(5), b(5), c(6);
  std::vector<float> sa, sb, sc;
  for (int i = 0; i < 100; ++i) {
    sa.push_back(a.uniform());
    sb.push_back(b.uniform());
    sc.push_back(c.uniform());
  }
  CHECK(sa == sb);
  CHECK(sa != sc);
  CHECK(a.counter() == 100);
  CHECK(a.seed() == 5);

  // take() hands out disjoint ranges; set_counter replays.
  tx::Rng r(9);
  CHECK(r.take(10) == 0);
  CHECK(r.take(5) == 10);
  CHECK(r.counter() == 15);
  float next = r.uniform();
  CHECK(next == tx::uniform01(9, 15));
  r.set_counter(15);
  CHECK(r.uniform() == next);

  // normal(): mean 0, variance 1, and reproducible.
  tx::Rng g(11), g2(11);
  double m = 0, m2 = 0;
  const int k = 50000;
  for (int i = 0; i < k; ++i) {
    double v = g.normal();
    REQUIRE(std::isfinite(v));
    REQUIRE(v == g2.normal());
    m += v;
    m2 += v * v;
  }
  m /= k;
  m2 = m2 / k - m * m;
  CHECK(std::fabs(m) < 0.03);
  CHECK(std::fabs(m2 - 1.0) < 0.05);
}

// ---- errors and the registry --------------------------------------------------------------------

TEST_CASE("core error: TX_CHECK concatenates its message into tx::Error", "[core]") {
  auto fails = [] { TX_CHECK(1 + 1 == 3, "op: ", 42, " vs ", Shape{1, 2}.str()); };
  CHECK_THROWS_AS(fails(), tx::Error);
  CHECK_THROWS_WITH(fails(), "op: 42 vs [1, 2]");
  CHECK_NOTHROW([] { TX_CHECK(true, "never"); }());
  CHECK(tx::str("a", 1, 'b', 2.5) == "a1b2.5");
}

TEST_CASE("core registry: an unknown backend name gives an error naming the available ones",
          "[core][registry]") {
  tx::register_builtin_backends();
  std::vector<std::string> names = tx::registered_backends();
  REQUIRE(std::find(names.begin(), names.end(), "cpu") != names.end());
  REQUIRE(std::find(names.begin(), names.end(), "cuda") != names.end());
  CHECK_THROWS_AS(tx::create_backend("tpu"), tx::Error);
  CHECK_THROWS_WITH(tx::create_backend("tpu"),
                    Contains("tpu") && Contains("cpu") && Contains("cuda"));
  CHECK_THROWS_WITH(tx::create_backend("tpu:1"), Contains("tpu:1") && Contains("cpu"));
  CHECK_THROWS_WITH(tx::create_backend("cuda:x"), Contains("cuda:x"));
  CHECK_THROWS_WITH(tx::create_backend("cpu:"), Contains("cpu:"));
  std::string why = tx::backend_unavailable_reason("tpu");
  CHECK_THAT(why, Contains("tpu") && Contains("cpu"));
  CHECK(tx::backend_unavailable_reason("cpu").empty());
}

TEST_CASE("core registry: the cpu backend is created by name", "[core][registry]") {
  tx::register_builtin_backends();
  std::unique_ptr<tx::Backend> be = tx::create_backend("cpu");
  REQUIRE(be);
  CHECK(be->name() == "cpu");
  CHECK(be->device() == tx::Device{});
  CHECK(be->allocator()->device() == be->device());
  // A backend that cannot run here says why, naming itself.
  std::string why = tx::backend_unavailable_reason("cuda");
  if (!why.empty()) CHECK_THROWS_WITH(tx::create_backend("cuda"), Contains("cuda"));
}

TEST_CASE("core registry: the cpu backend caches at most BackendOptions::max_cached_bytes",
          "[core][registry]") {
  tx::register_builtin_backends();
  tx::BackendOptions options;
  options.max_cached_bytes = size_t(3) << 20;
  std::unique_ptr<tx::Backend> be = tx::create_backend("cpu", options);
  auto* cache = dynamic_cast<tx::CachingAllocator*>(be->allocator().get());
  REQUIRE(cache);
  {
    // Five 1 MiB tensors freed together: three fit the cache, two go back to the system.
    std::vector<Tensor> live;
    for (int i = 0; i < 5; ++i) live.push_back(be->empty({262144}));
    CHECK(cache->in_use_bytes() == 5 * (size_t(1) << 20));
  }
  CHECK(cache->cached_bytes() == size_t(3) << 20);
  CHECK(cache->in_use_bytes() == 0);
  cache->release_cached();
  {
    // Four 4 MiB tensors written for their first 64 kiB and discarded past it: the pages
    // madvise takes are not counted, so all four stay cached.
    std::vector<Tensor> live;
    for (int i = 0; i < 4; ++i) {
      live.push_back(be->empty({1048576}));
      be->fill(live.back().slice(0, 16384), 1.0f);
      live.back().discard_after(65536);
    }
  }
  CHECK(cache->cached_bytes() == 4 * size_t(65536));
  CHECK(cache->in_use_bytes() == 0);
}

TEST_CASE("core Arena: a step that spills over blocks is coalesced into one at reset", "[core]") {
  auto alloc = std::make_shared<CountingAllocator>();
  tx::Arena arena(alloc, 4096);
  // Three 3000-byte tensors (3072 rounded), all alive, cannot share a 4096-byte block.
  std::vector<Tensor> live;
  for (int i = 0; i < 3; ++i) live.push_back(arena.allocate({750}, DType::f32));
  CHECK(alloc->allocations == 3);
  live.clear();
  arena.reset();
  // One block now holds the peak (3 x 3072 rounded bytes) with room to spare.
  CHECK(alloc->deallocations == 3);
  CHECK(alloc->allocations == 4);
  CHECK(arena.reserved_bytes() >= 3 * 3072);
  const int before = alloc->allocations;
  for (int step = 0; step < 5; ++step) {
    for (int n : {750, 700, 740}) live.push_back(arena.allocate({n}, DType::f32));
    live.clear();
    arena.reset();
  }
  CHECK(alloc->allocations == before);  // steady state: no new blocks for varying shapes
}

TEST_CASE("core CachingAllocator: at most max_cached_bytes are kept, the rest is freed", "[core]") {
  auto raw = std::make_unique<CountingAllocator>();
  CountingAllocator* counter = raw.get();
  const size_t block = tx::CachingAllocator::round_size(4096);
  tx::CachingAllocator cache(std::move(raw), 2 * block);
  void* p[3] = {cache.allocate(4096), cache.allocate(4096), cache.allocate(4096)};
  for (void* q : p) cache.deallocate(q, 4096);
  CHECK(cache.cached_bytes() == 2 * block);  // the third went back to the raw allocator
  CHECK(counter->deallocations == 1);
  void* again = cache.allocate(4096);
  CHECK(cache.cached_bytes() == block);  // reuse takes one out of the cache
  CHECK(counter->allocations == 3);
  cache.deallocate(again, 4096);
}
