// tx-train and tx-average through the real binaries: --dry-run parameter counts, --keep-last
// snapshots averaged by tx-average --last, the model file repaired from the checkpoint after a
// crash between the two renames, non-finite updates skipped, and the shared option names.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "gradient_check.h"
#include "io/safetensors.h"
#include "support/programs.h"
#include "support/train_runs.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace {

using tx::test::Run;
using tx::test::TempDir;
namespace fs = std::filesystem;

Run tx_train(const TempDir& dir, const std::string& args) {
  return tx::test::run_program(dir, TX_TRAIN_BIN, args);
}
Run tx_average(const TempDir& dir, const std::string& args) {
  return tx::test::run_program(dir, TX_AVERAGE_BIN, args);
}

using tx::test::checkpoint_update;
using tx::test::tensors;
using tx::test::tiny_flags;
using tx::test::update_of;

// Parameters of the paper's Transformer in closed form: embeddings shared by source, target
// and output (one V x d table); per encoder layer self-attention (4 d x d + 4 d), the
// feed-forward layer (2 d x d_ff + d_ff + d) and 2 LayerNorms (2 x 2 d); per decoder layer one
// attention more and 3 LayerNorms.
int64_t closed_form(int64_t vocab, int64_t d, int64_t d_ff, int64_t layers) {
  const int64_t attention = 4 * d * d + 4 * d, ffn = 2 * d * d_ff + d_ff + d, norm = 2 * d;
  return vocab * d + layers * (attention + ffn + 2 * norm) +
         layers * (2 * attention + ffn + 3 * norm);
}

int64_t dry_run_parameters(const std::string& out) {
  const size_t at = out.rfind("parameters: ");
  REQUIRE(at != std::string::npos);
  REQUIRE(out.find('\n', at) == out.size() - 1);  // the last line
  return std::stoll(out.substr(at + 12));
}

}  // namespace

TEST_CASE(
    "tx-train --dry-run: transformer-base and -big counts match the closed form and "
    "the paper's Table 3",
    "[train_cli]") {
  TempDir dir;
  // The paper's shared vocabulary of about 37,000 BPE tokens (English-German); no data read.
  Run base = tx_train(dir, "--task transformer-base --dim-vocabs 37000 --dry-run");
  INFO(base.err);
  REQUIRE(base.status == 0);
  const int64_t base_count = dry_run_parameters(base.out);
  CHECK(base_count == closed_form(37000, 512, 2048, 6));
  CHECK(std::abs(base_count - 65e6) / 65e6 < 0.03);  // Table 3: 65M
  CHECK(base.out.find("encoder.layers (6 x 3,152,384)") != std::string::npos);
  CHECK(base.out.find("embed_tokens") != std::string::npos);

  Run big = tx_train(dir, "--task transformer-big --dim-vocabs 37000 --dry-run --quiet");
  REQUIRE(big.status == 0);
  const int64_t big_count = dry_run_parameters(big.out);
  CHECK(big_count == closed_form(37000, 1024, 4096, 6));
  CHECK(std::abs(big_count - 213e6) / 213e6 < 0.03);  // Table 3: 213M

  // Untied embeddings: source, target and output tables apart; the counts say so.
  Run untied =
      tx_train(dir, "--task transformer-base --dim-vocabs 1000 --tied-embeddings none --dry-run");
  REQUIRE(untied.status == 0);
  CHECK(dry_run_parameters(untied.out) == closed_form(1000, 512, 2048, 6) + 2 * 1000 * 512);
  CHECK(untied.out.find("decoder.output_proj") != std::string::npos);
  CHECK(dir.entries().size() == 2);  // stdout and stderr: nothing else written
}

TEST_CASE("tx-train --keep-last keeps the newest snapshots, tx-average --last averages them",
          "[train_cli]") {
  TempDir dir;
  Run r = tx_train(dir, tiny_flags(dir) + " --after-updates 8 --save-freq 2 --keep-last 3");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto snaps = tx::train::Trainer::snapshots(dir.file("m"));
  REQUIRE(snaps.size() == 3);
  CHECK(snaps[0].first == 4);
  CHECK(snaps[2].first == 8);
  CHECK_FALSE(fs::exists(dir.file("m/model.u2.safetensors")));
  // The newest snapshot is the final model, and both name their update.
  CHECK(tensors(snaps[2].second) == tensors(dir.file("m/model.safetensors")));
  CHECK(update_of(dir.file("m/model.safetensors")) == "8");
  CHECK(update_of(snaps[0].second) == "4");

  Run avg = tx_average(dir, "--last 2 -m " + dir.file("m") + " -o " + dir.file("avg.safetensors"));
  INFO(avg.err);
  REQUIRE(avg.status == 0);
  CHECK(avg.out.empty());
  const auto a = tensors(dir.file("avg.safetensors")), u6 = tensors(snaps[1].second),
             u8 = tensors(snaps[2].second);
  REQUIRE(a.size() == u8.size());
  for (const auto& [name, values] : a) {
    INFO(name);
    REQUIRE(values.size() == u8.at(name).size());
    for (size_t i = 0; i < values.size(); ++i)
      REQUIRE(values[i] == Approx((double(u6.at(name)[i]) + u8.at(name)[i]) / 2).margin(1e-7));
  }
  CHECK(u6 != u8);  // the two snapshots differ, so the mean is not either of them

  Run too_many = tx_average(dir, "--last 4 -m " + dir.file("m") + " -o " + dir.file("x"));
  CHECK(too_many.status == 1);
  CHECK(too_many.err.find("holds 3 model.u<update>.safetensors snapshots") != std::string::npos);
  CHECK(too_many.err.find("--keep-last 4") != std::string::npos);
  Run no_dir = tx_average(dir, "--last 2 -o " + dir.file("x"));
  CHECK(no_dir.status == 2);
  CHECK(no_dir.err.find("-m DIR") != std::string::npos);
  Run both = tx_average(
      dir, "--last 2 -m " + dir.file("m") + " -o " + dir.file("x") + " " + snaps[0].second);
  CHECK(both.status == 2);
  CHECK_FALSE(fs::exists(dir.file("x")));
}

