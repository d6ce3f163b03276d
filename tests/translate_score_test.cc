// The tx-translate and tx-score programs, run as real processes on a tiny random model and a
// vocabulary trained on the fly: line structure and agreement with the library (Translator,
// corpus_bleu/corpus_chrf, a teacher-forced forward), and the exit codes of their errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "data/vocab.h"
#include "data/vocab_train.h"
#include "decode/shortlist.h"
#include "decode/translator.h"
#include "gradient_check.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/read_lines.h"
#include "nn/transformer.h"
#include "support/backends.h"
#include "support/programs.h"
#include "train/checkpoint.h"
#include "train_tiny.h"

using Catch::Contains;
using tx::test::TempDir;

namespace {

using tx::test::join_lines;
using tx::test::one_line;
using tx::test::split_lines;

const std::vector<std::string> kWords = {"das",   "Haus",    "ist", "klein", "der",  "Hund",
                                         "läuft", "schnell", "ein", "Baum",  "grün", "alt"};

// Random sentences of 1..max_words words.
std::vector<std::string> sentences(tx::Rng& rng, int count, int max_words) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    const int n = 1 + static_cast<int>(rng.uniform() * max_words);
    std::string s;
    for (int w = 0; w < n; ++w)
      s += (w ? " " : "") + kWords[static_cast<size_t>(rng.uniform() * kWords.size())];
    out.push_back(s);
  }
  return out;
}

tx::io::ModelConfig tiny_config(int64_t vocab) {
  tx::io::ModelConfig c;
  c.src_vocab_size = c.tgt_vocab_size = vocab;
  c.d_model = 8;
  c.d_ff = 16;
  c.heads = 2;
  c.encoder_layers = c.decoder_layers = 1;
  c.dropout = 0.0f;
  c.max_length = 40;
  return c;
}

// A vocabulary, a random model over it saved as a model file, and the same model in memory.
struct Fixture {
  Fixture() {
    tx::Rng rng(3);
    std::ofstream(dir.file("corpus.txt")) << join_lines(sentences(rng, 200, 6));
    tx::data::VocabTrainOptions vo;
    vo.inputs = {dir.file("corpus.txt")};
    vo.prefix = dir.file("vocab");
    vo.vocab_size = 40;
    vo.hard_vocab_limit = false;
    vocab_path = tx::data::train_vocab(vo).model_path;
    vocab = std::make_unique<tx::data::Vocab>(vocab_path);
    be = tx::test::cpu_backend();
    config = tiny_config(vocab->size());
    model = tx::nn::Transformer(tx::nn::ParamScope(*be, params, init_rng), config);
    tx::test::perturb_params(*be, params, init_rng);
    model_path = dir.file("model.safetensors");
    tx::train::save_model(model_path, *be, config, params);
  }
  // "-m MODEL -v VOCAB VOCAB".
  std::string model_args() const {
    return "-m " + model_path + " -v " + vocab_path + " " + vocab_path;
  }

  TempDir dir;
  std::string vocab_path, model_path;
  std::unique_ptr<tx::data::Vocab> vocab;
  std::unique_ptr<tx::Backend> be;
  tx::io::ModelConfig config;
  tx::nn::ParameterSet params;
  tx::Rng init_rng{11};
  tx::nn::Transformer model;
};

using tx::test::Run;

Run run(const TempDir& dir, const std::string& program, const std::string& args) {
  return tx::test::run_program(dir, program, args);
}

// log P(tgt + eos | src) by the full teacher-forced forward of one pair, log-softmax on the host
// in double.
double teacher_forced_log_prob(const Fixture& f, const std::string& src, const std::string& tgt) {
  std::vector<int32_t> s = f.vocab->encode(src), y = f.vocab->encode(tgt);
  s.push_back(tx::data::Vocab::kEosId);
  std::vector<int32_t> tgt_in = {tx::data::Vocab::kBosId};
  tgt_in.insert(tgt_in.end(), y.begin(), y.end());
  y.push_back(tx::data::Vocab::kEosId);
  const auto S = static_cast<int64_t>(s.size()), T = static_cast<int64_t>(tgt_in.size());
  tx::Graph g(*f.be, tx::GraphOptions{false, false});
  tx::Var logits = f.model.forward(g, f.be->upload(s, {1, S}),
                                   f.be->upload(std::vector<int32_t>{int32_t(S)}, {1}),
                                   f.be->upload(tgt_in, {1, T}));
  const std::vector<float> z = f.be->download<float>(logits->value);
  const int64_t V = f.config.tgt_vocab_size;
  double total = 0;
  for (int64_t t = 0; t < T; ++t) {
    const float* row = &z[t * V];
    double max = row[0], sum = 0;
    for (int64_t v = 1; v < V; ++v) max = std::max<double>(max, row[v]);
    for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - max);
    total += row[y[t]] - max - std::log(sum);
  }
  return total;
}

std::vector<double> parse_scores(const std::string& text) {
  std::vector<double> out;
  for (const std::string& l : split_lines(text)) out.push_back(std::stod(l));
  return out;
}

}  // namespace

