// lib/train: learning-rate schedules against their formulas, Adam against a plain loop in
// double, gradient clipping against a host norm, early stopping.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "support/backends.h"
#include "support/reference.h"
#include "train/batch_plan.h"
#include "train/early_stopping.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"
#include "train/training_state.h"
#include "train_tiny.h"

using Catch::Contains;
using tx::Tensor;
using tx::nn::ParameterSet;
using tx::test::TinyRun;
using tx::train::Adam;
using tx::train::AdamOptions;
using tx::train::EarlyStopping;
using tx::train::LrOptions;
using tx::train::LrSchedule;
using tx::train::MetricDirection;

// ---- learning-rate schedules ----------------------------------------------------------------

TEST_CASE("train lr schedule: the paper's formula, with its peak at step == warmup",
          "[train][lr]") {
  for (double d_model : {512.0, 1024.0}) {
    LrSchedule s = LrSchedule::transformer(int64_t(d_model), 4000);
    for (double step : {1.0, 10.0, 1000.0, 3999.0, 4000.0, 4001.0, 10000.0, 100000.0}) {
      // Section 5.3: lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup_steps^-1.5).
      double want =
          std::pow(d_model, -0.5) * std::min(std::pow(step, -0.5), step * std::pow(4000.0, -1.5));
      INFO("d_model " << d_model << ", step " << step);
      CHECK(s(int64_t(step)) == Approx(want).epsilon(1e-12));
    }
    const double peak = std::pow(d_model, -0.5) * std::pow(4000.0, -0.5);
    CHECK(s(4000) == Approx(peak).epsilon(1e-12));
    CHECK(s(3999) < s(4000));
    CHECK(s(4001) < s(4000));
    CHECK(s(1) == Approx(std::pow(d_model, -0.5) * std::pow(4000.0, -1.5)).epsilon(1e-12));
  }
  // factor scales the whole curve (transformer-big recipes use factor 2).
  CHECK(LrSchedule::transformer(512, 4000, 2.0)(123) ==
        Approx(2.0 * LrSchedule::transformer(512, 4000)(123)).epsilon(1e-12));
  // d_model 512, warmup 4000: the peak the paper's base model reaches, ~7e-4.
  CHECK(LrSchedule::transformer(512, 4000)(4000) == Approx(6.9877e-4).epsilon(1e-4));
}

TEST_CASE("train lr schedule: inverse-sqrt warms up linearly to the peak, then decays",
          "[train][lr]") {
  const double peak = 5e-4, init = 1e-7;
  const double w = 4000;
  LrSchedule s = LrSchedule::inverse_sqrt(peak, 4000, init);
  for (double step : {1.0, 2000.0, 3999.0}) {
    INFO("step " << step);
    CHECK(s(int64_t(step)) == Approx(init + (peak - init) * step / w).epsilon(1e-12));
  }
  for (double step : {4000.0, 4001.0, 16000.0, 1e6}) {
    INFO("step " << step);
    CHECK(s(int64_t(step)) == Approx(peak * std::sqrt(w) / std::sqrt(step)).epsilon(1e-12));
  }
  CHECK(s(4000) == Approx(peak).epsilon(1e-15));
  CHECK(s(16000) == Approx(peak / 2).epsilon(1e-12));
}

