#include "train/early_stopping.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tx::train {

MetricDirection direction_of(const std::string& metric) {
  if (metric == "ce" || metric == "cross-entropy" || metric == "perplexity" || metric == "loss")
    return MetricDirection::lower_is_better;
  if (metric == "bleu" || metric == "chrf") return MetricDirection::higher_is_better;
  throw Error(str("unknown validation metric '", metric,
                  "'; choose cross-entropy, perplexity, bleu or chrf"));
}

nlohmann::json EarlyStopping::State::to_json() const {
  nlohmann::json j = {{"metric", metric},
                      {"has_best", has_best},
                      {"stalled", stalled},
                      {"validations", validations}};
  // Only finite scores become the best (JSON has no infinity); has_best says whether `best`
  // means anything. nlohmann prints doubles with enough digits to read back bit-exact.
  j["best"] = has_best ? best : 0.0;
  return j;
}

EarlyStopping::State EarlyStopping::State::from_json(const nlohmann::json& j,
                                                     const std::string& where) {
  auto field = [&](const char* key) -> const nlohmann::json& {
    TX_CHECK(j.is_object() && j.contains(key), where, ": early-stopping state has no '", key,
             "'; the checkpoint is damaged or from another program");
    return j.at(key);
  };
  State s;
  try {
    s.metric = field("metric").get<std::string>();
    s.has_best = field("has_best").get<bool>();
    s.best = field("best").get<double>();
    s.stalled = field("stalled").get<int64_t>();
    s.validations = field("validations").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(str(where, ": early-stopping state ", j.dump(), " has a field of the wrong type (",
                    e.what(), "); the checkpoint is damaged"));
  }
  return s;
}

EarlyStopping::EarlyStopping(std::string metric, int64_t patience)
    : EarlyStopping(metric, direction_of(metric), patience) {}

EarlyStopping::EarlyStopping(std::string metric, MetricDirection direction, int64_t patience)
    : direction_(direction), patience_(patience) {
  TX_CHECK(!metric.empty(), "EarlyStopping: the metric needs a name");
  state_.metric = std::move(metric);
}

bool improves(MetricDirection direction, double score, const double* best) {
  if (!std::isfinite(score)) return false;
  if (!best) return true;
  return direction == MetricDirection::lower_is_better ? score < *best : score > *best;
}

bool EarlyStopping::improves(double score) const {
  return train::improves(direction_, score, state_.has_best ? &state_.best : nullptr);
}

void EarlyStopping::start_from_best(double best) {
  TX_CHECK(std::isfinite(best), "early stopping: a best score must be finite, got ", best);
  state_.has_best = true;
  state_.best = best;
  state_.stalled = 0;
  state_.validations = 0;
}

bool EarlyStopping::update(double score) {
  ++state_.validations;
  if (improves(score)) {
    state_.has_best = true;
    state_.best = score;
    state_.stalled = 0;
    return true;
  }
  ++state_.stalled;
  return false;
}

void EarlyStopping::restore(const State& state) {
  TX_CHECK(state.metric == state_.metric, "early stopping: the checkpoint tracked '", state.metric,
           "' but this run validates '", state_.metric, "'; validate '", state.metric,
           "' to resume, or start early stopping afresh");
  TX_CHECK(state.stalled >= 0 && state.validations >= 0,
           "early stopping: restored counts must be >= 0 (stalled ", state.stalled,
           ", validations ", state.validations, ")");
  state_ = state;
}

}  // namespace tx::train
