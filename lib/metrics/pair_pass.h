// One regex substitution of the tokenizers, `(first)(second)` over two one-character classes,
// done without a regex engine: each non-overlapping match, found left to right, is replaced by
// `emit`. Works on bytes (13a, whose classes are ASCII) and on code points (intl).
#pragma once

#include <cstddef>

namespace tx::metrics {

template <typename String, typename First, typename Second, typename Emit>
String pair_pass(const String& text, First first, Second second, Emit emit) {
  String out;
  out.reserve(text.size() + text.size() / 2);
  std::size_t i = 0;
  while (i < text.size()) {
    if (i + 1 < text.size() && first(text[i]) && second(text[i + 1])) {
      emit(out, text[i], text[i + 1]);
      i += 2;
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

}  // namespace tx::metrics
