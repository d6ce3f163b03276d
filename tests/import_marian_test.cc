// Models made elsewhere, read in place (formats/), against the engines that made them: the
// fixtures in tests/fixtures/marian were trained and translated by pymarian, and converted and
// run by transformers (make.py there; its README.md says how), so these tests compare tx with
// marian-decoder and generate(), never with tx.
#include <sentencepiece_processor.h>
#include <zip.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "core/half.h"
#include "data/vocab.h"
#include "formats/model_file.h"
#include "formats/npz.h"
#include "graph/graph.h"
#include "io/safetensors.h"
#include "nn/parameters.h"
#include "nn/transformer.h"
#include "support/files.h"
#include "support/peak_rss.h"
#include "support/programs.h"
#include "support/train_runs.h"

namespace {

using namespace tx::test;

std::string fixture(const std::string& rel) {
  return std::string(TX_SOURCE_DIR) + "/tests/fixtures/marian/" + rel;
}

struct Entry {
  std::string id, text;
  double score = 0;
  std::vector<double> features;  // F0= x F1= y ...: one log-prob per model
};

// Marian's n-best lines: "id ||| text ||| F0= x ||| score".
std::vector<Entry> read_nbest(const std::string& text) {
  std::vector<Entry> out;
  for (const std::string& line : split_lines(text)) {
    std::vector<std::string> f;
    size_t at = 0;
    while (true) {
      const size_t bar = line.find(" ||| ", at);
      f.push_back(line.substr(at, bar == std::string::npos ? std::string::npos : bar - at));
      if (bar == std::string::npos) break;
      at = bar + 5;
    }
    REQUIRE(f.size() == 4);
    std::vector<double> features;
    std::istringstream in(f[2]);
    for (std::string name, value; in >> name >> value;)
      features.push_back(std::strtod(value.c_str(), nullptr));
    out.push_back({f[0], f[1], std::strtod(f[3].c_str(), nullptr), features});
  }
  return out;
}

// One Marian fixture: the model, its vocabularies (source target) and how its input was made.
struct Variant {
  const char* dir;
  const char* vocabs;   // relative to dir; empty: the model's decoder.yml names them
  const char* segment;  // the SentencePiece model that segmented its input (.yml vocabularies,
                        // as OPUS-MT's pipeline), relative to the fixtures; empty: raw text
};

const Variant kVariants[] = {
    {"post-relu-tiedall", "vocab.spm vocab.spm", ""},
    {"pre-swish-tiedtrg", "src.spm trg.spm", ""},
    {"post-swish-untied-embn", "src.yml trg.yml", "post-swish-untied-embn/src.spm"},
    {"opus-mt/marian", "", "opus-mt/marian/source.spm"},
};

std::string model_flags(const Variant& v) {
  std::string flags = "-m " + fixture(std::string(v.dir) + "/model.npz");
  if (*v.vocabs) {
    flags += " -v";
    std::string words = v.vocabs;
    size_t at = 0;
    while (at < words.size()) {
      const size_t space = words.find(' ', at);
      flags += " " + fixture(std::string(v.dir) + "/" + words.substr(at, space - at));
      if (space == std::string::npos) break;
      at = space + 1;
    }
  }
  // marian-decoder's search as the fixtures ran it: --normalize 0, --max-length-factor 3.
  return flags + " --normalize 0 --max-length-factor 3 --cpu-threads 1";
}

// The directory of a variant's expected outputs (opus-mt keeps them beside marian/).
std::string outputs_of(const Variant& v) {
  std::string dir = v.dir;
  const size_t slash = dir.find('/');
  return fixture(slash == std::string::npos ? dir : dir.substr(0, slash));
}

// The fixtures' input: the first 40 lines of test2016.en.
const std::vector<std::string>& source_lines() {
  static const std::vector<std::string> lines = tx::test::test2016_head(40);
  return lines;
}

// `v`'s input written into `dir`: the text, or its pieces joined by spaces as `v.segment`
// segments them (spm_encode's output, which the fixture's Marian model was given).
std::string input_of(const TempDir& dir, const Variant& v) {
  std::string text;
  sentencepiece::SentencePieceProcessor sp;
  if (*v.segment) REQUIRE(sp.Load(fixture(v.segment)).ok());
  for (const std::string& line : source_lines()) {
    if (!*v.segment) {
      text += line + "\n";
      continue;
    }
    std::vector<std::string> pieces;
    REQUIRE(sp.Encode(line, &pieces).ok());
    for (size_t i = 0; i < pieces.size(); ++i) text += (i ? " " : "") + pieces[i];
    text += "\n";
  }
  const std::string path = dir.file(std::string("input.") + (*v.segment ? "pieces" : "txt"));
  write_file(path, text);
  return path;
}

// tx-translate's n-best output `out` against marian-decoder's 4-best lists of `v`: the same
// entries, and scores within Marian's printed precision (6 significant digits).
void check_marian_nbest(const std::string& out, const Variant& v) {
  const std::vector<Entry> want = read_nbest(slurp(outputs_of(v) + "/marian.beam4.nbest"));
  const std::vector<Entry> got = read_nbest(out);
  REQUIRE_FALSE(want.empty());
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("entry " << i << ": marian '" << want[i].text << "' " << want[i].score << ", tx '"
                  << got[i].text << "' " << got[i].score);
    CHECK(got[i].id == want[i].id);
    CHECK(got[i].text == want[i].text);
    CHECK(std::abs(got[i].score - want[i].score) <= 1e-4 + 5e-6 * std::abs(want[i].score));
  }
}

// An .npy file (version 1) of dtype `descr` and `shape` holding `data`.
std::vector<uint8_t> npy(const std::string& descr, const std::vector<int64_t>& shape,
                         const std::vector<uint8_t>& data) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  header.resize((header.size() + 11 + 63) / 64 * 64 - 11, ' ');  // numpy's 64-byte alignment
  header += '\n';
  std::vector<uint8_t> out = {0x93,
                              'N',
                              'U',
                              'M',
                              'P',
                              'Y',
                              1,
                              0,
                              static_cast<uint8_t>(header.size() & 255),
                              static_cast<uint8_t>(header.size() >> 8)};
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// `arrays` written as an .npz at `path`: stored entries, as Marian writes them, or deflated (as
// numpy.savez_compressed).
void write_npz(const std::string& path, const std::vector<tx::formats::NpyArray>& arrays,
               bool deflate = false) {
  int code = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  REQUIRE(z);
  std::vector<std::vector<uint8_t>> files;  // alive until zip_close
  files.reserve(arrays.size());
  for (const tx::formats::NpyArray& a : arrays) {
    files.push_back(npy(a.descr, a.shape, a.data));
    zip_source_t* src = zip_source_buffer(z, files.back().data(), files.back().size(), 0);
    REQUIRE(src);
    const zip_int64_t index = zip_file_add(z, (a.name + ".npy").c_str(), src, ZIP_FL_ENC_UTF_8);
    REQUIRE(index >= 0);
    if (deflate) REQUIRE(zip_set_file_compression(z, index, ZIP_CM_DEFLATE, 9) == 0);
  }
  REQUIRE(zip_close(z) == 0);
}

// `arrays`' special:model.yml passed through `edit` (NUL-terminated, as marian writes it).
void edit_model_yml(std::vector<tx::formats::NpyArray>& arrays,
                    const std::function<void(std::string&)>& edit) {
  for (tx::formats::NpyArray& a : arrays)
    if (a.name == "special:model.yml") {
      std::string yml = a.text();
      edit(yml);
      a.data.assign(yml.begin(), yml.end());
      a.data.push_back(0);
      a.shape = {static_cast<int64_t>(a.data.size())};
    }
}

}  // namespace

#define TX_SOURCE_OR_SKIP() TX_TEST2016_OR_SKIP(source_lines())

