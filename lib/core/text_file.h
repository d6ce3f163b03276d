// Checks shared by every reader of user text files: the path names a readable file, and a line
// is text (UTF-8, no NUL byte), with a fix that fits what the bytes look like.
#pragma once

#include <string>
#include <string_view>

namespace tx {

// Throws tx::Error "cannot read <what> '<path>': <reason>; <fix>" when `path` does not exist, is a
// directory or cannot be opened for reading.
void check_readable_file(const std::string& path, const std::string& what);

// "" when `line` is valid UTF-8 without a NUL byte, else the problem and its fix, e.g.
// "NUL byte at byte 5; the file looks binary or UTF-16: convert it with iconv -f UTF-16 -t
// UTF-8". A NUL is valid UTF-8, but in a corpus it means UTF-16 or a binary file, and
// SentencePiece would silently read it as text.
std::string describe_text_line_problem(std::string_view line);

}  // namespace tx
