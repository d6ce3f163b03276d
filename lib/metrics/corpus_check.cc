// check_corpus: line counts and UTF-8, checked before any scoring so errors name the input.
#include "metrics/corpus_check.h"

#include "core/error.h"
#include "core/utf8.h"

namespace tx::metrics {

void check_corpus(const Lines& hypotheses, const std::vector<Lines>& references) {
  TX_CHECK(!references.empty(), "no reference stream given; pass at least one reference");
  for (std::size_t r = 0; r < references.size(); ++r) {
    TX_CHECK(references[r].size() == hypotheses.size(), "the hypotheses have ", hypotheses.size(),
             " lines but reference ", r + 1, " has ", references[r].size(),
             " lines; give exactly one reference line per hypothesis line");
  }
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    check_utf8_line(hypotheses[i], "the hypotheses", i + 1);
  }
  for (std::size_t r = 0; r < references.size(); ++r) {
    const std::string name = str("reference ", r + 1);
    for (std::size_t i = 0; i < references[r].size(); ++i) {
      check_utf8_line(references[r][i], name, i + 1);
    }
  }
}

}  // namespace tx::metrics
