// tx-score's metric output through the real program: sacreBLEU's signature in each line,
// --score-only, --max-ngram-order, --tokenize intl/char, --sentence-level, against the library
// and against sacreBLEU 2.4.3's command line on newstest2019 (../shared/data, skipped when absent).
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/read_lines.h"
#include "metrics/signature.h"
#include "support/programs.h"

using Catch::Contains;
using tx::test::join_lines;
using tx::test::one_line;
using tx::test::Run;
using tx::test::split_lines;
using tx::test::TempDir;
namespace fs = std::filesystem;

namespace {

Run tx_score(const TempDir& dir, const std::string& args) {
  return tx::test::run_program(dir, TX_SCORE_BIN, args);
}

std::string fixed2(double x) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.2f", x);
  return buffer;
}

// Hypotheses and two references with punctuation, Unicode quotes and numbers, so that the
// tokenizers differ.
struct Files {
  Files() {
    refs = {"Der Hund läuft schnell.",
            "„Das Haus ist klein“, sagte er.",
            "Es kostet 3,50 € – oder $4.",
            "Im Jahr 2019 waren es 1.000 Bäume.",
            "Ein grüner Baum!",
            "Wer? Wie? Was?"};
    refs2 = {"Der Hund rennt.",      "Das Haus ist klein, sagte er.",
             "Es kostet 3,50 Euro.", "2019 gab es 1000 Bäume.",
             "Ein Baum ist grün.",   "Wer, wie, was?"};
    hyps = {"Der Hund läuft.",
            "„Das Haus ist alt“, sagte sie.",
            "Es kostet 3,50 €.",
            "Im Jahr 2019 waren es 1.000 Bäume.",
            "",
            "Wer? Was?"};
    std::ofstream(dir.file("hyp.txt")) << join_lines(hyps);
    std::ofstream(dir.file("ref.txt")) << join_lines(refs);
    std::ofstream(dir.file("ref2.txt")) << join_lines(refs2);
  }
  TempDir dir;
  std::vector<std::string> hyps, refs, refs2;
};

}  // namespace

TEST_CASE("tx-score: one line per metric with sacreBLEU's signature", "[apps][score]") {
  Files f;
  const std::string v = "version:" + tx::metrics::signature_version();
  Run r = tx_score(f.dir, "--metrics bleu,chrf,chrf++ -r " + f.dir.file("ref.txt") + " < " +
                              f.dir.file("hyp.txt"));
  REQUIRE(r.status == 0);
  const std::vector<std::string> lines = split_lines(r.out);
  REQUIRE(lines.size() == 3);
  const tx::metrics::BleuScore bleu = tx::metrics::corpus_bleu(f.hyps, {f.refs});
  CHECK(lines[0] ==
        "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|" + v + " = " + bleu.format().substr(7));
  CHECK(lines[1] == "chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|" + v + " = " +
                        fixed2(tx::metrics::corpus_chrf(f.hyps, {f.refs}).score));
  CHECK(lines[2] ==
        "chrF2++|nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|" + v + " = " +
            fixed2(tx::metrics::corpus_chrf(f.hyps, {f.refs}, tx::metrics::chrf_plus_plus_options())
                       .score));

  Run only = tx_score(f.dir, "--score-only --metrics bleu chrf -r " + f.dir.file("ref.txt") +
                                 " -i " + f.dir.file("hyp.txt"));
  REQUIRE(only.status == 0);
  CHECK(only.out == fixed2(bleu.score) + "\n" +
                        fixed2(tx::metrics::corpus_chrf(f.hyps, {f.refs}).score) + "\n");

  // gzip references and hypotheses, the hypotheses from stdin too, score as their text.
  for (const char* name : {"hyp.txt", "ref.txt"})
    REQUIRE(std::system(("gzip -n -k " + f.dir.file(name)).c_str()) == 0);
  Run gz = tx_score(f.dir, "--metrics bleu,chrf,chrf++ -r " + f.dir.file("ref.txt.gz") + " < " +
                               f.dir.file("hyp.txt.gz"));
  CHECK(gz.status == 0);
  CHECK(gz.out == r.out);
}

