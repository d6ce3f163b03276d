// tx-train's loop (train::Trainer) end to end on a tiny reversal task, and the tx-train binary.
#include "train/trainer.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <thread>

#include "core/error.h"
#include "core/rng.h"
#include "io/file_lock.h"
#include "io/safetensors.h"
#include "nn/param_scope.h"
#include "support/backends.h"
#include "support/programs.h"
#include "support/train_runs.h"
#include "train/checkpoint.h"
#include "train/time_budget.h"
#include "train/training_state.h"
#include "train_tiny.h"

namespace {

using tx::test::TempDir;
using tx::train::Trainer;
using tx::train::TrainerOptions;

using tx::test::tiny_options;
using tx::test::write_reversal_corpus;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const tx::Error& e) {
    return e.what();
  }
  FAIL("no tx::Error");
  return "";
}

int count_lines(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) ++n;
  return n;
}

}  // namespace

TEMPLATE_TEST_CASE("trainer: the loss falls, validation runs, checkpoint and model load",
                   "[trainer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TempDir dir;
  TrainerOptions o = tiny_options(dir);
  o.after_updates = 40;
  o.valid_src = dir.file("valid.src");
  o.valid_tgt = dir.file("valid.tgt");
  o.valid_freq = 20;
  o.valid_metrics = {"cross-entropy", "bleu"};
  o.beam_size = 2;
  const tx::train::TrainerResult r = Trainer(*be, o).run();
  CHECK(r.updates == 40);
  CHECK_FALSE(r.resumed);
  REQUIRE(r.costs.size() == 8);
  CHECK(r.costs.back() < 0.8 * r.costs.front());
  CHECK(r.last_valid_ce > 0);

  const std::string ckpt = Trainer::checkpoint_path(o.model_dir);
  const std::string model = Trainer::model_path(o.model_dir);
  CHECK(std::filesystem::exists(o.model_dir + "/vocab.spm"));
  CHECK(std::filesystem::exists(o.model_dir + "/model.best-cross-entropy.safetensors"));
  CHECK(count_lines(Trainer::log_path(o.model_dir)) == 8 + 2);  // 8 train + 2 valid lines

  const tx::io::ModelConfig config = tx::train::read_model_config(model);
  CHECK(config.d_model == 16);
  CHECK(config.src_vocab_size <= 30);
  tx::nn::ParameterSet params;
  tx::Rng rng(5);
  tx::nn::Transformer net(tx::nn::ParamScope(*be, params, rng), config);
  tx::train::load_model(model, *be, config, params);
  tx::train::Adam adam(*be, params);
  CHECK(tx::train::load_checkpoint(ckpt, *be, config, params, adam).update == 40);
  CHECK(adam.steps() == 40);
}

// The rate of every update from the JSON log (the run must log each update: disp_freq 1).
std::vector<std::pair<int64_t, double>> logged_rates(const std::string& model_dir) {
  std::ifstream in(Trainer::log_path(model_dir));
  std::vector<std::pair<int64_t, double>> rates;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["type"] == "train") rates.emplace_back(j["update"].get<int64_t>(), j["lr"].get<double>());
  }
  return rates;
}

TEMPLATE_TEST_CASE("trainer: --lr-schedule linear reaches its floor at the run's real last update",
                   "[trainer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (const int64_t after_updates : {int64_t(0), int64_t(9)}) {
    INFO("after_updates " << after_updates);
    TempDir dir;
    TrainerOptions o = tiny_options(dir);
    o.lr.schedule = "linear";
    o.lr.lr = 4e-3;
    o.lr.warmup = 4;
    o.after_epochs = 3;
    o.after_updates = after_updates;
    o.optimizer_delay = 2;  // an update of two batches may span an epoch's end
    o.disp_freq = 1;
    const tx::train::TrainerResult r = Trainer(*be, o).run();
    if (after_updates > 0) CHECK(r.updates == after_updates);
    const auto rates = logged_rates(o.model_dir);
    REQUIRE(int64_t(rates.size()) == r.updates);
    REQUIRE(r.updates > o.lr.warmup + 2);
    // The trainer planned the decay for exactly the updates it then ran: the last one runs at
    // peak / (updates + 1 - warmup), which no other planned total gives.
    CHECK(rates.back().first == r.updates);
    CHECK(rates.back().second == Approx(4e-3 / double(r.updates + 1 - o.lr.warmup)).epsilon(1e-6));
    CHECK(rates[size_t(o.lr.warmup - 1)].second == Approx(4e-3).epsilon(1e-6));
    CHECK(rates[0].second == Approx(1e-3).epsilon(1e-6));
  }
}

