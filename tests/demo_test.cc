// scripts/demo's path, shortened: examples/numbers/run.sh makes the data, trains for a few
// updates through the real tx-train, translates the unseen test numbers and scores them.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <sstream>
#include <vector>

#include "support/programs.h"

namespace {

int count_lines(const std::string& path) {
  const std::string text = tx::test::slurp(path);
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

TEST_CASE("demo: examples/numbers/run.sh trains, translates unseen numbers and scores them",
          "[demo]") {
  if (std::system("python3 -c 'import argparse' >/dev/null 2>&1") != 0) {
    WARN("SKIPPED: python3 is missing (scripts/demo installs it)");
    return;
  }
  tx::test::TempDir dir;
  const std::string bin = std::filesystem::path(TX_TRAIN_BIN).parent_path().string();
  const tx::test::Run r = tx::test::run_program(
      dir,
      "TX_BIN=" + bin +
          " TX_NUMBERS_TRAIN=3000 TX_NUMBERS_UPDATES=30 " TX_SOURCE_DIR "/examples/numbers/run.sh",
      dir.file("work"));
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  // Every step ran: the data, a model, one translation per test line, the scores.
  CHECK(count_lines(dir.file("work/data/train.en")) == 3000);
  CHECK(std::filesystem::exists(dir.file("work/model/model.safetensors")));
  CHECK(count_lines(dir.file("work/test.hyp.de")) == count_lines(dir.file("work/data/test.de")));
  CHECK(r.out.find("exact match: ") != std::string::npos);
  CHECK(r.out.find("BLEU|nrefs:1") != std::string::npos);
  CHECK(r.out.find("chrF2|nrefs:1") != std::string::npos);
  CHECK(r.out.find("tx-average --last 5") != std::string::npos);  // the next commands
  // The table: a header and twelve rows of input / output / reference.
  CHECK(r.out.find("reference (if different)") != std::string::npos);
}

// The recipe's run.sh under Ctrl-C (SIGINT to its whole process group, as a terminal sends it):
// tx-train saves its checkpoint, run.sh exits 130 without averaging or scoring, and the same
// command resumes and finishes. (A `2> >(tee ...)` killed by the same Ctrl-C took tx-train's
// stderr, and tx-train with it, before the save; a signal stop then went on to be scored.)
TEST_CASE("recipe: run.sh on Ctrl-C saves and exits 130 and the same command resumes", "[demo]") {
  tx::test::TempDir dir;
  const std::string data = dir.file("data");
  std::filesystem::create_directory(data);
  tx::test::write_reversal_corpus(data + "/train.en", data + "/train.de", 400, 3);
  for (const char* part : {"val", "test2016"})
    tx::test::write_reversal_corpus(data + "/" + part + ".en", data + "/" + part + ".de", 20, 5);
  const std::string bin = std::filesystem::path(TX_TRAIN_BIN).parent_path().string();
  const std::string command =
      "TX_BIN=" + bin + " exec bash " TX_SOURCE_DIR "/examples/multi30k/run.sh " + data + " " +
      dir.file("work") +
      " --d-model 16 --d-ff 32 --heads 2 --enc-layers 1 --dec-layers 1 --dim-vocabs 30"
      " --max-tokens 256 --lr-warmup 2 --after-updates 600 --save-freq 5 --valid-freq 1000"
      " --disp-freq 1000 --cpu-threads 1 > " +
      dir.file("out.txt") + " 2> " + dir.file("err.txt");
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setpgid(0, 0);
    std::signal(SIGINT, SIG_DFL);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);
  // Whatever fails below, the run does not outlive the test (and its TempDir).
  struct Reap {
    pid_t pid;
    bool done = false;
    ~Reap() {
      if (done) return;
      kill(-pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reap{pid};
  // Ctrl-C once training is under way: its first checkpoint is there (it stays, unlike a
  // snapshot that --keep-last prunes).
  const std::string saved = dir.file("work/model/checkpoint.safetensors");
  int status = 0;
  bool ended = false;
  for (int i = 0; i < 6000 && !std::filesystem::exists(saved) && !ended; ++i) {
    usleep(10000);
    ended = waitpid(pid, &status, WNOHANG) == pid;
  }
  INFO(tx::test::slurp(dir.file("err.txt")));
  REQUIRE_FALSE(ended);
  REQUIRE(std::filesystem::exists(saved));
  kill(-pid, SIGINT);
  REQUIRE(waitpid(pid, &status, 0) == pid);
  reap.done = true;
  const std::string log = tx::test::slurp(dir.file("work/train.log"));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK(log.find("stopping on signal 2") != std::string::npos);
  CHECK(log.find("training finished at update") != std::string::npos);  // the save's line
  // The log's last record says the run stopped (what run.sh reads, --quiet or not).
  const std::string records = tx::test::slurp(dir.file("work/model/train.log.jsonl"));
  CHECK(records.find("\"type\":\"stop\"") != std::string::npos);
  CHECK(std::filesystem::exists(dir.file("work/model/checkpoint.safetensors")));
  CHECK_FALSE(std::filesystem::exists(dir.file("work/scores.txt")));
  CHECK_FALSE(std::filesystem::exists(dir.file("work/model/averaged.safetensors")));

  const int again = std::system(command.c_str());
  INFO(tx::test::slurp(dir.file("err.txt")));
  CHECK(again == 0);
  CHECK(tx::test::slurp(dir.file("err.txt")).find("resuming from") != std::string::npos);
  const std::string scores = tx::test::slurp(dir.file("work/scores.txt"));
  CHECK(scores.find("val       beam 5") != std::string::npos);
  // The time line counts both calls (the next test checks the sum).
  CHECK(count_lines(dir.file("work/model/training-calls.ms")) == 2);
  CHECK(scores.find("s (over 2 calls), averaging + translating ") != std::string::npos);
}

// run.sh's time line sums every call's training: a fake tx-train that trains 1.1 s a call,
// stopped by a signal the first time (its log's last record says so) and done the second.
// Printing the last call alone would leave out the first's 1.1 s or more. A model folder removed
// to start over starts the count again.
TEST_CASE("recipe: run.sh's time line sums the training of every call", "[demo]") {
  tx::test::TempDir dir;
  std::filesystem::create_directory(dir.file("bin"));
  tx::test::write_file(dir.file("bin/tx-train"),
                       "#!/bin/sh\n"
                       "while [ $# -gt 0 ]; do [ \"$1\" = -m ] && m=\"$2\"; shift; done\n"
                       "mkdir -p \"$m\"; sleep 1.1\n"
                       "if [ -f \"$m/once\" ]; then echo '{\"type\":\"train\"}' >> "
                       "\"$m/train.log.jsonl\"\n"
                       "else touch \"$m/once\"; echo '{\"type\":\"stop\"}' >> "
                       "\"$m/train.log.jsonl\"; fi\n");
  for (const char* program : {"tx-average", "tx-translate", "tx-score"})
    tx::test::write_file(dir.file(std::string("bin/") + program), "#!/bin/sh\necho 1\n");
  for (const char* program : {"tx-train", "tx-average", "tx-translate", "tx-score"})
    std::filesystem::permissions(dir.file(std::string("bin/") + program),
                                 std::filesystem::perms::owner_all);
  std::filesystem::create_directory(dir.file("data"));
  for (const char* f : {"train.en", "train.de", "val.en", "val.de", "test2016.en", "test2016.de"})
    tx::test::write_file(dir.file(std::string("data/") + f), "a\n");
  const std::string command =
      "TX_BIN=" + dir.file("bin") + " bash " TX_SOURCE_DIR "/examples/multi30k/run.sh " +
      dir.file("data") + " " + dir.file("work") + " 2> " + dir.file("err.txt") + " > /dev/null";
  const int stopped = std::system(command.c_str());
  INFO(tx::test::slurp(dir.file("err.txt")));
  REQUIRE(WIFEXITED(stopped));
  REQUIRE(WEXITSTATUS(stopped) == 130);
  REQUIRE(std::system(command.c_str()) == 0);
  std::istringstream calls(tx::test::slurp(dir.file("work/model/training-calls.ms")));
  std::vector<long long> ms;
  for (long long t; calls >> t;) ms.push_back(t);
  REQUIRE(ms.size() == 2);
  for (long long t : ms) {
    CHECK(t >= 1100);
    CHECK(t < 60000);
  }
  const std::string scores = tx::test::slurp(dir.file("work/scores.txt"));
  INFO(scores);
  CHECK(scores.find("time: training " + std::to_string((ms[0] + ms[1] + 500) / 1000) +
                    "s (over 2 calls), ") != std::string::npos);
  // Started over: the count begins again (two calls, not four).
  std::filesystem::remove_all(dir.file("work/model"));
  const int again = std::system(command.c_str());  // (the fake stops its first call)
  REQUIRE(WIFEXITED(again));
  REQUIRE(WEXITSTATUS(again) == 130);
  REQUIRE(std::system(command.c_str()) == 0);
  CHECK(count_lines(dir.file("work/model/training-calls.ms")) == 2);
}

// A tx-train killed outright (SIGKILL, or a signal during its set-up, before it takes them):
// run.sh says so, with tx-train's status (it exited without a word).
TEST_CASE("recipe: run.sh names a tx-train killed by a signal", "[demo]") {
  tx::test::TempDir dir;
  std::filesystem::create_directory(dir.file("bin"));
  tx::test::write_file(dir.file("bin/tx-train"), "#!/bin/sh\nkill -KILL $$\n");
  std::filesystem::permissions(dir.file("bin/tx-train"), std::filesystem::perms::owner_all);
  std::filesystem::create_directory(dir.file("data"));
  for (const char* f : {"train.en", "train.de", "val.en", "val.de", "test2016.en", "test2016.de"})
    tx::test::write_file(dir.file(std::string("data/") + f), "a\n");
  const int raw = std::system(
      ("TX_BIN=" + dir.file("bin") + " bash " TX_SOURCE_DIR "/examples/multi30k/run.sh " +
       dir.file("data") + " " + dir.file("work") + " 2> " + dir.file("err.txt"))
          .c_str());
  const std::string err = tx::test::slurp(dir.file("err.txt"));
  INFO(err);
  REQUIRE(WIFEXITED(raw));
  CHECK(WEXITSTATUS(raw) == 137);
  CHECK(err.find("run.sh: tx-train ended on signal 9 (SIGKILL: out of memory, or kill -9); run "
                 "the same command again") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.file("work/scores.txt")));
}

// The recipe as an ensemble: two members side by side on one vocabulary, seeded from the
// ensemble's seed so that ensembles of other seeds share no member, then val and test2016
// translated by both averaged members; scores.txt in run.sh's layout (what seeds.sh reads).
TEST_CASE("recipe: ensemble.sh trains its members and translates with their ensemble", "[demo]") {
  tx::test::TempDir dir;
  const std::string data = dir.file("data");
  std::filesystem::create_directory(data);
  tx::test::write_reversal_corpus(data + "/train.en", data + "/train.de", 300, 3);
  for (const char* part : {"val", "test2016"})
    tx::test::write_reversal_corpus(data + "/" + part + ".en", data + "/" + part + ".de", 12, 5);
  const std::string bin = std::filesystem::path(TX_TRAIN_BIN).parent_path().string();
  const std::string work = dir.file("work");
  const std::string tiny =
      "--d-model 16 --d-ff 32 --heads 2 --enc-layers 1 --dec-layers 1 --dim-vocabs 30"
      " --max-tokens 256 --lr-warmup 2 --after-updates 12 --save-freq 4 --valid-freq 1000"
      " --disp-freq 1000";
  const int raw = std::system(("TX_BIN=" + bin +
                               " MEMBERS=2 bash " TX_SOURCE_DIR "/examples/multi30k/ensemble.sh " +
                               data + " " + work + " " + tiny + " --seed 3 > " +
                               dir.file("out.txt") + " 2> " + dir.file("err.txt"))
                                  .c_str());
  INFO(tx::test::slurp(dir.file("err.txt")));
  REQUIRE(raw == 0);
  // Ensemble seed 3 of 2 members: members 5 and 6 (M(S-1)+K), recorded in each checkpoint's
  // batch plan.
  for (const auto& [member, seed] : {std::pair{"member1", "5"}, std::pair{"member2", "6"}}) {
    const std::string checkpoint =
        tx::test::slurp(work + "/" + member + "/model/checkpoint.safetensors");
    CHECK(checkpoint.find(std::string("--seed\\\":") + seed + ",") != std::string::npos);
    CHECK(std::filesystem::exists(work + "/" + member + "/model/averaged.safetensors"));
    CHECK(tx::test::slurp(work + "/" + member + "/model/vocab.spm") ==
          tx::test::slurp(work + "/member1/model/vocab.spm"));
  }
  // Member 2 was given member 1's vocabulary, not its own (trained alike on this data).
  CHECK(tx::test::slurp(work + "/member1/train.log").find("trained vocabulary") !=
        std::string::npos);
  CHECK(tx::test::slurp(work + "/member2/train.log").find("trained vocabulary") ==
        std::string::npos);
  CHECK(tx::test::slurp(work + "/member1/model/model.safetensors") !=
        tx::test::slurp(work + "/member2/model/model.safetensors"));
  for (const char* part : {"val", "test2016"})
    CHECK(count_lines(work + "/" + part + ".ensemble.beam5.de") == 12);
  // The translations are the two members' ensemble, which here is not member 1 alone.
  const std::string translate = std::string(TX_TRANSLATE_BIN) + " -v " + work +
                                "/member1/model/vocab.spm --beam-size 5 --normalize 1.8 --quiet";
  const std::string averaged = "/model/averaged.safetensors";
  const auto both = tx::test::run_program(dir, translate,
                                          "-m " + work + "/member1" + averaged + " " + work +
                                              "/member2" + averaged + " < " + data + "/val.en");
  const auto first = tx::test::run_program(
      dir, translate, "-m " + work + "/member1" + averaged + " < " + data + "/val.en");
  REQUIRE(both.status == 0);
  CHECK(both.out == tx::test::slurp(work + "/val.ensemble.beam5.de"));
  CHECK(first.out != both.out);
  const std::string scores = tx::test::slurp(work + "/scores.txt");
  CHECK(scores.find("averaged  beam 5  BLEU|nrefs:1") != std::string::npos);
  CHECK(scores.find("val       beam 5  BLEU|nrefs:1") != std::string::npos);
  CHECK(scores.find("time: training ") != std::string::npos);
  CHECK(scores.find("(the longest of 2 members side by side)") != std::string::npos);

  // Another MEMBERS or --seed over these members is refused before anything runs; the same
  // again runs (its members done, it translates and scores again).
  auto again = [&](const std::string& members, const std::string& seed) {
    return tx::test::run_program(dir,
                                 "TX_BIN=" + bin + " MEMBERS=" + members +
                                     " bash " TX_SOURCE_DIR "/examples/multi30k/ensemble.sh " +
                                     data + " " + work,
                                 tiny + " --seed " + seed);
  };
  for (const auto& [members, seed] : {std::pair{"3", "3"}, std::pair{"2", "4"}}) {
    const auto r = again(members, seed);
    INFO("MEMBERS=" << members << " --seed " << seed << ": " << r.err);
    CHECK(r.status == 2);
    CHECK(tx::test::one_line(r.err));
    CHECK_THAT(r.err, Catch::Contains("holds the members of MEMBERS=2 --seed 3"));
    CHECK(tx::test::slurp(work + "/scores.txt") == scores);
  }
  const auto same = again("2", "3");
  INFO(same.err);
  CHECK(same.status == 0);
}