TEST_CASE("Marian models: float16 arrays read as the float32 values they widen to", "[import]") {
  // Marian writes float32, but an .npz of float16 arrays (numpy's '<f2') is read too: each
  // array widened exactly. The fixture's weights rounded to float16 are written twice, as
  // float16 and as their float32 values; both must translate to the same n-best lists.
  TempDir dir;
  TX_SOURCE_OR_SKIP();
  const Variant& v = kVariants[2];  // untied embeddings, swish: every kind of array
  std::vector<tx::formats::NpyArray> half =
      tx::formats::read_npz(fixture(std::string(v.dir) + "/model.npz"));
  std::vector<tx::formats::NpyArray> wide = half;
  size_t converted = 0;
  for (size_t i = 0; i < half.size(); ++i) {
    if (half[i].descr != "<f4") continue;
    const std::vector<float> f = half[i].floats();
    half[i].descr = "<f2";
    half[i].data.resize(2 * f.size());
    for (size_t j = 0; j < f.size(); ++j) {
      const uint16_t h = tx::float_to_f16(f[j]);
      const float back = tx::f16_to_float(h);
      std::memcpy(half[i].data.data() + 2 * j, &h, 2);
      std::memcpy(wide[i].data.data() + 4 * j, &back, 4);
    }
    ++converted;
  }
  REQUIRE(converted > 10);
  write_npz(dir.file("half.npz"), half);
  write_npz(dir.file("wide.npz"), wide);
  std::string flags = model_flags(v);
  const std::string original = fixture(std::string(v.dir) + "/model.npz");
  flags.replace(flags.find(original), original.size(), "MODEL");
  auto translate = [&](const std::string& model) {
    std::string f = flags;
    f.replace(f.find("MODEL"), 5, model);
    Run r =
        run_program(dir, TX_TRANSLATE_BIN, f + " --beam-size 4 --n-best 4 < " + input_of(dir, v));
    INFO(r.err);
    REQUIRE(r.status == 0);
    return r.out;
  };
  const std::string from_half = translate(dir.file("half.npz"));
  CHECK(read_nbest(from_half).size() == 4 * source_lines().size());
  CHECK(from_half == translate(dir.file("wide.npz")));
  // Not the original's: the rounding shows, so the files are not read as the fixture.
  CHECK(from_half != translate(original));
}

TEST_CASE("npz: a deflated entry reads back, and a damaged one is one error naming it",
          "[import]") {
  TempDir dir;
  tx::formats::NpyArray a;
  a.name = "encoder_l1_ffn_W1";
  a.descr = "<f4";
  a.shape = {64, 32};
  std::vector<float> values(64 * 32);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 7) - 3.0f;
  a.data.resize(values.size() * 4);
  std::memcpy(a.data.data(), values.data(), a.data.size());
  write_npz(dir.file("deflated.npz"), {a}, true);
  const std::vector<tx::formats::NpyArray> back = tx::formats::read_npz(dir.file("deflated.npz"));
  REQUIRE(back.size() == 1);
  CHECK(back[0].floats() == values);
  // Each byte of the deflated stream changed in turn (the entry's data starts after its local
  // header: 30 bytes, the name and the extra field, their lengths at bytes 26 and 28): whatever
  // libzip finds (a CRC or an inflate error), the message names the entry and says it is
  // damaged, and never blames "No error".
  const std::string good = slurp(dir.file("deflated.npz"));
  auto u16 = [&](size_t at) {
    return static_cast<size_t>(static_cast<uint8_t>(good[at])) |
           static_cast<size_t>(static_cast<uint8_t>(good[at + 1])) << 8;
  };
  const size_t start = 30 + u16(26) + u16(28), end = good.find("PK\x01\x02");
  REQUIRE(end != std::string::npos);
  REQUIRE(end > start + 8);
  int damaged = 0;
  for (size_t at = start; at < end; ++at) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    write_file(dir.file("bad.npz"), bad);
    try {
      tx::formats::read_npz(dir.file("bad.npz"));
    } catch (const tx::Error& e) {
      const std::string what = e.what();
      INFO("byte " << at << ": " << what);
      CHECK_THAT(what, Catch::Contains("'encoder_l1_ffn_W1.npy'") && Catch::Contains("damaged"));
      CHECK_THAT(what, !Catch::Contains("No error"));
      ++damaged;
    }
  }
  // A change that leaves a valid stream with the same CRC is possible but rare.
  CHECK(damaged >= static_cast<int>(end - start) - 2);
}

TEST_CASE("npz: an archive holding one name twice is refused, naming it", "[import]") {
  TempDir dir;
  tx::formats::NpyArray a;
  a.descr = "<f4";
  a.shape = {2};
  a.data.assign(8, 0);
  a.name = "decoder_ff_logit_out_b";
  tx::formats::NpyArray b = a;
  b.name = "decoder_ff_logit_out_c";
  write_npz(dir.file("two.npz"), {a, b});
  // libzip writes no name twice: rename the second in its local header and the directory.
  std::string bytes = slurp(dir.file("two.npz"));
  int renamed = 0;
  for (size_t at = bytes.find(b.name); at != std::string::npos; at = bytes.find(b.name, at + 1)) {
    bytes.replace(at, a.name.size(), a.name);
    ++renamed;
  }
  REQUIRE(renamed == 2);
  write_file(dir.file("twice.npz"), bytes);
  CHECK_THROWS_WITH(tx::formats::read_npz(dir.file("twice.npz")),
                    Catch::Contains("holds two arrays named 'decoder_ff_logit_out_b'"));
}

TEST_CASE("Marian models: tx-translate's 4-best lists equal marian-decoder's", "[import]") {
  TempDir dir;
  TX_SOURCE_OR_SKIP();
  for (const Variant& v : kVariants) {
    INFO("fixture " << v.dir);
    Run r = run_program(dir, TX_TRANSLATE_BIN,
                        model_flags(v) + " --beam-size 4 --n-best 4 < " + input_of(dir, v));
    INFO(r.err);
    REQUIRE(r.status == 0);
    check_marian_nbest(r.out, v);
  }
}

TEST_CASE("Marian models: tx-translate's greedy lines equal marian-decoder's", "[import]") {
  TempDir dir;
  TX_SOURCE_OR_SKIP();
  for (const Variant& v : kVariants) {
    INFO("fixture " << v.dir);
    Run r =
        run_program(dir, TX_TRANSLATE_BIN, model_flags(v) + " --beam-size 1 < " + input_of(dir, v));
    INFO(r.err);
    REQUIRE(r.status == 0);
    const std::vector<Entry> want = read_nbest(slurp(outputs_of(v) + "/marian.greedy.nbest"));
    const std::vector<std::string> got = split_lines(r.out);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("line " << i);
      CHECK(got[i] == want[i].text);
    }
  }
}

TEST_CASE("Marian models: eos and unk are the vocabulary's, as marian-decoder takes them",
          "[import]") {
  // vocab-ids/ holds a model over a vocabulary spm_train made with its default ids (</s> 2,
  // <unk> 0; Marian's own put </s> at 0) and marian-decoder's output (make_vocab_ids.py).
  TempDir dir;
  TX_SOURCE_OR_SKIP();
  const std::string vocab = fixture("vocab-ids/vocab.spm");
  const std::string input = input_of(dir, kVariants[0]);
  for (const char* beam : {"4", "1"}) {
    INFO("beam " << beam);
    Run r = run_program(dir, TX_TRANSLATE_BIN,
                        "-m " + fixture("vocab-ids/model.npz") + " -v " + vocab + " " + vocab +
                            " --normalize 0 --max-length-factor 3 --cpu-threads 1 --beam-size " +
                            beam + " < " + input);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const std::vector<std::string> want = split_lines(slurp(fixture(
        std::string("vocab-ids/marian.") + (beam[0] == '4' ? "beam4" : "greedy") + ".out")));
    const std::vector<std::string> got = split_lines(r.out);
    REQUIRE(want.size() == source_lines().size());
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("line " << i);
      CHECK(got[i] == want[i]);
    }
  }
}

