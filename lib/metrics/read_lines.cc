// read_lines: whole-file read, then split, so a 3000-line test set costs one system call.
#include "metrics/read_lines.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/error.h"
#include "core/text_file.h"
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

}  // namespace

std::vector<std::string> read_lines(const std::string& path) {
  check_readable_file(path, "text file");
  std::ifstream in(path, std::ios::binary);
  TX_CHECK(in, "cannot open '", path, "': ", std::strerror(errno), "; check the path");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TX_CHECK(!in.bad(), "cannot read '", path, "'; check the file and its permissions");
  return split_lines(bytes, "'" + path + "'");
}

std::vector<std::string> read_stdin_lines() {
  std::string bytes;
  std::vector<char> block(size_t(1) << 16);
  for (size_t n; (n = std::fread(block.data(), 1, block.size(), stdin)) > 0;)
    bytes.append(block.data(), n);
  TX_CHECK(!std::ferror(stdin), "cannot read stdin: ", std::strerror(errno));
  return split_lines(bytes, "stdin");
}

}  // namespace tx::metrics
