// TrainingState: the trainer's position that a checkpoint keeps beside the model and Adam.
//
// With the parameters, Adam's moments and step, and this, a resumed run makes the same updates
// as one that never stopped: the same batches (data position), the same dropout masks (RNG
// seed and counter), the same early-stopping decision.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/early_stopping.h"

namespace tx::train {

struct TrainingState {
  int64_t update = 0;  // updates done
  int64_t epoch = 0;
  // Where the data loader stands (e.g. epoch seed, batch index, shard offsets); opaque here,
  // handed back to the loader unchanged.
  std::vector<int64_t> data_position;
  // The dropout stream (core/rng.h): a Graph built with rng_seed, its counter set to
  // rng_counter, draws the masks the uninterrupted run would have drawn.
  uint64_t rng_seed = 1;
  uint64_t rng_counter = 0;
  EarlyStopping::State early_stopping;
  // fp16's loss scaler (train/loss_scaler.h): its scale (0: none, not an fp16 run) and its
  // clean updates since the scale last changed. Absent from older checkpoints: 0.
  double loss_scale = 0;
  int64_t loss_scale_clean = 0;
  // --after-minutes (train/time_budget.h): the training loop's seconds so far, and the last
  // update that the budget of `time_budget_minutes` was planned to hold (0: not planned yet),
  // so a resumed run keeps the schedule's end. Absent from older checkpoints: 0.
  double train_seconds = 0;
  int64_t time_last_update = 0;
  double time_budget_minutes = 0;
  // Updates of an earlier run without --after-minutes, whose time train_seconds does not hold:
  // the pace is train_seconds over the others.
  int64_t untimed_updates = 0;
  // What fixed the batches data_position counts in (train/batch_plan.h). Null in checkpoints
  // from before 2026-12-01: not checked.
  nlohmann::json batch_plan;
  // Where a --no-restore-corpus resume put the data: {update, epoch, batch}, from which the
  // --after-epochs end is counted. Empty: from update 0 (epoch 0, batch 0).
  std::vector<int64_t> plan_from;
  // Each validated metric's best score so far, the score its model.best-<metric> file holds;
  // kept for a metric this run does not validate, so that a later run that does again
  // compares with it. Empty in checkpoints from before 2026-12-01 (the early-stopping state
  // holds its metric's best).
  std::map<std::string, double> best_scores;
  // Whether the save that wrote this checkpoint wrote a --keep-last snapshot too: not a stop on
  // a signal, whose update is off the --save-freq grid (an interrupted run keeps the snapshots of
  // one that never stopped). Absent: true.
  bool snapshot = true;
  // Processes x --optimizer-delay of the run that wrote it: batches per update. 0: not recorded
  // (checkpoints from before 2026-12-02).
  int64_t batches_per_update = 0;

  nlohmann::json to_json() const;
  // Throws tx::Error naming `where` and the key for a missing or mistyped field.
  static TrainingState from_json(const nlohmann::json& j, const std::string& where);
  bool operator==(const TrainingState& o) const;
};

}  // namespace tx::train
