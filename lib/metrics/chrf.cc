// chrF and chrF++ as sacreBLEU computes them: per-segment n-gram statistics against the best
// reference, summed over the corpus, then one F-beta score.
#include "metrics/chrf.h"

#include <cstdio>
#include <string_view>

#include "core/error.h"
#include "core/utf8.h"
#include "metrics/ngram.h"
#include "metrics/signature.h"
#include "metrics/unicode.h"

namespace tx::metrics {
namespace {

// Python's string.punctuation: the ASCII symbols.
bool is_ascii_punct(char c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
         (c >= '{' && c <= '~');
}

bool is_one_code_point(std::string_view word) {
  std::size_t i = 0;
  next_code_point(word, i);
  return i == word.size();
}

// chrF++'s word tokenization (from Popović's chrF++.py): split on whitespace, then split one
// symbol off the end of a word, or else off its start ("(hi)" gives "(hi" and ")").
std::vector<std::string_view> chrf_words(std::string_view text) {
  std::vector<std::string_view> words;
  for (std::string_view w : split_words(text)) {
    if (is_one_code_point(w)) {
      words.push_back(w);
    } else if (is_ascii_punct(w.back())) {
      words.push_back(w.substr(0, w.size() - 1));
      words.push_back(w.substr(w.size() - 1));
    } else if (is_ascii_punct(w.front())) {
      words.push_back(w.substr(0, 1));
      words.push_back(w.substr(1));
    } else {
      words.push_back(w);
    }
  }
  return words;
}

// The character and word n-gram tables of one segment. It owns the sequences its tables refer
// to, so it is neither copied nor moved.
class SegmentNgrams {
 public:
  SegmentNgrams(const std::string& segment, const ChrfOptions& options)
      : text_(options.lowercase ? to_lower(segment) : segment) {
    std::size_t i = 0;
    while (i < text_.size()) {
      const char32_t c = next_code_point(text_, i);
      if (options.whitespace || !is_space(c)) chars_.push_back(c);
    }
    if (options.word_order > 0) words_ = chrf_words(text_);
    // One sort per sequence serves all orders (see sort_starts).
    const auto char_starts = NgramTable<char32_t>::sort_starts(chars_, options.char_order);
    char_tables_.reserve(options.char_order);
    word_tables_.reserve(options.word_order);
    for (int n = 1; n <= options.char_order; ++n) char_tables_.emplace_back(chars_, n, char_starts);
    const auto word_starts = NgramTable<std::string_view>::sort_starts(words_, options.word_order);
    for (int n = 1; n <= options.word_order; ++n) word_tables_.emplace_back(words_, n, word_starts);
  }
  SegmentNgrams(const SegmentNgrams&) = delete;
  SegmentNgrams& operator=(const SegmentNgrams&) = delete;

  // Per-order statistics of this (hypothesis) segment against `ref`.
  ChrfStats match(const SegmentNgrams& ref) const {
    ChrfStats stats;
    for (std::size_t k = 0; k < char_tables_.size(); ++k) {
      stats.push_back(match_one(char_tables_[k], ref.char_tables_[k]));
    }
    for (std::size_t k = 0; k < word_tables_.size(); ++k) {
      stats.push_back(match_one(word_tables_[k], ref.word_tables_[k]));
    }
    return stats;
  }

 private:
  template <typename T>
  static ChrfNgramStats match_one(const NgramTable<T>& hyp, const NgramTable<T>& ref) {
    // sacreBLEU counts no hypothesis n-grams where the reference has none of this order, so
    // such an order adds nothing to the corpus precision either.
    return {ref.empty() ? 0 : hyp.total(), ref.total(), hyp.clipped_matches(ref)};
  }

