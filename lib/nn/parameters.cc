#include "nn/parameters.h"

namespace tx::nn {

Var ParameterSet::add(const std::string& name, Tensor value) {
  TX_CHECK(!name.empty(), "ParameterSet: a parameter needs a name");
  TX_CHECK(!contains(name), "ParameterSet: parameter '", name,
           "' is registered twice; give each module a distinct name");
  Var v = make_var(std::move(value), /*requires_grad=*/true, /*persistent=*/true);
  index_[name] = items_.size();
  items_.emplace_back(name, v);
  return v;
}

const Var& ParameterSet::get(const std::string& name) const {
  auto it = index_.find(name);
  TX_CHECK(it != index_.end(), "ParameterSet: no parameter named '", name, "' (", size(),
           " parameters, e.g. '", items_.empty() ? std::string() : items_.front().first, "')");
  return items_[it->second].second;
}

int64_t ParameterSet::numel() const {
  int64_t n = 0;
  for (const Item& it : items_) n += it.second->value.numel();
  return n;
}

void ParameterSet::zero_grad(Backend& be) {
  for (const Item& it : items_)
    if (it.second->grad.defined()) be.fill(it.second->grad, 0.0f);
}

void ParameterSet::drop_grads() {
  for (const Item& it : items_) it.second->grad = Tensor();
}

}  // namespace tx::nn
