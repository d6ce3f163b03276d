#include "graph/graph.h"

#include <limits>

namespace tx {

Graph::Graph(Backend& backend, GraphOptions options)
    : be_(backend), options_(options), rng_(options.seed) {
  if (options_.arena) arena_ = std::make_unique<Arena>(be_.allocator());
}

Tensor Graph::alloc(const Shape& shape, DType dtype) {
  return arena_ ? arena_->allocate(shape, dtype) : be_.empty(shape, dtype);
}

Var Graph::output(const Shape& shape, bool requires_grad) {
  return make_var(alloc(shape), requires_grad && options_.grad);
}

bool Graph::recording(std::initializer_list<const Var*> inputs) const {
  for (const Var* v : inputs)
    TX_CHECK(!*v || (*v)->value.defined(),
             "graph: an op read an activation whose value ops::release had freed");
  if (!options_.grad) return false;
  for (const Var* v : inputs)
    if (*v && (*v)->requires_grad) return true;
  return false;
}

void Graph::record(Backward backward) {
  if (options_.grad) tape_.push_back(std::move(backward));
}

const Tensor& Graph::grad(const Var& v) {
  if (!v->grad.defined()) {
    // Parameter gradients outlive the step, so they never come from the arena.
    v->grad = v->persistent ? be_.empty(v->value.shape()) : alloc(v->value.shape());
    be_.fill(v->grad, 0.0f);
  }
  return v->grad;
}

Graph::GradTarget Graph::grad_target(const Var& v) {
  if (v->grad.defined()) return {v->grad, true};
  v->grad = v->persistent ? be_.empty(v->value.shape()) : alloc(v->value.shape());
#ifdef TX_POISON_FRESH_GRADS
  // Sanitizer builds: an op that reads or skips part of a buffer it was told to overwrite
  // leaves NaN in the gradient, which the gradient tests then catch.
  be_.fill(v->grad, std::numeric_limits<float>::quiet_NaN());
#endif
  return {v->grad, false};
}

bool Graph::adopt_grad(const Var& v, const Tensor& dy) {
  if (v->grad.defined() || v->persistent) return false;
  TX_CHECK(dy.shape() == v->value.shape() && dy.dtype() == DType::f32, "adopt_grad: gradient ",
           dy.str(), " does not fit ", v->value.str());
  v->grad = dy;
  return true;
}

void Graph::backward(const Var& loss) {
  check_replayable();
  TX_CHECK(loss->value.numel() == 1, "backward: the loss ", loss->value.str(),
           " must hold one element; pass a seed gradient for a tensor output");
  TX_CHECK(loss->requires_grad,
           "backward: the loss does not depend on anything that needs a "
           "gradient (was it computed with grad disabled?)");
  be_.fill(grad(loss), 1.0f);
  replay();
}

void Graph::backward(const Var& y, const Tensor& dy) {
  check_replayable();
  TX_CHECK(y->requires_grad,
           "backward: the output does not depend on anything that needs a "
           "gradient (was it computed with grad disabled?)");
  TX_CHECK(dy.shape() == y->value.shape(), "backward: seed gradient ", dy.str(),
           " must have the shape of the output ", y->value.str());
  be_.axpy(1.0f, dy, grad(y));
  replay();
}

void Graph::check_replayable() const {
  TX_CHECK(!replayed_ || !tape_.empty(),
           "backward: an earlier backward replayed this graph's tape; record the forward again "
           "(after Graph::reset) for another backward");
}

void Graph::replay() {
  replayed_ = true;
  // Each closure was appended after its inputs' producers, so reverse order is topological.
  // Taken out first: if a closure throws, a retried backward must not replay any of them twice.
  std::vector<Backward> tape = std::move(tape_);
  tape_.clear();
  // Each closure is destroyed once run: the activations and gradients only it still holds are
  // freed as the replay goes down, so the step's peak is not every activation plus every
  // activation gradient.
  for (size_t i = tape.size(); i-- > 0;) {
    tape[i](*this);
    tape[i] = nullptr;
  }
}

Tensor Graph::gemm_operand(const Tensor& x) {
  if (options_.gemm_dtype == DType::f32) return x;
  Tensor low = alloc(x.shape(), options_.gemm_dtype);
  be_.cast(x, low);
  return low;
}

Tensor Graph::weight_operand(const Var& w) {
  if (options_.gemm_dtype == DType::f32) return w->value;
  if (!w->persistent) return gemm_operand(w->value);  // not a parameter: a value of this step
  auto it = weight_copies_.find(w);
  if (it == weight_copies_.end()) {
    Tensor low = be_.empty(w->value.shape(), options_.gemm_dtype);
    be_.cast(w->value, low);
    it = weight_copies_.emplace(w, std::move(low)).first;
  }
  return it->second;
}

void Graph::reset() {
  tape_.clear();
  replayed_ = false;
  if (arena_) arena_->reset();
}

void Graph::trim() {
  tape_.clear();
  replayed_ = false;
  if (arena_) arena_->trim();
}

}  // namespace tx