TEST_CASE("trainer: --after-minutes plans the last update from the pace so far", "[trainer]") {
  using tx::train::last_update_within;
  // 800 updates in 400 s, 3,600 s in all: 6,400 more at 0.5 s each.
  CHECK(last_update_within(800, 400.0, 3600.0, 0.5) == 7200);
  CHECK(last_update_within(800, 400.0, 400.2, 0.5) == 800);  // not one more update's time left
  CHECK(last_update_within(800, 400.0, 401.0, 0.5) == 802);
  CHECK(last_update_within(800, 500.0, 400.0, 0.5) == 800);  // already over: stop where it is
  CHECK(last_update_within(0, 0.0, 60.0, 0.0) == 0);         // no pace yet
  CHECK(last_update_within(10, 1e-12, 1e9, 1e-13) > 10);     // clamped, no overflow

  // The saves and validations so far, spread over the updates between them: 100 updates in
  // 10 s, of which 2 saves took 1 s each and 1 validation 3 s: 0.05 s an update, plus 1 s every
  // 20 updates and 3 s every 50: 0.16 s an update in all, so (60 - 10) / 0.16 = 312.5 more.
  tx::train::TimeBudget budget(1.0, 10.0);  // as if resumed after 10 s: no time in this process
  budget.add_save(1.0);
  budget.add_save(1.0);
  budget.add_validation(3.0);
  const int64_t last = budget.last_update(100, 20, 50);
  CHECK(last == 100 + 312);
  CHECK(budget.last_update(100, 20, 0) > last);  // no validations to come: more updates

  // Resumed from a checkpoint without training time: the pace is this process's updates' only.
  tx::train::TimeBudget untimed(1.0, 0.0, 100);
  CHECK(untimed.last_update(100, 0, 0) == 100);  // none timed yet: no pace
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // 10 updates in >= 50 ms: >= 5 ms each, so at most 60 / 0.005 = 12,000 more (counting the
  // 100 untimed ones as well would allow 10x that).
  const int64_t planned = untimed.last_update(110, 0, 0);
  CHECK(planned > 110);
  CHECK(planned <= 110 + 12000);
  CHECK_FALSE(untimed.earlier_pace_known());
  CHECK(untimed.untimed_updates() == 100);

  // That run saved (10 s at update 3,000) and is resumed again: its seconds hold its own 2,000
  // updates (5 ms each), not the 1,000 untimed ones before it, so 50 s more hold 10,000 (the
  // 3,000 taken as timed would give 15,000).
  tx::train::TimeBudget again(1.0, 10.0, 3000, 1000);
  CHECK(again.earlier_pace_known());
  CHECK(again.untimed_updates() == 1000);
  const int64_t last_again = again.last_update(3000, 0, 0);
  CHECK(last_again <= 3000 + 10000);
  CHECK(last_again >= 3000 + 9900);  // the little real time that passed since
}

nlohmann::json training_state(const std::string& model_dir) {
  return nlohmann::json::parse(
      tx::train::read_checkpoint_metadata(Trainer::checkpoint_path(model_dir))
          .at(tx::train::kTrainingStateKey));
}

TEMPLATE_TEST_CASE("trainer: --after-minutes ends the linear schedule where the time runs out",
                   "[trainer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // A budget far above what the run needs: the time plan must not change the schedule that
  // the updates' limit gives (the same bytes as the run without a budget).
  TempDir plain_dir, timed_dir;
  TrainerOptions plain = tiny_options(plain_dir);
  plain.lr.schedule = "linear";
  plain.lr.lr = 4e-3;
  plain.lr.warmup = 4;
  plain.after_updates = 12;
  plain.disp_freq = 1;
  Trainer(*be, plain).run();
  TrainerOptions timed = tiny_options(timed_dir);
  timed.lr = plain.lr;
  timed.after_updates = 12;
  timed.after_minutes = 60;
  timed.disp_freq = 1;
  CHECK(Trainer(*be, timed).run().updates == 12);
  CHECK(tx::test::slurp(Trainer::model_path(plain.model_dir)) ==
        tx::test::slurp(Trainer::model_path(timed.model_dir)));
  const nlohmann::json state = training_state(timed.model_dir);
  CHECK(state.at("time_last_update").get<int64_t>() >= 12);
  CHECK(state.at("time_budget_minutes").get<double>() == 60);
  CHECK(state.at("train_seconds").get<double>() > 0);

  // Only the time limits it: a budget of 9 s (the warm-up takes under 2 s, under 5 s with the
  // sanitizers) ends where the warm-up's pace (with its saves) says it runs out, at a rate of
  // peak / (last + 1 - warmup) there, or earlier if the machine slowed down.
  TempDir short_dir;
  TrainerOptions brief = tiny_options(short_dir);
  brief.lr = plain.lr;
  brief.lr.warmup = 12;  // two saves (every 5 updates) in the warm-up's pace
  brief.after_minutes = 0.15;
  brief.disp_freq = 1;
  const auto start = std::chrono::steady_clock::now();
  const tx::train::TrainerResult r = Trainer(*be, brief).run();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(secs < 9.0 + 10.0);  // the budget, with room for one slow update and the saves
  CHECK_FALSE(r.interrupted);
  const nlohmann::json planned = training_state(brief.model_dir);
  const int64_t last = planned.at("time_last_update").get<int64_t>();
  INFO("planned last update " << last << ", ran " << r.updates);
  CHECK(last > brief.lr.warmup);
  CHECK(r.updates <= last);
  // It ends at its planned update or, if the machine slowed down after the warm-up, when the
  // time is spent (a machine that sped up reaches the planned update early).
  CHECK((r.updates == last || planned.at("train_seconds").get<double>() >= 9.0));
  const auto rates = logged_rates(brief.model_dir);
  REQUIRE(int64_t(rates.size()) == r.updates);
  const double peak = 4e-3;
  for (const auto& [update, rate] : rates) {
    INFO("update " << update);
    if (update <= brief.lr.warmup)
      CHECK(rate == Approx(peak * double(update) / double(brief.lr.warmup)).epsilon(1e-6));
    else
      CHECK(rate == Approx(peak * double(last + 1 - update) / double(last + 1 - brief.lr.warmup))
                        .epsilon(1e-6));
  }

  // Resumed with the same budget, the run keeps its plan (and has no time left: no update).
  const tx::train::TrainerResult again = Trainer(*be, brief).run();
  CHECK(again.resumed);
  CHECK(again.updates == r.updates);
  CHECK(training_state(brief.model_dir).at("time_last_update").get<int64_t>() == last);
}

