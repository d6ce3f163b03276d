// tokenize_intl and tokenize_char: sacreBLEU's `intl` and `char` BLEU tokenizers.
#pragma once

#include <string>
#include <string_view>

namespace tx::metrics {

// Tokenizes one UTF-8 segment the way sacreBLEU's `intl` tokenizer (mteval-v14's international
// tokenization) does, three regex substitutions on code points, then whitespace collapsed:
//   1. (\P{N})(\p{P}) -> "\1 \2 ": punctuation after a non-number is split off;
//   2. (\p{P})(\P{N}) -> " \1 \2": punctuation before a non-number is split off;
//   3. (\p{S})        -> " \1 ":   every symbol (math, currency, modifier, other) is a token;
//   4. Python's " ".join(line.split()).
// So "3.14" and "1,000" stay whole, and so does a year's final period ("in 2019.") since there
// is no padding (mteval-v14 behaves the same). Categories are the regex module's (unicode.h).
// Each pass scans left to right without overlapping its matches, as Python's re.sub does.
std::string tokenize_intl(std::string_view line);

// sacreBLEU's `char` tokenizer: every character (code point) apart from whitespace is a token,
// i.e. " ".join(line) followed by BLEU's split on whitespace.
std::string tokenize_char(std::string_view line);

}  // namespace tx::metrics
