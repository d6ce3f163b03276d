// tx-score: two jobs, picked by whether a model is given.
// - Metrics (no --model): corpus BLEU / chrF / chrF++ of hypotheses (stdin or --input) against
//   one or more reference files, one line per metric as sacreBLEU's text output prints it,
//   signature included (lib/metrics); or, with --sentence-level, one line per hypothesis.
// - Model scoring (--model): the log-probability of each target line given its source line,
//   teacher-forced, one score per line in input order (marian-scorer); or, with --n-best-list,
//   each n-best line with that score appended to its features (marian-scorer --n-best).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/app_log.h"
#include "common/command_line.h"
#include "common/model_setup.h"
#include "core/format.h"
#include "data/batch.h"
#include "data/corpus.h"
#include "data/line_reader.h"
#include "graph/graph.h"
#include "graph/ops.h"
#include "io/nbest_line.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/corpus_check.h"
#include "metrics/read_lines.h"

namespace {

using tx::fixed;

using tx::app::Options;
using tx::app::UsageError;

// The scores on stdout, a full disk or a closed pipe an error (exit 1), not a lost result.
void write_stdout(const std::string& out) {
  std::fputs(out.c_str(), stdout);
  TX_CHECK(std::fflush(stdout) == 0 && !std::ferror(stdout),
           "cannot write the output; check the disk or the pipe");
}

// "bleu,chrf", "bleu chrf" (one word or two) and "bleu, chrf" all name two metrics.
std::vector<std::string> metric_names(const Options& o) {
  std::vector<std::string> out;
  for (const std::string& item : o.list("metrics")) {
    size_t begin = 0;
    while (begin <= item.size()) {
      size_t end = item.find_first_of(", \t", begin);
      if (end == std::string::npos) end = item.size();
      std::string name = item.substr(begin, end - begin);
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (!name.empty()) {
        if (name != "bleu" && name != "chrf" && name != "chrf++")
          throw UsageError("--metrics: unknown metric '" + name + "'; use bleu, chrf or chrf++");
        out.push_back(name);
      }
      begin = end + 1;
    }
  }
  if (out.empty()) throw UsageError("--metrics: name at least one of bleu, chrf, chrf++");
  return out;
}

// One metric's options, signature and scores, from the command line.
class Metric {
 public:
  Metric(const std::string& name, const Options& o, int num_refs, bool sentence_level)
      : name_(name), score_only_(o.flag("score-only")) {
    if (name == "bleu") {
      bleu_.lowercase = o.flag("lowercase");
      bleu_.tokenizer = tx::metrics::parse_bleu_tokenizer(o.text("tokenize"));
      bleu_.max_order = o.int32("max-ngram-order");
      bleu_.effective_order = sentence_level;  // sacreBLEU turns it on for sentence BLEU
      signature_ = tx::metrics::bleu_signature(bleu_, num_refs);
    } else {
      if (name == "chrf++") chrf_ = tx::metrics::chrf_plus_plus_options();
      chrf_.lowercase = o.flag("lowercase");
      signature_ = tx::metrics::chrf_signature(chrf_, num_refs);
    }
  }

  std::string corpus(const tx::metrics::Lines& hyps,
                     const std::vector<tx::metrics::Lines>& refs) const {
    if (name_ == "bleu") return line(tx::metrics::corpus_bleu(hyps, refs, bleu_));
    return line(tx::metrics::corpus_chrf(hyps, refs, chrf_));
  }

  std::string sentence(const std::string& hyp, const std::vector<std::string>& refs) const {
    if (name_ == "bleu") return line(tx::metrics::sentence_bleu(hyp, refs, bleu_));
    return line(tx::metrics::sentence_chrf(hyp, refs, chrf_));
  }

 private:
  template <typename Score>
  std::string line(const Score& score) const {
    return (score_only_ ? fixed(score.score, 2) : score.format(2, signature_)) + "\n";
  }

