#include "train/time_budget.h"

#include <algorithm>
#include <cmath>

namespace tx::train {

TimeBudget::TimeBudget(double minutes, double seconds_before, int64_t updates_before,
                       int64_t untimed_before)
    : budget_s_(minutes > 0 ? minutes * 60 : 0),
      before_s_(seconds_before),
      untimed_updates_(std::max<int64_t>(seconds_before > 0 ? untimed_before : updates_before, 0)),
      start_(std::chrono::steady_clock::now()) {}

double TimeBudget::seconds() const {
  return before_s_ +
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

int64_t TimeBudget::last_update(int64_t updates_done, int64_t save_freq, int64_t valid_freq) const {
  const int64_t timed = updates_done - untimed_updates_;
  if (timed <= 0) return updates_done;  // no pace yet
  const double elapsed = seconds();
  const double steps = std::max(elapsed - save_s_ - valid_s_, 0.0) / double(timed);
  double per_update = steps;
  if (saves_ > 0 && save_freq > 0) per_update += save_s_ / double(saves_) / double(save_freq);
  if (validations_ > 0 && valid_freq > 0)
    per_update += valid_s_ / double(validations_) / double(valid_freq);
  return last_update_within(updates_done, elapsed, budget_s_, per_update);
}

int64_t last_update_within(int64_t updates_done, double elapsed_s, double budget_s,
                           double seconds_per_update) {
  if (budget_s <= elapsed_s || seconds_per_update <= 0) return updates_done;
  const double more = std::min(std::floor((budget_s - elapsed_s) / seconds_per_update), 1e15);
  return updates_done + int64_t(more);
}

}  // namespace tx::train
