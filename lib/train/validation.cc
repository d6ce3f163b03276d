#include "train/validation.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "data/batcher.h"
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
    : be_(be),
      config_(config),
      src_vocab_(src_vocab),
      tgt_vocab_(tgt_vocab),
      options_(options),
      corpus_(data::load_parallel_corpus(src, tgt, src_vocab, tgt_vocab, corpus_options)) {
  TX_CHECK(corpus_.size() > 0, "validation files '", src, "' and '", tgt,
           "' hold no usable sentence pair; give a non-empty validation set");
  if (options_.bleu || options_.chrf) {
    src_lines_ = metrics::read_lines(src);
    refs_ = metrics::read_lines(tgt);
  }
}

Validation Validator::run(const nn::Transformer& model) const {
  Validation v;
  Graph g(be_, GraphOptions{false, false, 1, true, options_.gemm_dtype});
  data::BatcherOptions bo;
  bo.max_tokens = options_.max_tokens;
  bo.maxi_batch = 0;
  bo.shuffle = false;
  bo.ids = data::special_ids(config_);
  data::Batcher batcher(corpus_, bo);
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
