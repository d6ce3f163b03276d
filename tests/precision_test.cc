// --precision: GEMMs on bf16 / f16 operands (graph ops against plain loops on rounded
// operands), the weights' copies, fp16's loss scaler alone and in tx-train (injected overflow,
// growth, the checkpoint, exact resume), and reduced-precision training tracking fp32's loss.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/registry.h"
#include "core/error.h"
#include "core/half.h"
#include "core/rng.h"
#include "gradient_check.h"
#include "graph/ops.h"
#include "io/safetensors.h"
#include "support/backends.h"
#include "support/programs.h"
#include "support/train_runs.h"
#include "train/checkpoint.h"
#include "train/loss_scaler.h"
#include "train/trainer.h"

namespace {

using tx::DType;
using tx::Graph;
using tx::GraphOptions;
using tx::Var;
using tx::test::random_normal;
using tx::test::TempDir;

float rounded(float v, DType dtype) {
  return dtype == DType::bf16 ? tx::bf16_to_float(tx::float_to_bf16(v))
                              : tx::f16_to_float(tx::float_to_f16(v));
}

std::vector<float> rounded(std::vector<float> v, DType dtype) {
  for (float& x : v) x = rounded(x, dtype);
  return v;
}

// c [m, n] = op(a) op(b) in double; a is [m, k] (or [k, m] with ta), b [k, n] (or [n, k]).
std::vector<double> host_gemm(const float* a, bool ta, const float* b, bool tb, int m, int n,
                              int k) {
  std::vector<double> c(size_t(m) * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p)
        c[size_t(i) * n + j] +=
            double(ta ? a[p * m + i] : a[i * k + p]) * double(tb ? b[j * k + p] : b[p * n + j]);
  return c;
}

// Every value within f32-summation distance of `want`; returns the largest distance of `got`
// from `unrounded` (the f32 answer), which must show that the operands were rounded.
double check_close(const std::vector<float>& got, const std::vector<double>& want,
                   const std::vector<double>& unrounded) {
  REQUIRE(got.size() == want.size());
  double off_f32 = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(double(got[i]) == Approx(want[i]).epsilon(1e-5).margin(2e-4));
    off_f32 = std::max(off_f32, std::abs(double(got[i]) - unrounded[i]));
  }
  return off_f32;
}

// Element e's matrix of a batch: n values from at.
std::vector<float> slice(const std::vector<float>& v, size_t at, size_t n) {
  return std::vector<float>(v.begin() + at, v.begin() + at + n);
}

std::vector<double> scaled(double s, std::vector<double> v) {
  for (double& x : v) x *= s;
  return v;
}

const char* name(DType d) {
  return d == DType::bf16 ? "bf16" : "f16";
}

}  // namespace

