// Corpus and sentence chrF and chrF++, computed exactly as sacreBLEU 2.x computes them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "metrics/corpus_check.h"

namespace tx::metrics {

struct ChrfOptions {
  int char_order = 6;  // character n-grams of orders 1..char_order
  int word_order = 0;  // word n-grams of orders 1..word_order: 0 is chrF, 2 is chrF++
  int beta = 2;        // recall weighs beta times as much as precision
  bool lowercase = false;
  bool whitespace = false;  // keep whitespace in character n-grams (sacreBLEU removes it)
  // chrF++.py's averaging of per-order F-scores, with 1e-16 for undefined ones; the default
  // (false) is sacreBLEU's: average precision and recall over the orders present on both sides,
  // then take one F-score.
  bool eps_smoothing = false;
};

// chrF++: the defaults with word order 2.
ChrfOptions chrf_plus_plus_options();

// Counts of one n-gram order: hypothesis n-grams, reference n-grams, clipped matches. `hyp` is 0
// when the reference has no n-gram of this order, as in sacreBLEU.
struct ChrfNgramStats {
  int64_t hyp = 0;
  int64_t ref = 0;
  int64_t match = 0;
};

// Statistics of character orders 1..char_order, then word orders 1..word_order.
using ChrfStats = std::vector<ChrfNgramStats>;

struct ChrfScore {
  double score = 0;  // 0..100
  int char_order = 6;
  int word_order = 0;
  int beta = 2;
  ChrfStats stats;  // summed over the corpus

  std::string name() const;  // "chrF2", "chrF2++" (a '+' per word order)
  // sacreBLEU's line, e.g. "chrF2++ = 53.21"; with a signature, as its text output:
  // "chrF2++|nrefs:1|...|version:tx-0.1.0 = 53.21".
  std::string format(int width = 2, const std::string& signature = "") const;
};

// sacreBLEU 2.x's chrF signature, e.g. "nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|
// version:tx-0.1.0": CHRFSignature's fields in its order ("eff" is yes unless eps_smoothing),
// with tx's version (signature_version()) in place of sacreBLEU's.
std::string chrf_signature(const ChrfOptions& options, int num_refs);

// Statistics of one segment: against each reference, keeping the one with the best F-score
// (the first of equals).
ChrfStats chrf_segment_stats(const std::string& hypothesis,
                             const std::vector<std::string>& references,
                             const ChrfOptions& options);

// The F-score (0..100) of (summed) statistics.
double chrf_f_score(const ChrfStats& stats, const ChrfOptions& options);

// Corpus chrF: segment statistics summed over the corpus, then one F-score (not an average of
// sentence scores). `references[r][i]` is reference r of hypothesis line i. Throws tx::Error on
// mismatched line counts or invalid UTF-8 (see check_corpus).
ChrfScore corpus_chrf(const Lines& hypotheses, const std::vector<Lines>& references,
                      const ChrfOptions& options = {});

// chrF of one sentence against its references, as sacreBLEU's sentence_chrf.
ChrfScore sentence_chrf(const std::string& hypothesis, const std::vector<std::string>& references,
                        const ChrfOptions& options = {});

}  // namespace tx::metrics
