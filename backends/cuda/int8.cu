// The int8 operators on the GPU: per-row quantisation (one block per row) and the int8 linear
// layer as a plain shared-memory tiled kernel with exact i32 sums. Correctness first: it has
// run under tests/cuda_emu only, not on a GPU, and no attempt at dp4a or tensor cores is made.
#include "backend/device_math.h"
#include "cuda_backend.h"
#include "cuda_common.cuh"

namespace tx::cuda {

namespace {

constexpr int kTile = 16;   // a block computes a kTile x kTile tile of c, a thread one element
constexpr int kChunk = 64;  // columns of K staged in shared memory at a time

__global__ void quantize_rows_kernel(const float* x, int64_t rows, int64_t cols, int max_level,
                                     int8_t* q, float* scales) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float absmax = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) absmax = fmaxf(absmax, fabsf(xr[c]));
    absmax = block_reduce(absmax, MaxOp{}, 0.0f);
    const float scale = math::quantize_scale(absmax, max_level);
    if (threadIdx.x == 0) scales[r] = scale;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      q[r * cols + c] = math::quantize_value(xr[c], scale, max_level);
  }
}

__global__ void gemm_i8_kernel(const int8_t* a, const float* a_scales, const int8_t* b,
                               const float* b_scales, const float* bias, float* c, int64_t m,
                               int64_t n, int64_t k) {
  __shared__ int8_t a_tile[kTile][kChunk];
  __shared__ int8_t b_tile[kTile][kChunk];
  const int tr = threadIdx.x / kTile, tc = threadIdx.x % kTile;
  const int64_t tiles_n = (n + kTile - 1) / kTile;
  const int64_t tiles = (m + kTile - 1) / kTile * tiles_n;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t row0 = tile / tiles_n * kTile, col0 = tile % tiles_n * kTile;
    int32_t sum = 0;
    for (int64_t k0 = 0; k0 < k; k0 += kChunk) {
      for (int i = threadIdx.x; i < kTile * kChunk; i += blockDim.x) {
        const int r = i / kChunk, kk = i % kChunk;
        const int64_t col = k0 + kk;
        a_tile[r][kk] = row0 + r < m && col < k ? a[(row0 + r) * k + col] : int8_t(0);
        b_tile[r][kk] = col0 + r < n && col < k ? b[(col0 + r) * k + col] : int8_t(0);
      }
      __syncthreads();
      for (int kk = 0; kk < kChunk; ++kk)
        sum += static_cast<int32_t>(a_tile[tr][kk]) * static_cast<int32_t>(b_tile[tc][kk]);
      __syncthreads();  // the tile is read before the next chunk overwrites it
    }
    const int64_t row = row0 + tr, col = col0 + tc;
    if (row < m && col < n)
      c[row * n + col] =
          math::dequantize(sum, a_scales[row], b_scales[col], bias ? bias[col] : 0.0f);
  }
}

}  // namespace

void CudaBackend::quantize_rows_impl(const Tensor& x, int max_level, const Tensor& q,
                                     const Tensor& scales) {
  const int64_t rows = x.shape().rows(), cols = x.dim(-1);
  TX_LAUNCH(quantize_rows_kernel, row_blocks(rows), row_threads(cols), as_stream(enter()))
  (x.data<float>(), rows, cols, max_level, q.data<int8_t>(), scales.data<float>());
  check_launch("quantize_rows");
}

void CudaBackend::gemm_i8_impl(const Tensor& a, const Tensor& a_scales, const PackedWeight& packed,
                               const Tensor& b_scales, const Tensor& bias, const Tensor& c) {
  const Tensor& b = packed.weight;  // the kernel reads the weight as it is
  const int64_t m = a.shape().rows(), n = b.dim(0), k = b.dim(1);
  const int64_t tiles = (m + kTile - 1) / kTile * ((n + kTile - 1) / kTile);
  TX_LAUNCH(gemm_i8_kernel, static_cast<int>(std::min<int64_t>(tiles, kMaxBlocks)), kTile * kTile,
            as_stream(enter()))
  (a.data<int8_t>(), a_scales.data<float>(), b.data<int8_t>(), b_scales.data<float>(),
   bias.defined() ? bias.data<float>() : nullptr, c.data<float>(), m, n, k);
  check_launch("gemm_i8");
}

}  // namespace tx::cuda
