// Attention head split and merge: [B, T, H*dh] <-> [B, H, T, dh].
#include "cpu_backend.h"
#include "parallel.h"

namespace tx::cpu {

namespace {
// Copies (or adds) one d_head slice between the two layouts; `to_heads` picks the direction.
void permute_heads(const float* in, float* out, int64_t batch, int64_t time, int64_t heads,
                   int64_t d_head, bool to_heads, bool accumulate) {
  const int64_t slices = batch * heads * time;
#pragma omp parallel for if (parallel_rows(slices, d_head))
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t t = s % time, h = (s / time) % heads, b = s / (time * heads);
    const int64_t packed = ((b * time + t) * heads + h) * d_head;  // [B, T, H, dh]
    const int64_t split = s * d_head;                              // [B, H, T, dh]
    const float* src = in + (to_heads ? packed : split);
    float* dst = out + (to_heads ? split : packed);
    if (accumulate) {
#pragma omp simd
      for (int64_t j = 0; j < d_head; ++j) dst[j] += src[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < d_head; ++j) dst[j] = src[j];
    }
  }
}
}  // namespace

void CpuBackend::split_heads_impl(const Tensor& x, int heads, const Tensor& y, bool accumulate) {
  permute_heads(x.data<float>(), y.data<float>(), x.dim(0), x.dim(1), heads, x.dim(2) / heads, true,
                accumulate);
}

void CpuBackend::merge_heads_impl(const Tensor& x, const Tensor& y, bool accumulate) {
  permute_heads(x.data<float>(), y.data<float>(), x.dim(0), x.dim(2), x.dim(1), x.dim(3), false,
                accumulate);
}

}  // namespace tx::cpu
