// lib/train checkpoints: bit-exact round trips, exact resume of a run with dropout, strict
// loading (config, names, shapes), and saves that fail without harming the previous file.
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "nn/transformer.h"
#include "support/reference.h"
#include "train/checkpoint.h"
#include "train_tiny.h"

using Catch::Contains;
using tx::test::TempDir;
using tx::test::TinyRun;
using tx::train::AdamOptions;
using tx::train::TrainingState;

namespace {

// Every parameter of `a` and `b` holds the same bits (and so do Adam's moments when asked).
void require_same_bits(tx::Backend& be, const TinyRun& a, const TinyRun& b, bool moments) {
  const auto &pa = a.params.items(), &pb = b.params.items();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    INFO(pa[i].first);
    REQUIRE(pa[i].first == pb[i].first);
    TX_CHECK_OK(tx::test::compare_exact(be.download<float>(pb[i].second->value),
                                        be.download<float>(pa[i].second->value)));
    if (!moments) continue;
    TX_CHECK_OK(
        tx::test::compare_exact(be.download<float>(b.adam.m(i)), be.download<float>(a.adam.m(i))));
    TX_CHECK_OK(
        tx::test::compare_exact(be.download<float>(b.adam.v(i)), be.download<float>(a.adam.v(i))));
  }
}

bool any_difference(tx::Backend& be, const TinyRun& a, const TinyRun& b) {
  for (size_t i = 0; i < a.params.size(); ++i)
    if (be.download<float>(a.params.items()[i].second->value) !=
        be.download<float>(b.params.items()[i].second->value))
      return true;
  return false;
}

TrainingState sample_state(const TinyRun& run) {
  TrainingState s = run.state();
  s.epoch = 2;
  s.data_position.push_back(-17);
  s.early_stopping.has_best = true;
  s.early_stopping.best = 1.0 / 3.0;
  s.early_stopping.stalled = 1;
  s.early_stopping.validations = 4;
  return s;
}

}  // namespace

TEST_CASE("train checkpoint: a training checkpoint round trip is bit-identical",
          "[train][checkpoint]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TinyRun a(*be, 1, 2);
  for (int i = 0; i < 3; ++i) a.step();
  const TrainingState saved = sample_state(a);
  const std::string path = dir.file("checkpoint.safetensors");
  tx::train::save_checkpoint(path, *be, a.config, a.params, a.adam, saved, {{"note", "hello"}});

  TinyRun b(*be, 99, 98);  // another init: loading must overwrite everything
  REQUIRE(any_difference(*be, a, b));
  TrainingState loaded = tx::train::load_checkpoint(path, *be, b.config, b.params, b.adam);
  CHECK(loaded == saved);
  CHECK(b.adam.steps() == 3);
  require_same_bits(*be, a, b, /*moments=*/true);

  // The header says what the file is, for people and for other tools.
  auto meta = tx::train::read_checkpoint_metadata(path);
  CHECK(meta.at("tx.format") == "training");
  CHECK(meta.at("note") == "hello");
  CHECK(tx::io::ModelConfig::from_json_string(meta.at("tx.model_config")) == a.config);
  nlohmann::json opt = nlohmann::json::parse(meta.at("tx.optimizer"));
  CHECK(opt.at("step") == 3);
  CHECK(opt.at("beta2").get<float>() == 0.98f);
  tx::io::SafetensorsReader reader(path);
  CHECK(reader.find("adam.m.embed_tokens.weight"));
  CHECK(reader.find("adam.v.decoder.layers.1.ffn.fc2.bias"));
  CHECK(reader.entries().size() == 3 * a.params.size());
}

TEST_CASE(
    "train checkpoint: a model built for loading has the seeded model's parameters, then "
    "its weights",
    "[train][checkpoint]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TinyRun a(*be, 1, 2);
  a.step();
  const std::string path = dir.file("model.safetensors");
  tx::train::save_model(path, *be, a.config, a.params);
  // What tx-translate and tx-score do: no random initial values, the file's instead.
  tx::nn::ParameterSet params;
  tx::nn::Transformer model(tx::nn::ParamScope::for_loading(*be, params), a.config);
  REQUIRE(params.size() == a.params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    INFO(a.params.items()[i].first);
    CHECK(params.items()[i].first == a.params.items()[i].first);
    CHECK(params.items()[i].second->value.shape() == a.params.items()[i].second->value.shape());
  }
  tx::train::load_model(path, *be, a.config, params);
  for (size_t i = 0; i < params.size(); ++i)
    TX_CHECK_OK(tx::test::compare_exact(be->download<float>(params.items()[i].second->value),
                                        be->download<float>(a.params.items()[i].second->value)));
}

