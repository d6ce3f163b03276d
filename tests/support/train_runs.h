// Test support: a tiny tx-train run (its flags for the program, its options for train::Trainer)
// and reading back what tx-train wrote.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "support/programs.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace tx::test {

// The flags of a tiny run on the reversal corpus (written into `dir` on first use).
inline std::string tiny_flags(const TempDir& dir, const std::string& model = "m") {
  if (!std::filesystem::exists(dir.file("train.src")))
    write_reversal_corpus(dir.file("train.src"), dir.file("train.tgt"), 200, 7);
  return "--train-sets " + dir.file("train.src") + " " + dir.file("train.tgt") + " --model " +
         dir.file(model) +
         " --d-model 16 --d-ff 32 --heads 2 --enc-layers 1 --dec-layers 1 --dim-vocabs 30"
         " --max-tokens 128 --disp-freq 2 --lr-schedule constant --learn-rate 0.001"
         " --cpu-threads 1 --quiet";
}

// The same run as train::Trainer options, with validation files beside it: d_model 16, 1 + 1
// layers, dropout on (resume must replay the masks), a joint vocabulary of about 30 pieces
// trained on the fly, a log line and a save every 5 updates.
inline train::TrainerOptions tiny_options(const TempDir& dir) {
  if (!std::filesystem::exists(dir.file("train.src")))
    write_reversal_corpus(dir.file("train.src"), dir.file("train.tgt"), 200, 7);
  if (!std::filesystem::exists(dir.file("valid.src")))
    write_reversal_corpus(dir.file("valid.src"), dir.file("valid.tgt"), 12, 8);
  train::TrainerOptions o;
  o.model_dir = dir.file("model");
  o.train_src = dir.file("train.src");
  o.train_tgt = dir.file("train.tgt");
  o.vocab_size = 30;
  o.model.d_model = 16;
  o.model.d_ff = 32;
  o.model.heads = 2;
  o.model.encoder_layers = o.model.decoder_layers = 1;
  o.model.dropout = 0.1f;
  o.model.max_length = 64;
  o.max_tokens = 128;
  o.lr.schedule = "constant";
  o.lr.lr = 5e-3;
  o.adam.clip_norm = 1.0f;
  o.disp_freq = 5;
  o.save_freq = 5;
  o.quiet = true;
  return o;
}

// Exact resume: `options`' run trained straight in `straight`, and in `split` stopped after
// `stop` updates and then resumed by the same options. Returns "" when the second call resumed
// and both left the same model and checkpoint bytes, else what differs; `straight_result`, when
// given, receives the straight run's result.
inline std::string resume_difference(Backend& be, const train::TrainerOptions& options,
                                     const TempDir& straight, const TempDir& split, int64_t stop,
                                     train::TrainerResult* straight_result = nullptr) {
  train::TrainerOptions a = options, b = options;
  a.model_dir = straight.file("model");
  b.model_dir = split.file("model");
  const train::TrainerResult ra = train::Trainer(be, a).run();
  if (straight_result) *straight_result = ra;
  b.after_updates = stop;
  if (train::Trainer(be, b).run().updates != stop) return "the first call did not stop there";
  b.after_updates = options.after_updates;
  if (!train::Trainer(be, b).run().resumed) return "the second call did not resume";
  const std::string model = slurp(train::Trainer::model_path(a.model_dir));
  if (model.empty()) return "no model written";
  if (model != slurp(train::Trainer::model_path(b.model_dir))) return "the models differ";
  if (slurp(train::Trainer::checkpoint_path(a.model_dir)) !=
      slurp(train::Trainer::checkpoint_path(b.model_dir)))
    return "the checkpoints differ";
  return "";
}

// Every tensor of a safetensors file but Adam's moments, by name, as floats.
inline std::map<std::string, std::vector<float>> tensors(const std::string& path) {
  io::SafetensorsReader reader(path);
  std::map<std::string, std::vector<float>> out;
  for (const io::TensorEntry& e : reader.entries())
    if (e.name.rfind("adam.", 0) != 0) out[e.name] = reader.read(e.name).to_floats();
  return out;
}

// The update a model file or checkpoint names in its metadata; "" when it names none.
inline std::string update_of(const std::string& path) {
  const auto meta = train::read_checkpoint_metadata(path);
  auto it = meta.find(train::kUpdateKey);
  return it == meta.end() ? "" : it->second;
}

// The updates done when the training checkpoint at `path` was written; -1 when it names none.
inline int64_t checkpoint_update(const std::string& path) {
  const auto meta = train::read_checkpoint_metadata(path);
  auto it = meta.find("tx.training_state");
  if (it == meta.end()) return -1;
  return nlohmann::json::parse(it->second).value("update", int64_t(-1));
}

}  // namespace tx::test
