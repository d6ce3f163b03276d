// Crash safety through the real tx-train: SIGKILL at random moments of a run that saves every
// update always leaves a checkpoint and model that load and resume, and a write that fails
// (the file-size limit of `ulimit -f`, as a full disk would) is one clear error with the
// previous files intact.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>

#include "io/safetensors.h"
#include "support/programs.h"
#include "support/train_runs.h"

namespace {

using tx::test::checkpoint_update;
using tx::test::Run;
using tx::test::TempDir;
using tx::test::update_of;
namespace fs = std::filesystem;

// A model big enough that saving takes a noticeable share of each update (~1 MB per file), so
// random kills land inside saves as well as between them.
std::string flags(const TempDir& dir) {
  if (!fs::exists(dir.file("train.src")))
    tx::test::write_reversal_corpus(dir.file("train.src"), dir.file("train.tgt"), 300, 5);
  return "--train-sets " + dir.file("train.src") + " " + dir.file("train.tgt") + " --model " +
         dir.file("m") +
         " --d-model 64 --d-ff 256 --heads 4 --enc-layers 2 --dec-layers 2 --dim-vocabs 30"
         " --max-tokens 256 --lr-schedule constant --learn-rate 0.001 --cpu-threads 1 --quiet";
}

// Starts `command` under /bin/sh with `exec`, so the pid is the program's own.
pid_t spawn(const std::string& command) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", ("exec " + command).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Reads every byte of every tensor, which validates the header and the offsets.
void check_loads(const std::string& path) {
  INFO(path);
  tx::io::TensorFile file;
  REQUIRE_NOTHROW(file = tx::io::read_safetensors(path));
  CHECK(!file.tensors.empty());
}

// Whether the model directory holds a temporary whose name contains `part`.
bool has_temporary(const TempDir& dir, const std::string& part) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir.file("m"), ec))
    if (e.path().filename().string().find(part) != std::string::npos) return true;
  return false;
}

std::vector<std::string> temporaries(const TempDir& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir.file("m")))
    if (e.path().filename().string().find(".tmp.") != std::string::npos)
      out.push_back(e.path().filename());
  return out;
}

}  // namespace

TEST_CASE(
    "crash safety: kill -9 of tx-train at random moments always leaves a checkpoint that "
    "loads and resumes",
    "[apps][crash]") {
  TempDir dir;
  const std::string train = std::string(TX_TRAIN_BIN) + " " + flags(dir) +
                            " --save-freq 1 --keep-last 2 --after-updates 1000000 >" +
                            dir.file("out") + " 2>" + dir.file("err");
  const std::string ckpt = dir.file("m/checkpoint.safetensors");
  const std::string model = dir.file("m/model.safetensors");
  std::mt19937 gen(12345);
  int64_t last_update = 0;
  int killed_in_save = 0;
  std::chrono::milliseconds startup(0);  // spawn to first checkpoint, measured in round 0
  for (int round = 0; round < 20; ++round) {
    INFO("round " << round);
    const auto spawned = std::chrono::steady_clock::now();
    const pid_t pid = spawn(train);
    const std::string own_temp = ".tmp." + std::to_string(pid) + ".";
    if (round == 0) {
      for (int i = 0; i < 600 && !fs::exists(ckpt); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      startup = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - spawned);
    }
    if (round % 2 == 1) {
      // Odd rounds kill inside a save: as soon as this run's temporary appears (0..2 ms on).
      for (int i = 0; i < 100000 && !has_temporary(dir, own_temp); ++i)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::this_thread::sleep_for(
          std::chrono::microseconds(std::uniform_int_distribution<>(0, 2000)(gen)));
    } else {
      // Even rounds kill at any moment, startup and the resume itself included.
      std::this_thread::sleep_for(std::chrono::milliseconds(
          std::uniform_int_distribution<int64_t>(0, 2 * startup.count() + 200)(gen)));
    }
    REQUIRE(::kill(pid, SIGKILL) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    INFO("stderr: " << tx::test::slurp(dir.file("err")));
    REQUIRE(WIFSIGNALED(status));  // still running when killed: the kill hit the run
    REQUIRE(fs::exists(ckpt));
    check_loads(ckpt);
    check_loads(model);
    const int64_t update = checkpoint_update(ckpt);
    REQUIRE(update >= 0);
    CHECK(update >= last_update);  // a kill never loses a saved update
    // The model is the checkpoint's weights or one save behind (a kill between the renames);
    // the next start repairs the latter.
    CHECK(std::stoll(update_of(model)) >= update - 1);
    last_update = update;
    killed_in_save += has_temporary(dir, own_temp);
  }
  // Most odd rounds leave their temporary behind: the kill landed inside a save.
  CHECK(killed_in_save >= 3);
  CHECK(last_update > 0);
  // A clean resume: three more updates from the last checkpoint, the unfinished temporaries
  // of the killed runs removed.
  Run r = tx::test::run_program(dir, TX_TRAIN_BIN,
                                flags(dir) + " --save-freq 1 --keep-last 2 --after-updates " +
                                    std::to_string(last_update + 3));
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  CHECK(checkpoint_update(ckpt) == last_update + 3);
  CHECK(update_of(model) == std::to_string(last_update + 3));
  check_loads(model);
  CHECK(temporaries(dir).empty());
}

TEST_CASE(
    "crash safety: a write that fails (ulimit -f) is one error, exit 1, previous files "
    "intact",
    "[apps][crash]") {
  TempDir dir;
  Run first = tx::test::run_program(dir, TX_TRAIN_BIN, flags(dir) + " --after-updates 2");
  REQUIRE(first.status == 0);
  const std::string ckpt = dir.file("m/checkpoint.safetensors");
  const std::string model = dir.file("m/model.safetensors");
  const std::string ckpt_bytes = tx::test::slurp(ckpt), model_bytes = tx::test::slurp(model);
  REQUIRE(model_bytes.size() > 256 * 1024);
  // 256 KiB per file: the log fits, the model and checkpoint do not.
  Run r = tx::test::run_program(dir, "ulimit -f 256; " + std::string(TX_TRAIN_BIN),
                                flags(dir) + " --after-updates 4");
  INFO("stderr: " << r.err);
  CHECK(r.status == 1);
  CHECK(r.out.empty());
  CHECK(tx::test::one_line(r.err));
  CHECK_THAT(r.err, Catch::StartsWith("tx-train: error: cannot write '" + ckpt + "'") &&
                        Catch::Contains("File too large") && Catch::Contains("free disk space"));
  CHECK(tx::test::slurp(ckpt) == ckpt_bytes);
  CHECK(tx::test::slurp(model) == model_bytes);
  CHECK(temporaries(dir).empty());
  // And the run goes on from there once there is room.
  Run again = tx::test::run_program(dir, TX_TRAIN_BIN, flags(dir) + " --after-updates 4");
  CHECK(again.status == 0);
  CHECK(checkpoint_update(ckpt) == 4);
}