TEST_CASE(
    "tx-train: a model file behind its checkpoint (a crash between the renames) is "
    "rewritten from the checkpoint on resume",
    "[train_cli]") {
  TempDir dir;
  REQUIRE(
      tx_train(dir, tiny_flags(dir) + " --after-updates 6 --save-freq 2 --keep-last 2").status ==
      0);
  const auto at6 = tensors(dir.file("m/model.safetensors"));
  // The crash: the checkpoint of update 6 landed, model.safetensors is still update 4's.
  fs::copy_file(dir.file("m/model.u4.safetensors"), dir.file("m/model.safetensors"),
                fs::copy_options::overwrite_existing);
  fs::remove(dir.file("m/model.u6.safetensors"));
  REQUIRE(update_of(dir.file("m/model.safetensors")) == "4");

  // Resume through the library and stop at the first update: the repair comes before it.
  auto be = tx::test::cpu_backend();
  tx::train::TrainerOptions o;
  o.model_dir = dir.file("m");
  o.train_src = dir.file("train.src");
  o.train_tgt = dir.file("train.tgt");
  o.model = tx::train::read_model_config(dir.file("m/checkpoint.safetensors"));
  o.max_tokens = 128;
  o.keep_last = 2;
  o.quiet = true;
  o.after_update = [](int64_t) { throw tx::Error("crash"); };
  CHECK_THROWS_WITH(tx::train::Trainer(*be, o).run(), "crash");
  CHECK(update_of(dir.file("m/model.safetensors")) == "6");
  CHECK(tensors(dir.file("m/model.safetensors")) == at6);
  CHECK(tensors(dir.file("m/model.u6.safetensors")) == at6);
}

TEST_CASE("tx-train: an update whose gradient norm is not finite is skipped without clipping",
          "[train_cli]") {
  TempDir dir;
  // A learning rate of 1e30 blows the weights up after the first update; the next gradients
  // overflow. Without the check (clip-norm 0 skipped it) NaN would reach every weight.
  std::string flags = tiny_flags(dir, "n");
  flags.replace(flags.find(" --quiet"), 8, "");  // the skip is logged
  flags.replace(flags.find("--learn-rate 0.001"), 18, "--learn-rate 1e30");
  Run r = tx_train(dir, flags + " --after-updates 4 --clip-norm 0");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("gradient norm is not finite; update skipped") != std::string::npos);
  for (const auto& [name, values] : tensors(dir.file("n/model.safetensors"))) {
    INFO(name);
    for (float x : values) REQUIRE(std::isfinite(x));
  }
}

TEST_CASE("tx-train: a resume under other model options is refused before any vocabulary",
          "[train_cli]") {
  TempDir dir;
  REQUIRE(tx_train(dir, tiny_flags(dir) + " --after-updates 2").status == 0);
  // Separate vocabularies would be other files, trained before the fingerprint could tell.
  Run tied = tx_train(dir, tiny_flags(dir) + " --after-updates 3 --tied-embeddings none");
  CHECK(tied.status == 1);
  CHECK_THAT(tied.err, Catch::Contains("tied_embeddings is \"all\" there but \"none\" here"));
  CHECK_FALSE(fs::exists(dir.file("m/vocab.src.spm")));
  std::string wider = tiny_flags(dir);
  wider.replace(wider.find("--d-ff 32"), 9, "--d-ff 64");
  Run wide = tx_train(dir, wider + " --after-updates 3");
  CHECK(wide.status == 1);
  CHECK_THAT(wide.err, Catch::Contains("d_ff is 32 there but 64 here"));
  CHECK(checkpoint_update(dir.file("m/checkpoint.safetensors")) == 2);
  CHECK(tx_train(dir, tiny_flags(dir) + " --after-updates 3").status == 0);
}

TEST_CASE("tx-train: a run that ends with its data logs the last update's learning rate",
          "[train_cli]") {
  TempDir dir;
  std::string flags = tiny_flags(dir);
  flags.replace(flags.find("--disp-freq 2"), 13, "--disp-freq 1000");
  flags.replace(flags.find("--lr-schedule constant --learn-rate 0.001"), 41,
                "--lr-schedule inverse-sqrt --lr-warmup 2 --learn-rate 0.01");
  Run r = tx_train(dir, flags + " --after-epochs 1");
  INFO(r.err);
  REQUIRE(r.status == 0);
  // The epoch's data runs out: the one log line spans the run, its rate the last update's.
  std::vector<nlohmann::json> lines;
  for (const std::string& line :
       tx::test::split_lines(tx::test::slurp(dir.file("m/train.log.jsonl"))))
    if (nlohmann::json j = nlohmann::json::parse(line); j.at("type") == "train") lines.push_back(j);
  REQUIRE(lines.size() == 1);
  const int64_t last = lines[0].at("update").get<int64_t>();
  CHECK(last == checkpoint_update(dir.file("m/checkpoint.safetensors")));
  CHECK(lines[0].at("lr").get<double>() == Approx(0.01 * std::sqrt(2.0 / double(last))));
}

namespace {
// The tiny run with a validation set of 12 pairs written beside it (valid.src, valid.tgt),
// validated once, at update 4, on chrF, BLEU and cross-entropy; --valid-sets left to add.
std::string validated_flags(const TempDir& dir) {
  tx::test::write_reversal_corpus(dir.file("valid.src"), dir.file("valid.tgt"), 12, 8);
  return tiny_flags(dir) +
         " --after-updates 4 --valid-freq 4 --valid-metrics chrf bleu cross-entropy --beam-size 1";
}
}  // namespace