TEMPLATE_TEST_CASE(
    "precision: linear with bf16/f16 GEMM operands is plain loops on rounded "
    "operands: forward and backward",
    "[precision]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const int R = 10, I = 48, O = 36;
  tx::Rng rng(71);
  const std::vector<float> xh = random_normal(rng, R * I), wh = random_normal(rng, O * I),
                           bh = random_normal(rng, O), dyh = random_normal(rng, R * O);
  for (const DType dtype : {DType::bf16, DType::f16}) {
    DYNAMIC_SECTION(name(dtype)) {
      Graph g(*be, GraphOptions{true, true, 1, false, dtype});
      Var x = tx::make_var(be->upload(xh, {2, R / 2, I}), true);
      Var w = tx::make_var(be->upload(wh, {O, I}), true, /*persistent=*/true);
      Var b = tx::make_var(be->upload(bh, {O}), true, true);
      Var y = tx::ops::linear(g, x, w, b);
      REQUIRE(y->value.shape() == tx::Shape{2, R / 2, O});
      const std::vector<float> yv = be->download<float>(y->value);
      g.backward(y, be->upload(dyh, {2, R / 2, O}));

      const std::vector<float> xr = rounded(xh, dtype), wr = rounded(wh, dtype),
                               dyr = rounded(dyh, dtype);
      std::vector<double> want = host_gemm(xr.data(), false, wr.data(), true, R, O, I);
      std::vector<double> plain = host_gemm(xh.data(), false, wh.data(), true, R, O, I);
      for (int r = 0; r < R; ++r)
        for (int o = 0; o < O; ++o) want[r * O + o] += bh[o], plain[r * O + o] += bh[o];
      // bf16 keeps 8 bits, f16 11: products 2^-8 or 2^-11 off, far beyond f32's sums.
      CHECK(check_close(yv, want, plain) > 1e-3);
      CHECK(check_close(be->download<float>(x->grad),
                        host_gemm(dyr.data(), false, wr.data(), false, R, I, O),
                        host_gemm(dyh.data(), false, wh.data(), false, R, I, O)) > 1e-4);
      CHECK(check_close(be->download<float>(w->grad),
                        host_gemm(dyr.data(), true, xr.data(), false, O, I, R),
                        host_gemm(dyh.data(), true, xh.data(), false, O, I, R)) > 1e-4);
      // The bias's gradient sums the f32 dy: nothing rounded.
      const std::vector<float> db = be->download<float>(b->grad);
      for (int o = 0; o < O; ++o) {
        double s = 0;
        for (int r = 0; r < R; ++r) s += dyh[r * O + o];
        CHECK(db[o] == Approx(s).margin(1e-5));
      }
    }
  }
}

TEMPLATE_TEST_CASE(
    "precision: batched matmul with bf16/f16 operands is plain loops on rounded "
    "operands in every transpose",
    "[precision]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const int B = 3, M = 5, K = 24, N = 7;
  tx::Rng rng(72);
  const std::vector<float> ah = random_normal(rng, B * M * K), bh = random_normal(rng, B * K * N),
                           dch = random_normal(rng, B * M * N);
  for (const DType dtype : {DType::bf16, DType::f16})
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      DYNAMIC_SECTION(name(dtype) << " trans_a " << ta << " trans_b " << tb) {
        Graph g(*be, GraphOptions{true, true, 1, false, dtype});
        Var a = tx::make_var(be->upload(ah, ta ? tx::Shape{B, K, M} : tx::Shape{B, M, K}), true);
        Var b = tx::make_var(be->upload(bh, tb ? tx::Shape{B, N, K} : tx::Shape{B, K, N}), true);
        Var c = tx::ops::matmul(g, a, ta, b, tb, 0.5f);
        const std::vector<float> cv = be->download<float>(c->value);
        g.backward(c, be->upload(dch, {B, M, N}));
        const std::vector<float> da = be->download<float>(a->grad),
                                 db = be->download<float>(b->grad);
        const std::vector<float> ar = rounded(ah, dtype), br = rounded(bh, dtype),
                                 dcr = rounded(dch, dtype);
        for (int e = 0; e < B; ++e) {
          const size_t ao = size_t(e) * M * K, bo = size_t(e) * K * N, co = size_t(e) * M * N;
          check_close(slice(cv, co, M * N),
                      scaled(0.5, host_gemm(ar.data() + ao, ta, br.data() + bo, tb, M, N, K)),
                      scaled(0.5, host_gemm(ah.data() + ao, ta, bh.data() + bo, tb, M, N, K)));
          // d op(a) = dc op(b)^T (stored transposed when ta), d op(b) = op(a)^T dc.
          const std::vector<double> dopa =
              scaled(0.5, host_gemm(dcr.data() + co, false, br.data() + bo, !tb, M, K, N));
          const std::vector<double> dopb =
              scaled(0.5, host_gemm(ar.data() + ao, !ta, dcr.data() + co, false, K, N, M));
          std::vector<double> want_da(size_t(M) * K), want_db(size_t(K) * N);
          for (int i = 0; i < M; ++i)
            for (int p = 0; p < K; ++p)
              want_da[ta ? size_t(p) * M + i : size_t(i) * K + p] = dopa[size_t(i) * K + p];
          for (int p = 0; p < K; ++p)
            for (int j = 0; j < N; ++j)
              want_db[tb ? size_t(j) * K + p : size_t(p) * N + j] = dopb[size_t(p) * N + j];
          check_close(slice(da, ao, M * K), want_da, want_da);
          check_close(slice(db, bo, K * N), want_db, want_db);
        }
      }
    }
}

