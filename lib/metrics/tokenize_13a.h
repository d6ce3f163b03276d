// tokenize_13a: sacreBLEU's default BLEU tokenizer, the rules of mteval-v13a.pl used by WMT.
#pragma once

#include <string>
#include <string_view>

namespace tx::metrics {

// Tokenizes one UTF-8 segment the way sacreBLEU's `13a` tokenizer does:
//   1. remove "<skipped>", join "-\n" (a word broken across lines), turn other "\n" into " ";
//   2. if the text has '&': unescape &quot; &amp; &lt; &gt; (in that order, each pass over all);
//   3. pad with a space on each side, then split off as tokens:
//      - every ASCII symbol except ' , - . (that is {|}~[\]^_` !"#$%&()*+:;<=>?@/);
//      - '.' and ',' preceded by a non-digit, then '.' and ',' followed by a non-digit
//        (so 3.14 and 1,000 stay whole);
//      - '-' preceded by a digit;
//   4. collapse whitespace (Python's notion: see unicode.h) to single spaces and trim.
// Step 3's passes are Python regex substitutions, which scan left to right without overlap: a
// character consumed by one match cannot start the next one, and this keeps that behaviour.
std::string tokenize_13a(std::string_view line);

}  // namespace tx::metrics
