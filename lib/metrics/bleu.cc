// BLEU as sacreBLEU computes it: per-segment clipped n-gram counts, summed, then smoothed.
#include "metrics/bleu.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "core/format.h"
#include "metrics/ngram.h"
#include "metrics/signature.h"
#include "metrics/tokenize_13a.h"
#include "metrics/tokenize_intl.h"
#include "metrics/unicode.h"

namespace tx::metrics {
namespace {

// sacreBLEU's my_log: log(0) is a large negative number rather than -inf, so that a zero
// precision drives the score to exactly 0 without NaNs.
double floored_log(double x) {
  return x == 0.0 ? -9999999999.0 : std::log(x);
}

double default_smooth_value(BleuSmoothing smoothing) {
  return smoothing == BleuSmoothing::kFloor ? 0.1 : 1.0;
}

// Lowercase (optional), strip trailing whitespace, tokenize: sacreBLEU's _preprocess_segment.
// The strip comes before tokenizing, so a final "-\n" stays a dash rather than a join.
std::string preprocess(const std::string& segment, const BleuOptions& options) {
  const std::string lowered = options.lowercase ? to_lower(segment) : std::string();
  const std::string_view text = rstrip(options.lowercase ? lowered : segment);
  switch (options.tokenizer) {
    case BleuTokenizer::k13a:
      return tokenize_13a(text);
    case BleuTokenizer::kIntl:
      return tokenize_intl(text);
    case BleuTokenizer::kChar:
      return tokenize_char(text);
    case BleuTokenizer::kNone:
      break;
  }
  return std::string(text);
}

int64_t closest_ref_len(int64_t hyp_len, const std::vector<int64_t>& ref_lens) {
  int64_t best = -1;
  for (int64_t len : ref_lens) {
    const int64_t diff = std::llabs(hyp_len - len), best_diff = std::llabs(hyp_len - best);
    if (best < 0 || diff < best_diff || (diff == best_diff && len < best)) best = len;
  }
  return best < 0 ? 0 : best;
}

void check_options(const BleuOptions& options) {
  TX_CHECK(options.max_order >= 1, "BLEU max_order is ", options.max_order,
           "; use 1 or more (4 is standard)");
  TX_CHECK(
      !options.smooth_value || (std::isfinite(*options.smooth_value) && *options.smooth_value >= 0),
      "BLEU smoothing value ", options.smooth_value.value_or(0),
      " must be a finite number >= 0 (a negative floor gives the log of a negative number)");
}

}  // namespace

BleuSmoothing parse_bleu_smoothing(const std::string& name) {
  if (name == "none") return BleuSmoothing::kNone;
  if (name == "floor") return BleuSmoothing::kFloor;
  if (name == "add-k") return BleuSmoothing::kAddK;
  if (name == "exp") return BleuSmoothing::kExp;
  throw Error(str("unknown BLEU smoothing '", name, "'; use one of none, floor, add-k, exp"));
}

BleuTokenizer parse_bleu_tokenizer(const std::string& name) {
  if (name == "13a") return BleuTokenizer::k13a;
  if (name == "intl") return BleuTokenizer::kIntl;
  if (name == "char") return BleuTokenizer::kChar;
  if (name == "none") return BleuTokenizer::kNone;
  throw Error(str("unknown BLEU tokenizer '", name, "'; use one of 13a, intl, char, none"));
}

std::string bleu_tokenizer_name(BleuTokenizer tokenizer) {
  switch (tokenizer) {
    case BleuTokenizer::k13a:
      return "13a";
    case BleuTokenizer::kIntl:
      return "intl";
    case BleuTokenizer::kChar:
      return "char";
    case BleuTokenizer::kNone:
      break;
  }
  return "none";
}

std::string bleu_signature(const BleuOptions& options, int num_refs) {
  std::string smooth;
  switch (options.smoothing) {
    case BleuSmoothing::kNone:
      smooth = "none";
      break;
    case BleuSmoothing::kExp:
      smooth = "exp";
      break;
    case BleuSmoothing::kFloor:
    case BleuSmoothing::kAddK:
      // sacreBLEU's f"{method}[{value:.2f}]" for the methods that take a value.
      smooth = str(options.smoothing == BleuSmoothing::kFloor ? "floor" : "add-k", "[",
                   fixed(options.smooth_value.value_or(default_smooth_value(options.smoothing)), 2),
                   "]");
      break;
  }
  return str("nrefs:", num_refs, "|case:", options.lowercase ? "lc" : "mixed",
             "|eff:", options.effective_order ? "yes" : "no",
             "|tok:", bleu_tokenizer_name(options.tokenizer), "|smooth:", smooth,
             "|version:", signature_version());
}

void BleuStats::add(const BleuStats& other) {
  if (counts.empty()) {
    counts.assign(other.counts.size(), 0);
    totals.assign(other.totals.size(), 0);
  }
  TX_CHECK(counts.size() == other.counts.size(), "BLEU statistics of orders ", counts.size(),
           " and ", other.counts.size(), " cannot be added; use one max_order");
  sys_len += other.sys_len;
  ref_len += other.ref_len;
  for (std::size_t n = 0; n < counts.size(); ++n) {
    counts[n] += other.counts[n];
    totals[n] += other.totals[n];
  }
}

std::string BleuScore::format(int width, const std::string& signature) const {
  std::string out =
      (signature.empty() ? "BLEU" : "BLEU|" + signature) + " = " + fixed(score, width) + " ";
  for (std::size_t n = 0; n < precisions.size(); ++n) {
    if (n > 0) out += "/";
    out += fixed(precisions[n], 1);
  }
  out += " (BP = " + fixed(bp, 3) + " ratio = " + fixed(ratio, 3) +
         " hyp_len = " + std::to_string(sys_len) + " ref_len = " + std::to_string(ref_len) + ")";
  return out;
}

BleuStats bleu_segment_stats(const std::string& hypothesis,
                             const std::vector<std::string>& references,
                             const BleuOptions& options) {
  check_options(options);
  const int orders = options.max_order;
  const std::string hyp_text = preprocess(hypothesis, options);
  const std::vector<std::string_view> hyp_tokens = split_words(hyp_text);
  std::vector<NgramTable<std::string_view>> hyp_ngrams;
  std::vector<std::vector<int64_t>> max_ref_counts;  // per order, per distinct hypothesis n-gram
  const auto hyp_starts = NgramTable<std::string_view>::sort_starts(hyp_tokens, orders);
  for (int n = 1; n <= orders; ++n) {
    hyp_ngrams.emplace_back(hyp_tokens, n, hyp_starts);
    max_ref_counts.emplace_back(hyp_ngrams.back().entries().size(), 0);
  }

  // An n-gram may match as often as it occurs in any one reference (the max over references).
  std::vector<int64_t> ref_lens;
  for (const std::string& reference : references) {
    const std::string ref_text = preprocess(reference, options);
    const std::vector<std::string_view> ref_tokens = split_words(ref_text);
    ref_lens.push_back(static_cast<int64_t>(ref_tokens.size()));
    const auto ref_starts = NgramTable<std::string_view>::sort_starts(ref_tokens, orders);
    for (int n = 1; n <= orders; ++n) {
      const std::vector<int64_t> counts =
          hyp_ngrams[n - 1].counts_in(NgramTable<std::string_view>(ref_tokens, n, ref_starts));
      std::vector<int64_t>& best = max_ref_counts[n - 1];
      for (std::size_t i = 0; i < counts.size(); ++i) best[i] = std::max(best[i], counts[i]);
    }
  }

  BleuStats stats;
  stats.sys_len = static_cast<int64_t>(hyp_tokens.size());
  stats.ref_len = closest_ref_len(stats.sys_len, ref_lens);
  for (int n = 1; n <= orders; ++n) {
    const auto& entries = hyp_ngrams[n - 1].entries();
    int64_t matches = 0;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      matches += std::min(entries[i].count, max_ref_counts[n - 1][i]);
    }
    stats.counts.push_back(matches);
    stats.totals.push_back(hyp_ngrams[n - 1].total());
  }
  return stats;
}

