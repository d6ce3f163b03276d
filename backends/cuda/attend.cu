// attend_cached and attend_memory: a decoding step's attention per (row, head), over a
// time-major cache read through each row's ancestry or over the row's entry of the encoder
// memory. One block per (row, head) (the grid strides over more): the scores go to a scratch
// row, block reductions in a fixed order give the softmax, then each thread sums one d_head
// column over the keys in order.
#include "cuda_backend.h"
#include "cuda_common.cuh"

namespace tx::cuda {

namespace {

// Rows of the cache: key t of (r, h) is at element t * step + (rows[r, t] * heads + h) * d_head.
struct CachedRows {
  const int32_t* rows;
  int64_t capacity, slots, heads, d_head, length;
  IndexErrorRecord* errors;
  __device__ int64_t visible(int64_t) const { return length; }
  // -1 for a slot outside the cache (recorded once for synchronize() to raise).
  __device__ int64_t at(int64_t rh, int64_t t) const {
    const int64_t r = rh / heads, h = rh % heads;
    const int32_t slot = rows[r * capacity + t];
    if (slot < 0 || slot >= slots) {
      record_index_error(errors, kAttendCached, slot, r * capacity + t, slots);
      return -1;
    }
    return t * slots * heads * d_head + (slot * heads + h) * d_head;
  }
};

// Rows of the memory [E, heads, S, d_head]: (r, h) reads entry r / group, keys s < lengths[e].
struct MemoryRows {
  const int32_t* lengths;
  int64_t group, heads, time, d_head;
  __device__ int64_t entry(int64_t rh) const { return rh / heads / group; }
  __device__ int64_t visible(int64_t rh) const {
    const int64_t length = lengths[entry(rh)];
    return length < 0 ? 0 : (length > time ? time : length);
  }
  __device__ int64_t at(int64_t rh, int64_t t) const {
    return ((entry(rh) * heads + rh % heads) * time + t) * d_head;
  }
};

template <typename Rows>
__global__ void attend_kernel(const float* q, const float* keys, const float* values, Rows rows,
                              float* scores, int64_t score_stride, float* out, int64_t pairs,
                              int64_t d_head, float scale) {
  for (int64_t rh = blockIdx.x; rh < pairs; rh += gridDim.x) {
    const float* qi = q + rh * d_head;
    const int64_t length = rows.visible(rh);
    float* p = scores + rh * score_stride;
    float m = -INFINITY;
    for (int64_t t = threadIdx.x; t < length; t += blockDim.x) {
      const int64_t at = rows.at(rh, t);
      float s = -INFINITY;
      if (at >= 0) {
        float dot = 0.0f;
        for (int64_t e = 0; e < d_head; ++e) dot += qi[e] * keys[at + e];
        s = dot * scale;
      }
      p[t] = s;
      m = fmaxf(m, s);
    }
    m = block_max(m);
    float total = 0.0f;
    for (int64_t t = threadIdx.x; t < length; t += blockDim.x) {
      const float e = expf(p[t] - m);
      p[t] = e;
      total += e;
    }
    total = block_sum(total);
    const float inv = length > 0 ? 1.0f / total : 0.0f;
    for (int64_t e = threadIdx.x; e < d_head; e += blockDim.x) {
      float acc = 0.0f;
      for (int64_t t = 0; t < length; ++t) {
        const int64_t at = rows.at(rh, t);
        if (at >= 0) acc += p[t] * inv * values[at + e];
      }
      out[rh * d_head + e] = acc;
    }
    __syncthreads();  // p is rewritten by this block's next (row, head)
  }
}

template <typename Rows>
void launch_attend(const Tensor& q, const Tensor& keys, const Tensor& values, const Rows& rows,
                   const Tensor& scores, const Tensor& out, float scale, cudaStream_t stream,
                   const char* name) {
  const int64_t pairs = q.dim(0) * q.dim(1), d_head = q.dim(2);
  TX_LAUNCH(attend_kernel<Rows>, static_cast<int>(std::min<int64_t>(pairs, kMaxBlocks)),
            row_threads(d_head), stream)
  (q.data<float>(), keys.data<float>(), values.data<float>(), rows, scores.data<float>(),
   scores.dim(1), out.data<float>(), pairs, d_head, scale);
  check_launch(name);
}

}  // namespace

void CudaBackend::attend_cached_impl(const Tensor& q, const Tensor& keys, const Tensor& values,
                                     const Tensor& rows, int64_t length, float scale,
                                     const Tensor& out) {
  const int64_t heads = q.dim(1), d_head = q.dim(2);
  const CachedRows at{rows.data<int32_t>(), keys.dim(0), keys.dim(1), heads, d_head, length,
                      errors_device_};
  // Freed at once, reused only by work after this kernel on the stream (cuda_backend.cu).
  const Tensor scores = empty({q.dim(0) * heads, length});
  launch_attend(q, keys, values, at, scores, out, scale, as_stream(enter()),
                "attend_cached kernel");
}

void CudaBackend::attend_memory_impl(const Tensor& q, const Tensor& keys, const Tensor& values,
                                     const Tensor& lengths, float scale, const Tensor& out) {
  const int64_t heads = q.dim(1), time = keys.dim(2);
  const MemoryRows at{lengths.data<int32_t>(), q.dim(0) / keys.dim(0), heads, time, q.dim(2)};
  const Tensor scores = empty({q.dim(0) * heads, time});
  launch_attend(q, keys, values, at, scores, out, scale, as_stream(enter()),
                "attend_memory kernel");
}

}  // namespace tx::cuda