TEST_CASE("tx-train: validation sets read from pipes score as from files", "[train_cli]") {
  TempDir dir;
  const std::string flags = validated_flags(dir) + " --valid-sets ";
  auto valid_line = [&](const std::string& model) {
    for (const std::string& line :
         tx::test::split_lines(tx::test::slurp(dir.file(model + "/train.log.jsonl"))))
      if (nlohmann::json j = nlohmann::json::parse(line); j.at("type") == "valid") return j;
    return nlohmann::json();
  };
  Run files = tx_train(dir, flags + dir.file("valid.src") + " " + dir.file("valid.tgt"));
  INFO(files.err);
  REQUIRE(files.status == 0);
  // The same files through named pipes, each of which can be read once (as <(zcat dev.gz)); a
  // second read would wait for a writer forever, hence the timeout.
  std::string piped = flags + dir.file("vs") + " " + dir.file("vt");
  piped.replace(piped.find(" --model " + dir.file("m")), 9 + dir.file("m").size(),
                " --model " + dir.file("p"));
  tx::test::write_file(dir.file("run.sh"),
                       "mkfifo " + dir.file("vs") + " " + dir.file("vt") + "\ncat " +
                           dir.file("valid.src") + " > " + dir.file("vs") + " &\ncat " +
                           dir.file("valid.tgt") + " > " + dir.file("vt") + " &\ntimeout 300 " +
                           TX_TRAIN_BIN + " " + piped + " 2>" + dir.file("err") +
                           "\nrc=$?\nkill $(jobs -p) 2>/dev/null\nexit $rc\n");
  const int raw = std::system(("bash " + dir.file("run.sh")).c_str());
  INFO(tx::test::slurp(dir.file("err")));
  REQUIRE(WIFEXITED(raw));
  REQUIRE(WEXITSTATUS(raw) == 0);
  const nlohmann::json want = valid_line("m"), got = valid_line("p");
  REQUIRE(want.contains("chrf"));
  CHECK(want.at("chrf").get<double>() > 0);
  CHECK(got.at("chrf") == want.at("chrf"));
  CHECK(got.at("bleu") == want.at("bleu"));
  CHECK(got.at("cross-entropy") == want.at("cross-entropy"));

  // A validation pair too wide for any batch is named with its files before training starts.
  std::string long_line;
  for (int i = 0; i < 300; ++i) long_line += "ab ";
  tx::test::write_file(dir.file("wide.src"), "ab\n" + long_line + "\n");
  tx::test::write_file(dir.file("wide.tgt"), "ba\nab\n");
  std::string wide = flags + dir.file("wide.src") + " " + dir.file("wide.tgt");
  wide.replace(wide.find(" --model " + dir.file("m")), 9 + dir.file("m").size(),
               " --model " + dir.file("w"));
  Run w = tx_train(dir, wide);
  CHECK(w.status == 1);
  CHECK_THAT(w.err, Catch::Contains("line 2 of the validation files '" + dir.file("wide.src")));
  CHECK_FALSE(fs::exists(dir.file("w/checkpoint.safetensors")));
}

TEST_CASE("tx-train: gzip training and validation files train as their text does", "[train_cli]") {
  TempDir dir;
  const std::string flags = validated_flags(dir);
  Run plain =
      tx_train(dir, flags + " --valid-sets " + dir.file("valid.src") + " " + dir.file("valid.tgt"));
  REQUIRE(plain.status == 0);
  fs::rename(dir.file("m"), dir.file("plain"));
  for (const char* f : {"train.src", "train.tgt", "valid.src", "valid.tgt"})
    REQUIRE(std::system(("gzip -n -f " + dir.file(f)).c_str()) == 0);
  std::string gz = flags;
  for (const char* f : {"train.src", "train.tgt"})
    gz.replace(gz.find(dir.file(f)), dir.file(f).size(), dir.file(f) + ".gz");
  Run zipped = tx_train(
      dir, gz + " --valid-sets " + dir.file("valid.src.gz") + " " + dir.file("valid.tgt.gz"));
  INFO(zipped.err);
  REQUIRE(zipped.status == 0);
  for (const char* f : {"vocab.spm", "model.safetensors", "model.best-chrf.safetensors"})
    CHECK(tx::test::slurp(dir.file(std::string("m/") + f)) ==
          tx::test::slurp(dir.file(std::string("plain/") + f)));
}

TEST_CASE("tx-train: a pipe or a device at train.log.jsonl is refused before the set-up",
          "[train_cli]") {
  TempDir dir;
  fs::create_directories(dir.file("p"));
  REQUIRE(::mkfifo(dir.file("p/train.log.jsonl").c_str(), 0600) == 0);
  // (Its open blocked for good: the timeout ends the old behaviour.)
  Run pipe = tx::test::run_program(dir, "timeout 60 " TX_TRAIN_BIN,
                                   tiny_flags(dir, "p") + " --after-updates 2");
  CHECK(pipe.status == 1);
  CHECK_THAT(pipe.err, Catch::Contains("train.log.jsonl': it is a pipe (FIFO)"));
  fs::create_directories(dir.file("d"));
  fs::create_symlink("/dev/null", dir.file("d/train.log.jsonl"));
  Run device = tx_train(dir, tiny_flags(dir, "d") + " --after-updates 2");
  CHECK(device.status == 1);
  CHECK_THAT(device.err, Catch::Contains("train.log.jsonl': it is a device"));
  // Refused before the vocabulary was trained.
  CHECK_FALSE(fs::exists(dir.file("d/vocab.spm")));
  // A link to a regular file elsewhere (not there yet) is the log, appended to through it.
  fs::create_directories(dir.file("l"));
  fs::create_directories(dir.file("logs"));
  fs::create_symlink(dir.file("logs/run.jsonl"), dir.file("l/train.log.jsonl"));
  Run linked = tx_train(dir, tiny_flags(dir, "l") + " --after-updates 2");
  INFO(linked.err);
  CHECK(linked.status == 0);
  CHECK(fs::is_symlink(dir.file("l/train.log.jsonl")));
  CHECK(tx::test::slurp(dir.file("logs/run.jsonl")).find("\"type\":\"train\"") !=
        std::string::npos);
}

