// Data-parallel tx-train through the real programs: `mpirun -np 2 tx-train` against one
// `tx-train --optimizer-delay 2`, resume across world sizes, a rank killed mid-run, a rank
// that fails, and SIGTERM to mpirun. Two ranks of one OpenMP thread each (--oversubscribe, as
// root in CI); skipped, saying why, when tx was built without MPI or mpirun is missing.
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gradient_check.h"
#include "support/programs.h"
#include "support/train_runs.h"
#include "train/checkpoint.h"
#include "train/collective.h"

namespace {

using tx::test::checkpoint_update;
using tx::test::Run;
using tx::test::TempDir;
using tx::test::tensors;
using tx::test::tiny_flags;
using tx::test::update_of;
namespace fs = std::filesystem;

// Why these tests cannot run here ("" when they can).
std::string mpi_missing() {
#if !TX_TEST_MPI
  return "tx was built without MPI (install libopenmpi-dev, configure with -DTX_MPI=ON)";
#else
  if (std::string(TX_MPIEXEC).empty() || !fs::exists(TX_MPIEXEC))
    return "mpirun is missing (apt-get install openmpi-bin)";
  return "";
#endif
}

#define REQUIRE_MPI()                      \
  do {                                     \
    const std::string why = mpi_missing(); \
    if (!why.empty()) {                    \
      WARN("SKIPPED: " << why);            \
      return;                              \
    }                                      \
  } while (0)

#ifndef TX_MPIEXEC
#define TX_MPIEXEC ""
#endif

// `mpirun -np 2 tx-train <args>`: one OpenMP thread per rank, two ranks on however many cores.
// No single-copy (CMA) transfers between the ranks: containers that forbid ptrace make them
// fail, and these messages are small. No leak check in the sanitizer build's ranks: Open MPI
// leaves allocations of plugins it has unloaded at exit, which no suppression can name (the
// single-process runs keep tx-train's own leak check).
std::string mpirun_train() {
  return std::string(
             "OMP_NUM_THREADS=1 OMPI_MCA_btl_vader_single_copy_mechanism=none "
             "LSAN_OPTIONS=detect_leaks=0 ") +
         TX_MPIEXEC + " --oversubscribe --allow-run-as-root --bind-to none -np 2 " + TX_TRAIN_BIN;
}

Run mpi_train(const TempDir& dir, const std::string& args) {
  return tx::test::run_program(dir, mpirun_train(), args);
}
Run tx_train(const TempDir& dir, const std::string& args) {
  return tx::test::run_program(dir, std::string("OMP_NUM_THREADS=1 ") + TX_TRAIN_BIN, args);
}

// The "train" lines of a train.log.jsonl.
std::vector<nlohmann::json> train_log(const std::string& path) {
  std::vector<nlohmann::json> lines;
  for (const std::string& line : tx::test::split_lines(tx::test::slurp(path))) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.at("type") == "train") lines.push_back(j);
  }
  return lines;
}

// Two runs' train logs: 10 display lines each, at the same updates and sentences, with the
// same costs (summed in float over the ranks: equal to rounding).
void check_same_losses(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b) {
  REQUIRE(a.size() == 10);
  REQUIRE(b.size() == 10);
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("log line " << i);
    CHECK(b[i].at("update") == a[i].at("update"));
    CHECK(b[i].at("sentences") == a[i].at("sentences"));
    CHECK(b[i].at("cost").get<double>() == Approx(a[i].at("cost").get<double>()).epsilon(1e-6));
  }
}

// Every tensor of the two files holds the same bits.
void require_same_tensors(const std::string& a, const std::string& b) {
  const auto ta = tensors(a), tb = tensors(b);
  REQUIRE(ta.size() == tb.size());
  REQUIRE(ta.size() > 10);
  for (const auto& [name, values] : ta) {
    INFO(name);
    REQUIRE(tb.count(name) == 1);
    const std::vector<float>& other = tb.at(name);
    REQUIRE(values.size() == other.size());
    for (size_t i = 0; i < values.size(); ++i) {
      INFO("element " << i);
      REQUIRE(std::memcmp(&values[i], &other[i], sizeof(float)) == 0);
    }
  }
}

