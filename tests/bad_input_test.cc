// The bad-input checklist, through the real programs: every way a user's file can be wrong
// (missing, a directory, empty, truncated, corrupt offsets, the wrong vocabulary, NUL bytes,
// invalid UTF-8, a wrong --config type) ends with a non-zero exit, nothing on stdout and one
// stderr line that names the thing; the inputs tx accepts on purpose (CRLF, a 100,000-character
// line, an empty input) give the documented result.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "support/programs.h"

namespace {

using Catch::Contains;
using tx::test::one_line;
using tx::test::Run;
using tx::test::TempDir;
using tx::test::write_file;

// A tiny trained model directory "m" (model, checkpoint, vocabulary) and the reversal corpus
// it was trained on, plus the bad files of the checklist, all in one scratch directory.
struct Files {
  Files() {
    tx::test::write_reversal_corpus(dir.file("train.src"), dir.file("train.tgt"), 200, 7);
    const Run r = run(TX_TRAIN_BIN, train_flags("m") + " --after-updates 2");
    REQUIRE(r.status == 0);
    model = dir.file("m/model.safetensors");
    vocab = dir.file("m/vocab.spm");
    // A second model with a smaller vocabulary: the wrong vocabulary for the first.
    REQUIRE(run(TX_TRAIN_BIN, train_flags("small", 20) + " --after-updates 1").status == 0);
    const std::string bytes = tx::test::slurp(model);
    write_file(dir.file("empty.txt"), "");
    write_file(dir.file("empty.safetensors"), "");
    write_file(dir.file("truncated.safetensors"), bytes.substr(0, bytes.size() - 100));
    write_file(dir.file("outside.safetensors"), offsets_outside(bytes));
    write_file(dir.file("nul.txt"), std::string("ab cd\nab\0cd\n", 12));
    write_file(dir.file("latin1.txt"), "ab cd\nab \xe9 cd\n");
    write_file(dir.file("utf16.txt"), std::string("\xff\xfe"
                                                  "a\0b\0\n\0",
                                                  8));
    write_file(dir.file("wrong_type.translate.json"), R"({"beam-size": "five"})");
    write_file(dir.file("wrong_type.train.json"), R"({"learn-rate": "fast"})");
    write_file(dir.file("wrong_type.score.json"), R"({"normalize": [1]})");
    write_file(dir.file("wrong_type.average.json"), R"({"last": 2.5})");
  }

  std::string train_flags(const std::string& model_dir, int vocab_size = 30) const {
    return "--train-sets " + dir.file("train.src") + " " + dir.file("train.tgt") + " --model " +
           dir.file(model_dir) +
           " --d-model 16 --d-ff 32 --heads 2 --enc-layers 1 --dec-layers 1 --dim-vocabs " +
           std::to_string(vocab_size) + " --max-tokens 128 --cpu-threads 1 --quiet";
  }
  // "-m MODEL -v VOCAB VOCAB", with another model file when given.
  std::string model_args(const std::string& model_file = "") const {
    return "-m " + (model_file.empty() ? model : model_file) + " -v " + vocab + " " + vocab +
           " --cpu-threads 1";
  }
  Run run(const std::string& program, const std::string& args) const {
    return tx::test::run_program(dir, program, args);
  }

  // The model's bytes with the last tensor's data_offsets moved past the end of the file.
  static std::string offsets_outside(const std::string& bytes) {
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
    std::string last;
    uint64_t last_end = 0;
    for (auto& [name, entry] : header.items())
      if (name != "__metadata__" && entry["data_offsets"][1].get<uint64_t>() > last_end) {
        last = name;
        last_end = entry["data_offsets"][1].get<uint64_t>();
      }
    const uint64_t size = last_end - header[last]["data_offsets"][0].get<uint64_t>();
    header[last]["data_offsets"] = {last_end + 4096, last_end + 4096 + size};
    const std::string text = header.dump();
    const uint64_t length = text.size();
    std::string out(reinterpret_cast<const char*>(&length), 8);
    return out + text + bytes.substr(8 + n);
  }

