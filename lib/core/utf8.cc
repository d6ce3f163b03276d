#include "core/utf8.h"

#include <cstdio>

#include "core/error.h"

namespace tx {
namespace {

bool is_continuation(unsigned char b) {
  return (b & 0xC0) == 0x80;
}

// Length of the valid sequence starting at bytes[i] and its code point, or 0 when invalid.
// The bounds on the second byte exclude overlong forms, surrogates and values past U+10FFFF
// (the table of well-formed sequences in the Unicode standard, section 3.9).
std::size_t decode_at(std::string_view bytes, std::size_t i, char32_t& code_point) {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(bytes[i + k]); };
  const std::size_t left = bytes.size() - i;
  const unsigned char b0 = at(0);
  if (b0 < 0x80) {
    code_point = b0;
    return 1;
  }
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) low = 0xA0;   // overlong below U+0800
    if (b0 == 0xED) high = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) low = 0x90;   // overlong below U+10000
    if (b0 == 0xF4) high = 0x8F;  // above U+10FFFF
  } else {
    return 0;  // a continuation byte, C0/C1 (overlong) or F5..FF
  }
  if (left < length || at(1) < low || at(1) > high) return 0;
  for (std::size_t k = 2; k < length; ++k) {
    if (!is_continuation(at(k))) return 0;
  }
  char32_t c = b0 & (0xFF >> (length + 1));
  for (std::size_t k = 1; k < length; ++k) c = (c << 6) | (at(k) & 0x3F);
  code_point = c;
  return length;
}

}  // namespace

std::size_t find_invalid_utf8(std::string_view bytes) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    // Runs of ASCII are the common case; skip them without decoding.
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {
      ++i;
      continue;
    }
    char32_t c;
    const std::size_t length = decode_at(bytes, i, c);
    if (length == 0) return i;
    i += length;
  }
  return std::string_view::npos;
}

std::string describe_invalid_utf8(std::string_view bytes) {
  const std::size_t at = find_invalid_utf8(bytes);
  if (at == std::string_view::npos) return {};
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x",
                static_cast<unsigned>(static_cast<unsigned char>(bytes[at])));
  return str("invalid UTF-8 at byte ", at + 1, " (", hex, ")");
}

Conversion conversion_for(std::string_view first_line) {
  auto starts = [&](std::string_view bom) { return first_line.substr(0, bom.size()) == bom; };
  using namespace std::string_view_literals;
  // UTF-32's little-endian mark begins with UTF-16's: test it first.
  if (starts("\xff\xfe\0\0"sv) || starts("\0\0\xfe\xff"sv)) return {"UTF-32", true};
  if (starts("\xff\xfe"sv) || starts("\xfe\xff"sv)) return {"UTF-16", true};
  return {"LATIN1", false};
}

void check_utf8_line(std::string_view line, const std::string& source, std::size_t line_number) {
  const std::size_t bad = find_invalid_utf8(line);
  if (bad == std::string_view::npos) return;
  throw Error(str("invalid UTF-8 in ", source, ", line ", line_number, " (byte ", bad + 1,
                  " of the line); convert the text to UTF-8 first, ",
                  conversion_for(line).advice()));
}

std::u32string decode_utf8(std::string_view bytes) {
  std::u32string out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    char32_t c;
    const std::size_t length = decode_at(bytes, i, c);
    if (length == 0) {
      throw Error(str("invalid UTF-8 at byte ", i + 1, " of \"", bytes.substr(0, 40),
                      "\"; convert the text to UTF-8 first, e.g. iconv -f LATIN1 -t UTF-8"));
    }
    out.push_back(c);
    i += length;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

char32_t next_code_point(std::string_view bytes, std::size_t& i) {
  char32_t c;
  const std::size_t length = decode_at(bytes, i, c);
  if (length == 0) {
    return static_cast<unsigned char>(bytes[i++]);
  }
  i += length;
  return c;
}

}  // namespace tx