TEST_CASE("tx-train: SIGTERM on a run of 2 threads stops after the update, saves, exits 0",
          "[train_cli]") {
  TempDir dir;
  // The signal reaches tx-train's own catcher thread (the computing threads block it,
  // train/stop_signals.h); without one it would wait pending and the run never stop.
  std::string flags = tiny_flags(dir, "s");
  flags.replace(flags.find(" --quiet"), 8, "");
  flags.replace(flags.find("--cpu-threads 1"), 15, "--cpu-threads 2");
  const std::string log = dir.file("s/train.log.jsonl");
  tx::test::write_file(dir.file("run.sh"),
                       std::string(TX_TRAIN_BIN) + " " + flags +
                           " --after-updates 1000000 --save-freq 1000000 2>" + dir.file("stderr") +
                           " &\n"
                           "tx=$!\n"
                           "for i in $(seq 600); do [ -s " +
                           log +
                           " ] && break; sleep 0.1; done\n"
                           "kill -TERM $tx\n"
                           "for i in $(seq 600); do kill -0 $tx 2>/dev/null || break; sleep 0.1; "
                           "done\n"
                           "kill -0 $tx 2>/dev/null && { kill -KILL $tx; echo hung > " +
                           dir.file("result") +
                           "; exit 0; }\n"
                           "wait $tx\n"
                           "echo $? > " +
                           dir.file("result") + "\n");
  const int raw = std::system(("bash " + dir.file("run.sh")).c_str());
  REQUIRE(WIFEXITED(raw));
  const std::string err = tx::test::slurp(dir.file("stderr"));
  INFO(err);
  CHECK(tx::test::slurp(dir.file("result")) == "0\n");
  CHECK(err.find("stopping on signal 15: saving a checkpoint") != std::string::npos);
  const int64_t at = checkpoint_update(dir.file("s/checkpoint.safetensors"));
  CHECK(at > 0);
  CHECK(update_of(dir.file("s/model.safetensors")) == std::to_string(at));
}

TEST_CASE("tx-train from scratch on a Marian vocabulary trains a model in Marian's ids",
          "[train_cli]") {
  TempDir dir;
  // pymarian's SentencePiece model (</s> 0, <unk> 1, no pad or bos), as `marian -v` takes it.
  const std::string spm =
      std::string(TX_SOURCE_DIR) + "/tests/fixtures/marian/post-relu-tiedall/vocab.spm";
  std::string flags = tiny_flags(dir, "mar");
  flags.replace(flags.find(" --dim-vocabs 30"), 16, "");
  flags.replace(flags.find(" --quiet"), 8, "");
  Run r = tx_train(dir, flags + " -v " + spm + " " + spm +
                            " --ffn-activation swish --positions halves --output-bias"
                            " --after-updates 2");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("has Marian's special ids (eos 0, unk 1, no pad or bos)") != std::string::npos);
  const tx::io::ModelConfig c = tx::train::read_model_config(dir.file("mar/model.safetensors"));
  CHECK(c.eos_id == 0);
  CHECK(c.unk_id == 1);
  CHECK(c.pad_id == -1);
  CHECK(c.bos_id == -1);
  CHECK(c.decoder_start_id == -1);
  // tx-translate finds the vocabulary through the model file, as for an imported Marian model.
  tx::test::write_file(dir.file("in.txt"), "a b c\nd e\n");
  Run t = tx::test::run_program(dir, TX_TRANSLATE_BIN,
                                "-m " + dir.file("mar/model.safetensors") +
                                    " --max-length-factor 1 --quiet < " + dir.file("in.txt"));
  INFO(t.err);
  CHECK(t.status == 0);
  CHECK(std::count(t.out.begin(), t.out.end(), '\n') == 2);
  // Resumed without -v, the run goes on with the vocabulary it recorded: no tx vocabulary is
  // trained into the model directory.
  auto resume_without_v = [&](int64_t updates) {
    Run r = tx_train(dir, flags + " --ffn-activation swish --positions halves --output-bias" +
                              " --after-updates " + std::to_string(updates));
    INFO(r.err);
    CHECK(r.status == 0);
    CHECK(r.err.find("resuming from") != std::string::npos);
    CHECK(r.err.find("the vocabularies the run recorded") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir.file("mar/vocab.spm")));
    CHECK(checkpoint_update(dir.file("mar/checkpoint.safetensors")) == updates);
  };
  resume_without_v(3);
  // The checkpoint records them too: a crash between its rename and the model's at the first
  // save leaves no model file, and the resume must not train a tx vocabulary then either.
  std::filesystem::remove(dir.file("mar/model.safetensors"));
  resume_without_v(4);
  CHECK(tx::train::read_model_config(dir.file("mar/model.safetensors")).eos_id == 0);
  // A tx vocabulary beside a Marian one is refused by name.
  REQUIRE(tx_train(dir, tiny_flags(dir, "t") + " --after-updates 1").status == 0);
  Run mixed = tx_train(dir, tiny_flags(dir, "mix") + " --tied-embeddings none -v " +
                                dir.file("t/vocab.spm") + " " + spm + " --after-updates 1");
  INFO(mixed.err);
  CHECK(mixed.status != 0);
  CHECK(mixed.err.find("number their special pieces differently") != std::string::npos);
}

TEST_CASE("options: one name and one meaning across programs", "[train_cli]") {
  TempDir dir;
  auto dump = [&](const char* bin) {
    Run r = tx::test::run_program(dir, bin, "--dump-config");
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.out);
  };
  const nlohmann::json train = dump(TX_TRAIN_BIN), translate = dump(TX_TRANSLATE_BIN),
                       score = dump(TX_SCORE_BIN);
  // Search normalises by length in tx-translate and in tx-train's validation BLEU alike;
  // tx-score reports plain log-probs unless asked.
  CHECK(train.at("normalize") == 1.0);
  CHECK(translate.at("normalize") == 1.0);
  CHECK(score.at("normalize") == 0.0);
  // Marian's names: --mini-batch (sentences) and --maxi-batch (batches) in every program.
  CHECK(train.at("mini-batch") == 0);
  CHECK(translate.at("mini-batch") == 0);
  CHECK(train.at("maxi-batch") == translate.at("maxi-batch"));
  CHECK_FALSE(train.contains("max-sentences"));
  CHECK_FALSE(translate.contains("window"));
  Run old = tx_train(dir, "--max-sentences 4 --dump-config");
  CHECK(old.status == 2);
  Run ok = tx_train(dir, tiny_flags(dir) + " --after-updates 2 --mini-batch 4 --maxi-batch 2");
  INFO(ok.err);
  CHECK(ok.status == 0);
}

