// The batch plan's key: the options and data that fix each epoch's batches, recorded in the
// checkpoint so that a resume under others is refused rather than going on from a batch index
// that means other pairs in their plan.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "data/corpus.h"
#include "train/trainer.h"

namespace tx::train {

// A JSON object keyed by flag name (--max-tokens, --mini-batch, --maxi-batch, --seed,
// --sentencepiece-alphas) plus the corpus: its pair count after the length filter and a hash
// of the pairs' lengths (what the plan sorts and cuts by).
nlohmann::json batch_plan(const TrainerOptions& o, const data::ParallelCorpus& corpus);

// "" when the two plan the same batches (or `saved` is null: a checkpoint from before the key),
// else every difference, joined by ", ": the flag, the saved value and this run's (other data
// once, as a pair count if that differs, else as other lengths).
std::string batch_plan_change(const nlohmann::json& saved, const nlohmann::json& now);

}  // namespace tx::train
