// attend_cached: a decoding step's attention over a time-major cache read through each row's
// ancestry. One block per (row, head) (the grid strides over more): the scores go to a scratch
// row, then block reductions in a fixed order give the softmax, then each thread sums one
// d_head column over the steps in order.
#include "cuda_backend.h"
#include "cuda_common.cuh"

namespace tx::cuda {

namespace {

__global__ void attend_cached_kernel(const float* q, const float* keys, const float* values,
                                     const int32_t* rows, float* scores, float* out, int64_t count,
                                     int64_t heads, int64_t d_head, int64_t capacity, int64_t slots,
                                     int64_t length, float scale, IndexErrorRecord* errors) {
  const int64_t step = slots * heads * d_head;
  for (int64_t rh = blockIdx.x; rh < count * heads; rh += gridDim.x) {
    const int64_t r = rh / heads, h = rh % heads;
    const float* qi = q + rh * d_head;
    const int32_t* a = rows + r * capacity;
    float* p = scores + rh * length;
    float m = -INFINITY;
    for (int64_t t = threadIdx.x; t < length; t += blockDim.x) {
      const int32_t slot = a[t];
      float s = -INFINITY;
      if (slot < 0 || slot >= slots) {
        record_index_error(errors, kAttendCached, slot, r * capacity + t, slots);
      } else {
        const float* k = keys + t * step + (slot * heads + h) * d_head;
        float dot = 0.0f;
        for (int64_t e = 0; e < d_head; ++e) dot += qi[e] * k[e];
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
    const float inv = 1.0f / block_sum(total);
    for (int64_t e = threadIdx.x; e < d_head; e += blockDim.x) {
      float acc = 0.0f;
      for (int64_t t = 0; t < length; ++t) {
        const int32_t slot = a[t];
        if (slot < 0 || slot >= slots) continue;
        acc += p[t] * inv * values[t * step + (slot * heads + h) * d_head + e];
      }
      out[rh * d_head + e] = acc;
    }
    __syncthreads();  // p is rewritten by this block's next (row, head)
  }
}

}  // namespace

void CudaBackend::attend_cached_impl(const Tensor& q, const Tensor& keys, const Tensor& values,
                                     const Tensor& rows, int64_t length, float scale,
                                     const Tensor& out) {
  const int64_t count = q.dim(0), heads = q.dim(1), d_head = q.dim(2);
  const Tensor scores = empty({count * heads, length});
  const int64_t pairs = count * heads;
  TX_LAUNCH(attend_cached_kernel, static_cast<int>(std::min<int64_t>(pairs, kMaxBlocks)),
            row_threads(d_head), as_stream(enter()))
  (q.data<float>(), keys.data<float>(), values.data<float>(), rows.data<int32_t>(),
   scores.data<float>(), out.data<float>(), count, heads, d_head, keys.dim(0), keys.dim(1), length,
   scale, errors_device_);
  check_launch("attend_cached kernel");
}

}  // namespace tx::cuda