// Runs the bash `script` and returns its exit status.
int bash(const TempDir& dir, const std::string& script) {
  tx::test::write_file(dir.file("script.sh"), script);
  const int raw = std::system(("bash " + dir.file("script.sh")).c_str());
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

// A bash snippet that starts `mpirun -np 2 tx-train <args>` in the background (its pid in
// $mp), waits up to 60 s for `file` to appear, and sets $rank to a rank's pid (a child of
// mpirun named tx-train).
std::string start_mpi_run(const TempDir& dir, const std::string& args, const std::string& file) {
  return mpirun_train() + " " + args + " >" + dir.file("stdout") + " 2>" + dir.file("stderr") +
         " &\n"
         "mp=$!\n"
         "for i in $(seq 600); do [ -e " +
         file +
         " ] && break; sleep 0.1; done\n"
         "[ -e " +
         file +
         " ] || { echo 'the run never wrote its file' >&2; kill -KILL $mp; exit 90; }\n"
         "rank=\n"
         "for s in /proc/[0-9]*/stat; do\n"
         "  read -r pid comm state ppid rest < $s 2>/dev/null || continue\n"
         "  [ \"$ppid\" = \"$mp\" ] && [ \"$comm\" = \"(tx-train)\" ] && rank=$pid\n"
         "done\n"
         "[ -n \"$rank\" ] || { echo 'no rank found' >&2; kill -KILL $mp; exit 91; }\n";
}

}  // namespace

TEST_CASE("collective: the launcher's process count, and the single-process run", "[train_mpi]") {
  // Whatever runs this test: no launcher variables, then each launcher's in turn.
  const char* names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_STEP_NUM_TASKS",
                         "OMPI_COMM_WORLD_RANK", "PMI_RANK"};
  std::vector<std::pair<std::string, std::string>> saved;
  for (const char* name : names) {
    if (const char* v = std::getenv(name)) saved.emplace_back(name, v);
    ::unsetenv(name);
  }
  CHECK(tx::train::launched_processes() == 1);
  CHECK(tx::train::launched_rank() == 0);
  // srun --mpi=pmix: a PMIx rank and Slurm's step size (the step size alone, as in a batch
  // script's own environment, is no launch).
  ::setenv("PMIX_RANK", "2", 1);
  CHECK(tx::train::launched_processes() == 1);  // another PMIx launcher: neither is read
  CHECK(tx::train::launched_rank() == 0);
  ::unsetenv("PMIX_RANK");
  ::setenv("SLURM_STEP_NUM_TASKS", "5", 1);
  CHECK(tx::train::launched_processes() == 1);
  ::setenv("PMIX_RANK", "2", 1);
  CHECK(tx::train::launched_processes() == 5);
  CHECK(tx::train::launched_rank() == 2);
  ::setenv("PMI_RANK", "1", 1);  // PMI's first
  CHECK(tx::train::launched_rank() == 1);
  ::setenv("PMI_SIZE", "3", 1);
  CHECK(tx::train::launched_processes() == 3);
  ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);  // Open MPI's name first
  CHECK(tx::train::launched_processes() == 4);
  ::setenv("OMPI_COMM_WORLD_SIZE", "4x", 1);  // not a count: the next variable
  CHECK(tx::train::launched_processes() == 3);
  ::setenv("PMI_SIZE", "0", 1);  // not a count either: PMIx's
  CHECK(tx::train::launched_processes() == 5);
  ::unsetenv("PMIX_RANK");
  CHECK(tx::train::launched_processes() == 1);
  for (const char* name : names) ::unsetenv(name);
  for (const auto& [name, value] : saved) ::setenv(name.c_str(), value.c_str(), 1);

  auto one = tx::train::single_process();
  CHECK(one->size() == 1);
  CHECK(one->rank() == 0);
  CHECK(one->local_size() == 1);
  CHECK(one->describe() == "1 process");
  auto be = tx::test::cpu_backend();
  tx::Tensor t = be->upload(std::vector<float>{1.5f, -2.0f}, {2});
  one->all_reduce_sum(*be, t);  // a sum over one process: itself
  CHECK(be->download<float>(t) == std::vector<float>{1.5f, -2.0f});
}

