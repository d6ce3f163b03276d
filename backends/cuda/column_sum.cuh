// Column sums of a [rows, cols] term, in two passes of a fixed order: the bias gradient
// (sum_rows) and LayerNorm's dgamma / dbeta. The grid spreads over the rows as well as the
// columns: split over columns alone, d_model 512 is 16 blocks on a GPU of 132 SMs.
//
// Pass 1, grid (column blocks, row chunks), block (32, 16): thread (tx, ty) sums the rows ty,
// ty + 16, ... of its chunk in column c; the 16 lanes are added in order into
// partial[k][chunk][c]. Pass 2: out_k[c] = beta * out_k[c] + the chunks' partials in order.
// The chunk count depends on the row count alone, so a sum has the same bits on every GPU and
// every run.
#pragma once

#include "cuda_common.cuh"

namespace tx::cuda {

constexpr int kColumnWidth = 32;     // columns per block (one warp wide)
constexpr int kColumnLanes = 16;     // threads splitting a chunk's rows of each column
constexpr int64_t kChunkRows = 256;  // rows per chunk, until there are kMaxChunks
constexpr int64_t kMaxChunks = 64;

inline int64_t column_chunks(int64_t rows) {
  return std::max<int64_t>(1, std::min(kMaxChunks, (rows + kChunkRows - 1) / kChunkRows));
}

// Up to K output columns of one sum each (K = 1: sum_rows; 2: dgamma and dbeta).
template <int K>
struct ColumnOutputs {
  float* out[K];
};

// terms(r, c, acc) adds row r's K terms of column c into acc[0..K).
template <int K, typename Terms>
__global__ void column_partials_kernel(Terms terms, int64_t rows, int64_t cols, int64_t chunk_rows,
                                       float* partial) {
  __shared__ float lanes[K][kColumnLanes][kColumnWidth + 1];
  const int64_t c = blockIdx.x * int64_t(kColumnWidth) + threadIdx.x;
  const int64_t begin = blockIdx.y * chunk_rows;
  const int64_t end = begin + chunk_rows < rows ? begin + chunk_rows : rows;
  float acc[K] = {};
  if (c < cols)
    for (int64_t r = begin + threadIdx.y; r < end; r += kColumnLanes) terms(r, c, acc);
  for (int k = 0; k < K; ++k) lanes[k][threadIdx.y][threadIdx.x] = acc[k];
  __syncthreads();
  if (threadIdx.y == 0 && c < cols)
    for (int k = 0; k < K; ++k) {
      float total = 0.0f;
      for (int i = 0; i < kColumnLanes; ++i) total += lanes[k][i][threadIdx.x];
      partial[(int64_t(k) * gridDim.y + blockIdx.y) * cols + c] = total;
    }
}

template <int K>
__global__ void column_finish_kernel(const float* partial, int64_t chunks, int64_t cols,
                                     ColumnOutputs<K> outs, float beta) {
  TX_GRID_STRIDE(c, cols) {
    for (int k = 0; k < K; ++k) {
      float total = 0.0f;
      for (int64_t j = 0; j < chunks; ++j) total += partial[(k * chunks + j) * cols + c];
      float* out = outs.out[k];
      out[c] = (beta == 0.0f ? 0.0f : beta * out[c]) + total;  // beta 0 reads nothing
    }
  }
}

// out_k[c] = beta * out_k[c] + sum_r term_k(r, c); `partial` holds K * column_chunks(rows) *
// cols floats of scratch.
template <int K, typename Terms>
void column_sums(const Terms& terms, int64_t rows, int64_t cols, ColumnOutputs<K> outs, float beta,
                 float* partial, cudaStream_t stream, const char* what) {
  if (cols == 0) return;
  const int64_t chunks = column_chunks(rows);
  const int64_t chunk_rows = (rows + chunks - 1) / chunks;
  const int64_t column_blocks = (cols + kColumnWidth - 1) / kColumnWidth;
  TX_CHECK(column_blocks <= 0x7fffffff, what, ": ", cols, " columns are too many");
  void (*pass1)(Terms, int64_t, int64_t, int64_t, float*) = column_partials_kernel<K, Terms>;
  TX_LAUNCH(pass1, dim3(static_cast<unsigned>(column_blocks), static_cast<unsigned>(chunks)),
            dim3(kColumnWidth, kColumnLanes), stream)
  (terms, rows, cols, chunk_rows, partial);
  check_launch(what);
  TX_LAUNCH(column_finish_kernel<K>, blocks_for(cols), kThreads, stream)
  (partial, chunks, cols, outs, beta);
  check_launch(what);
}

}  // namespace tx::cuda