  TempDir dir;
  std::string model, vocab;
};

// The failure contract: exit `status`, nothing on stdout (but the `written` lines before a bad
// input line), one stderr line from `program` that contains every one of `names`.
void check_fails(const Run& r, const std::string& program, int status,
                 const std::vector<std::string>& names, int64_t written = 0) {
  INFO("stderr: " << r.err);
  CHECK(r.status == status);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == written);
  if (written == 0) CHECK(r.out.empty());
  CHECK(one_line(r.err));
  CHECK_THAT(r.err, Catch::StartsWith(program + ": error: "));
  for (const std::string& name : names) CHECK_THAT(r.err, Contains(name));
}

}  // namespace

TEST_CASE("bad input: tx-translate names the bad model, vocabulary, input or config",
          "[apps][bad_input]") {
  Files f;
  const std::string in = " -i " + f.dir.file("train.src");
  auto translate = [&](const std::string& args) { return f.run(TX_TRANSLATE_BIN, args); };
  const std::string p = "tx-translate";
  check_fails(translate(f.model_args(f.dir.file("missing.safetensors")) + in), p, 1,
              {"missing.safetensors", "No such file"});
  check_fails(translate(f.model_args(f.dir.file("m")) + in), p, 1, {"is a directory"});
  check_fails(translate(f.model_args(f.dir.file("empty.safetensors")) + in), p, 1,
              {"empty.safetensors", "truncated"});
  check_fails(translate(f.model_args(f.dir.file("truncated.safetensors")) + in), p, 1,
              {"truncated.safetensors", "truncated"});
  check_fails(translate(f.model_args(f.dir.file("outside.safetensors")) + in), p, 1,
              {"outside.safetensors", "data_offsets"});
  const std::string small = f.dir.file("small/vocab.spm");
  check_fails(translate("-m " + f.model + " -v " + small + " " + small + in), p, 1,
              {"small/vocab.spm", "has 20 pieces", "the vocabulary the model was trained with"});
  check_fails(translate("-m " + f.model + " -v " + f.dir.file("train.src") + in), p, 1,
              {"train.src", "not a SentencePiece model"});
  check_fails(translate(f.model_args() + " -i " + f.dir.file("missing.txt")), p, 1,
              {"missing.txt"});
  check_fails(translate(f.model_args() + " -i " + f.dir.file("m")), p, 1, {"is a directory"});
  // The input streams through: line 1 is translated and written before line 2's error.
  check_fails(translate(f.model_args() + " -i " + f.dir.file("nul.txt")), p, 1,
              {"nul.txt' line 2", "NUL byte"}, 1);
  check_fails(translate(f.model_args() + " -i " + f.dir.file("latin1.txt")), p, 1,
              {"latin1.txt' line 2", "invalid UTF-8", "iconv"}, 1);
  check_fails(translate(f.model_args() + " -i " + f.dir.file("utf16.txt")), p, 1,
              {"utf16.txt' line 1", "UTF-16", "iconv"});
  check_fails(
      translate(f.model_args() + " --config " + f.dir.file("wrong_type.translate.json") + in), p, 2,
      {"wrong_type.translate.json", "beam-size", "expected an integer"});
  check_fails(translate(f.model_args() + " --tf32" + in), p, 2, {"--tf32", "--device cpu"});
  check_fails(translate(f.model_args() + " --output-sampling best" + in), p, 2,
              {"--output-sampling", "'best'", "topk K"});
  check_fails(translate(f.model_args() + " --output-sampling topk" + in), p, 2,
              {"--output-sampling topk", "K is missing"});
  check_fails(translate(f.model_args() + " --output-sampling topk 2.5" + in), p, 2,
              {"topk 2.5", "positive integer"});
  check_fails(translate(f.model_args() + " --output-sampling full hot" + in), p, 2,
              {"temperature 'hot'"});
  check_fails(translate(f.model_args() + " --output-sampling full 0" + in), p, 2,
              {"temperature 0", "must lie in (0, 1e30]"});
  // Values beyond what a field holds are named as written, not as a clamp or an infinity.
  check_fails(translate(f.model_args() + " --seed 18446744073709551616" + in), p, 2,
              {"--seed", "18446744073709551616 is beyond the integers"});
  check_fails(translate(f.model_args() + " --output-sampling topk 2000000000" + in), p, 2,
              {"topk 2000000000", "beyond any vocabulary", "'full'"});
  check_fails(translate(f.model_args() + " --weights 1e300" + in), p, 2,
              {"--weights: 1e300", "outside the weights"});
  check_fails(translate(f.model_args() + " --weights 1e400" + in), p, 2,
              {"--weights: 1e400", "outside the weights"});
  check_fails(translate(f.model_args() + " --output-sampling full 1e400" + in), p, 2,
              {"temperature 1e400", "(0, 1e30]"});
  check_fails(translate(f.model_args() + " --max-length-factor 1e39" + in), p, 2,
              {"--max-length-factor", "[0, 1e38]"});
  check_fails(translate(f.model_args() + " --output-sampling full --n-best 2" + in), p, 2,
              {"--output-sampling", "--n-best 1", "--seed"});
  const Run sampled = translate(f.model_args() + " --output-sampling topk 3 0.7 --quiet" + in);
  INFO(sampled.err);
  CHECK(sampled.status == 0);
  const std::string lines = tx::test::slurp(f.dir.file("train.src"));
  CHECK(std::count(sampled.out.begin(), sampled.out.end(), '\n') ==
        std::count(lines.begin(), lines.end(), '\n'));
}

