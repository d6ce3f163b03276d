// OrderedOutput: writes results that arrive in batch order back out in input order.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>

namespace tx::data {

class OrderedOutput {
 public:
  explicit OrderedOutput(std::ostream& out) : out_(out) {}

  // The result for 0-based input line `index` (without its final newline; n-best output may
  // hold several lines). Writes it, and every waiting result after it, as soon as all earlier
  // lines are out, then flushes, so a pipeline sees each line without delay. Throws tx::Error
  // for an index given twice or already written.
  void put(int64_t index, std::string text);

  // Throws tx::Error unless exactly lines 0..lines-1 were written: one output per input.
  void finish(int64_t lines);

  int64_t written() const { return next_; }
  size_t waiting() const { return waiting_.size(); }

 private:
  std::ostream& out_;
  int64_t next_ = 0;
  std::map<int64_t, std::string> waiting_;
};

}  // namespace tx::data
