// Guided alignment (tx-train --guided-alignment, Marian's): a cross-entropy that pulls one
// cross-attention head towards given word alignments of the training pairs.
//
// Marian's rule (src/layers/guided_alignment.h, src/data/alignment.cpp): each pair's points
// `s-t` (source, target token, counted from 0 over the pieces the vocabularies make) plus one
// linking source eos to target eos; each point weighs 1 / (points of its target token); the
// term is weight * sum over points of -point weight * log p(s | t), p the head's attention, and
// is added to the summed label-smoothed loss before the division by target tokens (the logged
// cost includes it). tx takes log p as the log-softmax of the head's scores; Marian takes
// log(p + 1e-6), which caps a point's cost at 13.8, so where the head attends far from a point
// (a model fine-tuned to align) tx's term and gradient are larger at first.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/batch.h"
#include "data/corpus.h"
#include "graph/graph.h"
#include "graph/ops.h"

namespace tx::train {

// One line per training pair, Marian's format: `s-t` pairs separated by spaces.
class GuidedAlignments {
 public:
  using Points = std::vector<std::pair<int32_t, int32_t>>;  // (source, target)
  // Throws tx::Error naming the file, line and token of a malformed pair.
  explicit GuidedAlignments(const std::string& path);
  int64_t lines() const { return static_cast<int64_t>(lines_.size()); }
  // 1-based line number, as data::ParallelCorpus::line gives it.
  const Points& line(int64_t number) const { return lines_[static_cast<size_t>(number - 1)]; }
  const std::string& path() const { return path_; }
  // Every point of `corpus`'s pairs within them (eos included); throws tx::Error naming the
  // file, line and point otherwise: positions must count the vocabularies' pieces.
  void check(const data::ParallelCorpus& corpus) const;

 private:
  std::string path_;
  std::vector<Points> lines_;
};

// The term for a batch: scores [B, heads, T, S] (the layer's unscaled scores,
// Transformer::TappedLayer), d_head their scale's, `head` the trained head; points[b]
// row b's pairs (points outside the row's tokens are left out, e.g. of a cropped pair). A [1]
// tensor, weight included.
Var guided_alignment_loss(Graph& g, const Var& scores, int64_t d_head, int head,
                          const data::Batch& batch,
                          const std::vector<const GuidedAlignments::Points*>& points, float weight);

}  // namespace tx::train