TEST_CASE("Marian ensemble: tx-translate -m A B --weights equals marian-decoder's", "[import]") {
  // ensemble/ holds a second model over post-relu-tiedall's vocabulary and marian-decoder's
  // ensemble of the two (make_ensemble.py). Both print each model's log-prob (F0, F1) and the
  // weighted sum last.
  TempDir dir;
  TX_SOURCE_OR_SKIP();
  const Variant first = kVariants[0];
  const std::string vocab = fixture("post-relu-tiedall/vocab.spm");
  const std::string flags = "-m " + fixture("post-relu-tiedall/model.npz") + " " +
                            fixture("ensemble/model.npz") + " --weights 0.6 0.4 -v " + vocab + " " +
                            vocab + " --normalize 0 --max-length-factor 3 --cpu-threads 1";
  const std::string input = input_of(dir, first);
  for (const char* beam : {"4", "1"}) {
    INFO("beam " << beam);
    Run r = run_program(dir, TX_TRANSLATE_BIN,
                        flags + " --beam-size " + beam + " --n-best " + beam + " < " + input);
    INFO(r.err);
    REQUIRE(r.status == 0);
    std::vector<Entry> got;
    if (std::string(beam) == "1") {
      for (const std::string& line : split_lines(r.out)) got.push_back({"", line, 0, {}});
    } else {
      got = read_nbest(r.out);
    }
    const std::vector<Entry> want = read_nbest(slurp(fixture(
        std::string("ensemble/marian.") + (beam[0] == '4' ? "beam4" : "greedy") + ".nbest")));
    REQUIRE_FALSE(want.empty());
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("entry " << i << ": marian '" << want[i].text << "' " << want[i].score << ", tx '"
                    << got[i].text << "' " << got[i].score);
      CHECK(got[i].text == want[i].text);
      if (beam[0] == '4') {
        CHECK(got[i].id == want[i].id);
        CHECK(std::abs(got[i].score - want[i].score) <= 1e-4 + 5e-6 * std::abs(want[i].score));
        REQUIRE(want[i].features.size() == 2);
        REQUIRE(got[i].features.size() == 2);
        for (size_t m = 0; m < 2; ++m)
          CHECK(std::abs(got[i].features[m] - want[i].features[m]) <=
                1e-4 + 5e-6 * std::abs(want[i].features[m]));
      }
    }
  }
}

// ---- Hugging Face (the OPUS-MT layout, converted by transformers' own converter) -------------

namespace {

std::vector<std::vector<double>> read_numbers(const std::string& path) {
  std::vector<std::vector<double>> rows;
  for (const std::string& line : split_lines(slurp(path))) {
    std::vector<double> row;
    std::istringstream in(line);
    for (double v; in >> v;) row.push_back(v);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

TEST_CASE("Hugging Face model: aligns as marian-decoder does on its Marian model", "[import]") {
  // Head 0 of the last layer (config.json records no other); the numbers differ from the
  // Marian model's a little, as transformers' position table does from Marian's.
  for (const char* dir : {"opus-mt/hf-fp32", "opus-mt/hf"}) {
    const tx::formats::ModelFile file = tx::formats::read_model_file(fixture(dir));
    CHECK(file.config.alignment_head == 0);
    CHECK(file.config.aligned_layer() == file.config.decoder_layers - 1);
  }
  const tx::formats::ModelFile marian =
      tx::formats::read_model_file(fixture("opus-mt/marian/model.npz"));
  CHECK(marian.config.alignment_head == 0);
  CHECK(marian.config.aligned_layer() == marian.config.decoder_layers - 1);
}

TEST_CASE("Hugging Face vocabulary: <unk> gives no text, as MarianTokenizer decodes", "[import]") {
  // The fixture's target side; the expected strings are transformers 4.44.2's
  // `MarianTokenizer.decode(ids, skip_special_tokens=True)` of the same ids (1 is <unk>, 0 </s>,
  // 2 the bare "▁" piece, 24 "f").
  const std::string base = fixture("opus-mt/hf");
  const tx::data::Vocab vocab = tx::data::Vocab::pieces(base + "/target.spm", base + "/vocab.json");
  REQUIRE(vocab.unk_id() == 1);
  CHECK(vocab.decode({32, 1, 56, 0}) == "Ein Mann");
  CHECK(vocab.decode({32, 2, 1, 56, 0}) == "Ein  Mann");
  CHECK(vocab.decode({1, 32, 56, 1, 0}) == "Ein Mann");
  CHECK(vocab.decode({32, 2, 1, 1, 24, 0}) == "Ein f");
  // A Marian vocabulary keeps SentencePiece's rendering of unk (marian-decoder --allow-unk).
  const tx::data::Vocab spm = tx::data::Vocab::marian(base + "/target.spm");
  CHECK(spm.decode({spm.unk_id()}).find("\xe2\x81\x87") != std::string::npos);  // " ⁇ "
}

TEST_CASE("Hugging Face model: teacher-forced log-probs equal transformers'", "[import]") {
  TX_SOURCE_OR_SKIP();
  tx::register_builtin_backends();
  std::unique_ptr<tx::Backend> be = tx::create_backend("cpu");
  // hf-fp32: the PyTorch model in float32; hf: the converter's float16 weights (transformers
  // computed in float32 from them, as tx does after widening).
  for (const char* dir : {"hf-fp32", "hf"}) {
    INFO("model " << dir);
    const std::string base = fixture(std::string("opus-mt/") + dir);
    tx::formats::ModelFile file = tx::formats::read_model_file(base);
    REQUIRE(file.format == tx::formats::Format::huggingface);
    tx::nn::ParameterSet params;
    const tx::nn::Transformer model(tx::nn::ParamScope::for_loading(*be, params), file.config);
    tx::nn::load_parameters(std::move(file.params), *be, params, base);
    CHECK(file.params.tensors.empty());  // consumed: not held beside the parameters
    // The source ids as MarianTokenizer makes them (pieces numbered by vocab.json, then eos).
    const tx::data::Vocab vocab =
        tx::data::Vocab::pieces(base + "/source.spm", base + "/vocab.json");
    std::vector<std::vector<int32_t>> inputs;
    for (const std::string& line : source_lines()) {
      inputs.push_back(vocab.encode(line));
      inputs.back().push_back(file.config.eos_id);
    }
    const auto outputs = read_numbers(base + ".greedy.ids");
    const auto want = read_numbers(base + ".greedy.logprobs");
    REQUIRE(inputs.size() == outputs.size());
    REQUIRE(want.size() == outputs.size());
    double worst = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::vector<int32_t>& src = inputs[i];
      std::vector<int32_t> tgt(outputs[i].begin(), outputs[i].end());
      REQUIRE(want[i].size() == tgt.size());
      std::vector<int32_t> tgt_in{file.config.decoder_start_id};
      tgt_in.insert(tgt_in.end(), tgt.begin(), tgt.end() - 1);
      const auto S = static_cast<int64_t>(src.size()), T = static_cast<int64_t>(tgt.size());
      tx::Graph g(*be, tx::GraphOptions{false, false});
      tx::Var logits = model.forward(g, be->upload(src, {1, S}),
                                     be->upload(std::vector<int32_t>{static_cast<int32_t>(S)}, {1}),
                                     be->upload(tgt_in, {1, T}));
      tx::Tensor lp = be->empty(logits->value.shape());
      be->log_softmax(logits->value, lp);
      const std::vector<float> host = be->download<float>(lp);
      const int64_t V = file.config.tgt_vocab_size;
      for (int64_t t = 0; t < T; ++t)
        worst = std::max(worst, std::abs(double(host[t * V + tgt[t]]) - want[i][t]));
    }
    INFO("largest difference of a token's log-prob: " << worst);
    CHECK(worst < 1e-4);
  }
}

namespace {

// tx-translate -m on the Hugging Face fixture `base` with `flags`, over the test input, under
// generate()'s length limit (max_length 512 counts the start token); requires success.
Run translate_hf(const TempDir& dir, const std::string& base, const std::string& flags) {
  Run r = run_program(dir, TX_TRANSLATE_BIN,
                      "-m " + base + " " + flags +
                          " --max-length-factor 0 --max-length-b 510 --cpu-threads 1 < " +
                          input_of(dir, kVariants[0]));
  INFO(r.err);
  REQUIRE(r.status == 0);
  return r;
}

}  // namespace

TEST_CASE("Hugging Face model: tx-translate -m DIR's greedy lines equal generate()'s", "[import]") {
  TempDir dir;
  TX_SOURCE_OR_SKIP();
  for (const char* model : {"hf-fp32", "hf"}) {
    INFO("model " << model);
    const std::string base = fixture(std::string("opus-mt/") + model);
    const Run r = translate_hf(dir, base, "--beam-size 1");
    const std::vector<std::string> want = split_lines(slurp(base + ".greedy.txt"));
    const std::vector<std::string> got = split_lines(r.out);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("line " << i);
      CHECK(got[i] == want[i]);
    }
  }
}

// A Marian output line's fields split at " ||| ".
std::vector<std::string> fields_of(const std::string& line) {
  std::vector<std::string> f;
  size_t at = 0;
  while (true) {
    const size_t bar = line.find(" ||| ", at);
    f.push_back(line.substr(at, bar == std::string::npos ? std::string::npos : bar - at));
    if (bar == std::string::npos) return f;
    at = bar + 5;
  }
}

TEST_CASE("Marian guided alignment: tx-translate --alignment equals marian-decoder's", "[import]") {
  // alignment/ holds a pre-norm model trained with --guided-alignment on head 0 of decoder
  // layer 1 of 2, and marian-decoder's alignments of the first 200 lines of test2016.en
  // (make_alignment.py): the layer comes from its model.yml, and pre-norm decoding attends as
  // Marian's cache does (DecoderLayer::forward's as_decoded).
  TempDir dir;
  const std::vector<std::string> lines = tx::test::test2016_head(200);
  TX_TEST2016_OR_SKIP(lines);
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  const std::string input = dir.file("input.en");
  write_file(input, text);
  const std::string vocab = fixture("post-relu-tiedall/vocab.spm");
  const std::string flags = "-m " + fixture("alignment/model.npz") + " -v " + vocab + " " + vocab +
                            " --normalize 0 --max-length-factor 3 --cpu-threads 1 < " + input;
  struct Case {
    const char* file;
    const char* args;
  };
  for (const Case& c : {Case{"marian.beam4.hard", "--beam-size 4 --alignment hard"},
                        Case{"marian.greedy.hard", "--beam-size 1 --alignment"},
                        Case{"marian.beam4.t03.nbest", "--beam-size 4 --n-best 4 --alignment 0.3"},
                        Case{"marian.beam4.soft.gz", "--beam-size 4 --alignment soft"}}) {
    INFO(c.file);
    Run r = run_program(dir, TX_TRANSLATE_BIN, std::string(c.args) + " " + flags);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const std::string file = fixture(std::string("alignment/") + c.file);
    // The soft alignments (1.2 MB of text) are kept gzipped; gzip is in every Debian.
    const bool gz = file.size() > 3 && file.compare(file.size() - 3, 3, ".gz") == 0;
    const std::vector<std::string> want =
        split_lines(gz ? run_program(dir, "gzip", "-dc " + file).out : slurp(file));
    const std::vector<std::string> got = split_lines(r.out);
    REQUIRE(want.size() >= 200);
    REQUIRE(got.size() == want.size());
    const bool soft = std::string(c.file).find("soft") != std::string::npos;
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("line " << i << ": marian '" << want[i] << "'\ntx '" << got[i] << "'");
      const std::vector<std::string> w = fields_of(want[i]), g = fields_of(got[i]);
      REQUIRE(g.size() == w.size());
      const size_t at = w.size() == 2 ? 1 : 2;  // the alignment's field (n-best: after the text)
      for (size_t k = 0; k < at; ++k) CHECK(g[k] == w[k]);  // id, text (scores: other tests)
      if (!soft) {
        CHECK(g[at] == w[at]);
        continue;
      }
      // Soft: every probability within Marian's 6 printed digits.
      auto numbers = [](std::string f) {
        std::replace(f.begin(), f.end(), ',', ' ');
        std::istringstream in(f);
        std::vector<double> v;
        for (double x; in >> x;) v.push_back(x);
        return v;
      };
      const std::vector<double> wv = numbers(w[at]), gv = numbers(g[at]);
      REQUIRE(gv.size() == wv.size());
      REQUIRE_FALSE(wv.empty());
      for (size_t k = 0; k < wv.size(); ++k) {
        worst = std::max(worst, std::abs(gv[k] - wv[k]));
        CHECK(std::abs(gv[k] - wv[k]) <= 2e-6 + 1e-5 * std::abs(wv[k]));
      }
    }
    if (soft) std::cout << "soft alignments: largest difference " << worst << std::endl;
  }
}