TEMPLATE_TEST_CASE("trainer: --after-minutes on a run resumed from one without a budget",
                   "[trainer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // The checkpoint of a run without --after-minutes holds no training time, so no pace to plan
  // from: the rate keeps the line to the updates' limit (the same bytes as a resume without
  // the budget), and without a limit it is an error rather than a plan from a pace of zero.
  auto first_part = [&](TempDir& dir) {
    TrainerOptions o = tiny_options(dir);
    o.lr.schedule = "linear";
    o.lr.lr = 4e-3;
    o.lr.warmup = 4;
    o.after_updates = 6;
    Trainer(*be, o).run();
    return o;
  };
  TempDir plain_dir, timed_dir, open_dir;
  TrainerOptions plain = first_part(plain_dir);
  plain.after_updates = 12;
  CHECK(Trainer(*be, plain).run().updates == 12);
  TrainerOptions timed = first_part(timed_dir);
  timed.after_updates = 12;
  timed.after_minutes = 60;
  CHECK(Trainer(*be, timed).run().updates == 12);
  CHECK(tx::test::slurp(Trainer::model_path(plain.model_dir)) ==
        tx::test::slurp(Trainer::model_path(timed.model_dir)));
  CHECK(training_state(timed.model_dir).at("time_last_update").get<int64_t>() == 12);

  TrainerOptions open = first_part(open_dir);
  open.after_updates = 0;
  open.after_minutes = 0.05;
  const std::string e = error_of([&] { Trainer(*be, open).run(); });
  CHECK(e.find("its pace is unknown") != std::string::npos);
  CHECK(e.find("--after-updates N") != std::string::npos);
  CHECK(e.find('\n') == std::string::npos);
}

TEMPLATE_TEST_CASE(
    "trainer: the log's gNorm is the norm before clipping, and counts clipped updates", "[trainer]",
    TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // update -> (grad_norm, clipped_updates), one line per update
  auto run = [&](float clip_norm) {
    TempDir dir;
    TrainerOptions o = tiny_options(dir);
    o.adam.clip_norm = clip_norm;
    o.after_updates = 4;
    o.disp_freq = 1;
    Trainer(*be, o).run();
    std::map<int64_t, std::pair<double, int64_t>> logged;
    std::ifstream in(Trainer::log_path(o.model_dir));
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j["type"] == "train")
        logged[j["update"].get<int64_t>()] = {j["grad_norm"].get<double>(),
                                              j["clipped_updates"].get<int64_t>()};
    }
    return logged;
  };
  const auto free = run(0.0f), clipped = run(1e-4f);
  REQUIRE(free.size() == 4);
  REQUIRE(clipped.size() == 4);
  for (const auto& [update, norm] : free) {
    INFO("update " << update);
    CHECK(std::isfinite(norm.first));
    CHECK(norm.first > 1e-3);
    CHECK(norm.second == 0);
    CHECK(clipped.at(update).second == 1);
    CHECK(clipped.at(update).first > 1e-4);
  }
  // The same weights and batch at the first update: the norm is taken before clipping.
  CHECK(clipped.at(1).first == Approx(free.at(1).first).epsilon(1e-6));
}

TEMPLATE_TEST_CASE("trainer: N updates, stop, resume N = 2N straight, bit for bit", "[trainer]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TempDir straight, split;
  TrainerOptions a = tiny_options(straight);
  a.optimizer_delay = 2;  // accumulation must resume exactly too
  a.after_updates = 16;
  Trainer(*be, a).run();

  TrainerOptions b = tiny_options(split);
  b.optimizer_delay = 2;
  b.after_updates = 8;
  CHECK(Trainer(*be, b).run().updates == 8);
  b.after_updates = 16;
  const tx::train::TrainerResult r = Trainer(*be, b).run();
  CHECK(r.resumed);
  CHECK(r.updates == 16);

  // The files are deterministic: equal bytes = equal weights, moments and trainer state.
  const std::string wa = tx::test::slurp(Trainer::model_path(a.model_dir));
  CHECK(!wa.empty());
  CHECK(wa == tx::test::slurp(Trainer::model_path(b.model_dir)));
  CHECK(tx::test::slurp(Trainer::checkpoint_path(a.model_dir)) ==
        tx::test::slurp(Trainer::checkpoint_path(b.model_dir)));
}

