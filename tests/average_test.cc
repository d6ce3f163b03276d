// Checkpoint averaging (lib/train/average.h) and the tx-average program: means against hand
// computations, every mismatch named, atomic output, and the command line's exit codes.
#include "train/average.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/model_file.h"
#include "io/safetensors.h"
#include "support/programs.h"
#include "train/checkpoint.h"
#include "train_tiny.h"

using Catch::Contains;
using tx::DType;
using tx::io::NamedTensor;
using tx::io::TensorFile;
using tx::test::TempDir;

namespace {

tx::io::ModelConfig small_config() {
  tx::io::ModelConfig c = tx::test::tiny_train_config();
  return c;
}

// A checkpoint as tx-train writes one: parameters, config, and (optionally) Adam's state.
TensorFile checkpoint(const std::vector<float>& w, const std::vector<float>& half,
                      bool optimiser_state, const tx::io::ModelConfig& config = small_config()) {
  TensorFile f;
  f.metadata[tx::io::kModelConfigKey] = config.to_json_string();
  f.metadata["tx.format"] = optimiser_state ? "training" : "model";
  if (optimiser_state) f.metadata["tx.training_state"] = "{}";
  f.add(NamedTensor::from_floats("w", DType::f32, {int64_t(w.size())}, w));
  f.add(NamedTensor::from_floats("h16", DType::f16, {1, int64_t(half.size())}, half));
  f.add(NamedTensor::from_floats("hb16", DType::bf16, {int64_t(half.size())}, half));
  if (optimiser_state) {
    f.add(NamedTensor::from_floats("adam.m.w", DType::f32, {int64_t(w.size())}, w));
    f.add(NamedTensor::from_floats("adam.v.w", DType::f32, {int64_t(w.size())}, w));
  }
  return f;
}

std::string write(const TempDir& dir, const std::string& name, const TensorFile& f) {
  tx::io::write_safetensors(dir.file(name), f);
  return dir.file(name);
}

std::string average_error(const std::vector<std::string>& inputs, const std::string& output) {
  try {
    tx::train::average_checkpoints(inputs, output);
  } catch (const tx::Error& e) {
    return e.what();
  }
  FAIL("no error");
  return "";
}

using tx::test::Run;

// Runs tx-average with `args` (shell words), capturing its exit code, stdout and stderr.
Run tx_average(const TempDir& dir, const std::string& args) {
  return tx::test::run_program(dir, TX_AVERAGE_BIN, args);
}

}  // namespace

TEST_CASE("average: the mean of each parameter, in double, dtypes kept, no optimiser state",
          "[average]") {
  TempDir dir;
  // w[3] sums to 2^24 + 2: in float the +1s would vanish (mean 5592405.5); in double the mean
  // is 5592406, exact in float.
  const std::string a = write(dir, "a.st", checkpoint({1, 2, 3, 16777216}, {1, 2}, true));
  const std::string b = write(dir, "b.st", checkpoint({4, 5, 6, 1}, {2, 3}, false));
  const std::string c = write(dir, "c.st", checkpoint({7, 8, 10, 1}, {2, 3}, true));
  const std::string out = dir.file("avg.st");

  tx::train::AverageSummary s = tx::train::average_checkpoints({a, b, c}, out);
  CHECK(s.inputs == 3);
  CHECK(s.tensors == 3);
  CHECK(s.parameters == 4 + 2 + 2);
  CHECK(s.skipped_tensors == 4);

  TensorFile avg = tx::io::read_safetensors(out);
  REQUIRE(avg.tensors.size() == 3);
  CHECK(avg.get("w").dtype == DType::f32);
  CHECK(avg.get("w").to_floats() == std::vector<float>{4, 5, float(19.0 / 3.0), 5592406.0f});
  CHECK(avg.get("h16").dtype == DType::f16);
  CHECK(avg.get("h16").shape == tx::Shape{1, 2});
  // The float mean, rounded once to the tensor's dtype.
  CHECK(avg.get("h16").data ==
        NamedTensor::from_floats("x", DType::f16, {1, 2}, {5.0f / 3.0f, 8.0f / 3.0f}).data);
  CHECK(avg.get("hb16").dtype == DType::bf16);
  CHECK(avg.get("hb16").data ==
        NamedTensor::from_floats("x", DType::bf16, {2}, {5.0f / 3.0f, 8.0f / 3.0f}).data);

  CHECK(avg.metadata.at("tx.format") == "model");
  CHECK(tx::io::ModelConfig::from_json_string(avg.metadata.at(tx::io::kModelConfigKey)) ==
        small_config());
  CHECK(nlohmann::json::parse(avg.metadata.at("tx.averaged_from")) == nlohmann::json{a, b, c});
  CHECK_FALSE(avg.metadata.count("tx.training_state"));
  CHECK(dir.entries() == std::vector<std::string>{"a.st", "avg.st", "b.st", "c.st"});
}

