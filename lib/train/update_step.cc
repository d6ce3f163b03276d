#include "train/update_step.h"

#include <chrono>

#include "train/batch_loss.h"

namespace tx::train {

UpdateStep::UpdateStep(Backend& be, nn::Transformer& model, nn::ParameterSet& params, Adam& adam,
                       Graph& graph, const io::ModelConfig& config, Collective& world,
                       int64_t optimizer_delay, LossScaler& scaler)
    : be_(be),
      model_(model),
      params_(params),
      adam_(adam),
      graph_(graph),
      config_(config),
      world_(world),
      optimizer_delay_(optimizer_delay),
      scaler_(scaler),
      batches_per_update_(int64_t(world.size()) * optimizer_delay),
      n_grads_(params.numel()) {
  flat_ = be_.zeros({n_grads_ + kTailSlots});
  sum_views_ = views_of(flat_);
  bind_grads(sum_views_);
  if (optimizer_delay_ > 1) {
    scratch_ = be_.zeros({n_grads_});
    scratch_views_ = views_of(scratch_);
  }
  // The parameters in one buffer too: each Adam step is one norm and one update over both.
  flat_params_ = params_.make_contiguous(be_);
  adam_.set_flat(flat_params_, flat_.slice(0, n_grads_));
}

std::vector<Tensor> UpdateStep::views_of(const Tensor& buffer) const {
  std::vector<Tensor> views;
  int64_t offset = 0;
  for (const auto& item : params_.items()) {
    const Tensor& w = item.second->value;
    views.push_back(buffer.slice(offset, offset + w.numel()).view(w.shape()));
    offset += w.numel();
  }
  return views;
}

void UpdateStep::bind_grads(const std::vector<Tensor>& views) {
  for (size_t i = 0; i < views.size(); ++i) params_.items()[i].second->grad = views[i];
}

UpdateStep::Result UpdateStep::run(const std::function<const data::Batch*()>& next, double lr,
                                   const std::function<StopCause()>& stop_cause) {
  const int ranks = world_.size(), rank = world_.rank();
  Result r;
  r.loss_scale = scaler_.scale();
  const uint64_t rng_start = graph_.rng().counter();
  int64_t ran = 0;  // batches this process ran in this update
  for (int64_t k = 0; k < batches_per_update_; ++k) {
    const data::Batch* batch = next();
    if (!batch) {
      r.complete = false;
      break;
    }
    r.tokens += batch->tgt_tokens();
    if (k % ranks != rank) continue;  // another process's batch
    if (batches_per_update_ > 1) graph_.rng().set_counter(rng_start + uint64_t(k) * kDropoutStride);
    const bool apart = ran++ > 0;  // back-propagated into scratch, then added (see the header)
    if (apart) bind_grads(scratch_views_);
    const data::Batch& b = *batch;
    graph_.reset();
    Var loss = batch_loss(graph_, model_, b, config_.label_smoothing, config_.pad_id,
                          /*release_logits=*/true, alignment_.alignments ? &alignment_ : nullptr,
                          rdrop_alpha_);
    if (scaler_.enabled()) {
      const Tensor seed = graph_.alloc(loss->value.shape());
      be_.fill(seed, float(r.loss_scale));
      graph_.backward(loss, seed);
    } else {
      graph_.backward(loss);
    }
    // Read once the backward pass is queued: on a GPU, reading it first would leave the device
    // idle while the host queues the backward kernels.
    r.cost += be_.download<float>(loss->value)[0];
    graph_.reset();
    if (apart) {
      bind_grads(sum_views_);
      be_.axpy(1.0f, scratch_, flat_.slice(0, n_grads_));
      be_.fill(scratch_, 0.0f);
    }
  }
  if (batches_per_update_ > 1)
    graph_.rng().set_counter(rng_start + uint64_t(batches_per_update_) * kDropoutStride);
  if (r.tokens == 0) return r;  // the same on every process: they all read every batch
  if (ranks > 1) {
    // A signal may reach some processes only: they stop together after this update.
    const StopCause cause = stop_cause();
    const float tail[kTailSlots] = {float(r.cost), cause == StopCause::signal ? 1.0f : 0.0f,
                                    cause == StopCause::time_budget ? 1.0f : 0.0f};
    const Tensor tail_slots = flat_.slice(n_grads_, n_grads_ + kTailSlots);
    be_.copy_from_host(tail, tail_slots);
    const auto reduce_start = std::chrono::steady_clock::now();
    world_.all_reduce_sum(be_, flat_);
    r.reduce_secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - reduce_start).count();
    float summed[kTailSlots];
    be_.copy_to_host(tail_slots, summed);
    r.cost = summed[0];
    r.stop = summed[1] > 0   ? StopCause::signal
             : summed[2] > 0 ? StopCause::time_budget
                             : StopCause::none;
  }
  // The scale divides out here, with the token count (exactly 1 / tokens without a scaler).
  const float grad_scale =
      scaler_.enabled() ? float(1.0 / (double(r.tokens) * r.loss_scale)) : 1.0f / float(r.tokens);
  r.adam = adam_.step(float(lr), grad_scale);
  scaler_.update(r.adam.skipped);
  graph_.weights_changed();
  be_.fill(flat_, 0.0f);
  return r;
}

}  // namespace tx::train