TEST_CASE("train lr schedule: linear warms up, then falls in a straight line to the last update",
          "[train][lr]") {
  const double peak = 2e-3;
  LrSchedule s = LrSchedule::linear(peak, 800, 2604);
  // Plain arithmetic: 800 warm-up steps up, then 1805 steps (800 .. 2604) down to peak / 1805.
  CHECK(s(1) == Approx(peak / 800).epsilon(1e-12));
  CHECK(s(400) == Approx(peak / 2).epsilon(1e-12));
  CHECK(s(799) == Approx(peak * 799 / 800).epsilon(1e-12));
  CHECK(s(800) == Approx(peak).epsilon(1e-15));
  CHECK(s(801) == Approx(peak * 1804 / 1805).epsilon(1e-12));
  CHECK(s(1702) == Approx(peak * 903 / 1805).epsilon(1e-12));
  CHECK(s(2604) == Approx(peak / 1805).epsilon(1e-12));
  CHECK(s(2605) == 0);
  for (int64_t step = 801; step <= 2604; step += 101) CHECK(s(step) < s(step - 1));
  CHECK(s.describe() == "linear(lr=0.002, warmup=800, to 0 at update 2604)");
  // A run as short as its warm-up peaks at its last update.
  CHECK(LrSchedule::linear(peak, 10, 10)(10) == Approx(peak));
  CHECK_THROWS_WITH(LrSchedule::linear(peak, 800, 799),
                    Contains("before the end of the warmup (800)") && Contains("--lr-warmup"));

  LrOptions o;
  o.schedule = "linear";
  o.lr = peak;
  o.warmup = 800;
  CHECK_THROWS_WITH(
      LrSchedule::from_options(o),
      Contains("'linear'") && Contains("--after-epochs, --after-updates or --after-minutes"));
  o.total_updates = 2604;
  CHECK(LrSchedule::from_options(o).kind() == LrSchedule::Kind::linear);
  CHECK(LrSchedule::from_options(o)(2604) == s(2604));
}

TEST_CASE("train lr schedule: constant, names, and invalid settings", "[train][lr]") {
  LrSchedule c = LrSchedule::constant(3e-4);
  CHECK(c(1) == 3e-4);
  CHECK(c(1000000) == 3e-4);

  LrOptions o;
  o.d_model = 256;
  o.warmup = 100;
  o.factor = 2;
  o.lr = 1e-3;
  for (const char* name : {"transformer", "noam"}) {
    o.schedule = name;
    LrSchedule s = LrSchedule::from_options(o);
    CHECK(s.kind() == LrSchedule::Kind::transformer);
    CHECK(s(50) == LrSchedule::transformer(256, 100, 2)(50));
  }
  for (const char* name : {"inverse-sqrt", "inverse_sqrt"}) {
    o.schedule = name;
    LrSchedule s = LrSchedule::from_options(o);
    CHECK(s.name() == "inverse-sqrt");
    CHECK(s(100) == Approx(1e-3));
  }
  o.schedule = "constant";
  CHECK(LrSchedule::from_options(o)(7) == 1e-3);
  CHECK(LrSchedule::names() ==
        std::vector<std::string>{"transformer", "inverse-sqrt", "linear", "constant"});
  CHECK_THAT(LrSchedule::from_options(o).describe(), Contains("constant(lr=0.001)"));

  o.schedule = "cosine";
  CHECK_THROWS_WITH(LrSchedule::from_options(o),
                    Contains("unknown learning-rate schedule 'cosine'") &&
                        Contains("transformer, inverse-sqrt, linear or constant"));
  CHECK_THROWS_WITH(LrSchedule::transformer(512, 0), Contains("warmup = 0"));
  CHECK_THROWS_WITH(LrSchedule::inverse_sqrt(-1, 10), Contains("lr = -1"));
  CHECK_THROWS_WITH(LrSchedule::constant(0), Contains("positive"));
  CHECK_THROWS_WITH(c(0), Contains("step 0 must be >= 1"));
}

// ---- Adam -------------------------------------------------------------------------------------

