// Corpus and sentence BLEU, computed exactly as sacreBLEU 2.x computes them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "metrics/corpus_check.h"

namespace tx::metrics {

// Smoothing of zero n-gram precisions (Chen and Cherry 2014, as named by sacreBLEU).
enum class BleuSmoothing {
  kNone,   // no smoothing: any zero precision gives BLEU 0
  kFloor,  // a zero count counts as `smooth_value` (default 0.1)
  kAddK,   // add `smooth_value` (default 1) to counts and totals of orders 2 and up
  kExp,    // NIST/mteval-v13a: the k-th zero precision becomes 1 / (2^k * total); the default
};

enum class BleuTokenizer {
  k13a,   // mteval-v13a, sacreBLEU's default (see tokenize_13a.h)
  kIntl,  // mteval-v14 international: Unicode punctuation and symbols (see tokenize_intl.h)
  kChar,  // every non-space character is a token (see tokenize_intl.h)
  kNone   // split on whitespace only
};

struct BleuOptions {
  BleuSmoothing smoothing = BleuSmoothing::kExp;
  std::optional<double> smooth_value;  // unset: sacreBLEU's default for the method
  bool lowercase = false;              // Python's str.lower() on hypotheses and references
  BleuTokenizer tokenizer = BleuTokenizer::k13a;
  int max_order = 4;
  // Average only up to the highest order with any hypothesis n-gram (sacreBLEU's sentence BLEU).
  bool effective_order = false;
};

// Parses sacreBLEU's names: "none", "floor", "add-k", "exp" / "13a", "intl", "char", "none".
BleuSmoothing parse_bleu_smoothing(const std::string& name);
BleuTokenizer parse_bleu_tokenizer(const std::string& name);
std::string bleu_tokenizer_name(BleuTokenizer tokenizer);  // the name parse_bleu_tokenizer takes

// sacreBLEU 2.x's BLEU signature, e.g. "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|
// version:tx-0.1.0": the fields of sacreBLEU's BLEUSignature in its order, with floor and add-k
// showing their value ("smooth:floor[0.10]") and tx's version (signature_version()) in place of
// sacreBLEU's. Like sacreBLEU's, it has no field for max_order: a line shows the order by its
// number of precisions.
std::string bleu_signature(const BleuOptions& options, int num_refs);

// BLEU's sufficient statistics; corpus BLEU sums them over segments.
struct BleuStats {
  int64_t sys_len = 0;          // hypothesis tokens
  int64_t ref_len = 0;          // tokens of the reference closest in length (ties: shorter)
  std::vector<int64_t> counts;  // clipped n-gram matches, orders 1..max_order
  std::vector<int64_t> totals;  // hypothesis n-grams, orders 1..max_order

  void add(const BleuStats& other);
};

struct BleuScore {
  double score = 0;                // 0..100
  std::vector<int64_t> counts;     // as in BleuStats (without add-k's additions)
  std::vector<int64_t> totals;     // as in BleuStats (without add-k's additions)
  std::vector<double> precisions;  // percent, smoothed
  double bp = 0;                   // brevity penalty
  double ratio = 0;                // sys_len / ref_len (0 when ref_len is 0)
  int64_t sys_len = 0;
  int64_t ref_len = 0;

  // sacreBLEU's line, e.g. "BLEU = 27.31 58.1/33.1/20.6/13.2 (BP = 1.000 ratio = 1.012
  // hyp_len = 1234 ref_len = 1219)"; `width` is the score's number of decimals. With a
  // signature, the name carries it as in sacreBLEU's text output: "BLEU|nrefs:1|...= 27.31 ...".
  std::string format(int width = 2, const std::string& signature = "") const;
};

// Statistics of one segment against its references (each reference line of this segment).
BleuStats bleu_segment_stats(const std::string& hypothesis,
                             const std::vector<std::string>& references,
                             const BleuOptions& options);

// The score from (summed) statistics, with sacreBLEU's smoothing and brevity penalty.
BleuScore compute_bleu(const BleuStats& stats, const BleuOptions& options);

// Corpus BLEU: `references[r][i]` is reference r of hypothesis line i. Throws tx::Error on
// mismatched line counts or invalid UTF-8 (see check_corpus).
BleuScore corpus_bleu(const Lines& hypotheses, const std::vector<Lines>& references,
                      const BleuOptions& options = {});

// sacreBLEU's sentence_bleu defaults: the corpus defaults with effective order on.
BleuOptions sentence_bleu_options();

// BLEU of one sentence against its references, as sacreBLEU's sentence_bleu.
BleuScore sentence_bleu(const std::string& hypothesis, const std::vector<std::string>& references,
                        const BleuOptions& options = sentence_bleu_options());

}  // namespace tx::metrics