BleuScore compute_bleu(const BleuStats& stats, const BleuOptions& options) {
  check_options(options);
  const int orders = options.max_order;
  TX_CHECK(static_cast<int>(stats.counts.size()) == orders &&
               static_cast<int>(stats.totals.size()) == orders,
           "BLEU statistics have ", stats.counts.size(), " orders but max_order is ", orders,
           "; compute them with the same options");
  BleuScore result;
  result.counts = stats.counts;
  result.totals = stats.totals;
  result.sys_len = stats.sys_len;
  result.ref_len = stats.ref_len;
  result.ratio = stats.ref_len > 0 ? static_cast<double>(stats.sys_len) / stats.ref_len : 0.0;
  result.bp = 1.0;
  if (stats.sys_len < stats.ref_len) {
    result.bp = stats.sys_len > 0
                    ? std::exp(1.0 - static_cast<double>(stats.ref_len) / stats.sys_len)
                    : 0.0;
  }
  result.precisions.assign(orders, 0.0);

  bool any_match = false;
  for (int64_t c : stats.counts) any_match = any_match || c != 0;
  if (!any_match) return result;  // score 0, precisions 0, as sacreBLEU's early exit

  const double k = options.smooth_value.value_or(default_smooth_value(options.smoothing));
  double exp_factor = 1.0;
  int effective = orders;
  for (int n = 1; n <= orders; ++n) {
    double correct = static_cast<double>(stats.counts[n - 1]);
    double total = static_cast<double>(stats.totals[n - 1]);
    if (options.smoothing == BleuSmoothing::kAddK && n > 1) {
      correct += k;
      total += k;
    }
    // No hypothesis n-grams of this order (a short corpus): the remaining precisions stay 0,
    // which gives BLEU 0 unless effective order stops the average here.
    if (total == 0) break;
    if (options.effective_order) effective = n;
    double& precision = result.precisions[n - 1];
    if (correct == 0) {
      if (options.smoothing == BleuSmoothing::kExp) {
        exp_factor *= 2;
        precision = 100.0 / (exp_factor * total);
      } else if (options.smoothing == BleuSmoothing::kFloor) {
        precision = 100.0 * k / total;
      }
    } else {
      precision = 100.0 * correct / total;
    }
  }
  double log_sum = 0.0;
  for (int n = 0; n < effective; ++n) log_sum += floored_log(result.precisions[n]);
  result.score = result.bp * std::exp(log_sum / effective);
  return result;
}

BleuScore corpus_bleu(const Lines& hypotheses, const std::vector<Lines>& references,
                      const BleuOptions& options) {
  check_corpus(hypotheses, references);
  check_options(options);
  BleuStats total;
  total.counts.assign(options.max_order, 0);
  total.totals.assign(options.max_order, 0);
  std::vector<std::string> segment_refs(references.size());
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    for (std::size_t r = 0; r < references.size(); ++r) segment_refs[r] = references[r][i];
    total.add(bleu_segment_stats(hypotheses[i], segment_refs, options));
  }
  return compute_bleu(total, options);
}

BleuOptions sentence_bleu_options() {
  BleuOptions options;
  options.effective_order = true;
  return options;
}

BleuScore sentence_bleu(const std::string& hypothesis, const std::vector<std::string>& references,
                        const BleuOptions& options) {
  std::vector<Lines> reference_streams;
  for (const std::string& reference : references) reference_streams.push_back({reference});
  return corpus_bleu({hypothesis}, reference_streams, options);
}

}  // namespace tx::metrics
