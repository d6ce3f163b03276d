// top_k: the k largest entries of each row in descending order, ties to the lower index, NaN
// after every number: the total order of backend/rank_order.h, shared with the CPU. One block
// per row.
// Small k (beam search: 2 x beam): k passes, pass p picks the first element after pick p-1,
// O(k * cols / threads) per row, no scratch memory. Large k (more than cols / 16): every element
// counts the elements before it, which is its output slot, O(cols^2 / threads) per row with no
// barriers.
#include "backend/rank_order.h"
#include "cuda_backend.h"
#include "cuda_common.cuh"

namespace tx::cuda {

namespace {

struct Candidate {
  float value;
  int32_t index;  // < 0: none
};

// Whether a comes before b in the output order (a candidate before none).
__device__ inline bool before(const Candidate& a, const Candidate& b) {
  if (b.index < 0) return a.index >= 0;
  if (a.index < 0) return false;
  return math::ranks_before(a.value, a.index, b.value, b.index);
}

__device__ inline Candidate warp_best(Candidate c) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    Candidate o{__shfl_xor_sync(0xffffffffu, c.value, offset),
                __shfl_xor_sync(0xffffffffu, c.index, offset)};
    if (before(o, c)) c = o;
  }
  return c;
}

__device__ Candidate block_best(Candidate c) {
  __shared__ float values[32];
  __shared__ int32_t indices[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  c = warp_best(c);
  __syncthreads();
  if (lane == 0) {
    values[warp] = c.value;
    indices[warp] = c.index;
  }
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x >> 5;
    c = lane < warps ? Candidate{values[lane], indices[lane]} : Candidate{0.0f, -1};
    c = warp_best(c);
    if (lane == 0) {
      values[0] = c.value;
      indices[0] = c.index;
    }
  }
  __syncthreads();
  return Candidate{values[0], indices[0]};
}

__global__ void top_k_kernel(const float* x, int64_t rows, int64_t cols, int k, float* values,
                             int32_t* indices) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = x + r * cols;
    Candidate prev{0.0f, -1};
    for (int p = 0; p < k; ++p) {
      Candidate best{0.0f, -1};
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        const Candidate c{in[j], static_cast<int32_t>(j)};
        if ((prev.index < 0 || before(prev, c)) && before(c, best)) best = c;
      }
      best = block_best(best);
      if (threadIdx.x == 0) {
        values[r * k + p] = best.value;
        indices[r * k + p] = best.index;
      }
      prev = best;
    }
  }
}

// Element j's output slot is the number of elements before it; slots below k are written.
__global__ void top_k_rank_kernel(const float* x, int64_t rows, int64_t cols, int k, float* values,
                                  int32_t* indices) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = x + r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const Candidate c{in[j], static_cast<int32_t>(j)};
      int64_t rank = 0;
      for (int64_t i = 0; i < cols && rank < k; ++i)
        rank += before(Candidate{in[i], static_cast<int32_t>(i)}, c) ? 1 : 0;
      if (rank < k) {
        values[r * k + rank] = c.value;
        indices[r * k + rank] = c.index;
      }
    }
  }
}

}  // namespace

void CudaBackend::top_k_impl(const Tensor& x, int k, const Tensor& values, const Tensor& indices) {
  const int64_t cols = x.shape().cols(), rows = x.shape().rows();
  TX_CHECK(cols <= 0x7fffffff, "top_k: rows of ", cols, " entries exceed the i32 index range");
  if (k > 32 && k > cols / 16) {
    TX_LAUNCH(top_k_rank_kernel, row_blocks(rows), row_threads(cols), as_stream(enter()))
    (x.data<float>(), rows, cols, k, values.data<float>(), indices.data<int32_t>());
    check_launch("top_k");
    return;
  }
  TX_LAUNCH(top_k_kernel, row_blocks(rows), row_threads(cols), as_stream(enter()))
  (x.data<float>(), rows, cols, k, values.data<float>(), indices.data<int32_t>());
  check_launch("top_k");
}

}  // namespace tx::cuda
