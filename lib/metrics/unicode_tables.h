// Unicode tables generated from Python and its regex module (see gen_unicode_tables.py), used by
// unicode.cc.
#pragma once

namespace tx::metrics::tables {

// Code points first, first + stride, ..., up to last, each lowercase to itself + delta.
struct LowerRun {
  char32_t first, last;
  int stride, delta;
};

// The code points first..last inclusive.
struct Range {
  char32_t first, last;
};

extern const LowerRun kLowerRuns[];
extern const int kLowerRunCount;
extern const Range kCased[];
extern const int kCasedCount;
extern const Range kCaseIgnorable[];
extern const int kCaseIgnorableCount;
extern const Range kNumber[];  // general category N
extern const int kNumberCount;
extern const Range kPunctuation[];  // general category P
extern const int kPunctuationCount;
extern const Range kSymbol[];  // general category S
extern const int kSymbolCount;

}  // namespace tx::metrics::tables
