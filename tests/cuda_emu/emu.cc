// The fiber scheduler behind cuda_runtime.h's emulation: one block at a time, every thread of the
// block a fiber, round-robin until each reaches a barrier or returns. A barrier that some live
// thread of the block (or warp) never reaches is reported as a deadlock.
//
// Fibers run on a pool of workers, one per thread slot, each with its own stack, created once
// with makecontext and afterwards switched with _setjmp/_longjmp (no signal-mask system call
// per switch): worker i runs thread i of every block.
#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cuda_runtime.h"

namespace tx::emu {

namespace {

constexpr size_t kStack = 256 * 1024;

struct Fiber {
  dim3 index;
  int warp = 0, lane = 0;
  bool done = false;
  long wait_block = -1;  // waiting for the block barrier to pass this generation
  long wait_warp = -1;   // waiting for the warp barrier to pass this generation
};

struct Worker {
  ucontext_t start;
  jmp_buf resume;
  bool started = false;
  std::unique_ptr<char[]> stack;
};

struct Warp {
  int alive = 0, arrived = 0;
  long generation = 0;
  uint64_t slots[32] = {};
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  int alive = 0, arrived = 0;
  long generation = 0;
};

ucontext_t scheduler_context;
jmp_buf scheduler;
Fiber* current = nullptr;
Worker* current_worker = nullptr;
Block block;
dim3 block_idx, block_dims, grid_dims;
void (*body_fn)(void*) = nullptr;
void* body_context = nullptr;
std::vector<std::unique_ptr<Worker>> workers;
// Each device block's mapping (its base and length), by the pointer handed out.
std::mutex mappings_mutex;
std::unordered_map<void*, std::pair<char*, size_t>> mappings;

void yield() {
  if (!_setjmp(current_worker->resume)) _longjmp(scheduler, 1);
}

// Counts a thread that left: barriers then wait for one thread fewer.
void leave(Fiber& f) {
  f.done = true;
  --block.alive;
  if (block.arrived > 0 && block.arrived == block.alive) {
    block.arrived = 0;
    ++block.generation;
  }
  Warp& w = block.warps[size_t(f.warp)];
  // The warp barrier serves only shuffles: a lane leaving while others wait in one leaves them
  // a value a GPU does not define.
  if (w.arrived > 0) {
    std::fprintf(stderr,
                 "emu: a thread of warp %d (block (%u, %u, %u)) returned while other lanes wait in "
                 "__shfl_xor_sync: a GPU gives them undefined values\n",
                 f.warp, block_idx.x, block_idx.y, block_idx.z);
    std::abort();
  }
  --w.alive;
}

// A worker's whole life: run the thread it is given, report, wait for the next.
void worker_main() {
  for (;;) {
    body_fn(body_context);
    leave(*current);
    yield();
  }
}

void resume(size_t t) {
  Worker& w = *workers[t];
  current_worker = &w;
  if (!_setjmp(scheduler)) {
    if (!w.started) {
      w.started = true;
      swapcontext(&scheduler_context, &w.start);
    } else {
      _longjmp(w.resume, 1);
    }
  }
  current_worker = nullptr;
}

void warp_barrier() {
  Warp& w = block.warps[size_t(current->warp)];
  const long g = w.generation;
  if (++w.arrived == w.alive) {
    w.arrived = 0;
    ++w.generation;
    return;
  }
  current->wait_warp = g;
  yield();
}

}  // namespace

const dim3& thread_index() {
  return current->index;
}
const dim3& block_index() {
  return block_idx;
}
const dim3& block_dim() {
  return block_dims;
}
const dim3& grid_dim() {
  return grid_dims;
}

void sync_threads() {
  const long g = block.generation;
  if (++block.arrived == block.alive) {
    block.arrived = 0;
    ++block.generation;
    return;
  }
  current->wait_block = g;
  yield();
}

uint64_t shuffle_xor(unsigned mask, uint64_t bits, int offset) {
  Warp& w = block.warps[size_t(current->warp)];
  if (mask != 0xffffffffu || w.alive != 32) {
    std::fprintf(stderr,
                 "emu: __shfl_xor_sync with mask %08x in a warp of %d live lanes (block (%u, %u, "
                 "%u), warp %d): a GPU gives undefined values unless all 32 lanes take part\n",
                 mask, w.alive, block_idx.x, block_idx.y, block_idx.z, current->warp);
    std::abort();
  }
  w.slots[current->lane] = bits;
  warp_barrier();  // every lane has written
  const int from = current->lane ^ offset;
  const uint64_t out = from < 32 ? w.slots[from] : bits;
  warp_barrier();  // every lane has read before the next shuffle writes
  return out;
}

void run_grid(dim3 grid, dim3 blk, void (*body)(void*), void* context) {
  const long threads = long(blk.x) * blk.y * blk.z;
  // sm_90's limits (CUDA C++ Programming Guide, compute capabilities table).
  if (threads <= 0 || threads > 1024 || blk.x > 1024 || blk.y > 1024 || blk.z > 64 || grid.x == 0 ||
      grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535) {
    std::fprintf(stderr, "emu: invalid launch shape grid (%u, %u, %u) block (%u, %u, %u)\n", grid.x,
                 grid.y, grid.z, blk.x, blk.y, blk.z);
    std::abort();
  }
  while (workers.size() < size_t(threads)) {
    auto w = std::make_unique<Worker>();
    w->stack.reset(new char[kStack]);
    getcontext(&w->start);
    w->start.uc_stack.ss_sp = w->stack.get();
    w->start.uc_stack.ss_size = kStack;
    w->start.uc_link = nullptr;
    makecontext(&w->start, worker_main, 0);
    workers.push_back(std::move(w));
  }
  body_fn = body;
  body_context = context;
  grid_dims = grid;
  block_dims = blk;
  block.fibers.resize(size_t(threads));
  block.warps.resize(size_t((threads + 31) / 32));
  // A GPU runs blocks, and the threads between two barriers, in no promised order: every other
  // launch runs both backwards, so a kernel whose result depends on the order differs between
  // its calls (the conformance suite calls each kernel many times).
  static bool backwards = true;
  backwards = !backwards;
  const unsigned long blocks = (unsigned long)grid.x * grid.y * grid.z;
  for (unsigned long b = 0; b < blocks; ++b) {
    const unsigned long n = backwards ? blocks - 1 - b : b;
    const unsigned bx = unsigned(n % grid.x), by = unsigned(n / grid.x % grid.y),
                   bz = unsigned(n / grid.x / grid.y);
    block_idx = dim3(bx, by, bz);
    for (Warp& w : block.warps) w = Warp{};
    block.alive = int(threads);
    block.arrived = 0;
    block.generation = 0;
    for (long t = 0; t < threads; ++t) {
      Fiber& f = block.fibers[size_t(t)];
      f = Fiber{};
      f.index = dim3(unsigned(t % blk.x), unsigned((t / blk.x) % blk.y),
                     unsigned(t / (long(blk.x) * blk.y)));
      f.warp = int(t / 32);
      f.lane = int(t % 32);
      ++block.warps[size_t(f.warp)].alive;
    }
    for (;;) {
      bool pending = false, progress = false;
      for (size_t i = 0; i < size_t(threads); ++i) {
        const size_t t = backwards ? size_t(threads) - 1 - i : i;
        Fiber& f = block.fibers[t];
        if (f.done) continue;
        pending = true;
        if (f.wait_block >= 0 && f.wait_block == block.generation) continue;
        if (f.wait_warp >= 0 && f.wait_warp == block.warps[size_t(f.warp)].generation) continue;
        f.wait_block = f.wait_warp = -1;
        current = &f;
        resume(t);
        current = nullptr;
        progress = true;
      }
      if (!pending) break;
      if (!progress) {
        std::fprintf(stderr,
                     "emu: deadlock in block (%u, %u, %u): a barrier or shuffle is not "
                     "reached by every live thread\n",
                     bx, by, bz);
        std::abort();
      }
    }
  }
}

void* device_alloc(size_t bytes) {
  static const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t body = std::max<size_t>(bytes, 1);  // unrounded: one byte past it faults
  const size_t span = (body + page - 1) / page * page + 2 * page;
  void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  char* base = static_cast<char*>(m);
  if (mprotect(base, page, PROT_NONE) != 0 || mprotect(base + span - page, page, PROT_NONE) != 0) {
    std::perror("emu: mprotect of a device block's guard pages");  // vm.max_map_count?
    std::abort();
  }
  char* user = base + span - page - body;
  std::memset(user, 0xff, body);
  std::lock_guard<std::mutex> lock(mappings_mutex);
  mappings[user] = {base, span};
  return user;
}

void device_free(void* p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mappings_mutex);
  auto it = mappings.find(p);
  if (it == mappings.end()) {
    std::fprintf(stderr, "emu: cudaFree of %p, which cudaMalloc did not return\n", p);
    std::abort();
  }
  munmap(it->second.first, it->second.second);
  mappings.erase(it);
}

void check_no_overlap(const void* dst, const void* src, size_t n, const char* what) {
  const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  if (n > 0 && dst != src && d < s + n && s < d + n) {
    std::fprintf(stderr, "emu: %s of %zu bytes from %p to %p: the ranges overlap\n", what, n, src,
                 dst);
    std::abort();
  }
}

}  // namespace tx::emu