TEST_CASE("tx-translate: one line per input line in input order, as the library Translator",
          "[apps][translate]") {
  Fixture f;
  const std::vector<std::string> input = {"das Haus ist klein",
                                          "",
                                          "der Hund",
                                          "ein grün Baum ist alt und das Haus läuft schnell",
                                          "alt",
                                          "",
                                          "das",
                                          "der Hund läuft schnell",
                                          "grün"};
  std::ofstream(f.dir.file("in.txt")) << join_lines(input);
  tx::decode::TranslatorOptions o;
  o.search.beam_size = 3;
  o.search.length_penalty = 0.6f;
  o.batching.max_tokens = 12;
  o.batching.maxi_batch = 1;
  const std::string flags =
      f.model_args() + " --beam-size 3 --normalize 0.6 --max-tokens 12 --maxi-batch 1 --quiet";
  // The library Translator's output for the input with `o`, the weights prepared as the
  // program prepares them (once, in `form`).
  auto library = [&](tx::ops::WeightForm form) {
    f.model.prepare_inference(*f.be, form);
    tx::decode::Translator tr(*f.be, f.model, *f.vocab, *f.vocab, o);
    std::istringstream in(join_lines(input));
    std::ostringstream out;
    tr.translate_stream(in, out);
    return out.str();
  };

  SECTION("1-best: exactly the library's output, empty lines kept") {
    Run r = run(f.dir, TX_TRANSLATE_BIN, flags + " < " + f.dir.file("in.txt"));
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    const std::vector<std::string> lines = split_lines(r.out);
    REQUIRE(lines.size() == input.size());
    CHECK(lines[1].empty());
    CHECK(lines[5].empty());
    CHECK(r.out == library(tx::ops::WeightForm::f32));
    // --input reads a file the same way.
    Run from_file = run(f.dir, TX_TRANSLATE_BIN, flags + " -i " + f.dir.file("in.txt"));
    CHECK(from_file.status == 0);
    CHECK(from_file.out == r.out);
    // gzip input reads as its text, from --input (Marian's decoder reads input.gz) and stdin.
    REQUIRE(std::system(
                ("gzip -n -c " + f.dir.file("in.txt") + " > " + f.dir.file("in.gz")).c_str()) == 0);
    Run gz_file = run(f.dir, TX_TRANSLATE_BIN, flags + " -i " + f.dir.file("in.gz"));
    CHECK(gz_file.status == 0);
    CHECK(gz_file.out == r.out);
    Run gz_stdin = run(f.dir, TX_TRANSLATE_BIN, flags + " < " + f.dir.file("in.gz"));
    CHECK(gz_stdin.status == 0);
    CHECK(gz_stdin.out == r.out);
    // A pipe given as --input while stderr is a terminal: the progress display must not read
    // it to count its lines first (it did, and nothing was left to translate).
    if (std::system("command -v script > /dev/null") != 0) {
      WARN("script(1) is missing: the terminal case is not run");
    } else {
      // Without --quiet: the display (and the count that read the pipe) is for a terminal that
      // shows logs.
      const std::string shown = flags.substr(0, flags.rfind(" --quiet"));
      REQUIRE(shown + " --quiet" == flags);
      const std::string in_terminal = "script -qec \"bash -c '" + std::string(TX_TRANSLATE_BIN) +
                                      " " + shown + " -i <(cat " + f.dir.file("in.txt") + ") > " +
                                      f.dir.file("tty.out") + "'\" /dev/null";
      Run tty = run(f.dir, "", in_terminal);
      CHECK(tty.status == 0);
      CHECK_THAT(tty.out, Contains("translated 9 lines"));  // the log reached the terminal
      CHECK(tx::test::slurp(f.dir.file("tty.out")) == r.out);
    }
  }
  SECTION("n-best: Marian's format, every index in order, as the library") {
    Run r = run(f.dir, TX_TRANSLATE_BIN, flags + " --n-best 3 < " + f.dir.file("in.txt"));
    REQUIRE(r.status == 0);
    std::vector<int64_t> indices;
    for (const std::string& line : split_lines(r.out)) {
      REQUIRE(line.find(" ||| F0= ") != std::string::npos);
      indices.push_back(std::stoll(line.substr(0, line.find(" ||| "))));
    }
    std::vector<int64_t> want_indices;
    for (int64_t i = 0; i < int64_t(input.size()); ++i)
      want_indices.insert(want_indices.end(), input[i].empty() ? 1 : 3, i);
    CHECK(indices == want_indices);
    o.search.n_best = 3;
    CHECK(r.out == library(tx::ops::WeightForm::f32));
  }
  SECTION("--int8: exactly the library's Translator on the quantised model") {
    Run r = run(f.dir, TX_TRANSLATE_BIN, flags + " --int8 < " + f.dir.file("in.txt"));
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    REQUIRE(split_lines(r.out).size() == input.size());
    CHECK(r.out == library(tx::ops::WeightForm::int8));
  }
  SECTION("--alignment: Marian's field after each line, as the library; words; bad values") {
    Run hard = run(f.dir, TX_TRANSLATE_BIN, flags + " --alignment < " + f.dir.file("in.txt"));
    REQUIRE(hard.status == 0);
    Run plain = run(f.dir, TX_TRANSLATE_BIN, flags + " < " + f.dir.file("in.txt"));
    const std::vector<std::string> lines = split_lines(hard.out), texts = split_lines(plain.out);
    REQUIRE(lines.size() == input.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      INFO(lines[i]);
      const size_t bar = lines[i].find(" ||| ");
      REQUIRE(bar != std::string::npos);
      CHECK(lines[i].substr(0, bar) == texts[i]);           // the search is unchanged
      if (input[i].empty()) CHECK(lines[i] == " ||| 0-0");  // Marian's: eos to eos
    }
    o.alignment.kind = tx::decode::AlignmentKind::hard;
    CHECK(hard.out == library(tx::ops::WeightForm::f32));
    // Soft: a group per target token and eos, each of the source's tokens and eos, summing to 1.
    Run soft = run(f.dir, TX_TRANSLATE_BIN, flags + " --alignment soft < " + f.dir.file("in.txt"));
    REQUIRE(soft.status == 0);
    const std::vector<std::string> soft_lines = split_lines(soft.out);
    for (size_t i = 0; i < input.size(); ++i) {
      if (input[i].empty()) continue;
      std::istringstream groups(soft_lines[i].substr(soft_lines[i].find(" ||| ") + 5));
      int rows = 0;
      for (std::string group; groups >> group; ++rows) {
        std::replace(group.begin(), group.end(), ',', ' ');
        std::istringstream values(group);
        double sum = 0;
        int cols = 0;
        for (double v; values >> v; ++cols) sum += v;
        CHECK(cols == int(f.vocab->encode(input[i]).size()) + 1);
        CHECK(std::abs(sum - 1.0) < 1e-4);
      }
      // The hard alignment has one pair per group: its most probable source token.
      const std::string pairs = lines[i].substr(lines[i].find(" ||| ") + 5);
      CHECK(std::count(pairs.begin(), pairs.end(), '-') == rows);
    }
    // Words: every pair within the line's whitespace-separated words (eos left out).
    Run words = run(f.dir, TX_TRANSLATE_BIN,
                    flags + " --alignment 0.2 --alignment-words < " + f.dir.file("in.txt"));
    REQUIRE(words.status == 0);
    const std::vector<std::string> word_lines = split_lines(words.out);
    auto count_words = [](const std::string& s) {
      std::istringstream in(s);
      int n = 0;
      for (std::string w; in >> w;) ++n;
      return n;
    };
    int pairs_seen = 0;
    for (size_t i = 0; i < input.size(); ++i) {
      const size_t bar = word_lines[i].find(" ||| ");
      std::istringstream pairs(word_lines[i].substr(bar + 5));
      for (std::string p; pairs >> p; ++pairs_seen) {
        INFO(word_lines[i] << ": " << p);
        CHECK(std::stoi(p.substr(0, p.find('-'))) < count_words(input[i]));
        CHECK(std::stoi(p.substr(p.find('-') + 1)) < count_words(word_lines[i].substr(0, bar)));
      }
    }
    CHECK(pairs_seen > 10);
    // Unknown tokens print as " ⁇ ", a word of their own, wherever their pieces sit: the
    // translation's words are the printed ones, one soft group each.
    std::ofstream(f.dir.file("unk.txt"))
        << kWords[0] << "\t" << kWords[1] << "€" << kWords[2] << " " << kWords[3] << "\n"
        << kWords[1] << "\t€" << kWords[0] << " ∑ " << kWords[2] << " €\n";
    Run unk = run(
        f.dir, TX_TRANSLATE_BIN,
        flags + " --force-decode --alignment soft --alignment-words < " + f.dir.file("unk.txt"));
    REQUIRE(unk.status == 0);
    const std::vector<std::string> unk_lines = split_lines(unk.out);
    REQUIRE(unk_lines.size() == 2);
    for (const std::string& line : unk_lines) {
      INFO(line);
      const size_t bar = line.find(" ||| ");
      CHECK(line.substr(0, bar).find("\u2047") != std::string::npos);
      CHECK(count_words(line.substr(bar + 5)) == count_words(line.substr(0, bar)));
    }
    for (const char* bad : {"--alignment 2", "--alignment firm", "--alignment-words"}) {
      INFO(bad);
      Run r = run(f.dir, TX_TRANSLATE_BIN, flags + " " + bad + " < " + f.dir.file("in.txt"));
      CHECK(r.status == 2);
      CHECK(one_line(r.err));
      CHECK(r.out.empty());
    }
  }
  SECTION("empty input: empty output, exit 0") {
    std::ofstream(f.dir.file("empty.txt")).flush();
    Run r = run(f.dir, TX_TRANSLATE_BIN, flags + " < " + f.dir.file("empty.txt"));
    CHECK(r.status == 0);
    CHECK(r.out.empty());
  }
}