TEMPLATE_TEST_CASE("trainer: a crash mid-training leaves the last checkpoint, which resumes",
                   "[trainer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TempDir dir;
  TrainerOptions o = tiny_options(dir);
  o.after_updates = 30;
  o.after_update = [](int64_t update) {
    if (update == 13) throw std::runtime_error("injected crash");
  };
  CHECK_THROWS_WITH(Trainer(*be, o).run(), "injected crash");

  const std::string ckpt = Trainer::checkpoint_path(o.model_dir);
  const auto meta = tx::train::read_checkpoint_metadata(ckpt);
  CHECK(meta.at(tx::train::kTrainingStateKey).find("\"update\":10") != std::string::npos);
  for (const auto& e : std::filesystem::directory_iterator(o.model_dir))
    CHECK(e.path().filename().string()[0] != '.');  // no temporary left behind

  o.after_update = nullptr;
  o.after_updates = 15;
  const tx::train::TrainerResult r = Trainer(*be, o).run();
  CHECK(r.resumed);
  CHECK(r.updates == 15);
}

TEMPLATE_TEST_CASE("trainer: bad inputs are one-line errors naming the file", "[trainer]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TempDir dir;
  TrainerOptions o = tiny_options(dir);
  o.train_src = dir.file("missing.src");
  std::string e = error_of([&] { Trainer(*be, o).run(); });
  CHECK(e.find("missing.src") != std::string::npos);
  CHECK(e.find('\n') == std::string::npos);
  CHECK_FALSE(std::filesystem::exists(o.model_dir));  // nothing written

  o = tiny_options(dir);
  {
    std::ofstream extra(dir.file("short.tgt"));
    extra << "ab cd\n";
  }
  o.train_tgt = dir.file("short.tgt");
  o.src_vocab = o.tgt_vocab = dir.file("v.spm");
  e = error_of([&] { Trainer(*be, o).run(); });
  CHECK(e.find("short.tgt") != std::string::npos);
  CHECK(e.find('\n') == std::string::npos);
  CHECK_FALSE(std::filesystem::exists(Trainer::checkpoint_path(o.model_dir)));

  o = tiny_options(dir);
  o.src_vocab = dir.file("a.spm");
  o.tgt_vocab = dir.file("b.spm");  // two vocabularies cannot be tied all
  e = error_of([&] { Trainer(*be, o).run(); });
  CHECK(e.find("tied-embeddings") != std::string::npos);
}

namespace {

using tx::test::Run;

Run tx_train(const TempDir& dir, const std::string& args) {
  return tx::test::run_program(dir, TX_TRAIN_BIN, args);
}

}  // namespace

TEST_CASE("tx-train: a bad flag exits 2, a tiny run exits 0 and logs on stderr", "[trainer]") {
  TempDir dir;
  tiny_options(dir);  // writes the corpus
  Run bad = tx_train(dir, "--no-such-flag");
  CHECK(bad.status == 2);
  CHECK(bad.out.empty());
  CHECK(bad.err.find("tx-train: error:") == 0);
  CHECK(std::count(bad.err.begin(), bad.err.end(), '\n') == 1);

  CHECK(tx_train(dir, "--model " + dir.file("m")).status == 2);  // no --train-sets

  Run missing = tx_train(dir, "--train-sets " + dir.file("nope.src") + " " + dir.file("train.tgt") +
                                  " --model " + dir.file("m"));
  CHECK(missing.status == 1);
  CHECK(missing.err.find("nope.src") != std::string::npos);

  Run ok = tx_train(dir, "--train-sets " + dir.file("train.src") + " " + dir.file("train.tgt") +
                             " --model " + dir.file("m") +
                             " --d-model 16 --d-ff 32 --heads 2 --enc-layers 1 --dec-layers 1"
                             " --dim-vocabs 30 --max-tokens 128 --after-updates 4"
                             " --disp-freq 2 --lr-schedule constant --learn-rate 0.001"
                             " --cpu-threads 2");
  INFO(ok.err);
  CHECK(ok.status == 0);
  CHECK(ok.out.empty());
  CHECK(ok.err.find("Ep. 1 : Up. 2 : Sen. ") != std::string::npos);
  CHECK(ok.err.find(" words/s : gNorm ") != std::string::npos);
  CHECK(ok.err.find(" : L.r. 1.0e-03") != std::string::npos);
  CHECK(std::filesystem::exists(dir.file("m/model.safetensors")));
  CHECK(count_lines(dir.file("m/train.log.jsonl")) == 2);
}

