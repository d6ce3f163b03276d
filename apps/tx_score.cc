// tx-score: two jobs, picked by whether a model is given.
// - Metrics (no --model): corpus BLEU / chrF / chrF++ of hypotheses (stdin or --input) against
//   one or more reference files, one sacreBLEU-format line per metric (lib/metrics).
// - Model scoring (--model): the log-probability of each target line given its source line,
//   teacher-forced, one score per line in input order (marian-scorer).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "common/app_log.h"
#include "common/command_line.h"
#include "common/model_setup.h"
#include "data/batch.h"
#include "data/corpus.h"
#include "graph/graph.h"
#include "graph/ops.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/read_lines.h"

namespace {

using tx::app::Options;
using tx::app::UsageError;

// "bleu,chrf" and "bleu chrf" both name two metrics.
std::vector<std::string> metric_names(const Options& o) {
  std::vector<std::string> out;
  for (const std::string& item : o.list("metrics")) {
    size_t begin = 0;
    while (begin <= item.size()) {
      size_t end = item.find(',', begin);
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

int score_metrics(const Options& o) {
  if (!o.has("references") || o.list("references").empty())
    throw UsageError(
        "give reference files with -r/--references (metrics), or a model with -m/--model "
        "(model scoring)");
  for (const char* model_only : {"src", "tgt"})
    if (o.has(model_only))
      throw UsageError(tx::str("--", model_only, " is for model scoring: give -m/--model too"));
  const std::vector<std::string> names = metric_names(o);
  const std::string input = o.has("input") ? o.text("input") : "-";
  // /dev/stdin keeps read_lines' rules (split at '\n', trailing whitespace stripped) for a pipe.
  const tx::metrics::Lines hyps = tx::metrics::read_lines(input == "-" ? "/dev/stdin" : input);
  std::vector<tx::metrics::Lines> refs;
  for (const std::string& path : o.list("references"))
    refs.push_back(tx::metrics::read_lines(path));

  const bool lowercase = o.flag("lowercase");
  std::string out;
  for (const std::string& name : names) {
    if (name == "bleu") {
      tx::metrics::BleuOptions bo;
      bo.lowercase = lowercase;
      bo.tokenizer = tx::metrics::parse_bleu_tokenizer(o.text("tokenize"));
      out += tx::metrics::corpus_bleu(hyps, refs, bo).format() + "\n";
    } else {
      tx::metrics::ChrfOptions co =
          name == "chrf++" ? tx::metrics::chrf_plus_plus_options() : tx::metrics::ChrfOptions{};
      co.lowercase = lowercase;
      out += tx::metrics::corpus_chrf(hyps, refs, co).format() + "\n";
    }
  }
  std::fputs(out.c_str(), stdout);  // all or nothing: an error above prints no partial result
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

int score_model(const Options& o) {
  if (!o.has("src") || !o.has("tgt"))
    throw UsageError("model scoring needs --src FILE and --tgt FILE (one pair per line)");
  if (o.has("references"))
    throw UsageError("-r/--references is for metrics: leave out -m/--model to compute BLEU/chrF");
  tx::app::LoadedModel m(o);
  const std::string src = o.text("src"), tgt = o.text("tgt");
  tx::data::CorpusOptions co;
  co.empty_lines = tx::data::EmptyLines::kKeep;  // one score per pair, whatever it holds
  co.num_threads = static_cast<int32_t>(o.integer("cpu-threads"));
  const tx::data::ParallelCorpus corpus =
      tx::data::load_parallel_corpus(src, tgt, m.src_vocab(), m.tgt_vocab(), co);
  const int64_t limit = m.config().max_length;
  for (int64_t i = 0; i < corpus.size(); ++i) {
    const bool src_long = tx::data::source_row_length(corpus.src_length(i)) > limit;
    if (src_long || tx::data::target_row_length(corpus.tgt_length(i)) > limit)
      throw tx::Error(tx::str("'", src_long ? src : tgt, "' line ", corpus.line(i), ": ",
                              src_long ? corpus.src_length(i) : corpus.tgt_length(i),
                              " tokens, but the model covers ", limit - 1, " (its max_length is ",
                              limit, "); shorten or split the pair, or leave it out"));
  }

  const double alpha = o.number("normalize");
  std::vector<double> scores(static_cast<size_t>(corpus.size()));
  tx::Backend& be = m.backend();
  for (const std::vector<int64_t>& rows :
       make_batches(corpus, o.integer("max-tokens"), o.integer("mini-batch"))) {
    const tx::data::Batch b =
        tx::data::make_batch(corpus, rows.data(), static_cast<int64_t>(rows.size()));
    tx::Graph g(be, tx::GraphOptions{false, false});
    tx::Var logits = m.model().forward(g, be.upload(b.src, {b.size, b.src_len}),
                                       be.upload(b.src_lengths, {b.size}),
                                       be.upload(b.tgt_in, {b.size, b.tgt_len}));
    // Label smoothing 0: each target position's loss is -log p(token); pads give 0.
    tx::Var nll = tx::ops::cross_entropy(g, logits, be.upload(b.tgt_out, {b.size * b.tgt_len}),
                                         0.0f, tx::data::Vocab::kPadId);
    const std::vector<float> per_token = be.download<float>(nll->value);
    for (int64_t r = 0; r < b.size; ++r) {
      double sum = 0;
      for (int64_t t = 0; t < b.tgt_len; ++t) sum += per_token[r * b.tgt_len + t];
      double score = -sum;
      if (alpha != 0) score /= std::pow(static_cast<double>(b.tgt_lengths[r]), alpha);
      scores[b.indices[r]] = score;
    }
  }
  for (double s : scores) std::printf("%.6f\n", s);
  std::fflush(stdout);
  tx::app::info(o, "scored ", scores.size(), " pair", scores.size() == 1 ? "" : "s");
  return 0;
}

int score(const Options& o) {
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
