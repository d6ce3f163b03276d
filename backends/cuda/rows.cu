// Row lookup and reordering: gather (embedding lookup, beam reorder) and scatter-add (the
// embedding gradient). Id -1 gathers a zero row and scatters nothing; other ids outside [0, N)
// are recorded for synchronize() to raise as tx::Error; the kernels never touch memory through
// them.
#include "cuda_backend.h"
#include "cuda_common.cuh"

namespace tx::cuda {

namespace {

struct Gather {
  const float* src;
  const int32_t* index;
  float* dst;
  int64_t n, row;
  float scale;
  IndexErrorRecord* errors;
  __device__ void operator()(int64_t i) const {
    const int64_t m = i / row, j = i % row;
    const int32_t id = index[m];
    if (id == -1) {
      dst[i] = 0.0f;
      return;
    }
    if (id < 0 || id >= n) {
      if (j == 0) record_index_error(errors, kGatherRows, id, m, n);
      return;
    }
    dst[i] = scale * src[id * row + j];
  }
};

constexpr int kScatterThreads = 128;
// Destination rows are split into buckets (id % kScatterBuckets); each thread owns one column of
// one bucket and walks all source rows in order, so repeated ids accumulate without atomics and in
// a fixed order (the CPU's: ascending m), and 32 buckets give 32x the column parallelism.
constexpr int kScatterBuckets = 32;

__global__ void scatter_add_kernel(const float* src, const int32_t* index, float* dst, int64_t n,
                                   int64_t m, int64_t row, float scale, IndexErrorRecord* errors) {
  const int64_t j = blockIdx.x * int64_t(kScatterThreads) + threadIdx.x;
  const int32_t bucket = static_cast<int32_t>(blockIdx.y);
  const bool reporter = j == 0 && bucket == 0;
  if (j >= row) return;
  for (int64_t i = 0; i < m; ++i) {
    const int32_t id = index[i];
    if (id == -1) continue;
    if (id < 0 || id >= n) {
      if (reporter) record_index_error(errors, kScatterAddRows, id, i, n);
      continue;
    }
    if (id % kScatterBuckets != bucket) continue;
    dst[id * row + j] += scale * src[i * row + j];
  }
}

}  // namespace

void CudaBackend::gather_rows_impl(const Tensor& src, const Tensor& index, const Tensor& dst,
                                   float scale) {
  const int64_t n = src.dim(0), m = dst.dim(0), row = dst.numel() / m;
  launch_map(dst.numel(), as_stream(enter()),
             Gather{src.data<float>(), index.data<int32_t>(), dst.data<float>(), n, row, scale,
                    errors_device_},
             "gather_rows");
}

void CudaBackend::scatter_add_rows_impl(const Tensor& src, const Tensor& index, const Tensor& dst,
                                        float scale) {
  const int64_t n = dst.dim(0), m = src.dim(0), row = src.numel() / m;
  const int64_t column_blocks = (row + kScatterThreads - 1) / kScatterThreads;
  TX_CHECK(column_blocks <= 0x7fffffff, "scatter_add_rows: rows of ", row,
           " elements are too long");
  TX_LAUNCH(scatter_add_kernel, dim3(static_cast<unsigned>(column_blocks), kScatterBuckets),
            kScatterThreads, as_stream(enter()))
  (src.data<float>(), index.data<int32_t>(), dst.data<float>(), n, m, row, scale, errors_device_);
  check_launch("scatter_add_rows");
}

}  // namespace tx::cuda
