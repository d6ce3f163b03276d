// batch_loss: one batch's label-smoothed loss summed over its target tokens, on the graph: its
// ids uploaded, the model's teacher-forced forward pass, the loss (and in training, with
// --guided-alignment, the alignment term). What training and validation both compute.
#pragma once

#include <cstdint>

#include "data/batch.h"
#include "graph/graph.h"
#include "nn/loss.h"
#include "nn/transformer.h"
#include "train/guided_alignment.h"

namespace tx::train {

// tx-train --guided-alignment's term (train/guided_alignment.h), added to the loss.
struct AlignmentTerm {
  const GuidedAlignments* alignments = nullptr;  // null: no term
  const data::ParallelCorpus* corpus = nullptr;  // a batch row's pair -> its line
  float weight = 0.1f;
  int layer = 0;  // decoder layer, 0-based
  int head = 0;
};

inline Var batch_loss(Graph& g, const nn::Transformer& model, const data::Batch& b, float smoothing,
                      int32_t pad_id, bool release_logits,
                      const AlignmentTerm* alignment = nullptr) {
  Backend& be = g.backend();
  nn::Transformer::TappedLayer tapped;
  if (alignment) tapped.layer = alignment->layer;
  Var logits =
      model.forward(g, be.upload(b.src, {b.size, b.src_len}), be.upload(b.src_lengths, {b.size}),
                    be.upload(b.tgt_in, {b.size, b.tgt_len}), alignment ? &tapped : nullptr);
  Var loss = nn::label_smoothed_loss(g, logits, be.upload(b.tgt_out, {b.size, b.tgt_len}),
                                     smoothing, pad_id, nullptr, release_logits);
  if (!alignment) return loss;
  std::vector<const GuidedAlignments::Points*> points;
  for (int64_t i : b.indices)
    points.push_back(&alignment->alignments->line(alignment->corpus->line(i)));
  const io::ModelConfig& c = model.config();
  return ops::add(g, loss,
                  guided_alignment_loss(g, tapped.tap.scores, c.d_model / c.heads, alignment->head,
                                        b, points, alignment->weight));
}

}  // namespace tx::train
