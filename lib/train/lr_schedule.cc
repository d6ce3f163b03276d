#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tx::train {
namespace {

void check_positive(double v, const char* what, const char* schedule) {
  TX_CHECK(std::isfinite(v) && v > 0, "learning-rate schedule '", schedule, "': ", what, " = ", v,
           " must be a positive number");
}

void check_warmup(int64_t warmup, const char* schedule) {
  TX_CHECK(warmup >= 1, "learning-rate schedule '", schedule, "': warmup = ", warmup,
           " must be at least 1 update (the rate decays from step == warmup)");
}

}  // namespace

LrSchedule LrSchedule::transformer(int64_t d_model, int64_t warmup, double factor) {
  TX_CHECK(d_model >= 1, "learning-rate schedule 'transformer': d_model = ", d_model,
           " must be positive");
  check_warmup(warmup, "transformer");
  check_positive(factor, "factor", "transformer");
  LrSchedule s(Kind::transformer);
  s.d_model_ = d_model;
  s.warmup_ = warmup;
  s.factor_ = factor;
  return s;
}

LrSchedule LrSchedule::inverse_sqrt(double peak_lr, int64_t warmup, double warmup_init_lr) {
  check_positive(peak_lr, "lr", "inverse-sqrt");
  check_warmup(warmup, "inverse-sqrt");
  TX_CHECK(std::isfinite(warmup_init_lr) && warmup_init_lr >= 0 && warmup_init_lr <= peak_lr,
           "learning-rate schedule 'inverse-sqrt': warmup_init_lr = ", warmup_init_lr,
           " must lie in [0, lr = ", peak_lr, "]");
  LrSchedule s(Kind::inverse_sqrt);
  s.lr_ = peak_lr;
  s.init_lr_ = warmup_init_lr;
  s.warmup_ = warmup;
  return s;
}

LrSchedule LrSchedule::linear(double peak_lr, int64_t warmup, int64_t total_updates) {
  check_positive(peak_lr, "lr", "linear");
  check_warmup(warmup, "linear");
  TX_CHECK(total_updates >= warmup, "learning-rate schedule 'linear': the run's last update (",
           total_updates, ") comes before the end of the warmup (", warmup,
           "); lower --lr-warmup or train longer");
  LrSchedule s(Kind::linear);
  s.lr_ = peak_lr;
  s.warmup_ = warmup;
  s.total_ = total_updates;
  return s;
}

LrSchedule LrSchedule::constant(double lr) {
  check_positive(lr, "lr", "constant");
  LrSchedule s(Kind::constant);
  s.lr_ = lr;
  return s;
}

std::vector<std::string> LrSchedule::names() {
  return {"transformer", "inverse-sqrt", "linear", "constant"};
}

LrSchedule LrSchedule::from_options(const LrOptions& o) {
  // "noam" is what OpenNMT and tensor2tensor call the paper's schedule; "inverse_sqrt" is
  // fairseq's spelling.
  if (o.schedule == "transformer" || o.schedule == "noam")
    return transformer(o.d_model, o.warmup, o.factor);
  if (o.schedule == "inverse-sqrt" || o.schedule == "inverse_sqrt")
    return inverse_sqrt(o.lr, o.warmup, o.warmup_init_lr);
  if (o.needs_total_updates()) {
    TX_CHECK(o.total_updates > 0,
             "learning-rate schedule 'linear' decays to the run's last update, which is not "
             "known; give --after-epochs, --after-updates or --after-minutes");
    return linear(o.lr, o.warmup, o.total_updates);
  }
  if (o.schedule == "constant") return constant(o.lr);
  throw Error(str("unknown learning-rate schedule '", o.schedule,
                  "'; choose transformer, inverse-sqrt, linear or constant"));
}

double LrSchedule::operator()(int64_t step) const {
  TX_CHECK(step >= 1, "learning-rate schedule: step ", step,
           " must be >= 1 (steps count updates from 1)");
  const double t = static_cast<double>(step), w = static_cast<double>(warmup_);
  switch (kind_) {
    case Kind::transformer:
      return factor_ / std::sqrt(static_cast<double>(d_model_)) *
             std::min(1.0 / std::sqrt(t), t / (w * std::sqrt(w)));
    case Kind::inverse_sqrt:
      if (step < warmup_) return init_lr_ + (lr_ - init_lr_) * t / w;
      return lr_ * std::sqrt(w / t);
    case Kind::linear:
      if (step < warmup_) return lr_ * t / w;
      if (step > total_) return 0;
      return lr_ * static_cast<double>(total_ + 1 - step) /
             static_cast<double>(total_ + 1 - warmup_);
    case Kind::constant:
      return lr_;
  }
  return 0;
}

std::string LrSchedule::name() const {
  switch (kind_) {
    case Kind::transformer:
      return "transformer";
    case Kind::inverse_sqrt:
      return "inverse-sqrt";
    case Kind::linear:
      return "linear";
    case Kind::constant:
      return "constant";
  }
  return "?";
}

std::string LrSchedule::describe() const {
  switch (kind_) {
    case Kind::transformer:
      return str("transformer(d_model=", d_model_, ", warmup=", warmup_, ", factor=", factor_, ")");
    case Kind::inverse_sqrt:
      return str("inverse-sqrt(lr=", lr_, ", warmup=", warmup_, ", warmup_init_lr=", init_lr_, ")");
    case Kind::linear:
      return str("linear(lr=", lr_, ", warmup=", warmup_, ", to 0 at update ", total_, ")");
    case Kind::constant:
      return str("constant(lr=", lr_, ")");
  }
  return "?";
}

}  // namespace tx::train
