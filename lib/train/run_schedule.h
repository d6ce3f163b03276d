// RunSchedule: when a training run logs, validates, saves and stops (Marian's Scheduler):
// functions of the update count and the options alone, so a resumed run keeps the same beat.
#pragma once

#include <cstdint>

#include "train/trainer.h"

namespace tx::train {

struct RunSchedule {
  RunSchedule(const TrainerOptions& o, bool validate)
      : disp_freq(o.disp_freq),
        valid_freq(o.valid_freq),
        save_freq(o.save_freq),
        after_updates(o.after_updates),
        validate(validate) {}

  // --after-updates reached (a resumed run counts the updates before it).
  bool finished(int64_t updates) const { return after_updates > 0 && updates >= after_updates; }
  // A log line after this update (every disp_freq, and after the last).
  bool display(int64_t update, bool last) const { return update % disp_freq == 0 || last; }
  bool validation(int64_t update) const { return validate && update % valid_freq == 0; }
  bool save(int64_t update) const { return update % save_freq == 0; }

  int64_t disp_freq, valid_freq, save_freq, after_updates;
  bool validate;
};

}  // namespace tx::train
