// tokenize_13a: mteval-v13a tokenization as sacreBLEU implements it.
#include "metrics/tokenize_13a.h"

#include "metrics/pair_pass.h"
#include "metrics/unicode.h"

namespace tx::metrics {
namespace {

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  if (text.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (true) {
    const std::size_t hit = text.find(from, i);
    if (hit == std::string::npos) break;
    out.append(text, i, hit - i);
    out.append(to);
    i = hit + from.size();
  }
  out.append(text, i, std::string::npos);
  text.swap(out);
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_period_or_comma(char c) {
  return c == '.' || c == ',';
}

// The character class [\{-\~\[-\` -\&\(-\+\:-\@\/]: ASCII punctuation except ' , - . and space.
bool is_split_symbol(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

// pair_pass (metrics/pair_pass.h) runs on bytes here, which gives the same result as Python's
// code points: every class is ASCII or a negated ASCII class, a multi-byte
// character's lead and continuation bytes never match an ASCII class, and only its last byte can
// be followed by '.' or ',' (so "non-digit before" fires exactly where it would for the whole
// character).

}  // namespace

std::string tokenize_13a(std::string_view line) {
  std::string text(line);
  replace_all(text, "<skipped>", "");
  replace_all(text, "-\n", "");
  replace_all(text, "\n", " ");
  if (text.find('&') != std::string::npos) {
    replace_all(text, "&quot;", "\"");
    replace_all(text, "&amp;", "&");
    replace_all(text, "&lt;", "<");
    replace_all(text, "&gt;", ">");
  }

  // Symbols: ' \1 '. The padding spaces match the class too, harmlessly.
  std::string padded;
  padded.reserve(text.size() * 2 + 2);
  padded.push_back(' ');
  for (char c : text) {
    if (is_split_symbol(c)) {
      padded.push_back(' ');
      padded.push_back(c);
      padded.push_back(' ');
    } else {
      padded.push_back(c);
    }
  }
  padded.push_back(' ');

  const auto non_digit = [](char c) { return !is_digit(c); };
  // ([^0-9])([\.,]) -> '\1 \2 '
  std::string pass =
      pair_pass(padded, non_digit, is_period_or_comma, [](std::string& out, char a, char b) {
        out.push_back(a);
        out.push_back(' ');
        out.push_back(b);
        out.push_back(' ');
      });
  // ([\.,])([^0-9]) -> ' \1 \2'
  pass = pair_pass(pass, is_period_or_comma, non_digit, [](std::string& out, char a, char b) {
    out.push_back(' ');
    out.push_back(a);
    out.push_back(' ');
    out.push_back(b);
  });
  // ([0-9])(-) -> '\1 \2 '
  pass = pair_pass(
      pass, is_digit, [](char c) { return c == '-'; },
      [](std::string& out, char a, char b) {
        out.push_back(a);
        out.push_back(' ');
        out.push_back(b);
        out.push_back(' ');
      });

  std::string tokenized;
  tokenized.reserve(pass.size());
  for (std::string_view word : split_words(pass)) {
    if (!tokenized.empty()) tokenized.push_back(' ');
    tokenized.append(word);
  }
  return tokenized;
}

}  // namespace tx::metrics
