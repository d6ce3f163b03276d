#include "io/tensor_file.h"

#include <cstring>

#include "core/error.h"
#include "core/half.h"

namespace tx::io {
namespace {

void check_count(const std::string& name, const Shape& shape, size_t count) {
  TX_CHECK(static_cast<int64_t>(count) == shape.numel(), "tensor '", name, "': ", count,
           " values for shape ", shape.str(), " (", shape.numel(),
           " elements); pass one value per element");
}

}  // namespace

NamedTensor NamedTensor::from_floats(std::string name, DType dtype, Shape shape,
                                     const std::vector<float>& values) {
  check_count(name, shape, values.size());
  NamedTensor t{std::move(name), dtype, std::move(shape), {}};
  t.data.resize(t.nbytes());
  uint8_t* out = t.data.data();
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::f32:
        std::memcpy(out + 4 * i, &values[i], 4);
        break;
      case DType::i32: {
        int32_t v = float_to_i32(values[i]);
        std::memcpy(out + 4 * i, &v, 4);
        break;
      }
      case DType::f16: {
        uint16_t h = float_to_f16(values[i]);
        std::memcpy(out + 2 * i, &h, 2);
        break;
      }
      case DType::bf16: {
        uint16_t h = float_to_bf16(values[i]);
        std::memcpy(out + 2 * i, &h, 2);
        break;
      }
      case DType::i8:
        out[i] = static_cast<uint8_t>(float_to_i8(values[i]));
        break;
    }
  }
  return t;
}

NamedTensor NamedTensor::from_ints(std::string name, Shape shape,
                                   const std::vector<int32_t>& values) {
  check_count(name, shape, values.size());
  NamedTensor t{std::move(name), DType::i32, std::move(shape), {}};
  t.data.resize(t.nbytes());
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

std::vector<float> NamedTensor::to_floats() const {
  TX_CHECK(data.size() == nbytes(), "tensor '", name, "' holds ", data.size(), " bytes but ",
           name_of(dtype), shape.str(), " needs ", nbytes());
  size_t n = static_cast<size_t>(shape.numel());
  std::vector<float> out(n);
  const uint8_t* in = data.data();
  for (size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::f32:
        std::memcpy(&out[i], in + 4 * i, 4);
        break;
      case DType::i32: {
        int32_t v;
        std::memcpy(&v, in + 4 * i, 4);
        out[i] = static_cast<float>(v);
        break;
      }
      case DType::f16: {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        out[i] = f16_to_float(h);
        break;
      }
      case DType::bf16: {
        uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        out[i] = bf16_to_float(h);
        break;
      }
      case DType::i8:
        out[i] = static_cast<float>(static_cast<int8_t>(in[i]));
        break;
    }
  }
  return out;
}

std::vector<int32_t> NamedTensor::to_ints() const {
  TX_CHECK(dtype == DType::i32, "tensor '", name, "' is ", name_of(dtype),
           ", not i32; read it with to_floats()");
  TX_CHECK(data.size() == nbytes(), "tensor '", name, "' holds ", data.size(), " bytes but ",
           name_of(dtype), shape.str(), " needs ", nbytes());
  std::vector<int32_t> out(static_cast<size_t>(shape.numel()));
  if (!out.empty()) std::memcpy(out.data(), data.data(), data.size());
  return out;
}

NamedTensor& TensorFile::add(NamedTensor tensor) {
  TX_CHECK(find(tensor.name) == nullptr, "tensor name '", tensor.name,
           "' is used twice; give each tensor a unique name");
  tensors.push_back(std::move(tensor));
  return tensors.back();
}

const NamedTensor* TensorFile::find(const std::string& name) const {
  for (const NamedTensor& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const NamedTensor& TensorFile::get(const std::string& name) const {
  const NamedTensor* t = find(name);
  TX_CHECK(t != nullptr, "no tensor named '", name, "' in the file (", tensors.size(),
           " tensors); check the name or that the checkpoint belongs to this model");
  return *t;
}

}  // namespace tx::io
