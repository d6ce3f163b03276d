// bench/gemm: tx's GEMM through the backend vs a direct oneDNN sgemm on Transformer shapes.
//
// Usage: gemm [--cpu-threads N] [--seconds S] [--inference-only]
// First, inference's packed weight GEMMs (tx's fixed-order kernel) against oneDNN's sgemm.
// Prints one row per shape: GFLOP/s of tx, of oneDNN's sgemm and their ratio (tx / oneDNN),
// timed alternately in the same run so that machine noise hits both alike. A third column
// times oneDNN's matmul primitive (created once) on the same shape: the other route tx could
// take, and the reason its 2-D GEMMs call sgemm. Last, the same shapes with bf16 operands
// (--precision bf16) against f32, on CPUs where oneDNN has a bf16 GEMM, after one core's peak
// of the f32 FMA and the bf16 dot-product instructions (bench/dot_peak.h).
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <functional>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "core/rng.h"
#include "dot_peak.h"

namespace {

struct GemmShape {
  int64_t m, n, k;
  const char* role;
  bool trans_a = false;  // A stored [K, M]: a weight gradient dW = dY^T X
};

double now() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

// Best time of one call over rounds of `reps` calls, within a time budget.
double best_seconds(const std::function<void()>& call, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    double start = now();
    call();
    best = std::min(best, now() - start);
  }
  return best;
}

