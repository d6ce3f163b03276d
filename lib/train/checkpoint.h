// Checkpoints: a model, or a model with its optimiser and trainer state, in one safetensors
// file.
//
// Model file (save_model): every parameter by name (f32) and
//   __metadata__ {"tx.format": "model", "tx.model_config": <ModelConfig JSON>}
// what tx-translate, tx-score and tx-average read.
//
// Training checkpoint (save_checkpoint): the same, plus Adam's moments as tensors
// "adam.m.<param>" and "adam.v.<param>" (f32, the parameter's shape) and
//   "tx.format": "training",
//   "tx.optimizer": {"type": "adam", "step", "beta1", "beta2", "eps", "weight_decay",
//                    "clip_norm"},
//   "tx.training_state": <TrainingState JSON>.
// One file rather than model + state files: a rename replaces it whole, so a crash can never
// pair a new model with an old optimiser state. load_model reads a training checkpoint too
// (it skips the "adam." tensors, and takes the smoothed "ema." weights where they are: the
// checkpoint's model), so translating or averaging needs no separate export.
//
// Writes are atomic (io/atomic_file.h): a failed or interrupted save leaves the previous file
// byte-identical. Loads check everything the header says (config, names, shapes, dtypes)
// before writing any device tensor, and fail with one tx::Error naming the file, the tensor
// and the fix.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "io/model_config.h"
#include "nn/parameters.h"
#include "train/optimizer.h"
#include "train/training_state.h"

namespace tx::train {

constexpr const char* kFormatKey = "tx.format";
constexpr const char* kOptimizerKey = "tx.optimizer";
constexpr const char* kTrainingStateKey = "tx.training_state";
constexpr const char* kAdamMPrefix = "adam.m.";
constexpr const char* kAdamVPrefix = "adam.v.";
// Metadata of the model files tx-train writes: the update their weights are from.
constexpr const char* kUpdateKey = "update";
// ... and the pieces of their vocabularies, source then target (data::Vocab::fingerprint).
constexpr const char* kVocabFingerprintKey = "vocab_fingerprint";

// Writes the parameters and the config. `extra` adds metadata entries (e.g. the options the
// model was trained with); "tx." keys are reserved.
void save_model(const std::string& path, Backend& be, const io::ModelConfig& config,
                const nn::ParameterSet& params,
                const std::map<std::string, std::string>& extra = {});

// The config a model file or training checkpoint carries: build the model from it, then
// load_model.
io::ModelConfig read_model_config(const std::string& path);

// Copies the file's parameters into `params` (a model built from `config`). The file's
// architecture must equal `config`'s; its dropout rates and label smoothing may differ (they
// are training choices, not part of the function). Every parameter must be present with its
// shape; a tensor the model lacks is an error. f16 and bf16 files are widened to f32.
void load_model(const std::string& path, Backend& be, const io::ModelConfig& config,
                const nn::ParameterSet& params);

// Config fields that are choices of a training run, not of the model's function: dropout
// rates, label smoothing, the alignment layer and head. A resumed run may change them, so the
// checkpoints of one run may differ in them.
bool is_training_choice(const std::string& config_key);

// Tensors saved beside the parameters under their own names (the smoothed weights,
// "ema.<parameter>": train/smoothing.h).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
constexpr const char* kSmoothedPrefix = "ema.";

// Writes everything a resumed run needs (see the top of this file), and `smoothed`.
void save_checkpoint(const std::string& path, Backend& be, const io::ModelConfig& config,
                     const nn::ParameterSet& params, const Adam& adam, const TrainingState& state,
                     const std::map<std::string, std::string>& extra = {},
                     const NamedTensors& smoothed = {});

// Restores parameters, Adam's moments and step count, and returns the trainer state. Adam's
// options stay the caller's (a resumed run may change clip_norm); `adam` must be over
// `params`.
// The file's smoothed tensors are left for load_smoothed.
TrainingState load_checkpoint(const std::string& path, Backend& be, const io::ModelConfig& config,
                              const nn::ParameterSet& params, Adam& adam);
// Fills `smoothed` from the checkpoint's tensors of the same names and returns true, or returns
// false when it has none (a run that turns smoothing on when it resumes).
bool load_smoothed(const std::string& path, Backend& be, const NamedTensors& smoothed);

// Requires the architecture of the model or checkpoint at `path` to equal `config`'s, but for
// the fields a run's vocabularies fill in (sizes, special ids): a resume under other model
// options is refused before its vocabularies are read or trained. Throws tx::Error naming the
// fields that differ.
void check_architecture(const std::string& path, const io::ModelConfig& config);

// A training checkpoint's trainer state alone (header only): what a resumed run plans with
// before its model is built. Throws tx::Error naming the file when it holds none.
TrainingState read_training_state(const std::string& path);

// The metadata of a checkpoint (header only), e.g. to show its training state.
std::map<std::string, std::string> read_checkpoint_metadata(const std::string& path);

}  // namespace tx::train