TEST_CASE("train checkpoint: a model file round trip, and models load from training checkpoints",
          "[train][checkpoint]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TinyRun a(*be, 1, 2);
  a.step();
  const std::string model = dir.file("model.safetensors"), ckpt = dir.file("ckpt.safetensors");
  tx::train::save_model(model, *be, a.config, a.params);
  tx::train::save_checkpoint(ckpt, *be, a.config, a.params, a.adam, a.state());
  CHECK(tx::io::SafetensorsReader(model).entries().size() == a.params.size());
  CHECK(tx::train::read_checkpoint_metadata(model).at("tx.format") == "model");

  for (const std::string& path : {model, ckpt}) {
    INFO(path);
    // What tx-translate does: the config from the file, then the model, then the weights.
    tx::io::ModelConfig config = tx::train::read_model_config(path);
    CHECK(config == a.config);
    TinyRun b(*be, 5, 6, {}, config);
    tx::train::load_model(path, *be, config, b.params);
    require_same_bits(*be, a, b, /*moments=*/false);
    CHECK(b.adam.steps() == 0);  // load_model leaves the optimiser alone
  }
  CHECK_THROWS_WITH(tx::train::save_model(model, *be, a.config, a.params, {{"tx.mine", "x"}}),
                    Contains("'tx.mine' is reserved"));
}

TEST_CASE("train checkpoint: exact resume of a run with dropout, Adam and clipping",
          "[train][checkpoint][resume]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  AdamOptions opts;
  opts.clip_norm = 0.5f;  // low enough to clip on some steps
  const int N = 8;

  TinyRun straight(*be, 1, 7, opts);
  int clipped = 0;
  for (int i = 0; i < N; ++i) clipped += straight.step().clipped;
  CHECK(clipped > 0);

  TinyRun first(*be, 1, 7, opts);
  for (int i = 0; i < N / 2; ++i) first.step();
  const std::string path = dir.file("checkpoint.safetensors");
  tx::train::save_checkpoint(path, *be, first.config, first.params, first.adam, first.state());

  // Fresh objects, built from the checkpoint's config with another init and dropout seed.
  TinyRun resumed(*be, 50, 51, opts, tx::train::read_model_config(path));
  TrainingState state =
      tx::train::load_checkpoint(path, *be, resumed.config, resumed.params, resumed.adam);
  CHECK(state.rng_counter > 0);  // dropout drew from the stream
  resumed.resume(state);
  for (int i = 0; i < N / 2; ++i) resumed.step();

  CHECK(resumed.adam.steps() == N);
  CHECK(resumed.next_batch == straight.next_batch);
  CHECK(resumed.graph->rng().counter() == straight.graph->rng().counter());
  require_same_bits(*be, straight, resumed, /*moments=*/true);

  // The check has teeth: the same resume with the dropout counter restarted (same seed)
  // diverges.
  TinyRun careless(*be, 50, state.rng_seed, opts);
  tx::train::load_checkpoint(path, *be, careless.config, careless.params, careless.adam);
  careless.next_batch = state.data_position.at(0);
  for (int i = 0; i < N / 2; ++i) careless.step();
  CHECK(any_difference(*be, straight, careless));
}