#ifdef TX_SCORE_BIN  // runs the programs: not in the emulated-CUDA test binary
TEST_CASE(
    "trainer: validation BLEU and chrF are tx-translate + tx-score's, and pick the best model",
    "[trainer]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TrainerOptions o = tiny_options(dir);
  o.after_updates = 60;
  o.valid_src = dir.file("valid.src");
  o.valid_tgt = dir.file("valid.tgt");
  o.valid_freq = o.save_freq = 20;
  o.keep_last = 3;
  o.valid_metrics = {"bleu", "chrf"};
  o.early_stopping = 0;
  o.beam_size = 2;
  Trainer(*be, o).run();

  std::map<int64_t, std::pair<double, double>> logged;  // update -> (bleu, chrf)
  std::ifstream in(Trainer::log_path(o.model_dir));
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["type"] == "valid")
      logged[j["update"].get<int64_t>()] = {j["bleu"].get<double>(), j["chrf"].get<double>()};
  }
  REQUIRE(logged.size() == 3);
  int64_t best_update = 0;
  double best = -1;
  std::set<double> distinct;
  for (const auto& [update, scores] : logged) {
    INFO("update " << update);
    const std::string model = Trainer::snapshot_path(o.model_dir, update);
    tx::test::Run t = tx::test::run_program(
        dir, TX_TRANSLATE_BIN,
        "-m " + model + " -v " + o.model_dir + "/vocab.spm --beam-size 2 --quiet < " + o.valid_src);
    REQUIRE(t.status == 0);
    tx::test::write_file(dir.file("hyp.txt"), t.out);
    tx::test::Run s = tx::test::run_program(
        dir, TX_SCORE_BIN,
        "--metrics bleu,chrf --score-only -r " + o.valid_tgt + " -i " + dir.file("hyp.txt"));
    REQUIRE(s.status == 0);
    const std::vector<std::string> lines = tx::test::split_lines(s.out);
    REQUIRE(lines.size() == 2);
    CHECK(std::stod(lines[0]) == Approx(scores.first).margin(0.006));
    CHECK(std::stod(lines[1]) == Approx(scores.second).margin(0.006));
    distinct.insert(scores.first);
    if (scores.first > best) best = scores.first, best_update = update;
  }
  CHECK(distinct.size() > 1);  // the runs differ, so the pick below means something
  // The best model is the snapshot of the best BLEU (the first metric).
  const auto best_file = tx::test::tensors(o.model_dir + "/model.best-bleu.safetensors");
  const auto snapshot = tx::test::tensors(Trainer::snapshot_path(o.model_dir, best_update));
  CHECK(best_file == snapshot);
}
#endif