TEST_CASE("tx-average of a Marian model with itself translates as marian-decoder", "[import]") {
  TempDir dir;
  TX_SOURCE_OR_SKIP();
  const Variant& v = kVariants[1];  // pre-norm: also the marian_prenorm_cache path
  const std::string avg = dir.file("avg.safetensors");
  const std::string model = fixture(std::string(v.dir) + "/model.npz");
  Run a = run_program(dir, TX_AVERAGE_BIN, model + " " + model + " -o " + avg);
  INFO(a.err);
  REQUIRE(a.status == 0);
  // A tx file first, the Marian model second: one line naming both, not a misread header.
  Run mixed =
      run_program(dir, TX_AVERAGE_BIN, avg + " " + model + " -o " + dir.file("mixed.safetensors"));
  CHECK(mixed.status == 1);
  CHECK_THAT(mixed.err, Catch::Contains(model) && Catch::Contains("one format"));
  // No -v: the averaged file names the vocabularies of model.npz.decoder.yml.
  Run r = run_program(dir, TX_TRANSLATE_BIN,
                      "-m " + avg +
                          " --beam-size 4 --n-best 4 --normalize 0 "
                          "--max-length-factor 3 --cpu-threads 1 < " +
                          input_of(dir, v));
  INFO(r.err);
  REQUIRE(r.status == 0);
  check_marian_nbest(r.out, v);
}

TEST_CASE("tx-average of Marian models: each parameter's mean", "[import]") {
  TempDir dir;
  const std::string a = fixture("post-relu-tiedall/model.npz"), b = dir.file("b.npz");
  // b: every weight of a times 3, so the mean of a, b, b is no input's.
  std::vector<tx::formats::NpyArray> arrays = tx::formats::read_npz(a);
  for (tx::formats::NpyArray& x : arrays) {
    if (x.descr != "<f4") continue;
    std::vector<float> v = x.floats();
    for (float& f : v) f *= 3;
    std::memcpy(x.data.data(), v.data(), x.data.size());
  }
  write_npz(b, arrays);
  const std::string out = dir.file("avg.safetensors");
  Run r = run_program(dir, TX_AVERAGE_BIN, a + " " + b + " " + b + " -o " + out + " --quiet");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const tx::formats::ModelFile ma = tx::formats::read_model_file(a),
                               mb = tx::formats::read_model_file(b);
  const tx::io::TensorFile avg = tx::io::read_safetensors(out);
  size_t checked = 0;
  for (const tx::io::NamedTensor& t : ma.params.tensors) {
    const std::vector<float> x = t.to_floats(), y = mb.params.get(t.name).to_floats();
    const tx::io::NamedTensor* got = avg.find(t.name);
    REQUIRE(got);
    const std::vector<float> z = got->to_floats();
    REQUIRE(z.size() == x.size());
    for (size_t k = 0; k < x.size(); ++k, ++checked)
      if (z[k] != static_cast<float>((double(x[k]) + double(y[k]) + double(y[k])) * (1.0 / 3)))
        FAIL(t.name << "[" << k << "] = " << z[k]);
  }
  CHECK(checked == 51200);
}

TEST_CASE("tx-average of Marian models: memory flat in the number of inputs", "[import]") {
  if (!tx::test::memory_measurable()) return;
  TempDir dir;
  const std::string a = fixture("post-relu-tiedall/model.npz");
  // One input at a time: 60 inputs peak where one does (they were all held, ~220 kB each).
  std::string many;
  for (int i = 0; i < 60; ++i) many += " " + a;
  const long one = peak_rss_kb(std::string(TX_AVERAGE_BIN) + " --quiet " + a + " -o " +
                               dir.file("one.safetensors")),
             sixty = peak_rss_kb(std::string(TX_AVERAGE_BIN) + " --quiet" + many + " -o " +
                                 dir.file("sixty.safetensors"));
  REQUIRE(one > 0);
  REQUIRE(sixty > 0);
  CHECK(sixty - one < 4000);
}

