// bench/gemm_gpu: the CUDA backend's GEMMs on transformer-base shapes at each arithmetic tx
// offers: fp32, TF32 (--tf32) and bf16 / f16 operands (f32 sums), in TFLOP/s, beside the
// GPU's datasheet peaks for H100/H200 SXM (dense: fp32 67, TF32 495, bf16/f16 990 TFLOP/s).
//
// Usage: gemm_gpu [--device cuda:N] [--reps R]
// Without a usable GPU it says so in one line and exits 0.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "core/rng.h"

namespace {

struct Shape3 {
  int64_t m, n, k;
  const char* role;
  bool trans_a = false;
};

std::string arg(int argc, char** argv, const char* flag, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return argv[i + 1];
  return fallback;
}

// TFLOP/s of `reps` calls after 3 warm-up calls, the stream drained around them.
double tflops(tx::Backend& be, const tx::Tensor& a, bool ta, const tx::Tensor& b,
              const tx::Tensor& c, const Shape3& s, int reps) {
  for (int i = 0; i < 3; ++i) be.gemm(a, ta, b, false, c);
  be.synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) be.gemm(a, ta, b, false, c);
  be.synchronize();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return 2.0 * double(s.m) * double(s.n) * double(s.k) * reps / secs / 1e12;
}

}  // namespace

int main(int argc, char** argv) {
  tx::register_builtin_backends();
  const std::string device = arg(argc, argv, "--device", "cuda");
  const int reps = std::stoi(arg(argc, argv, "--reps", "50"));
  const std::string name = device.substr(0, device.find(':'));
  if (const std::string why = tx::backend_unavailable_reason(name); !why.empty()) {
    std::printf("gemm_gpu: %s cannot run here: %s\n", device.c_str(), why.c_str());
    return 0;
  }
  tx::BackendOptions tf32_options;
  tf32_options.tf32 = true;
  auto fp32 = tx::create_backend(device);
  auto tf32 = tx::create_backend(device, tf32_options);
  // transformer-base at --max-tokens 8192 (8,192 rows), its 8,000- and 32,000-piece output
  // layers, and a weight gradient (dW = dY^T X: a transposed).
  const std::vector<Shape3> shapes = {{8192, 1536, 512, "q|k|v projection"},
                                      {8192, 2048, 512, "FFN in"},
                                      {8192, 512, 2048, "FFN out"},
                                      {8192, 8000, 512, "output layer, 8k"},
                                      {8192, 32000, 512, "output layer, 32k"},
                                      {2048, 512, 8192, "dW FFN in (TN)", true},
                                      {160, 32000, 512, "decode output, beam 5 x 32"}};
  std::printf("%-28s %6s %6s %6s %8s %8s %8s %8s\n", "shape (TFLOP/s)", "M", "N", "K", "fp32",
              "tf32", "bf16", "f16");
  tx::Rng rng(1);
  for (const Shape3& s : shapes) {
    std::vector<float> ha(size_t(s.m * s.k)), hb(size_t(s.k * s.n));
    for (float& v : ha) v = rng.uniform() - 0.5f;
    for (float& v : hb) v = rng.uniform() - 0.5f;
    const tx::Shape a_shape = s.trans_a ? tx::Shape{s.k, s.m} : tx::Shape{s.m, s.k};
    const tx::Tensor a = fp32->upload(ha, a_shape), b = fp32->upload(hb, {s.k, s.n});
    const tx::Tensor c = fp32->empty({s.m, s.n});
    double figures[4];
    figures[0] = tflops(*fp32, a, s.trans_a, b, c, s, reps);
    {
      const tx::Tensor a2 = tf32->upload(ha, a_shape), b2 = tf32->upload(hb, {s.k, s.n});
      const tx::Tensor c2 = tf32->empty({s.m, s.n});
      figures[1] = tflops(*tf32, a2, s.trans_a, b2, c2, s, reps);
    }
    int column = 2;
    for (tx::DType dtype : {tx::DType::bf16, tx::DType::f16}) {
      const tx::Tensor a16 = fp32->empty(a_shape, dtype), b16 = fp32->empty({s.k, s.n}, dtype);
      fp32->cast(a, a16);
      fp32->cast(b, b16);
      figures[column++] = tflops(*fp32, a16, s.trans_a, b16, c, s, reps);
    }
    std::printf("%-28s %6lld %6lld %6lld %8.1f %8.1f %8.1f %8.1f\n", s.role, (long long)s.m,
                (long long)s.n, (long long)s.k, figures[0], figures[1], figures[2], figures[3]);
  }
  return 0;
}