TEST_CASE("tx-translate: a missing model or a mismatched vocabulary is one error line, exit 1",
          "[apps][translate]") {
  Fixture f;
  std::ofstream(f.dir.file("in.txt")) << "das Haus\n";
  const std::string in = " < " + f.dir.file("in.txt");
  Run missing = run(f.dir, TX_TRANSLATE_BIN,
                    "-m " + f.dir.file("nope.safetensors") + " -v " + f.vocab_path + in);
  CHECK(missing.status == 1);
  CHECK(missing.out.empty());
  CHECK(one_line(missing.err));
  CHECK_THAT(missing.err, Contains("tx-translate: error:") && Contains("nope.safetensors"));

  Run no_vocab =
      run(f.dir, TX_TRANSLATE_BIN, "-m " + f.model_path + " -v " + f.dir.file("nope.spm") + in);
  CHECK(no_vocab.status == 1);
  CHECK(one_line(no_vocab.err));
  CHECK_THAT(no_vocab.err, Contains("nope.spm"));

  // The same architecture over a vocabulary one piece larger.
  tx::nn::ParameterSet params;
  tx::Rng rng(1);
  tx::io::ModelConfig bigger = tiny_config(f.vocab->size() + 1);
  tx::nn::Transformer model(tx::nn::ParamScope(*f.be, params, rng), bigger);
  tx::train::save_model(f.dir.file("bigger.safetensors"), *f.be, bigger, params);
  Run mismatch = run(f.dir, TX_TRANSLATE_BIN,
                     "-m " + f.dir.file("bigger.safetensors") + " -v " + f.vocab_path + in);
  CHECK(mismatch.status == 1);
  CHECK(mismatch.out.empty());
  CHECK(one_line(mismatch.err));
  CHECK_THAT(mismatch.err, Contains("vocabulary") && Contains(f.vocab_path));

  Run no_model = run(f.dir, TX_TRANSLATE_BIN, "-v " + f.vocab_path + in);
  CHECK(no_model.status == 2);
  CHECK(one_line(no_model.err));

  // A model that records its vocabularies' pieces: another vocabulary of its size (here the
  // record says so) is refused by both programs; its own is taken.
  const std::string own = tx::data::pair_fingerprint(*f.vocab, *f.vocab);
  std::string other = own;
  other[0] = other[0] == '0' ? '1' : '0';
  for (const auto& [name, print] :
       {std::pair<std::string, std::string>{"own.safetensors", own}, {"other.safetensors", other}})
    tx::train::save_model(f.dir.file(name), *f.be, f.config, f.params,
                          {{tx::train::kVocabFingerprintKey, print}});
  const std::string vocabs = " -v " + f.vocab_path + " " + f.vocab_path;
  Run ok = run(f.dir, TX_TRANSLATE_BIN, "-m " + f.dir.file("own.safetensors") + vocabs + in);
  CHECK(ok.status == 0);
  CHECK(ok.out == run(f.dir, TX_TRANSLATE_BIN, f.model_args() + in).out);
  for (const char* program : {TX_TRANSLATE_BIN, TX_SCORE_BIN}) {
    INFO(program);
    const std::string data =
        program == std::string(TX_SCORE_BIN)
            ? " --src " + f.dir.file("in.txt") + " --tgt " + f.dir.file("in.txt")
            : in;
    Run wrong = run(f.dir, program, "-m " + f.dir.file("other.safetensors") + vocabs + data);
    CHECK(wrong.status == 1);
    CHECK(wrong.out.empty());
    CHECK(one_line(wrong.err));
    CHECK_THAT(wrong.err, Contains("is not the one") && Contains("other.safetensors") &&
                              Contains("vocab*.spm"));
  }
}