TEST_CASE("average: averaged training checkpoints load as a model", "[average]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  tx::test::TinyRun run(*be, 1, 2);
  std::vector<std::string> paths;
  std::vector<std::vector<std::vector<float>>> values;  // [checkpoint][parameter]
  for (int k = 0; k < 2; ++k) {
    run.step();
    paths.push_back(dir.file("ckpt" + std::to_string(k) + ".st"));
    tx::train::save_checkpoint(paths.back(), *be, run.config, run.params, run.adam, run.state());
    values.emplace_back();
    for (const auto& item : run.params.items())
      values.back().push_back(be->download<float>(item.second->value));
  }
  const std::string out = dir.file("avg.st");
  tx::train::average_checkpoints(paths, out);

  tx::io::ModelConfig config = tx::train::read_model_config(out);
  CHECK(config == run.config);
  tx::test::TinyRun loaded(*be, 9, 9, {}, config);
  tx::train::load_model(out, *be, config, loaded.params);
  for (size_t p = 0; p < loaded.params.size(); ++p) {
    INFO(loaded.params.items()[p].first);
    std::vector<float> want(values[0][p].size());
    for (size_t k = 0; k < want.size(); ++k)
      want[k] = float((double(values[0][p][k]) + double(values[1][p][k])) / 2);
    CHECK(be->download<float>(loaded.params.items()[p].second->value) == want);
  }
}

TEST_CASE("average: a mismatch names the file and the tensor or field, and writes nothing",
          "[average]") {
  TempDir dir;
  const std::string a = write(dir, "a.st", checkpoint({1, 2}, {1, 2}, false));
  const std::string out = dir.file("out.st");
  std::ofstream(out) << "previous";

  tx::io::ModelConfig wide = small_config();
  wide.d_model = 16;
  CHECK_THAT(average_error({a, write(dir, "cfg.st", checkpoint({1, 2}, {1, 2}, false, wide))}, out),
             Contains("cfg.st") && Contains("d_model 8 vs 16"));

  TensorFile missing = checkpoint({1, 2}, {1, 2}, false);
  missing.tensors.pop_back();
  CHECK_THAT(average_error({a, write(dir, "missing.st", missing)}, out),
             Contains("missing.st") && Contains("no tensor 'hb16'"));
  CHECK_THAT(average_error({write(dir, "missing.st", missing), a}, out),
             Contains("a.st") && Contains("'hb16'"));

  CHECK_THAT(average_error({a, write(dir, "shape.st", checkpoint({1, 2, 3}, {1, 2}, false))}, out),
             Contains("shape.st") && Contains("'w'") && Contains("[3]") && Contains("[2]"));

  TensorFile dtype = checkpoint({1, 2}, {1, 2}, false);
  dtype.tensors[0] = NamedTensor::from_floats("w", DType::bf16, {2}, {1, 2});
  CHECK_THAT(average_error({a, write(dir, "dtype.st", dtype)}, out),
             Contains("dtype.st") && Contains("'w' is bf16"));

  TensorFile bare = checkpoint({1, 2}, {1, 2}, false);
  bare.metadata.clear();
  CHECK_THAT(average_error({a, write(dir, "bare.st", bare)}, out),
             Contains("bare.st") && Contains("tx.model_config"));

  CHECK_THAT(average_error({a, dir.file("absent.st")}, out), Contains("absent.st"));
  CHECK_THAT(average_error({}, out), Contains("no checkpoints"));

  // The output is never one of the inputs, however it is spelled.
  CHECK_THAT(average_error({a, a}, a), Contains("is the input"));
  CHECK_THAT(average_error({a}, dir.file("./a.st")), Contains("is the input"));

  CHECK(tx::test::slurp(out) == "previous");
  for (const std::string& e : dir.entries()) CHECK(e[0] != '.');  // no temporary left
}