TEST_CASE("mpirun -np 2 tx-train makes the model of one tx-train --optimizer-delay 2, bit for bit",
          "[train_mpi]") {
  REQUIRE_MPI();
  TempDir dir;
  // Dropout on (the default 0.1): each batch must draw the masks it draws in one process.
  const std::string flags = " --after-updates 20 --dropout 0.1 --seed 5";
  Run one = tx_train(dir, tiny_flags(dir, "one") + flags + " --optimizer-delay 2");
  INFO(one.err);
  REQUIRE(one.status == 0);
  Run two = mpi_train(dir, tiny_flags(dir, "two") + flags);
  INFO(two.err);
  REQUIRE(two.status == 0);
  CHECK(two.out.empty());

  // The two runs sum the same per-batch gradients (a + b), so the tolerance is 0: every
  // element of every tensor is the same float. Summing in another order would already
  // differ: the key projections' biases have a gradient of 0 up to rounding, which Adam
  // scales up to steps of the learning rate.
  require_same_tensors(dir.file("one/model.safetensors"), dir.file("two/model.safetensors"));
  CHECK(update_of(dir.file("two/model.safetensors")) == "20");
  CHECK(checkpoint_update(dir.file("two/checkpoint.safetensors")) == 20);

  // One writer: rank 0's log alone (10 display lines, not 20), with the same losses (summed
  // in float over the ranks: equal to rounding) and the words/s of both ranks' batches.
  const auto log_one = train_log(dir.file("one/train.log.jsonl"));
  const auto log_two = train_log(dir.file("two/train.log.jsonl"));
  check_same_losses(log_one, log_two);
  for (size_t i = 0; i < log_one.size(); ++i) {
    INFO("log line " << i);
    CHECK(log_two[i].contains("allreduce_s"));
    CHECK_FALSE(log_one[i].contains("allreduce_s"));
  }

  // Without --quiet only rank 0 speaks: one "training finished" line, not two.
  std::string loud = tiny_flags(dir, "loud");
  loud.replace(loud.find(" --quiet"), 8, "");
  Run logged = mpi_train(dir, loud + " --after-updates 2");
  INFO(logged.err);
  REQUIRE(logged.status == 0);
  const std::string& err = logged.err;
  const size_t first = err.find("training finished");
  REQUIRE(first != std::string::npos);
  CHECK(err.find("training finished", first + 1) == std::string::npos);
  CHECK(err.find("data parallel: MPI: 2 processes on 1 machine") != std::string::npos);
}

TEST_CASE("mpirun: a run whose --after-minutes are spent, started again, trains nothing",
          "[train_mpi]") {
  REQUIRE_MPI();
  TempDir dir;
  // 0.1 s of training: the first update or two spend it.
  const std::string flags = tiny_flags(dir, "m") + " --after-minutes 0.002 --after-updates 100000";
  Run first = mpi_train(dir, flags);
  INFO(first.err);
  REQUIRE(first.status == 0);
  const int64_t stopped = checkpoint_update(dir.file("m/checkpoint.safetensors"));
  REQUIRE(stopped >= 1);
  REQUIRE(stopped < 100000);
  std::filesystem::copy_file(dir.file("m/model.safetensors"), dir.file("first.safetensors"));
  // The same command again (a requeued job): no update, the same weights, as one process does.
  Run again = mpi_train(dir, flags);
  INFO(again.err);
  REQUIRE(again.status == 0);
  CHECK(checkpoint_update(dir.file("m/checkpoint.safetensors")) == stopped);
  require_same_tensors(dir.file("first.safetensors"), dir.file("m/model.safetensors"));
}

TEST_CASE("resume across world sizes: mpirun -np 2 continued by tx-train --optimizer-delay 2",
          "[train_mpi]") {
  REQUIRE_MPI();
  TempDir dir;
  Run whole = mpi_train(dir, tiny_flags(dir, "whole") + " --after-updates 20");
  INFO(whole.err);
  REQUIRE(whole.status == 0);

  Run first = mpi_train(dir, tiny_flags(dir, "split") + " --after-updates 10");
  INFO(first.err);
  REQUIRE(first.status == 0);
  REQUIRE(checkpoint_update(dir.file("split/checkpoint.safetensors")) == 10);
  Run rest = tx_train(dir, tiny_flags(dir, "split") + " --after-updates 20 --optimizer-delay 2");
  INFO(rest.err);
  REQUIRE(rest.status == 0);

  // The same data position, dropout stream and Adam state: the same losses, the same model.
  const auto log_whole = train_log(dir.file("whole/train.log.jsonl"));
  const auto log_split = train_log(dir.file("split/train.log.jsonl"));
  check_same_losses(log_whole, log_split);
  require_same_tensors(dir.file("whole/model.safetensors"), dir.file("split/model.safetensors"));

  // A resume with another update size is allowed, and trains on from the same point.
  Run other = tx_train(dir, tiny_flags(dir, "split") + " --after-updates 22");
  INFO(other.err);
  REQUIRE(other.status == 0);
  CHECK(update_of(dir.file("split/model.safetensors")) == "22");
}

