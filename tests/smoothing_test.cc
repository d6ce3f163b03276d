// tx-train --exponential-smoothing (train/smoothing.h): Marian's decay, the saved model as the
// smoothed sequence of the trained weights (computed here from a run without smoothing, whose
// training is the same), exact resume, and the flag.
#include "train/smoothing.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "core/rng.h"
#include "nn/parameters.h"
#include "nn/transformer.h"
#include "support/backends.h"
#include "support/programs.h"
#include "support/train_runs.h"
#include "train/average.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace {

using tx::test::TempDir;
using tx::train::smoothing_decay;
using tx::train::SmoothingOptions;
using tx::train::Trainer;
using tx::train::TrainerOptions;

}  // namespace

TEST_CASE("smoothing: Marian's decay, early updates and the reference batch size", "[smoothing]") {
  const SmoothingOptions marian{1e-4, 0};
  CHECK(smoothing_decay(marian, 0, 5000) == Approx(0.9));
  CHECK(smoothing_decay(marian, 1, 5000) == Approx(1.0 - 2.0 / 11.0));
  CHECK(smoothing_decay(marian, 80, 5000) == Approx(0.1));
  // 1 - (u + 1) / (u + 10) falls below 1e-4 after about 90,000 updates.
  CHECK(smoothing_decay(marian, 100000, 5000) == Approx(1e-4));
  // An update of 4x the reference words counts as 4: beta^4 and u x 4.
  const SmoothingOptions reference{1e-4, 1000};
  CHECK(smoothing_decay(reference, 200000, 4000) == Approx(1.0 - std::pow(1.0 - 1e-4, 4.0)));
  CHECK(smoothing_decay(reference, 10, 4000) == Approx(1.0 - 41.0 / 50.0));
  // Smaller updates than the reference are not scaled (Marian's rule).
  CHECK(smoothing_decay(reference, 100000, 500) == Approx(1e-4));
  CHECK(smoothing_decay({0.7, 0}, 3, 100) == Approx(0.7));
}

TEMPLATE_TEST_CASE("smoothing: the saved models are the smoothed sequence of the trained weights",
                   "[smoothing][trainer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const int updates = 12;
  auto run = [&](const TempDir& dir, double factor) {
    TrainerOptions o = tx::test::tiny_options(dir);
    o.after_updates = updates;
    o.save_freq = 1;
    o.keep_last = updates;
    o.smoothing.factor = factor;
    Trainer(*be, o).run();
    return o;
  };
  TempDir plain_dir, smooth_dir;
  // 0.7: the first updates decay by Marian's 1 - (u + 1) / (u + 10), from u = 3 by the factor.
  const SmoothingOptions smoothing{0.7, 0};
  const TrainerOptions plain = run(plain_dir, 0), smooth = run(smooth_dir, smoothing.factor);

  // Smoothing changes no trained weight: the checkpoints' parameters are the same bits.
  auto ckpt_plain = tx::test::tensors(Trainer::checkpoint_path(plain.model_dir));
  auto ckpt_smooth = tx::test::tensors(Trainer::checkpoint_path(smooth.model_dir));
  for (const auto& [name, values] : ckpt_plain) {
    INFO(name);
    REQUIRE(ckpt_smooth.count(name));
    CHECK(ckpt_smooth.at(name) == values);
    // The checkpoint's smoothed weights are the last model file's.
    REQUIRE(ckpt_smooth.count("ema." + name));
  }
  const auto last = tx::test::tensors(Trainer::model_path(smooth.model_dir));
  for (const auto& [name, values] : last) CHECK(ckpt_smooth.at("ema." + name) == values);

  // s_u = (1 - d) s_{u-1} + d w_u, with w_u the plain run's snapshot of update u.
  auto weights = [&](const TrainerOptions& o, int u) {
    return tx::test::tensors(Trainer::snapshot_path(o.model_dir, u));
  };
  auto previous = weights(smooth, 1);
  double largest_gap = 0;
  for (int u = 2; u <= updates; ++u) {
    INFO("update " << u);
    const double d = smoothing_decay(smoothing, u - 1, 0);
    const auto w = weights(plain, u), s = weights(smooth, u);
    for (const auto& [name, got] : s) {
      INFO(name);
      const std::vector<float>& wu = w.at(name);
      const std::vector<float>& sp = previous.at(name);
      REQUIRE(got.size() == wu.size());
      for (size_t i = 0; i < got.size(); ++i) {
        const double want = (1 - d) * sp[i] + d * wu[i];
        if (std::abs(got[i] - want) > 1e-6 + 1e-5 * std::abs(want)) {
          FAIL_CHECK("element " << i << ": " << got[i] << " != " << want);
          break;
        }
        largest_gap = std::max(largest_gap, std::abs(double(got[i]) - wu[i]));
      }
    }
    previous = s;
  }
  CHECK(largest_gap > 1e-4);  // smoothed weights that were the weights would pass the above

  // tx-average of a checkpoint with smoothed weights gives its model, the smoothed weights
  // under the parameters' names (no "ema." tensor), as the run's model file holds them.
  const std::string averaged = smooth_dir.file("avg.safetensors");
  tx::train::average_checkpoints({Trainer::checkpoint_path(smooth.model_dir)}, averaged);
  const auto avg = tx::test::tensors(averaged);
  CHECK(avg.size() == ckpt_plain.size());
  for (const auto& [name, values] : last) CHECK(avg.at(name) == values);

  // load_model (tx-translate, tx-score, --pretrained-model) of the checkpoint loads that model
  // too: the smoothed weights, not the raw ones beside them.
  const tx::io::ModelConfig config =
      tx::train::read_model_config(Trainer::checkpoint_path(smooth.model_dir));
  tx::nn::ParameterSet loaded;
  tx::Rng rng(1);
  tx::nn::Transformer model(tx::nn::ParamScope(*be, loaded, rng), config);
  tx::train::load_model(Trainer::checkpoint_path(smooth.model_dir), *be, config, loaded);
  for (const auto& [name, var] : loaded.items()) {
    INFO(name);
    CHECK(be->template download<float>(var->value) == last.at(name));
  }
}

