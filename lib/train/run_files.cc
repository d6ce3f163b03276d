#include "train/run_files.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "formats/model_file.h"
#include "io/atomic_file.h"
#include "train/checkpoint.h"

namespace tx::train {

namespace fs = std::filesystem;

namespace {

// Keeps the log's whole records up to `update`; rewritten (atomically) only when others are
// there.
void trim_log(const std::string& path, int64_t update) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  std::string kept, line;
  bool dropped = false;
  while (std::getline(in, line)) {
    bool keep = false;
    if (!in.eof()) {  // a last line without its newline is half a record
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      keep = j.is_object() && j.contains("update") && j["update"].is_number_integer() &&
             j["update"].get<int64_t>() <= update;
    }
    if (keep)
      kept += line + '\n';
    else
      dropped = true;
  }
  if (dropped) io::write_file_atomic(path, kept);
}

}  // namespace

RunFiles::RunFiles(Backend& be, const TrainerOptions& o, const io::ModelConfig& config,
                   const nn::ParameterSet& params, ExponentialSmoothing& smoothing,
                   std::map<std::string, std::string> model_meta, bool writer, int64_t update)
    : be_(be),
      o_(o),
      config_(config),
      params_(params),
      smoothing_(smoothing),
      model_meta_(std::move(model_meta)),
      writer_(writer) {
  if (!writer_) return;
  trim_log(Trainer::log_path(o_.model_dir), update);
  json_log_.open(Trainer::log_path(o_.model_dir), std::ios::app);
  TX_CHECK(json_log_, "cannot open '", Trainer::log_path(o_.model_dir),
           "' for appending; check the model directory's permissions");
}

void RunFiles::write_json(const nlohmann::json& record) {
  if (!writer_) return;
  json_log_ << record.dump() << '\n';
  json_log_.flush();
  TX_CHECK(json_log_, "writing '", Trainer::log_path(o_.model_dir), "' failed (disk full?)");
}

void RunFiles::save(const TrainingState& state, const Adam& adam) {
  if (!writer_) return;
  // The vocabularies a run was given (Marian's) go into the checkpoint as well: a resume
  // without -v finds them there when a crash left no model file.
  std::map<std::string, std::string> extra;
  for (const char* key : {formats::kVocabsKey, kVocabFingerprintKey})
    if (const auto it = model_meta_.find(key); it != model_meta_.end()) extra.insert(*it);
  save_checkpoint(Trainer::checkpoint_path(o_.model_dir), be_, config_, params_, adam, state, extra,
                  smoothing_.tensors());
  save_models(state.update, state.snapshot);
}

void RunFiles::save_models(int64_t update, bool snapshot) {
  if (!writer_) return;
  std::map<std::string, std::string> meta = model_meta_;
  meta[kUpdateKey] = std::to_string(update);
  smoothing_.swap();
  save_model(Trainer::model_path(o_.model_dir), be_, config_, params_, meta);
  snapshot = snapshot && o_.keep_last > 0;
  if (snapshot)
    save_model(Trainer::snapshot_path(o_.model_dir, update), be_, config_, params_, meta);
  smoothing_.swap();
  if (!snapshot) return;
  std::error_code ec;
  std::vector<std::pair<int64_t, std::string>> old = Trainer::snapshots(o_.model_dir);
  for (size_t i = 0; i + size_t(o_.keep_last) < old.size(); ++i) fs::remove(old[i].second, ec);
}

void RunFiles::catch_up_models(const TrainingState& state, bool quiet) {
  if (!writer_) return;
  const int64_t update = state.update;
  std::string model_update;
  try {
    const auto meta = read_checkpoint_metadata(Trainer::model_path(o_.model_dir));
    auto it = meta.find(kUpdateKey);
    if (it != meta.end()) model_update = it->second;
  } catch (const Error&) {  // missing or unreadable: rewritten below
  }
  std::error_code ec;
  const bool snapshot_missing = state.snapshot && o_.keep_last > 0 &&
                                !fs::exists(Trainer::snapshot_path(o_.model_dir, update), ec);
  if (model_update == std::to_string(update) && !snapshot_missing) return;
  if (!quiet)
    log(Trainer::model_path(o_.model_dir), " is not the checkpoint's update ", update,
        "; writing the checkpoint's weights there");
  save_models(update, state.snapshot);
}

void RunFiles::save_best(const std::string& metric, int64_t update) {
  if (!writer_) return;
  std::map<std::string, std::string> meta = model_meta_;
  meta[kUpdateKey] = std::to_string(update);
  save_model((fs::path(o_.model_dir) / ("model.best-" + metric + ".safetensors")).string(), be_,
             config_, params_, meta);
}

}  // namespace tx::train
