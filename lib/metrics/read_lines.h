// read_lines: a text file's lines as sacreBLEU's command line reads hypotheses and references.
#pragma once

#include <istream>
#include <string>
#include <vector>

namespace tx::metrics {

// The lines of the UTF-8 file at `path`: split at '\n' only (a final '\n' ends the last line
// rather than starting an empty one), each with trailing whitespace (Python's, so '\r' too)
// removed. Throws tx::Error when the file cannot be read or a line is not valid UTF-8, naming
// the file and the line number.
std::vector<std::string> read_lines(const std::string& path);
// The same for a stream read to its end (stdin: a pipe, a socket, or a file read from where
// the caller's shell left it); `name` names it in errors.
std::vector<std::string> read_lines(std::istream& in, const std::string& name);

}  // namespace tx::metrics