TEST_CASE("train adam: several steps over a tiny Transformer equal a plain Adam in double",
          "[train][adam]") {
  auto be = tx::test::cpu_backend();
  TinyRun run(*be, 3, 4);  // paper defaults: beta1 0.9, beta2 0.98, eps 1e-9, no clipping
  CHECK(run.adam.options().beta1 == 0.9f);
  CHECK(run.adam.options().beta2 == 0.98f);
  CHECK(run.adam.options().eps == 1e-9f);
  const auto& items = run.params.items();
  std::vector<std::vector<double>> w, m, v;
  for (const auto& item : items) {
    w.push_back(tx::test::to_double(be->download<float>(item.second->value)));
    m.emplace_back(w.back().size(), 0.0);
    v.emplace_back(w.back().size(), 0.0);
  }
  const double b1 = 0.9, b2 = 0.98, eps = 1e-9;
  for (int t = 1; t <= 5; ++t) {
    run.forward_backward();
    ++run.next_batch;
    std::vector<std::vector<float>> grads;
    for (const auto& item : items) grads.push_back(be->download<float>(item.second->grad));
    const double lr = run.schedule(t), scale = 1.0 / double(run.last_tokens);
    tx::train::AdamStepInfo info = run.adam.step(float(lr), float(1.0 / double(run.last_tokens)));
    run.params.zero_grad(*be);
    CHECK(info.grad_norm > 0);  // measured without clipping too (non-finite skips)
    CHECK(std::isfinite(info.grad_norm));
    CHECK_FALSE(info.clipped);
    CHECK(run.adam.steps() == t);
    for (size_t p = 0; p < items.size(); ++p) {
      for (size_t i = 0; i < w[p].size(); ++i) {
        const double g = double(grads[p][i]) * scale;
        m[p][i] = b1 * m[p][i] + (1 - b1) * g;
        v[p][i] = b2 * v[p][i] + (1 - b2) * g * g;
        const double mhat = m[p][i] / (1 - std::pow(b1, t)), vhat = v[p][i] / (1 - std::pow(b2, t));
        w[p][i] -= lr * mhat / (std::sqrt(vhat) + eps);
      }
      INFO("step " << t << ", " << items[p].first);
      // Each update moves a weight by about lr; float rounding of the update is ~1e-7 of it.
      TX_CHECK_OK(tx::test::compare(be->download<float>(items[p].second->value), w[p], 1e-5, 1e-6));
      // A moment whose gradient sums cancel is tiny while its float error follows the summands:
      // the absolute floor scales with the tensor's largest moment (the ASan build at -O1
      // rounded one ffn_norm.bias entry of m, 9.9e-7, 1.9e-9 off: over a 1e-9 + 1e-4 * m limit).
      double m_max = 0, v_max = 0;
      for (size_t i = 0; i < w[p].size(); ++i) {
        m_max = std::max(m_max, std::abs(m[p][i]));
        v_max = std::max(v_max, v[p][i]);
      }
      TX_CHECK_OK(tx::test::compare(be->download<float>(run.adam.m(p)), m[p], 1e-4,
                                    std::max(1e-9, 1e-5 * m_max)));
      TX_CHECK_OK(tx::test::compare(be->download<float>(run.adam.v(p)), v[p], 1e-4,
                                    std::max(1e-12, 1e-5 * v_max)));
    }
  }
}

namespace {

// Three parameters with hand-set gradients, and a fourth that never gets one.
struct ClipFixture {
  explicit ClipFixture(tx::Backend& be) {
    const std::vector<int64_t> sizes = {6, 15, 4};
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<float> w = tx::test::random_vector(sizes[k], 10 + k);
      std::vector<float> g = tx::test::random_vector(sizes[k], 20 + k, -2.0f, 2.0f);
      tx::Var p = params.add("p" + std::to_string(k), be.upload(w, {sizes[k]}));
      p->grad = be.upload(g, {sizes[k]});
      grads.push_back(g);
      for (float x : g) sq += double(x) * x;
    }
    params.add("unused", be.upload(std::vector<float>{1, 2, 3}, {3}));
  }
  double norm() const { return std::sqrt(sq); }

  ParameterSet params;
  std::vector<std::vector<float>> grads;
  double sq = 0;
};

