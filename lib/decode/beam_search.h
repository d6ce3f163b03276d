// BeamSearch: batched beam search over a Transformer — the n best translations of each source
// sentence, for a SourceBatch or a stream of sentences.
//
// How sentences are searched (docs/library.md, "Decoding", for callers):
// - Sentences join the search in cohorts (search_stream): the encoder runs once per cohort;
//   start_decoding computes each layer's cross-attention keys and values once. A cohort's
//   first step runs on one row per sentence (its beams would all start from bos with the
//   same score); its candidates fan each sentence out into `beam_size` batch rows
//   (DecoderState::reorder).
// - Continuous batching: each step decodes every cohort together (Transformer::decode_step of
//   several states: one GEMM per linear layer over all rows, attention and cache per cohort,
//   so a cohort's caches and memory stay as long as its own sentences). When finished
//   sentences have freed at least a third of the batch (SearchLimits), the next sentences
//   join as a new cohort, so the batch stays full instead of ending on a few rows, whose
//   GEMMs run at a quarter of the speed per row. (A third: each cohort costs an encoder run
//   and its own attention calls every step; a quarter and an eighth measured slower.)
// - Each step: decode_step -> Backend::beam_top_k: each row's log-probs plus the forbidden-token
//   mask plus the row's running score, and the top-(2 * beam) per sentence over its [beam * V]
//   candidates (log_softmax, add_bias, a rank-1 GEMM and top_k, bit for bit, without writing
//   the [R, V] scores). Only those 2 * beam values and ids are downloaded.
// - On the host, a sentence takes candidates best first: one ending in eos becomes a finished
//   hypothesis if it is among the best `beam` candidates (else it is dropped), any other
//   continues, until `beam` continue. The cohort's state is reordered to the parents of the
//   continuing rows. 2 * beam candidates always hold `beam` continuations,
//   since each row contributes at most one eos candidate.
// - Stopping (fairseq's rule, CTranslate2's with a length penalty): a sentence
//   is done once it has `beam` finished hypotheses, or at its maximum length, where only eos is
//   allowed (its rows' eos log-probs then come from log_softmax, scored in the same order). Done
//   sentences leave the batch: their rows are left out of the next reorder. A later, longer
//   hypothesis could still score better after length normalisation; the rule trades that for
//   a bound on the work per sentence, and with beam_size = n it is exact for the search space
//   the exhaustive test enumerates.
// - Whatever the rule, a sentence also stops as soon as no live hypothesis can still enter its
//   n-best list (BeamSearchOptions::stop_when_settled): the same lists in fewer steps.
// - Beam 1 is greedy search.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "data/batch.h"
#include "decode/alignment.h"
#include "decode/sampling.h"
#include "decode/shortlist.h"
#include "nn/transformer.h"

