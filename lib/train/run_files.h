// RunFiles: the files a training run writes in its model directory, by rank 0 alone: the
// checkpoint (the truth a resume starts from), then model.safetensors and the --keep-last
// snapshots, the best model of each validation metric, and the JSON log (train.log.jsonl).
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/backend.h"
#include "io/model_config.h"
#include "nn/parameters.h"
#include "train/optimizer.h"
#include "train/smoothing.h"
#include "train/trainer.h"
#include "train/training_state.h"

namespace tx::train {

class RunFiles {
 public:
  // Opens the JSON log for appending (rank 0, `writer`); the other processes write nothing.
  // Records past `update` (where the run starts: the checkpoint's, 0 afresh) go first: a crash
  // after them left them to be written again, and a full disk half a line. `model_meta` goes
  // into every model file written.
  RunFiles(Backend& be, const TrainerOptions& o, const io::ModelConfig& config,
           const nn::ParameterSet& params, ExponentialSmoothing& smoothing,
           std::map<std::string, std::string> model_meta, bool writer, int64_t update);

  // One record of train.log.jsonl, flushed at once (a crash keeps every line before it).
  void write_json(const nlohmann::json& record);
  // The checkpoint of `state` (weights, Adam, smoothed weights), then the model files (with a
  // --keep-last snapshot when state.snapshot).
  void save(const TrainingState& state, const Adam& adam);
  // model.safetensors and, when `snapshot`, the --keep-last snapshot of the weights as they are
  // now (the smoothed ones with smoothing), naming `update`; snapshots beyond the newest
  // keep_last go.
  void save_models(int64_t update, bool snapshot);
  // After a crash between the checkpoint's rename and the model's, model.safetensors is one
  // save behind the checkpoint `state`: writes the checkpoint's weights there (and the missing
  // snapshot, if that save made one), saying so unless `quiet`.
  void catch_up_models(const TrainingState& state, bool quiet);
  // model.best-<metric>.safetensors of the weights as they are now, from `update` (validation
  // swaps the smoothed weights in around it).
  void save_best(const std::string& metric, int64_t update);

 private:
  Backend& be_;
  const TrainerOptions& o_;
  const io::ModelConfig& config_;
  const nn::ParameterSet& params_;
  ExponentialSmoothing& smoothing_;
  std::map<std::string, std::string> model_meta_;
  bool writer_;
  std::ofstream json_log_;
};

}  // namespace tx::train
