// fairseq Transformers, converted by scripts/to_safetensors.py and read in place
// (formats/fairseq.cc), against fairseq itself: the fixtures in tests/fixtures/fairseq were
// trained and translated by fairseq (make.py there; its README.md says how), so these tests
// compare tx with fairseq-interactive, never with tx.
#include <sentencepiece_processor.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/vocab.h"
#include "formats/model_file.h"
#include "support/files.h"
#include "support/programs.h"

namespace {

using namespace tx::test;

std::string fixture(const std::string& rel) {
  return std::string(TX_SOURCE_DIR) + "/tests/fixtures/fairseq/" + rel;
}

struct Variant {
  const char* dir;
  bool raw_text;  // the directory names a SentencePiece model: both engines read plain text
};

const Variant kVariants[] = {
    {"post-relu-shared", true},
    {"pre-relu-tiedtrg", false},
    {"post-relu-untied", true},
};

// fairseq-generate's length limit and length penalty, as the fixtures ran them.
const char* kSearch = " --max-length-factor 0 --max-length-b 200 --normalize 1 --cpu-threads 1";

// The first 40 lines of test2016.en as make.py's clean_copy wrote them (no-break spaces made
// plain).
const std::vector<std::string>& source_lines() {
  static const std::vector<std::string> lines = [] {
    std::vector<std::string> out = tx::test::test2016_head(40);
    for (std::string& line : out)
      for (size_t at; (at = line.find("\xc2\xa0")) != std::string::npos;) line.replace(at, 2, " ");
    return out;
  }();
  return lines;
}

// The input as fairseq-interactive read it: the text, or its pieces (src.spm's segmentation).
std::string input_of(const TempDir& dir, const Variant& v) {
  std::string text;
  sentencepiece::SentencePieceProcessor sp;
  if (!v.raw_text) REQUIRE(sp.Load(fixture(std::string(v.dir) + "/src.spm")).ok());
  for (std::string line : source_lines()) {
    std::replace(line.begin(), line.end(), '\t', ' ');
    if (v.raw_text) {
      text += line + "\n";
      continue;
    }
    std::vector<std::string> pieces;
    REQUIRE(sp.Encode(line, &pieces).ok());
    for (size_t i = 0; i < pieces.size(); ++i) text += (i ? " " : "") + pieces[i];
    text += "\n";
  }
  const std::string path = dir.file(std::string("input.") + v.dir);
  write_file(path, text);
  return path;
}

struct Hypothesis {
  std::string text;  // what tx prints: detokenized with a SentencePiece model, else the pieces
  double score = 0;  // natural log, length-normalised as fairseq's --lenpen 1
};

std::vector<std::vector<Hypothesis>> fairseq_output(const Variant& v, const std::string& label) {
  const nlohmann::json j =
      nlohmann::json::parse(slurp(fixture(std::string(v.dir) + "/fairseq." + label + ".json")));
  std::vector<std::vector<Hypothesis>> out;
  for (const auto& line : j.at("hypotheses")) {
    out.emplace_back();
    for (const auto& h : line)
      out.back().push_back(
          {h.at(v.raw_text ? "text" : "pieces").get<std::string>(), h.at("score").get<double>()});
  }
  return out;
}

// Marian's n-best lines as tx prints them: "id ||| text ||| F0= x ||| score".
std::vector<std::pair<int, Hypothesis>> read_nbest(const std::string& text) {
  std::vector<std::pair<int, Hypothesis>> out;
  for (const std::string& line : split_lines(text)) {
    const size_t a = line.find(" ||| "), b = line.find(" ||| ", a + 5),
                 c = line.find(" ||| ", b + 5);
    REQUIRE(c != std::string::npos);
    out.push_back(
        {std::atoi(line.substr(0, a).c_str()),
         {line.substr(a + 5, b - a - 5), std::strtod(line.substr(c + 5).c_str(), nullptr)}});
  }
  return out;
}

}  // namespace