TEST_CASE("tx-score: --tokenize intl/char, --max-ngram-order, --lowercase and two references",
          "[apps][score]") {
  Files f;
  for (const char* tok : {"13a", "intl", "char", "none"}) {
    for (int order : {1, 4, 6}) {
      INFO("--tokenize " << tok << " --max-ngram-order " << order);
      tx::metrics::BleuOptions o;
      o.tokenizer = tx::metrics::parse_bleu_tokenizer(tok);
      o.max_order = order;
      o.lowercase = order == 6;
      const std::string want = tx::metrics::corpus_bleu(f.hyps, {f.refs, f.refs2}, o)
                                   .format(2, tx::metrics::bleu_signature(o, 2)) +
                               "\n";
      CHECK_THAT(want, Contains(std::string("|tok:") + tok + "|") && Contains("nrefs:2"));
      Run r = tx_score(f.dir, std::string("--tokenize ") + tok + " --max-ngram-order " +
                                  std::to_string(order) + (o.lowercase ? " --lowercase" : "") +
                                  " -r " + f.dir.file("ref.txt") + " " + f.dir.file("ref2.txt") +
                                  " < " + f.dir.file("hyp.txt"));
      REQUIRE(r.status == 0);
      CHECK(r.out == want);
    }
  }
  // The tokenizers do differ on this text.
  tx::metrics::BleuOptions intl, chars;
  intl.tokenizer = tx::metrics::BleuTokenizer::kIntl;
  chars.tokenizer = tx::metrics::BleuTokenizer::kChar;
  CHECK(tx::metrics::corpus_bleu(f.hyps, {f.refs}).sys_len !=
        tx::metrics::corpus_bleu(f.hyps, {f.refs}, intl).sys_len);
  CHECK(tx::metrics::corpus_bleu(f.hyps, {f.refs}, chars).sys_len > 80);  // 88 characters

  Run bad =
      tx_score(f.dir, "--tokenize zh -r " + f.dir.file("ref.txt") + " < " + f.dir.file("hyp.txt"));
  CHECK(bad.status == 2);
  CHECK(one_line(bad.err));
  Run zero = tx_score(
      f.dir, "--max-ngram-order 0 -r " + f.dir.file("ref.txt") + " < " + f.dir.file("hyp.txt"));
  CHECK(zero.status == 2);
  CHECK(zero.out.empty());
  CHECK(one_line(zero.err));
  // A mistyped huge order is refused, not tried until memory runs out.
  Run huge = tx_score(f.dir, "--max-ngram-order 2000000000 -r " + f.dir.file("ref.txt") + " < " +
                                 f.dir.file("hyp.txt"));
  CHECK(huge.status == 2);
  CHECK(one_line(huge.err));
  CHECK_THAT(huge.err, Contains("--max-ngram-order") && Contains("1..100"));
  // "bleu chrf" in one word (a quoted list, a config string) names two metrics, as "bleu,chrf".
  Run spaced = tx_score(
      f.dir, "--metrics 'bleu chrf' -r " + f.dir.file("ref.txt") + " < " + f.dir.file("hyp.txt"));
  Run commas = tx_score(
      f.dir, "--metrics bleu,chrf -r " + f.dir.file("ref.txt") + " < " + f.dir.file("hyp.txt"));
  CHECK(spaced.status == 0);
  CHECK(split_lines(spaced.out).size() == 2);
  CHECK(spaced.out == commas.out);
  // No hypotheses at all: refused as sacreBLEU refuses an empty test set, not BLEU 0 with
  // success (a translation that failed).
  std::ofstream(f.dir.file("empty.txt")).flush();
  Run empty = tx_score(f.dir, "-r " + f.dir.file("empty.txt") + " < " + f.dir.file("empty.txt"));
  CHECK(empty.status == 1);
  CHECK(empty.out.empty());
  CHECK(one_line(empty.err));
  CHECK_THAT(empty.err, Contains("no lines"));
  // A model-scoring option beside references would be ignored: refused, naming it.
  Run normalize = tx_score(
      f.dir, "--normalize 0.6 -r " + f.dir.file("ref.txt") + " < " + f.dir.file("hyp.txt"));
  CHECK(normalize.status == 2);
  CHECK(one_line(normalize.err));
  CHECK_THAT(normalize.err, Contains("--normalize is for model scoring"));
}

