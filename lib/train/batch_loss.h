// batch_loss: one batch's label-smoothed loss summed over its target tokens, on the graph: its
// ids uploaded, the model's teacher-forced forward pass, the loss (and in training, with
// --guided-alignment, the alignment term; with --rdrop-alpha, R-Drop's two passes and their KL).
// What training and validation both compute.
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

// --rdrop-alpha A (fairseq's R-Drop; 0: none): the batch runs twice, as data::doubled(b), and
// the loss is 1/2 (CE_1 + CE_2 + A KL) with KL = 1/2 (KL(p_1 || p_2) + KL(p_2 || p_1)) summed
// over the target tokens (and the alignment term the mean of the passes'): fairseq's CE_1 +
// CE_2 + A KL halved, the same direction for Adam, so the cost per token stays one pass's
// figure plus A/2 KL.
inline Var batch_loss(Graph& g, const nn::Transformer& model, const data::Batch& batch,
                      float smoothing, int32_t pad_id, bool release_logits,
                      const AlignmentTerm* alignment = nullptr, float rdrop_alpha = 0.0f) {
  Backend& be = g.backend();
  const bool rdrop = rdrop_alpha > 0;
  const data::Batch twice = rdrop ? data::doubled(batch) : data::Batch();
  const data::Batch& b = rdrop ? twice : batch;
  nn::Transformer::TappedLayer tapped;
  if (alignment) tapped.layer = alignment->layer;
  Var logits =
      model.forward(g, be.upload(b.src, {b.size, b.src_len}), be.upload(b.src_lengths, {b.size}),
                    be.upload(b.tgt_in, {b.size, b.tgt_len}), alignment ? &tapped : nullptr);
  const Tensor targets = be.upload(b.tgt_out, {b.size, b.tgt_len});
  Var kl;  // first: its backward reads the logits, which cross_entropy then leaves in place
  if (rdrop)
    kl = ops::sum(
        g, ops::symmetric_kl(g, logits,
                             targets.view({b.size * b.tgt_len}).slice(0, batch.size * b.tgt_len),
                             pad_id));
  Var loss =
      nn::label_smoothed_loss(g, logits, targets, smoothing, pad_id, nullptr, release_logits);
  if (alignment) {
    std::vector<const GuidedAlignments::Points*> points;
    for (int64_t i : b.indices)
      points.push_back(&alignment->alignments->line(alignment->corpus->line(i)));
    const io::ModelConfig& c = model.config();
    loss = ops::add(g, loss,
                    guided_alignment_loss(g, tapped.tap.scores, c.d_model / c.heads,
                                          alignment->head, b, points, alignment->weight));
  }
  if (!rdrop) return loss;
  return ops::scale(g, ops::add(g, loss, ops::scale(g, kl, rdrop_alpha)), 0.5f);
}

}  // namespace tx::train
