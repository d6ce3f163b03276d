#include "core/tensor.h"

#include "core/error.h"

namespace tx {

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, DType dtype, size_t offset_bytes)
    : storage_(std::move(storage)), shape_(std::move(shape)), dtype_(dtype), offset_(offset_bytes) {
  for (int64_t d : shape_) TX_CHECK(d >= 0, "tensor: negative dimension in shape ", shape_.str());
  TX_CHECK(!storage_ || offset_ + nbytes() <= storage_->bytes, "tensor: shape ", shape_.str(),
           " of ", name_of(dtype), " needs ", nbytes(), " bytes but its storage has ",
           storage_->bytes - offset_);
}

size_t Tensor::bytes_for(const Shape& shape, DType dtype) {
  // 2^56 bytes: beyond any machine, and far enough below 2^64 for every rounding after.
  constexpr uint64_t kMaxBytes = uint64_t(1) << 56;
  uint64_t bytes = size_of(dtype);
  for (int64_t d : shape) {
    TX_CHECK(d >= 0, "tensor: negative dimension in shape ", shape.str());
    TX_CHECK(!__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes) && bytes <= kMaxBytes,
             "tensor: shape ", shape.str(), " of ", name_of(dtype), " needs more than 2^56 bytes");
  }
  return static_cast<size_t>(bytes);
}

Tensor Tensor::allocate(const std::shared_ptr<Allocator>& allocator, const Shape& shape,
                        DType dtype) {
  const size_t bytes = bytes_for(shape, dtype);
  void* p = allocator->allocate(bytes == 0 ? 1 : bytes);
  return Tensor(
      std::make_shared<Storage>(p, bytes == 0 ? 1 : bytes, allocator->device(), allocator), shape,
      dtype);
}

void Tensor::discard_after(size_t keep_bytes) const {
  // The storage's bytes beyond this tensor's end stay as they are: a view may not own them.
  if (!storage_ || !storage_->owner || keep_bytes >= nbytes()) return;
  if (offset_ + nbytes() != storage_->bytes) return;
  storage_->owner->discard(storage_->data, storage_->bytes, offset_ + keep_bytes);
}

Tensor Tensor::borrow(void* data, const Shape& shape, DType dtype, Device device) {
  const size_t bytes = bytes_for(shape, dtype);
  return Tensor(std::make_shared<Storage>(data, bytes, device, nullptr), shape, dtype);
}

Tensor Tensor::view(const Shape& shape) const {
  TX_CHECK(shape.numel() == numel(), "view: cannot view ", str(), " as ", shape.str(),
           ": element counts differ (", numel(), " vs ", shape.numel(), ")");
  return Tensor(storage_, shape, dtype_, offset_);
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  TX_CHECK(ndim() >= 1 && 0 <= begin && begin <= end && end <= shape_[0], "slice: rows [", begin,
           ", ", end, ") out of range for ", str());
  std::vector<int64_t> dims = shape_.dims();
  int64_t row = dims[0] == 0 ? 0 : numel() / dims[0];
  dims[0] = end - begin;
  return Tensor(storage_, Shape(dims), dtype_, offset_ + begin * row * size_of(dtype_));
}

std::string Tensor::str() const {
  if (!defined()) return "undefined tensor";
  return std::string(name_of(dtype_)) + shape_.str() + " on " + device().str();
}

}  // namespace tx
