// A host emulation of the small part of the CUDA runtime and device language that
// backends/cuda uses, so that its kernels can run (slowly) on a machine without a GPU: every
// CUDA thread of a block is a fiber; __syncthreads() and warp shuffles are barriers between
// them; blocks run one after another (every other launch in reverse order, its threads too, as
// a GPU promises no order); device memory is host memory between guard pages; a stream runs
// each call at once. It checks the kernels' indexing, bounds, barriers and reductions against the
// conformance suite; it says nothing about speed, memory coalescing, or real concurrency.
//
// Included instead of the real <cuda_runtime.h> (this directory comes first on the include
// path of tx_cuda_emu_tests), with the kernel files compiled as C++.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
// Blocks run one at a time, so a function-local static is exactly one block's shared memory.
#define __shared__ static

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace tx::emu {

// The running fiber's coordinates.
const dim3& thread_index();
const dim3& block_index();
const dim3& block_dim();
const dim3& grid_dim();

void sync_threads();
// Exchanges 8 bytes with lane (lane ^ offset) of the same warp. As on a GPU, every lane named
// in `mask` must call it; and since a lane that has exited or does not exist (a partial warp)
// gives an undefined value, the emulation aborts unless the mask names all 32 lanes and all 32
// are live.
uint64_t shuffle_xor(unsigned mask, uint64_t bits, int offset);

// Runs body() as every thread of every block of the grid.
void run_grid(dim3 grid, dim3 block, void (*body)(void*), void* context);

template <typename... P>
struct Launch {
  dim3 grid, block;
  void (*kernel)(P...);
  template <typename... A>
  void operator()(A&&... args) const {
    std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
    struct Context {
      void (*kernel)(P...);
      std::tuple<std::decay_t<P>...>* params;
    } context{kernel, &params};
    run_grid(
        grid, block,
        [](void* c) {
          auto* ctx = static_cast<Context*>(c);
          std::apply(ctx->kernel, *ctx->params);
        },
        &context);
  }
};
template <typename... P>
Launch(dim3, dim3, void (*)(P...)) -> Launch<P...>;

}  // namespace tx::emu

#define TX_LAUNCH(kernel, grid, block, stream) \
  (void)(stream), ::tx::emu::Launch {          \
    dim3(grid), dim3(block), kernel            \
  }

#define threadIdx (::tx::emu::thread_index())
#define blockIdx (::tx::emu::block_index())
#define blockDim (::tx::emu::block_dim())
#define gridDim (::tx::emu::grid_dim())

inline void __syncthreads() {
  ::tx::emu::sync_threads();
}

template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int offset) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffle of up to 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = ::tx::emu::shuffle_xor(mask, bits, offset);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

// One OS thread runs every fiber: plain reads and writes are atomic enough.
inline int atomicCAS(int* address, int compare, int value) {
  const int old = *address;
  if (old == compare) *address = value;
  return old;
}

inline int max(int a, int b) {
  return a > b ? a : b;
}
inline int min(int a, int b) {
  return a < b ? a : b;
}

// ---- runtime API -------------------------------------------------------------------------------

enum cudaError_t { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
enum cudaMemcpyKind {
  cudaMemcpyHostToHost,
  cudaMemcpyHostToDevice,
  cudaMemcpyDeviceToHost,
  cudaMemcpyDeviceToDevice
};
struct CUstream_st {};
using cudaStream_t = CUstream_st*;
// Kernels and copies run at once here, so an event has always happened.
struct CUevent_st {};
using cudaEvent_t = CUevent_st*;
constexpr unsigned cudaEventDisableTiming = 2;
constexpr unsigned cudaStreamNonBlocking = 1;
struct cudaDeviceProp {
  char name[256];
  int major, minor;
};

inline const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "out of memory";
}
inline cudaError_t cudaGetLastError() {
  return cudaSuccess;
}
inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int) {
  return cudaSuccess;
}
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::strcpy(p->name, "host emulation");
  p->major = 9;
  p->minor = 0;
  return cudaSuccess;
}
namespace tx::emu {
// Device memory: a mapping of its own whose last accessible byte is the block's last (rounded
// to 4), with a page no one may touch on either side, filled with a NaN pattern so that reads
// of unwritten memory show. With TX_ALLOCATOR_EXACT=1 (the emulated tests' setting) each
// tensor is such a block, so an access past a tensor's end faults instead of landing in a
// rounded block's slack.
void* device_alloc(size_t bytes);
void device_free(void* p);
// Aborts naming the copy when [dst, dst + n) and [src, src + n) overlap: CUDA's copies do
// not promise memmove's order.
void check_no_overlap(const void* dst, const void* src, size_t n, const char* what);
}  // namespace tx::emu

inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = ::tx::emu::device_alloc(bytes);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void* p) {
  ::tx::emu::device_free(p);
  return cudaSuccess;
}
// Pinned host memory is host memory.
inline cudaError_t cudaMallocHost(void** p, size_t bytes) {
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFreeHost(void* p) {
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  *free_bytes = 0;
  *total = 0;
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind,
                                   cudaStream_t) {
  ::tx::emu::check_no_overlap(dst, src, n, "cudaMemcpyAsync");
  std::memcpy(dst, src, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* dst, int value, size_t n, cudaStream_t) {
  std::memset(dst, value, n);
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = new CUstream_st;
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t) {
  return cudaSuccess;
}
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  *e = new CUevent_st;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) {
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) {
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete s;
  return cudaSuccess;
}
