// Shape: the dimensions of a dense, row-major tensor.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/error.h"

namespace tx {

class Shape {
 public:
  // Dimensions held inline: every tensor, view and op output carries a Shape, and a heap
  // vector per copy was a malloc and a free on every small decoding operator.
  static constexpr int kMaxDims = 6;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.end()); }
  explicit Shape(const std::vector<int64_t>& dims) {
    assign(dims.data(), dims.data() + dims.size());
  }

  int ndim() const { return ndim_; }
  // Negative indices count from the end, as in numpy.
  int64_t operator[](int i) const {
    if (i < -ndim_ || i >= ndim_) bad_index(i);
    return dims_[i < 0 ? i + ndim_ : i];
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim_; ++i) n *= dims_[i];
    return n;
  }
  // Product of all dimensions but the last: the row count of a [.., cols] view.
  int64_t rows() const {
    int64_t n = 1;
    for (int i = 0; i + 1 < ndim_; ++i) n *= dims_[i];
    return n;
  }
  int64_t cols() const { return ndim_ == 0 ? 1 : dims_[ndim_ - 1]; }
  std::vector<int64_t> dims() const { return std::vector<int64_t>(begin(), end()); }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + ndim_; }

  bool operator==(const Shape& o) const {
    if (ndim_ != o.ndim_) return false;
    for (int i = 0; i < ndim_; ++i)
      if (dims_[i] != o.dims_[i]) return false;
    return true;
  }
  bool operator!=(const Shape& o) const { return !(*this == o); }

  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < ndim_; ++i) {
      if (i) s += ", ";
      s += std::to_string(dims_[i]);
    }
    return s + "]";
  }

 private:
  // Out of line and cold: every operator reads dimensions, and its inlined check stays a compare.
  [[noreturn]] __attribute__((noinline, cold)) void bad_index(int i) const {
    throw Error(::tx::str("Shape: dimension ", i, " of ", str(), ", which has ", ndim_));
  }
  void assign(const int64_t* first, const int64_t* last) {
    TX_CHECK(last - first <= kMaxDims, "Shape: ", last - first, " dimensions, at most ", kMaxDims);
    ndim_ = static_cast<int>(last - first);
    for (int i = 0; i < ndim_; ++i) dims_[i] = first[i];
  }

  std::array<int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

}  // namespace tx