TEST_CASE("bad input: tx-translate's documented results for odd but valid input",
          "[apps][bad_input]") {
  Files f;
  auto translate = [&](const std::string& file) {
    return f.run(TX_TRANSLATE_BIN, f.model_args() + " --quiet -i " + f.dir.file(file));
  };
  SECTION("an empty input: no output, exit 0") {
    const Run r = translate("empty.txt");
    CHECK(r.status == 0);
    CHECK(r.out.empty());
    CHECK(r.err.empty());
  }
  SECTION("CRLF line endings read as LF") {
    write_file(f.dir.file("lf.txt"), "ab cd ef\nba dc\n");
    write_file(f.dir.file("crlf.txt"), "ab cd ef\r\nba dc\r\n");
    const Run lf = translate("lf.txt"), crlf = translate("crlf.txt");
    REQUIRE(lf.status == 0);
    CHECK(crlf.status == 0);
    CHECK(crlf.out == lf.out);
    CHECK(tx::test::split_lines(crlf.out).size() == 2);
  }
  SECTION("a 100,000-character line is cropped to the model's positions, with a warning") {
    std::string line;
    while (line.size() < 100000) line += "ab cd ";
    write_file(f.dir.file("long.txt"), "ab cd\n" + line + "\nba\n");
    // Output as short as the model allows: the test is about the input side.
    const Run r = f.run(TX_TRANSLATE_BIN, f.model_args() +
                                              " --beam-size 1 --max-length-factor 0"
                                              " --max-length-b 2 -i " +
                                              f.dir.file("long.txt"));
    CHECK(r.status == 0);
    CHECK(tx::test::split_lines(r.out).size() == 3);
    CHECK_THAT(r.err, Contains("cropped 1 source line (the first: line 2) to the 1023 tokens"));
  }
  SECTION("a --force-decode prefix beyond the positions is cropped and counted, as a source is") {
    std::string prefix;
    while (prefix.size() < 20000) prefix += "ab ";
    write_file(f.dir.file("prefix.txt"), "ab cd\nba\t" + prefix + "\n");
    const Run r = f.run(TX_TRANSLATE_BIN, f.model_args() + " --beam-size 1 --force-decode -i " +
                                              f.dir.file("prefix.txt"));
    CHECK(r.status == 0);
    const std::vector<std::string> lines = tx::test::split_lines(r.out);
    REQUIRE(lines.size() == 2);
    CHECK(lines[1].rfind("ab ab ab", 0) == 0);  // the prefix's start, forced
    CHECK_THAT(
        r.err,
        Contains("cropped 1 line (source or prefix) (the first: line 2) to the 1023 tokens"));
  }
}

