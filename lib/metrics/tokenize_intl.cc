// tokenize_intl and tokenize_char: sacreBLEU's international and character tokenizers.
#include "metrics/tokenize_intl.h"

#include <vector>

#include "core/utf8.h"
#include "metrics/pair_pass.h"
#include "metrics/unicode.h"

namespace tx::metrics {
namespace {

// Python's " ".join(text.split()): the words, separated by single spaces.
std::string join_words(const std::u32string& text) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  for (char32_t c : text) {
    if (is_space(c)) {
      pending_space = !out.empty();
    } else {
      if (pending_space) out.push_back(' ');
      pending_space = false;
      append_utf8(out, c);
    }
  }
  return out;
}

}  // namespace

std::string tokenize_intl(std::string_view line) {
  const auto non_number = [](char32_t c) { return !is_number(c); };
  // (\P{N})(\p{P}) -> '\1 \2 '
  std::u32string text = pair_pass(decode_utf8(line), non_number, is_punctuation,
                                  [](std::u32string& out, char32_t a, char32_t b) {
                                    out.push_back(a);
                                    out.push_back(U' ');
                                    out.push_back(b);
                                    out.push_back(U' ');
                                  });
  // (\p{P})(\P{N}) -> ' \1 \2'
  text =
      pair_pass(text, is_punctuation, non_number, [](std::u32string& out, char32_t a, char32_t b) {
        out.push_back(U' ');
        out.push_back(a);
        out.push_back(U' ');
        out.push_back(b);
      });
  // (\p{S}) -> ' \1 '
  std::u32string spaced;
  spaced.reserve(text.size() + text.size() / 2);
  for (char32_t c : text) {
    if (is_symbol(c)) {
      spaced.push_back(U' ');
      spaced.push_back(c);
      spaced.push_back(U' ');
    } else {
      spaced.push_back(c);
    }
  }
  return join_words(spaced);
}

std::string tokenize_char(std::string_view line) {
  std::string out;
  out.reserve(line.size() * 2);
  for (char32_t c : decode_utf8(line)) {
    if (is_space(c)) continue;
    if (!out.empty()) out.push_back(' ');
    append_utf8(out, c);
  }
  return out;
}

}  // namespace tx::metrics