TEST_CASE("average: the output keeps the inputs' vocabularies, which must agree", "[average]") {
  TempDir dir;
  const std::string marian = tx::formats::vocab_files_json(
      {tx::formats::VocabKind::marian, {"/v/a.spm", "/v/b.spm"}, {}, {}});
  auto with = [&](const std::string& name, const std::string& vocabs, const std::string& print) {
    TensorFile f = checkpoint({1, 2}, {1, 2}, false);
    if (!vocabs.empty()) f.metadata[tx::formats::kVocabsKey] = vocabs;
    if (!print.empty()) f.metadata[tx::train::kVocabFingerprintKey] = print;
    return write(dir, name, f);
  };
  const std::string a = with("a.st", marian, "p1 p1"), b = with("b.st", marian, "p1 p1");
  // One written before the fingerprint existed agrees with any.
  const std::string old = with("old.st", marian, "");
  const std::string out = dir.file("out.st");
  tx::train::average_checkpoints({old, a, b}, out);
  const TensorFile avg = tx::io::read_safetensors(out);
  CHECK(avg.metadata.at(tx::formats::kVocabsKey) == marian);
  CHECK(avg.metadata.at(tx::train::kVocabFingerprintKey) == "p1 p1");

  CHECK_THAT(average_error({a, with("other.st", marian, "p2 p2")}, dir.file("x.st")),
             Contains("other.st") && Contains("other vocabularies") && Contains("a.st"));
  // A checkpoint written before 2026-12-01 holds neither key, though its run's model files do.
  tx::train::average_checkpoints({with("old_ckpt.st", "", ""), a}, out);
  CHECK(tx::io::read_safetensors(out).metadata.at(tx::formats::kVocabsKey) == marian);
  const std::string elsewhere = tx::formats::vocab_files_json(
      {tx::formats::VocabKind::marian, {"/w/a.spm", "/w/b.spm"}, {}, {}});
  CHECK_THAT(average_error({a, with("moved.st", elsewhere, "p1 p1")}, dir.file("x.st")),
             Contains("moved.st") && Contains("other vocabulary files"));
  CHECK_FALSE(std::filesystem::exists(dir.file("x.st")));
  // Plain tx inputs: no vocabulary files named, the fingerprint kept.
  tx::train::average_checkpoints({with("t1.st", "", "p3 p3"), with("t2.st", "", "p3 p3")}, out);
  const TensorFile plain = tx::io::read_safetensors(out);
  CHECK_FALSE(plain.metadata.count(tx::formats::kVocabsKey));
  CHECK(plain.metadata.at(tx::train::kVocabFingerprintKey) == "p3 p3");
}

TEST_CASE("average: tx-average writes the average, logs on stderr, prints nothing on stdout",
          "[average][cli]") {
  TempDir dir;
  const std::string a = write(dir, "a.st", checkpoint({1, 2}, {1, 2}, true));
  const std::string b = write(dir, "b.st", checkpoint({3, 4}, {3, 4}, false));
  const std::string out = dir.file("avg.st");

  Run ok = tx_average(dir, "-o " + out + " " + a + " " + b);
  CHECK(ok.status == 0);
  CHECK(ok.out.empty());
  CHECK_THAT(ok.err, Contains("averaged 2 checkpoints: 3 tensors, 6 parameters"));
  CHECK(tx::io::read_safetensors(out).get("w").to_floats() == std::vector<float>{2, 3});

  Run quiet = tx_average(dir, "--quiet --output " + out + " --inputs " + a + " " + b);
  CHECK(quiet.status == 0);
  CHECK(quiet.err.empty());
}

TEST_CASE("average: tx-average errors are one line on stderr with a non-zero exit",
          "[average][cli]") {
  TempDir dir;
  const std::string a = write(dir, "a.st", checkpoint({1, 2}, {1, 2}, false));
  const std::string b = write(dir, "b.st", checkpoint({1, 2, 3}, {1, 2}, false));
  auto one_error_line = [](const Run& r) {
    CHECK(r.out.empty());
    CHECK(r.err.rfind("tx-average: error: ", 0) == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  };

  Run none = tx_average(dir, "");
  CHECK(none.status == 2);
  one_error_line(none);
  CHECK_THAT(none.err, Contains("--output is required"));

  Run no_inputs = tx_average(dir, "-o " + dir.file("x.safetensors"));
  CHECK(no_inputs.status == 2);
  one_error_line(no_inputs);
  CHECK_THAT(no_inputs.err, Contains("give the checkpoints to average") && Contains("--last N"));

  Run flag = tx_average(dir, "--bogus");
  CHECK(flag.status == 2);
  one_error_line(flag);
  CHECK_THAT(flag.err, Contains("--bogus"));

  std::ofstream(dir.file("bad.json")) << R"({"output": "x.st", "inputz": []})";
  Run config = tx_average(dir, "--config " + dir.file("bad.json"));
  CHECK(config.status == 2);
  one_error_line(config);
  CHECK_THAT(config.err, Contains("bad.json") && Contains("'inputz'"));

  Run mismatch = tx_average(dir, "-o " + dir.file("out.st") + " " + a + " " + b);
  CHECK(mismatch.status == 1);
  one_error_line(mismatch);
  CHECK_THAT(mismatch.err, Contains("b.st") && Contains("'w'"));
  CHECK_FALSE(std::ifstream(dir.file("out.st")).good());

  // A device or a pipe would be replaced by the rename: refused before any input is read.
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);
  Run pipe = tx_average(dir, "-o " + dir.file("fifo") + " " + dir.file("missing.st"));
  CHECK(pipe.status == 1);
  one_error_line(pipe);
  CHECK_THAT(pipe.err, Contains("fifo': it is a pipe"));
  CHECK(std::filesystem::is_fifo(dir.file("fifo")));

  Run same = tx_average(dir, "-o " + a + " " + a + " " + b);
  CHECK(same.status == 1);
  CHECK_THAT(same.err, Contains("is the input"));

  // A diverged snapshot (a NaN weight) is named, not averaged into a model that translates
  // nothing.
  const std::string nan = write(dir, "nan.st", checkpoint({1, std::nanf("")}, {1, 2}, false));
  const std::string c = write(dir, "c.st", checkpoint({1, 2}, {1, 2}, false));
  Run diverged = tx_average(dir, "-o " + dir.file("out.st") + " " + c + " " + nan);
  CHECK(diverged.status == 1);
  one_error_line(diverged);
  CHECK_THAT(diverged.err, Contains("nan.st") && Contains("'w'") && Contains("element 1"));
  CHECK_FALSE(std::ifstream(dir.file("out.st")).good());

  // --dump-config into a full disk: an error, not an empty run.json with success.
  // (The group's redirection wins over run_program's.)
  Run full = tx::test::run_program(
      dir, "{ " + std::string(TX_AVERAGE_BIN) + " -o x.st a.st --dump-config > /dev/full; }", "");
  CHECK(full.status == 1);
  one_error_line(full);
  CHECK_THAT(full.err, Contains("cannot write to stdout"));
}