// The backward of an operand used twice accumulates into its gradient (the GEMM's beta 1): the
// batched low-precision path must add to C, not overwrite it.
TEMPLATE_TEST_CASE(
    "precision: batched matmul with bf16/f16 operands accumulates the gradient of an operand "
    "used twice",
    "[precision]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const int B = 4, M = 6, K = 32, N = 9;
  tx::Rng rng(74);
  const std::vector<float> ah = random_normal(rng, B * M * K), bh = random_normal(rng, B * K * N),
                           dch = random_normal(rng, B * M * N);
  for (const DType dtype : {DType::bf16, DType::f16}) {
    DYNAMIC_SECTION(name(dtype)) {
      Graph g(*be, GraphOptions{true, true, 1, false, dtype});
      Var a = tx::make_var(be->upload(ah, {B, M, K}), true);
      Var b = tx::make_var(be->upload(bh, {B, N, K}), true);  // as attention's K: trans_b
      Var c = tx::ops::add(g, tx::ops::matmul(g, a, false, b, true, 0.5f),
                           tx::ops::matmul(g, a, false, b, true, 0.25f));
      g.backward(c, be->upload(dch, {B, M, N}));
      const std::vector<float> da = be->download<float>(a->grad), db = be->download<float>(b->grad);
      const std::vector<float> br = rounded(bh, dtype), ar = rounded(ah, dtype),
                               dcr = rounded(dch, dtype);
      for (int e = 0; e < B; ++e) {
        const size_t ao = size_t(e) * M * K, bo = size_t(e) * N * K, co = size_t(e) * M * N;
        // dA = 0.75 dC B, dB = 0.75 dC^T A: 0.5 from one product, 0.25 added by the other.
        const std::vector<double> want_da =
            scaled(0.75, host_gemm(dcr.data() + co, false, br.data() + bo, false, M, K, N));
        const std::vector<double> want_db =
            scaled(0.75, host_gemm(dcr.data() + co, true, ar.data() + ao, false, N, K, M));
        check_close(slice(da, ao, M * K), want_da, want_da);
        check_close(slice(db, bo, N * K), want_db, want_db);
      }
    }
  }
}

TEMPLATE_TEST_CASE(
    "precision: a parameter's rounded copy is made once and refreshed by "
    "weights_changed - and inference's prepared copy computes the same",
    "[precision]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const int R = 4, I = 16, O = 8;
  tx::Rng rng(73);
  const std::vector<float> xh = random_normal(rng, R * I), wh = random_normal(rng, O * I);
  Graph g(*be, GraphOptions{true, true, 1, false, DType::bf16});
  Var x = tx::make_var(be->upload(xh, {R, I}));
  Var w = tx::make_var(be->upload(wh, {O, I}), true, /*persistent=*/true);
  const std::vector<float> before = be->download<float>(tx::ops::linear(g, x, w, nullptr)->value);
  be->fill(w->value, 1.0f);  // as an optimiser step would, without telling the graph
  CHECK(be->download<float>(tx::ops::linear(g, x, w, nullptr)->value) == before);
  g.weights_changed();
  const std::vector<float> after = be->download<float>(tx::ops::linear(g, x, w, nullptr)->value);
  for (int r = 0; r < R; ++r) {
    double s = 0;
    for (int i = 0; i < I; ++i) s += rounded(xh[r * I + i], DType::bf16);
    for (int o = 0; o < O; ++o) CHECK(after[r * O + o] == Approx(s).margin(1e-4));
  }

  // Inference: the weight rounded once at load; the same operands, the same GEMM, the same bits.
  be->copy_from_host(wh.data(), w->value);
  g.weights_changed();
  Var b = tx::make_var(be->upload(random_normal(rng, O), {O}));
  const std::vector<float> trained = be->download<float>(tx::ops::linear(g, x, w, b)->value);
  const auto prepared = tx::ops::PreparedWeight::prepare(*be, w->value, tx::ops::WeightForm::bf16);
  REQUIRE(prepared.low.dtype() == DType::bf16);
  Graph infer(*be, GraphOptions{false, false});
  CHECK(be->download<float>(tx::ops::linear(infer, x, w, b, prepared)->value) == trained);
  std::vector<float> relu = trained;
  for (float& v : relu) v = std::max(v, 0.0f);
  CHECK(be->download<float>(
            tx::ops::linear_fused(infer, x, w, b, prepared, tx::ops::Fused::relu)->value) == relu);
  Var xg = tx::make_var(be->upload(xh, {R, I}), true);
  REQUIRE_THROWS_WITH(tx::ops::linear(g, xg, w, b, prepared),
                      Catch::Contains("bf16 weights are for inference"));
}