TEST_CASE("bad input: tx-score names the bad file in both modes", "[apps][bad_input]") {
  Files f;
  const std::string p = "tx-score";
  auto score = [&](const std::string& args) { return f.run(TX_SCORE_BIN, args); };
  const std::string src = " --src " + f.dir.file("train.src");
  check_fails(score(f.model_args(f.dir.file("truncated.safetensors")) + src + " --tgt " +
                    f.dir.file("train.tgt")),
              p, 1, {"truncated.safetensors"});
  check_fails(score(f.model_args() + src + " --tgt " + f.dir.file("missing.txt")), p, 1,
              {"missing.txt"});
  check_fails(score(f.model_args() + src + " --tgt " + f.dir.file("m")), p, 1, {"is a directory"});
  check_fails(score(f.model_args() + src + " --tgt " + f.dir.file("empty.txt")), p, 1,
              {"empty.txt", "has 0"});
  check_fails(
      score(f.model_args() + " --src " + f.dir.file("nul.txt") + " --tgt " + f.dir.file("nul.txt")),
      p, 1, {"nul.txt' line 2", "NUL byte"});
  std::string line;
  while (line.size() < 100000) line += "ab ";
  write_file(f.dir.file("long.txt"), line + "\n");
  check_fails(score(f.model_args() + " --src " + f.dir.file("long.txt") + " --tgt " +
                    f.dir.file("long.txt")),
              p, 1, {"long.txt", "max_length is 1024", "split the pair"});
  // Metrics mode reads as sacreBLEU does: a NUL is text there, invalid UTF-8 is not.
  const std::string hyp = " -i " + f.dir.file("train.tgt");
  check_fails(score("-r " + f.dir.file("missing.txt") + hyp), p, 1, {"missing.txt"});
  check_fails(score("-r " + f.dir.file("m") + hyp), p, 1, {"is a directory"});
  check_fails(score("-r " + f.dir.file("latin1.txt") + " -i " + f.dir.file("latin1.txt")), p, 1,
              {"latin1.txt", "line 2", "UTF-8"});
  check_fails(score("-r " + f.dir.file("empty.txt") + hyp), p, 1,
              {"reference file '" + f.dir.file("empty.txt") + "' has 0 lines", "train.tgt"});
  check_fails(score("--config " + f.dir.file("wrong_type.score.json") + " -r " +
                    f.dir.file("train.tgt") + hyp),
              p, 2, {"wrong_type.score.json", "normalize", "expected a number"});
}