  std::string name_;
  bool score_only_;
  tx::metrics::BleuOptions bleu_;
  tx::metrics::ChrfOptions chrf_;
  std::string signature_;
};

int score_metrics(const Options& o) {
  if (!o.has("references") || o.list("references").empty())
    throw UsageError(
        "give reference files with -r/--references (metrics), or a model with -m/--model "
        "(model scoring)");
  const std::vector<std::string> names = metric_names(o);
  const bool sentence_level = o.flag("sentence-level");
  if (sentence_level && names.size() > 1)
    throw UsageError(tx::str("--sentence-level scores one metric, but --metrics names ",
                             names.size(), "; run tx-score once per metric"));
  const std::string input = o.has("input") ? o.text("input") : "-";
  const tx::metrics::Lines hyps =
      input == "-" ? tx::metrics::read_stdin_lines() : tx::metrics::read_lines(input);
  std::vector<tx::metrics::Lines> refs;
  for (const std::string& path : o.list("references"))
    refs.push_back(tx::metrics::read_lines(path));
  // sacreBLEU refuses an empty test set ("contains no sentence"); a score of 0 with success
  // would hide a translation that produced nothing.
  if (hyps.empty())
    throw tx::Error(tx::str("the hypotheses (", input == "-" ? "stdin" : "'" + input + "'",
                            ") hold no lines; there is nothing to score (did the translation "
                            "fail?)"));
  const int num_refs = static_cast<int>(refs.size());
  // Checked here too, where the file names are known (check_corpus only numbers the streams).
  for (size_t r = 0; r < refs.size(); ++r)
    if (refs[r].size() != hyps.size())
      throw tx::Error(tx::str("reference file '", o.list("references")[r], "' has ", refs[r].size(),
                              " lines but the hypotheses (",
                              input == "-" ? "stdin" : "'" + input + "'", ") have ", hyps.size(),
                              "; give exactly one reference line per hypothesis line"));

  std::string out;
  if (sentence_level) {
    tx::metrics::check_corpus(hyps, refs);
    const Metric metric(names.front(), o, num_refs, true);
    std::vector<std::string> segment_refs(refs.size());
    for (size_t i = 0; i < hyps.size(); ++i) {
      for (size_t r = 0; r < refs.size(); ++r) segment_refs[r] = refs[r][i];
      out += metric.sentence(hyps[i], segment_refs);
    }
  } else {
    for (const std::string& name : names)
      out += Metric(name, o, num_refs, false).corpus(hyps, refs);
  }
  write_stdout(out);  // all or nothing: an error above prints no partial result
  tx::app::detail(o, "scored ", hyps.size(), " lines against ", refs.size(), " reference",
                  refs.size() == 1 ? "" : "s");
  return 0;
}

// Pair indices in batches: longest first, so each batch holds similar lengths; a batch's padded
// size B * max(S, T) stays within max_tokens (a wider pair alone gets a batch of its own).
std::vector<std::vector<int64_t>> make_batches(const tx::data::ParallelCorpus& c,
                                               int64_t max_tokens, int64_t max_sentences) {
  auto width = [&](int64_t i) {
    return std::max(tx::data::source_row_length(c.src_length(i)),
                    tx::data::target_row_length(c.tgt_length(i)));
  };
  std::vector<int64_t> order(static_cast<size_t>(c.size()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return width(a) > width(b); });
  std::vector<std::vector<int64_t>> batches;
  for (int64_t i : order) {
    if (!batches.empty()) {
      std::vector<int64_t>& last = batches.back();
      const auto rows = static_cast<int64_t>(last.size()) + 1;
      // Widths only shrink, so the batch's first pair is its widest.
      if (rows * width(last.front()) <= max_tokens &&
          (max_sentences == 0 || rows <= max_sentences)) {
        last.push_back(i);
        continue;
      }
    }
    batches.push_back({i});
  }
  return batches;
}

// The teacher-forced log-probability of each pair of `corpus`, in corpus order; for an
// ensemble, the weighted sum of its models' (the score its search ranks by). `where(i,
// source_side)` names where pair i's source or target came from, for the message of an over-long
// pair.
template <typename Where>
std::vector<double> model_scores(const Options& o, const tx::app::LoadedModels& m,
                                 const tx::data::ParallelCorpus& corpus, Where where) {
  const int64_t limit = m.max_length();
  for (int64_t i = 0; i < corpus.size(); ++i) {
    const bool src_long = tx::data::source_row_length(corpus.src_length(i)) > limit;
    if (src_long || tx::data::target_row_length(corpus.tgt_length(i)) > limit) {
      // Beyond `limit` pieces a line was split only so far (CorpusOptions::split_limit).
      const int64_t tokens = src_long ? corpus.src_length(i) : corpus.tgt_length(i);
      throw tx::Error(tx::str(where(i, src_long), ": ",
                              tokens > limit ? tx::str("more than ", limit) : tx::str(tokens),
                              " tokens, but the model covers ", limit - 1, " (its max_length is ",
                              limit, "); shorten or split the pair, or leave it out"));
    }
  }

  const double alpha = o.number("normalize");
  std::vector<double> scores(static_cast<size_t>(corpus.size()), 0.0);
  tx::Backend& be = m.backend();
  for (const std::vector<int64_t>& rows :
       make_batches(corpus, o.integer("max-tokens"),
                    o.flag("deterministic") ? 1 : o.integer("mini-batch"))) {
    // One batch for every model: an ensemble's models share their special ids (LoadedModels).
    const tx::data::Batch b =
        tx::data::make_batch(corpus, rows.data(), static_cast<int64_t>(rows.size()),
                             tx::data::special_ids(m.first().config()));
    for (size_t k = 0; k < m.size(); ++k) {
      const tx::nn::Transformer& model = m[k].model();
      tx::Graph g(be, tx::GraphOptions{false, false});
      tx::Var logits = model.forward(g, be.upload(b.src, {b.size, b.src_len}),
                                     be.upload(b.src_lengths, {b.size}),
                                     be.upload(b.tgt_in, {b.size, b.tgt_len}));
      // Label smoothing 0: each target position's loss is -log p(token); pads give 0.
      tx::Var nll = tx::ops::cross_entropy(g, logits, be.upload(b.tgt_out, {b.size * b.tgt_len}),
                                           0.0f, model.config().pad_id);
      const std::vector<float> per_token = be.download<float>(nll->value);
      for (int64_t r = 0; r < b.size; ++r) {
        double sum = 0;
        for (int64_t t = 0; t < b.tgt_len; ++t) sum += per_token[r * b.tgt_len + t];
        scores[b.indices[r]] -= sum * m.weight(k);  // one model: weight 1, the log-prob
      }
    }
    if (alpha != 0)
      for (int64_t r = 0; r < b.size; ++r)
        scores[b.indices[r]] /= std::pow(static_cast<double>(b.tgt_lengths[r]), alpha);
  }
  // As tx-translate refuses them: a model with finite weights scores NaN only when its
  // activations overflow.
  for (int64_t i = 0; i < corpus.size(); ++i)
    if (std::isnan(scores[static_cast<size_t>(i)]))
      throw tx::Error(tx::str(where(i, true),
                              ": the model's score is NaN: its activations overflow "
                              "(--precision fp16 ends at 65,504; score with bf16 or fp32)"));
  return scores;
}

// One n-best line, its index checked against the --src it must come from.
tx::io::NBestLine parse_nbest_line(const std::string& line, const tx::data::LineReader& reader,
                                   int64_t source_lines, const std::string& src_path) {
  const std::string at = tx::str("'", reader.name(), "' line ", reader.line_number());
  tx::io::NBestLine n = tx::io::parse_nbest_line(line, at);
  if (n.index >= source_lines)
    throw tx::Error(tx::str(at, " is for source line index ", n.index, " but '", src_path, "' has ",
                            source_lines, " lines (indices 0..", source_lines - 1,
                            "); give the --src the n-best list was translated from"));
  return n;
}

// marian-scorer --n-best: each line of the list scored as (source line i, text), then written
// back with " <feature>= <score>" appended to its features, in the list's order.
int score_nbest(const Options& o, const tx::app::LoadedModels& m) {
  const std::string src_path = o.text("src"), nbest_path = o.text("n-best-list");
  std::string feature = o.has("n-best-feature") ? o.text("n-best-feature") : "";
  if (o.has("n-best-feature") &&
      (feature.empty() || feature.find_first_of(" |=") != std::string::npos))
    throw UsageError("--n-best-feature: '" + feature +
                     "' cannot name a feature; use a word without spaces, '|' or '=', e.g. F1");
  std::vector<std::string> sources;
  {
    tx::data::LineReader reader(src_path);
    for (std::string line; reader.next(line);) sources.push_back(line);
  }
  std::vector<tx::io::NBestLine> nbest;
  tx::data::ParallelCorpus corpus;
  std::map<int64_t, std::vector<int32_t>> source_ids;  // each source line encoded once
  {
    std::unique_ptr<tx::TextInput> stdin_text;
    std::unique_ptr<tx::data::LineReader> reader;
    if (nbest_path == "-") {
      stdin_text = std::make_unique<tx::TextInput>(0);
      reader = std::make_unique<tx::data::LineReader>(*stdin_text, "stdin");
    } else {
      reader = std::make_unique<tx::data::LineReader>(nbest_path);
    }
    for (std::string line; reader->next(line);) {
      nbest.push_back(
          parse_nbest_line(line, *reader, static_cast<int64_t>(sources.size()), src_path));
      const int64_t i = nbest.back().index;
      auto src = source_ids.find(i);
      if (src == source_ids.end())
        src = source_ids
                  .emplace(
                      i, m.src_vocab().encode_head(sources[static_cast<size_t>(i)], m.max_length()))
                  .first;
      corpus.add(src->second, m.tgt_vocab().encode_head(nbest.back().text(), m.max_length()),
                 reader->line_number());
    }
  }
  // The features the list already names ("F0=" -> F0): the new one must be another.
  std::set<std::string> used;
  for (const tx::io::NBestLine& n : nbest) {
    std::istringstream words{std::string(tx::io::trim_spaces(n.fields[n.features_field()]))};
    for (std::string w; words >> w;)
      if (w.size() > 1 && w.back() == '=') used.insert(w.substr(0, w.size() - 1));
  }
  if (feature.empty()) {
    for (int k = 1; feature.empty(); ++k)
      if (!used.count("F" + std::to_string(k))) feature = "F" + std::to_string(k);
  } else if (used.count(feature)) {
    throw UsageError(tx::str("--n-best-feature ", feature, ": '", nbest_path,
                             "' already has a feature of that name; choose another"));
  }
  const std::vector<double> scores = model_scores(o, m, corpus, [&](int64_t k, bool src_side) {
    return src_side ? tx::str("'", src_path, "' line ", nbest[k].index + 1, " (index ",
                              nbest[k].index, " in '", nbest_path, "' line ", corpus.line(k), ")")
                    : tx::str("'", nbest_path, "' line ", corpus.line(k));
  });
  std::string out;
  for (size_t k = 0; k < nbest.size(); ++k) {
    const std::vector<std::string>& f = nbest[k].fields;
    const size_t at = nbest[k].features_field();
    for (size_t i = 0; i < at; ++i) out += f[i] + "|||";
    const std::string_view features = tx::io::trim_spaces(f[at]);
    out += " " + std::string(features) + (features.empty() ? "" : " ") + feature + "= " +
           fixed(scores[k], 6) + " |||" + f[at + 1] + "\n";
  }
  write_stdout(out);
  tx::app::info(o, "rescored ", nbest.size(), " n-best line", nbest.size() == 1 ? "" : "s", " of ",
                source_ids.size(), " source line", source_ids.size() == 1 ? "" : "s");
  return 0;
}

int score_model(const Options& o) {
  if (!o.has("src") || (o.has("tgt") == o.has("n-best-list")))
    throw UsageError(o.has("tgt") && o.has("n-best-list")
                         ? "--tgt and --n-best-list both name the targets to score; give one"
                         : "model scoring needs --src FILE and --tgt FILE (one pair per line), "
                           "or --src FILE and --n-best-list FILE");
  const tx::app::LoadedModels m(o);
  if (o.has("n-best-list")) return score_nbest(o, m);
  const std::string src = o.text("src"), tgt = o.text("tgt");
  tx::data::CorpusOptions co;
  co.empty_lines = tx::data::EmptyLines::kKeep;  // one score per pair, whatever it holds
  co.num_threads = o.int32("cpu-threads");
  // A pair beyond the model's positions is refused (model_scores): a runaway line's tail
  // need not be split to know that.
  co.split_limit = m.max_length();
  const tx::data::ParallelCorpus corpus =
      tx::data::load_parallel_corpus(src, tgt, m.src_vocab(), m.tgt_vocab(), co);
  const std::vector<double> scores = model_scores(o, m, corpus, [&](int64_t i, bool src_side) {
    return tx::str("'", src_side ? src : tgt, "' line ", corpus.line(i));
  });
  std::string out;
  for (double s : scores) out += fixed(s, 6) + "\n";
  write_stdout(out);
  tx::app::info(o, "scored ", scores.size(), " pair", scores.size() == 1 ? "" : "s");
  return 0;
}

// An option of the other mode would be ignored (a --normalize beside -r, a --tokenize or -i
// beside -m): refused, naming it, as --src without -m is. Threads and the seed are settings a
// script may pass every program; they fit either mode.
void check_mode_options(const Options& o) {
  const bool model = o.has("model");
  // sacreBLEU's -m picks the metrics; here it names the model.
  if (model)
    for (const std::string& m : o.list("model"))
      if ((m == "bleu" || m == "chrf" || m == "ter") && !std::filesystem::exists(m))
        throw UsageError(tx::str("-m ", m,
                                 ": tx-score's -m is the model to score with (sacreBLEU's "
                                 "-m picks metrics); for the metric give --metrics ",
                                 m == "ter" ? "bleu or chrf (tx-score has no TER)" : m));
  for (const tx::app::OptionSpec* s : tx::app::options_of(tx::app::kScore)) {
    const bool metrics_option = s->group == "Metrics" || s->name == "input";
    if ((s->group == "General" && !metrics_option) || s->name == "cpu-threads" ||
        s->name == "seed" || s->name == "model" || !o.has(s->name) ||
        o.values().at(s->name) == s->default_for(tx::app::kScore))
      continue;
    if (model && metrics_option)
      throw UsageError(tx::str("--", s->name,
                               " is for metrics (BLEU/chrF): leave it out when scoring with "
                               "-m/--model, or leave out -m"));
    if (!model && !metrics_option)
      throw UsageError(tx::str("--", s->name,
                               " is for model scoring: give -m/--model too, or "
                               "leave it out for metrics"));
  }
}

int score(const Options& o) {
  check_mode_options(o);
  if (o.has("n-best-feature") && !o.has("n-best-list"))
    throw UsageError(
        "--n-best-feature names the score added to an --n-best-list's lines: give --n-best-list, "
        "or leave it out");
  return o.has("model") ? score_model(o) : score_metrics(o);
}

}  // namespace

int main(int argc, char** argv) {
  return tx::app::run_main(
      tx::app::kScore,
      "tx-score: score sentence pairs with a model, or hypotheses against references with "
      "BLEU/chrF.\nExamples: tx-score --metrics bleu,chrf -r ref.txt < hyp.txt\n"
      "          tx-score -m model.safetensors -v src.spm tgt.spm --src src.txt --tgt tgt.txt",
      argc, argv, score);
}
