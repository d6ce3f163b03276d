// Graph: the context of one forward pass — backend, tape of backward kernels, dropout stream.
//
// Ops (graph/ops.h) run their forward operator at once and, when gradients are wanted, append
// a closure that runs the matching *_backward operators. backward() replays the closures in
// reverse order. With grad disabled nothing is recorded and no gradient buffer is allocated:
// the same layer code serves inference.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/arena.h"
#include "core/rng.h"
#include "graph/var.h"

namespace tx {

struct GraphOptions {
  bool grad = true;      // record the tape (training); false = inference
  bool training = true;  // dropout active; false = dropout is the identity
  uint64_t seed = 1;     // dropout masks come from (seed, counter), see core/rng.h
  // Take activations and their gradients from a per-step arena (rewound by reset()) instead
  // of the backend allocator. Vars must then not outlive reset().
  bool arena = false;
  // The operands of the GEMMs of ops::linear and ops::matmul: f32, or bf16 / f16 (mixed
  // precision, --precision): both operands rounded to it, products summed and stored in f32.
  // Everything else (activations, LayerNorm, softmax, the loss, the gradients) stays f32.
  DType gemm_dtype = DType::f32;
};

class Graph {
 public:
  using Backward = std::function<void(Graph&)>;

  explicit Graph(Backend& backend, GraphOptions options = {});

  Backend& backend() const { return be_; }
  bool grad_enabled() const { return options_.grad; }
  bool training() const { return options_.training; }
  // Nothing is recorded and a dropout of rate p is the identity: an op may then take a fused
  // inference form whose intermediates no backward could read.
  bool plain_forward(float p) const { return !options_.grad && (!options_.training || p == 0.0f); }
  void set_grad_enabled(bool on) { options_.grad = on; }
  void set_training(bool on) { options_.training = on; }
  DType gemm_dtype() const { return options_.gemm_dtype; }
  Rng& rng() { return rng_; }

  // Uninitialised memory for an op's output or scratch.
  Tensor alloc(const Shape& shape, DType dtype = DType::f32);
  // A new op output; it needs a gradient when grad is on and any input needs one.
  Var output(const Shape& shape, bool requires_grad);
  // True when an op with these inputs must record its backward.
  bool recording(std::initializer_list<const Var*> inputs) const;

  void record(Backward backward);
  size_t tape_size() const { return tape_.size(); }

  // v's gradient, allocated and zeroed on first use (once per step for activations; once
  // for parameters, which then accumulate until zeroed by their owner).
  const Tensor& grad(const Var& v);
  // Where an op that writes every element of v's gradient puts it. When v has none yet the
  // buffer is new and not zeroed and accumulate is false: the op must overwrite it (GEMM beta
  // 0, an operator's accumulate off). Otherwise the op adds into v's existing gradient.
  // Saves zeroing a buffer that is about to be overwritten (a few % of a training step).
  struct GradTarget {
    Tensor dx;
    bool accumulate;
    float beta() const { return accumulate ? 1.0f : 0.0f; }  // for a GEMM's C
  };
  GradTarget grad_target(const Var& v);
  // Makes dy itself v's gradient when v has none yet and is not a parameter, for ops whose
  // backward passes dy through unchanged (add, reshape): no zeroing, no copy. dy must be dead
  // to everything else once the calling closure returns. False: the caller must add dy.
  bool adopt_grad(const Var& v, const Tensor& dy);

  // Seeds d(loss) = 1 (loss holds one element), replays the tape in reverse, then drops it.
  void backward(const Var& loss);
  // The same with a given seed gradient dy (the shape of y): the gradient of sum(y * dy).
  void backward(const Var& y, const Tensor& dy);

  // x as a GEMM operand: x itself when gemm_dtype is f32, else x rounded to gemm_dtype in a
  // new tensor of this step's memory.
  Tensor gemm_operand(const Tensor& x);
  // A weight as a GEMM operand: its value for f32, else, for a parameter (persistent), its
  // rounded copy made on first use and kept (outside the arena) until weights_changed(): one
  // cast per weight per update, not one per batch or per use. Any other Var: gemm_operand.
  Tensor weight_operand(const Var& w);
  // The parameters' values changed (an optimiser step): drops the rounded copies.
  void weights_changed() { weight_copies_.clear(); }

  // Drops the tape and, with the arena, rewinds it: the start of a new step.
  void reset();
  // reset(), and the arena's memory given back (Arena::trim) until the next step.
  void trim();

 private:
  void check_replayable() const;
  void replay();

  Backend& be_;
  GraphOptions options_;
  Rng rng_;
  std::unique_ptr<Arena> arena_;
  std::vector<Backward> tape_;
  // A backward has replayed the tape since the last reset: a second would find it empty and
  // leave its gradients unwritten without a word.
  bool replayed_ = false;
  // weight_operand's copies; the key holds its Var so that no other node reuses the address.
  std::map<Var, Tensor> weight_copies_;
};

// Turns gradient recording off for a scope (inference inside a training graph).
class NoGradScope {
 public:
  explicit NoGradScope(Graph& g) : g_(g), was_(g.grad_enabled()) { g.set_grad_enabled(false); }
  ~NoGradScope() { g_.set_grad_enabled(was_); }
  NoGradScope(const NoGradScope&) = delete;
  NoGradScope& operator=(const NoGradScope&) = delete;

 private:
  Graph& g_;
  bool was_;
};

// Turns dropout off for a scope (inference with a training graph, e.g. incremental decoding).
class EvalScope {
 public:
  explicit EvalScope(Graph& g) : g_(g), was_(g.training()) { g.set_training(false); }
  ~EvalScope() { g_.set_training(was_); }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;

 private:
  Graph& g_;
  bool was_;
};

}  // namespace tx
