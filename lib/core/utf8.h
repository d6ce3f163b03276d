// UTF-8 checking, decoding and encoding, as strict as Python's decoder (which sacreBLEU reads
// files with).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tx {

// Byte offset of the first byte that does not start a valid UTF-8 sequence, or npos when all of
// `bytes` is valid. Overlong forms, surrogates (U+D800..U+DFFF) and code points above U+10FFFF
// are invalid, as in Python.
std::size_t find_invalid_utf8(std::string_view bytes);

// A one-line description of the first problem (empty when valid), e.g.
// "invalid UTF-8 at byte 17 (0xff)": for error messages that add the file and line.
std::string describe_invalid_utf8(std::string_view bytes);

// How to make UTF-8 of a file starting with `first_line`: by its byte-order mark, UTF-32 or
// UTF-16 (`marked`); else a guess at LATIN1.
struct Conversion {
  std::string encoding;  // "UTF-32", "UTF-16" or "LATIN1"
  bool marked = false;   // the encoding is the byte-order mark's, not a guess
  std::string command() const { return "iconv -f " + encoding + " -t UTF-8"; }
  // The command, with "e.g. " before a guess: for the end of an error message.
  std::string advice() const { return (marked ? "" : "e.g. ") + command(); }
};
Conversion conversion_for(std::string_view first_line);

// Throws tx::Error naming `source` (e.g. "hypotheses" or a file name), the 1-based line number,
// the byte offset and the fix, when `line` is not valid UTF-8.
void check_utf8_line(std::string_view line, const std::string& source, std::size_t line_number);

// Decodes valid UTF-8 (see find_invalid_utf8) into code points; throws tx::Error otherwise.
std::u32string decode_utf8(std::string_view bytes);

// Appends the UTF-8 encoding of code point `c` to `out`.
void append_utf8(std::string& out, char32_t c);

// Decodes the code point starting at `bytes[i]` and advances `i` past it. An invalid byte is
// returned as itself (a code point below 0x100) and skipped alone, so scanning never stops.
char32_t next_code_point(std::string_view bytes, std::size_t& i);

}  // namespace tx