TEST_CASE("Marian models: an .npz under another name is read as one", "[import]") {
  TempDir dir;
  write_file(dir.file("in.txt"), "A man in an orange hat.\nTwo dogs.\n");
  const std::string spm = fixture("post-relu-tiedall/vocab.spm");
  std::filesystem::copy_file(fixture("post-relu-tiedall/model.npz"), dir.file("model.bin"));
  auto translate = [&](const std::string& model) {
    Run r = run_program(dir, TX_TRANSLATE_BIN,
                        "-m " + model + " -v " + spm + " --quiet < " + dir.file("in.txt"));
    INFO(r.err);
    CHECK(r.status == 0);
    return r.out;
  };
  const std::string want = translate(fixture("post-relu-tiedall/model.npz"));
  CHECK(split_lines(want).size() == 2);
  CHECK(translate(dir.file("model.bin")) == want);
}

TEST_CASE("imported models: a user's mistakes are one line naming the problem and the fix",
          "[import]") {
  TempDir dir;
  write_file(dir.file("in.txt"), "A man in an orange hat.\n");
  auto fails = [&](const std::string& args, const std::string& name) {
    Run r = run_program(dir, TX_TRANSLATE_BIN, args + " < " + dir.file("in.txt"));
    INFO("args " << args << "\nstderr " << r.err);
    CHECK(r.status != 0);
    CHECK(r.out.empty());
    CHECK(one_line(r.err));
    CHECK_THAT(r.err, Catch::Contains(name));
  };
  // The Marian vocabularies swapped: decoder.yml names them the other way round.
  const std::string untied = fixture("post-swish-untied-embn/");
  fails("-m " + untied + "model.npz -v " + untied + "trg.yml " + untied + "src.yml",
        "give the source vocabulary first");
  // A tx .spm given for a Marian model whose ids it does not share.
  fails("-m " + fixture("post-relu-tiedall/model.npz") + " -v " + untied + "src.yml",
        "pieces but the model");
  // A Hugging Face directory with its weights missing, or its .spm files (a BPE model).
  const std::string hf = fixture("opus-mt/hf-fp32");
  std::filesystem::create_directories(dir.file("noweights"));
  for (const char* f : {"config.json", "source.spm", "target.spm", "vocab.json"})
    std::filesystem::copy_file(hf + "/" + f, dir.file(std::string("noweights/") + f));
  fails("-m " + dir.file("noweights"), "has no model.safetensors");
  std::filesystem::copy_file(hf + "/model.safetensors", dir.file("noweights/pytorch_model.bin"));
  fails("-m " + dir.file("noweights"), "scripts/to_safetensors.py");
  std::filesystem::remove(dir.file("noweights/pytorch_model.bin"));
  std::filesystem::copy_file(hf + "/model.safetensors", dir.file("noweights/model.safetensors"));
  std::filesystem::remove(dir.file("noweights/source.spm"));
  fails("-m " + dir.file("noweights"), "BPE-only");
  // Marian models tx does not implement (tests/fixtures/marian/unsupported).
  const std::string unsupported = fixture("unsupported/");
  const std::string v = " -v " + unsupported + "vocab.yml";
  fails("-m " + unsupported + "aan.npz" + v, "'average-attention' (--transformer-decoder-autoreg)");
  fails("-m " + unsupported + "s2s.npz" + v, "is a Marian 's2s' model, not a Transformer");
  fails("-m " + unsupported + "factored.npz" + v, "uses factored vocabularies");
  // An ensemble of two Marian models with different vocabularies (each found through its
  // decoder.yml).
  fails(
      "-m " + fixture("post-relu-tiedall/model.npz") + " " + fixture("pre-swish-tiedtrg/model.npz"),
      "an ensemble's models must share their vocabularies");
  // A model damaged on disk: one byte of a weight (decoder_l2_ffn_W1, a stored entry) changed.
  std::string npz = slurp(fixture("post-relu-tiedall/model.npz"));
  npz[npz.size() / 2] = static_cast<char>(npz[npz.size() / 2] ^ 0x55);
  write_file(dir.file("damaged.npz"), npz);
  const std::string spm = fixture("post-relu-tiedall/vocab.spm");
  fails("-m " + dir.file("damaged.npz") + " -v " + spm + " " + spm,
        "'decoder_l2_ffn_W1.npy' is damaged (CRC error: its data does not match its checksum)");
  // Cut short (a copy that stopped): its zip directory, at the end, is gone.
  write_file(dir.file("cut.npz"), npz.substr(0, npz.size() / 2));
  fails("-m " + dir.file("cut.npz") + " -v " + spm + " " + spm,
        "is damaged or cut short: it starts as a zip archive");
  // A NaN in a weight Marian stores transposed, and an infinity in one of a Hugging Face
  // model: named as the file names them, at the file's element.
  std::vector<tx::formats::NpyArray> arrays =
      tx::formats::read_npz(fixture("post-relu-tiedall/model.npz"));
  for (tx::formats::NpyArray& a : arrays)
    if (a.name == "decoder_l2_ffn_W1") {
      REQUIRE(a.descr == "<f4");
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(a.data.data() + 4 * 5, &nan, 4);
    }
  write_npz(dir.file("nan.npz"), arrays);
  fails("-m " + dir.file("nan.npz") + " -v " + spm + " " + spm,
        "tensor 'decoder_l2_ffn_W1' holds nan at element 5");
  std::filesystem::create_directories(dir.file("inf"));
  for (const auto& e : std::filesystem::directory_iterator(hf))
    std::filesystem::copy_file(e.path(), dir.file("inf/" + e.path().filename().string()));
  tx::io::TensorFile weights = tx::io::read_safetensors(hf + "/model.safetensors");
  const std::string fc1 = "model.decoder.layers.0.fc1.weight";
  tx::io::NamedTensor* t = nullptr;
  for (tx::io::NamedTensor& x : weights.tensors)
    if (x.name == fc1) t = &x;
  REQUIRE(t);
  std::vector<float> values = t->to_floats();
  values[7] = std::numeric_limits<float>::infinity();
  *t = tx::io::NamedTensor::from_floats(fc1, t->dtype, t->shape, values);
  std::filesystem::remove(dir.file("inf/model.safetensors"));
  tx::io::write_safetensors(dir.file("inf/model.safetensors"), weights);
  fails("-m " + dir.file("inf"), "tensor '" + fc1 + "' holds inf at element 7");
  // The same weight stored [in, out]: as many elements, and garbage if read as [out, in].
  values[7] = 0.5f;
  const tx::Shape transposed{t->shape[1], t->shape[0]};
  const std::string expected = t->shape.str();
  *t = tx::io::NamedTensor::from_floats(fc1, t->dtype, transposed, values);
  std::filesystem::remove(dir.file("inf/model.safetensors"));
  tx::io::write_safetensors(dir.file("inf/model.safetensors"), weights);
  fails("-m " + dir.file("inf"),
        "tensor '" + fc1 + "' is " + transposed.str() + ", " + expected + " expected");
  // A decoder.yml naming a vocabulary that is gone (and -v, which overrides it, still works).
  std::filesystem::create_directories(dir.file("moved"));
  std::filesystem::copy_file(fixture("post-relu-tiedall/model.npz"), dir.file("moved/model.npz"));
  write_file(dir.file("moved/model.npz.decoder.yml"),
             "relative-paths: false\nmodels:\n  - model.npz\nvocabs:\n  - gone.spm\n  - "
             "gone.spm\n");
  fails("-m " + dir.file("moved/model.npz"), "'gone.spm' that the model");
  Run given = run_program(
      dir, TX_TRANSLATE_BIN,
      "-m " + dir.file("moved/model.npz") + " -v " + spm + " --quiet < " + dir.file("in.txt"));
  CHECK(given.status == 0);
  // The folder's decoder.yml lists model.npz: another model beside it does not take its
  // vocabularies (of the same size, they could be other pieces: garbage, exit 0).
  std::filesystem::create_directories(dir.file("folder"));
  std::filesystem::copy_file(fixture("post-relu-tiedall/model.npz"), dir.file("folder/model.npz"));
  std::filesystem::copy_file(fixture("post-relu-tiedall/model.npz"), dir.file("folder/other.npz"));
  write_file(dir.file("folder/decoder.yml"),
             "models:\n  - model.npz\nvocabs:\n  - " + spm + "\n  - " + spm + "\n");
  fails("-m " + dir.file("folder/other.npz"), "its models: list does not name");
  // A decoder.yml that is not YAML: the message asking for -v names it.
  std::filesystem::create_directories(dir.file("broken"));
  std::filesystem::copy_file(fixture("post-relu-tiedall/model.npz"), dir.file("broken/model.npz"));
  write_file(dir.file("broken/model.npz.decoder.yml"), "vocabs: [a.spm\n  - b: : c\n");
  fails("-m " + dir.file("broken/model.npz"),
        "'" + dir.file("broken/model.npz.decoder.yml") + "' is not valid YAML");
  // A .yml vocabulary whose ids skip one: the missing id is named, not only the token above.
  write_file(dir.file("gap.yml"), "</s>: 0\n<unk>: 1\nHaus: 3\n");
  fails("-m " + fixture("post-relu-tiedall/model.npz") + " -v " + dir.file("gap.yml"),
        "token 'Haus' has id 3, but its 3 tokens must number 0..2 each once (id 2 has no token)");
  write_file(dir.file("twice.yml"), "</s>: 0\n<unk>: 1\nHaus: 1\n");
  fails("-m " + fixture("post-relu-tiedall/model.npz") + " -v " + dir.file("twice.yml"),
        "tokens '<unk>' and 'Haus' both have id 1");
  Run listed =
      run_program(dir, TX_TRANSLATE_BIN,
                  "-m " + dir.file("folder/model.npz") + " --quiet < " + dir.file("in.txt"));
  CHECK(listed.status == 0);
  CHECK(listed.out == given.out);
  // Listed as the same file under another name (OPUS-MT folders link model.npz to theirs).
  std::filesystem::create_symlink("model.npz", dir.file("folder/link.npz"));
  Run linked =
      run_program(dir, TX_TRANSLATE_BIN,
                  "-m " + dir.file("folder/link.npz") + " --quiet < " + dir.file("in.txt"));
  CHECK(linked.status == 0);
  CHECK(linked.out == given.out);
  // config.json values tx would misread: an integer it cannot hold (nlohmann's get wrapped
  // 4294967298 layers to 2), a fraction (32.7 read as 32), a pre-norm MarianMTModel (which
  // transformers does not have).
  for (const auto& [from, to, message] : std::vector<std::array<std::string, 3>>{
           {"\"encoder_layers\": 2", "\"encoder_layers\": 4294967298", "'encoder_layers'"},
           {"\"d_model\": 32", "\"d_model\": 32.7", "'d_model' has an unexpected value 32.7"},
           {"\"d_model\": 32", "\"normalize_before\": true, \"d_model\": 32",
            "normalize_before is true"}}) {
    const std::string bad = dir.file("config-" + std::to_string(std::hash<std::string>{}(to)));
    std::filesystem::copy(hf, bad);
    std::string config = slurp(bad + "/config.json");
    const size_t at = config.find(from);
    REQUIRE(at != std::string::npos);
    write_file(bad + "/config.json", config.replace(at, from.size(), to));
    fails("-m " + bad, message);
  }
  // A Hugging Face model's weights given without their directory: the directory is the fix.
  fails("-m " + hf + "/model.safetensors", "give its directory, '" + hf + "', instead");
  // A directory that is no model at all.
  std::filesystem::create_directories(dir.file("empty"));
  fails("-m " + dir.file("empty"), "is a directory without config.json");
}