#define TX_SOURCE_OR_SKIP() TX_TEST2016_OR_SKIP(source_lines())

TEST_CASE("fairseq models: tx-translate's 4-best lists equal fairseq-interactive's", "[import]") {
  TempDir dir;
  TX_SOURCE_OR_SKIP();
  for (const Variant& v : kVariants) {
    INFO("fixture " << v.dir);
    Run r = run_program(
        dir, TX_TRANSLATE_BIN,
        "-m " + fixture(v.dir) + kSearch + " --beam-size 4 --n-best 4 < " + input_of(dir, v));
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto want = fairseq_output(v, "beam4");
    const auto got = read_nbest(r.out);
    REQUIRE(want.size() == source_lines().size());
    size_t k = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      for (const Hypothesis& w : want[i]) {
        REQUIRE(k < got.size());
        INFO("line " << i << ": fairseq '" << w.text << "' " << w.score << ", tx '"
                     << got[k].second.text << "' " << got[k].second.score);
        CHECK(got[k].first == static_cast<int>(i));
        CHECK(got[k].second.text == w.text);
        CHECK(std::abs(got[k].second.score - w.score) <= 1e-4);
        ++k;
      }
    }
    CHECK(k == got.size());
  }
}

TEST_CASE("fairseq models: tx-translate's greedy lines equal fairseq-interactive's", "[import]") {
  TempDir dir;
  TX_SOURCE_OR_SKIP();
  for (const Variant& v : kVariants) {
    INFO("fixture " << v.dir);
    Run r = run_program(dir, TX_TRANSLATE_BIN,
                        "-m " + fixture(v.dir) + kSearch + " --beam-size 1 < " + input_of(dir, v));
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto want = fairseq_output(v, "greedy");
    const std::vector<std::string> got = split_lines(r.out);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("line " << i);
      CHECK(got[i] == want[i].front().text);
    }
  }
}

