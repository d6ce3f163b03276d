#include "nn/parameters.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#ifdef __GLIBC__
#include <malloc.h>
#endif

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

Tensor ParameterSet::make_contiguous(Backend& be) {
  Tensor flat = be.empty({numel()});
  int64_t offset = 0;
  for (const Item& it : items_) {
    Tensor& value = it.second->value;
    TX_CHECK(value.dtype() == DType::f32, "ParameterSet: parameter '", it.first, "' is ",
             value.str(), "; one buffer holds f32 parameters only");
    const Tensor slice = flat.slice(offset, offset + value.numel()).view(value.shape());
    be.copy(value, slice);
    value = slice;
    offset += slice.numel();
  }
  return flat;
}

void load_parameters(io::TensorFile&& file, Backend& be, const ParameterSet& params,
                     const std::string& where) {
  for (const auto& [name, var] : params.items()) {
    const io::NamedTensor* t = file.find(name);
    TX_CHECK(t, where, " has no parameter '", name, "' ", var->value.shape().str(),
             "; it does not hold the model its config describes");
    TX_CHECK(t->shape == var->value.shape(), where, ": parameter '", name, "' is ", t->shape.str(),
             " but the model's is ", var->value.shape().str());
  }
  for (const io::NamedTensor& t : file.tensors)
    TX_CHECK(params.contains(t.name), where, " has a tensor '", t.name,
             "' that the model does not have");
  // No NaN check here: formats/ checked each tensor as it read the file, in the file's own
  // names and layouts (tx files go through train::load_model, which checks its own).
  for (io::NamedTensor& t : file.tensors) {
    const Tensor& value = params.get(t.name)->value;
    if (t.dtype == DType::f32) {
      be.copy_from_host(reinterpret_cast<const float*>(t.data.data()), value);
    } else {
      const std::vector<float> wide = t.to_floats();
      be.copy_from_host(wide.data(), value);
    }
    std::vector<uint8_t>().swap(t.data);
  }
  file = io::TensorFile();
#ifdef __GLIBC__
  // The file's arrays lay in glibc's heap, which keeps freed memory resident: give it back
  // before the model's next copies (inference's packed weights) raise the peak above it.
  malloc_trim(0);
#endif
}

}  // namespace tx::nn
