// batch_loss: one batch's label-smoothed loss summed over its target tokens, on the graph: its
// ids uploaded, the model's teacher-forced forward pass, the loss. What training and
// validation both compute.
#pragma once

#include <cstdint>

#include "data/batch.h"
#include "graph/graph.h"
#include "nn/loss.h"
#include "nn/transformer.h"

namespace tx::train {

inline Var batch_loss(Graph& g, const nn::Transformer& model, const data::Batch& b, float smoothing,
                      int32_t pad_id, bool release_logits) {
  Backend& be = g.backend();
  Var logits =
      model.forward(g, be.upload(b.src, {b.size, b.src_len}), be.upload(b.src_lengths, {b.size}),
                    be.upload(b.tgt_in, {b.size, b.tgt_len}));
  return nn::label_smoothed_loss(g, logits, be.upload(b.tgt_out, {b.size, b.tgt_len}), smoothing,
                                 pad_id, nullptr, release_logits);
}

}  // namespace tx::train