TEST_CASE("tx-score --sentence-level: one line per hypothesis, sacreBLEU's sentence scores",
          "[apps][score]") {
  Files f;
  tx::metrics::BleuOptions o = tx::metrics::sentence_bleu_options();
  o.tokenizer = tx::metrics::BleuTokenizer::kIntl;
  std::string want, want_only;
  for (size_t i = 0; i < f.hyps.size(); ++i) {
    const tx::metrics::BleuScore s =
        tx::metrics::sentence_bleu(f.hyps[i], {f.refs[i], f.refs2[i]}, o);
    want += s.format(2, tx::metrics::bleu_signature(o, 2)) + "\n";
    want_only += fixed2(s.score) + "\n";
  }
  CHECK_THAT(want, Contains("|eff:yes|tok:intl|"));
  const std::string refs = " -r " + f.dir.file("ref.txt") + " " + f.dir.file("ref2.txt");
  Run r =
      tx_score(f.dir, "--sentence-level --tokenize intl" + refs + " < " + f.dir.file("hyp.txt"));
  REQUIRE(r.status == 0);
  CHECK(r.out == want);
  Run only = tx_score(f.dir, "--sentence-level --score-only --tokenize intl" + refs + " < " +
                                 f.dir.file("hyp.txt"));
  REQUIRE(only.status == 0);
  CHECK(only.out == want_only);

  std::string want_chrf;
  const tx::metrics::ChrfOptions pp = tx::metrics::chrf_plus_plus_options();
  for (size_t i = 0; i < f.hyps.size(); ++i)
    want_chrf += tx::metrics::sentence_chrf(f.hyps[i], {f.refs[i]}, pp)
                     .format(2, tx::metrics::chrf_signature(pp, 1)) +
                 "\n";
  Run chrf = tx_score(f.dir, "--sentence-level --metrics chrf++ -r " + f.dir.file("ref.txt") +
                                 " < " + f.dir.file("hyp.txt"));
  REQUIRE(chrf.status == 0);
  CHECK(chrf.out == want_chrf);

  Run two = tx_score(f.dir,
                     "--sentence-level --metrics bleu,chrf" + refs + " < " + f.dir.file("hyp.txt"));
  CHECK(two.status == 2);
  CHECK(two.out.empty());
  CHECK(one_line(two.err));
  CHECK_THAT(two.err, Contains("--sentence-level") && Contains("one metric"));

  std::ofstream(f.dir.file("short.txt")) << "a\n";
  Run mismatch = tx_score(
      f.dir, "--sentence-level -r " + f.dir.file("short.txt") + " < " + f.dir.file("hyp.txt"));
  CHECK(mismatch.status == 1);
  CHECK(mismatch.out.empty());
  CHECK(one_line(mismatch.err));
}

namespace {

// ../shared/data beside the repository root, found from $TX_SOURCE_DIR or upwards from the
// working directory, as in metrics_test.cc.
std::optional<fs::path> shared_data() {
  std::vector<fs::path> starts;
  if (const char* root = std::getenv("TX_SOURCE_DIR")) starts.emplace_back(root);
  std::error_code error;
  starts.push_back(fs::current_path(error));
  for (const fs::path& start : starts) {
    for (fs::path dir = fs::absolute(start, error); !dir.empty(); dir = dir.parent_path()) {
      const fs::path data = dir / ".." / "shared" / "data";
      if (fs::is_directory(data, error)) return data.lexically_normal();
      if (dir == dir.parent_path()) break;
    }
  }
  std::cout << "SKIPPED: ../shared/data not found" << std::endl;
  return std::nullopt;
}

// sacreBLEU's line with its own version replaced by tx's.
std::string with_tx_version(std::string line) {
  const std::string theirs = "version:2.4.3";
  return line.replace(line.find(theirs), theirs.size(),
                      "version:" + tx::metrics::signature_version());
}

}  // namespace

