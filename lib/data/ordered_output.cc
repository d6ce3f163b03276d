#include "data/ordered_output.h"

#include "core/error.h"

namespace tx::data {

void OrderedOutput::put(int64_t index, std::string text) {
  TX_CHECK(index >= next_ && !waiting_.count(index), "output for input line ", index + 1,
           " was given twice; this is a bug in the caller");
  if (index != next_) {
    waiting_.emplace(index, std::move(text));
    return;
  }
  out_ << text << '\n';
  ++next_;
  for (auto it = waiting_.begin(); it != waiting_.end() && it->first == next_;
       it = waiting_.erase(it)) {
    out_ << it->second << '\n';
    ++next_;
  }
  out_.flush();
  // Lines handed over, not lines on disk: a full disk may have taken none of them.
  TX_CHECK(out_.good(), "cannot write the output (it failed by line ", next_,
           "); check the disk or the pipe");
}

void OrderedOutput::finish(int64_t lines) {
  TX_CHECK(waiting_.empty() && next_ == lines, "output incomplete: ", next_, " of ", lines,
           " lines written and ", waiting_.size(), " waiting for an earlier line; this is a bug");
}

}  // namespace tx::data