TEST_CASE("a rank killed mid-run ends the job within seconds, and the checkpoint resumes",
          "[train_mpi]") {
  REQUIRE_MPI();
  TempDir dir;
  const std::string args = tiny_flags(dir) + " --after-updates 1000000 --save-freq 5";
  const std::string ckpt = dir.file("m/checkpoint.safetensors");
  const int status = bash(dir, start_mpi_run(dir, args, ckpt) +
                                   "sleep 1\n"
                                   "kill -KILL $rank\n"
                                   "start=$(date +%s%N)\n"
                                   "wait $mp\n"
                                   "rc=$?\n"
                                   "echo $rc $(( ($(date +%s%N) - start) / 1000000 )) > " +
                                   dir.file("result") + "\n");
  INFO(tx::test::slurp(dir.file("stderr")));
  REQUIRE(status == 0);
  std::istringstream result(tx::test::slurp(dir.file("result")));
  int rc = -1;
  long millis = -1;
  result >> rc >> millis;
  CHECK(rc != 0);
  CHECK(millis >= 0);
  CHECK(millis < 30000);

  // The last checkpoint (rank 0 may have died at any point of a save) loads and trains on.
  const int64_t saved = checkpoint_update(ckpt);
  CHECK(saved >= 5);
  CHECK(saved % 5 == 0);
  CHECK(tensors(ckpt).size() > 10);
  Run resumed = tx_train(
      dir, tiny_flags(dir) + " --optimizer-delay 2 --after-updates " + std::to_string(saved + 2));
  INFO(resumed.err);
  REQUIRE(resumed.status == 0);
  CHECK(checkpoint_update(ckpt) == saved + 2);
  CHECK(update_of(dir.file("m/model.safetensors")) == std::to_string(saved + 2));
}

TEST_CASE("a rank that fails stops the others with its error", "[train_mpi]") {
  REQUIRE_MPI();
  TempDir dir;
  // Rank 0 alone writes, so a checkpoint that cannot be written fails on rank 0 only: here a
  // model directory path taken by a file once training is under way.
  const std::string args = tiny_flags(dir) + " --after-updates 1000000 --save-freq 20";
  const int status =
      bash(dir, start_mpi_run(dir, args, dir.file("m/train.log.jsonl")) +
                    "sleep 0.5\n"
                    "mv " +
                    dir.file("m") + " " + dir.file("gone") + " && touch " + dir.file("m") +
                    "\n"
                    "start=$(date +%s%N)\n"
                    "wait $mp\n"
                    "rc=$?\n"
                    "echo $rc $(( ($(date +%s%N) - start) / 1000000 )) > " +
                    dir.file("result") + "\n");
  const std::string err = tx::test::slurp(dir.file("stderr"));
  INFO(err);
  REQUIRE(status == 0);
  std::istringstream result(tx::test::slurp(dir.file("result")));
  int rc = -1;
  long millis = -1;
  result >> rc >> millis;
  CHECK(rc != 0);
  CHECK(millis < 30000);
  CHECK(err.find("tx-train: error: process 0 of 2: ") != std::string::npos);
}

TEST_CASE("mpirun with --device cuda:N is refused: every process would share one GPU",
          "[train_mpi]") {
  REQUIRE_MPI();
  TempDir dir;
  // Refused before any device is opened, so the same line on a machine without a GPU.
  const Run r = mpi_train(dir, tiny_flags(dir) + " --after-updates 1 --device cuda:0");
  INFO(r.err);
  CHECK(r.status != 0);
  CHECK(r.err.find("--device cuda:0 under mpirun puts all 2 processes") != std::string::npos);
  // Both refuse it; process 0 says it once (its abort ends the other's wait).
  CHECK(r.err.find("tx-train: error: process 0 of 2: ") != std::string::npos);
  CHECK(r.err.find("tx-train: error: process 1 of 2: ") == std::string::npos);
  CHECK(r.err.find("give --device cuda") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("m/model.safetensors")));
}

