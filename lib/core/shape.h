// Shape: the dimensions of a dense, row-major tensor.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace tx {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int ndim() const { return static_cast<int>(dims_.size()); }
  // Negative indices count from the end, as in numpy.
  int64_t operator[](int i) const { return dims_[i < 0 ? i + ndim() : i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims_) n *= d;
    return n;
  }
  // Product of all dimensions but the last: the row count of a [.., cols] view.
  int64_t rows() const {
    int64_t n = 1;
    for (int i = 0; i + 1 < ndim(); ++i) n *= dims_[i];
    return n;
  }
  int64_t cols() const { return ndim() == 0 ? 1 : dims_.back(); }
  const std::vector<int64_t>& dims() const { return dims_; }

  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }

  std::string str() const {
    std::string s = "[";
    for (size_t i = 0; i < dims_.size(); ++i) {
      if (i) s += ", ";
      s += std::to_string(dims_[i]);
    }
    return s + "]";
  }

 private:
  std::vector<int64_t> dims_;
};

}  // namespace tx