TEST_CASE("tx-score: BLEU and chrF lines equal the library's, line-count mismatch fails",
          "[apps][score]") {
  TempDir dir;
  tx::Rng rng(5);
  const std::vector<std::string> refs = sentences(rng, 30, 8), refs2 = sentences(rng, 30, 8);
  std::vector<std::string> hyps = refs;
  for (size_t i = 0; i < hyps.size(); i += 3) hyps[i] = sentences(rng, 1, 5)[0];
  for (size_t i = 1; i < hyps.size(); i += 4) hyps[i] = "Das " + hyps[i] + ".";
  std::ofstream(dir.file("hyp.txt")) << join_lines(hyps);
  std::ofstream(dir.file("ref.txt")) << join_lines(refs);
  std::ofstream(dir.file("ref2.txt")) << join_lines(refs2);
  const std::vector<std::string> hyp_lines = tx::metrics::read_lines(dir.file("hyp.txt"));

  SECTION("one reference, stdin and -i") {
    // Each line carries sacreBLEU's signature (lib/metrics, score_sacrebleu_test.cc).
    const tx::metrics::ChrfOptions chrf, pp = tx::metrics::chrf_plus_plus_options();
    const std::string want =
        tx::metrics::corpus_bleu(hyp_lines, {refs}).format(2, tx::metrics::bleu_signature({}, 1)) +
        "\n" +
        tx::metrics::corpus_chrf(hyp_lines, {refs}, chrf)
            .format(2, tx::metrics::chrf_signature(chrf, 1)) +
        "\n" +
        tx::metrics::corpus_chrf(hyp_lines, {refs}, pp)
            .format(2, tx::metrics::chrf_signature(pp, 1)) +
        "\n";
    Run r =
        run(dir, TX_SCORE_BIN,
            "--metrics bleu,chrf,chrf++ -r " + dir.file("ref.txt") + " < " + dir.file("hyp.txt"));
    REQUIRE(r.status == 0);
    CHECK(r.out == want);
    Run by_file =
        run(dir, TX_SCORE_BIN,
            "--metrics bleu chrf chrf++ -r " + dir.file("ref.txt") + " -i " + dir.file("hyp.txt"));
    CHECK(by_file.status == 0);
    CHECK(by_file.out == want);
  }
  SECTION("two references, --lowercase, --tokenize none") {
    tx::metrics::BleuOptions bo;
    bo.lowercase = true;
    bo.tokenizer = tx::metrics::BleuTokenizer::kNone;
    tx::metrics::ChrfOptions co;
    co.lowercase = true;
    const std::string want = tx::metrics::corpus_bleu(hyp_lines, {refs, refs2}, bo)
                                 .format(2, tx::metrics::bleu_signature(bo, 2)) +
                             "\n" +
                             tx::metrics::corpus_chrf(hyp_lines, {refs, refs2}, co)
                                 .format(2, tx::metrics::chrf_signature(co, 2)) +
                             "\n";
    Run r = run(dir, TX_SCORE_BIN,
                "--metrics bleu,chrf --lowercase --tokenize none -r " + dir.file("ref.txt") + " " +
                    dir.file("ref2.txt") + " < " + dir.file("hyp.txt"));
    REQUIRE(r.status == 0);
    CHECK(r.out == want);
  }
  SECTION("a reference with another line count: exit 1, one line, nothing on stdout") {
    std::vector<std::string> shorter(refs.begin(), refs.end() - 1);
    std::ofstream(dir.file("short.txt")) << join_lines(shorter);
    Run r = run(dir, TX_SCORE_BIN, "-r " + dir.file("short.txt") + " < " + dir.file("hyp.txt"));
    CHECK(r.status == 1);
    CHECK(r.out.empty());
    CHECK(one_line(r.err));
  }
}

