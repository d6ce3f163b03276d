#include "decode/beam_search.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "data/vocab.h"
#include "graph/graph.h"

namespace tx::decode {
namespace {

using data::Vocab;

// A score for "impossible". Finite rather than -inf: the rank-1 GEMM multiplies it, and a
// kernel that pads K with zeros would turn -inf into NaN. Anything below kDeadBelow is dead.
constexpr float kDead = -1e30f;
constexpr float kDeadBelow = -1e29f;
// Self-attention cache slots allocated before the first doubling.
constexpr int64_t kFirstCapacity = 8;

// One sentence of the batch while it is searched.
struct Sentence {
  int64_t max_length = 0;  // output tokens at most (eos not counted)
  bool done = false;
  std::vector<Hypothesis> finished;
};

// One batch row: a live hypothesis.
struct Row {
  int32_t parent = 0;  // its row in the previous step's batch
  int32_t token = 0;   // the token it ends in: the next decoder input
  float score = 0;     // running log-prob
  std::vector<int32_t> ids;
};

float normalise(float log_prob, size_t length, float alpha) {
  return alpha == 0.0f ? log_prob : log_prob / std::pow(static_cast<float>(length), alpha);
}

}  // namespace

void BeamSearchOptions::validate() const {
  TX_CHECK(beam_size >= 1, "--beam-size ", beam_size, " must be at least 1 (1: greedy)");
  TX_CHECK(n_best >= 1 && n_best <= beam_size, "--n-best ", n_best,
           " must be between 1 and --beam-size (", beam_size, ")");
  TX_CHECK(max_length_a >= 0 && max_length_b >= 0, "--max-length-a ", max_length_a,
           " and --max-length-b ", max_length_b, " must be >= 0");
  TX_CHECK(min_length >= 0, "--min-length ", min_length, " must be >= 0");
  TX_CHECK(length_penalty >= 0, "--length-penalty ", length_penalty, " must be >= 0 (0: none)");
}

BeamSearch::BeamSearch(Backend& be, const nn::Transformer& model, BeamSearchOptions options)
    : be_(be), model_(model), options_(options), vocab_(model.config().tgt_vocab_size) {
  options_.validate();
  TX_CHECK(vocab_ > Vocab::kEosId, "beam search: the target vocabulary has ", vocab_,
           " ids; it needs at least pad, unk, bos and eos");
  std::vector<float> mask(static_cast<size_t>(vocab_), 0.0f);
  mask[Vocab::kPadId] = kDead;
  mask[Vocab::kBosId] = kDead;
  if (!options_.allow_unk) mask[Vocab::kUnkId] = kDead;
  mask_ = be_.upload(mask, {vocab_});
  mask[Vocab::kEosId] = kDead;
  mask_no_eos_ = be_.upload(mask, {vocab_});
}

int64_t BeamSearch::max_output_length(int64_t source_tokens) const {
  auto length =
      static_cast<int64_t>(std::floor(options_.max_length_a * static_cast<float>(source_tokens))) +
      options_.max_length_b;
  length = std::max<int64_t>(length, options_.min_length);
  // Step t embeds position t; the last step (t = length) must stay within the encoding.
  return std::min<int64_t>(length, model_.config().max_length - 1);
}

std::vector<NBest> BeamSearch::search(const data::SourceBatch& batch) {
  const int64_t B = batch.size, V = vocab_;
  const int beam = options_.beam_size;
  const int K = 2 * beam;
  if (B == 0) return {};

  std::vector<Sentence> sentences(static_cast<size_t>(B));
  int64_t steps = 0;
  for (int64_t b = 0; b < B; ++b) {
    sentences[b].max_length = max_output_length(batch.src_lengths[b] - 1);
    steps = std::max(steps, sentences[b].max_length + 1);
  }

  Graph g(be_, GraphOptions{false, false});
  Tensor src_lengths = be_.upload(batch.src_lengths, {B});
  Var memory = model_.encode(g, be_.upload(batch.src, {B, batch.src_len}), src_lengths);
  // The cache doubles when full. Every step's reorder copies the whole capacity and attention
  // runs over it, so a small start keeps both near the length decoded so far: at most twice
  // it, for one extra copy per doubling.
  nn::DecoderState state =
      model_.start_decoding(g, memory, src_lengths, std::min<int64_t>(steps, kFirstCapacity));
  memory.reset();

  // Every beam of a sentence would start from bos with the same score, so the first step runs
  // on one row per sentence (width 1) and its candidates fan each sentence out into `beam`
  // rows (the next reorder): 1 / beam of that step's decoder work. From then on sentence k
  // owns rows [k * beam, (k + 1) * beam).
  std::vector<int64_t> active(static_cast<size_t>(B));  // sentence of each row block
  std::vector<Row> rows(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    active[b] = b;
    rows[b] = Row{static_cast<int32_t>(b), Vocab::kBosId, 0.0f, {}};
  }

  for (int64_t t = 0;; ++t) {
    std::vector<int32_t> parents, tokens;
    std::vector<float> scores;
    for (const Row& r : rows) {
      parents.push_back(r.parent);
      tokens.push_back(r.token);
      scores.push_back(r.score);
    }
    const auto R = static_cast<int64_t>(rows.size());
    const auto A = static_cast<int64_t>(active.size());
    const auto width = static_cast<int32_t>(R / A);  // rows per sentence: 1 at t = 0, then beam
    const int top = static_cast<int>(std::min<int64_t>(K, width * V));  // candidates per sentence
    // The self-attention caches follow the parents; the memory stays put until sentences
    // leave (rows come in blocks of `beam` per sentence: DecoderState's groups).
    state.reorder(parents);

    Var logits = model_.decode_step(g, state, be_.upload(tokens, {R, 1}), t);
    const bool eos_allowed = t >= options_.min_length;
    Tensor values = be_.empty({A, top}), ids = be_.empty({A, top}, DType::i32);
    be_.beam_top_k(logits->value, eos_allowed ? mask_ : mask_no_eos_, be_.upload(scores, {R}),
                   width, top, values, ids);
    const std::vector<float> top_values = be_.download<float>(values);
    const std::vector<int32_t> top_ids = be_.download<int32_t>(ids);
    // Sentences at their maximum length may only end: their candidates are each row's eos
    // entry, scored as beam_top_k scores it (R values, not a mask of R * V).
    std::vector<float> eos_scores;
    bool at_limit = false;
    for (int64_t k = 0; k < A; ++k) at_limit |= t >= sentences[active[k]].max_length;
    if (at_limit) {
      const Tensor& lp = logits->value;
      be_.log_softmax(lp, lp);
      std::vector<int32_t> eos_index(static_cast<size_t>(R));
      for (int64_t r = 0; r < R; ++r) eos_index[r] = static_cast<int32_t>(r * V + Vocab::kEosId);
      Tensor picked = be_.empty({R, 1});
      be_.gather_rows(lp.view({R * V, 1}), be_.upload(eos_index, {R}), picked);
      eos_scores = be_.download<float>(picked);
      const float eos_mask = eos_allowed ? 0.0f : kDead;
      for (int64_t r = 0; r < R; ++r) eos_scores[r] = (eos_scores[r] + eos_mask) + scores[r];
    }

    auto finish = [&](Sentence& s, int32_t row, float score) {
      if (static_cast<int>(s.finished.size()) >= beam) return;
      const std::vector<int32_t>& h = rows[row].ids;
      s.finished.push_back({h, score, normalise(score, h.size() + 1, options_.length_penalty)});
    };
    std::vector<Row> next_rows;
    std::vector<int64_t> next_active;
    for (int64_t k = 0; k < A; ++k) {
      Sentence& s = sentences[active[k]];
      std::vector<Row> live;
      if (!s.done && t >= s.max_length) {
        std::vector<int32_t> ending(static_cast<size_t>(width));
        for (int i = 0; i < width; ++i) ending[i] = static_cast<int32_t>(k * width + i);
        std::stable_sort(ending.begin(), ending.end(),
                         [&](int32_t a, int32_t b) { return eos_scores[a] > eos_scores[b]; });
        for (int32_t row : ending)
          if (eos_scores[row] >= kDeadBelow) finish(s, row, eos_scores[row]);
      }
      for (int c = 0;
           c < top && !s.done && t < s.max_length && static_cast<int>(live.size()) < beam; ++c) {
        const float score = top_values[k * top + c];
        if (score < kDeadBelow) break;  // sorted: the rest are dead too
        const int32_t row = static_cast<int32_t>(k * width + top_ids[k * top + c] / V);
        const int32_t token = top_ids[k * top + c] % V;
        if (token == Vocab::kEosId) {
          // Only an eos among the best `beam` candidates ends a hypothesis (fairseq's and
          // CTranslate2's rule); a worse one, reached while filling the live rows, is dropped,
          // or weak endings would fill the finished list and stop the search early.
          if (c < beam) finish(s, row, score);
        } else {
          Row r{row, token, score, rows[row].ids};
          r.ids.push_back(token);
          live.push_back(std::move(r));
        }
      }
      if (static_cast<int>(s.finished.size()) >= beam || live.empty()) s.done = true;
      if (s.done) {
        if (options_.shrink_batch) continue;
        live.clear();
      }
      // Dead filler rows keep the block `beam` rows wide.
      while (static_cast<int>(live.size()) < beam)
        live.push_back(Row{static_cast<int32_t>(k * width), Vocab::kEosId, kDead, {}});
      for (Row& r : live) next_rows.push_back(std::move(r));
      next_active.push_back(active[k]);
    }
    const bool all_done =
        std::all_of(sentences.begin(), sentences.end(), [](const Sentence& s) { return s.done; });
    if (all_done) break;
    rows = std::move(next_rows);
    active = std::move(next_active);
  }

  std::vector<NBest> out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    NBest& nb = sentences[b].finished;
    std::stable_sort(nb.begin(), nb.end(),
                     [](const Hypothesis& x, const Hypothesis& y) { return x.score > y.score; });
    if (static_cast<int>(nb.size()) > options_.n_best) nb.resize(options_.n_best);
    out[b] = std::move(nb);
  }
  return out;
}

}  // namespace tx::decode