TEST_CASE("train checkpoint: a different model config or tensor shape fails with a clear message",
          "[train][checkpoint]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TinyRun a(*be, 1, 2);
  const std::string path = dir.file("checkpoint.safetensors");
  tx::train::save_checkpoint(path, *be, a.config, a.params, a.adam, a.state());

  tx::io::ModelConfig wider = a.config;
  wider.d_ff = 32;
  TinyRun b(*be, 1, 2, {}, wider);
  std::vector<float> before = be->download<float>(b.params.items()[0].second->value);
  CHECK_THROWS_WITH(tx::train::load_checkpoint(path, *be, b.config, b.params, b.adam),
                    Contains("checkpoint '" + path + "' holds a different model") &&
                        Contains("d_ff is 16 there but 32 here") && Contains("resume with the model options it was trained with"));
  CHECK_THROWS_WITH(tx::train::load_model(path, *be, b.config, b.params),
                    Contains("d_ff is 16 there but 32 here"));
  // Nothing was written into the model before the mismatch was found.
  CHECK(be->download<float>(b.params.items()[0].second->value) == before);

  // Dropout and label smoothing are training choices: a resumed run may change them.
  tx::io::ModelConfig regularised = a.config;
  regularised.dropout = 0.3f;
  regularised.label_smoothing = 0.0f;
  TinyRun c(*be, 1, 2, {}, regularised);
  CHECK_NOTHROW(tx::train::load_checkpoint(path, *be, c.config, c.params, c.adam));

  // Same config, but the file's tensors disagree with the model: edit the file by hand.
  tx::io::TensorFile file = tx::io::read_safetensors(path);
  auto rewrite = [&](auto edit) {
    tx::io::TensorFile f = file;
    edit(f);
    std::string p = dir.file("edited.safetensors");
    tx::io::write_safetensors(p, f);
    return p;
  };
  auto find = [](tx::io::TensorFile& f, const std::string& name) {
    for (auto& t : f.tensors)
      if (t.name == name) return &t;
    FAIL("no tensor " << name);
    return &f.tensors[0];
  };
  const std::string name = "decoder.layers.1.ffn.fc1.weight";  // [16, 8]
  std::string reshaped = rewrite([&](tx::io::TensorFile& f) { find(f, name)->shape = {8, 16}; });
  CHECK_THROWS_WITH(tx::train::load_model(reshaped, *be, a.config, a.params),
                    Contains("tensor '" + name + "' has shape [8, 16] but the model's is [16, 8]"));
  std::string missing = rewrite([&](tx::io::TensorFile& f) {
    f.tensors.erase(f.tensors.begin() + (find(f, name) - f.tensors.data()));
  });
  CHECK_THROWS_WITH(tx::train::load_model(missing, *be, a.config, a.params),
                    Contains("has no tensor '" + name + "' (f32[16, 8])"));
  std::string no_moment = rewrite([&](tx::io::TensorFile& f) {
    f.tensors.erase(f.tensors.begin() + (find(f, "adam.v." + name) - f.tensors.data()));
  });
  CHECK_THROWS_WITH(tx::train::load_checkpoint(no_moment, *be, a.config, a.params, a.adam),
                    Contains("has no tensor 'adam.v." + name + "'"));
  std::string extra = rewrite([&](tx::io::TensorFile& f) {
    f.add(tx::io::NamedTensor::from_floats("encoder.layers.2.ffn.fc1.bias", tx::DType::f32, {16},
                                           std::vector<float>(16)));
  });
  CHECK_THROWS_WITH(tx::train::load_model(extra, *be, a.config, a.params),
                    Contains("tensor 'encoder.layers.2.ffn.fc1.bias' that the model does not"));

  // A model file has no optimiser state to resume from.
  const std::string model = dir.file("model.safetensors");
  tx::train::save_model(model, *be, a.config, a.params);
  CHECK_THROWS_WITH(tx::train::load_checkpoint(model, *be, a.config, a.params, a.adam),
                    Contains("is a 'model' file, without optimiser and trainer state"));
}

TEST_CASE("train checkpoint: a failed save leaves the previous checkpoint byte-identical",
          "[train][checkpoint]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  TinyRun run(*be, 1, 2);
  run.step();
  const std::string path = dir.file("checkpoint.safetensors");
  tx::train::save_checkpoint(path, *be, run.config, run.params, run.adam, run.state());
  const std::string before = tx::test::slurp(path);
  REQUIRE(before.size() > 16384);
  run.step();  // the next save would write different bytes

  SECTION("the disk fills up mid-write") {
    // A file-size limit makes write() fail with EFBIG part-way through the temporary: what a
    // full disk does. Root ignores permissions, so this is the failure a test can plant.
    struct rlimit old;
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
    struct rlimit small = old;
    small.rlim_cur = 16384;
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    bool threw = false;
    std::string message;
    try {
      tx::train::save_checkpoint(path, *be, run.config, run.params, run.adam, run.state());
    } catch (const tx::Error& e) {
      threw = true;
      message = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
    CHECK(threw);
    CHECK_THAT(message, Contains("cannot write '" + path + "'") && Contains("File too large"));
  }
  SECTION("the checkpoint is refused before writing") {
    CHECK_THROWS_WITH(tx::train::save_checkpoint(path, *be, run.config, run.params, run.adam,
                                                 run.state(), {{"tx.model_config", "{}"}}),
                      Contains("reserved"));
  }
  SECTION("a directory stands where the file should go") {
    // Refused before anything is written (a rename could not replace it anyway).
    const std::string blocked = dir.file("blocked.safetensors");
    std::filesystem::create_directory(blocked);
    std::filesystem::create_directory(blocked + "/inside");
    CHECK_THROWS_WITH(
        tx::train::save_checkpoint(blocked, *be, run.config, run.params, run.adam, run.state()),
        Contains("it is a directory"));
    CHECK(std::filesystem::is_directory(blocked + "/inside"));
    std::filesystem::remove_all(blocked);
  }
  CHECK(tx::test::slurp(path) == before);
  CHECK(dir.entries() == std::vector<std::string>{"checkpoint.safetensors"});  // no temporary
  // And the intact file still resumes.
  TinyRun fresh(*be, 3, 4);
  CHECK_NOTHROW(tx::train::load_checkpoint(path, *be, fresh.config, fresh.params, fresh.adam));
  CHECK(fresh.adam.steps() == 1);
}
