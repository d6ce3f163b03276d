// Test support: a scratch directory removed at scope exit, and whole-file reads and writes.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace tx::test {

// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tx_test_XXXXXX").string();
    char* made = ::mkdtemp(&pattern[0]);
    REQUIRE(made != nullptr);
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Every entry, hidden ones included: a leftover temporary shows here.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_))
      out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::filesystem::path path_;
};

// The lines of `text`, without their '\n' (a last line without one counts).
inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Each line followed by '\n'.
inline std::string join_lines(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  return text;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  REQUIRE(out.good());
}

// The directory holding multi30k/, found via TX_SOURCE_DIR/../shared/data or by walking up
// from the working directory; empty when absent.
inline std::string shared_data_dir() {
  std::vector<std::filesystem::path> candidates;
  if (const char* src = std::getenv("TX_SOURCE_DIR"))
    candidates.push_back(std::filesystem::path(src) / ".." / "shared" / "data");
  for (std::filesystem::path p = std::filesystem::current_path(); !p.empty(); p = p.parent_path()) {
    candidates.push_back(p / "shared" / "data");
    if (p == p.parent_path()) break;
  }
  for (const auto& c : candidates)
    if (std::filesystem::exists(c / "multi30k" / "train.de") &&
        std::filesystem::exists(c / "multi30k" / "train.en"))
      return c.string();
  return {};
}

// The first `n` lines of Multi30k's test2016.en, read in place from ../shared/data (the project
// ships no corpus text; the import fixtures hold the engines' outputs for them); empty when the
// data is absent.
inline std::vector<std::string> test2016_head(size_t n) {
  const std::string data = shared_data_dir();
  if (data.empty()) return {};
  std::vector<std::string> lines = split_lines(slurp(data + "/multi30k/test2016.en"));
  lines.resize(std::min(lines.size(), n));
  return lines;
}

}  // namespace tx::test

// Ends the test case, saying why, when `lines` (test2016_head's) is empty.
#define TX_TEST2016_OR_SKIP(lines)                                                        \
  if ((lines).empty()) {                                                                  \
    std::cout << "SKIPPED: ../shared/data (Multi30k test2016.en) not found" << std::endl; \
    return;                                                                               \
  }
