// TensorFile: named host tensors (raw little-endian bytes) and string metadata, in memory.
//
// The in-memory form of a checkpoint, independent of any device: code that owns a Backend
// downloads a parameter into a NamedTensor before saving and uploads after loading; io itself
// depends on core only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"

namespace tx::io {

struct NamedTensor {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  std::vector<uint8_t> data;  // numel * size_of(dtype) bytes, row-major, little-endian

  size_t nbytes() const { return static_cast<size_t>(shape.numel()) * size_of(dtype); }

  // Encodes `values` as `dtype` (f16/bf16 rounded to nearest even, i32 truncated).
  static NamedTensor from_floats(std::string name, DType dtype, Shape shape,
                                 const std::vector<float>& values);
  static NamedTensor from_ints(std::string name, Shape shape, const std::vector<int32_t>& values);
  // Decodes any dtype to float (i32 values beyond 2^24 lose precision).
  std::vector<float> to_floats() const;
  // The values of an i32 tensor; throws for other dtypes.
  std::vector<int32_t> to_ints() const;
};

struct TensorFile {
  std::vector<NamedTensor> tensors;  // written in this order
  std::map<std::string, std::string> metadata;

  // Appends a tensor; throws when the name is taken.
  NamedTensor& add(NamedTensor tensor);
  // nullptr when absent.
  const NamedTensor* find(const std::string& name) const;
  // Throws tx::Error naming the tensor when absent.
  const NamedTensor& get(const std::string& name) const;
};

}  // namespace tx::io
