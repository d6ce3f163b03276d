#include "train/validation.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "core/format.h"
#include "data/batcher.h"
#include "data/line_reader.h"
#include "decode/translator.h"
#include "graph/graph.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/read_lines.h"
#include "train/batch_loss.h"

namespace tx::train {

double Validation::score(const std::string& metric) const {
  if (metric == "cross-entropy") return ce;
  if (metric == "perplexity") return perplexity;
  if (metric == "chrf") return chrf;
  return bleu;
}

Validator::Validator(Backend& be, const io::ModelConfig& config, const data::Vocab& src_vocab,
                     const data::Vocab& tgt_vocab, const std::string& src, const std::string& tgt,
                     const data::CorpusOptions& corpus_options, ValidatorOptions options)
    : be_(be), config_(config), src_vocab_(src_vocab), tgt_vocab_(tgt_vocab), options_(options) {
  // Each file is read once, for both the cross-entropy and the translation: a pipe
  // (<(zcat dev.gz)) would be empty the second time. A validation set is small.
  const std::string src_bytes = metrics::read_bytes(src), tgt_bytes = metrics::read_bytes(tgt);
  std::istringstream src_in(src_bytes), tgt_in(tgt_bytes);
  data::LineReader src_reader(src_in, src), tgt_reader(tgt_in, tgt);
  corpus_ =
      data::load_parallel_corpus(src_reader, tgt_reader, src_vocab, tgt_vocab, corpus_options);
  if (options_.bleu || options_.chrf) {
    src_lines_ = metrics::lines_of(src_bytes, "'" + src + "'");
    refs_ = metrics::lines_of(tgt_bytes, "'" + tgt + "'");
  }
  TX_CHECK(corpus_.size() > 0, "validation files '", src, "' and '", tgt,
           "' hold no usable sentence pair; give a non-empty validation set");
  batcher_options_.max_tokens = options_.max_tokens;
  batcher_options_.maxi_batch = 0;
  batcher_options_.shuffle = false;
  batcher_options_.ids = data::special_ids(config_);
  batcher_options_.corpus_name = str("the validation files '", src, "' and '", tgt, "'");
  data::Batcher(corpus_, batcher_options_);  // a pair too wide for a batch is named now, not
                                             // at the first validation
}

Validation Validator::run(const nn::Transformer& model) const {
  Validation v;
  Graph g(be_, GraphOptions{false, false, 1, true, options_.gemm_dtype});
  data::Batcher batcher(corpus_, batcher_options_);
  data::Batch b;
  double sum = 0;
  int64_t tokens = 0;
  while (batcher.next(b)) {
    g.reset();
    Var loss = batch_loss(g, model, b, 0.0f, config_.pad_id, /*release_logits=*/false);
    sum += be_.download<float>(loss->value)[0];
    tokens += b.tgt_tokens();
  }
  g.reset();
  v.ce = sum / double(std::max<int64_t>(tokens, 1));
  v.perplexity = std::exp(v.ce);
  if (options_.bleu || options_.chrf) {
    decode::TranslatorOptions to;
    to.search.beam_size = options_.beam_size;
    to.search.length_penalty = options_.normalize;
    to.batching.max_tokens = options_.translate_max_tokens;
    decode::Translator translator(be_, model, src_vocab_, tgt_vocab_, to);
    const std::vector<std::string> hyps = translator.translate_lines(src_lines_);
    if (options_.bleu) v.bleu = metrics::corpus_bleu(hyps, {refs_}).score;
    if (options_.chrf) v.chrf = metrics::corpus_chrf(hyps, {refs_}).score;
  }
  return v;
}

}  // namespace tx::train
