#include "data/line_reader.h"

#include "core/error.h"
#include "core/format.h"
#include "core/text_file.h"

namespace tx::data {

LineReader::LineReader(const std::string& path) : name_(path) {
  check_readable_file(path, "text file");
  file_ = std::make_unique<TextInput>(path);
  in_ = file_.get();
}

LineReader::LineReader(std::istream& in, std::string name) : in_(&in), name_(std::move(name)) {}

bool LineReader::next(std::string& line) {
  if (!std::getline(*in_, line)) {
    const auto* text = dynamic_cast<const TextInput*>(in_);
    TX_CHECK(!in_->bad(), "cannot read '", name_, "' after line ", line_number_, ": ",
             text ? text->failure() : std::string("read error; check the input"));
    return false;
  }
  ++line_number_;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const std::string problem = describe_text_line_problem(line);
  TX_CHECK(problem.empty(), "'", name_, "' line ", line_number_, ": ", problem);
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
