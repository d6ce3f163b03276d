// Batch invariance through the real tx-translate: by default on the CPU, and with
// --deterministic, a sentence's translations and scores (n-best scores print every bit) are the
// same whether it is translated alone, among 40 others, or with other --max-tokens /
// --mini-batch / --maxi-batch or thread counts, at beam 1 and beam 5, and the two agree.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "support/programs.h"

namespace {

using tx::test::Run;
using tx::test::split_lines;
using tx::test::TempDir;

// Each n-best entry without its line index, grouped by input line: comparable between a run on
// the whole input and a run on one line.
std::map<int64_t, std::vector<std::string>> entries(const std::string& out) {
  std::map<int64_t, std::vector<std::string>> by_line;
  for (const std::string& l : split_lines(out)) {
    const size_t bar = l.find(" ||| ");
    REQUIRE(bar != std::string::npos);
    by_line[std::stoll(l.substr(0, bar))].push_back(l.substr(bar));
  }
  return by_line;
}

}  // namespace

TEST_CASE(
    "batch invariance: the default and --deterministic give bit-identical translations and "
    "scores alone, in a batch, for any batch options and thread count",
    "[apps][determinism]") {
  TempDir dir;
  // Long enough on the reversal task that the n-best lists differ in text and score.
  const Run train = tx::test::train_reversal_model(dir, 30);
  REQUIRE(train.status == 0);
  // 41 lines of 2..5 words and the same lines joined in threes, so lengths (and padding) vary.
  tx::test::write_reversal_corpus(dir.file("in.txt"), dir.file("in.ref"), 30, 99);
  std::vector<std::string> lines = split_lines(tx::test::slurp(dir.file("in.txt")));
  for (int i = 0; i + 2 < 30; i += 3)
    lines.push_back(lines[i] + " " + lines[i + 1] + " " + lines[i + 2]);
  lines.push_back("ab");
  tx::test::write_file(dir.file("in.txt"), tx::test::join_lines(lines));

  const std::string model = "-m " + dir.file("m/model.safetensors") + " -v " +
                            dir.file("m/vocab.spm") +
                            " --quiet --max-length-factor 1.2 --max-length-b 4";
  auto translate = [&](const std::string& input, const std::string& flags) {
    Run r = tx::test::run_program(dir, TX_TRANSLATE_BIN, model + " " + flags + " -i " + input);
    INFO(r.err);
    REQUIRE(r.status == 0);
    return r.out;
  };
  for (const int beam : {1, 5}) {
    DYNAMIC_SECTION("beam " << beam) {
      // Beam 1 prints only the text; beam 5 the whole n-best list with its scores.
      const std::string search =
          "--beam-size " + std::to_string(beam) + (beam > 1 ? " --n-best 5" : "");
      const std::string whole = translate(dir.file("in.txt"), search + " --cpu-threads 2");
      REQUIRE(split_lines(whole).size() == lines.size() * (beam > 1 ? 5 : 1));
      // --deterministic searches each line alone: the default must agree with it.
      CHECK(translate(dir.file("in.txt"), search + " --deterministic --cpu-threads 1") == whole);
      for (const char* batching :
           {"--max-tokens 40", "--mini-batch 7 --maxi-batch 2 --cpu-threads 1",
            "--max-tokens 100000 --maxi-batch 0", "--mini-batch 1 --maxi-batch 1"}) {
        INFO(batching);
        CHECK(translate(dir.file("in.txt"), search + " " + batching) == whole);
      }
      // --precision fp16 (no CPU GEMM takes f16: its values through the same f32 kernel).
      const std::string half = translate(dir.file("in.txt"), search + " --precision fp16");
      CHECK(translate(dir.file("in.txt"),
                      search + " --precision fp16 --mini-batch 1 --maxi-batch 1 --cpu-threads 1") ==
            half);
      // Each line alone, as the first line of an input of its own.
      const std::vector<std::string> whole_lines = split_lines(whole);
      const auto whole_entries = beam > 1 ? entries(whole) : decltype(entries(whole)){};
      for (size_t i = 0; i < lines.size(); i += 4) {
        INFO("line " << i + 1 << ": " << lines[i]);
        tx::test::write_file(dir.file("one.txt"), lines[i] + "\n");
        const std::string alone = translate(dir.file("one.txt"), search + " --cpu-threads 1");
        if (beam == 1)
          CHECK(alone == whole_lines[i] + "\n");
        else
          CHECK(entries(alone).at(0) == whole_entries.at(static_cast<int64_t>(i)));
      }
    }
  }
}
