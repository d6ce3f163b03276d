// Tensor: a dense row-major array of one dtype in one device's memory, owning or borrowed.
//
// The data pointer is a device pointer: code above the operator table never dereferences it;
// it reads values only through Backend::download (an explicit, synchronising copy).
#pragma once

#include <cstdint>
#include <memory>

#include "core/allocator.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace tx {

// A block of device memory; frees itself through its allocator unless borrowed.
struct Storage {
  Storage(void* data, size_t bytes, Device device, std::shared_ptr<Allocator> owner)
      : data(data), bytes(bytes), device(device), owner(std::move(owner)) {}
  ~Storage() {
    if (owner) owner->deallocate(data, bytes);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data;
  size_t bytes;
  Device device;
  std::shared_ptr<Allocator> owner;  // null: borrowed memory that someone else frees
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype, size_t offset_bytes = 0);

  // Allocates shape.numel() elements from `allocator` (uninitialised).
  static Tensor allocate(const std::shared_ptr<Allocator>& allocator, const Shape& shape,
                         DType dtype);
  // The bytes a dense `shape` of `dtype` needs: an error for a negative dimension or a size no
  // memory holds (a damaged or hostile file's shapes would otherwise overflow into a small
  // block, or make the allocator's rounding loop for ever).
  static size_t bytes_for(const Shape& shape, DType dtype);
  // Wraps memory owned elsewhere; the caller keeps it alive while the tensor is used.
  static Tensor borrow(void* data, const Shape& shape, DType dtype, Device device);

  bool defined() const { return static_cast<bool>(storage_); }
  // Another tensor (a view, a copy) holds this one's memory too.
  bool storage_shared() const { return storage_.use_count() > 1; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device : Device{}; }
  int ndim() const { return shape_.ndim(); }
  int64_t numel() const { return shape_.numel(); }
  int64_t dim(int i) const { return shape_[i]; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * size_of(dtype_); }

  // Device pointer to the first element; for backend code only.
  void* raw() const { return static_cast<char*>(storage_->data) + offset_; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw());
  }

  // Same memory, another shape with the same element count.
  Tensor view(const Shape& shape) const;
  // Rows [begin, end) along the first dimension, sharing memory.
  Tensor slice(int64_t begin, int64_t end) const;
  // True when both tensors start at the same address (an in-place operator call).
  bool same_memory(const Tensor& o) const { return defined() && o.defined() && raw() == o.raw(); }

  std::string str() const;  // "f32[2, 3] on cpu", for error messages

  // Declares that this tensor's bytes after its first keep_bytes will not be read again (until
  // written): the allocator may take back their pages and they read as unspecified values.
  void discard_after(size_t keep_bytes) const;

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  DType dtype_ = DType::f32;
  size_t offset_ = 0;
};

}  // namespace tx
