// Test support: the flags of a tiny tx-train run and reading back what tx-train wrote, for the
// tests that drive the real program (train_cli_test.cc, train_mpi_test.cc).
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "support/programs.h"
#include "train/checkpoint.h"

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
