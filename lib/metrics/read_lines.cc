// read_lines: whole-file read in large blocks, then split, so a test set costs a few system calls.
#include "metrics/read_lines.h"

#include <vector>

#include "core/error.h"
#include "core/text_file.h"
#include "core/text_input.h"
#include "core/utf8.h"
#include "metrics/unicode.h"

namespace tx::metrics {
namespace {

// `bytes` split at '\n', each line's trailing whitespace removed; `name` in errors.
std::vector<std::string> split_lines(const std::string& bytes, const std::string& name) {
  std::vector<std::string> lines;
  std::size_t begin = 0;
  while (begin < bytes.size()) {
    std::size_t end = bytes.find('\n', begin);
    if (end == std::string::npos) end = bytes.size();
    const std::string_view line(bytes.data() + begin, end - begin);
    check_utf8_line(line, name, lines.size() + 1);
    lines.emplace_back(rstrip(line));
    begin = end + 1;
  }
  return lines;
}

// All of `in` from where it stands, in 64 KiB blocks (one read for a test set); a read error
// names `name`.
std::string read_all(TextInput& in, const std::string& name) {
  std::string bytes;
  std::vector<char> block(size_t(1) << 16);
  while (in.read(block.data(), std::streamsize(block.size())) || in.gcount() > 0)
    bytes.append(block.data(), size_t(in.gcount()));
  TX_CHECK(!in.bad(), "cannot read ", name, ": ", in.failure());
  return bytes;
}

}  // namespace

std::string read_bytes(const std::string& path) {
  check_readable_file(path, "text file");
  TextInput in(path);
  return read_all(in, "'" + path + "'");
}

std::vector<std::string> lines_of(const std::string& bytes, const std::string& name) {
  return split_lines(bytes, name);
}

std::vector<std::string> read_lines(const std::string& path) {
  return split_lines(read_bytes(path), "'" + path + "'");
}

std::vector<std::string> read_stdin_lines() {
  TextInput in(0);
  return split_lines(read_all(in, "stdin"), "stdin");
}

}  // namespace tx::metrics