TEST_CASE(
    "precision: the loss scaler halves on overflow, doubles after its interval, stops "
    "at its minimum",
    "[precision]") {
  tx::train::LossScalerOptions o;
  CHECK(tx::train::LossScaler(o).scale() == 1.0);  // disabled
  o.enabled = true;
  o.initial = 1024;
  o.growth_interval = 3;
  o.minimum = 100;
  tx::train::LossScaler s(o);
  CHECK(s.scale() == 1024);
  s.update(false);
  s.update(false);
  CHECK(s.scale() == 1024);
  CHECK(s.clean_updates() == 2);
  s.update(true);  // an overflow resets the count
  CHECK(s.scale() == 512);
  CHECK(s.clean_updates() == 0);
  for (int i = 0; i < 3; ++i) s.update(false);
  CHECK(s.scale() == 1024);
  CHECK(s.clean_updates() == 0);
  s.restore(256, 2);
  s.update(false);
  CHECK(s.scale() == 512);
  s.update(true);
  s.update(true);
  CHECK(s.scale() == 128);
  REQUIRE_THROWS_WITH(s.update(true), Catch::Contains("--precision fp32"));
  REQUIRE_THROWS_AS(s.restore(0, 0), tx::Error);
}

namespace {

// The tiny run of trainer_test.cc in `precision`.
tx::train::TrainerOptions tiny_run(const TempDir& dir, DType precision) {
  tx::train::TrainerOptions o = tx::test::tiny_options(dir);
  o.precision = precision;
  return o;
}

// Each logged display span's field `key`, in order.
std::vector<double> logged(const std::string& model_dir, const std::string& key) {
  std::ifstream in(tx::train::Trainer::log_path(model_dir));
  std::vector<double> v;
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("type", "") == "train" && j.contains(key)) v.push_back(j.at(key).get<double>());
  }
  return v;
}

nlohmann::json checkpoint_json(const std::string& model_dir, const char* key) {
  const auto meta =
      tx::train::read_checkpoint_metadata(tx::train::Trainer::checkpoint_path(model_dir));
  return nlohmann::json::parse(meta.at(key));
}

}  // namespace

TEMPLATE_TEST_CASE(
    "precision: fp16 training with an injected overflow skips every update and "
    "halves the scale each time",
    "[precision][trainer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TempDir dir;
  tx::train::TrainerOptions o = tiny_run(dir, DType::f16);
  o.loss_scaling.initial = 0x1p100;  // any gradient times 2^100 is beyond fp16's 65504
  o.after_updates = 10;
  tx::train::Trainer(*be, o).run();
  CHECK(logged(o.model_dir, "loss_scale") == std::vector<double>{0x1p95, 0x1p90});
  CHECK(checkpoint_json(o.model_dir, tx::train::kOptimizerKey).at("step") == 0);  // all skipped
  CHECK(checkpoint_json(o.model_dir, tx::train::kTrainingStateKey).at("loss_scale") == 0x1p90);
}

