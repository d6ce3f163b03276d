// The fiber scheduler behind cuda_runtime.h's emulation: one block at a time, every thread of the
// block a fiber, round-robin until each reaches a barrier or returns. A barrier that some live
// thread of the block (or warp) never reaches is reported as a deadlock.
//
// Fibers run on a pool of workers, one per thread slot, each with its own stack, created once
// with makecontext and afterwards switched with _setjmp/_longjmp (no signal-mask system call
// per switch): worker i runs thread i of every block.
#include <setjmp.h>
#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
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
  --w.alive;
  if (w.arrived > 0 && w.arrived == w.alive) {
    w.arrived = 0;
    ++w.generation;
  }
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

uint64_t shuffle_xor(uint64_t bits, int offset) {
  Warp& w = block.warps[size_t(current->warp)];
  w.slots[current->lane] = bits;
  warp_barrier();  // every lane has written
  const int from = current->lane ^ offset;
  const uint64_t out = from < 32 ? w.slots[from] : bits;
  warp_barrier();  // every lane has read before the next shuffle writes
  return out;
}

void run_grid(dim3 grid, dim3 blk, void (*body)(void*), void* context) {
  const long threads = long(blk.x) * blk.y * blk.z;
  if (threads <= 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.y > 65535 || grid.z > 65535) {
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
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
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
          for (size_t t = 0; t < size_t(threads); ++t) {
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

}  // namespace tx::emu