TEST_CASE("average: tx-average --dump-config prints the resolved options as JSON",
          "[average][cli]") {
  TempDir dir;
  std::ofstream(dir.file("run.json")) << R"({"output": "avg.st", "inputs": ["x.st", "y.st"]})";
  Run r = tx_average(dir, "--config " + dir.file("run.json") + " -o other.st --dump-config");
  CHECK(r.status == 0);
  CHECK(r.err.empty());
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j.at("output") == "other.st");
  CHECK(j.at("inputs") == nlohmann::json{"x.st", "y.st"});
}

TEST_CASE(
    "average: checkpoints of one run that changed its dropout average, and a smoothing run's "
    "checkpoint gives its smoothed weights",
    "[average]") {
  TempDir dir;
  tx::io::ModelConfig resumed = small_config();
  resumed.dropout = 0.3f;  // training choices a resumed run may change
  resumed.label_smoothing = 0.2f;
  resumed.alignment_head = 1;
  const std::string a = write(dir, "a.st", checkpoint({1, 2}, {1, 2}, false));
  const std::string b = write(dir, "b.st", checkpoint({3, 6}, {3, 4}, false, resumed));
  const std::string out = dir.file("out.st");
  tx::train::average_checkpoints({a, b}, out);
  CHECK(tx::io::read_safetensors(out).get("w").to_floats() == std::vector<float>{2, 4});

  // "ema.<name>" beside the raw weights (tx-train --exponential-smoothing): the model.
  TensorFile smoothed = checkpoint({100, 200}, {1, 2}, true);
  smoothed.add(NamedTensor::from_floats("ema.w", DType::f32, {2}, {5, 10}));
  smoothed.add(NamedTensor::from_floats("ema.h16", DType::f16, {1, 2}, {1, 2}));
  smoothed.add(NamedTensor::from_floats("ema.hb16", DType::bf16, {2}, {1, 2}));
  const std::string c = write(dir, "c.st", smoothed);
  const tx::train::AverageSummary s = tx::train::average_checkpoints({a, c}, out);
  CHECK(tx::io::read_safetensors(out).get("w").to_floats() == std::vector<float>{3, 6});
  CHECK(s.smoothed_inputs == 1);
  CHECK(s.skipped_tensors == 2);  // Adam's m and v
  CHECK(tx::io::read_safetensors(out).find("ema.w") == nullptr);

  // Smoothed weights for some parameters only, or of another shape: a damaged file.
  TensorFile partial = checkpoint({100, 200}, {1, 2}, true);
  partial.add(NamedTensor::from_floats("ema.w", DType::f32, {2}, {5, 10}));
  CHECK_THAT(average_error({a, write(dir, "partial.st", partial)}, out),
             Contains("partial.st") && Contains("ema.h16"));
  TensorFile short_ema = checkpoint({100, 200}, {1, 2}, true);
  short_ema.add(NamedTensor::from_floats("ema.w", DType::f32, {1}, {5}));
  short_ema.add(NamedTensor::from_floats("ema.h16", DType::f16, {1, 2}, {1, 2}));
  short_ema.add(NamedTensor::from_floats("ema.hb16", DType::bf16, {2}, {1, 2}));
  CHECK_THAT(average_error({a, write(dir, "short.st", short_ema)}, out),
             Contains("short.st") && Contains("ema.w"));
}
