// encoder_layer: forward and backward time of one transformer-base encoder layer on the CPU.
//
// Usage: encoder_layer [--cpu-threads N] [--batch B] [--length T] [--iters K]
// Prints the output norm, the input-gradient norm (so runs can be compared for correctness
// as well as speed), ms per forward and backward (mean over K iterations after a warm-up),
// and GFLOP/s counting the GEMMs only (they are ~all the work).
#include "nn/encoder_layer.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "graph/ops.h"

namespace {

struct Args {
  int threads = 0;
  int64_t batch = 32, length = 64;
  int iters = 5;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> long {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "encoder_layer: %s needs a value\n", flag.c_str());
        std::exit(2);
      }
      char* end = nullptr;
      long v = std::strtol(argv[++i], &end, 10);
      if (*end || v < 0) {
        std::fprintf(stderr, "encoder_layer: %s wants a non-negative integer, got '%s'\n",
                     flag.c_str(), argv[i]);
        std::exit(2);
      }
      return v;
    };
    if (flag == "--cpu-threads")
      a.threads = int(value());
    else if (flag == "--batch")
      a.batch = value();
    else if (flag == "--length")
      a.length = value();
    else if (flag == "--iters")
      a.iters = int(value());
    else {
      std::fprintf(stderr,
                   "encoder_layer: unknown option '%s'\nusage: encoder_layer [--cpu-threads N] "
                   "[--batch B] [--length T] [--iters K]\n",
                   flag.c_str());
      std::exit(2);
    }
  }
  if (a.batch < 1 || a.length < 1 || a.iters < 1) {
    std::fprintf(stderr, "encoder_layer: --batch, --length and --iters must be >= 1\n");
    std::exit(2);
  }
  return a;
}

double norm(tx::Backend& be, const tx::Tensor& t) {
  tx::Tensor out = be.empty({1});
  be.squared_norm(t, out);
  return std::sqrt(double(be.download<float>(out)[0]));
}

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) try {
  Args args = parse(argc, argv);
  tx::register_builtin_backends();
  tx::BackendOptions options;
  options.threads = args.threads;
  auto be = tx::create_backend("cpu", options);

  tx::nn::EncoderLayerConfig cfg;  // transformer-base: d_model 512, heads 8, d_ff 2048, p 0.1
  tx::Rng init(1);
  tx::nn::ParameterSet params;
  tx::nn::EncoderLayer layer(tx::nn::ParamScope(*be, params, init, "encoder.layers.0"), cfg);

  const int64_t B = args.batch, T = args.length, D = cfg.d_model;
  // Sentence lengths from T down to about T/2: a length-sorted batch with some padding.
  std::vector<int32_t> lengths(B);
  int64_t real_tokens = 0;
  for (int64_t b = 0; b < B; ++b) {
    lengths[b] = int32_t(T - (b * (T / 2)) / B);
    real_tokens += lengths[b];
  }
  tx::Rng data(2);
  std::vector<float> xh(B * T * D), rh(B * T * D);
  for (float& v : xh) v = data.normal();
  for (float& v : rh) v = data.normal();
  tx::Tensor x_value = be->upload(xh, {B, T, D});
  tx::Tensor seed_grad = be->upload(rh, {B, T, D});
  tx::Tensor key_lengths = be->upload(lengths, {B});

  tx::Graph g(*be, tx::GraphOptions{true, true, /*seed=*/3, /*arena=*/true});
  double fwd_ms = 0, bwd_ms = 0, y_norm = 0, dx_norm = 0;
  for (int it = -1; it < args.iters; ++it) {  // iteration -1 warms up caches and the arena
    g.reset();
    g.rng().set_counter(0);  // the same dropout masks every iteration: comparable norms
    params.zero_grad(*be);
    tx::Var x = tx::make_var(x_value, true);
    double t0 = now_ms();
    tx::Var y = layer.forward(g, x, key_lengths);
    be->synchronize();
    double t1 = now_ms();
    g.backward(y, seed_grad);  // the gradient of sum(y * R)
    be->synchronize();
    double t2 = now_ms();
    if (it >= 0) {
      fwd_ms += t1 - t0;
      bwd_ms += t2 - t1;
    }
    y_norm = norm(*be, y->value);
    dx_norm = norm(*be, x->grad);
  }
  fwd_ms /= args.iters;
  bwd_ms /= args.iters;

  // GEMM flops: Q, K, V, out projections and the two FFN layers on all B*T rows, plus the two
  // attention products per head; the backward does two GEMMs for each forward one.
  const double R = double(B * T), F = double(cfg.d_ff);
  const double fwd_flops = 2 * R * D * D * 4 + 2 * R * D * F * 2 + 2 * 2 * double(B) * T * T * D;
  std::printf(
      "encoder_layer: d_model %lld, heads %d, d_ff %lld, dropout %.2f, batch %lld x %lld "
      "(%lld real tokens), backend %s\n",
      (long long)D, cfg.heads, (long long)cfg.d_ff, cfg.dropout, (long long)B, (long long)T,
      (long long)real_tokens, be->name().c_str());
  std::printf("output norm        %.6f\n", y_norm);
  std::printf("input-grad norm    %.6f\n", dx_norm);
  std::printf("forward            %.2f ms  %.1f GFLOP/s\n", fwd_ms, fwd_flops / fwd_ms * 1e-6);
  std::printf("backward           %.2f ms  %.1f GFLOP/s\n", bwd_ms, 2 * fwd_flops / bwd_ms * 1e-6);
  std::printf("forward+backward   %.2f ms  %.1f GFLOP/s  %.0f tokens/s\n", fwd_ms + bwd_ms,
              3 * fwd_flops / (fwd_ms + bwd_ms) * 1e-6, real_tokens / (fwd_ms + bwd_ms) * 1e3);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "encoder_layer: %s\n", e.what());
  return 1;
}