// The gradient adam_update saw, recovered from m after the first step: m = (1 - beta1) g.
std::vector<double> seen_gradient(tx::Backend& be, const Adam& adam, size_t i, float beta1) {
  std::vector<double> g = tx::test::to_double(be.download<float>(adam.m(i)));
  for (double& x : g) x /= (1.0 - double(beta1));
  return g;
}

}  // namespace

TEMPLATE_TEST_CASE(
    "train adam: set_flat's one call per step equals one call per parameter bit "
    "for bit",
    "[train][adam]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const std::vector<int64_t> sizes = {6, 15, 4, 1000};
  ParameterSet apart, joined;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const std::vector<float> w = tx::test::random_vector(sizes[k], 30 + k);
    apart.add("p" + std::to_string(k), be->upload(w, {sizes[k]}));
    joined.add("p" + std::to_string(k), be->upload(w, {sizes[k]}));
  }
  const Tensor values = joined.make_contiguous(*be);
  const Tensor grads = be->zeros({joined.numel()});
  int64_t offset = 0;
  for (const auto& item : joined.items()) {
    const int64_t n = item.second->value.numel();
    // The values moved into the buffer unchanged.
    CHECK(be->download<float>(item.second->value) ==
          be->download<float>(apart.get(item.first)->value));
    item.second->grad = grads.slice(offset, offset + n);
    offset += n;
  }
  Adam a(*be, apart), b(*be, joined);
  b.set_flat(values, grads);
  for (int t = 1; t <= 3; ++t) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      const std::vector<float> g = tx::test::random_vector(sizes[k], 100 * t + k, -2.0f, 2.0f);
      apart.items()[k].second->grad = be->upload(g, {sizes[k]});
      be->copy_from_host(g.data(), joined.items()[k].second->grad);
    }
    const tx::train::AdamStepInfo ia = a.step(1e-3f, 0.25f), ib = b.step(1e-3f, 0.25f);
    CHECK(ib.grad_norm == Approx(ia.grad_norm).epsilon(1e-6));
    for (size_t k = 0; k < sizes.size(); ++k) {
      INFO("step " << t << ", p" << k);
      CHECK(be->download<float>(joined.items()[k].second->value) ==
            be->download<float>(apart.items()[k].second->value));
      CHECK(be->download<float>(b.m(k)) == be->download<float>(a.m(k)));
      CHECK(be->download<float>(b.v(k)) == be->download<float>(a.v(k)));
    }
  }
  // A parameter given a tensor of its own is no longer updated through the buffer: an error.
  joined.items()[2].second->value = be->zeros({sizes[2]});
  REQUIRE_THROWS_WITH(b.step(1e-3f), Contains("'p2'") && Contains("set_flat"));
}

TEST_CASE("train adam clipping: above clip_norm the global norm becomes clip_norm",
          "[train][adam][clip]") {
  auto be = tx::test::cpu_backend();
  ClipFixture f(*be);
  const float grad_scale = 0.5f;
  const double scaled = f.norm() * grad_scale;
  const float clip = float(scaled / 3);  // well below the norm: clipping must act
  AdamOptions o;
  o.clip_norm = clip;
  Adam adam(*be, f.params, o);
  CHECK(adam.grad_norm(grad_scale) == Approx(scaled).epsilon(1e-6));
  tx::train::AdamStepInfo info = adam.step(1e-3f, grad_scale);
  CHECK(info.clipped);
  CHECK_FALSE(info.skipped);
  CHECK(info.grad_norm == Approx(scaled).epsilon(1e-6));
  CHECK(info.applied_scale == Approx(grad_scale * clip / scaled).epsilon(1e-6));
  double seen_sq = 0;
  for (size_t k = 0; k < f.grads.size(); ++k) {
    std::vector<double> want;
    for (float g : f.grads[k]) want.push_back(double(g) * grad_scale * clip / scaled);
    std::vector<double> got = seen_gradient(*be, adam, k, o.beta1);
    for (double x : got) seen_sq += x * x;
    std::vector<float> got_f(got.begin(), got.end());
    INFO("p" << k);
    TX_CHECK_OK(tx::test::compare(got_f, want, 1e-5, 1e-7));
  }
  CHECK(std::sqrt(seen_sq) == Approx(clip).epsilon(1e-5));
  // A parameter without a gradient is outside the norm and is not updated.
  CHECK(be->download<float>(f.params.get("unused")->value) == std::vector<float>{1, 2, 3});
  CHECK(be->download<float>(adam.m(3)) == std::vector<float>{0, 0, 0});
}