TEST_CASE("fairseq dictionary: fairseq's ids, whitespace tokens, overwrite, errors", "[import]") {
  TempDir dir;
  write_file(dir.file("dict.txt"),
             "der 10\nHaus 7\n\xe2\x96\x81"
             "a 3\n<unk> 0 #fairseq:overwrite\nmadeupword0000 0\n");
  const tx::data::Vocab v = tx::data::Vocab::fairseq(dir.file("dict.txt"));
  // <s> <pad> </s> <unk>, then the file's lines; the overwritten <unk> takes a new id (7) as in
  // fairseq, whose unknown words still map to 3.
  CHECK(v.size() == 9);
  CHECK(v.bos_id() == 0);
  CHECK(v.pad_id() == 1);
  CHECK(v.eos_id() == 2);
  CHECK(v.unk_id() == 3);
  CHECK(v.encode("der  Haus\tHund <unk>") == std::vector<int32_t>{4, 5, 3, 7});
  CHECK(v.decode(std::vector<int32_t>{4, 5, 3, 2}) == "der Haus <unk>");
  auto error_of = [&](const std::string& text) {
    write_file(dir.file("bad.txt"), text);
    try {
      tx::data::Vocab::fairseq(dir.file("bad.txt"));
    } catch (const tx::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of("der 10\nder 3\n"), Catch::Contains("line 2: 'der' is a duplicate"));
  CHECK_THAT(error_of("der\n"), Catch::Contains("line 1: expected \"token count\""));
  CHECK_THAT(error_of("der ten\n"), Catch::Contains("the count 'ten' is not a number"));
}

TEST_CASE("fairseq models: a user's mistakes are one line naming the problem and the fix",
          "[import]") {
  TempDir dir;
  // A converted directory without its dictionary, and one given -v.
  const std::string copy = dir.file("model");
  std::filesystem::create_directory(copy);
  for (const char* f : {"fairseq.json", "model.safetensors"})
    std::filesystem::copy_file(fixture(std::string("post-relu-shared/") + f), copy + "/" + f);
  Run r = run_program(dir, TX_TRANSLATE_BIN, "-m " + copy + " < /dev/null");
  CHECK(r.status != 0);
  CHECK(one_line(r.err));
  CHECK_THAT(r.err, Catch::Contains("has no dict.en.txt") && Catch::Contains("copy the model's"));
  r = run_program(dir, TX_TRANSLATE_BIN,
                  "-m " + fixture("post-relu-shared") + " -v a.spm < /dev/null");
  CHECK(r.status != 0);
  CHECK(one_line(r.err));
  CHECK_THAT(r.err, Catch::Contains("brings its own") && Catch::Contains("leave -v out"));
  // An architecture tx does not implement: learned positions.
  nlohmann::json j = nlohmann::json::parse(slurp(fixture("post-relu-shared/fairseq.json")));
  j["model"]["encoder_learned_pos"] = true;
  write_file(copy + "/fairseq.json", j.dump());
  std::filesystem::copy_file(fixture("post-relu-shared/dict.en.txt"), copy + "/dict.en.txt");
  r = run_program(dir, TX_TRANSLATE_BIN, "-m " + copy + " < /dev/null");
  CHECK(r.status != 0);
  CHECK(one_line(r.err));
  CHECK_THAT(r.err, Catch::Contains("learned positional embeddings") &&
                        Catch::Contains("does not implement"));
  // LayerDrop's pruning at load: fairseq would run fewer layers than the weights hold.
  j["model"]["encoder_learned_pos"] = false;
  j["model"]["decoder_layers_to_keep"] = "0";
  write_file(copy + "/fairseq.json", j.dump());
  r = run_program(dir, TX_TRANSLATE_BIN, "-m " + copy + " < /dev/null");
  CHECK(r.status != 0);
  CHECK(one_line(r.err));
  CHECK_THAT(r.err,
             Catch::Contains("--decoder-layers-to-keep") && Catch::Contains("does not implement"));
}

TEST_CASE("fairseq models: options fairseq would read otherwise than the tensors are refused",
          "[import]") {
  TempDir dir;
  // A copy of fixture `from` whose fairseq.json's model options `edit` changes.
  auto edited = [&](const std::string& from, const std::string& name,
                    const std::function<void(nlohmann::json&)>& edit) {
    const std::string copy = dir.file(name);
    std::filesystem::copy(fixture(from), copy);
    nlohmann::json j = nlohmann::json::parse(slurp(copy + "/fairseq.json"));
    edit(j["model"]);
    write_file(copy + "/fairseq.json", j.dump());
    return copy;
  };
  auto refused = [](const std::string& path, const std::string& why) {
    CHECK_THROWS_WITH(tx::formats::read_model_file(path), Catch::Contains(why));
  };
  // Tied by the options, two different tensors in the file: fairseq's one Parameter would hold
  // the one loaded last.
  refused(edited("post-relu-untied", "shared-output",
                 [](nlohmann::json& m) { m["share_decoder_input_output_embed"] = true; }),
          "tensor 'decoder.output_projection.weight' differs from 'decoder.embed_tokens.weight'");
  // fairseq's build_model refuses shared embeddings over two dictionaries.
  refused(edited("pre-relu-tiedtrg", "shared-all",
                 [](nlohmann::json& m) { m["share_all_embeddings"] = true; }),
          "share_all_embeddings joins the two dictionaries");
  // base_architecture's decoder heads are 8, not the encoder's 4.
  refused(edited("post-relu-untied", "no-decoder-heads",
                 [](nlohmann::json& m) { m.erase("decoder_attention_heads"); }),
          "decoder heads or feed-forward size other than the encoder's");
  CHECK(tx::formats::read_model_file(edited("post-relu-untied", "as-is", [](nlohmann::json&) {
        })).config.heads == 4);
}