// The English side of newstest2019 scored against the German, by sacreBLEU 2.4.3's command line:
//   D=../shared/data/wmt-newstest-de-en
//   sacrebleu $D/newstest2019-deen.de -i $D/newstest2019-deen.en -m bleu -w 2 -f text -tok intl
//   sacrebleu $D/newstest2019-deen.de -i $D/newstest2019-deen.en -m bleu -w 2 -b -tok intl
//   sacrebleu $D/newstest2019-deen.de -i $D/newstest2019-deen.en -m bleu -w 2 -sl -tok char
//   sacrebleu $D/newstest2019-deen.de -i $D/newstest2019-deen.en -m bleu -w 2 -sl -b
//   sacrebleu $D/newstest2019-deen.de -i $D/newstest2019-deen.en -m chrf -cw 2 -w 2 -f text
TEST_CASE("tx-score equals sacreBLEU's command line on newstest2019-deen", "[apps][score]") {
  const std::optional<fs::path> data = shared_data();
  if (!data) return;
  TempDir dir;
  const fs::path set = *data / "wmt-newstest-de-en";
  const std::string io = " -r " + (set / "newstest2019-deen.de").string() + " -i " +
                         (set / "newstest2019-deen.en").string();

  Run intl = tx_score(dir, "--tokenize intl" + io);
  REQUIRE(intl.status == 0);
  CHECK(intl.out == with_tx_version("BLEU|nrefs:1|case:mixed|eff:no|tok:intl|smooth:exp|"
                                    "version:2.4.3 = 5.12 20.7/6.3/3.0/1.8 (BP = 1.000 ratio = "
                                    "1.075 hyp_len = 40010 ref_len = 37221)") +
                        "\n");
  Run only = tx_score(dir, "--tokenize intl --score-only" + io);
  CHECK(only.out == "5.12\n");

  Run sentences = tx_score(dir, "--sentence-level --tokenize char" + io);
  REQUIRE(sentences.status == 0);
  const std::vector<std::string> lines = split_lines(sentences.out);
  REQUIRE(lines.size() == 2000);
  CHECK(lines[0] == with_tx_version("BLEU|nrefs:1|case:mixed|eff:yes|tok:char|smooth:exp|"
                                    "version:2.4.3 = 35.09 67.8/39.7/26.3/21.4 (BP = 1.000 ratio "
                                    "= 1.035 hyp_len = 59 ref_len = 57)"));
  CHECK(lines[1] == with_tx_version("BLEU|nrefs:1|case:mixed|eff:yes|tok:char|smooth:exp|"
                                    "version:2.4.3 = 21.83 70.6/30.3/15.6/9.7 (BP = 0.916 ratio = "
                                    "0.919 hyp_len = 34 ref_len = 37)"));
  CHECK(lines[2] == with_tx_version("BLEU|nrefs:1|case:mixed|eff:yes|tok:char|smooth:exp|"
                                    "version:2.4.3 = 12.94 47.1/25.0/6.7/3.6 (BP = 1.000 ratio = "
                                    "1.308 hyp_len = 17 ref_len = 13)"));
  Run scores = tx_score(dir, "--sentence-level --score-only" + io);
  REQUIRE(scores.status == 0);
  CHECK(scores.out.substr(0, 18) == "18.21\n11.36\n22.09\n");

  Run chrf = tx_score(dir, "--metrics chrf++" + io);
  CHECK(chrf.out == with_tx_version("chrF2++|nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|"
                                    "version:2.4.3 = 22.45") +
                        "\n");
}