namespace {

// The records of one type ("train", "valid") in a run's train.log.jsonl.
std::vector<nlohmann::json> log_records(const std::string& model_dir, const std::string& type) {
  std::vector<nlohmann::json> out;
  std::ifstream in(Trainer::log_path(model_dir));
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j["type"] == type) out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

TEST_CASE(
    "trainer: a run that early stopping ended trains nothing when started again, another "
    "metric starts afresh, the best model names its update",
    "[trainer][early]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TrainerOptions o = tiny_options(dir);
  o.lr.lr = 1e-7;  // the greedy output, so BLEU, stays the first validation's: the next stalls
  o.valid_src = dir.file("valid.src");
  o.valid_tgt = dir.file("valid.tgt");
  o.valid_freq = 5;
  o.valid_metrics = {"bleu"};
  o.early_stopping = 1;
  o.beam_size = 1;
  o.after_updates = 100;
  const tx::train::TrainerResult first = Trainer(*be, o).run();
  REQUIRE(first.early_stopped);
  const int64_t stopped = first.updates;
  REQUIRE(stopped < 100);
  // The first validation is the first best.
  CHECK(tx::test::update_of(o.model_dir + "/model.best-bleu.safetensors") == "5");

  const tx::train::TrainerResult again = Trainer(*be, o).run();
  CHECK(again.early_stopped);
  CHECK(again.updates == stopped);
  CHECK(tx::test::checkpoint_update(Trainer::checkpoint_path(o.model_dir)) == stopped);
  CHECK(log_records(o.model_dir, "valid").size() == size_t(stopped / 5));

  // Validating another first metric is not refused: its best and stall count start afresh.
  o.valid_metrics = {"cross-entropy"};
  o.after_updates = stopped + 5;
  const tx::train::TrainerResult other = Trainer(*be, o).run();
  CHECK(!other.early_stopped);
  CHECK(other.updates == stopped + 5);
}

TEST_CASE(
    "trainer: each --valid-metrics metric keeps its best model, across resumes that validate "
    "others",
    "[trainer][early]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TrainerOptions o = tiny_options(dir);
  o.valid_src = dir.file("valid.src");
  o.valid_tgt = dir.file("valid.tgt");
  o.valid_freq = 5;
  o.beam_size = 1;
  o.valid_metrics = {"cross-entropy", "chrf"};
  o.after_updates = 10;
  Trainer(*be, o).run();
  const std::string best_ce = o.model_dir + "/model.best-cross-entropy.safetensors";
  REQUIRE(std::filesystem::exists(best_ce));
  CHECK(std::filesystem::exists(o.model_dir +
                                "/model.best-chrf.safetensors"));  // not only the first's
  const std::string ce_file = tx::test::slurp(best_ce);
  double best = 1e9;
  for (const nlohmann::json& j : log_records(o.model_dir, "valid"))
    best = std::min(best, j["cross-entropy"].get<double>());

  // A run on another metric, at a rate that wrecks the model; one on a metric that ends before
  // it validates (its checkpoint tracks nothing); one on cross-entropy that ends before it
  // validates too (its checkpoint's stopper has the best, no validation); then cross-entropy
  // validated again: worse than the first run's best, which stays, file and all.
  o.valid_metrics = {"bleu"};
  o.lr.lr = 1.0;
  o.after_updates = 15;
  Trainer(*be, o).run();
  o.lr.lr = 1e-7;
  for (const auto& [metric, until] : std::vector<std::pair<std::string, int64_t>>{
           {"perplexity", 17}, {"cross-entropy", 19}, {"cross-entropy", 20}}) {
    o.valid_metrics = {metric};
    o.after_updates = until;
    Trainer(*be, o).run();
  }
  const nlohmann::json last = log_records(o.model_dir, "valid").back();
  REQUIRE(last["update"] == 20);
  REQUIRE(last["cross-entropy"].get<double>() > best);
  CHECK(last["stalled"] == 1);
  CHECK(tx::test::slurp(best_ce) == ce_file);
  const auto meta = tx::train::read_checkpoint_metadata(Trainer::checkpoint_path(o.model_dir));
  const nlohmann::json state = nlohmann::json::parse(meta.at(tx::train::kTrainingStateKey));
  CHECK(state["best_scores"]["cross-entropy"].get<double>() == best);
  CHECK(state["best_scores"].contains("chrf"));
  CHECK(state["best_scores"].contains("bleu"));
}

TEST_CASE("trainer: the updates after the last --disp-freq line are logged at the end",
          "[trainer]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TrainerOptions o = tiny_options(dir);
  o.after_updates = 7;  // lines at 5, then 6-7 at the end
  Trainer(*be, o).run();
  std::vector<int64_t> updates;
  for (const nlohmann::json& j : log_records(o.model_dir, "train"))
    updates.push_back(j["update"].get<int64_t>());
  CHECK(updates == std::vector<int64_t>{5, 7});
}

TEST_CASE("trainer: an update that ends an epoch is logged in that epoch, with its sentences",
          "[trainer]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TrainerOptions o = tiny_options(dir);
  o.optimizer_delay = 1000;  // more batches than the epoch has: one update is the whole epoch
  o.after_epochs = 1;
  const tx::train::TrainerResult r = Trainer(*be, o).run();
  REQUIRE(r.updates == 1);
  const std::vector<nlohmann::json> lines = log_records(o.model_dir, "train");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["epoch"] == 1);
  CHECK(lines[0]["sentences"] == 200);  // the corpus's pairs (tiny_options)
}

