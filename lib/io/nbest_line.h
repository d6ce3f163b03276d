// NBestLine: one line of a Marian n-best list, "i ||| text ||| features ||| score", or
// "i ||| text ||| alignment ||| features ||| score" with --alignment, as tx-translate --n-best
// (and marian-decoder) write it and tx-score --n-best-list reads it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tx::io {

struct NBestLine {
  // The four (or five) fields split at "|||", with the spaces around each kept, so that the
  // line can be written back as it came.
  std::vector<std::string> fields;
  int64_t index = 0;  // i: the 0-based source line
  std::string text() const;
  // The field of the features: the one before the score, after any alignment.
  size_t features_field() const { return fields.size() - 2; }
};

// `s` without leading and trailing spaces.
std::string_view trim_spaces(std::string_view s);

// Parses one line; throws tx::Error starting with `where` (e.g. "'list.txt' line 3") when the
// line has other than four or five fields or its first field is not a line index.
NBestLine parse_nbest_line(const std::string& line, const std::string& where);

}  // namespace tx::io