TEST_CASE("tx-score: model scores are the teacher-forced log-probs, in input order",
          "[apps][score]") {
  Fixture f;
  tx::Rng rng(9);
  std::vector<std::string> src = sentences(rng, 14, 7), tgt = sentences(rng, 14, 9);
  tgt[4] = "";  // an empty target still scores eos
  std::ofstream(f.dir.file("src.txt")) << join_lines(src);
  std::ofstream(f.dir.file("tgt.txt")) << join_lines(tgt);
  const std::string args = f.model_args() + " --src " + f.dir.file("src.txt") + " --tgt " +
                           f.dir.file("tgt.txt") + " --max-tokens 40 --quiet";

  Run r = run(f.dir, TX_SCORE_BIN, args);
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  const std::vector<double> scores = parse_scores(r.out);
  REQUIRE(scores.size() == src.size());
  Run normalised = run(f.dir, TX_SCORE_BIN, args + " --normalize 1");
  REQUIRE(normalised.status == 0);
  const std::vector<double> per_token = parse_scores(normalised.out);
  REQUIRE(per_token.size() == src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    INFO("pair " << i);
    const double want = teacher_forced_log_prob(f, src[i], tgt[i]);
    CHECK(scores[i] == Approx(want).margin(1e-4));
    const double length = double(f.vocab->encode(tgt[i]).size() + 1);
    CHECK(per_token[i] == Approx(want / length).margin(1e-4));
  }
  // A metrics option beside a model would be ignored: refused, naming it.
  Run tokenize = run(f.dir, TX_SCORE_BIN, args + " --tokenize intl");
  CHECK(tokenize.status == 2);
  CHECK(tokenize.out.empty());
  CHECK_THAT(tokenize.err, Contains("--tokenize is for metrics"));
  Run input = run(f.dir, TX_SCORE_BIN, args + " -i " + f.dir.file("tgt.txt"));
  CHECK(input.status == 2);
  CHECK_THAT(input.err, Contains("--input is for metrics"));
  // --n-best-feature names a column of an n-best list: ignored with --tgt, so refused.
  Run feature = run(f.dir, TX_SCORE_BIN, args + " --n-best-feature F3");
  CHECK(feature.status == 2);
  CHECK_THAT(feature.err, Contains("--n-best-feature") && Contains("--n-best-list"));
  // sacreBLEU's -m picks metrics; tx-score's names the model, and says so.
  Run metric = run(f.dir, TX_SCORE_BIN, "-m bleu -r " + f.dir.file("tgt.txt"));
  CHECK(metric.status == 2);
  CHECK_THAT(metric.err, Contains("--metrics bleu"));
  Run seeded = run(f.dir, TX_SCORE_BIN, args + " --seed 5 --cpu-threads 1");
  CHECK(seeded.status == 0);  // settings a script passes every program
  CHECK(seeded.out == r.out);

  SECTION("--int8: near the f32 scores, not equal to them") {
    Run r8 = run(f.dir, TX_SCORE_BIN, args + " --int8");
    REQUIRE(r8.status == 0);
    const std::vector<double> int8_scores = parse_scores(r8.out);
    REQUIRE(int8_scores.size() == src.size());
    double largest = 0;
    for (size_t i = 0; i < src.size(); ++i) {
      INFO("pair " << i);
      // 8-bit activations and 7-bit weights move each logit by about a percent of its size.
      CHECK(int8_scores[i] == Approx(scores[i]).epsilon(0.05).margin(0.05));
      largest = std::max(largest, std::fabs(int8_scores[i] - scores[i]));
    }
    CHECK(largest > 0.0);
  }
  SECTION("a pair longer than the model's positions: exit 1 naming the line") {
    std::string long_line;
    for (int i = 0; i < 60; ++i) long_line += (i ? " " : "") + kWords[size_t(i) % kWords.size()];
    tgt[6] = long_line;
    std::ofstream(f.dir.file("tgt.txt")) << join_lines(tgt);
    Run too_long = run(f.dir, TX_SCORE_BIN, args);
    CHECK(too_long.status == 1);
    CHECK(too_long.out.empty());
    CHECK(one_line(too_long.err));
    CHECK_THAT(too_long.err, Contains("line 7"));
  }
}

