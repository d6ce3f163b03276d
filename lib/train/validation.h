// Validator: tx-train's validation: cross-entropy and perplexity per target token on the
// validation set, and, when asked, BLEU (sacreBLEU's 13a) and chrF of its translation (beam
// search).
#pragma once

#include <string>
#include <vector>

#include "backend/backend.h"
#include "data/batcher.h"
#include "data/corpus.h"
#include "data/vocab.h"
#include "io/model_config.h"
#include "nn/transformer.h"

namespace tx::train {

// Plain numbers only: broadcast from rank 0 as bytes in a data-parallel run.
struct Validation {
  double ce = 0;  // per target token
  double perplexity = 0;
  double bleu = -1;  // -1: not computed
  double chrf = -1;  // -1: not computed

  // The figure of one of --valid-metrics: cross-entropy, perplexity, bleu or chrf.
  double score(const std::string& metric) const;
};

struct ValidatorOptions {
  int64_t max_tokens = 4096;            // per batch of the cross-entropy's forward passes
  int64_t translate_max_tokens = 4096;  // per batch of the BLEU translation
  bool bleu = false;
  bool chrf =
      false;  // chrF (sacreBLEU's defaults: character 6-grams, beta 2) of the same translation
  int beam_size = 6;
  float normalize = 1.0f;  // tx-translate's --normalize
  // The cross-entropy's GEMM operands (--precision; Graph's gemm_dtype). The BLEU translation
  // runs in f32.
  DType gemm_dtype = DType::f32;
};

class Validator {
 public:
  // Reads the validation pair once (and, for BLEU, keeps its lines as text); throws tx::Error
  // naming the files when they hold no usable pair or one too wide for a batch.
  Validator(Backend& be, const io::ModelConfig& config, const data::Vocab& src_vocab,
            const data::Vocab& tgt_vocab, const std::string& src, const std::string& tgt,
            const data::CorpusOptions& corpus_options, ValidatorOptions options);
  // Scores the model's current weights (dropout off).
  Validation run(const nn::Transformer& model) const;

 private:
  Backend& be_;
  const io::ModelConfig& config_;
  const data::Vocab& src_vocab_;
  const data::Vocab& tgt_vocab_;
  ValidatorOptions options_;
  data::ParallelCorpus corpus_;
  std::vector<std::string> src_lines_, refs_;
  data::BatcherOptions batcher_options_;
};

}  // namespace tx::train