int parse_int(int argc, char** argv, const char* flag, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  tx::register_builtin_backends();
  tx::BackendOptions options;
  options.threads = parse_int(argc, argv, "--cpu-threads", 0);
  auto be = tx::create_backend("cpu", options);
  const int threads = omp_get_max_threads();
  const double budget = parse_int(argc, argv, "--seconds", 2);

  // Inference's weight GEMMs (gemm_packed: tx's fixed-order kernel on weights packed once)
  // against oneDNN's sgemm on the same product, on the OPUS-MT shape (d512, d_ff 2048, 8k
  // classes): encoder rows of a batch, decoder rows of beam 5 x 32, beam 5 x 1 and one row.
  std::printf(
      "inference GEMM c = a w^T (w packed once: gemm_packed) vs oneDNN sgemm, f32, %d "
      "threads, GFLOP/s\n",
      threads);
  std::printf("%-22s %6s %6s %6s %10s %10s %8s %10s %10s\n", "shape", "M", "N", "K", "packed",
              "sgemm", "ratio", "cold w", "cold w, c");
  tx::Rng irng(11);
  for (const GemmShape& s : std::vector<GemmShape>{{480, 512, 512, "encoder projection"},
                                                   {480, 2048, 512, "encoder FFN in"},
                                                   {480, 512, 2048, "encoder FFN out"},
                                                   {160, 512, 512, "step projection b5x32"},
                                                   {160, 2048, 512, "step FFN in b5x32"},
                                                   {160, 512, 2048, "step FFN out b5x32"},
                                                   {160, 8000, 512, "step output b5x32"},
                                                   {32, 2048, 512, "step FFN in b1x32"},
                                                   {5, 2048, 512, "step FFN in b5x1"},
                                                   {1, 2048, 512, "step FFN in b1x1"}}) {
    std::vector<float> a(s.m * s.k), w(s.n * s.k);
    for (float& v : a) v = irng.uniform() - 0.5f;
    for (float& v : w) v = irng.uniform() - 0.5f;
    tx::Tensor ta = be->upload(a, {s.m, s.k}), tw = be->upload(w, {s.n, s.k});
    tx::Tensor tc = be->empty({s.m, s.n}), c_direct = be->empty({s.m, s.n});
    const tx::Backend::PackedWeight packed = be->pack_weight(tw);
    auto run_packed = [&] {
      be->gemm_packed(ta, packed, tc);
      be->synchronize();
    };
    // The same product with the weight read from memory, as in decoding, where a step reads
    // all the decoder's weights (~100 MB at d512): copies of it, 256 MB in all, in turn.
    const int64_t copies = std::max<int64_t>(2, (int64_t{256} << 20) / (s.n * s.k * 4));
    std::vector<tx::Backend::PackedWeight> cold;
    for (int64_t i = 0; i < copies; ++i) cold.push_back(be->pack_weight(be->upload(w, {s.n, s.k})));
    size_t next = 0;
    auto run_cold = [&] {
      be->gemm_packed(ta, cold[next], tc);
      be->synchronize();
      next = (next + 1) % cold.size();
    };
    // And the output too, as a decoding step's fresh tensors: outputs in turn, 256 MB in all.
    std::vector<tx::Tensor> outs;
    for (int64_t i = 0; i < std::max<int64_t>(2, (int64_t{256} << 20) / (s.m * s.n * 4)); ++i)
      outs.push_back(be->zeros({s.m, s.n}));  // touched: no page faults in the timing
    size_t next_out = 0;
    auto run_cold_out = [&] {
      be->gemm_packed(ta, cold[next], outs[next_out]);
      be->synchronize();
      next = (next + 1) % cold.size();
      next_out = (next_out + 1) % outs.size();
    };
    auto run_dnnl = [&] {
      dnnl_sgemm('N', 'T', s.m, s.n, s.k, 1.0f, ta.data<float>(), s.k, tw.data<float>(), s.k, 0.0f,
                 c_direct.data<float>(), s.n);
    };
    const double flops = 2.0 * s.m * s.n * s.k;
    const double probe = best_seconds(run_dnnl, 1);
    const int reps = std::max(3, static_cast<int>(budget / 3 / std::max(probe, 1e-6) / 2));
    double t_packed = 1e30, t_dnnl = 1e30, t_cold = 1e30, t_cold_out = 1e30;
    for (int round = 0; round < 2; ++round) {
      t_packed = std::min(t_packed, best_seconds(run_packed, reps));
      t_dnnl = std::min(t_dnnl, best_seconds(run_dnnl, reps));
      t_cold = std::min(t_cold, best_seconds(run_cold, reps));
      t_cold_out = std::min(t_cold_out, best_seconds(run_cold_out, reps));
    }
    std::printf("%-22s %6lld %6lld %6lld %10.1f %10.1f %8.3f %10.1f %10.1f\n", s.role,
                (long long)s.m, (long long)s.n, (long long)s.k, flops / t_packed / 1e9,
                flops / t_dnnl / 1e9, t_dnnl / t_packed, flops / t_cold / 1e9,
                flops / t_cold_out / 1e9);
  }
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--inference-only") == 0) return 0;
  std::printf("\n");

  const std::vector<GemmShape> shapes = {{4096, 512, 512, "attention projection"},
                                         {4096, 2048, 512, "FFN in"},
                                         {4096, 512, 2048, "FFN out"},
                                         {64, 512, 512, "decode projection"},
                                         {64, 32000, 512, "output layer"},
                                         // Weight gradients of the Multi30k config (d 256,
                                         // d_ff 1024, 8k vocabulary), ~4000 rows a batch.
                                         {1024, 256, 4000, "dW FFN in, d256 (TN)", true},
                                         {256, 1024, 4000, "dW FFN out, d256 (TN)", true},
                                         {256, 256, 4000, "dW attention, d256 (TN)", true},
                                         {8000, 256, 4000, "dW output, 8k (TN)", true}};
  std::printf("GEMM C[M,N] = A[M,K] B[K,N], f32, %d threads, GFLOP/s\n", threads);
  std::printf("%-22s %6s %6s %6s %10s %10s %8s %12s\n", "shape", "M", "N", "K", "tx", "sgemm",
              "ratio", "matmul prim.");
  tx::Rng rng(7);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  double worst = 1e9;
  for (const GemmShape& s : shapes) {
    std::vector<float> a(s.m * s.k), b(s.k * s.n);
    for (float& v : a) v = rng.uniform() - 0.5f;
    for (float& v : b) v = rng.uniform() - 0.5f;
    tx::Tensor ta = be->upload(a, s.trans_a ? tx::Shape{s.k, s.m} : tx::Shape{s.m, s.k});
    tx::Tensor tb = be->upload(b, {s.k, s.n});
    tx::Tensor tc = be->empty({s.m, s.n});
    tx::Tensor c_direct = be->empty({s.m, s.n});
    float* c = c_direct.data<float>();

    auto run_tx = [&] {
      be->gemm(ta, s.trans_a, tb, false, tc);
      be->synchronize();
    };
    // The direct call works on the same (host) buffers, so alignment cannot favour either.
    auto run_dnnl = [&] {
      dnnl_sgemm(s.trans_a ? 'T' : 'N', 'N', s.m, s.n, s.k, 1.0f, ta.data<float>(),
                 s.trans_a ? s.m : s.k, tb.data<float>(), s.n, 0.0f, c, s.n);
    };
    using tag = dnnl::memory::format_tag;
    auto md = [](int64_t r, int64_t c) {
      return dnnl::memory::desc({r, c}, dnnl::memory::data_type::f32, tag::ab);
    };
    const dnnl::memory::desc a_md =
        s.trans_a ? dnnl::memory::desc({s.m, s.k}, dnnl::memory::data_type::f32, {1, s.m})
                  : md(s.m, s.k);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, md(s.k, s.n), md(s.m, s.n)), engine);
    dnnl::matmul prim(pd);
    dnnl::memory ma(a_md, engine, ta.raw()), mb(md(s.k, s.n), engine, tb.raw()),
        mc(md(s.m, s.n), engine, c);
    auto run_prim = [&] {
      prim.execute(stream, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
      stream.wait();
    };
    const double flops = 2.0 * s.m * s.n * s.k;
    // Calls per round so that all rounds of both fit the budget.
    double probe = best_seconds(run_dnnl, 1);
    int reps = std::max(3, static_cast<int>(budget / 3 / std::max(probe, 1e-6) / 2));
    double t_tx = 1e30, t_dnnl = 1e30, t_prim = 1e30;
    for (int round = 0; round < 2; ++round) {  // alternate so noise hits all alike
      t_tx = std::min(t_tx, best_seconds(run_tx, reps));
      t_dnnl = std::min(t_dnnl, best_seconds(run_dnnl, reps));
      t_prim = std::min(t_prim, best_seconds(run_prim, reps));
    }
    double g_tx = flops / t_tx / 1e9, g_dnnl = flops / t_dnnl / 1e9;
    worst = std::min(worst, g_tx / g_dnnl);
    std::printf("%-22s %6lld %6lld %6lld %10.1f %10.1f %8.3f %12.1f\n", s.role, (long long)s.m,
                (long long)s.n, (long long)s.k, g_tx, g_dnnl, g_tx / g_dnnl, flops / t_prim / 1e9);
  }
  std::printf("worst ratio tx/oneDNN: %.3f\n", worst);

  // Attention's batched GEMMs (batch = sentences x heads): one strided-batched call vs a loop
  // of sgemm calls, the way a backend without batched GEMM would do it.
  const std::vector<GemmShape> batched = {{64, 64, 64, "QK^T 64 tok x 256"},
                                          {30, 30, 64, "QK^T 30 tok x 256"}};
  const int64_t batch = 256;
  std::printf("\nbatched GEMM, batch %lld: tx strided-batched vs a loop of oneDNN sgemm\n",
              (long long)batch);
  std::printf("%-22s %6s %6s %6s %12s %12s %8s\n", "shape", "M", "N", "K", "tx GFLOP/s",
              "loop GFLOP/s", "ratio");
  for (const GemmShape& s : batched) {
    std::vector<float> a(batch * s.m * s.k), b(batch * s.n * s.k);
    for (float& v : a) v = rng.uniform() - 0.5f;
    for (float& v : b) v = rng.uniform() - 0.5f;
    tx::Tensor ta = be->upload(a, {batch, s.m, s.k});
    tx::Tensor tb = be->upload(b, {batch, s.n, s.k});  // keys: [T, d_head], used transposed
    tx::Tensor tc = be->empty({batch, s.m, s.n});
    tx::Tensor c_loop = be->empty({batch, s.m, s.n});
    auto run_tx = [&] {
      be->gemm(ta, false, tb, true, tc);
      be->synchronize();
    };
    auto run_loop = [&] {
      for (int64_t i = 0; i < batch; ++i)
        dnnl_sgemm('N', 'T', s.m, s.n, s.k, 1.0f, ta.data<float>() + i * s.m * s.k, s.k,
                   tb.data<float>() + i * s.n * s.k, s.k, 0.0f,
                   c_loop.data<float>() + i * s.m * s.n, s.n);
    };
    const double flops = 2.0 * batch * s.m * s.n * s.k;
    double t_tx = 1e30, t_loop = 1e30;
    for (int round = 0; round < 2; ++round) {
      t_tx = std::min(t_tx, best_seconds(run_tx, 20));
      t_loop = std::min(t_loop, best_seconds(run_loop, 20));
    }
    std::printf("%-22s %6lld %6lld %6lld %12.1f %12.1f %8.3f\n", s.role, (long long)s.m,
                (long long)s.n, (long long)s.k, flops / t_tx / 1e9, flops / t_loop / 1e9,
                t_loop / t_tx);
  }

  // --precision bf16's GEMMs: the same 2-D shapes (and one attention batch) with bf16 operands
  // and f32 sums, against tx's f32 GEMM, alternately in the same run; the casts not counted
  // (a weight is cast once per update, an activation once per GEMM).
  const std::string missing = be->half_gemm_missing(tx::DType::bf16);
  // What the instructions allow, one core: a bf16 GEMM can only beat an f32 one where the dot
  // product outruns the FMA (on Intel without AMX it runs at half its rate).
  const DotPeak peak = measure_dot_peak();
  std::printf("\none core's peak, GFLOP/s: f32 FMA (%s) %.1f", peak.fma_width.c_str(),
              peak.fma_gflops);
  if (peak.bf16_gflops > 0)
    std::printf(", bf16 dot product (VDPBF16PS) %.1f: %.2fx the FMA\n", peak.bf16_gflops,
                peak.bf16_gflops / peak.fma_gflops);
  else
    std::printf("; no AVX512_BF16 dot product\n");
  std::printf("\nbf16 operands, f32 sums (--precision bf16) vs f32, GFLOP/s\n");
  if (!missing.empty()) {
    std::printf("not measured: %s\n", missing.c_str());
    return 0;
  }
  std::printf("%-22s %6s %6s %6s %10s %10s %8s\n", "shape", "M", "N", "K", "bf16", "f32", "ratio");
  std::vector<GemmShape> half_shapes = shapes;
  half_shapes.push_back({64, 64, 64, "QK^T 64 tok, batch 256"});
  for (const GemmShape& s : half_shapes) {
    const bool attention = s.role[0] == 'Q';
    const int64_t nb = attention ? 256 : 1;
    std::vector<float> a(nb * s.m * s.k), b(nb * s.k * s.n);
    for (float& v : a) v = rng.uniform() - 0.5f;
    for (float& v : b) v = rng.uniform() - 0.5f;
    auto shape = [&](int64_t r, int64_t c) {
      return attention ? tx::Shape{nb, r, c} : tx::Shape{r, c};
    };
    tx::Tensor fa = be->upload(a, s.trans_a ? shape(s.k, s.m) : shape(s.m, s.k));
    tx::Tensor fb = be->upload(b, shape(s.k, s.n));
    tx::Tensor ha = be->empty(fa.shape(), tx::DType::bf16),
               hb = be->empty(fb.shape(), tx::DType::bf16);
    be->cast(fa, ha);
    be->cast(fb, hb);
    tx::Tensor tc = be->empty(shape(s.m, s.n));
    auto run_half = [&] {
      be->gemm(ha, s.trans_a, hb, false, tc);
      be->synchronize();
    };
    auto run_f32 = [&] {
      be->gemm(fa, s.trans_a, fb, false, tc);
      be->synchronize();
    };
    const double flops = 2.0 * nb * s.m * s.n * s.k;
    const double probe = best_seconds(run_f32, 1);
    const int reps = std::max(3, static_cast<int>(budget / 3 / std::max(probe, 1e-6) / 2));
    double t_half = 1e30, t_f32 = 1e30;
    for (int round = 0; round < 2; ++round) {
      t_half = std::min(t_half, best_seconds(run_half, reps));
      t_f32 = std::min(t_f32, best_seconds(run_f32, reps));
    }
    std::printf("%-22s %6lld %6lld %6lld %10.1f %10.1f %8.3f\n", s.role, (long long)s.m,
                (long long)s.n, (long long)s.k, flops / t_half / 1e9, flops / t_f32 / 1e9,
                t_f32 / t_half);
  }
  return 0;
}
