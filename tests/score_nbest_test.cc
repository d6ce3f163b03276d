// tx-score --n-best-list: Marian n-best lists rescored through the real programs. A tiny random
// model writes an n-best list with tx-translate; tx-score must give every line the score that
// tx-score --src --tgt gives the same (source, hypothesis) pair, appended as " F1= <score>".
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "data/vocab.h"
#include "data/vocab_train.h"
#include "gradient_check.h"
#include "nn/transformer.h"
#include "support/programs.h"
#include "train/checkpoint.h"

using Catch::Contains;
using tx::test::join_lines;
using tx::test::one_line;
using tx::test::Run;
using tx::test::split_lines;
using tx::test::TempDir;

Run run(const TempDir& dir, const std::string& program, const std::string& args) {
  return tx::test::run_program(dir, program, args);
}

namespace {

// The fields of "i ||| text ||| features ||| score", spaces kept.
std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  for (size_t begin = 0;;) {
    const size_t bar = line.find("|||", begin);
    out.push_back(line.substr(begin, bar == std::string::npos ? bar : bar - begin));
    if (bar == std::string::npos) return out;
    begin = bar + 3;
  }
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, s.find_last_not_of(' ') - b + 1);
}

const char* kSentences[] = {"das Haus ist klein",
                            "der Hund läuft schnell",
                            "ein Baum ist grün",
                            "das Haus ist alt",
                            "der Baum",
                            "ein Hund ist klein",
                            "schnell läuft das alte Haus"};

// A vocabulary and a random tiny model saved as a model file.
struct Fixture {
  Fixture() {
    std::vector<std::string> corpus;
    for (int r = 0; r < 30; ++r)
      for (const char* s : kSentences) corpus.push_back(s);
    std::ofstream(dir.file("corpus.txt")) << join_lines(corpus);
    tx::data::VocabTrainOptions vo;
    vo.inputs = {dir.file("corpus.txt")};
    vo.prefix = dir.file("vocab");
    vo.vocab_size = 40;
    vo.hard_vocab_limit = false;
    vocab_path = tx::data::train_vocab(vo).model_path;
    const tx::data::Vocab vocab(vocab_path);
    std::unique_ptr<tx::Backend> be = tx::test::cpu_backend();
    tx::io::ModelConfig c;
    c.src_vocab_size = c.tgt_vocab_size = vocab.size();
    c.d_model = 8;
    c.d_ff = 16;
    c.heads = 2;
    c.encoder_layers = c.decoder_layers = 1;
    c.dropout = 0.0f;
    c.max_length = 40;
    tx::nn::ParameterSet params;
    tx::Rng rng(17);
    tx::nn::Transformer model(tx::nn::ParamScope(*be, params, rng), c);
    tx::test::perturb_params(*be, params, rng);
    model_path = dir.file("model.safetensors");
    tx::train::save_model(model_path, *be, c, params);
  }
  std::string model_args() const {
    return "-m " + model_path + " -v " + vocab_path + " " + vocab_path + " --quiet";
  }

  TempDir dir;
  std::string vocab_path, model_path;
};

}  // namespace

