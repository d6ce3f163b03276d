// Var: one value in the computation graph, with the gradient that flows back into it.
#pragma once

#include <memory>

#include "core/tensor.h"

namespace tx {

struct Node {
  Tensor value;
  // Undefined until the first gradient arrives; then allocated, zeroed and accumulated into.
  Tensor grad;
  bool requires_grad = false;
  // Parameters: grad lives in ordinary device memory (never the step arena) and keeps
  // accumulating over backward passes until ParameterSet::zero_grad.
  bool persistent = false;
  // Set by an op whose backward reads this value: ops::release then leaves it alone.
  bool value_needed = false;

  // Frees the value's memory and keeps its shape and dtype, which the gradient is sized by.
  void drop_value() { value = Tensor(nullptr, value.shape(), value.dtype()); }
};

// Shared so that the tape keeps the activations its backward kernels need alive.
using Var = std::shared_ptr<Node>;

// A leaf: an input (requires_grad when its gradient is wanted) or a parameter.
inline Var make_var(Tensor value, bool requires_grad = false, bool persistent = false) {
  auto n = std::make_shared<Node>();
  n->value = std::move(value);
  n->requires_grad = requires_grad;
  n->persistent = persistent;
  return n;
}

}  // namespace tx
