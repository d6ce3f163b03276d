// LrSchedule: the learning rate as a function of the 1-based update number.
//
// Four shapes: "transformer" (the paper's warmup then inverse square root, section 5.3),
// "inverse-sqrt" (fairseq's: linear warmup to a peak rate, then the same decay), "linear"
// (linear warmup to a peak, then linear decay towards 0 at the run's last update: fairseq's
// polynomial_decay with power 1) and "constant". A schedule is a pure function of the step, so
// a resumed run needs only the step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tx::train {

struct LrOptions {
  std::string schedule = "transformer";  // "transformer" | "inverse-sqrt" | "linear" | "constant"
  double lr = 5e-4;           // constant: the rate; inverse-sqrt, linear: the peak, at warmup
  double factor = 1.0;        // transformer: multiplies the paper's formula
  int64_t warmup = 4000;      // transformer, inverse-sqrt: warmup updates (>= 1)
  int64_t d_model = 512;      // transformer: the model width in d_model^-0.5
  double warmup_init_lr = 0;  // inverse-sqrt: the rate the linear warmup starts from (step 0)
  int64_t total_updates = 0;  // linear: the run's last update (the trainer derives it)

  // Whether the schedule needs total_updates (only "linear": it decays to the last update).
  bool needs_total_updates() const { return schedule == "linear"; }
};

class LrSchedule {
 public:
  enum class Kind { transformer, inverse_sqrt, linear, constant };

  // factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5): linear warmup, peak at
  // step == warmup, then decay with step^-0.5 (Vaswani et al. 2017, eq. 3).
  static LrSchedule transformer(int64_t d_model, int64_t warmup = 4000, double factor = 1.0);
  // step < warmup: init + (peak - init) * step / warmup; afterwards
  // peak * sqrt(warmup / step) (fairseq's inverse_sqrt).
  static LrSchedule inverse_sqrt(double peak_lr, int64_t warmup, double warmup_init_lr = 0.0);
  // step < warmup: peak * step / warmup; afterwards
  // peak * (total + 1 - step) / (total + 1 - warmup): the last update, step == total, still
  // moves (by peak / (total + 1 - warmup)); steps past total get 0.
  static LrSchedule linear(double peak_lr, int64_t warmup, int64_t total_updates);
  static LrSchedule constant(double lr);

  // The schedule options.schedule names, with its parameters from options; an unknown name or
  // an invalid parameter is a tx::Error naming it and the choices.
  static LrSchedule from_options(const LrOptions& options);
  static std::vector<std::string> names();

  // The rate for update `step` (1-based: the first update is step 1).
  double operator()(int64_t step) const;

  Kind kind() const { return kind_; }
  std::string name() const;
  // "transformer(d_model=512, warmup=4000, factor=1)", for the training log.
  std::string describe() const;

 private:
  explicit LrSchedule(Kind kind) : kind_(kind) {}

  Kind kind_;
  double lr_ = 0;        // constant: the rate; inverse-sqrt, linear: the peak
  double init_lr_ = 0;   // inverse-sqrt
  double factor_ = 1;    // transformer
  int64_t d_model_ = 0;  // transformer
  int64_t warmup_ = 0;   // transformer, inverse-sqrt, linear
  int64_t total_ = 0;    // linear
};

}  // namespace tx::train