TEST_CASE("progress: shown on a terminal's stderr only, never in stdout or a redirected log",
          "[train_cli]") {
  TempDir dir;
  Run train = tx_train(dir, tiny_flags(dir) + " --after-updates 3");
  REQUIRE(train.status == 0);
  std::string flags = tiny_flags(dir, "p");
  flags.replace(flags.find(" --quiet"), 8, "");
  Run logged = tx_train(dir, flags + " --after-updates 3");
  REQUIRE(logged.status == 0);
  CHECK(logged.err.find('\r') == std::string::npos);  // stderr to a file: no progress line
  CHECK(logged.err.find('\x1b') == std::string::npos);

  const std::string translate = std::string(TX_TRANSLATE_BIN) + " -m " +
                                dir.file("m/model.safetensors") + " -v " + dir.file("m/vocab.spm") +
                                " -i " + dir.file("train.src");
  if (std::system("script --version >/dev/null 2>&1") != 0) {
    WARN("SKIPPED: the terminal half needs script(1) from util-linux");
    return;
  }
  // script(1) gives the program a terminal for stderr; stdout goes to a file.
  Run tty = tx::test::run_program(dir, "script -qec",
                                  "'" + translate + " > " + dir.file("hyp.txt") + "' /dev/null");
  INFO(tty.out << tty.err);
  REQUIRE(tty.status == 0);
  CHECK(tty.out.find(" lines/s") != std::string::npos);
  CHECK(tty.out.find("\r\x1b[K") != std::string::npos);
  const std::string hyp = tx::test::slurp(dir.file("hyp.txt"));
  CHECK(hyp.find("lines/s") == std::string::npos);
  CHECK(std::count(hyp.begin(), hyp.end(), '\n') == 200);
}

TEST_CASE("tx-train: a --max-length without room for a piece, a --dim-vocabs beyond int32",
          "[train_cli]") {
  TempDir dir;
  // A value out of the option's range: a usage error (exit 2), as for the other sizes.
  Run one = tx_train(dir, tiny_flags(dir) + " --max-length 1 --after-updates 1");
  CHECK(one.status == 2);
  CHECK_THAT(one.err, Catch::Contains("--max-length: 1 must be at least 2"));
  // Below room for pad, unk, bos and eos; 2^32 + 300 once trained a vocabulary of 300 pieces
  // (its low 32 bits).
  for (const std::string size : {"4", "4294967596"}) {
    std::string flags = tiny_flags(dir, "v" + size);
    flags.replace(flags.find("--dim-vocabs 30"), 15, "--dim-vocabs " + size);
    Run r = tx_train(dir, flags + " --after-updates 1");
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Catch::Contains("--dim-vocabs: " + size + " must be at least 5 and at most"));
    CHECK_FALSE(fs::exists(dir.file("v" + size)));
  }
}

TEST_CASE("tx-train: options that cannot run are refused before a vocabulary is trained",
          "[train_cli]") {
  TempDir dir;
  // Each was once refused only after the vocabularies were trained (minutes on a large
  // corpus), leaving them and the model directory behind.
  std::string flags = tiny_flags(dir);
  flags.replace(flags.find("--lr-schedule constant"), 22, "");
  struct Case {
    std::string args, says;
  };
  const std::vector<Case> cases = {
      {"--tied-embeddings all --vocabs " + dir.file("a.spm") + " " + dir.file("b.spm") +
           " --after-updates 2",
       "--tied-embeddings all needs one joint vocabulary"},
      {"--lr-schedule linear --lr-warmup 50 --after-updates 10", "before the end of the warmup"},
      {"--lr-schedule linear --lr-warmup 5", "give --after-epochs, --after-updates or"},
      {"--sentencepiece-alphas 0.1 --guided-alignment " + dir.file("train.src") +
           " --after-updates 2",
       "use one or the other"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    Run r = tx_train(dir, flags + " " + c.args);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::Contains(c.says));
    CHECK_FALSE(fs::exists(dir.file("m")));
    CHECK_FALSE(fs::exists(dir.file("a.spm")));
    CHECK_FALSE(fs::exists(dir.file("b.spm")));
  }
  // Each of those checks still lets a run that can train through (one of them, to be sure the
  // early checks are not refusing everything).
  Run ok = tx_train(dir, flags + " --lr-schedule linear --lr-warmup 2 --after-updates 3");
  INFO(ok.err);
  CHECK(ok.status == 0);
  CHECK(fs::exists(dir.file("m/vocab.spm")));
}

TEST_CASE("tx-train --sentencepiece-options: the vocabulary SentencePiece is told to train",
          "[train_cli]") {
  TempDir dir;
  // A BPE model scores its pieces by merge order (0, -1, -2, ...), a unigram model by
  // log-probabilities: (pieces, pieces with an integer score) of a model's vocab.vocab.
  auto scores = [&](const std::string& model) {
    std::ifstream vocab(dir.file(model + "/vocab.vocab"));
    int pieces = 0, integers = 0;
    for (std::string line; std::getline(vocab, line);) {
      if (line.front() == '<') continue;  // <pad>, <unk>, <s>, </s>
      const double score = std::stod(line.substr(line.find('\t') + 1));
      ++pieces;
      integers += score == std::floor(score);
    }
    return std::pair{pieces, integers};
  };
  // The space form: the value starts with dashes, as spm_train's flags do.
  Run bpe = tx_train(dir, tiny_flags(dir, "bpe") + " --after-updates 1" +
                              " --sentencepiece-options --model_type=bpe");
  INFO(bpe.err);
  REQUIRE(bpe.status == 0);
  REQUIRE(tx_train(dir, tiny_flags(dir, "unigram") + " --after-updates 1").status == 0);
  const auto [bpe_pieces, bpe_integers] = scores("bpe");
  const auto [unigram_pieces, unigram_integers] = scores("unigram");
  CHECK(bpe_pieces > 10);
  CHECK(bpe_integers == bpe_pieces);
  CHECK(unigram_integers < unigram_pieces / 2);

  // A field tx sets itself is a usage error before anything is made; one SentencePiece does not
  // know is named once the trainer sees it, and leaves no vocabulary.
  Run owned = tx_train(
      dir, tiny_flags(dir) + " --after-updates 1" + " --sentencepiece-options=--vocab_size=9");
  CHECK(owned.status == 2);
  CHECK(tx::test::one_line(owned.err));
  CHECK_THAT(owned.err, Catch::Contains("--sentencepiece-options") &&
                            Catch::Contains("vocab_size") && Catch::Contains("--dim-vocabs"));
  Run unknown = tx_train(dir, tiny_flags(dir) + " --after-updates 1" +
                                  " --sentencepiece-options '--model_type=bpe --no_such_field=1'");
  CHECK(unknown.status == 1);
  CHECK_THAT(unknown.err,
             Catch::Contains("no_such_field") && Catch::Contains("check --sentencepiece-options"));
  CHECK_FALSE(fs::exists(dir.file("m/vocab.spm")));
}

