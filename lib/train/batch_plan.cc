#include "train/batch_plan.h"

#include "core/error.h"
#include "core/format.h"
#include "core/rng.h"

namespace tx::train {

namespace {

// The plan's fields in the order a difference is reported: the pair count before the lengths,
// since a count that differs says more than a hash. (--max-length, which also cuts sampled
// segmentations, is the model's: a checkpoint refuses another one.)
constexpr const char* kFields[] = {"--max-tokens", "--mini-batch",           "--maxi-batch",
                                   "--seed",       "--sentencepiece-alphas", "pairs",
                                   "lengths"};

}  // namespace

nlohmann::json batch_plan(const TrainerOptions& o, const data::ParallelCorpus& corpus) {
  uint64_t h = mix64(static_cast<uint64_t>(corpus.size()));
  for (int64_t i = 0; i < corpus.size(); ++i)
    h = mix64(h ^ (static_cast<uint64_t>(corpus.src_length(i)) << 32 ^
                   static_cast<uint64_t>(corpus.tgt_length(i))));
  // Sampling's alphas as [source, target] (a missing one is 0); alphas of 0 sample nothing.
  nlohmann::json alphas = nlohmann::json::array();
  if (o.samples_subwords())
    for (size_t side = 0; side < 2; ++side)
      alphas.push_back(shortest_double(
          side < o.sentencepiece_alphas.size() ? o.sentencepiece_alphas[side] : 0.0f));
  const nlohmann::json plan = {{"--max-tokens", o.max_tokens},
                               {"--mini-batch", o.max_sentences},
                               {"--maxi-batch", o.maxi_batch},
                               {"--seed", o.seed},
                               {"--sentencepiece-alphas", alphas},
                               {"pairs", corpus.size()},
                               {"lengths", hex16(h)}};
  for (const char* field : kFields) TX_CHECK(plan.contains(field), "batch plan: no ", field);
  return plan;
}

std::string batch_plan_change(const nlohmann::json& saved, const nlohmann::json& now) {
  if (saved.is_null()) return "";
  std::string changes;
  auto add = [&](const std::string& change) { changes += (changes.empty() ? "" : ", ") + change; };
  for (const char* key : kFields) {
    const auto it = saved.find(key);
    // (A field the saved plan lacks is not compared: none yet, but a later one would be.)
    if (it == saved.end() || *it == now.at(key)) continue;
    const std::string was = it->dump();
    if (std::string(key) == "pairs") {
      add(str("other training data: ", was, " pairs after the length filter, now ",
              now.at(key).dump(), " (the corpus changed)"));
      break;  // their lengths differ too
    }
    if (std::string(key) == "lengths")
      add("other training data: as many pairs, of other lengths (the corpus changed)");
    else
      add(str(key, " ", was, " (this run: ", now.at(key).dump(), ")"));
  }
  return changes;
}

}  // namespace tx::train
