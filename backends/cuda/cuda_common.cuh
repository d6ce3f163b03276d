// Helpers shared by the CUDA kernel files: error checks, launch shapes, grid-stride loops and
// deterministic block reductions (a fixed order for a fixed launch shape: no float atomics).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/error.h"

namespace tx::cuda {

// kernel<<<grid, block, 0, stream>>>(args), spelled as a macro so that the host emulation of the
// kernels (tests/cuda_emu, which defines its own TX_LAUNCH) can run them without a GPU.
#ifndef TX_LAUNCH
#define TX_LAUNCH(kernel, grid, block, stream) kernel<<<(grid), (block), 0, (stream)>>>
#endif

inline void check(cudaError_t status, const char* what) {
  TX_CHECK(status == cudaSuccess, "cuda: ", what, " failed: ", cudaGetErrorString(status));
}

// After every launch: a bad launch shape or a missing kernel image fails here, naming the kernel.
inline void check_launch(const char* kernel) {
  check(cudaGetLastError(), kernel);
}

inline cudaStream_t as_stream(void* s) {
  return static_cast<cudaStream_t>(s);
}

constexpr int kThreads = 256;       // threads per block of the elementwise kernels
constexpr int kMaxBlocks = 65535;   // grid-stride loops cover the rest
constexpr int kReduceBlocks = 256;  // fixed, so a reduction's order never depends on the GPU

// Blocks for n elements at kThreads per block, at least 1.
inline int blocks_for(int64_t n, int threads = kThreads) {
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, kMaxBlocks)));
}

// Threads per block for a row kernel (one block per row): enough for the row, a multiple of 32.
inline int row_threads(int64_t cols) {
  if (cols <= 64) return 64;
  if (cols <= 128) return 128;
  if (cols <= 256) return 256;
  return 512;
}

// Rows handled by one block each; the grid strides over more.
inline int row_blocks(int64_t rows) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(rows, 65535)));
}

#define TX_GRID_STRIDE(i, n)                                                \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

// f(i) for every i in [0, n): the kernel behind every elementwise operator.
template <typename F>
__global__ void map_kernel(int64_t n, F f) {
  TX_GRID_STRIDE(i, n) f(i);
}

template <typename F>
void launch_map(int64_t n, cudaStream_t stream, F f, const char* name) {
  TX_LAUNCH(map_kernel<F>, blocks_for(n), kThreads, stream)(n, f);
  check_launch(name);
}

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};

template <typename T, typename Op>
__device__ inline T warp_reduce(T v, Op op) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Reduces v over the block (blockDim.x a multiple of 32, at most 1024) and returns the result to
// every thread. Every thread of the block must call it; consecutive calls are safe.
template <typename T, typename Op>
__device__ inline T block_reduce(T v, Op op, T identity) {
  __shared__ T shared[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_reduce(v, op);
  __syncthreads();  // the previous call's readers of shared[0] are done
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  if (warp == 0) {
    v = lane < warps ? shared[lane] : identity;
    v = warp_reduce(v, op);
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}

__device__ inline float block_sum(float v) {
  return block_reduce(v, SumOp{}, 0.0f);
}
__device__ inline float block_max(float v) {
  return block_reduce(v, MaxOp{}, -INFINITY);
}

// log(sum_j exp(x_j)) over one row, by the whole block (every thread gets it).
__device__ inline float block_log_sum_exp(const float* x, int64_t n) {
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, x[j]);
  m = block_max(m);
  float total = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) total += expf(x[j] - m);
  return m + logf(block_sum(total));
}

// Records the first out-of-range index for the host to raise at the next synchronisation.
template <typename Record>
__device__ inline void record_index_error(Record* r, int32_t op, int64_t value, int64_t position,
                                          int64_t limit) {
  if (atomicCAS(&r->flag, 0, 1) == 0) {
    r->op = op;
    r->value = value;
    r->position = position;
    r->limit = limit;
  }
}

}  // namespace tx::cuda