TEST_CASE("tx-train --pretrained-model: the saved model translates as the import did", "[import]") {
  TempDir dir;
  TX_SOURCE_OR_SKIP();
  const Variant& v = kVariants[1];
  // Any parallel text will do: the fixture's input and Marian's translations of it.
  const std::string pairs = input_of(dir, v) + " " + outputs_of(v) + "/marian.beam4.out";
  // One update at a learning rate of 1e-12 moves no weight by half an ulp: the saved model is
  // the import, now a tx file (its vocabularies named in its tx.vocabs).
  Run t = run_program(dir, TX_TRAIN_BIN,
                      "--pretrained-model " + fixture(std::string(v.dir) + "/model.npz") +
                          " --train-sets " + pairs + " -m " + dir.file("ft") +
                          " --after-updates 1 --lr-schedule constant --learn-rate 1e-12"
                          " --max-tokens 2000 --cpu-threads 1 --quiet");
  INFO(t.err);
  REQUIRE(t.status == 0);
  Run r = run_program(dir, TX_TRANSLATE_BIN,
                      "-m " + dir.file("ft/model.safetensors") +
                          " --beam-size 4 --n-best 4 --normalize 0 --max-length-factor 3"
                          " --cpu-threads 1 < " +
                          input_of(dir, v));
  INFO(r.err);
  REQUIRE(r.status == 0);
  check_marian_nbest(r.out, v);
}

TEST_CASE("tx-train: a run fine-tuned from a Marian model on .yml vocabularies resumes",
          "[import]") {
  TempDir dir;
  TX_SOURCE_OR_SKIP();
  const Variant& v = kVariants[2];  // src.yml trg.yml
  const std::string pairs = input_of(dir, v) + " " + outputs_of(v) + "/marian.beam4.out";
  // A copy of the model, to be removed once the run has started.
  std::filesystem::copy_file(fixture(std::string(v.dir) + "/model.npz"), dir.file("model.npz"));
  const std::string vocabs = " -v " + fixture(std::string(v.dir) + "/src.yml") + " " +
                             fixture(std::string(v.dir) + "/trg.yml");
  const std::string from = "--pretrained-model " + dir.file("model.npz") + " --train-sets " +
                           pairs + " -m " + dir.file("ft") +
                           " --lr-schedule constant --learn-rate 1e-6 --max-tokens 2000"
                           " --cpu-threads 1";
  Run first = run_program(dir, TX_TRAIN_BIN, from + vocabs + " --after-updates 1 --quiet");
  INFO(first.err);
  REQUIRE(first.status == 0);
  // The same command again resumes, the .yml token lists read as Marian's.
  Run resumed = run_program(dir, TX_TRAIN_BIN, from + vocabs + " --after-updates 2 --quiet");
  INFO(resumed.err);
  CHECK(resumed.status == 0);
  CHECK(tx::test::checkpoint_update(dir.file("ft/checkpoint.safetensors")) == 2);
  // A checkpoint from before 2026-12-01 named the vocabularies only in its model file (kept
  // there by this run too): the resume still finds them, and so do its model files.
  {
    tx::io::TensorFile ckpt = tx::io::read_safetensors(dir.file("ft/checkpoint.safetensors"));
    REQUIRE(ckpt.metadata.erase("tx.vocabs") == 1);
    tx::io::write_safetensors(dir.file("ft/checkpoint.safetensors"), ckpt);
  }
  Run older = run_program(dir, TX_TRAIN_BIN, from + " --after-updates 3 --quiet");
  INFO(older.err);
  CHECK(older.status == 0);
  CHECK(tx::test::checkpoint_update(dir.file("ft/checkpoint.safetensors")) == 3);
  CHECK(tx::train::read_checkpoint_metadata(dir.file("ft/checkpoint.safetensors"))
            .count("tx.vocabs") == 1);
  // As in Marian, the pretrained model only starts the run: once it is gone the same command
  // resumes, and so does one without -v (the vocabularies the checkpoint names).
  std::filesystem::remove(dir.file("model.npz"));
  Run gone = run_program(dir, TX_TRAIN_BIN, from + vocabs + " --after-updates 4");
  INFO(gone.err);
  CHECK(gone.status == 0);
  CHECK_THAT(gone.err, Catch::Contains("is not read"));
  Run no_v = run_program(dir, TX_TRAIN_BIN, from + " --after-updates 5 --quiet");
  INFO(no_v.err);
  CHECK(no_v.status == 0);
  CHECK(tx::test::checkpoint_update(dir.file("ft/checkpoint.safetensors")) == 5);
  // Its model translates with the vocabularies it names, as the import did.
  Run r = run_program(
      dir, TX_TRANSLATE_BIN,
      "-m " + dir.file("ft/model.safetensors") + " --cpu-threads 1 --quiet < " + input_of(dir, v));
  INFO(r.err);
  CHECK(r.status == 0);
  CHECK(tx::test::split_lines(r.out).size() == source_lines().size());
}

