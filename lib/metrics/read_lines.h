// read_lines: a text file's lines as sacreBLEU's command line reads hypotheses and references.
#pragma once

#include <string>
#include <vector>

namespace tx::metrics {

// The lines of the UTF-8 file at `path`: split at '\n' only (a final '\n' ends the last line
// rather than starting an empty one), each with trailing whitespace (Python's, so '\r' too)
// removed. Throws tx::Error when the file cannot be read or a line is not valid UTF-8, naming
// the file and the line number.
std::vector<std::string> read_lines(const std::string& path);
// The same in two steps, for text read once and used twice (a pipe can be read only once):
// the file's bytes, then their lines, `name` in errors.
std::string read_bytes(const std::string& path);
std::vector<std::string> lines_of(const std::string& bytes, const std::string& name);
// The same for stdin, read to its end from where it stands (a pipe, a socket, or a file the
// caller's shell has partly read), gzip or not as a file; a read error is a tx::Error.
std::vector<std::string> read_stdin_lines();

}  // namespace tx::metrics