namespace {

// An after_update hook that sends this process SIGTERM after update `at` (with
// handle_signals on, the run stops there), giving the catcher thread the time to see it
// before the next update's check.
std::function<void(int64_t)> sigterm_after(int64_t at) {
  return [at](int64_t update) {
    if (update != at) return;
    REQUIRE(kill(getpid(), SIGTERM) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  };
}

// The updates of the --keep-last snapshots in `model_dir`, oldest first.
std::vector<int64_t> snapshot_updates(const std::string& model_dir) {
  std::vector<int64_t> updates;
  for (const auto& [update, path] : Trainer::snapshots(model_dir)) updates.push_back(update);
  return updates;
}

}  // namespace

TEST_CASE(
    "trainer: a run stopped by a signal keeps the --keep-last snapshots of one that never "
    "stopped",
    "[trainer]") {
  auto be = tx::test::cpu_backend();
  TempDir straight, split;
  TrainerOptions a = tiny_options(straight);
  a.keep_last = 3;
  a.after_updates = 20;
  Trainer(*be, a).run();
  REQUIRE(snapshot_updates(a.model_dir) == std::vector<int64_t>{10, 15, 20});

  // SIGTERM at update 17, off the --save-freq 5 grid: the stop's save writes the checkpoint
  // and model.safetensors, no snapshot (one would push u10 out of the 3 kept).
  TrainerOptions b = tiny_options(split);
  b.keep_last = 3;
  b.after_updates = 20;
  b.handle_signals = true;
  b.after_update = sigterm_after(17);
  const tx::train::TrainerResult stopped = Trainer(*be, b).run();
  REQUIRE(stopped.interrupted);
  REQUIRE(stopped.updates == 17);
  CHECK(snapshot_updates(b.model_dir) == std::vector<int64_t>{5, 10, 15});
  // A crash after the stop's checkpoint, before its model file: the catch-up writes no
  // snapshot either.
  std::filesystem::remove(Trainer::model_path(b.model_dir));
  b.after_update = nullptr;
  b.handle_signals = false;
  CHECK(Trainer(*be, b).run().updates == 20);
  CHECK(snapshot_updates(b.model_dir) == std::vector<int64_t>{10, 15, 20});
  for (int64_t u : {10, 15, 20})
    CHECK(tx::test::slurp(Trainer::snapshot_path(a.model_dir, u)) ==
          tx::test::slurp(Trainer::snapshot_path(b.model_dir, u)));
}

TEST_CASE("trainer: a signal during the run's last update still writes its end's snapshot",
          "[trainer]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TrainerOptions o = tiny_options(dir);
  o.keep_last = 3;
  o.after_updates = 17;  // off the --save-freq 5 grid: the end's snapshot is u17
  o.handle_signals = true;
  o.after_update = sigterm_after(17);
  CHECK(Trainer(*be, o).run().interrupted);
  CHECK(snapshot_updates(o.model_dir) == std::vector<int64_t>{10, 15, 17});
}

TEST_CASE("trainer: a model directory with a trained model and no checkpoint is refused",
          "[trainer]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TrainerOptions o = tiny_options(dir);
  o.keep_last = 2;
  o.after_updates = 10;
  Trainer(*be, o).run();
  const std::string model = tx::test::slurp(Trainer::model_path(o.model_dir));
  // The checkpoint deleted (it is 3 times the model): a new run would start afresh over the
  // trained model and mix its snapshots with the new ones.
  std::filesystem::remove(Trainer::checkpoint_path(o.model_dir));
  CHECK_THAT(error_of([&] { Trainer(*be, o).run(); }),
             Catch::Contains("holds a trained model") &&
                 Catch::Contains("no checkpoint.safetensors") &&
                 Catch::Contains("--pretrained-model"));
  CHECK(tx::test::slurp(Trainer::model_path(o.model_dir)) == model);
  // Snapshots alone count too.
  std::filesystem::remove(Trainer::model_path(o.model_dir));
  CHECK_THAT(error_of([&] { Trainer(*be, o).run(); }),
             Catch::Contains(Trainer::snapshot_path(o.model_dir, 10)));
  // A best file alone does not: validation writes it before the first checkpoint, and a run
  // killed in between must start again.
  for (const auto& [update, path] : Trainer::snapshots(o.model_dir)) std::filesystem::remove(path);
  tx::test::write_file(o.model_dir + "/model.best-cross-entropy.safetensors", model);
  CHECK(Trainer(*be, o).run().updates == 10);
}

TEST_CASE("trainer: a resume without validation keeps the early-stopping state", "[trainer]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TrainerOptions o = tiny_options(dir);
  o.valid_src = dir.file("valid.src");
  o.valid_tgt = dir.file("valid.tgt");
  o.valid_freq = 5;
  o.early_stopping = 10;
  o.after_updates = 10;
  Trainer(*be, o).run();
  auto stopper = [&] {
    const auto meta = tx::train::read_checkpoint_metadata(Trainer::checkpoint_path(o.model_dir));
    return tx::train::TrainingState::from_json(
               nlohmann::json::parse(meta.at(tx::train::kTrainingStateKey)), "test")
        .early_stopping;
  };
  const tx::train::EarlyStopping::State before = stopper();
  REQUIRE(before.validations == 2);
  REQUIRE(before.has_best);
  o.valid_src.clear();
  o.valid_tgt.clear();
  o.after_updates = 15;
  CHECK(Trainer(*be, o).run().updates == 15);
  const tx::train::EarlyStopping::State after = stopper();
  CHECK(after.validations == before.validations);
  CHECK(after.has_best);
  CHECK(after.best == before.best);
  CHECK(after.stalled == before.stalled);
}

TEST_CASE("trainer: train.log.jsonl holds each update's records once after a crash and a full disk",
          "[trainer]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TrainerOptions o = tiny_options(dir);
  o.disp_freq = 1;
  o.after_updates = 15;
  o.after_update = [](int64_t update) {
    if (update == 13) throw std::runtime_error("injected crash");
  };
  CHECK_THROWS_WITH(Trainer(*be, o).run(), "injected crash");
  // Records 11-13 came after the checkpoint of update 10; a full disk would leave half a line.
  std::ofstream(Trainer::log_path(o.model_dir), std::ios::app) << "{\"type\":\"train\",\"upd";
  o.after_update = nullptr;
  CHECK(Trainer(*be, o).run().updates == 15);
  std::vector<int64_t> updates;
  std::ifstream in(Trainer::log_path(o.model_dir));
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);  // throws on a damaged line
    if (j["type"] == "train") updates.push_back(j["update"].get<int64_t>());
  }
  std::vector<int64_t> expected(15);
  std::iota(expected.begin(), expected.end(), 1);
  CHECK(updates == expected);
}

