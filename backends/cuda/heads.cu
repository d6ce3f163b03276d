// Attention head split and merge: [B, T, H*dh] <-> [B, H, T, dh], one thread per element of the
// split layout (consecutive threads walk d_head: both sides are read/written in runs of d_head).
#include "cuda_backend.h"
#include "cuda_common.cuh"

namespace tx::cuda {

namespace {
struct PermuteHeads {
  const float* in;
  float* out;
  int64_t time, heads, d_head;
  bool to_heads, accumulate;
  __device__ void operator()(int64_t i) const {
    const int64_t j = i % d_head, s = i / d_head;  // s indexes [B, H, T]
    const int64_t t = s % time, h = (s / time) % heads, b = s / (time * heads);
    const int64_t packed = ((b * time + t) * heads + h) * d_head + j;  // [B, T, H, dh]
    const int64_t split = i;                                           // [B, H, T, dh]
    const float v = in[to_heads ? packed : split];
    float* dst = out + (to_heads ? split : packed);
    *dst = accumulate ? *dst + v : v;
  }
};
}  // namespace

void CudaBackend::split_heads_impl(const Tensor& x, int heads, const Tensor& y, bool accumulate) {
  launch_map(x.numel(), as_stream(enter()),
             PermuteHeads{x.data<float>(), y.data<float>(), x.dim(1), heads, x.dim(2) / heads, true,
                          accumulate},
             "split_heads");
}

void CudaBackend::merge_heads_impl(const Tensor& x, const Tensor& y, bool accumulate) {
  launch_map(x.numel(), as_stream(enter()),
             PermuteHeads{x.data<float>(), y.data<float>(), x.dim(2), x.dim(1), x.dim(3), false,
                          accumulate},
             "merge_heads");
}

}  // namespace tx::cuda
