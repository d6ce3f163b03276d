// Python's whitespace and lowercase rules on UTF-8 text.
#include "metrics/unicode.h"

#include <algorithm>

#include "core/utf8.h"
#include "metrics/unicode_tables.h"

namespace tx::metrics {
namespace {

bool in_ranges(const tables::Range* ranges, int count, char32_t c) {
  const tables::Range* end = ranges + count;
  // The first range that ends at or after c; c is inside it or in no range at all.
  const tables::Range* r = std::lower_bound(
      ranges, end, c, [](const tables::Range& x, char32_t v) { return x.last < v; });
  return r != end && r->first <= c;
}

bool is_cased(char32_t c) {
  return in_ranges(tables::kCased, tables::kCasedCount, c);
}

bool is_case_ignorable(char32_t c) {
  return in_ranges(tables::kCaseIgnorable, tables::kCaseIgnorableCount, c);
}

char32_t lower_one(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  const tables::LowerRun* end = tables::kLowerRuns + tables::kLowerRunCount;
  const tables::LowerRun* r = std::lower_bound(
      tables::kLowerRuns, end, c, [](const tables::LowerRun& x, char32_t v) { return x.last < v; });
  if (r == end || r->first > c || (c - r->first) % r->stride != 0) return c;
  return static_cast<char32_t>(static_cast<int>(c) + r->delta);
}

// Unicode's Final_Sigma context, as CPython tests it: a cased letter before the sigma and none
// after it, skipping case-ignorable code points (apostrophes, marks) on both sides.
bool is_final_sigma(const std::u32string& text, std::size_t i) {
  std::size_t j = i;
  while (j > 0 && is_case_ignorable(text[j - 1])) --j;
  if (j == 0 || !is_cased(text[j - 1])) return false;
  std::size_t k = i + 1;
  while (k < text.size() && is_case_ignorable(text[k])) ++k;
  return k == text.size() || !is_cased(text[k]);
}

}  // namespace

bool is_space(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_number(char32_t c) {
  return in_ranges(tables::kNumber, tables::kNumberCount, c);
}

bool is_punctuation(char32_t c) {
  return in_ranges(tables::kPunctuation, tables::kPunctuationCount, c);
}

bool is_symbol(char32_t c) {
  return in_ranges(tables::kSymbol, tables::kSymbolCount, c);
}

std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  std::size_t i = 0, word_begin = 0;
  bool in_word = false;
  while (i < text.size()) {
    const std::size_t at = i;
    const char32_t c = next_code_point(text, i);
    if (is_space(c)) {
      if (in_word) words.push_back(text.substr(word_begin, at - word_begin));
      in_word = false;
    } else if (!in_word) {
      word_begin = at;
      in_word = true;
    }
  }
  if (in_word) words.push_back(text.substr(word_begin));
  return words;
}

std::string_view rstrip(std::string_view text) {
  std::size_t i = 0, keep = 0;
  while (i < text.size()) {
    if (!is_space(next_code_point(text, i))) keep = i;
  }
  return text.substr(0, keep);
}

std::string to_lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  // ASCII-only text (most of it) needs no decoding and no context.
  if (std::all_of(text.begin(), text.end(), [](char b) { return (b & 0x80) == 0; })) {
    for (char b : text) out.push_back((b >= 'A' && b <= 'Z') ? static_cast<char>(b + 32) : b);
    return out;
  }
  const std::u32string code_points = decode_utf8(text);
  for (std::size_t i = 0; i < code_points.size(); ++i) {
    const char32_t c = code_points[i];
    if (c == 0x130) {  // capital I with dot above: "i" and a combining dot
      append_utf8(out, U'i');
      append_utf8(out, 0x307);
    } else if (c == 0x3A3) {
      append_utf8(out, is_final_sigma(code_points, i) ? 0x3C2 : 0x3C3);
    } else {
      append_utf8(out, lower_one(c));
    }
  }
  return out;
}

}  // namespace tx::metrics
