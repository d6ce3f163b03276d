#include "data/line_reader.h"

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/utf8.h"

namespace tx::data {

LineReader::LineReader(const std::string& path) : file_(path, std::ios::binary), name_(path) {
  if (!file_) {
    throw Error(str("cannot read '", path, "': ", std::strerror(errno),
                    "; check the path and its permissions"));
  }
  in_ = &file_;
}

LineReader::LineReader(std::istream& in, std::string name) : in_(&in), name_(std::move(name)) {}

bool LineReader::next(std::string& line) {
  if (!std::getline(*in_, line)) {
    TX_CHECK(!in_->bad(), "cannot read '", name_, "' after line ", line_number_,
             ": read error; check the file and the disk");
    return false;
  }
  ++line_number_;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  std::string problem = describe_invalid_utf8(line);
  TX_CHECK(problem.empty(), "'", name_, "' line ", line_number_, ": ", problem,
           "; convert the file to UTF-8 (e.g. iconv -f LATIN1 -t UTF-8) or remove the line");
  return true;
}

int64_t LineReader::count_rest() {
  int64_t n = 0;
  std::string line;
  while (std::getline(*in_, line)) ++n;
  line_number_ += n;
  return n;
}

}  // namespace tx::data