TEST_CASE("bad input: tx-train names the bad corpus or config, and writes nothing",
          "[apps][bad_input]") {
  Files f;
  const std::string p = "tx-train";
  auto train = [&](const std::string& src, const std::string& tgt, const std::string& more = "") {
    return f.run(TX_TRAIN_BIN, "--train-sets " + f.dir.file(src) + " " + f.dir.file(tgt) +
                                   " --model " + f.dir.file("out") +
                                   " --d-model 16 --d-ff 32 --heads 2 --enc-layers 1"
                                   " --dec-layers 1 --dim-vocabs 30 --max-tokens 128"
                                   " --cpu-threads 1 --quiet --after-updates 1" +
                                   more);
  };
  check_fails(train("missing.txt", "train.tgt"), p, 1, {"missing.txt", "--train-sets"});
  check_fails(train("train.src", "m"), p, 1, {"'" + f.dir.file("m") + "': it is a directory"});
  check_fails(train("train.src", "empty.txt"), p, 1, {"empty.txt' has 0;"});
  // (The vocabulary is trained first: no refused run above left one behind.)
  check_fails(train("empty.txt", "empty.txt"), p, 1, {"empty.txt'", "no non-empty line"});
  check_fails(train("latin1.txt", "latin1.txt"), p, 1, {"latin1.txt' line 2", "invalid UTF-8"});
  check_fails(train("nul.txt", "nul.txt"), p, 1, {"nul.txt' line 2", "NUL byte"});
  check_fails(train("train.src", "train.tgt", " --config " + f.dir.file("wrong_type.train.json")),
              p, 2, {"wrong_type.train.json", "learn-rate", "expected a number"});
  check_fails(train("train.src", "train.tgt", " --lr-schedule linear --lr-warmup 5"), p, 1,
              {"'linear'", "last update (1)", "warmup (5)", "--lr-warmup"});
  check_fails(train("train.src", "train.tgt",
                    " --transformer-depth-scaling --pretrained-model " + f.dir.file("m")),
              p, 2, {"--transformer-depth-scaling", "--pretrained-model", "drop one"});
  // A model beyond any machine's memory (about 6 TB of d_ff weights): past the sizes a model
  // may have, named before anything is allocated.
  check_fails(f.run(TX_TRAIN_BIN, "--d-ff 3000000000 --dry-run"), p, 2,
              {"--d-ff: 3000000000 must be positive and at most 131072"});
  check_fails(f.run(TX_TRAIN_BIN, "--position-offset 2000000 --dry-run"), p, 2,
              {"--position-offset: 2000000 must be 0 or more and at most 1048576"});
  // Within those sizes but beyond the memory there is (4 GB of address space here, 32 GiB a
  // weight): one line, not "std::bad_alloc" or a crash. (AddressSanitizer needs the address
  // space for its shadow memory.)
#if !defined(__SANITIZE_ADDRESS__)
  check_fails(f.run(std::string("ulimit -v 4000000 && ") + TX_TRAIN_BIN,
                    "--dim-vocabs 8 --d-model 65536 --d-ff 131072 --dry-run"),
              p, 1, {"out of host memory", "--d-model"});
#endif
  check_fails(f.run(TX_TRAIN_BIN, "--train-sets a b -m ''"), p, 2, {"--model is empty"});
  // None of the failures left a model behind.
  CHECK_FALSE(std::filesystem::exists(f.dir.file("out/model.safetensors")));
  CHECK_FALSE(std::filesystem::exists(f.dir.file("out/checkpoint.safetensors")));
}

TEST_CASE("bad input: tx-average names the bad checkpoint and writes no output",
          "[apps][bad_input]") {
  Files f;
  const std::string p = "tx-average";
  const std::string out = f.dir.file("avg.safetensors");
  auto average = [&](const std::string& args) {
    return f.run(TX_AVERAGE_BIN, args + " -o " + out + " --quiet");
  };
  check_fails(average(f.model + " " + f.dir.file("missing.safetensors")), p, 1,
              {"missing.safetensors"});
  check_fails(average(f.model + " " + f.dir.file("m")), p, 1, {"is a directory"});
  check_fails(average(f.model + " " + f.dir.file("empty.safetensors")), p, 1,
              {"empty.safetensors"});
  check_fails(average(f.model + " " + f.dir.file("truncated.safetensors")), p, 1,
              {"truncated.safetensors"});
  check_fails(average(f.model + " " + f.dir.file("outside.safetensors")), p, 1,
              {"outside.safetensors", "data_offsets"});
  check_fails(average(f.model + " " + f.dir.file("small/model.safetensors")), p, 1,
              {"small/model.safetensors", "another model config"});
  check_fails(average("-m " + f.dir.file("m") + " " + f.model), p, 2, {"--last"});
  check_fails(average("--config " + f.dir.file("wrong_type.average.json") + " " + f.model), p, 2,
              {"wrong_type.average.json", "last", "expected an integer"});
  CHECK_FALSE(std::filesystem::exists(out));
}