TEST_CASE("tx-translate and tx-score: -m A B is an ensemble with --weights", "[apps][ensemble]") {
  Fixture f;
  // A second random model over the same vocabulary.
  tx::nn::ParameterSet params_b;
  tx::Rng rng_b(29);
  tx::nn::Transformer model_b(tx::nn::ParamScope(*f.be, params_b, rng_b), f.config);
  tx::test::perturb_params(*f.be, params_b, rng_b);
  const std::string model_b_path = f.dir.file("model_b.safetensors");
  tx::train::save_model(model_b_path, *f.be, f.config, params_b);
  const std::string vocabs = " -v " + f.vocab_path + " " + f.vocab_path;
  tx::Rng rng(17);
  const std::vector<std::string> src = sentences(rng, 12, 6), tgt = sentences(rng, 12, 7);
  std::ofstream(f.dir.file("src.txt")) << join_lines(src);
  std::ofstream(f.dir.file("tgt.txt")) << join_lines(tgt);
  const std::string in = " < " + f.dir.file("src.txt");

  SECTION("a model with itself translates as the model alone, n-best scores included") {
    const std::string flags = vocabs + " --beam-size 3 --n-best 3 --quiet";
    Run one = run(f.dir, TX_TRANSLATE_BIN, "-m " + f.model_path + flags + in);
    Run two = run(f.dir, TX_TRANSLATE_BIN, "-m " + f.model_path + " " + f.model_path + flags + in);
    REQUIRE(one.status == 0);
    REQUIRE(two.status == 0);
    CHECK(split_lines(one.out).size() == 3 * src.size());
    // The same lines, each model's log-prob (F0, F1) that of the model alone.
    std::string want;
    for (const std::string& line : split_lines(one.out)) {
      const size_t f0 = line.find(" F0= "), end = line.find(" |||", f0);
      REQUIRE(end != std::string::npos);
      const std::string log_prob = line.substr(f0 + 5, end - f0 - 5);
      want += line.substr(0, end) + " F1= " + log_prob + line.substr(end) + "\n";
    }
    CHECK(two.out == want);
  }
  SECTION("tx-score: the weighted sum of each model's teacher-forced log-prob") {
    Run r = run(f.dir, TX_SCORE_BIN,
                "-m " + f.model_path + " " + model_b_path + vocabs + " --weights 0.3 0.9 --src " +
                    f.dir.file("src.txt") + " --tgt " + f.dir.file("tgt.txt") + " --quiet");
    REQUIRE(r.status == 0);
    const std::vector<double> scores = parse_scores(r.out);
    REQUIRE(scores.size() == src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      INFO("pair " << i);
      const double lp_a = teacher_forced_log_prob(f, src[i], tgt[i]);
      std::swap(f.model, model_b);  // the reference runs model B through the same fixture
      const double lp_b = teacher_forced_log_prob(f, src[i], tgt[i]);
      std::swap(f.model, model_b);
      CHECK(scores[i] == Approx(0.3 * lp_a + 0.9 * lp_b).margin(1e-4));
      CHECK(std::abs(lp_a - lp_b) > 1e-3);  // two different models: the weights matter
    }
  }
  SECTION("tx-translate: the library's ensemble search (decode_test holds it to a host loop)") {
    const std::string models = "-m " + f.model_path + " " + model_b_path + vocabs +
                               " --weights 0.3 0.9 --beam-size 3 --n-best 3 --quiet";
    Run r = run(f.dir, TX_TRANSLATE_BIN, models + in);
    REQUIRE(r.status == 0);
    tx::decode::TranslatorOptions o;
    o.search.beam_size = o.search.n_best = 3;
    f.model.prepare_inference(*f.be, tx::ops::WeightForm::f32);
    model_b.prepare_inference(*f.be, tx::ops::WeightForm::f32);
    tx::decode::Translator tr(*f.be, {&f.model, &model_b}, *f.vocab, *f.vocab, o, {0.3f, 0.9f});
    std::istringstream text(join_lines(src));
    std::ostringstream want;
    tr.translate_stream(text, want);
    CHECK(r.out == want.str());
    // The same models with other weights search otherwise.
    Run other = run(f.dir, TX_TRANSLATE_BIN,
                    "-m " + f.model_path + " " + model_b_path + vocabs +
                        " --weights 0.9 0.3 --beam-size 3 --n-best 3 --quiet" + in);
    REQUIRE(other.status == 0);
    CHECK(other.out != r.out);
  }
  SECTION("--weights: a count other than the models' or a non-number, one line, exit 2") {
    for (const std::string& weights :
         {std::string(" --weights 1"), std::string(" --weights 1 x"),
          std::string(" --weights 1 2 3"), std::string(" --weights 1e28 1"),
          std::string(" --weights 1 -2e6"), std::string(" --weights 1 1e-45")}) {
      INFO(weights);
      Run r = run(f.dir, TX_TRANSLATE_BIN,
                  "-m " + f.model_path + " " + model_b_path + vocabs + weights + in);
      CHECK(r.status == 2);
      CHECK(r.out.empty());
      CHECK(one_line(r.err));
      CHECK_THAT(r.err, Contains("--weights"));
    }
  }
  SECTION("--weights: none above 0 is refused; 0 or below beside a positive one is said") {
    for (const char* program : {TX_TRANSLATE_BIN, TX_SCORE_BIN}) {
      for (const std::string& weights :
           {std::string(" --weights 0 0"), std::string(" --weights -1 0"),
            std::string(" --weights -1")}) {
        INFO(program << weights);
        const std::string models = weights == " --weights -1"
                                       ? "-m " + f.model_path
                                       : "-m " + f.model_path + " " + model_b_path;
        const std::string data =
            program == std::string(TX_SCORE_BIN)
                ? " --src " + f.dir.file("src.txt") + " --tgt " + f.dir.file("src.txt")
                : in;
        Run r = run(f.dir, program, models + vocabs + weights + data);
        CHECK(r.status == 2);
        CHECK(r.out.empty());
        CHECK(one_line(r.err));
        CHECK_THAT(r.err, Contains("no weight is above 0"));
      }
    }
    Run r = run(f.dir, TX_TRANSLATE_BIN,
                "-m " + f.model_path + " " + model_b_path + vocabs + " --weights 1 0" + in);
    CHECK(r.status == 0);
    CHECK_THAT(r.err, Contains(model_b_path + " has weight 0: it is run but has no say"));
    // A model of weight 0 changes nothing: the first alone.
    CHECK(r.out == run(f.dir, TX_TRANSLATE_BIN, f.model_args() + " --quiet" + in).out);
  }
}

