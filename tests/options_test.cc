// apps/common: the option registry, the order of defaults < --task < --config < flags,
// --dump-config read back by --config, and one clear UsageError per mistake.
#include <array>
#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>

#include "common/command_line.h"
#include "train_tiny.h"

using Catch::Contains;
using nlohmann::json;
using tx::app::kAverage;
using tx::app::kTrain;
using tx::app::Options;
using tx::app::UsageError;

namespace {

tx::app::ParseResult parse(tx::app::Program program, std::vector<std::string> args) {
  args.insert(args.begin(), tx::app::program_name(program));
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return tx::app::parse_command_line(program, "test", int(argv.size()), argv.data());
}

Options options(tx::app::Program program, std::vector<std::string> args) {
  tx::app::ParseResult r = parse(program, std::move(args));
  REQUIRE_FALSE(r.finished);
  return r.options;
}

// The message of the UsageError that parsing `args` throws, checked to be one line.
std::string fails(tx::app::Program p, std::vector<std::string> args) {
  try {
    parse(p, std::move(args));
  } catch (const UsageError& e) {
    const std::string message = e.what();
    CHECK(message.find('\n') == std::string::npos);
    return message;
  }
  FAIL("no UsageError");
  return std::string();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("options: every registry row is complete and its name unique in each program",
          "[options]") {
  std::set<std::pair<std::string, unsigned>> names;
  std::set<std::string> model_keys;
  for (const tx::app::OptionSpec& s : tx::app::option_registry()) {
    INFO(s.name);
    for (unsigned p : {tx::app::kTrain, tx::app::kTranslate, tx::app::kScore, tx::app::kAverage})
      if (s.programs & p) CHECK(names.insert({s.name, p}).second);
    CHECK_FALSE(s.help.empty());
    CHECK_FALSE(s.group.empty());
    CHECK(s.programs != 0);
    CHECK((s.required & ~s.programs) == 0);
    if (!s.model_key.empty()) model_keys.insert(s.model_key);
  }
  // Every architecture and regularisation field of ModelConfig has its flag; vocabulary sizes
  // come from the vocabularies, not from flags.
  const json config = tx::io::ModelConfig().to_json();
  for (const auto& item : config.items())
    if (item.key().find("vocab_size") == std::string::npos) CHECK(model_keys.count(item.key()));
}

TEST_CASE("options: defaults are transformer-base and the common flags", "[options]") {
  Options o = options(kTrain, {});
  CHECK(o.text("device") == "cpu");
  CHECK(o.integer("cpu-threads") == 0);
  CHECK(o.integer("seed") == 1);
  CHECK(o.log_level() == tx::app::LogLevel::normal);
  CHECK(o.text("task") == "transformer-base");
  CHECK(o.model_config() == tx::io::ModelConfig::preset("transformer-base"));
  CHECK(options(kTrain, {"--quiet"}).log_level() == tx::app::LogLevel::quiet);
  CHECK(options(kTrain, {"--verbose"}).log_level() == tx::app::LogLevel::verbose);
}

TEST_CASE("options: tx-translate's backend caches less freed memory than tx-train's", "[options]") {
  // A stream's batches keep changing shape (bench/soak); a training step reuses its blocks.
  CHECK(options(tx::app::kTranslate, {"-m", "model.safetensors"})
            .backend_options()
            .max_cached_bytes == size_t(512) << 20);
  CHECK(options(kTrain, {}).backend_options().max_cached_bytes == size_t(1) << 30);
  CHECK(options(kTrain, {"--cpu-threads", "3"}).backend_options().threads == 3);
}

TEST_CASE("options: --task presets are overridable flag by flag", "[options]") {
  Options big = options(kTrain, {"--task", "transformer-big"});
  CHECK(big.model_config() == tx::io::ModelConfig::preset("transformer-big"));
  CHECK(big.integer("d-model") == 1024);
  CHECK(big.number("dropout") == 0.3);

  Options o = options(kTrain, {"--d-model", "2048", "--task", "transformer-big", "--dropout", "0.2",
                               "--tied-embeddings", "decoder", "--pre-norm", "--device", "cuda:1",
                               "--cpu-threads", "2", "--seed", "7"});
  tx::io::ModelConfig want = tx::io::ModelConfig::preset("transformer-big");
  want.d_model = 2048;
  want.dropout = 0.2f;
  want.tied_embeddings = tx::io::TiedEmbeddings::decoder;
  want.pre_norm = true;
  CHECK(o.model_config() == want);
  CHECK(o.text("device") == "cuda:1");
  CHECK(o.integer("cpu-threads") == 2);
  CHECK(o.integer("seed") == 7);
  CHECK_FALSE(options(kTrain, {"--pre-norm=false"}).flag("pre-norm"));
}

TEST_CASE("options: --config values sit between the preset and the command line", "[options]") {
  tx::test::TempDir dir;
  const std::string path = dir.file("run.json");
  write(path, R"({"task": "transformer-big", "heads": 8, "seed": 5, "device": "cuda"})");

  Options o = options(kTrain, {"--config", path});
  CHECK(o.integer("d-model") == 1024);  // the file's task
  CHECK(o.integer("heads") == 8);       // the file over its preset
  CHECK(o.integer("seed") == 5);
  CHECK(o.text("device") == "cuda");

  Options cli = options(kTrain, {"--config", path, "--heads", "4", "--task", "transformer-base"});
  CHECK(cli.integer("heads") == 4);      // the command line over the file
  CHECK(cli.integer("d-model") == 512);  // the command line's task over the file's
  CHECK(cli.integer("seed") == 5);
}

TEST_CASE("options: a config's list may be one string or hold numbers, within its bounds",
          "[options]") {
  tx::test::TempDir dir;
  const std::string path = dir.file("run.json");
  write(path, R"({"model": "a.npz", "weights": [0.6, 1], "shortlist": ["lex.s2t", 50, 20]})");
  Options o = options(tx::app::kTranslate, {"--config", path});
  CHECK(o.list("model") == std::vector<std::string>{"a.npz"});
  CHECK(o.list("weights") == std::vector<std::string>{"0.6", "1"});
  CHECK(o.list("shortlist") == std::vector<std::string>{"lex.s2t", "50", "20"});
  write(path, R"({"exponential-smoothing": 0.0001})");
  CHECK(options(kTrain, {"--config", path}).list("exponential-smoothing") ==
        std::vector<std::string>{"0.0001"});
  write(path, R"({"exponential-smoothing": [0.0001, 1000, 3]})");
  CHECK_THROWS_WITH(options(kTrain, {"--config", path}), Contains("at most 2"));
  CHECK_THROWS_AS(options(kTrain, {"--exponential-smoothing", "1", "2", "3"}), UsageError);
}

TEST_CASE("options: --dump-config prints JSON that --config reads back to the same options",
          "[options]") {
  tx::test::TempDir dir;
  tx::app::ParseResult dumped =
      parse(kTrain, {"--task", "transformer-big", "--heads", "32", "--seed", "3", "--dump-config"});
  REQUIRE(dumped.finished);
  const json values = json::parse(dumped.text);
  CHECK(values.at("heads") == 32);
  CHECK(values.at("d-model") == 1024);
  CHECK(values.at("dropout") == 0.3);  // the shortest decimal, as ModelConfig writes it
  CHECK_FALSE(values.contains("config"));
  CHECK_FALSE(values.contains("dump-config"));

  write(dir.file("dump.json"), dumped.text);
  CHECK(options(kTrain, {"--config", dir.file("dump.json")}).values() == values);
  // Byte for byte, defaults too (a number's default 0 dumped as 0, then read back as 0.0).
  for (auto p : {kTrain, tx::app::kTranslate, tx::app::kScore, kAverage}) {
    const std::string first = parse(p, {"--dump-config"}).text;
    write(dir.file("again.json"), first);
    CHECK(parse(p, {"--config", dir.file("again.json"), "--dump-config"}).text == first);
  }

  // Required options are not needed to dump; given ones are dumped.
  tx::app::ParseResult avg = parse(kAverage, {"-o", "out.safetensors", "a", "b", "--dump-config"});
  REQUIRE(avg.finished);
  CHECK(json::parse(avg.text) == json{{"inputs", {"a", "b"}},
                                      {"last", 0},
                                      {"output", "out.safetensors"},
                                      {"quiet", false},
                                      {"verbose", false}});
  CHECK(parse(kAverage, {"--dump-config"}).finished);
}

TEST_CASE("options: --help prints the program's flags and runs nothing", "[options]") {
  tx::app::ParseResult r = parse(kTrain, {"--help"});
  CHECK(r.finished);
  CHECK_THAT(r.text, Contains("--d-model") && Contains("--config") && Contains("--device"));
  CHECK_THAT(parse(kAverage, {"--help"}).text, Contains("--output") && !Contains("--d-model"));
}

TEST_CASE("options: each mistake is one UsageError naming the flag or key and the fix",
          "[options]") {
  tx::test::TempDir dir;
  CHECK_THAT(fails(kTrain, {"--bogus"}), Contains("--bogus") && Contains("--help"));
  CHECK_THAT(fails(kAverage, {"--d-model", "8"}), Contains("--d-model"));  // tx-train's only
  CHECK_THAT(fails(kTrain, {"--d-model", "abc"}), Contains("--d-model") && Contains("abc"));
  CHECK_THAT(fails(kTrain, {"--d-model", "0"}), Contains("--d-model") && Contains("positive"));
  CHECK_THAT(fails(kTrain, {"--dropout", "1.5"}), Contains("--dropout") && Contains("[0, 1)"));
  CHECK_THAT(fails(kTrain, {"--device", "gpu"}), Contains("--device") && Contains("cuda:N"));
  CHECK_THAT(fails(kTrain, {"--device", "cuda:x"}), Contains("--device"));
  CHECK_THAT(fails(kTrain, {"--cpu-threads", "-1"}), Contains("--cpu-threads"));
  CHECK_THAT(fails(kTrain, {"--task", "transformer-huge"}),
             Contains("--task") && Contains("transformer-big"));
  CHECK_THAT(fails(kTrain, {"--tied-embeddings", "some"}), Contains("none, decoder, all"));
  CHECK_THAT(fails(kTrain, {"--heads", "7"}), Contains("heads") && Contains("divide"));
  CHECK_THAT(fails(kTrain, {"--quiet", "--verbose"}), Contains("--quiet"));
  CHECK_THAT(fails(kAverage, {"a", "b"}), Contains("--output is required"));
  CHECK_THAT(fails(kAverage, {"a", "--output", ""}), Contains("--output is empty"));
  CHECK_THAT(fails(kTrain, {"--after-updates", "5", "--after-updates", "6"}),
             Contains("--after-updates is given 2 times; give it once"));
  CHECK_THAT(fails(tx::app::kTranslate, {"-m", "x", "--alignment", "0.5", "soft"}),
             Contains("--alignment takes one value but is given 2"));
  CHECK_THAT(fails(tx::app::kTranslate, {"-m", "x", "--seed", "18446744073709551616"}),
             Contains("--seed") && Contains("beyond the integers"));
  // CLI11 read hex and octal too ("010" as 8): integers are decimal, as in a JSON config.
  CHECK_THAT(fails(tx::app::kTranslate, {"-m", "x", "--seed", "0x10"}),
             Contains("--seed") && Contains("'0x10' is not a whole number"));
  CHECK_THAT(fails(kTrain, {"--after-updates", "1e3"}), Contains("'1e3' is not a whole number"));
  CHECK_THAT(fails(kTrain, {"--after-updates", "-"}), Contains("'-' is not a whole number"));
  // CLI11 takes an option's first value whatever it is: the flag after a list option without
  // its values became one of them.
  CHECK_THAT(fails(kTrain, {"--vocabs", "--seed", "30"}),
             Contains("--vocabs takes '--seed' as its value, but that is a flag: give the values "
                      "of --vocabs right after it"));
  CHECK_THAT(fails(kTrain, {"--valid-metrics", "-m", "x"}), Contains("takes '-m' as its value"));
  CHECK_THAT(fails(kTrain, {"--vocabs", "--seed=30"}), Contains("takes '--seed=30' as its value"));
  // Values a run refuses are refused by --dump-config too (it printed them, exit 0).
  for (const auto& [flag, value, message] : std::vector<std::array<std::string, 3>>{
           {"--exponential-smoothing", "2", "has the factor '2'; it must be a number at least 0"},
           {"--sentencepiece-alphas", "-1", "has '-1', which is not an alpha"},
           {"--train-sets", "a b c", "is 3 values; give 2 files (source, target)"},
           {"--vocabs", "a b c", "is 3 values; give 1 (joint) or 2 (source, target)"}}) {
    std::vector<std::string> args = {flag};
    std::istringstream words(value);
    for (std::string w; words >> w;) args.push_back(w);
    args.push_back("--dump-config");
    CHECK_THAT(fails(kTrain, args), Contains(flag + ": ") && Contains(message));
  }
  CHECK(options(kTrain, {"--save-freq", "04000"}).integer("save-freq") == 4000);
  CHECK(options(kTrain, {"--after-updates", "010"}).integer("after-updates") == 10);
  CHECK(options(kTrain, {"--seed", "007"}).integer("seed") == 7);
  CHECK(options(kTrain, {"--seed", "+0"}).integer("seed") == 0);
  CHECK_THAT(fails(kTrain, {"--seed", "-08"}), Contains("-8 must be 0 or more"));
  // A short and a long spelling are two givings, not two values of one.
  CHECK_THAT(fails(tx::app::kTranslate, {"-m", "x", "-b", "5", "--beam-size", "6"}),
             Contains("--beam-size is given 2 times"));
  CHECK_THAT(fails(tx::app::kTranslate, {"-m", "x", "--alignment", "hard", "--alignment", "soft"}),
             Contains("--alignment is given 2 times"));
  // A switch too, whatever values it is given: CLI11 let the last one win.
  CHECK_THAT(fails(tx::app::kTranslate, {"-m", "x", "--int8", "--int8=false"}),
             Contains("--int8 is given 2 times; give it once"));
  CHECK_THAT(fails(kTrain, {"--quiet", "--quiet", "--quiet"}),
             Contains("--quiet is given 3 times"));
  CHECK(options(tx::app::kTranslate, {"-m", "x", "--int8=false"}).flag("int8") == false);
  // tx-average without inputs is refused by the program, which also knows --last (average_test).

  const std::string missing = dir.file("missing.json");
  CHECK_THAT(fails(kTrain, {"--config", missing}), Contains(missing));
  write(dir.file("bad.json"), "{\"heads\": 8,");
  CHECK_THAT(fails(kTrain, {"--config", dir.file("bad.json")}),
             Contains("bad.json") && Contains("not valid JSON"));
  // A Marian config (YAML) is named as such.
  write(dir.file("marian.yml"), "after-epochs: 3\nlearn-rate: 0.0003\n");
  CHECK_THAT(fails(kTrain, {"--config", dir.file("marian.yml")}),
             Contains("configs are JSON, not YAML"));
  write(dir.file("list.json"), "[1, 2]");
  CHECK_THAT(fails(kTrain, {"--config", dir.file("list.json")}), Contains("JSON object"));
  write(dir.file("key.json"), R"({"d_model": 512})");
  CHECK_THAT(fails(kTrain, {"--config", dir.file("key.json")}),
             Contains("key.json") && Contains("'d_model' is not an option of tx-train"));
  // JSON keeps the last of two equal keys silently: the file is refused instead.
  write(dir.file("twice.json"), R"({"d-model": 32, "heads": 2, "d-model": 64})");
  CHECK_THAT(fails(kTrain, {"--config", dir.file("twice.json")}),
             Contains("twice.json") && Contains("'d-model' is given twice"));
  write(dir.file("type.json"), R"({"heads": "8"})");
  CHECK_THAT(fails(kTrain, {"--config", dir.file("type.json")}),
             Contains("type.json") && Contains("'heads'") && Contains("integer"));
}

TEST_CASE("options: another engine's flag or another tx program's is named with tx's own",
          "[options]") {
  const auto translate = tx::app::kTranslate, score = tx::app::kScore;
  CHECK_THAT(fails(translate, {"--models", "a.npz", "b.npz"}),
             Contains("--models is Marian's name") && Contains("-m/--model"));
  CHECK_THAT(fails(translate, {"-m", "a", "--mini-batch-words", "500"}),
             Contains("Marian's") && Contains("--max-tokens"));
  CHECK_THAT(fails(translate, {"-m", "a", "--lenpen=0.6"}),
             Contains("--lenpen is fairseq's") && Contains("--normalize"));
  CHECK_THAT(fails(translate, {"-m", "a", "-d", "0", "1"}), Contains("--device cuda:N"));
  CHECK_THAT(fails(translate, {"-m", "a", "--max-length", "100"}), Contains("--max-length-factor"));
  CHECK_THAT(fails(translate, {"-m", "a", "-n"}), Contains("alone means 0.6"));
  CHECK_THAT(fails(translate, {"-m", "a", "--output-sampling"}),
             Contains("--output-sampling full"));
  CHECK_THAT(fails(translate, {"-m", "a", "--precision", "float16"}),
             Contains("Marian's name; tx's is fp16"));
  CHECK_THAT(fails(score, {"-r", "ref", "-tok", "intl"}),
             Contains("sacreBLEU's") && Contains("--tokenize"));
  CHECK_THAT(fails(score, {"-r", "ref", "-b"}), Contains("--score-only"));
  CHECK_THAT(fails(kTrain, {"--devices", "0", "1"}), Contains("mpirun for several"));
  CHECK_THAT(fails(translate, {"-m", "a", "--devices", "0"}), !Contains("mpirun"));
  CHECK_THAT(fails(score, {"-r", "ref", "-w", "2"}), Contains("marian-scorer's"));
  CHECK_THAT(fails(translate, {"-m", "a", "--n-best"}), Contains("--n-best 5"));
  // A flag of another tx program.
  CHECK_THAT(fails(kTrain, {"--int8"}),
             Contains("--int8 is a flag of tx-translate and tx-score, not of tx-train"));
  CHECK_THAT(fails(translate, {"-m", "a", "--after-epochs", "3"}),
             Contains("flag of tx-train, not of tx-translate"));
  // A flag nobody has keeps CLI11's words.
  CHECK_THAT(fails(translate, {"-m", "a", "--bogus"}), Contains("not expected"));
  // The table names no flag a program has: the same words parse where they are tx's.
  CHECK(options(kTrain, {"--max-length", "100"}).integer("max-length") == 100);
  CHECK(options(score, {"-i", "hyp.txt"}).text("input") == "hyp.txt");
}
