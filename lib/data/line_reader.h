// LineReader: reads a text file (or stream) line by line, counting lines and checking UTF-8.
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <string>

#include "core/text_input.h"

namespace tx::data {

class LineReader {
 public:
  // Opens `path` (once: a pipe reads too), decompressing it when it is gzip
  // (core/text_input.h); throws tx::Error naming it when it is missing, a directory or
  // unreadable.
  explicit LineReader(const std::string& path);
  // Reads from a stream the caller owns (stdin through a TextInput, a string); `name` is what
  // messages call it.
  LineReader(std::istream& in, std::string name);
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Reads the next line into `line` without its "\n" (and without a "\r" before it, so files
  // written on Windows read the same). Returns false at the end of the input. Throws tx::Error
  // "'<name>' line <n>: invalid UTF-8 at byte <b> (0x..); ..." for a malformed line or
  // one with a NUL byte (see describe_text_line_problem), and on a read error.
  bool next(std::string& line);

  // Reads to the end without checking, and returns how many lines were left: for the message
  // of a line-count mismatch.
  int64_t count_rest();

  // 1-based number of the line last returned (0 before the first).
  int64_t line_number() const { return line_number_; }
  const std::string& name() const { return name_; }

 private:
  std::unique_ptr<TextInput> file_;  // the file opened by path (null: a caller's stream)
  std::istream* in_;
  std::string name_;
  int64_t line_number_ = 0;
};

}  // namespace tx::data