TEST_CASE("shortlist: Marian's lex.s2t read through the vocabularies, and --shortlist",
          "[apps][shortlist]") {
  Fixture f;
  const tx::data::Vocab& v = *f.vocab;
  const int32_t a = 10, b = 11, c = 12, d = 13;  // pieces of the vocabulary
  std::ofstream(f.dir.file("lex.s2t"))
      << v.piece(b) << " " << v.piece(a) << " 0.2\n"
      << v.piece(c) << " " << v.piece(a) << " 0.7\n"
      << v.piece(d) << " " << v.piece(a) << " 0.1\n"
      << "\n"
      << "unknownword " << v.piece(a) << " 0.05\n"  // not in the vocabulary: unk, as Marian
      << v.piece(a) << " " << v.piece(b) << " 1\n"
      << v.piece(b) << " " << v.piece(a) << " 0.8\n"  // a repeated pair: the last line wins
      << v.piece(d) << " " << v.piece(a) << " 0\n";   // probability 0: left out
  const tx::decode::LexicalShortlist list(f.dir.file("lex.s2t"), v, v, 3, 2, false);
  CHECK(list.pairs() == 4);  // a: b, c, unk; b: a
  CHECK(list.always() == std::vector<int32_t>{0, 1, 2, v.eos_id()});
  std::vector<int32_t> got;
  list.add_translations({a, b, 30}, got);
  CHECK(got == std::vector<int32_t>{b, c, a});  // a's best two by probability, then b's
  // One vocabulary for both sides: the source pieces themselves are candidates too.
  const tx::decode::LexicalShortlist shared(f.dir.file("lex.s2t"), v, v, 3, 2, true);
  got.clear();
  shared.add_translations({a, b}, got);
  CHECK(got == std::vector<int32_t>{a, b, b, c, a});
  // Equal probabilities: the higher id first (Marian's order).
  std::ofstream(f.dir.file("ties.s2t")) << v.piece(b) << " " << v.piece(a) << " 0.5\n"
                                        << v.piece(d) << " " << v.piece(a) << " 0.5\n"
                                        << v.piece(c) << " " << v.piece(a) << " 0.5\n";
  got.clear();
  tx::decode::LexicalShortlist(f.dir.file("ties.s2t"), v, v, 0, 2, false)
      .add_translations({a}, got);
  CHECK(got == std::vector<int32_t>{d, c});

  std::ofstream(f.dir.file("bad.s2t")) << v.piece(a) << " " << v.piece(b) << " 0.5\nx y\n";
  CHECK_THROWS_WITH(tx::decode::LexicalShortlist(f.dir.file("bad.s2t"), v, v, 3, 2, false),
                    Contains("line 2") && Contains("lex.s2t"));
  std::ofstream(f.dir.file("foreign.s2t")) << "foo bar 0.5\n";
  CHECK_THROWS_WITH(tx::decode::LexicalShortlist(f.dir.file("foreign.s2t"), v, v, 3, 2, false),
                    Contains("no pair of words the vocabularies know"));

  tx::Rng rng(21);
  std::ofstream(f.dir.file("in.txt")) << join_lines(sentences(rng, 10, 6));
  const std::string flags = f.model_args() + " --beam-size 3 --quiet < " + f.dir.file("in.txt");
  Run full = run(f.dir, TX_TRANSLATE_BIN, flags);
  REQUIRE(full.status == 0);
  // The whole vocabulary as FIRST: the full search's lines.
  Run everything =
      run(f.dir, TX_TRANSLATE_BIN, "--shortlist " + f.dir.file("lex.s2t") + " 1000 0 " + flags);
  INFO(everything.err);
  REQUIRE(everything.status == 0);
  CHECK(everything.out == full.out);
  // A real restriction: the library's search with the same shortlist.
  Run listed =
      run(f.dir, TX_TRANSLATE_BIN, "--shortlist " + f.dir.file("lex.s2t") + " 8 2 " + flags);
  REQUIRE(listed.status == 0);
  CHECK(listed.out != full.out);
  tx::decode::TranslatorOptions o;
  o.search.beam_size = 3;
  const tx::decode::LexicalShortlist same(f.dir.file("lex.s2t"), v, v, 8, 2, true);
  o.search.shortlist = &same;
  f.model.prepare_inference(*f.be, tx::ops::WeightForm::f32);
  tx::decode::Translator tr(*f.be, f.model, v, v, o);
  std::ifstream in(f.dir.file("in.txt"));
  std::ostringstream want;
  tr.translate_stream(in, want);
  CHECK(listed.out == want.str());
  for (const std::string& bad : {std::string(" x"), std::string(" 1 2 3"), std::string(" -1")}) {
    Run r =
        run(f.dir, TX_TRANSLATE_BIN, "--shortlist " + f.dir.file("lex.s2t") + bad + " " + flags);
    INFO(bad);
    CHECK(r.status == 2);
    CHECK(one_line(r.err));
  }
}

TEST_CASE("tx-translate bounds OpenMP spinning unless the user chose a policy",
          "[apps][translate]") {
  Fixture f;
  std::ofstream(f.dir.file("in.txt")) << "das Haus\n";
  const std::string args = f.model_args() + " --verbose -i " + f.dir.file("in.txt");
  // No setting: GOMP_SPINCOUNT=1000 is in place before libgomp loads, as libgomp itself
  // says (OMP_DISPLAY_ENV lists the settings it read when it loaded).
  Run bounded = run(f.dir,
                    "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose " +
                        std::string(TX_TRANSLATE_BIN),
                    args);
  CHECK(bounded.status == 0);
  CHECK_THAT(bounded.err, Contains("OpenMP idle threads: GOMP_SPINCOUNT=1000"));
  CHECK_THAT(bounded.err, Contains("GOMP_SPINCOUNT = '1000'"));
  // The user's choice stands.
  Run chosen = run(
      f.dir, "env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=active " + std::string(TX_TRANSLATE_BIN), args);
  CHECK(chosen.status == 0);
  CHECK_THAT(chosen.err, Contains("OpenMP idle threads: OMP_WAIT_POLICY=active"));
  CHECK(chosen.out == bounded.out);
}