TEST_CASE("train adam clipping: below clip_norm the gradients are untouched",
          "[train][adam][clip]") {
  auto be = tx::test::cpu_backend();
  ClipFixture f(*be);
  AdamOptions o;
  o.clip_norm = float(f.norm() * 1.5);
  Adam adam(*be, f.params, o);
  tx::train::AdamStepInfo info = adam.step(1e-3f);
  CHECK_FALSE(info.clipped);
  CHECK(info.applied_scale == 1.0f);
  CHECK(info.grad_norm == Approx(f.norm()).epsilon(1e-6));
  for (size_t k = 0; k < f.grads.size(); ++k) {
    INFO("p" << k);
    std::vector<float> got;
    for (double x : seen_gradient(*be, adam, k, o.beta1)) got.push_back(float(x));
    TX_CHECK_OK(tx::test::compare(got, tx::test::to_double(f.grads[k]), 1e-6, 1e-8));
  }
}

TEST_CASE("train adam: a non-finite gradient norm skips the update", "[train][adam][clip]") {
  auto be = tx::test::cpu_backend();
  ClipFixture f(*be);
  std::vector<float> g = f.grads[1];
  g[3] = std::numeric_limits<float>::infinity();
  be->copy_from_host(g.data(), f.params.get("p1")->grad);
  std::vector<float> before = be->download<float>(f.params.get("p0")->value);
  // With clipping and without: the paper's setup (no clipping) must not apply inf/NaN either.
  for (float clip : {1.0f, 0.0f}) {
    INFO("clip_norm " << clip);
    AdamOptions o;
    o.clip_norm = clip;
    Adam adam(*be, f.params, o);
    tx::train::AdamStepInfo info = adam.step(1e-3f);
    CHECK(info.skipped);
    CHECK(adam.steps() == 0);
    CHECK(be->download<float>(f.params.get("p0")->value) == before);
    CHECK(be->download<float>(adam.m(0)) == std::vector<float>(6, 0.0f));
  }
}

TEST_CASE("train adam: invalid options and a parameter set that grew", "[train][adam]") {
  auto be = tx::test::cpu_backend();
  ParameterSet params;
  params.add("a", be->zeros({2}));
  AdamOptions o;
  o.beta2 = 1.0f;
  CHECK_THROWS_WITH(Adam(*be, params, o), Contains("beta2 = 1"));
  o = AdamOptions();
  o.clip_norm = -1;
  CHECK_THROWS_WITH(Adam(*be, params, o), Contains("clip_norm = -1"));
  Adam adam(*be, params);
  params.add("b", be->zeros({2}));
  CHECK_THROWS_WITH(adam.step(1e-3f), Contains("grew from 1 to 2"));
  CHECK_THROWS_WITH(adam.set_steps(-1), Contains("must be >= 0"));
}

TEST_CASE("train adam: an empty parameter set steps without touching memory", "[train][adam]") {
  // Its norms buffer holds one slot even for no parameters: the sum once ran over that slot
  // and read a parameter that is not there.
  auto be = tx::test::cpu_backend();
  ParameterSet params;
  Adam adam(*be, params);
  CHECK(adam.grad_norm() == 0.0);
  CHECK_NOTHROW(adam.step(1e-3f));
}

// ---- early stopping ---------------------------------------------------------------------------

