// Python's str.isspace, str.split() and str.lower on UTF-8 text: the Unicode rules sacreBLEU uses.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tx::metrics {

// True for the code points Python's str.isspace accepts (and str.split() splits on): ASCII
// whitespace, U+001C..U+001F, U+0085, U+00A0 (no-break space), U+1680, U+2000..U+200A, U+2028,
// U+2029, U+202F, U+205F and U+3000.
bool is_space(char32_t c);

// Unicode general categories N (numbers), P (punctuation) and S (symbols), as the `regex` module
// that sacreBLEU's intl tokenizer uses matches \p{N}, \p{P} and \p{S}.
bool is_number(char32_t c);
bool is_punctuation(char32_t c);
bool is_symbol(char32_t c);

// The words of `text` as Python's str.split() finds them: runs of non-space code points.
std::vector<std::string_view> split_words(std::string_view text);

// `text` without trailing whitespace, as Python's str.rstrip().
std::string_view rstrip(std::string_view text);

// Python's str.lower(): full Unicode lowercase mapping, including U+0130 -> "i\u0307" and the
// final form of capital sigma at the end of a word.
std::string to_lower(std::string_view text);

}  // namespace tx::metrics