TEMPLATE_TEST_CASE(
    "precision: fp16's loss scale grows, is in the checkpoint, and a resumed run "
    "equals the straight one bit for bit",
    "[precision][trainer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TempDir straight, split;
  tx::train::TrainerOptions a = tiny_run(straight, DType::f16);
  a.loss_scaling.initial = 16;
  a.loss_scaling.growth_interval = 3;
  a.after_updates = 16;
  tx::train::Trainer(*be, a).run();
  // 16 doubles at updates 3, 6, 9, 12, 15 (no overflow at these scales); logged at 5, 10, 15
  // and after the last update, 16.
  CHECK(logged(a.model_dir, "loss_scale") == std::vector<double>{32, 128, 512, 512});
  const nlohmann::json state = checkpoint_json(a.model_dir, tx::train::kTrainingStateKey);
  CHECK(state.at("loss_scale") == 512);
  CHECK(state.at("loss_scale_clean") == 1);
  CHECK(checkpoint_json(a.model_dir, tx::train::kOptimizerKey).at("step") == 16);

  tx::train::TrainerOptions b = tiny_run(split, DType::f16);
  b.loss_scaling = a.loss_scaling;
  b.after_updates = 7;  // mid-interval: the clean count must resume too
  tx::train::Trainer(*be, b).run();
  b.after_updates = 16;
  CHECK(tx::train::Trainer(*be, b).run().resumed);
  CHECK(tx::test::slurp(tx::train::Trainer::checkpoint_path(a.model_dir)) ==
        tx::test::slurp(tx::train::Trainer::checkpoint_path(b.model_dir)));
}

TEMPLATE_TEST_CASE("precision: bf16 and fp16 training track fp32's loss over 200 updates",
                   "[precision][trainer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  std::vector<std::vector<double>> costs;
  for (const DType precision : {DType::f32, DType::bf16, DType::f16}) {
    TempDir dir;
    tx::train::TrainerOptions o = tiny_run(dir, precision);
    o.after_updates = 200;
    o.disp_freq = 20;
    o.save_freq = 200;
    tx::train::Trainer(*be, o).run();
    costs.push_back(logged(o.model_dir, "cost"));
    REQUIRE(costs.back().size() == 10);
  }
  // The loss falls by far more than the precisions differ: within 2% of fp32's at every span
  // (measured on AMD Zen 3, both emulated there: bf16 within 0.31%, fp16 within 0.32%).
  CHECK(costs[0].back() < 0.6 * costs[0].front());
  for (int p = 1; p < 3; ++p) {
    CHECK(costs[p] != costs[0]);  // the rounding reached the training step
    for (size_t i = 0; i < costs[0].size(); ++i) {
      INFO("precision " << p << " span " << i << ": " << costs[p][i] << " vs fp32 " << costs[0][i]);
      CHECK(costs[p][i] == Approx(costs[0][i]).epsilon(0.02));
    }
  }
}

