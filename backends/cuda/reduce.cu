// Reductions: sum and squared norm of a whole tensor (two stages in double, a block count that
// depends on the size only: the same bits on every run and every GPU), and column sums (the
// bias gradient).
#include "cuda_backend.h"
#include "cuda_common.cuh"

namespace tx::cuda {

namespace {

constexpr int kReduceThreads = 256;

// Stage 1: block b sums f(x_i) over its grid-stride share into partial[b].
template <bool Square>
__global__ void partial_sum_kernel(const float* x, int64_t n, double* partial) {
  double local = 0.0;
  TX_GRID_STRIDE(i, n) {
    const double v = x[i];
    local += Square ? v * v : v;
  }
  local = block_reduce(local, SumOp{}, 0.0);
  if (threadIdx.x == 0) partial[blockIdx.x] = local;
}

// Stage 2: one block adds the `count` partials (count <= kReduceBlocks).
__global__ void final_sum_kernel(const double* partial, int count, float* out) {
  double v = static_cast<int>(threadIdx.x) < count ? partial[threadIdx.x] : 0.0;
  v = block_reduce(v, SumOp{}, 0.0);
  if (threadIdx.x == 0) out[0] = static_cast<float>(v);
}

// The number of stage-1 blocks depends on n only (never on the GPU), so the summation order,
// and the result, is the same everywhere; small tensors get few blocks.
template <bool Square>
void launch_sum(const Tensor& x, const Tensor& out, double* scratch, cudaStream_t s) {
  const int64_t n = x.numel();
  const int blocks = static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>(kReduceBlocks, (n + kReduceThreads - 1) / kReduceThreads)));
  TX_LAUNCH(partial_sum_kernel<Square>, blocks, kReduceThreads, s)(x.data<float>(), n, scratch);
  check_launch(Square ? "squared_norm" : "sum");
  TX_LAUNCH(final_sum_kernel, 1, kReduceBlocks, s)(scratch, blocks, out.data<float>());
  check_launch(Square ? "squared_norm (final)" : "sum (final)");
}

constexpr int kColumns = 32;
constexpr int kRowLanes = 16;

// out[c] = beta * out[c] + sum_r x[r, c]; block (32, 16) as in layer_norm's dgamma.
__global__ void sum_rows_kernel(const float* x, float* out, int64_t rows, int64_t cols,
                                float beta) {
  __shared__ float partial[kRowLanes][kColumns + 1];
  const int64_t c = blockIdx.x * int64_t(kColumns) + threadIdx.x;
  float acc = 0.0f;
  if (c < cols)
    for (int64_t r = threadIdx.y; r < rows; r += kRowLanes) acc += x[r * cols + c];
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (int i = 0; i < kRowLanes; ++i) total += partial[i][threadIdx.x];
    out[c] = (beta == 0.0f ? 0.0f : beta * out[c]) + total;
  }
}

}  // namespace

void CudaBackend::sum_impl(const Tensor& x, const Tensor& out) {
  launch_sum<false>(x, out, reduce_scratch(), as_stream(enter()));
}

void CudaBackend::squared_norm_impl(const Tensor& x, const Tensor& out) {
  launch_sum<true>(x, out, reduce_scratch(), as_stream(enter()));
}

void CudaBackend::sum_rows_impl(const Tensor& x, const Tensor& out, float beta) {
  const int64_t cols = x.shape().cols(), rows = x.shape().rows();
  if (cols == 0) return;
  const int64_t column_blocks = (cols + kColumns - 1) / kColumns;
  TX_CHECK(column_blocks <= 0x7fffffff, "sum_rows: ", cols, " columns are too many");
  TX_LAUNCH(sum_rows_kernel, static_cast<unsigned>(column_blocks), dim3(kColumns, kRowLanes),
            as_stream(enter()))
  (x.data<float>(), out.data<float>(), rows, cols, beta);
  check_launch("sum_rows");
}

}  // namespace tx::cuda