TEST_CASE("tx-score --n-best-list: each line gets the score tx-score gives its pair",
          "[apps][score][nbest]") {
  Fixture f;
  std::vector<std::string> src(std::begin(kSentences), std::end(kSentences));
  src[2] = "";  // tx-translate writes "2 |||  ||| F0= 0 ||| 0"; its empty text scores eos alone
  std::ofstream(f.dir.file("src.txt")) << join_lines(src);
  Run translated = run(f.dir, TX_TRANSLATE_BIN,
                       f.model_args() + " --beam-size 4 --n-best 3 < " + f.dir.file("src.txt"));
  REQUIRE(translated.status == 0);
  const std::vector<std::string> nbest = split_lines(translated.out);
  REQUIRE(nbest.size() >= src.size());
  std::ofstream(f.dir.file("nbest.txt")) << translated.out;

  // The same pairs for plain model scoring: source line i with each hypothesis of i.
  std::vector<std::string> pair_src, pair_tgt;
  for (const std::string& line : nbest) {
    const std::vector<std::string> parts = fields(line);
    REQUIRE(parts.size() == 4);
    pair_src.push_back(src[std::stoul(trim(parts[0]))]);
    pair_tgt.push_back(trim(parts[1]));
  }
  std::ofstream(f.dir.file("pair_src.txt")) << join_lines(pair_src);
  std::ofstream(f.dir.file("pair_tgt.txt")) << join_lines(pair_tgt);

  // The n-best line with " <feature>= <score>" after its features, everything else as it came.
  const auto expected = [&](const std::string& extra, const std::string& feature) {
    Run plain = run(f.dir, TX_SCORE_BIN,
                    f.model_args() + extra + " --src " + f.dir.file("pair_src.txt") + " --tgt " +
                        f.dir.file("pair_tgt.txt"));
    REQUIRE(plain.status == 0);
    const std::vector<std::string> scores = split_lines(plain.out);
    REQUIRE(scores.size() == nbest.size());
    std::string want;
    for (size_t k = 0; k < nbest.size(); ++k) {
      const std::vector<std::string> p = fields(nbest[k]);
      want += p[0] + "|||" + p[1] + "||| " + trim(p[2]) + " " + feature + "= " + scores[k] +
              " |||" + p[3] + "\n";
    }
    return want;
  };

  SECTION("default feature F1, from a file and from stdin") {
    const std::string want = expected("", "F1");
    CHECK_THAT(want, Contains(" ||| F0= ") && Contains(" F1= -"));
    Run r = run(f.dir, TX_SCORE_BIN,
                f.model_args() + " --src " + f.dir.file("src.txt") + " --n-best-list " +
                    f.dir.file("nbest.txt"));
    REQUIRE(r.status == 0);
    CHECK(r.out == want);
    Run piped = run(f.dir, TX_SCORE_BIN,
                    f.model_args() + " --src " + f.dir.file("src.txt") + " --n-best-list - < " +
                        f.dir.file("nbest.txt"));
    REQUIRE(piped.status == 0);
    CHECK(piped.out == want);
  }
  SECTION("--normalize and --n-best-feature, batched differently") {
    const std::string extra = " --normalize 1 --max-tokens 20";
    Run r = run(f.dir, TX_SCORE_BIN,
                f.model_args() + extra + " --n-best-feature R2L --src " + f.dir.file("src.txt") +
                    " --n-best-list " + f.dir.file("nbest.txt"));
    REQUIRE(r.status == 0);
    CHECK(r.out == expected(extra, "R2L"));
  }
  SECTION("a list with alignments (tx-translate --alignment): the features before the score") {
    Run aligned =
        run(f.dir, TX_TRANSLATE_BIN,
            f.model_args() + " --beam-size 4 --n-best 3 --alignment < " + f.dir.file("src.txt"));
    REQUIRE(aligned.status == 0);
    REQUIRE(split_lines(aligned.out).size() == nbest.size());
    std::ofstream(f.dir.file("aligned.txt")) << aligned.out;
    Run r = run(f.dir, TX_SCORE_BIN,
                f.model_args() + " --src " + f.dir.file("src.txt") + " --n-best-list " +
                    f.dir.file("aligned.txt"));
    REQUIRE(r.status == 0);
    // Each line as the list without alignments gives it, with the alignment field kept.
    const std::vector<std::string> got = split_lines(r.out), in = split_lines(aligned.out),
                                   want = split_lines(expected("", "F1"));
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      const std::vector<std::string> g = fields(got[k]), w = fields(want[k]), a = fields(in[k]);
      REQUIRE(g.size() == 5);
      CHECK(g[2] == a[2]);  // the alignment, as it came
      CHECK(std::vector<std::string>{g[0], g[1], g[3], g[4]} == w);
    }
  }
  SECTION("rescoring a rescored list appends one more feature") {
    Run once = run(f.dir, TX_SCORE_BIN,
                   f.model_args() + " --src " + f.dir.file("src.txt") + " --n-best-list " +
                       f.dir.file("nbest.txt"));
    REQUIRE(once.status == 0);
    std::ofstream(f.dir.file("nbest1.txt")) << once.out;
    // Without --n-best-feature the next free name: F2 after F0 and F1.
    Run twice = run(f.dir, TX_SCORE_BIN,
                    f.model_args() + " --src " + f.dir.file("src.txt") + " --n-best-list " +
                        f.dir.file("nbest1.txt"));
    REQUIRE(twice.status == 0);
    const std::vector<std::string> a = split_lines(once.out), b = split_lines(twice.out);
    REQUIRE(a.size() == b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      const std::vector<std::string> pa = fields(a[k]), pb = fields(b[k]);
      const std::string f1 = trim(pa[2]).substr(trim(pa[2]).find("F1= ") + 4);
      CHECK(trim(pb[2]) == trim(pa[2]) + " F2= " + f1);  // the same model gives the same score
      CHECK(pb[3] == pa[3]);
    }
  }
}

