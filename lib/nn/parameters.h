// ParameterSet: a model's trainable tensors by dotted name, in creation order.
//
// Names follow the module tree ("encoder.layers.0.self_attn.q_proj.weight") so checkpoints
// can be saved, loaded and averaged by name. Modules hold the same Vars, so loading writes
// into a parameter's value tensor (Backend::copy) rather than replacing the Var.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "graph/var.h"
#include "io/tensor_file.h"

namespace tx::nn {

class ParameterSet {
 public:
  using Item = std::pair<std::string, Var>;

  // Registers value under a new name as a parameter (requires_grad, persistent gradient).
  Var add(const std::string& name, Tensor value);
  const Var& get(const std::string& name) const;
  bool contains(const std::string& name) const { return index_.count(name) != 0; }

  const std::vector<Item>& items() const { return items_; }
  size_t size() const { return items_.size(); }
  int64_t numel() const;  // total element count

  // Zeroes the gradients allocated so far; call once per update, after the optimiser step.
  // Until then backward passes accumulate (gradient accumulation over several batches).
  void zero_grad(Backend& be);
  // Frees all gradient buffers (e.g. before inference).
  void drop_grads();

  // Moves every value into one buffer, in order, and returns it: each Var keeps its node and
  // its value becomes a view of its slice (the same numbers). What lets an optimiser update
  // every parameter with one call (Adam::set_flat). Values only; all must be f32.
  Tensor make_contiguous(Backend& be);

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

// Moves `file`'s tensors into the parameters of the same names (an imported model's, already
// in tx's names and layouts, and checked for NaN and infinity by formats/ as it was read), freeing each tensor's bytes once it is on the device, so that the
// file and the parameters are not both held whole. Checks every name and shape first, so a
// mismatch changes nothing (and leaves the file whole); a parameter missing from the file or a
// tensor the model lacks is an error naming it and `where`.
void load_parameters(io::TensorFile&& file, Backend& be, const ParameterSet& params,
                     const std::string& where);

}  // namespace tx::nn