  std::string text_;
  std::vector<char32_t> chars_;
  std::vector<std::string_view> words_;
  std::vector<NgramTable<char32_t>> char_tables_;
  std::vector<NgramTable<std::string_view>> word_tables_;
};

// x * y rounded to a double before it is added to anything. Python never fuses a multiply and an
// add; with -march=native the compiler may (an FMA), which moved scores by an ulp and could flip
// a printed digit.
double product(double x, double y) {
  volatile double p = x * y;
  return p;
}

void check_options(const ChrfOptions& options) {
  TX_CHECK(options.char_order >= 0 && options.word_order >= 0 &&
               options.char_order + options.word_order > 0,
           "chrF orders are char ", options.char_order, " and word ", options.word_order,
           "; use non-negative orders, not both 0 (chrF: 6 and 0, chrF++: 6 and 2)");
}

}  // namespace

ChrfOptions chrf_plus_plus_options() {
  ChrfOptions options;
  options.word_order = 2;
  return options;
}

std::string ChrfScore::name() const {
  return "chrF" + std::to_string(beta) + std::string(static_cast<std::size_t>(word_order), '+');
}

std::string chrf_signature(const ChrfOptions& options, int num_refs) {
  return str("nrefs:", num_refs, "|case:", options.lowercase ? "lc" : "mixed",
             "|eff:", options.eps_smoothing ? "no" : "yes", "|nc:", options.char_order,
             "|nw:", options.word_order, "|space:", options.whitespace ? "yes" : "no",
             "|version:", signature_version());
}

std::string ChrfScore::format(int width, const std::string& signature) const {
  // printf's %.Nf rounds the exact binary value, as Python's f"{x:.Nf}" does.
  std::string digits(static_cast<std::size_t>(std::snprintf(nullptr, 0, "%.*f", width, score)),
                     ' ');
  std::snprintf(digits.data(), digits.size() + 1, "%.*f", width, score);
  return (signature.empty() ? name() : name() + "|" + signature) + " = " + digits;
}

ChrfStats chrf_segment_stats(const std::string& hypothesis,
                             const std::vector<std::string>& references,
                             const ChrfOptions& options) {
  check_options(options);
  const SegmentNgrams hyp(hypothesis, options);
  ChrfStats best;
  double best_f = -1.0;
  for (const std::string& reference : references) {
    const SegmentNgrams ref(reference, options);
    ChrfStats stats = hyp.match(ref);
    const double f = chrf_f_score(stats, options);
    if (f > best_f) {
      best_f = f;
      best = std::move(stats);
    }
  }
  return best;
}

double chrf_f_score(const ChrfStats& stats, const ChrfOptions& options) {
  const double eps = 1e-16;
  const double factor = static_cast<double>(options.beta) * options.beta;
  double eps_score = 0.0, avg_prec = 0.0, avg_rec = 0.0;
  int effective_order = 0;
  // The statements follow sacreBLEU's _compute_f_score one for one, so that the floating-point
  // operations, and so the printed digits, are the same.
  for (const ChrfNgramStats& s : stats) {
    const double prec = s.hyp > 0 ? static_cast<double>(s.match) / s.hyp : eps;
    const double rec = s.ref > 0 ? static_cast<double>(s.match) / s.ref : eps;
    const double denom = product(factor, prec) + rec;
    eps_score += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
    if (s.hyp > 0 && s.ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (options.eps_smoothing) return 100 * eps_score / static_cast<double>(stats.size());
  if (effective_order == 0) return 0.0;
  avg_prec /= effective_order;
  avg_rec /= effective_order;
  if (avg_prec + avg_rec == 0) return 0.0;
  double score = (1 + factor) * avg_prec * avg_rec;
  score /= product(factor, avg_prec) + avg_rec;
  return 100 * score;
}

ChrfScore corpus_chrf(const Lines& hypotheses, const std::vector<Lines>& references,
                      const ChrfOptions& options) {
  check_options(options);
  check_corpus(hypotheses, references);
  ChrfScore result;
  result.char_order = options.char_order;
  result.word_order = options.word_order;
  result.beta = options.beta;
  result.stats.assign(options.char_order + options.word_order, ChrfNgramStats{});
  std::vector<std::string> segment_refs(references.size());
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    for (std::size_t r = 0; r < references.size(); ++r) segment_refs[r] = references[r][i];
    const ChrfStats stats = chrf_segment_stats(hypotheses[i], segment_refs, options);
    for (std::size_t k = 0; k < stats.size(); ++k) {
      result.stats[k].hyp += stats[k].hyp;
      result.stats[k].ref += stats[k].ref;
      result.stats[k].match += stats[k].match;
    }
  }
  result.score = chrf_f_score(result.stats, options);
  return result;
}

ChrfScore sentence_chrf(const std::string& hypothesis, const std::vector<std::string>& references,
                        const ChrfOptions& options) {
  std::vector<Lines> reference_streams;
  for (const std::string& reference : references) reference_streams.push_back({reference});
  return corpus_chrf({hypothesis}, reference_streams, options);
}

}  // namespace tx::metrics