TEMPLATE_TEST_CASE("smoothing and word dropout: N updates, stop, resume equals 2N straight",
                   "[smoothing][trainer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TempDir straight, split;
  TrainerOptions a = tx::test::tiny_options(straight);
  a.smoothing.factor = 0.01;
  a.model.dropout_src = a.model.dropout_trg = 0.1f;  // word dropout's draws resume too
  a.after_updates = 14;
  CHECK(tx::test::resume_difference(*be, a, straight, split, 7) == "");
}

TEST_CASE("tx-train --exponential-smoothing: alone is Marian's 1e-4, bad values exit 2",
          "[smoothing][trainer]") {
  TempDir dir;
  const std::string flags = tx::test::tiny_flags(dir) + " --after-updates 3";
  tx::test::Run ok = tx::test::run_program(dir, TX_TRAIN_BIN, flags + " --exponential-smoothing");
  INFO(ok.err);
  CHECK(ok.status == 0);
  int smoothed = 0;
  for (const auto& item : tx::test::tensors(Trainer::checkpoint_path(dir.file("m"))))
    smoothed += item.first.rfind("ema.", 0) == 0;
  CHECK(smoothed > 0);
  for (const std::string& bad :
       {std::string("1.5"), std::string("x"), std::string("1e-4 0"), std::string("0.1 2 3")}) {
    INFO(bad);
    tx::test::Run r =
        tx::test::run_program(dir, TX_TRAIN_BIN, flags + " --exponential-smoothing " + bad);
    CHECK(r.status == 2);
    CHECK(tx::test::one_line(r.err));
    if (bad != "0.1 2 3") CHECK_THAT(r.err, Catch::Contains("exponential-smoothing"));
  }
}

TEST_CASE("tx-train --dropout-src/--dropout-trg: in the model's config, and they change training",
          "[trainer]") {
  TempDir dir;
  const std::string flags = tx::test::tiny_flags(dir) + " --after-updates 4 --dropout 0";
  tx::test::Run plain = tx::test::run_program(dir, TX_TRAIN_BIN, flags);
  REQUIRE(plain.status == 0);
  tx::test::Run dropped =
      tx::test::run_program(dir, TX_TRAIN_BIN,
                            tx::test::tiny_flags(dir, "w") +
                                " --after-updates 4 --dropout 0 --dropout-src 0.3 "
                                "--dropout-trg 0.2");
  INFO(dropped.err);
  REQUIRE(dropped.status == 0);
  const tx::io::ModelConfig c = tx::train::read_model_config(Trainer::model_path(dir.file("w")));
  CHECK(c.dropout_src == 0.3f);
  CHECK(c.dropout_trg == 0.2f);
  CHECK(tx::test::tensors(Trainer::model_path(dir.file("w"))) !=
        tx::test::tensors(Trainer::model_path(dir.file("m"))));
  tx::test::Run bad = tx::test::run_program(dir, TX_TRAIN_BIN, flags + " --dropout-src 1.5");
  CHECK(bad.status == 2);
  CHECK(tx::test::one_line(bad.err));
}