TEST_CASE("tx-translate and tx-score: flag values at their limits, a NaN weight, a lost output",
          "[apps][translate][score]") {
  Fixture f;
  tx::Rng rng(23);
  const std::vector<std::string> src = sentences(rng, 6, 6);
  std::ofstream(f.dir.file("src.txt")) << join_lines(src);
  const std::string in = " --quiet < " + f.dir.file("src.txt");
  Run base = run(f.dir, TX_TRANSLATE_BIN, f.model_args() + in);
  REQUIRE(base.status == 0);
  REQUIRE(split_lines(base.out).size() == src.size());

  SECTION("windows of batches far beyond any input: every line, translated as by default") {
    for (const std::string flags :
         {" --max-tokens 100000000000000000", " --maxi-batch 3000000000000000",
          " --mini-batch 3000000000000000000 --maxi-batch 10"}) {
      INFO(flags);
      Run r = run(f.dir, TX_TRANSLATE_BIN, f.model_args() + flags + in);
      CHECK(r.status == 0);
      CHECK(r.out == base.out);
    }
  }
  SECTION("values no field holds are usage errors (exit 2), named") {
    for (const auto& [flags, named] : std::vector<std::pair<std::string, std::string>>{
             {" -b 4294967297", "--beam-size 4294967297 is beyond 2147483647"},
             {" --cpu-threads 100000", "--cpu-threads"},
             {" -n nan", "--normalize: nan"},
             {" -n 11", "--normalize: 11"},
             {" --max-length-factor inf", "--max-length-factor: inf"}}) {
      INFO(flags);
      Run r = run(f.dir, TX_TRANSLATE_BIN, f.model_args() + flags + in);
      CHECK(r.status == 2);
      CHECK(r.out.empty());
      CHECK(one_line(r.err));
      CHECK_THAT(r.err, Contains(named));
    }
  }
  SECTION("a --min-length past the model's positions is refused; a huge factor is capped") {
    Run r = run(f.dir, TX_TRANSLATE_BIN, f.model_args() + " --min-length 40" + in);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Contains("--min-length 40") && Contains("39 output tokens"));
    Run huge = run(f.dir, TX_TRANSLATE_BIN, f.model_args() + " --max-length-factor 1e30" + in);
    Run capped = run(f.dir, TX_TRANSLATE_BIN, f.model_args() + " --max-length-factor 100" + in);
    CHECK(huge.status == 0);
    CHECK(huge.out == capped.out);
  }
  SECTION("sampling at a temperature near 0 is greedy search") {
    // At 1 / T ~ 1e9 the rounding of x / T alone once underflowed every probability (NaN).
    Run greedy = run(f.dir, TX_TRANSLATE_BIN, f.model_args() + " -b 1" + in);
    Run cold = run(f.dir, TX_TRANSLATE_BIN, f.model_args() + " --output-sampling full 1e-9" + in);
    CHECK(cold.status == 0);
    CHECK(cold.out == greedy.out);
    // Below float's normal range 1 / T was infinite, and every line came out empty.
    for (const char* t : {"1e-40", "1e-300"}) {
      Run colder =
          run(f.dir, TX_TRANSLATE_BIN, f.model_args() + " --output-sampling full " + t + in);
      INFO(t);
      CHECK(colder.status == 0);
      CHECK(colder.out == greedy.out);
    }
    // Beyond float's range: named as written, not as the infinity it would become.
    Run hot = run(f.dir, TX_TRANSLATE_BIN, f.model_args() + " --output-sampling full 1e39" + in);
    CHECK(hot.status == 2);
    CHECK_THAT(hot.err, Contains("temperature 1e39 must lie in (0, 1e30]"));
  }
  SECTION("one model's --weights scales its n-best scores, as tx-score's") {
    const std::string nbest = " --beam-size 2 --n-best 2";
    Run plain = run(f.dir, TX_TRANSLATE_BIN, f.model_args() + nbest + in);
    Run twice = run(f.dir, TX_TRANSLATE_BIN, f.model_args() + nbest + " --weights 2" + in);
    REQUIRE(plain.status == 0);
    REQUIRE(twice.status == 0);
    const std::vector<std::string> a = split_lines(plain.out), b = split_lines(twice.out);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const size_t ea = a[i].rfind("||| "), eb = b[i].rfind("||| ");
      CHECK(a[i].substr(0, ea) == b[i].substr(0, eb));  // text and F0 (the model's log-prob)
      CHECK(std::stod(b[i].substr(eb + 4)) == Approx(2 * std::stod(a[i].substr(ea + 4))));
    }
  }
  SECTION("tx-score: a full disk is an error, and stdin is read from where it stands") {
    std::ofstream(f.dir.file("two.txt")) << "skipped line\nein Haus ist klein und alt\n";
    std::ofstream(f.dir.file("ref.txt")) << "ein Haus ist klein und alt\n";
    // The group's own redirection wins over run_program's.
    Run full = run(f.dir,
                   "{ " + std::string(TX_SCORE_BIN) + " -r " + f.dir.file("ref.txt") + " -i " +
                       f.dir.file("ref.txt") + " > /dev/full; }",
                   "");
    CHECK(full.status == 1);
    CHECK_THAT(full.err, Contains("cannot write the output"));
    // The shell reads the first line; tx-score the rest: one hypothesis, a perfect match.
    Run rest = run(f.dir,
                   "{ read -r skipped; " + std::string(TX_SCORE_BIN) + " -r " +
                       f.dir.file("ref.txt") + " --score-only; }",
                   "< " + f.dir.file("two.txt"));
    CHECK(rest.status == 0);
    CHECK(rest.out == "100.00\n");
  }
  SECTION("a model file with a NaN weight is refused at load, naming the tensor") {
    const auto& [name, param] = f.params.items().back();
    f.be->fill(param->value, std::nanf(""));
    const std::string bad = f.dir.file("nan.safetensors");
    tx::train::save_model(bad, *f.be, f.config, f.params);
    Run r =
        run(f.dir, TX_TRANSLATE_BIN, "-m " + bad + " -v " + f.vocab_path + " " + f.vocab_path + in);
    CHECK(r.status == 1);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Contains(name) && Contains("nan"));
  }
}
