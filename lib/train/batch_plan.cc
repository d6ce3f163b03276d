#include "train/batch_plan.h"

#include <algorithm>
#include <cstdio>

#include "core/format.h"
#include "core/rng.h"

namespace tx::train {

nlohmann::json batch_plan(const TrainerOptions& o, const data::ParallelCorpus& corpus) {
  uint64_t h = mix64(static_cast<uint64_t>(corpus.size()));
  for (int64_t i = 0; i < corpus.size(); ++i)
    h = mix64(h ^ (static_cast<uint64_t>(corpus.src_length(i)) << 32 ^
                   static_cast<uint64_t>(corpus.tgt_length(i))));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  // Alphas of 0 keep the best segmentation, the same batches as no alphas at all.
  nlohmann::json alphas = nlohmann::json::array();
  if (std::any_of(o.sentencepiece_alphas.begin(), o.sentencepiece_alphas.end(),
                  [](float a) { return a != 0; }))
    for (float a : o.sentencepiece_alphas) alphas.push_back(static_cast<double>(a));
  return {{"--max-tokens", o.max_tokens},
          {"--mini-batch", o.max_sentences},
          {"--maxi-batch", o.maxi_batch},
          {"--seed", o.seed},
          {"--sentencepiece-alphas", alphas},
          {"pairs", corpus.size()},
          {"lengths", hex}};
}

std::string batch_plan_change(const nlohmann::json& saved, const nlohmann::json& now) {
  if (saved.is_null()) return "";
  // The pair count before the lengths: a count that differs says more than a hash.
  for (const char* key : {"--max-tokens", "--mini-batch", "--maxi-batch", "--seed",
                          "--sentencepiece-alphas", "pairs", "lengths"}) {
    const auto it = saved.find(key);
    if (it != saved.end() && *it == now.at(key)) continue;
    const std::string was = it == saved.end() ? "none" : it->dump();
    if (std::string(key) == "pairs")
      return str("other training data: ", was, " pairs after the length filter, now ",
                 now.at(key).dump(), " (the corpus or --max-length changed)");
    if (std::string(key) == "lengths")
      return "other training data: as many pairs, of other lengths (the corpus or --max-length "
             "changed)";
    return str(key, " ", was, " (this run: ", now.at(key).dump(), ")");
  }
  return "";
}

}  // namespace tx::train