namespace tx::decode {

// How finished hypotheses leave the beam and when a sentence stops.
enum class SearchRule {
  // fairseq's and CTranslate2's (the top of this file): `beam` hypotheses stay live; an eos
  // among the best `beam` candidates ends one; at the length limit only eos is allowed.
  fairseq,
  // Marian's (translator/beam_search.cpp): each hypothesis that ends shrinks the sentence's
  // beam by one, every eos among the kept candidates ends one, and at the step where the
  // output reaches max_length_a * (source tokens + 1) tokens (Marian's --max-length-factor,
  // max_length_b unused) the kept hypotheses end as they are, without eos. An empty source
  // gives an empty translation of score 0. The default for Marian models.
  marian,
  // Hugging Face generate()'s (BeamSearchScorer, early_stopping False): as fairseq, but the
  // finished list keeps the best `beam` by score, and a sentence ends only once it has `beam`
  // and the step's best candidate, normalised at the current length, cannot beat the worst
  // of them. The default for Hugging Face models.
  huggingface,
};

struct BeamSearchOptions {
  static constexpr int kMaxBeam = 1 << 20;
  int beam_size = 5;
  int n_best = 1;  // hypotheses returned per sentence, 1 <= n_best <= beam_size
  // Output tokens (eos not counted) at most: floor(a * source tokens + b), source tokens
  // without eos, as fairseq's --max-len-a/--max-len-b. Also capped so that every position
  // stays within the model's max_length.
  float max_length_a = 1.5f;
  int max_length_b = 10;
  int min_length = 0;  // eos is forbidden before this many output tokens
  // Normalised score = log-prob / length^alpha, length counting eos (Marian's --normalize,
  // fairseq's --lenpen). 0 ranks by total log-prob; 1 by log-prob per token.
  float length_penalty = 1.0f;
  bool allow_unk = true;  // false: unk is never produced
  // false, with beam_size 1: greedy search picks each row's largest logit (after the mask) and
  // skips the log-softmax over the vocabulary, as CTranslate2's greedy search without
  // return_scores; the hypotheses' log_prob and score are then NaN. The picks are those of the
  // log-probs except where two logits a rounding apart tie after it. Ignored with a beam,
  // whose search needs the scores.
  bool scores = true;
  // false keeps done sentences' rows in the batch (scored as dead) until all are done: the
  // same results, more work; for tests and benchmarks of batch shrinking.
  bool shrink_batch = true;
  // A sentence also stops once no live hypothesis can still enter its n-best list (every later
  // token adds a log-prob <= 0: CTranslate2's early exit, for any --normalize and --n-best):
  // the same n-best lists, fewer steps. false searches on as the rule alone says; for tests.
  bool stop_when_settled = true;
  SearchRule rule = SearchRule::fairseq;
  // Sampling instead of search (decode/sampling.h): needs beam_size 1 and n_best 1. Each step
  // draws a sentence's token from the masked log-probs (downloaded: [rows, V] per step), with
  // the sentence's own stream (SourceSentence::index); the hypothesis's log_prob and score are
  // the model's log-probs of the drawn tokens, the temperature not applied.
  SamplingOptions sampling;
  // A lexical shortlist (decode/shortlist.h; must outlive the search): each step's output layer
  // covers the union of the shortlists of the sentences in the batch (their prefixes' tokens
  // added), and only those tokens can be produced. Null: the whole vocabulary.
  const LexicalShortlist* shortlist = nullptr;
  // Each returned hypothesis's soft word alignment (Hypothesis::alignment), from the first
  // model's alignment layer and head (Marian's rule for ensembles): one teacher-forced pass
  // (decode/alignment.h) over the hypotheses of the sentences that finish in a step.
  bool alignment = false;

  // Throws tx::Error naming the first invalid option and the fix.
  void validate() const;
};

// One translation: target ids without bos and eos, and its scores.
struct Hypothesis {
  std::vector<int32_t> ids;
  float log_prob = 0;  // sum of the log-probabilities of ids and eos (if it has one)
  // log_prob / length^length_penalty, length the tokens scored (ids and eos if it has one):
  // what ranks hypotheses
  float score = 0;
  // An ensemble's search with scores: each model's own log-prob of ids and eos (log_prob is
  // their weighted sum), as marian-decoder's n-best lists print them (F0, F1, ...); else empty.
  std::vector<float> model_log_probs;
  // false for a hypothesis that ended at Marian's length limit without eos.
  bool eos = true;
  // With BeamSearchOptions::alignment: a row per token of ids (and eos), a column per source
  // token (eos last).
  SoftAlignment alignment;
};

// The n-best list of one sentence, best score first.
using NBest = std::vector<Hypothesis>;

// One sentence to search: source ids ending in eos, and the caller's name for it.
// With a prefix (target ids, no bos or eos), the translation starts with it: each of its
// tokens is forced in turn, scored with its log-prob, and the search goes on from there
// (tx-translate --force-decode). The length limit counts the prefix; a longer prefix raises
// it to the prefix's length (the output then ends after it), within the model's positions.
struct SourceSentence {
  int64_t index = 0;
  std::vector<int32_t> ids;
  std::vector<int32_t> prefix;
};

// The sentences decoded together at most (tx-translate's --mini-batch and --max-tokens): at
// most max_sentences (0: no cap), and those sentences times the longest source among them
// (eos counted) at most max_tokens (0: no cap). One sentence always fits.
struct SearchLimits {
  int64_t max_sentences = 0;
  int64_t max_tokens = 0;
};

class BeamSearch {
 public:
  // `model` must outlive the BeamSearch. Special ids are data::Vocab's (pad 0, unk 1, bos 2,
  // eos 3).
  BeamSearch(Backend& be, const nn::Transformer& model, BeamSearchOptions options = {});
  // An ensemble: each step ranks by the weighted sum of the models' log-probabilities
  // (Marian's rule: sum_m w_m log p_m, not renormalised; `weights` empty: 1 / N each, so a
  // model with itself searches as the model alone, scores included). The models must share
  // the vocabularies' sizes and special ids; each runs its own encoder and decoder state.
  BeamSearch(Backend& be, std::vector<const nn::Transformer*> models,
             BeamSearchOptions options = {}, std::vector<float> weights = {});