TEST_CASE("SIGTERM to mpirun: the ranks stop together and rank 0 saves the checkpoint",
          "[train_mpi]") {
  REQUIRE_MPI();
  TempDir dir;
  // No periodic save: the checkpoint can only come from the signal. Open MPI forwards SIGTERM
  // to the ranks and kills them odls_base_sigkill_timeout seconds later (1 by default): the
  // setting docs/tx-train.md gives leaves them the time to save (mpirun itself returns about
  // twice that later, whatever the ranks do, so the test keeps it short). --quiet: mpirun stops
  // reading the ranks' stderr once signalled, and a full pipe would block rank 0's log lines.
  const std::string log = dir.file("m/train.log.jsonl");
  const int status = bash(
      dir, "export OMPI_MCA_odls_base_sigkill_timeout=8\n" +
               start_mpi_run(dir, tiny_flags(dir) + " --after-updates 1000000 --save-freq 1000000",
                             log) +
               "sleep 0.5\n"
               "kill -TERM $mp\n"
               "wait $mp\n"
               "echo $? > " +
               dir.file("result") + "\n");
  INFO(tx::test::slurp(dir.file("stderr")));
  REQUIRE(status == 0);
  const std::string ckpt = dir.file("m/checkpoint.safetensors");
  REQUIRE(fs::exists(ckpt));
  const int64_t at = checkpoint_update(ckpt);
  CHECK(at > 0);
  CHECK(update_of(dir.file("m/model.safetensors")) == std::to_string(at));
  // Both ranks stopped after the same update: the last logged one is the checkpoint's or
  // older (the log is every 2 updates), never past it.
  const auto lines = train_log(log);
  REQUIRE(!lines.empty());
  CHECK(lines.back().at("update").get<int64_t>() <= at);
  CHECK(lines.back().at("update").get<int64_t>() >= at - 2);
}

TEST_CASE(
    "mpirun: a rank whose --after-minutes run out first stops the run on time, not on a signal",
    "[train_mpi]") {
  REQUIRE_MPI();
  TempDir dir;
  // Two programs in one run (mpirun's "A : B"): rank 1's clock runs out after 0.1 s while rank
  // 0's has an hour, as happens for a moment when the ranks' clocks started a little apart.
  std::string flags = tiny_flags(dir) + " --after-updates 100000";
  flags.erase(flags.find(" --quiet"), std::string(" --quiet").size());  // rank 0's log is read
  const std::string rank = std::string(" -np 1 ") + TX_TRAIN_BIN + " " + flags;
  std::string two_programs = mpirun_train();
  two_programs.erase(two_programs.rfind(" -np 2 "));
  Run run = tx::test::run_program(
      dir, two_programs + rank + " --after-minutes 60 :" + rank + " --after-minutes 0.002", "");
  INFO(run.err);
  REQUIRE(run.status == 0);
  const int64_t stopped = checkpoint_update(dir.file("m/checkpoint.safetensors"));
  CHECK(stopped < 100000);
  CHECK(run.err.find("--after-minutes 60 reached at update ") != std::string::npos);
  CHECK(run.err.find("signal") == std::string::npos);
}