TEST_CASE("tx-train: data refused after the vocabulary is trained leaves no vocabulary behind",
          "[train_cli]") {
  TempDir dir;
  const std::string flags = tiny_flags(dir) + " --after-updates 2";
  // A target file one line short, a validation set one line short, guided alignments one line
  // short: each is found after the vocabulary is trained from the data.
  std::string text = tx::test::slurp(dir.file("train.tgt"));
  tx::test::write_file(dir.file("short.tgt"),
                       text.substr(0, text.rfind('\n', text.size() - 2) + 1));
  tx::test::write_file(dir.file("valid.src"), "a b c\nd e\n");
  tx::test::write_file(dir.file("valid.tgt"), "c b a\n");
  tx::test::write_file(dir.file("align.txt"), "0-0\n");
  struct Case {
    std::string args, says;
  };
  const std::vector<Case> cases = {
      {"--train-sets " + dir.file("train.src") + " " + dir.file("short.tgt"), "short.tgt"},
      {"--valid-sets " + dir.file("valid.src") + " " + dir.file("valid.tgt"), "valid."},
      {"--guided-alignment " + dir.file("align.txt"), "--guided-alignment"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    std::string f = flags;
    if (c.args.rfind("--train-sets", 0) == 0)
      f.replace(0, f.find(" --model"), c.args);
    else
      f += " " + c.args;
    // A new directory is removed; an existing one keeps what it had, without the vocabulary.
    for (const bool existing : {false, true}) {
      INFO("existing directory " << existing);
      fs::remove_all(dir.file("m"));
      if (existing) {
        fs::create_directories(dir.file("m"));
        tx::test::write_file(dir.file("m/notes.txt"), "mine\n");
      }
      Run r = tx_train(dir, f);
      CHECK(r.status == 1);
      CHECK_THAT(r.err, Catch::Contains(c.says));
      CHECK(fs::exists(dir.file("m")) == existing);
      CHECK_FALSE(fs::exists(dir.file("m/vocab.spm")));
      CHECK_FALSE(fs::exists(dir.file("m/vocab.vocab")));
      if (existing) CHECK(fs::exists(dir.file("m/notes.txt")));
    }
  }
  // A vocabulary that was there before the refused run stays.
  fs::remove_all(dir.file("m"));
  REQUIRE(tx_train(dir, flags).status == 0);
  fs::remove(dir.file("m/checkpoint.safetensors"));
  const std::string vocab = tx::test::slurp(dir.file("m/vocab.spm"));
  Run r = tx_train(dir, flags + " " + cases[1].args);
  CHECK(r.status == 1);
  CHECK(tx::test::slurp(dir.file("m/vocab.spm")) == vocab);
}

namespace {
std::vector<int64_t> data_position(const std::string& checkpoint) {
  const auto meta = tx::train::read_checkpoint_metadata(checkpoint);
  return nlohmann::json::parse(meta.at(tx::train::kTrainingStateKey))
      .at("data_position")
      .get<std::vector<int64_t>>();
}
}  // namespace

TEST_CASE(
    "tx-train: a resume under other batching options or data is refused, "
    "--no-restore-corpus goes on from the next epoch",
    "[train_cli]") {
  TempDir dir;
  std::string base = tiny_flags(dir) + " --save-freq 100";
  base.replace(base.find(" --max-tokens 128"), 17, "");
  base.replace(base.find(" --quiet"), 8, "");
  const std::string flags = base + " --max-tokens 128";
  REQUIRE(tx_train(dir, flags + " --after-updates 3").status == 0);
  const std::string ckpt = dir.file("m/checkpoint.safetensors");
  const std::vector<int64_t> at = data_position(ckpt);
  REQUIRE(at == std::vector<int64_t>{0, 3, at[2]});
  // A batch index means other pairs in another plan: each change is named with both values.
  struct Case {
    std::string args, says;
  };
  const std::vector<Case> cases = {
      {"--max-tokens 96", "--max-tokens 128 (this run: 96)"},
      {"--max-tokens 128 --mini-batch 4", "--mini-batch 0 (this run: 4)"},
      {"--max-tokens 128 --maxi-batch 1", "--maxi-batch 100 (this run: 1)"},
      {"--max-tokens 128 --seed 2", "--seed 1 (this run: 2)"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    Run r = tx_train(dir, base + " --after-updates 6 " + c.args);
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::Contains(c.says) && Catch::Contains("--no-restore-corpus"));
    CHECK(tx::test::checkpoint_update(ckpt) == 3);
  }
  // The corpus itself, edited in place: one pair longer.
  {
    std::ifstream in(dir.file("train.src"));
    std::stringstream text;
    text << in.rdbuf();
    std::string edited = text.str();
    edited.insert(edited.find('\n'), " 1 2");
    const std::string saved = text.str();
    std::ofstream(dir.file("train.src"), std::ios::binary) << edited;
    Run r = tx_train(dir, flags + " --after-updates 6");
    CHECK(r.status == 1);
    CHECK_THAT(r.err, Catch::Contains("other training data: as many pairs, of other lengths"));
    std::ofstream(dir.file("train.src"), std::ios::binary) << saved;
  }
  // Allowed with --no-restore-corpus: from the first batch of the next epoch, 2 updates on.
  Run moved = tx_train(dir, base + " --after-updates 5 --max-tokens 96 --no-restore-corpus");
  INFO(moved.err);
  CHECK(moved.status == 0);
  CHECK_THAT(moved.err, Catch::Contains("from the first batch of epoch 2") &&
                            Catch::Contains("--max-tokens 128 (this run: 96)"));
  CHECK(tx::test::checkpoint_update(ckpt) == 5);
  CHECK(data_position(ckpt) == std::vector<int64_t>{1, 2, data_position(ckpt)[2]});
  // The checkpoint now records this run's plan: the same options resume as usual.
  CHECK(tx_train(dir, base + " --after-updates 6 --max-tokens 96").status == 0);
  CHECK(data_position(ckpt) == std::vector<int64_t>{1, 3, data_position(ckpt)[2]});

  // A checkpoint from before the plan was recorded resumes under any options.
  {
    tx::io::TensorFile file = tx::io::read_safetensors(ckpt);
    nlohmann::json state = nlohmann::json::parse(file.metadata.at(tx::train::kTrainingStateKey));
    REQUIRE(state.contains("batch_plan"));
    state.erase("batch_plan");
    file.metadata[tx::train::kTrainingStateKey] = state.dump();
    tx::io::write_safetensors(ckpt, file);
  }
  CHECK(tx_train(dir, base + " --after-updates 7 --max-tokens 64").status == 0);
  CHECK(tx::test::checkpoint_update(ckpt) == 7);
}

TEST_CASE(
    "tx-train: the batch plan under subword sampling, and the linear schedule's end after "
    "--no-restore-corpus",
    "[train_cli]") {
  TempDir dir;
  std::string base = tiny_flags(dir) + " --save-freq 100";
  base.replace(base.find(" --quiet"), 8, "");
  const std::string ckpt = dir.file("m/checkpoint.safetensors");
  // One alpha or the same with a target alpha of 0 sample alike: the same plan.
  REQUIRE(tx_train(dir, base + " --sentencepiece-alphas 0.1 --after-updates 2").status == 0);
  Run same = tx_train(dir, base + " --sentencepiece-alphas 0.1 0 --after-updates 3");
  INFO(same.err);
  CHECK(same.status == 0);
  Run other = tx_train(dir, base + " --sentencepiece-alphas 0.2 --after-updates 4");
  CHECK(other.status == 1);
  CHECK_THAT(other.err, Catch::Contains("--sentencepiece-alphas [0.1,0.0] (this run: [0.2,0.0])"));

  // --no-restore-corpus under the linear schedule of --after-epochs: the rate comes down to 0 at
  // the run's real end, counted from where the data goes on.
  TempDir lin;
  std::string flags = tiny_flags(lin) + " --save-freq 100";
  flags.replace(flags.find("--lr-schedule constant"), 22, "--lr-schedule linear --lr-warmup 2");
  flags.replace(flags.find(" --quiet"), 8, "");
  REQUIRE(tx_train(lin, flags + " --after-epochs 2 --after-updates 3").status == 0);
  Run resumed = tx_train(lin, flags + " --after-epochs 2 --mini-batch 5 --no-restore-corpus");
  INFO(resumed.err);
  REQUIRE(resumed.status == 0);
  const std::string end = "to 0 at update ";
  const size_t at = resumed.err.find(end);
  REQUIRE(at != std::string::npos);
  const int64_t planned = std::stoll(resumed.err.substr(at + end.size()));
  CHECK(tx::test::checkpoint_update(lin.file("m/checkpoint.safetensors")) == planned);
  CHECK(data_position(lin.file("m/checkpoint.safetensors"))[0] == 2);  // both epochs done
  // A later plain resume counts its epochs from the same place.
  Run later = tx_train(lin, flags + " --after-epochs 3 --mini-batch 5");
  INFO(later.err);
  REQUIRE(later.status == 0);
  const size_t at3 = later.err.find(end);
  REQUIRE(at3 != std::string::npos);
  CHECK(tx::test::checkpoint_update(lin.file("m/checkpoint.safetensors")) ==
        std::stoll(later.err.substr(at3 + end.size())));
  CHECK(data_position(lin.file("m/checkpoint.safetensors"))[0] == 3);
  // A --no-restore-corpus run that trains nothing leaves the checkpoint as it was.
  const std::string before = tx::test::slurp(lin.file("m/checkpoint.safetensors"));
  Run idle = tx_train(lin, flags + " --after-epochs 3 --mini-batch 6 --no-restore-corpus");
  CHECK(idle.status == 0);
  CHECK_THAT(idle.err, Catch::Contains("is as it was"));
  CHECK(tx::test::slurp(lin.file("m/checkpoint.safetensors")) == before);
}

TEST_CASE("tx-train: a tx model is fine-tuned and resumed on its own vocabularies only",
          "[train_cli]") {
  TempDir dir;
  Run base = tx_train(dir, tiny_flags(dir, "base") + " --after-updates 2");
  INFO(base.err);
  REQUIRE(base.status == 0);
  // The same text in other letters: a vocabulary of the same size, every piece another.
  for (const char* side : {"src", "tgt"}) {
    std::string text = tx::test::slurp(dir.file(std::string("train.") + side));
    for (char& c : text)
      if (c >= 'a' && c <= 'h') c = char(c + 12);
    tx::test::write_file(dir.file(std::string("other.") + side), text);
  }
  std::string other_flags = tiny_flags(dir, "other");
  for (const char* side : {".src", ".tgt"})
    other_flags.replace(other_flags.find(std::string("train") + side), 5, "other");
  Run other = tx_train(dir, other_flags + " --after-updates 1");
  REQUIRE(other.status == 0);
  REQUIRE(tx::test::split_lines(tx::test::slurp(dir.file("other/vocab.vocab"))).size() ==
          tx::test::split_lines(tx::test::slurp(dir.file("base/vocab.vocab"))).size());

  const std::string fine_tune = "--train-sets " + dir.file("train.src") + " " +
                                dir.file("train.tgt") + " --pretrained-model " +
                                dir.file("base/model.safetensors") +
                                " --max-tokens 128 --cpu-threads 1 --after-updates 1";
  // Without -v: the vocabulary beside the model, copied into the new run's directory.
  Run ft = tx_train(dir, fine_tune + " --model " + dir.file("ft"));
  INFO(ft.err);
  CHECK(ft.status == 0);
  CHECK(tx::test::slurp(dir.file("ft/vocab.spm")) == tx::test::slurp(dir.file("base/vocab.spm")));
  // Another vocabulary of the model's size: refused, when fine-tuning and when resuming.
  const std::string wrong = " --vocabs " + dir.file("other/vocab.spm");
  Run ft_wrong = tx_train(dir, fine_tune + " --model " + dir.file("ft2") + wrong);
  CHECK(ft_wrong.status == 1);
  CHECK_THAT(ft_wrong.err, Catch::Contains("not the one") && Catch::Contains("--vocabs"));
  CHECK_FALSE(fs::exists(dir.file("ft2")));  // the refused run's new directory is gone again
  Run resume_wrong = tx_train(dir, tiny_flags(dir, "base") + " --after-updates 3" + wrong);
  CHECK(resume_wrong.status == 1);
  CHECK_THAT(resume_wrong.err, Catch::Contains("not the one"));
  CHECK(checkpoint_update(dir.file("base/checkpoint.safetensors")) == 2);

  // Separate vocabularies, one of them already in the new run (a crash between the copies):
  // the other is copied too, never trained afresh.
  Run sep = tx_train(dir, tiny_flags(dir, "sep") + " --tied-embeddings none --after-updates 1");
  REQUIRE(sep.status == 0);
  fs::create_directories(dir.file("ft3"));
  fs::copy_file(dir.file("sep/vocab.src.spm"), dir.file("ft3/vocab.src.spm"));
  const std::string ft3_flags = "--train-sets " + dir.file("other.src") + " " +
                                dir.file("other.tgt") + " --pretrained-model " +
                                dir.file("sep/model.safetensors") + " --model " + dir.file("ft3") +
                                " --max-tokens 128 --cpu-threads 1";
  Run ft3 = tx_train(dir, ft3_flags + " --after-updates 1");
  INFO(ft3.err);
  CHECK(ft3.status == 0);
  CHECK(tx::test::slurp(dir.file("ft3/vocab.tgt.spm")) ==
        tx::test::slurp(dir.file("sep/vocab.tgt.spm")));

  // Resumed by the same commands once the pretrained models are gone (Marian's rule: the
  // checkpoint has the weights, the architecture and the ties; --pretrained-model only starts).
  fs::rename(dir.file("base"), dir.file("base.gone"));
  fs::rename(dir.file("sep"), dir.file("sep.gone"));
  std::string more = fine_tune;
  more.replace(more.find("--after-updates 1"), 17, "--after-updates 2");
  Run ft_resumed = tx_train(dir, more + " --model " + dir.file("ft"));
  INFO(ft_resumed.err);
  CHECK(ft_resumed.status == 0);
  CHECK(checkpoint_update(dir.file("ft/checkpoint.safetensors")) == 2);
  Run ft3_resumed = tx_train(dir, ft3_flags + " --after-updates 2");
  INFO(ft3_resumed.err);
  CHECK(ft3_resumed.status == 0);
  CHECK(checkpoint_update(dir.file("ft3/checkpoint.safetensors")) == 2);
}

TEST_CASE("tx-train: a directory for --vocabs or --config, an alpha beyond float: named",
          "[train_cli]") {
  TempDir dir;
  fs::create_directories(dir.file("voc"));
  Run vocab = tx_train(dir, tiny_flags(dir) + " --vocabs " + dir.file("voc"));
  CHECK(vocab.status == 1);
  CHECK_THAT(vocab.err, Catch::Contains("it is a directory"));
  Run config = tx_train(dir, tiny_flags(dir) + " --config " + dir.file("voc"));
  CHECK(config.status == 2);
  CHECK_THAT(config.err, Catch::Contains("it is a directory"));
  Run alpha = tx_train(dir, tiny_flags(dir) + " --sentencepiece-alphas 1e308");
  CHECK(alpha.status == 2);
  CHECK_THAT(alpha.err, Catch::Contains("'1e308', which is not an alpha"));
}

TEST_CASE(
    "tx-train --optimizer-params: Marian's Adam parameters, in the checkpoint, bad ones exit 2",
    "[train_cli]") {
  TempDir dir;
  auto train = [&](const std::string& model, const std::string& params) {
    return tx::test::run_program(dir, TX_TRAIN_BIN,
                                 tx::test::tiny_flags(dir, model) + " --after-updates 3" + params);
  };
  auto optimizer = [&](const std::string& model) {
    const auto meta =
        tx::train::read_checkpoint_metadata(tx::train::Trainer::checkpoint_path(dir.file(model)));
    return nlohmann::json::parse(meta.at(tx::train::kOptimizerKey));
  };
  auto weights = [&](const std::string& model) {
    return tx::test::slurp(tx::train::Trainer::model_path(dir.file(model)));
  };
  REQUIRE(train("default", "").status == 0);
  // The paper's values given: the default run, bit for bit.
  REQUIRE(train("paper", " --optimizer-params 0.9 0.98 1e-9").status == 0);
  CHECK(weights("paper") == weights("default"));
  const Run r = train("beta2", " --optimizer-params 0.9 0.997");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(optimizer("beta2").at("beta2").get<double>() == Approx(0.997));
  CHECK(optimizer("beta2").at("eps").get<double>() == Approx(1e-9));
  CHECK(weights("beta2") != weights("default"));
  REQUIRE(train("decay", " --optimizer-params 0.8 0.99 1e-8 0.01").status == 0);
  const nlohmann::json all = optimizer("decay");
  CHECK(all.at("beta1").get<double>() == Approx(0.8));
  CHECK(all.at("beta2").get<double>() == Approx(0.99));
  CHECK(all.at("eps").get<double>() == Approx(1e-8));
  CHECK(all.at("weight_decay").get<double>() == Approx(0.01));
  for (const std::string& bad : {std::string("1"), std::string("0.9 -0.1"),
                                 std::string("0.9 0.98 x"), std::string("0.9 0.98 1e-9 0 5")}) {
    INFO(bad);
    const Run b = train("bad", " --optimizer-params " + bad);
    CHECK(b.status == 2);
    CHECK(tx::test::one_line(b.err));
    CHECK_THAT(b.err, Catch::Contains("--optimizer-params"));
  }
}
