#include "train/training_state.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tx::train {

nlohmann::json TrainingState::to_json() const {
  nlohmann::json j = {{"update", update},
                      {"epoch", epoch},
                      {"data_position", data_position},
                      {"rng_seed", rng_seed},
                      {"rng_counter", rng_counter},
                      {"early_stopping", early_stopping.to_json()},
                      {"loss_scale", loss_scale},
                      {"loss_scale_clean", loss_scale_clean}};
  // Only a run with --after-minutes has them: the others' checkpoints keep their bytes.
  if (train_seconds > 0 || time_last_update > 0) {
    j["train_seconds"] = train_seconds;
    j["time_last_update"] = time_last_update;
    j["time_budget_minutes"] = time_budget_minutes;
    if (untimed_updates > 0) j["untimed_updates"] = untimed_updates;
  }
  if (!batch_plan.is_null()) j["batch_plan"] = batch_plan;
  if (!plan_from.empty()) j["plan_from"] = plan_from;
  if (!best_scores.empty()) j["best_scores"] = best_scores;
  if (!snapshot) j["snapshot"] = false;
  if (batches_per_update > 0) j["batches_per_update"] = batches_per_update;
  return j;
}

TrainingState TrainingState::from_json(const nlohmann::json& j, const std::string& where) {
  TX_CHECK(j.is_object(), where, ": the training state must be a JSON object, got ", j.dump());
  auto field = [&](const char* key) -> const nlohmann::json& {
    TX_CHECK(j.contains(key), where, ": the training state has no '", key,
             "'; the checkpoint is damaged or from another program");
    return j.at(key);
  };
  TrainingState s;
  const char* key = "";
  try {
    s.update = field(key = "update").get<int64_t>();
    s.epoch = field(key = "epoch").get<int64_t>();
    s.data_position = field(key = "data_position").get<std::vector<int64_t>>();
    // get<uint64_t> would wrap a negative number silently.
    TX_CHECK(
        field(key = "rng_seed").is_number_unsigned() && field("rng_counter").is_number_unsigned(),
        where, ": the training state's rng_seed and rng_counter must be unsigned integers");
    s.rng_seed = field("rng_seed").get<uint64_t>();
    s.rng_counter = field(key = "rng_counter").get<uint64_t>();
    if (j.contains(key = "loss_scale")) s.loss_scale = j.at(key).get<double>();
    if (j.contains(key = "loss_scale_clean")) s.loss_scale_clean = j.at(key).get<int64_t>();
    if (j.contains(key = "train_seconds")) s.train_seconds = j.at(key).get<double>();
    if (j.contains(key = "time_last_update")) s.time_last_update = j.at(key).get<int64_t>();
    if (j.contains(key = "time_budget_minutes")) s.time_budget_minutes = j.at(key).get<double>();
    if (j.contains(key = "untimed_updates")) s.untimed_updates = j.at(key).get<int64_t>();
    if (j.contains(key = "plan_from")) {
      s.plan_from = j.at(key).get<std::vector<int64_t>>();
      TX_CHECK(s.plan_from.size() == 3, where, ": the training state's plan_from must hold ",
               "3 numbers (update, epoch, batch); the checkpoint is damaged");
    }
    if (j.contains(key = "best_scores")) {
      s.best_scores = j.at(key).get<std::map<std::string, double>>();
      for (const auto& [metric, best] : s.best_scores) direction_of(metric);  // a known one
    }
    if (j.contains(key = "snapshot")) s.snapshot = j.at(key).get<bool>();
    if (j.contains(key = "batches_per_update")) s.batches_per_update = j.at(key).get<int64_t>();
    if (j.contains(key = "batch_plan")) {
      s.batch_plan = j.at(key);
      TX_CHECK(s.batch_plan.is_object(), where, ": the training state's batch_plan must be an ",
               "object; the checkpoint is damaged");
    }
  } catch (const nlohmann::json::exception&) {
    throw Error(str(where, ": the training state's '", key, "' = ", j.at(key).dump(),
                    " has the wrong type; the checkpoint is damaged"));
  }
  s.early_stopping = EarlyStopping::State::from_json(field("early_stopping"), where);
  return s;
}

bool TrainingState::operator==(const TrainingState& o) const {
  const EarlyStopping::State &a = early_stopping, &b = o.early_stopping;
  return update == o.update && epoch == o.epoch && data_position == o.data_position &&
         rng_seed == o.rng_seed && rng_counter == o.rng_counter && a.metric == b.metric &&
         a.has_best == b.has_best && a.best == b.best && a.stalled == b.stalled &&
         a.validations == b.validations && loss_scale == o.loss_scale &&
         loss_scale_clean == o.loss_scale_clean && train_seconds == o.train_seconds &&
         time_last_update == o.time_last_update && time_budget_minutes == o.time_budget_minutes &&
         untimed_updates == o.untimed_updates && batch_plan == o.batch_plan &&
         plan_from == o.plan_from && best_scores == o.best_scores && snapshot == o.snapshot &&
         batches_per_update == o.batches_per_update;
}

}  // namespace tx::train
