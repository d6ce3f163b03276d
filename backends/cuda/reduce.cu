// Reductions: sum and squared norm of a whole tensor (two stages in double, a block count that
// depends on the size only: the same bits on every run and every GPU), and column sums (the
// bias gradient, column_sum.cuh).
#include "column_sum.cuh"
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

// Row r's term of sum_rows's column c: x[r, c].
struct ColumnTerm {
  const float* x;
  int64_t cols;
  __device__ void operator()(int64_t r, int64_t c, float (&acc)[1]) const {
    acc[0] += x[r * cols + c];
  }
};

}  // namespace

void CudaBackend::sum_impl(const Tensor& x, const Tensor& out) {
  launch_sum<false>(x, out, reduce_scratch(), as_stream(enter()));
}

void CudaBackend::squared_norm_impl(const Tensor& x, const Tensor& out) {
  launch_sum<true>(x, out, reduce_scratch(), as_stream(enter()));
}

void CudaBackend::sum_rows_impl(const Tensor& x, const Tensor& out, float beta) {
  const int64_t cols = x.shape().cols(), rows = x.shape().rows();
  cudaStream_t s = as_stream(enter());
  const Tensor partial = empty({column_chunks(rows), cols});
  column_sums<1>(ColumnTerm{x.data<float>(), cols}, rows, cols,
                 ColumnOutputs<1>{{out.data<float>()}}, beta, partial.data<float>(), s, "sum_rows");
}

}  // namespace tx::cuda