TEST_CASE("tx-score --n-best-list: a malformed list or a wrong combination is one error line",
          "[apps][score][nbest]") {
  Fixture f;
  std::ofstream(f.dir.file("src.txt")) << "das Haus ist klein\nder Hund\n";
  const std::string model = f.model_args() + " --src " + f.dir.file("src.txt");
  const auto list = [&](const std::string& text) {
    std::ofstream(f.dir.file("list.txt")) << text;
    return " --n-best-list " + f.dir.file("list.txt");
  };

  Run fields3 = run(f.dir, TX_SCORE_BIN,
                    model + list("0 ||| das Haus ||| F0= -1 ||| -1\n1 ||| der ||| F0= -2\n"));
  CHECK(fields3.status == 1);
  CHECK(fields3.out.empty());
  CHECK(one_line(fields3.err));
  CHECK_THAT(fields3.err, Contains("list.txt' line 2") && Contains("3 fields"));

  Run index = run(f.dir, TX_SCORE_BIN, model + list("2 ||| der Hund ||| F0= -1 ||| -1\n"));
  CHECK(index.status == 1);
  CHECK(index.out.empty());
  CHECK(one_line(index.err));
  CHECK_THAT(index.err, Contains("line 1") && Contains("index 2") && Contains("src.txt"));

  Run not_number = run(f.dir, TX_SCORE_BIN, model + list("x ||| der Hund ||| F0= -1 ||| -1\n"));
  CHECK(not_number.status == 1);
  CHECK(one_line(not_number.err));

  std::ofstream(f.dir.file("tgt.txt")) << "a\nb\n";
  Run both = run(f.dir, TX_SCORE_BIN,
                 model + " --tgt " + f.dir.file("tgt.txt") + list("0 ||| a ||| F0= -1 ||| -1\n"));
  CHECK(both.status == 2);
  CHECK(one_line(both.err));
  CHECK_THAT(both.err, Contains("--tgt") && Contains("--n-best-list"));

  Run feature = run(f.dir, TX_SCORE_BIN,
                    model + " --n-best-feature 'a b'" + list("0 ||| a ||| F0= -1 ||| -1\n"));
  CHECK(feature.status == 2);
  CHECK(one_line(feature.err));

  // A name the list already has (an ensemble's F0 F1, say).
  Run taken = run(f.dir, TX_SCORE_BIN,
                  model + " --n-best-feature F1" + list("0 ||| a ||| F0= -1 F1= -2 ||| -1\n"));
  CHECK(taken.status == 2);
  CHECK(one_line(taken.err));
  CHECK_THAT(taken.err, Contains("already has a feature"));

  Run no_model = run(f.dir, TX_SCORE_BIN,
                     "-r " + f.dir.file("tgt.txt") + list("0 ||| a ||| F0= -1 ||| -1\n") + " < " +
                         f.dir.file("tgt.txt"));
  CHECK(no_model.status == 2);
  CHECK(one_line(no_model.err));
  CHECK_THAT(no_model.err, Contains("--n-best-list") && Contains("-m/--model"));
}