TEST_CASE("train early stopping: lower-better and higher-better metrics with patience",
          "[train][early]") {
  EarlyStopping ce("cross-entropy", 2);
  CHECK(ce.direction() == MetricDirection::lower_is_better);
  CHECK_FALSE(ce.has_best());
  CHECK(ce.update(3.0));
  CHECK(ce.update(2.5));
  CHECK_FALSE(ce.update(2.5));  // equal is no improvement
  CHECK(ce.stalled() == 1);
  CHECK_FALSE(ce.should_stop());
  CHECK(ce.update(2.4));  // a new best resets the count
  CHECK(ce.stalled() == 0);
  CHECK_FALSE(ce.update(2.6));
  CHECK_FALSE(ce.update(std::nan("")));  // NaN is never a best, and counts as stalled
  CHECK(ce.stalled() == 2);
  CHECK(ce.should_stop());
  CHECK(ce.best() == 2.4);
  CHECK(ce.state().validations == 6);

  EarlyStopping bleu("bleu", 1);
  CHECK(bleu.direction() == MetricDirection::higher_is_better);
  CHECK(bleu.update(20.0));
  CHECK(bleu.update(21.5));
  CHECK_FALSE(bleu.update(21.0));
  CHECK(bleu.should_stop());
  CHECK(bleu.best() == 21.5);

  CHECK(tx::train::direction_of("perplexity") == MetricDirection::lower_is_better);
  CHECK(tx::train::direction_of("chrf") == MetricDirection::higher_is_better);
  CHECK_THROWS_WITH(tx::train::direction_of("accuracy"),
                    Contains("unknown validation metric 'accuracy'"));

  EarlyStopping never("perplexity", 0);  // patience 0: track, never stop
  never.update(5);
  for (int i = 0; i < 100; ++i) never.update(6);
  CHECK_FALSE(never.should_stop());
  CHECK(never.best() == 5);
}

TEST_CASE("train early stopping: its state survives JSON and must match the metric",
          "[train][early]") {
  EarlyStopping a("bleu", 3);
  a.update(10.123456789012345);
  a.update(9);
  nlohmann::json j = nlohmann::json::parse(a.state().to_json().dump());
  EarlyStopping b("bleu", 3);
  b.restore(EarlyStopping::State::from_json(j, "test"));
  CHECK(b.best() == a.best());  // bit-exact through the text
  CHECK(b.stalled() == 1);
  CHECK(b.state().validations == 2);
  CHECK_FALSE(b.update(10.0));
  CHECK(b.stalled() == 2);

  EarlyStopping c("cross-entropy", 3);
  CHECK_THROWS_WITH(c.restore(a.state()),
                    Contains("tracked 'bleu'") && Contains("validates 'cross-entropy'"));
  j.erase("stalled");
  CHECK_THROWS_WITH(EarlyStopping::State::from_json(j, "ckpt"), Contains("no 'stalled'"));
}