  // The n-best list of each row of `batch`, in row order, all in one cohort. Rows are source
  // ids ending in eos.
  std::vector<NBest> search(const data::SourceBatch& batch);

  // Searches the sentences `next` hands out (false: no more) until all are done, calling
  // `done` with each sentence's index and n-best list as it finishes (not in input order).
  // `next` is called only when the batch has room for another sentence, so a pipe is never
  // read ahead of what the batch can take.
  void search_stream(const std::function<bool(SourceSentence&)>& next,
                     const std::function<void(int64_t index, NBest nbest)>& done,
                     const SearchLimits& limits);

  // The longest output (eos not counted) for a source of `source_tokens` tokens (eos not
  // counted). With SearchRule::marian: the step at which the kept hypotheses end (Marian's
  // limit of tokens, minus one).
  int64_t max_output_length(int64_t source_tokens) const;

  const BeamSearchOptions& options() const { return options_; }

 private:
  struct Cohort;
  using Done = std::function<void(int64_t, NBest)>;
  // A cohort of `sentences`, encoded and ready for its first step.
  Cohort start(Graph& g, std::vector<SourceSentence> sentences) const;
  // One decoding step of every cohort together; sentences that finish go to `done`.
  void step(Graph& g, std::vector<Cohort>& cohorts, const Done& done);

  Backend& be_;
  std::vector<const nn::Transformer*> models_;
  std::vector<float> weights_;    // one per model
  bool weights_nonnegative_;      // then a step never raises a running score (settled())
  bool weighted_ = false;         // several models, or one under a weight other than 1
  const nn::Transformer& model_;  // models_[0]: the special ids
  int64_t max_positions_;         // the fewest positions of any model
  BeamSearchOptions options_;
  int64_t vocab_;
  // Added to every row's log-probabilities: a very negative value on pad and bos (and unk
  // when not allowed); the second also on eos (before min_length).
  Tensor mask_, mask_no_eos_;
  Tensor ones_;  // [1, V]: the rank-1 GEMM that adds each row's running score (ensembles)

  // The shortlist's output layers (one per model), masks and positions, for the union of the
  // ids of the cohorts last decoded together; rebuilt when that union changes.
  struct Shortlisted {
    std::vector<int32_t> ids;               // sorted target ids
    std::vector<nn::OutputSubset> outputs;  // one per model
    Tensor mask, mask_no_eos;               // [K]: mask_ and mask_no_eos_ at those ids
    std::vector<int32_t> position;          // [V]: an id's index in ids, or -1
  };
  // The union of the cohorts' shortlists (rebuilding shortlisted_ when it changed).
  const Shortlisted& shortlisted(const std::vector<Cohort>& cohorts);
  Shortlisted shortlisted_;
  std::vector<int64_t> shortlisted_for_;  // the cohorts (Cohort::serial) of shortlisted_
  int64_t next_serial_ = 0;
  std::vector<float> mask_host_, mask_no_eos_host_;
};

}  // namespace tx::decode