TEST_CASE(
    "precision: --precision on the programs: bf16 where the CPU has it, fp16 emulated "
    "with a line saying so, --int8 with it refused",
    "[precision][trainer]") {
  TempDir dir;
  tx::test::write_reversal_corpus(dir.file("train.src"), dir.file("train.tgt"), 200, 7);
  const std::string train = "--train-sets " + dir.file("train.src") + " " + dir.file("train.tgt") +
                            " --d-model 16 --d-ff 32 --heads 2 --enc-layers 1 --dec-layers 1"
                            " --dim-vocabs 30 --max-tokens 128 --after-updates 4 --cpu-threads 2"
                            " --tied-embeddings all";
  tx::register_builtin_backends();
  const std::string missing = tx::create_backend("cpu", {})->half_gemm_missing(DType::bf16);
  tx::test::Run bf16 = tx::test::run_program(
      dir, TX_TRAIN_BIN, train + " --model " + dir.file("b") + " --precision bf16");
  INFO(bf16.err);
  if (missing.empty()) {
    CHECK(bf16.status == 0);
    CHECK(bf16.err.find("precision: bf16 GEMM operands") != std::string::npos);
  } else {
    CHECK(bf16.status == 2);
    CHECK(tx::test::one_line(bf16.err));
    CHECK(bf16.err.find("--precision bf16: this CPU has no bf16 GEMM") != std::string::npos);
    CHECK(!std::filesystem::exists(dir.file("b/checkpoint.safetensors")));
  }
  tx::test::Run f16 = tx::test::run_program(
      dir, TX_TRAIN_BIN, train + " --model " + dir.file("h") + " --precision fp16");
  INFO(f16.err);
  CHECK(f16.status == 0);
  CHECK(f16.err.find("fp16-rounded operands") != std::string::npos);
  CHECK(f16.err.find(
            "precision: f16 GEMM operands, f32 sums, weights and optimiser; loss scale 32768") !=
        std::string::npos);

  std::ofstream(dir.file("in.txt")) << "a b c\n";
  tx::test::Run both = tx::test::run_program(
      dir, TX_TRANSLATE_BIN,
      "-m " + dir.file("h/model.safetensors") + " -v " + dir.file("h/vocab.spm") +
          " --int8 --precision fp16 < " + dir.file("in.txt"));
  CHECK(both.status == 2);
  CHECK(both.err.find("--int8 and --precision fp16 each choose the weights' form") !=
        std::string::npos);
  tx::test::Run translated = tx::test::run_program(dir, TX_TRANSLATE_BIN,
                                                   "-m " + dir.file("h/model.safetensors") +
                                                       " -v " + dir.file("h/vocab.spm") +
                                                       " --precision fp16 < " + dir.file("in.txt"));
  INFO(translated.err);
  CHECK(translated.status == 0);
  CHECK(std::count(translated.out.begin(), translated.out.end(), '\n') == 1);

  // Activations beyond fp16's 65,504 (the first feed-forward layer's weights x 1e5, all finite
  // in fp16 too) gave empty lines scored -nan with exit 0: an error now; fp32 still runs.
  tx::io::TensorFile file = tx::io::read_safetensors(dir.file("h/model.safetensors"));
  bool scaled = false;
  for (tx::io::NamedTensor& t : file.tensors)
    if (t.name.find("ffn.fc1.weight") != std::string::npos) {
      std::vector<float> w = t.to_floats();
      for (float& x : w) x *= 1e5f;
      t = tx::io::NamedTensor::from_floats(t.name, t.dtype, t.shape, w);
      scaled = true;
    }
  REQUIRE(scaled);
  tx::io::write_safetensors(dir.file("loud.safetensors"), file);
  const std::string loud = "-m " + dir.file("loud.safetensors") + " -v " + dir.file("h/vocab.spm");
  for (const char* search : {"", " -b 1", " --n-best 2"}) {
    tx::test::Run nan = tx::test::run_program(
        dir, TX_TRANSLATE_BIN, loud + search + " --precision fp16 < " + dir.file("in.txt"));
    INFO(search << ": " << nan.err);
    CHECK(nan.status == 1);
    CHECK(nan.out.empty());
    CHECK(nan.err.find("scores are NaN") != std::string::npos);
    CHECK(nan.err.find("65,504") != std::string::npos);
  }
  CHECK(tx::test::run_program(dir, TX_TRANSLATE_BIN, loud + " < " + dir.file("in.txt")).status ==
        0);
  tx::test::Run scored = tx::test::run_program(
      dir, TX_SCORE_BIN,
      loud + " --precision fp16 --src " + dir.file("in.txt") + " --tgt " + dir.file("in.txt"));
  CHECK(scored.status == 1);
  CHECK(scored.err.find("in.txt' line 1: the model's score is NaN") != std::string::npos);
}