TEST_CASE("Hugging Face model: tx-translate -m DIR's beam 4 equals generate()'s, with its scores",
          "[import]") {
  TempDir dir;
  TX_SOURCE_OR_SKIP();
  for (const char* model : {"hf-fp32", "hf"}) {
    INFO("model " << model);
    const std::string base = fixture(std::string("opus-mt/") + model);
    const Run r = translate_hf(dir, base, "--beam-size 4 --n-best 4 --normalize 1");
    const std::vector<std::string> want = split_lines(slurp(base + ".beam4.txt"));
    const auto want_scores = read_numbers(base + ".beam4.scores");
    std::vector<Entry> best;  // the first (best) entry of each line's n-best list
    for (const Entry& e : read_nbest(r.out))
      if (best.empty() || best.back().id != e.id) best.push_back(e);
    REQUIRE(best.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("line " << i);
      CHECK(best[i].text == want[i]);
      CHECK(std::abs(best[i].score - want_scores[i].at(0)) < 1e-4);
    }
  }
}

TEST_CASE("Marian models: tx-score's sentence scores equal Marian's scorer", "[import]") {
  TempDir dir;
  TX_SOURCE_OR_SKIP();
  // Marian's scorer runs the training graph (pre-norm layers normalise their keys: no decoding
  // cache), on its greedy translations re-encoded from text, as tx-score reads them.
  for (const Variant& v : {kVariants[0], kVariants[1], kVariants[2]}) {
    INFO("fixture " << v.dir);
    std::string targets;
    for (const Entry& e : read_nbest(slurp(outputs_of(v) + "/marian.greedy.nbest")))
      targets += e.text + "\n";
    write_file(dir.file("tgt.txt"), targets);
    std::string flags = model_flags(v);
    flags = flags.substr(0, flags.find(" --normalize"));  // tx-score: plain log-probs
    Run r = run_program(
        dir, TX_SCORE_BIN,
        flags + " --cpu-threads 1 --src " + input_of(dir, v) + " --tgt " + dir.file("tgt.txt"));
    INFO(r.err);
    REQUIRE(r.status == 0);
    const std::vector<std::string> got = split_lines(r.out);
    const std::vector<std::string> want =
        split_lines(slurp(outputs_of(v) + "/marian.greedy.scorer"));
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const double m = std::strtod(want[i].c_str(), nullptr),
                   t = std::strtod(got[i].c_str(), nullptr);
      INFO("line " << i << ": marian " << m << ", tx " << t);
      CHECK(std::abs(m - t) <= 1e-4 + 5e-6 * std::abs(m));
    }
  }
}

// A Hugging Face directory is read through its files, and model.safetensors is its weights:
// neither tx-average's output nor a fine-tuning run's model directory may replace them.
TEST_CASE("Hugging Face model directory: tx-average and tx-train never write over its files",
          "[import]") {
  TempDir dir;
  const std::string hf = dir.file("hf");
  std::filesystem::copy(fixture("opus-mt/hf"), hf);
  const std::string weights = slurp(hf + "/model.safetensors");
  Run average = run_program(dir, TX_AVERAGE_BIN, "-o " + hf + "/model.safetensors " + hf);
  CHECK(average.status == 1);
  CHECK_THAT(average.err, Catch::Contains("is a file the input model directory"));
  Run config = run_program(dir, TX_AVERAGE_BIN, "-o " + hf + "/config.json " + hf);
  CHECK(config.status == 1);
  // Nor through a link (the write lands on the file the link names).
  std::filesystem::create_symlink("hf/model.safetensors", dir.file("out"));
  Run linked = run_program(dir, TX_AVERAGE_BIN, "-o " + dir.file("out") + " " + hf);
  CHECK(linked.status == 1);
  CHECK_THAT(linked.err, Catch::Contains("is a file the input model directory"));
  CHECK(slurp(hf + "/model.safetensors") == weights);
  // Beside its files, another one is fine, and so is the same command again.
  for (int run = 0; run < 2; ++run) {
    Run beside = run_program(dir, TX_AVERAGE_BIN, "-o " + hf + "/averaged.safetensors " + hf);
    CHECK(beside.status == 0);
  }
  write_file(dir.file("tr.en"), "a small house\nthe green tree\n");
  write_file(dir.file("tr.de"), "ein kleines Haus\nder grüne Baum\n");
  Run train =
      run_program(dir, TX_TRAIN_BIN,
                  "--pretrained-model " + hf + " -m " + hf + "/ --train-sets " + dir.file("tr.en") +
                      " " + dir.file("tr.de") + " --after-updates 1 --quiet");
  CHECK(train.status == 1);
  CHECK_THAT(train.err, Catch::Contains("would write its model.safetensors over the pretrained"));
  CHECK(slurp(hf + "/model.safetensors") == weights);
  // Its vocabularies are its own files: a -v beside it (here one that does not exist) was
  // silently ignored.
  Run vocabs = run_program(dir, TX_TRAIN_BIN,
                           "--pretrained-model " + hf + " -m " + dir.file("run") + " -v " +
                               dir.file("missing.spm") + " --train-sets " + dir.file("tr.en") +
                               " " + dir.file("tr.de") + " --after-updates 1 --quiet");
  CHECK(vocabs.status == 1);
  CHECK_THAT(vocabs.err, Catch::Contains("comes with its own Hugging Face vocabularies"));
}

TEST_CASE("Marian models: options marian would read otherwise than tx are refused, naming them",
          "[import]") {
  // marian builds the model from its options and loads the arrays those name; tx reads the
  // arrays. Each edit below makes the two disagree, and the file is refused by name.
  TempDir dir;
  auto edited = [&](const std::string& model, const std::string& name,
                    const std::function<void(std::string&)>& edit) {
    std::vector<tx::formats::NpyArray> arrays = tx::formats::read_npz(fixture(model));
    edit_model_yml(arrays, edit);
    write_npz(dir.file(name), arrays);
    return dir.file(name);
  };
  auto replaced = [](const std::string& from, const std::string& to) {
    return [=](std::string& yml) {
      const size_t at = yml.find(from);
      REQUIRE(at != std::string::npos);
      yml.replace(at, from.size(), to);
    };
  };
  auto refused = [](const std::string& path, const std::string& why) {
    CHECK_THROWS_WITH(tx::formats::read_model_file(path), Catch::Contains(why));
  };
  const std::string tied = "post-relu-tiedall/model.npz",
                    untied = "post-swish-untied-embn/model.npz";
  // marian takes the last of a key given twice (a lookup, the first).
  refused(edited(tied, "twice.npz",
                 [](std::string& y) { y += "\ntransformer-ffn-activation: swish\n"; }),
          "gives option 'transformer-ffn-activation' twice");
  // Tying is the flags', whatever arrays the file has.
  refused(
      edited(untied, "tied-flag.npz", replaced("tied-embeddings: false", "tied-embeddings: true")),
      "tie the output layer (--tied-embeddings, --tied-embeddings-all) but it has an output");
  refused(edited(tied, "untied-flag.npz",
                 replaced("tied-embeddings-all: true", "tied-embeddings-all: false")),
          "do not share the source and target embeddings");
  // Depth: marian's default is 1, and a layer past the depth is named.
  refused(edited(tied, "no-depth.npz", replaced("enc-depth: 2", "")),
          "has encoder layer 2 but its options give enc-depth 1 (marian's default");
  refused(edited(tied, "vocab-dims.npz", replaced("dim-vocabs:", "dim-vocabs: [100, 100]\nx-old:")),
          "--dim-vocabs gives the source vocabulary 100 ids but its embeddings have 256 rows");
  refused(edited(tied, "ffn-depth.npz",
                 replaced("transformer-decoder-ffn-depth: 0", "transformer-decoder-ffn-depth: -2")),
          "feed-forward depth other than 2");
  refused(
      edited(tied, "heads.npz", replaced("transformer-heads: ", "transformer-heads: 4.0\nx-old: ")),
      "option 'transformer-heads' is '4.0', not a whole number");
  // marian skips every special: item.
  std::vector<tx::formats::NpyArray> arrays = tx::formats::read_npz(fixture(tied));
  tx::formats::NpyArray extra = arrays.front();
  extra.name = "special:notes";
  arrays.push_back(extra);
  write_npz(dir.file("special.npz"), arrays);
  CHECK(tx::formats::read_model_file(dir.file("special.npz")).params.tensors.size() ==
        tx::formats::read_model_file(fixture(tied)).params.tensors.size());
  // marian's binary format (version 1 first) is named, with the conversion.
  write_file(dir.file("model.bin"), std::string("\x01\0\0\0\0\0\0\0\x05\0\0\0\0\0\0\0", 16));
  refused(dir.file("model.bin"),
          "is a Marian binary model, which tx does not read; convert a float32 one with "
          "`marian-conv");
  write_file(dir.file("secret.bin"), std::string("\x02\0\0\0\0\0\0\0\x40\0\0\0\0\0\0\0", 16));
  refused(dir.file("secret.bin"), "is an encrypted Marian binary model, which tx cannot read");
  // A safetensors file whose header is "{}" has the same first 8 bytes; it is not named so.
  write_file(dir.file("empty.safetensors"), std::string("\x02\0\0\0\0\0\0\0{}", 10));
  CHECK(tx::formats::format_of(dir.file("empty.safetensors")) == tx::formats::Format::tx);
}