TEST_CASE("mpirun: a process given other flags or other data is refused, naming the difference",
          "[train_mpi]") {
  REQUIRE_MPI();
  TempDir dir;
  // Each rank runs in its own folder (r0, r1), reading the data there by a relative path, and
  // rank 1 adds $EXTRA to its flags: a wrapper that gave it other flags or files once left rank
  // 0 waiting in an all-reduce for ever, or trained a model of two seeds without a word.
  for (const char* d : {"r0", "r1", "short", "same"})
    std::filesystem::create_directories(dir.file(d));
  tx::test::write_reversal_corpus(dir.file("r0/train.src"), dir.file("r0/train.tgt"), 200, 7);
  tx::test::write_reversal_corpus(dir.file("short/train.src"), dir.file("short/train.tgt"), 150, 7);
  for (const char* f : {"train.src", "train.tgt"})
    std::filesystem::copy_file(dir.file(std::string("r0/") + f),
                               dir.file(std::string("same/") + f));
  tx::test::write_file(dir.file("rank.sh"),
                       "cd " + dir.file("r") +
                           "$OMPI_COMM_WORLD_RANK || exit 9\n"
                           "[ \"$OMPI_COMM_WORLD_RANK\" = 1 ] && set -- \"$@\" "
                           "$EXTRA\n"
                           "exec " TX_TRAIN_BIN " \"$@\"\n");
  std::string launch = mpirun_train();
  launch.replace(launch.rfind(TX_TRAIN_BIN), std::string(TX_TRAIN_BIN).size(),
                 "bash " + dir.file("rank.sh"));
  launch.insert(launch.rfind(" -np 2 "), " -x EXTRA");
  launch.insert(launch.find(TX_MPIEXEC), "timeout 120 ");
  std::string flags = tiny_flags(dir) + " --after-updates 20";
  flags.replace(flags.find(dir.file("train.src")), dir.file("train.src").size(), "train.src");
  flags.replace(flags.find(dir.file("train.tgt")), dir.file("train.tgt").size(), "train.tgt");
  // Rank 1's folder gets the corpus of `data`.
  auto give_rank1 = [&](const std::string& data) {
    for (const char* f : {"train.src", "train.tgt"}) {
      std::filesystem::remove(dir.file(std::string("r1/") + f));  // (absent the first time)
      std::filesystem::copy_file(dir.file(data + "/" + f), dir.file(std::string("r1/") + f));
    }
  };
  auto refused = [&](const std::string& extra, const std::string& data, const std::string& what) {
    give_rank1(data);
    std::filesystem::remove_all(dir.file("m"));
    const Run r = tx::test::run_program(dir, "EXTRA='" + extra + "' " + launch, flags);
    INFO(r.err);
    CHECK(r.status != 0);
    CHECK(r.status != 124);  // not a hang ended by the timeout
    CHECK(r.err.find("tx-train: error: process 1 of 2: ") != std::string::npos);
    CHECK(r.err.find(what) != std::string::npos);
  };
  refused("--seed 8", "same", "other options than process 0 (--seed 8 against process 0's 1)");
  refused("", "short", "training data differ from process 0's (pairs 150 against process 0's 200)");
  // The same flags and data train.
  give_rank1("same");
  std::filesystem::remove_all(dir.file("m"));
  const Run ok = tx::test::run_program(dir, "EXTRA= " + launch, flags);
  INFO(ok.err);
  CHECK(ok.status == 0);
}

TEST_CASE("mpirun: a usage error is said once, by process 0", "[train_mpi]") {
  REQUIRE_MPI();
  TempDir dir;
  // Every process printed it, so a log held one line per process.
  const Run r = mpi_train(dir, tiny_flags(dir) + " --rdrop-alpha -1");
  INFO(r.err);
  CHECK(r.status != 0);
  const std::string line = "tx-train: error: --rdrop-alpha";
  const size_t first = r.err.find(line);
  CHECK(first != std::string::npos);
  CHECK(r.err.find(line, first + 1) == std::string::npos);
}

TEST_CASE("mpirun: --dump-config prints once, and tx-translate says it runs once per process",
          "[train_mpi]") {
  REQUIRE_MPI();
  TempDir dir;
  // Both ranks printed it, interleaved into a file that was no JSON.
  const Run dump = mpi_train(dir, tiny_flags(dir) + " --dump-config");
  INFO(dump.err);
  CHECK(dump.status == 0);
  CHECK(nlohmann::json::parse(dump.out).at("d-model") == 16);
  // Each process translates the whole input (a script may give each its own shard): said once,
  // by rank 0, beside the error each gives for the missing model.
  std::string translate = mpirun_train();
  translate.replace(translate.rfind(TX_TRAIN_BIN), std::string(TX_TRAIN_BIN).size(),
                    TX_TRANSLATE_BIN);
  const Run t = tx::test::run_program(dir, translate, "-m model.safetensors -v vocab.spm");
  INFO(t.err);
  const std::string note = "tx-translate: note: started as one of 2 processes (mpirun or srun)";
  const size_t first = t.err.find(note);
  CHECK(first != std::string::npos);
  CHECK(t.err.find(note, first + 1) == std::string::npos);
}
