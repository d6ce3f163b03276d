#include "io/nbest_line.h"

#include "core/error.h"

namespace tx::io {

std::string_view trim_spaces(std::string_view s) {
  const size_t begin = s.find_first_not_of(' ');
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(' ') - begin + 1);
}

std::string NBestLine::text() const {
  return std::string(trim_spaces(fields[1]));
}

NBestLine parse_nbest_line(const std::string& line, const std::string& where) {
  NBestLine n;
  for (size_t begin = 0;;) {
    const size_t bar = line.find("|||", begin);
    n.fields.push_back(line.substr(begin, bar == std::string::npos ? bar : bar - begin));
    if (bar == std::string::npos) break;
    begin = bar + 3;
  }
  if (n.fields.size() != 4 && n.fields.size() != 5)
    throw Error(str(where, " has ", n.fields.size(),
                    " fields; an n-best line is 'i ||| text ||| features ||| score', with "
                    "'||| alignment' after the text (as tx-translate --n-best N [--alignment] "
                    "writes it)"));
  const std::string_view index = trim_spaces(n.fields[0]);
  // 18 digits always fit an int64_t.
  if (index.empty() || index.size() > 18 ||
      index.find_first_not_of("0123456789") != std::string_view::npos)
    throw Error(str(where, " starts with '", index,
                    "', not a source line index; an n-best line is 'i ||| text ||| "
                    "features ||| score' with i counting --src lines from 0"));
  n.index = std::stoll(std::string(index));
  return n;
}

}  // namespace tx::io