TEST_CASE("Marian models: learned positions are what marian's transformer reads, not its flag",
          "[import]") {
  // marian's `transformer` type looks its learned positions up as transformer-train-positions
  // (models/transformer.h), so --transformer-train-position-embeddings true still gives it
  // sinusoids: such a file is read as it is, and the switch marian does read is refused.
  TempDir dir;
  const std::string tied = fixture("post-relu-tiedall/model.npz");
  auto with_yml = [&](const std::string& name, const std::function<void(std::string&)>& edit,
                      bool add_wpos = false) {
    std::vector<tx::formats::NpyArray> arrays = tx::formats::read_npz(tied);
    edit_model_yml(arrays, edit);
    if (add_wpos) {
      tx::formats::NpyArray wpos = arrays.back();
      for (const tx::formats::NpyArray& a : arrays)
        if (a.name == "Wemb") wpos = a;
      wpos.name = "Wpos";
      arrays.push_back(wpos);
    }
    write_npz(dir.file(name), arrays);
    return dir.file(name);
  };
  auto flag_on = [](std::string& y) {
    const std::string from = "transformer-train-position-embeddings: false";
    const size_t at = y.find(from);
    REQUIRE(at != std::string::npos);
    y.replace(at, from.size(), "transformer-train-position-embeddings: true");
  };
  const tx::formats::ModelFile base = tx::formats::read_model_file(tied);
  const tx::formats::ModelFile flagged =
      tx::formats::read_model_file(with_yml("flag.npz", flag_on));
  REQUIRE(flagged.params.tensors.size() == base.params.tensors.size());
  for (size_t i = 0; i < base.params.tensors.size(); ++i) {
    CHECK(flagged.params.tensors[i].name == base.params.tensors[i].name);
    CHECK(flagged.params.tensors[i].data == base.params.tensors[i].data);
  }
  CHECK_THROWS_WITH(
      tx::formats::read_model_file(with_yml(
          "read.npz", [](std::string& y) { y += "\ntransformer-train-positions: true\n"; })),
      Catch::Contains("has learned positions (transformer-train-positions)"));
  CHECK_THROWS_WITH(tx::formats::read_model_file(with_yml("wpos.npz", flag_on, true)),
                    Catch::Contains("has an array 'Wpos' that tx does not map"));
}

TEST_CASE("Hugging Face models: a stored position table must be MarianMTModel's sinusoids",
          "[import]") {
  // transformers uses a stored embed_positions table; tx computes its own, so a stored one
  // must be that table. Built here from modeling_marian's formula: column j < D/2 holds
  // sin(pos / 10000^(2j/D)), column D/2 + j its cos.
  TempDir dir;
  const std::string hf = fixture("opus-mt/hf-fp32");
  const tx::io::ModelConfig c = tx::formats::read_model_file(hf).config;
  const int64_t D = c.d_model, P = c.max_length;
  std::vector<float> table(static_cast<size_t>(P * D));
  for (int64_t pos = 0; pos < P; ++pos)
    for (int64_t j = 0; j < D / 2; ++j) {
      const double angle = double(pos) / std::pow(10000.0, 2.0 * double(j) / double(D));
      table[pos * D + j] = static_cast<float>(std::sin(angle));
      table[pos * D + D / 2 + j] = static_cast<float>(std::cos(angle));
    }
  auto with_table = [&](const std::string& name, const tx::Shape& shape,
                        const std::vector<float>& values) {
    std::filesystem::copy(hf, dir.file(name));
    tx::io::TensorFile weights = tx::io::read_safetensors(hf + "/model.safetensors");
    for (const char* side : {"encoder", "decoder"})
      weights.add(tx::io::NamedTensor::from_floats(
          std::string("model.") + side + ".embed_positions.weight", tx::DType::f32, shape, values));
    std::filesystem::remove(dir.file(name + "/model.safetensors"));
    tx::io::write_safetensors(dir.file(name + "/model.safetensors"), weights);
    return dir.file(name);
  };
  CHECK(tx::formats::read_model_file(with_table("right", {P, D}, table)).params.tensors.size() ==
        tx::formats::read_model_file(hf).params.tensors.size());
  std::vector<float> wrong = table;
  wrong[3 * D + 1] += 0.5f;
  CHECK_THROWS_WITH(tx::formats::read_model_file(with_table("wrong", {P, D}, wrong)),
                    Catch::Contains("holds") && Catch::Contains("at position 3, column 1"));
  CHECK_THROWS_WITH(
      tx::formats::read_model_file(with_table(
          "short", {P / 2, D}, std::vector<float>(table.begin(), table.begin() + P / 2 * D))),
      Catch::Contains("max_position_embeddings, d_model"));
  // Without the heads in config.json, MarianConfig's 16 (as transformers loads it).
  std::filesystem::copy(hf, dir.file("no-heads"));
  nlohmann::json j = nlohmann::json::parse(slurp(dir.file("no-heads/config.json")));
  j.erase("encoder_attention_heads");
  j.erase("decoder_attention_heads");
  write_file(dir.file("no-heads/config.json"), j.dump());
  CHECK(tx::formats::read_model_file(dir.file("no-heads")).config.heads == 16);
}

TEST_CASE("Hugging Face models: generation_config.json must agree with config.json on the ids",
          "[import]") {
  // generate() takes the special ids from generation_config.json, a forward pass from
  // config.json: the fixture's agree, an edited copy does not.
  TempDir dir;
  const std::string hf = fixture("opus-mt/hf");
  REQUIRE(std::filesystem::exists(hf + "/generation_config.json"));
  const int32_t eos = tx::formats::read_model_file(hf).config.eos_id;
  std::filesystem::copy(hf, dir.file("other-eos"));
  nlohmann::json g = nlohmann::json::parse(slurp(dir.file("other-eos/generation_config.json")));
  g["eos_token_id"] = nlohmann::json::array({eos + 1});
  write_file(dir.file("other-eos/generation_config.json"), g.dump());
  CHECK_THROWS_WITH(tx::formats::read_model_file(dir.file("other-eos")),
                    Catch::Contains("eos_token_id is [" + std::to_string(eos + 1) +
                                    "] where config.json gives " + std::to_string(eos)));
}

TEST_CASE("Hugging Face models: a tied copy that differs from the weight it ties is refused",
          "[import]") {
  // Which of two different copies a loaded model holds depends on transformers' version and
  // loading path. The fixture holds lm_head.weight equal to model.shared.weight (and loads).
  TempDir dir;
  const std::string hf = fixture("opus-mt/hf-fp32");
  tx::io::TensorFile weights = tx::io::read_safetensors(hf + "/model.safetensors");
  tx::io::NamedTensor* head = nullptr;
  for (tx::io::NamedTensor& t : weights.tensors)
    if (t.name == "lm_head.weight") head = &t;
  REQUIRE(head);
  std::vector<float> values = head->to_floats();
  values[11] += 0.25f;
  *head = tx::io::NamedTensor::from_floats(head->name, head->dtype, head->shape, values);
  std::filesystem::copy(hf, dir.file("other"));
  std::filesystem::remove(dir.file("other/model.safetensors"));
  tx::io::write_safetensors(dir.file("other/model.safetensors"), weights);
  CHECK_THROWS_WITH(tx::formats::read_model_file(dir.file("other")),
                    Catch::Contains("tensor 'lm_head.weight' differs from 'model.shared.weight'"));
}
