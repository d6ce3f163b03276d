// UpdateStep: one update of tx-train: the update's batches forward and backward (each process
// of a data-parallel run running its share), the all-reduce of their gradients and losses, and
// the Adam step. What Trainer::run repeats; where the arithmetic of an update lives.
//
// The gradients are views of one flat buffer, and the parameters of another
// (ParameterSet::make_contiguous), so that an Adam step is one norm and one update over each
// (Adam::set_flat) and, with several batches per update (processes or --optimizer-delay), one
// all-reduce sums all the gradients; three floats after them carry this process's loss and its
// stop request (one float per cause, so that every process learns why the run stops). With
// --optimizer-delay, each batch after a process's first is back-propagated apart, into a scratch
// buffer, and then added to the sum: the update's gradients are then per-batch sums added together,
// the same bits whether the batches ran in one process (--optimizer-delay 2) or two (mpirun -np 2),
// and only rounding apart for other splits. Batch k of such an update draws its dropout masks from
// counter start + k * 2^36 (see kDropoutStride), whichever process runs it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "data/batch.h"
#include "graph/graph.h"
#include "io/model_config.h"
#include "nn/parameters.h"
#include "nn/transformer.h"
#include "train/batch_loss.h"
#include "train/collective.h"
#include "train/loss_scaler.h"
#include "train/optimizer.h"

namespace tx::train {

// A batch k of an update with several batches draws its dropout masks from counter
// start + k * kDropoutStride, so that the process that runs it in a data-parallel run draws
// the masks one process with --optimizer-delay draws (it cannot know how many numbers the
// batches before k took). 2^36 numbers per batch is far beyond any batch's dropout; 2^28
// batches fit before the 64-bit counter wraps.
constexpr uint64_t kDropoutStride = uint64_t(1) << 36;

// Why a process asks a data-parallel run to stop after the current update.
enum class StopCause { none, time_budget, signal };

class UpdateStep {
 public:
  // The graph's rng draws the dropout masks; `world` is this process's run (one process: a
  // plain run). Binds the parameters' gradients to the flat buffer when an update has several
  // batches.
  // With a reduced gemm_dtype the graph's GEMMs take rounded weights, refreshed after each
  // step (Graph::weights_changed); `scaler` (fp16) scales the loss's gradient and learns from
  // each step whether it overflowed.
  UpdateStep(Backend& be, nn::Transformer& model, nn::ParameterSet& params, Adam& adam,
             Graph& graph, const io::ModelConfig& config, Collective& world,
             int64_t optimizer_delay, LossScaler& scaler);

  struct Result {
    int64_t tokens = 0;    // target tokens of all the update's batches, every process's
    double cost = 0;       // their summed label-smoothed loss, every process's
    bool complete = true;  // false: the batches ran out before the update was full
    // Some process asked to stop (data-parallel runs only); a signal anywhere outranks a spent
    // --after-minutes, since the clocks of the processes run out at slightly different times.
    StopCause stop = StopCause::none;
    double reduce_secs = 0;  // in the all-reduce, waiting for the slowest process included
    AdamStepInfo adam;       // when tokens > 0
    double loss_scale = 1;   // the scale this update's gradients were computed with
  };
  // Runs one update. `next` yields the update's batches in order, every process's (false: no
  // more); a process runs its share. With no token at all nothing is stepped (tokens 0).
  // `lr` is the update's learning rate; `stop_cause` is asked once, before the all-reduce of a
  // data-parallel run.
  Result run(const std::function<const data::Batch*()>& next, double lr,
             const std::function<StopCause()>& stop_cause);

  // tx-train --guided-alignment: each batch's loss gets the alignment term (its pointers must
  // outlive the step).
  void set_alignment(const AlignmentTerm& term) { alignment_ = term; }
  // tx-train --rdrop-alpha: each batch runs twice and its loss gets R-Drop's KL term
  // (batch_loss); 0: none.
  void set_rdrop_alpha(float alpha) { rdrop_alpha_ = alpha; }

  int64_t batches_per_update() const { return batches_per_update_; }
  // Every parameter's value, in order, in one buffer (ParameterSet::make_contiguous).
  const Tensor& flat_params() const { return flat_params_; }

 private:
  std::vector<Tensor> views_of(const Tensor& buffer) const;
  void bind_grads(const std::vector<Tensor>& views);

  Backend& be_;
  nn::Transformer& model_;
  nn::ParameterSet& params_;
  Adam& adam_;
  Graph& graph_;
  AlignmentTerm alignment_;
  float rdrop_alpha_ = 0.0f;
  const io::ModelConfig& config_;
  Collective& world_;
  int64_t optimizer_delay_;
  LossScaler& scaler_;
  int64_t batches_per_update_;
  int64_t n_grads_;
  // After the gradients in flat_: the loss, and the processes asking to stop on a signal and on
  // their time budget.
  static constexpr int64_t kTailSlots = 3;
  Tensor flat_, scratch_, flat_params_;
  std::vector<Tensor> sum_views_, scratch_views_;
};

}  // namespace tx::train
