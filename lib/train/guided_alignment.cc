#include "train/guided_alignment.h"

#include <cmath>
#include <fstream>
#include <map>

#include "core/error.h"

namespace tx::train {

GuidedAlignments::GuidedAlignments(const std::string& path) : path_(path) {
  std::ifstream in(path, std::ios::binary);
  TX_CHECK(in.good(), "--guided-alignment: cannot open '", path,
           "'; give the alignment file of the training pairs (one 's-t ...' line per pair)");
  std::string text;
  while (std::getline(in, text)) {
    if (!text.empty() && text.back() == '\r') text.pop_back();
    Points points;
    size_t at = 0;
    while (at < text.size()) {
      const size_t end = std::min(text.find(' ', at), text.size());
      const std::string token = text.substr(at, end - at);
      at = end + 1;
      if (token.empty()) continue;
      const size_t dash = token.find('-');
      size_t used_s = 0, used_t = 0;
      long s = -1, t = -1;
      try {
        if (dash != std::string::npos) {
          s = std::stol(token.substr(0, dash), &used_s);
          t = std::stol(token.substr(dash + 1), &used_t);
        }
      } catch (const std::exception&) {
        s = -1;
      }
      TX_CHECK(dash != std::string::npos && used_s == dash && used_t == token.size() - dash - 1 &&
                   s >= 0 && t >= 0 && s < (1L << 30) && t < (1L << 30),
               "--guided-alignment: '", path, "' line ", lines_.size() + 1, ": '", token,
               "' is not a source-target pair of token positions such as 3-2");
      points.emplace_back(static_cast<int32_t>(s), static_cast<int32_t>(t));
    }
    lines_.push_back(std::move(points));
  }
}

void GuidedAlignments::check(const data::ParallelCorpus& corpus) const {
  for (int64_t i = 0; i < corpus.size(); ++i) {
    const int64_t number = corpus.line(i);
    // Positions count the pieces and eos: source 0 .. length, target 0 .. length.
    for (const auto& [s, t] : line(number))
      TX_CHECK(s <= corpus.src_length(i) && t <= corpus.tgt_length(i), "--guided-alignment: '",
               path_, "' line ", number, ": ", s, "-", t, " is outside the pair's ",
               corpus.src_length(i), " source and ", corpus.tgt_length(i),
               " target pieces; align the pieces the vocabularies make (spm_encode the corpus "
               "first), not the words");
  }
}

Var guided_alignment_loss(Graph& g, const Var& scores, int64_t d_head, int head,
                          const data::Batch& batch,
                          const std::vector<const GuidedAlignments::Points*>& points,
                          float weight) {
  const Shape& shape = scores->value.shape();
  TX_CHECK(shape.ndim() == 4 && shape[0] == batch.size && head >= 0 && head < shape[1],
           "guided alignment: scores ", shape.str(), " do not fit a batch of ", batch.size,
           " and head ", head);
  const int64_t H = shape[1], T = shape[2], S = shape[3];
  // Each point: its row of scores, its source position (the row's target), its weight.
  std::vector<int32_t> rows, sources;
  std::vector<float> weights;
  for (int64_t b = 0; b < batch.size; ++b) {
    const int32_t src_len = batch.src_lengths[b], tgt_len = batch.tgt_lengths[b];
    GuidedAlignments::Points kept;
    if (points[b])
      for (const auto& [s, t] : *points[b])
        if (s < src_len && t < tgt_len) kept.emplace_back(s, t);
    kept.emplace_back(src_len - 1, tgt_len - 1);  // eos to eos, as Marian adds
    std::map<int32_t, int> per_target;
    for (const auto& p : kept) ++per_target[p.second];
    for (const auto& [s, t] : kept) {
      rows.push_back(static_cast<int32_t>((b * H + head) * T + t));
      sources.push_back(s);
      weights.push_back(1.0f / float(per_target[t]));
    }
  }
  Backend& be = g.backend();
  const Var table = ops::reshape(g, scores, {batch.size * H * T, S});
  // Points of equal weight (1 / points of their target) are summed together and scaled once:
  // sums and scales in f32 whatever --precision rounds GEMM operands to.
  std::map<float, std::vector<size_t>> by_weight;
  for (size_t k = 0; k < rows.size(); ++k) by_weight[weights[k]].push_back(k);
  Var total;
  for (const auto& [w, points_k] : by_weight) {
    const auto K = static_cast<int64_t>(points_k.size());
    std::vector<int32_t> group_rows, group_sources;
    // The points' rows of scaled scores, each row's padding keys masked.
    std::vector<float> mask(static_cast<size_t>(K * S), 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      const size_t p = points_k[static_cast<size_t>(k)];
      group_rows.push_back(rows[p]);
      group_sources.push_back(sources[p]);
      const int64_t b = rows[p] / (H * T);
      for (int64_t s = batch.src_lengths[b]; s < S; ++s) mask[k * S + s] = -1e30f;
    }
    const Var logits =
        ops::embedding(g, table, be.upload(group_rows, {K}), 1.0f / std::sqrt(float(d_head)));
    const Var masked = ops::add(g, logits, make_var(be.upload(mask, {K, S})));
    const Var losses = ops::cross_entropy(g, masked, be.upload(group_sources, {K}), 0.0f, -1);
    const Var term = ops::scale(g, ops::sum(g, losses), w * weight);
    total = total ? ops::add(g, total, term) : term;
  }
  return total;
}

}  // namespace tx::train
