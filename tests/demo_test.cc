// scripts/demo's path, shortened: examples/numbers/run.sh makes the data, trains for a few
// updates through the real tx-train, translates the unseen test numbers and scores them.
#include <catch2/catch.hpp>
#include <filesystem>

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