TEST_CASE("train state: a batch plan's change is named, the pair count before the lengths",
          "[train][state]") {
  const nlohmann::json saved = {{"--max-tokens", 4096},
                                {"--mini-batch", 0},
                                {"--maxi-batch", 100},
                                {"--seed", 1},
                                {"--sentencepiece-alphas", nlohmann::json::array()},
                                {"pairs", 29000},
                                {"lengths", "0123456789abcdef"}};
  using tx::train::batch_plan_change;
  CHECK(batch_plan_change(saved, saved).empty());
  CHECK(batch_plan_change(nullptr, saved).empty());  // a checkpoint from before the plan
  nlohmann::json now = saved;
  now["pairs"] = 28000;
  now["lengths"] = "fedcba9876543210";
  CHECK_THAT(batch_plan_change(saved, now),
             Contains("29000 pairs after the length filter, now 28000"));
  now["pairs"] = 29000;
  CHECK_THAT(batch_plan_change(saved, now), Contains("as many pairs, of other lengths"));
  now["--seed"] = 7;
  CHECK(batch_plan_change(saved, now) ==
        "--seed 1 (this run: 7), other training data: as many pairs, of other lengths (the "
        "corpus changed)");
  // Every change is named, the data once.
  now["--max-tokens"] = 2048;
  now["pairs"] = 28000;
  CHECK(batch_plan_change(saved, now) ==
        "--max-tokens 4096 (this run: 2048), --seed 1 (this run: 7), other training data: 29000 "
        "pairs after the length filter, now 28000 (the corpus changed)");
  now = saved;
  now["--seed"] = 7;
  CHECK(batch_plan_change(saved, now) == "--seed 1 (this run: 7)");
  nlohmann::json older = saved;  // a plan without a field compares the others
  older.erase("--seed");
  now["lengths"] = "fedcba9876543210";
  CHECK(batch_plan_change(older, now) ==
        "other training data: as many pairs, of other lengths "
        "(the corpus changed)");
}

TEST_CASE("train state: TrainingState JSON round trip and damaged fields", "[train][state]") {
  tx::train::TrainingState s;
  s.update = 1234;
  s.epoch = 3;
  s.data_position = {7, -1, 1ll << 40};
  s.rng_seed = 0xfedcba9876543210ull;
  s.rng_counter = 1ull << 63;
  s.early_stopping.metric = "bleu";
  s.early_stopping.has_best = true;
  s.early_stopping.best = 27.3;
  s.early_stopping.stalled = 2;
  s.early_stopping.validations = 9;
  nlohmann::json j = nlohmann::json::parse(s.to_json().dump());
  CHECK(tx::train::TrainingState::from_json(j, "x") == s);
  CHECK_FALSE(j.contains("train_seconds"));  // a run without --after-minutes
  tx::train::TrainingState timed = s;
  timed.train_seconds = 61.25;
  timed.time_last_update = 4321;
  timed.time_budget_minutes = 66;
  CHECK(tx::train::TrainingState::from_json(nlohmann::json::parse(timed.to_json().dump()), "x") ==
        timed);
  CHECK_FALSE(tx::train::TrainingState::from_json(j, "x") == timed);
  tx::train::TrainingState partly = timed;  // a budgeted run resumed from an unbudgeted one
  partly.untimed_updates = 1000;
  const nlohmann::json pj = nlohmann::json::parse(partly.to_json().dump());
  CHECK(pj.at("untimed_updates").get<int64_t>() == 1000);
  CHECK(tx::train::TrainingState::from_json(pj, "x") == partly);
  CHECK_FALSE(tx::train::TrainingState::from_json(pj, "x") == timed);
  // The batch plan: kept as written, absent from older checkpoints, an object or refused.
  CHECK_FALSE(j.contains("batch_plan"));
  tx::train::TrainingState planned = s;
  planned.batch_plan = {{"--max-tokens", 4096}, {"--seed", 1}, {"lengths", "00ff"}};
  const nlohmann::json plan_j = nlohmann::json::parse(planned.to_json().dump());
  CHECK(tx::train::TrainingState::from_json(plan_j, "x") == planned);
  CHECK_FALSE(tx::train::TrainingState::from_json(plan_j, "x") == s);
  nlohmann::json bad_plan = plan_j;
  bad_plan["batch_plan"] = "4096";
  CHECK_THROWS_WITH(tx::train::TrainingState::from_json(bad_plan, "ckpt"),
                    Contains("ckpt") && Contains("batch_plan must be an object"));
  j["rng_counter"] = -5;
  CHECK_THROWS_WITH(tx::train::TrainingState::from_json(j, "ckpt"),
                    Contains("ckpt") && Contains("unsigned"));
  j.erase("epoch");
  CHECK_THROWS_WITH(tx::train::TrainingState::from_json(j, "ckpt"), Contains("no 'epoch'"));
}
