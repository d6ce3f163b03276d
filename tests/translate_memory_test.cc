// tx-translate's memory on a long stream: once the read window is full, resident memory stays
// flat however many lines follow (bench/soak has the 2-million-line run on a real model).
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <string>

#include "support/peak_rss.h"
#include "support/programs.h"

namespace {

using tx::test::memory_measurable;
using tx::test::peak_rss_kb;
using tx::test::TempDir;

// `lines` lines of 1 to 40 words drawn from the reversal task's eight: every batch has a new
// mix of lengths, so the stream keeps asking for memory blocks of sizes it has not used.
void write_stream(const std::string& path, int lines, uint64_t seed) {
  static const char* words[] = {"ab", "cd", "ef", "gh", "ba", "dc", "fe", "hg"};
  std::mt19937_64 gen(seed);
  std::ofstream out(path);
  for (int i = 0; i < lines; ++i) {
    const int n = 1 + static_cast<int>(gen() % 40);
    for (int k = 0; k < n; ++k) out << (k ? " " : "") << words[gen() % 8];
    out << '\n';
  }
}

}  // namespace

TEST_CASE("tx-translate: resident memory after 60,000 lines is within 4 MB of that after 15,000",
          "[apps][memory]") {
  if (!memory_measurable()) return;
  TempDir dir;
  REQUIRE(tx::test::train_reversal_model(dir, 10).status == 0);
  write_stream(dir.file("short.txt"), 15000, 5);
  write_stream(dir.file("long.txt"), 60000, 5);  // the same first 15,000 lines, then more
  // A small read window (about 2,000 tokens), so both runs are many windows long.
  auto translate = [&](const std::string& input) {
    return peak_rss_kb(std::string(TX_TRANSLATE_BIN) + " -m " + dir.file("m/model.safetensors") +
                       " -v " + dir.file("m/vocab.spm") +
                       " --quiet --cpu-threads 2 --beam-size 2 --max-tokens 512 --maxi-batch 4"
                       " --max-length-factor 1.5 < " +
                       input + " > " + dir.file("out.txt"));
  };
  const long short_kb = translate(dir.file("short.txt"));
  const long long_kb = translate(dir.file("long.txt"));
  INFO("peak RSS: 15,000 lines " << short_kb << " kB, 60,000 lines " << long_kb << " kB");
  REQUIRE(short_kb > 0);
  REQUIRE(long_kb > 0);
  CHECK(long_kb - short_kb <
        4096);  // 1.5-1.9 MB measured on 2026-11-26: allocator and thread noise
}

TEST_CASE("tx-translate and tx-score: an 8 MB line costs the memory of the pieces read, not of all",
          "[apps][memory]") {
  if (!memory_measurable()) return;
  TempDir dir;
  REQUIRE(tx::test::train_reversal_model(dir, 2).status == 0);
  {
    std::ofstream out(dir.file("in.txt"));
    static const char* words[] = {"ab", "cd", "ef", "gh", "ba", "dc", "fe", "hg"};
    std::mt19937_64 gen(3);
    for (size_t bytes = 0; bytes < (8u << 20); bytes += 3) out << words[gen() % 8] << ' ';
    out << "\nab cd\n";
  }
  const std::string common = std::string(TX_TRANSLATE_BIN) + " -m " +
                             dir.file("m/model.safetensors") + " -v " + dir.file("m/vocab.spm") +
                             " --cpu-threads 1 --beam-size 1 --max-length-factor 0.01 < ";
  const long kb = peak_rss_kb(common + dir.file("in.txt") + " > " + dir.file("out.txt") + " 2> " +
                              dir.file("err.txt"));
  // The same program on the short line alone: what the model and the libraries take.
  const long base_kb = peak_rss_kb("tail -n 1 " + dir.file("in.txt") + " | " + common +
                                   "/dev/stdin > /dev/null 2>&1");
  INFO("peak RSS: 8 MB line " << kb << " kB, short line alone " << base_kb << " kB");
  REQUIRE(kb > 0);
  REQUIRE(base_kb > 0);
  // Splitting the whole line took about 1 GB (2026-12-01); its first 1,023 pieces are a few kB.
  CHECK(kb - base_kb < 64 * 1024);
  std::string out = tx::test::slurp(dir.file("out.txt"));
  CHECK(std::count(out.begin(), out.end(), '\n') == 2);
  CHECK_THAT(tx::test::slurp(dir.file("err.txt")), Catch::Contains("cropped 1 source line"));

  // tx-score refuses a pair beyond the model's positions: it splits the line only so far.
  const std::string score = std::string(TX_SCORE_BIN) + " -m " + dir.file("m/model.safetensors") +
                            " -v " + dir.file("m/vocab.spm") + " --cpu-threads 1 --src " +
                            dir.file("in.txt") + " --tgt " + dir.file("in.txt");
  const long refused_kb = peak_rss_kb("{ " + score + " 2> " + dir.file("score.err") + "; true; }");
  INFO("tx-score on the 8 MB line: " << refused_kb << " kB");
  REQUIRE(refused_kb > 0);
  CHECK(refused_kb - base_kb < 64 * 1024);
  CHECK_THAT(tx::test::slurp(dir.file("score.err")),
             Catch::Contains("in.txt' line 1: more than 1024 tokens"));
}
