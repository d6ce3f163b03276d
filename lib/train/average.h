// Checkpoint averaging (Marian's and fairseq's average_checkpoints): the element-wise mean of
// the parameters of several checkpoints of one model, written as a model file.
//
// Averaging the last few checkpoints of a run usually gains a little BLEU over the last one
// alone (Vaswani et al. 2017 averaged the last 5 or 20). Only parameters are averaged: Adam's
// moments ("adam.*") and the trainer state are left out, so the output is a model file that
// train::load_model reads, not a checkpoint to resume from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tx::train {

struct AverageSummary {
  size_t inputs = 0;
  size_t tensors = 0;          // parameter tensors written
  int64_t parameters = 0;      // their elements
  size_t skipped_tensors = 0;  // optimiser state left out, summed over the inputs
  size_t smoothed_inputs = 0;  // checkpoints whose smoothed weights ("ema.*") were averaged
};

// Writes to `output` the mean of the inputs' parameters: of a training checkpoint with
// smoothed weights (--exponential-smoothing), those, as its model file holds. Every input must
// carry the same architecture ("tx.model_config" less the training choices that may change on
// resume: is_training_choice) and the same parameter names, shapes and dtypes; each
// difference is a tx::Error naming the file and the tensor or config field. Sums are kept in
// double, tensor by tensor, reading the inputs on demand, so memory stays near one model (the
// output) plus one tensor. f16 and bf16 tensors are averaged as floats and written back in
// their dtype. The output carries "tx.format" = "model", the first input's config and
// "tx.averaged_from" (the input paths as a JSON array); it is written atomically, and `output`
// naming one of the inputs is refused before anything is read.
AverageSummary average_checkpoints(const std::vector<std::string>& inputs,
                                   const std::string& output);

}  // namespace tx::train
