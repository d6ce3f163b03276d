// EarlyStopping: tracks a validation metric and says when it has stopped improving.
//
// Patience counts validations, as in Marian (--early-stopping) and fairseq (--patience): after
// `patience` validations in a row without a new best score, training should stop. Its state
// (best score, stalled count) travels in the checkpoint, so a resumed run stops when the
// uninterrupted one would have.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace tx::train {

enum class MetricDirection { lower_is_better, higher_is_better };

// The direction of a known metric: cross-entropy ("ce", "cross-entropy"), "perplexity" and
// "loss" are lower-better; "bleu" and "chrf" are higher-better. Unknown names are an error.
MetricDirection direction_of(const std::string& metric);

// Whether `score` is a new best after `best` (null: none yet): finite, and strictly better.
bool improves(MetricDirection direction, double score, const double* best);

class EarlyStopping {
 public:
  // What a checkpoint keeps.
  struct State {
    std::string metric;
    bool has_best = false;  // false until the first validation
    double best = 0;
    int64_t stalled = 0;      // validations in a row since the last new best
    int64_t validations = 0;  // validations seen

    nlohmann::json to_json() const;
    // Throws tx::Error naming `where` and the key for a missing or mistyped field.
    static State from_json(const nlohmann::json& j, const std::string& where);
  };

  // patience <= 0: never stop (the best score is still tracked).
  EarlyStopping(std::string metric, int64_t patience);
  EarlyStopping(std::string metric, MetricDirection direction, int64_t patience);

  // Records one validation score; returns true when it is a new best (the first finite score
  // always is). A score must beat the best strictly; NaN and infinities never do (a diverged
  // model is no best).
  bool update(double score);
  // True when `score` would be a new best (it is not recorded).
  bool improves(double score) const;
  bool should_stop() const { return patience_ > 0 && state_.stalled >= patience_; }

  const std::string& metric() const { return state_.metric; }
  MetricDirection direction() const { return direction_; }
  int64_t patience() const { return patience_; }
  bool has_best() const { return state_.has_best; }
  double best() const { return state_.best; }
  int64_t stalled() const { return state_.stalled; }

  const State& state() const { return state_; }
  // Restores a checkpoint's state. One for another metric is an error: its best score would
  // mean nothing here.
  void restore(const State& state);
  // Starts from an earlier run's best score of this metric (no validation counted yet), as
  // after resuming a run that validated another metric first.
  void start_from_best(double best);

 private:
  MetricDirection direction_;
  int64_t patience_;
  State state_;
};

}  // namespace tx::train
