// TimeBudget: --after-minutes, a run bounded by its training time rather than by epochs, and
// the last update of a linear schedule planned from the warm-up's pace (so the rate still
// comes down to 0 as the time runs out).
#pragma once

#include <chrono>
#include <cstdint>

namespace tx::train {

class TimeBudget {
 public:
  // minutes <= 0: no budget. `seconds_before`: the training time of the runs this one resumes.
  // `updates_before`: their updates; when their time is unknown (0 s: a checkpoint written
  // without a budget), the pace is taken from this process's updates alone.
  // `untimed_before`: when their time is known, how many of their updates it does not hold (a
  // run without a budget before them: TrainingState::untimed_updates).
  TimeBudget(double minutes, double seconds_before, int64_t updates_before = 0,
             int64_t untimed_before = 0);

  bool enabled() const { return budget_s_ > 0; }
  // The training loop's seconds so far, the earlier runs' included.
  double seconds() const;
  bool spent() const { return enabled() && seconds() >= budget_s_; }
  // Whether earlier runs timed some of their updates: their pace is known.
  bool earlier_pace_known() const { return before_s_ > 0; }
  // Updates before this process whose time seconds() does not hold (saved with the state).
  int64_t untimed_updates() const { return untimed_updates_; }
  // Seconds of this process that went to a checkpoint save or a validation: they recur every
  // save_freq and valid_freq updates, so the plan spreads them over those updates.
  void add_save(double s) { save_s_ += s, ++saves_; }
  void add_validation(double s) { valid_s_ += s, ++validations_; }
  // The last update the budget holds: `updates_done` plus as many more as the time left holds
  // at the pace so far, saves and validations (every save_freq and valid_freq updates; 0: none)
  // counted at their mean cost. Never below updates_done.
  int64_t last_update(int64_t updates_done, int64_t save_freq, int64_t valid_freq) const;

 private:
  double budget_s_, before_s_;
  int64_t untimed_updates_;  // updates before this process whose time is unknown
  double save_s_ = 0, valid_s_ = 0;
  int64_t saves_ = 0, validations_ = 0;
  std::chrono::steady_clock::time_point start_;
};

// updates_done + the whole updates that (budget_s - elapsed_s) holds at seconds_per_update
// (clamped so that a tiny pace cannot overflow); updates_done when nothing is left.
int64_t last_update_within(int64_t updates_done, double elapsed_s, double budget_s,
                           double seconds_per_update);

}  // namespace tx::train