TEST_CASE("trainer: a resume with another --optimizer-delay ends the linear schedule with the data",
          "[trainer]") {
  auto be = tx::test::cpu_backend();
  TempDir straight, dir;
  auto linear = [](TrainerOptions o) {
    o.lr.schedule = "linear";
    o.lr.lr = 4e-3;
    o.lr.warmup = 4;
    o.after_epochs = 3;
    o.disp_freq = 1;
    return o;
  };
  const int64_t batches = Trainer(*be, linear(tiny_options(straight))).run().updates;
  REQUIRE(batches > 20);
  // 10 updates of one batch, then updates of two (as mpirun -np 2 would make), stopped and
  // resumed once more at that size: the line comes down to 0 where the data ends, at update
  // 10 + (batches - 10) / 2, not where batches / 2 updates from the start would (the line ran
  // out first and the rest trained at rate 0; the other way round it ended above 0).
  TrainerOptions o = linear(tiny_options(dir));
  o.after_updates = 10;
  Trainer(*be, o).run();
  o.optimizer_delay = 2;
  o.after_updates = 14;
  Trainer(*be, o).run();
  o.after_updates = 0;
  const tx::train::TrainerResult r = Trainer(*be, o).run();
  CHECK(r.updates == 10 + (batches - 10 + 1) / 2);
  const auto rates = logged_rates(o.model_dir);
  REQUIRE(int64_t(rates.size()) == r.updates);
  CHECK(rates.back().second == Approx(4e-3 / double(r.updates + 1 - o.lr.warmup)).epsilon(1e-6));
}

TEST_CASE("trainer: a second run in a model directory that one is training in is refused",
          "[trainer]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TrainerOptions o = tiny_options(dir);
  o.after_updates = 5;
  std::filesystem::create_directories(o.model_dir);
  {
    // What the first run holds while it trains.
    const tx::io::FileLock running(o.model_dir + "/train.lock");
    REQUIRE_FALSE(running.busy());
    REQUIRE(running.why_not().empty());
    CHECK_THAT(error_of([&] { Trainer(*be, o).run(); }),
               Catch::Contains("another tx-train is training in --model '" + o.model_dir));
    // Refused before the vocabularies.
    CHECK_FALSE(std::filesystem::exists(o.model_dir + "/vocab.spm"));
  }
  CHECK(Trainer(*be, o).run().updates == 5);
}

TEST_CASE("trainer: a model directory the run cannot write in is refused before training",
          "[trainer]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TrainerOptions o = tiny_options(dir);
  o.after_updates = 5;
  Trainer(*be, o).run();
  // Immutable (root writes through permissions; chattr +i stops it too), as a read-only
  // mount would be: the resume trained until its first save, then lost those updates.
  const bool root = geteuid() == 0;
  if (std::system(((root ? "chattr +i " : "chmod 555 ") + o.model_dir + " 2>/dev/null").c_str()) !=
      0) {
    WARN("SKIPPED: chattr +i is not available here");
    return;
  }
  o.after_updates = 1000000;
  o.save_freq = 1000000;
  o.after_update = [](int64_t) { throw tx::Error("trained before the refusal"); };
  const std::string error = error_of([&] { Trainer(*be, o).run(); });
  REQUIRE(std::system(((root ? "chattr -i " : "chmod 755 ") + o.model_dir).c_str()) == 0);
  CHECK_THAT(error, Catch::Contains("cannot create a file in directory '" + o.model_dir));
}

TEST_CASE(
    "trainer: a resume with another --optimizer-delay counts --after-minutes' planned end in "
    "the new updates",
    "[trainer]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TrainerOptions o = tiny_options(dir);
  o.lr.schedule = "linear";
  o.lr.lr = 4e-3;
  o.lr.warmup = 4;
  o.after_minutes = 60;
  o.after_updates = 10;
  o.disp_freq = 1;
  Trainer(*be, o).run();
  // The plan the pace made at update 4 (60 minutes of tiny updates: far beyond the 10 of
  // --after-updates) set to 40 updates of one batch: 30 left.
  const std::string ckpt = Trainer::checkpoint_path(o.model_dir);
  tx::io::TensorFile file = tx::io::read_safetensors(ckpt);
  nlohmann::json state = nlohmann::json::parse(file.metadata.at(tx::train::kTrainingStateKey));
  REQUIRE(state.at("update") == 10);
  REQUIRE(state.at("time_last_update").get<int64_t>() > 40);
  state["time_last_update"] = 40;
  file.metadata[tx::train::kTrainingStateKey] = state.dump();
  tx::io::write_safetensors(ckpt, file);
  // Updates of two batches: the 30 left take 15, so the line ends at update 25 (at 40 it
  // would have held twice the batches the time was planned for).
  o.optimizer_delay = 2;
  o.after_updates = 0;
  const tx::train::TrainerResult r = Trainer(*be, o).run();
  CHECK(r.updates == 25);
  const auto rates = logged_rates(o.model_dir);
  REQUIRE_FALSE(rates.empty());
  CHECK(rates.back().first == 25);
  CHECK(rates.back().second == Approx(4e-3 / double(25 + 1 - o.lr.warmup)).epsilon(1e-6));
}
