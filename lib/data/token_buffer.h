// TokenBuffer: many id sequences in one flat int32 buffer plus offsets (no vector per line).
#pragma once

#include <cstdint>
#include <vector>

namespace tx::data {

// A read-only view of one sequence in a TokenBuffer.
struct TokenSpan {
  const int32_t* data = nullptr;
  int64_t size = 0;
  const int32_t* begin() const { return data; }
  const int32_t* end() const { return data + size; }
  int32_t operator[](int64_t i) const { return data[i]; }
  std::vector<int32_t> to_vector() const { return {data, data + size}; }
};

class TokenBuffer {
 public:
  void push_back(const std::vector<int32_t>& ids) {
    ids_.insert(ids_.end(), ids.begin(), ids.end());
    offsets_.push_back(static_cast<int64_t>(ids_.size()));
  }
  TokenSpan operator[](int64_t i) const {
    return {ids_.data() + offsets_[i], offsets_[i + 1] - offsets_[i]};
  }
  int64_t length(int64_t i) const { return offsets_[i + 1] - offsets_[i]; }
  int64_t size() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  int64_t total_tokens() const { return static_cast<int64_t>(ids_.size()); }
  // Returns spare capacity once loading is done (vectors grow by doubling).
  void shrink_to_fit() {
    ids_.shrink_to_fit();
    offsets_.shrink_to_fit();
  }

 private:
  std::vector<int32_t> ids_;
  std::vector<int64_t> offsets_{0};  // offsets_[i] .. offsets_[i + 1] is sequence i
};

}  // namespace tx::data
