#include "decode/beam_search.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>

#include "core/error.h"
#include "data/vocab.h"
#include "graph/graph.h"

namespace tx::decode {
namespace {

using data::Vocab;

// One sentence while it is searched.
struct Sentence {
  int64_t index = 0;       // the caller's
  int64_t max_length = 0;  // output tokens at most (eos not counted); marian: the last step
  bool empty_source = false;
  bool done = false;
  std::vector<Hypothesis> finished;
  std::vector<int32_t> prefix;  // forced first tokens (SourceSentence::prefix)
  std::vector<int32_t> source;  // its ids, kept for alignments only
};

// One batch row: a live hypothesis.
struct Row {
  int32_t parent = 0;        // its row in its cohort's state before the next reorder
  int32_t token = 0;         // the token it ends in: the next decoder input
  float score = 0;           // running log-prob
  int32_t last = -1;         // its last token's entry in the cohort's trail; -1: none yet
  std::vector<float> parts;  // an ensemble's: each model's running log-prob (Hypothesis)
};

// Every token a cohort's hypotheses chose, each with the entry of the token before it: a row
// extends its history by one entry instead of copying it (R copies of up to t tokens a step),
// and only a finished hypothesis walks its back.
struct Trail {
  std::vector<std::pair<int32_t, int32_t>> entries;  // (previous entry or -1, token)
  int32_t extend(int32_t last, int32_t token) {
    entries.emplace_back(last, token);
    return static_cast<int32_t>(entries.size() - 1);
  }
  std::vector<int32_t> ids(int32_t last) const {
    std::vector<int32_t> out;
    for (int32_t e = last; e >= 0; e = entries[static_cast<size_t>(e)].first)
      out.push_back(entries[static_cast<size_t>(e)].second);
    std::reverse(out.begin(), out.end());
    return out;
  }
};

float normalise(float log_prob, size_t length, float alpha) {
  return alpha == 0.0f ? log_prob : log_prob / std::pow(static_cast<float>(length), alpha);
}

// Whether a sentence's n-best list is final: every later step adds a log-prob <= 0, so a live
// hypothesis of running log-prob S <= 0 ends at most at S / L^alpha for the longest length L
// it can reach (max_length + 1 tokens with eos; + 2 is a margin). Once the n-th best finished
// hypothesis scores above that for the best live one, searching on adds only hypotheses that
// rank below it. In floats too: adding a non-positive number and dividing a non-positive one
// by a larger divisor never round upwards.
bool settled(const Sentence& s, const std::vector<Row>& live, int n_best, float alpha) {
  if (live.empty() || static_cast<int>(s.finished.size()) < n_best) return false;
  float best_live = live.front().score;
  for (const Row& r : live) best_live = std::max(best_live, r.score);
  if (!(best_live <= 0.0f)) return false;
  std::vector<float> scores;
  for (const Hypothesis& h : s.finished) scores.push_back(h.score);
  std::nth_element(scores.begin(), scores.begin() + (n_best - 1), scores.end(),
                   std::greater<float>());
  return scores[n_best - 1] > normalise(best_live, static_cast<size_t>(s.max_length + 2), alpha);
}

// Marian's empty translation of an empty source (eos alone): its eos aligned to the source's.
// (Under the other rules an empty source is searched like any other.)
bool eos_to_eos(const std::vector<int32_t>& source, const Hypothesis& h) {
  return source.size() <= 1 && h.ids.empty();
}

const nn::Transformer& first_model(const std::vector<const nn::Transformer*>& models) {
  TX_CHECK(!models.empty(), "beam search: no model given");
  for (size_t m = 0; m < models.size(); ++m)
    TX_CHECK(models[m], "beam search: model ", m + 1, " of ", models.size(), " is null");
  return *models.front();
}

}  // namespace

void BeamSearchOptions::validate() const {
  if (sampling.on) {
    // (tx-translate sets the beam to 1 itself, as Marian: the n-best is what a user gives.)
    TX_CHECK(beam_size == 1 && n_best == 1, "--output-sampling draws one translation per line: ",
             beam_size != 1 ? str("it needs --beam-size 1 (got ", beam_size, ")")
                            : str("--n-best ", n_best, " asks for more; give --n-best 1"),
             " (for several samples of a line, run again with another --seed)");
    TX_CHECK(std::isfinite(sampling.temperature) && sampling.temperature > 0,
             "--output-sampling: the temperature ", sampling.temperature, " must be positive");
    TX_CHECK(sampling.top_k >= 0, "--output-sampling topk ", sampling.top_k,
             ": K must be positive");
  }
  // (The bound keeps 2 * beam candidates a sentence within an int; no search needs more.)
  TX_CHECK(beam_size >= 1 && beam_size <= kMaxBeam, "--beam-size ", beam_size,
           " must be between 1 (greedy) and ", kMaxBeam);
  TX_CHECK(n_best >= 1 && n_best <= beam_size, "--n-best ", n_best,
           " must be between 1 and --beam-size (", beam_size, ")");
  TX_CHECK(std::isfinite(max_length_a) && max_length_a >= 0 && max_length_b >= 0,
           "--max-length-factor ", max_length_a, " and --max-length-b ", max_length_b,
           " must be >= 0");
  TX_CHECK(min_length >= 0, "--min-length ", min_length, " must be >= 0");
  TX_CHECK(std::isfinite(length_penalty) && length_penalty >= 0, "--normalize ", length_penalty,
           " must be a number >= 0 (0: none)");
}

BeamSearch::BeamSearch(Backend& be, const nn::Transformer& model, BeamSearchOptions options)
    : BeamSearch(be, std::vector<const nn::Transformer*>{&model}, options) {}

BeamSearch::BeamSearch(Backend& be, std::vector<const nn::Transformer*> models,
                       BeamSearchOptions options, std::vector<float> weights)
    : be_(be),
      models_(std::move(models)),
      weights_(std::move(weights)),
      model_(first_model(models_)),
      max_positions_(model_.config().max_length),
      options_(options),
      vocab_(model_.config().tgt_vocab_size) {
  options_.validate();
  const io::ModelConfig& config = model_.config();
  if (weights_.empty()) weights_.assign(models_.size(), 1.0f / float(models_.size()));
  TX_CHECK(weights_.size() == models_.size(), "--weights: ", weights_.size(), " weights for ",
           models_.size(), " models; give one per model");
  // One model under a weight other than 1 scores as an ensemble of one (as tx-score does).
  weighted_ = models_.size() > 1 || weights_[0] != 1.0f;
  weights_nonnegative_ =
      std::all_of(weights_.begin(), weights_.end(), [](float w) { return w >= 0.0f; });
  for (size_t m = 0; m < models_.size(); ++m) {
    const io::ModelConfig& o = models_[m]->config();
    TX_CHECK(std::isfinite(weights_[m]), "--weights: weight ", m + 1, " (", weights_[m],
             ") is not a finite number");
    TX_CHECK(
        o.src_vocab_size == config.src_vocab_size && o.tgt_vocab_size == vocab_ &&
            o.eos_id == config.eos_id && o.pad_id == config.pad_id && o.bos_id == config.bos_id &&
            o.unk_id == config.unk_id && o.decoder_start_id == config.decoder_start_id,
        "ensemble: model ", m + 1, " has vocabularies of ", o.src_vocab_size, "/", o.tgt_vocab_size,
        " ids (pad ", o.pad_id, ", unk ", o.unk_id, ", bos ", o.bos_id, ", eos ", o.eos_id,
        ", decoder start ", o.decoder_start_id, ") but model 1 has ", config.src_vocab_size, "/",
        vocab_, " (", config.pad_id, ", ", config.unk_id, ", ", config.bos_id, ", ", config.eos_id,
        ", ", config.decoder_start_id,
        "); an ensemble's models must share their vocabularies, special ids and decoder start");
    max_positions_ = std::min<int64_t>(max_positions_, o.max_length);
  }
  // eos is masked until --min-length tokens: past the positions no hypothesis could end.
  TX_CHECK(options_.min_length < max_positions_, "--min-length ", options_.min_length,
           " is beyond the ", max_positions_ - 1,
           " output tokens the model's positions allow; lower it");
  TX_CHECK(config.eos_id >= 0 && config.eos_id < vocab_, "beam search: eos id ", config.eos_id,
           " is outside the target vocabulary of ", vocab_, " ids");
  // pad, bos and unk (unless allowed) are never produced; a model without one has -1.
  std::vector<float> mask(static_cast<size_t>(vocab_), 0.0f);
  auto forbid = [&](int32_t id) {
    if (id >= 0 && id < vocab_ && id != config.eos_id) mask[id] = kDead;
  };
  forbid(config.pad_id);
  forbid(config.bos_id);
  if (!options_.allow_unk) forbid(config.unk_id);
  mask_ = be_.upload(mask, {vocab_});
  mask_host_ = mask;
  mask[config.eos_id] = kDead;
  mask_no_eos_ = be_.upload(mask, {vocab_});
  mask_no_eos_host_ = mask;
  ones_ = be_.empty({1, vocab_});
  be_.fill(ones_, 1.0f);
}

int64_t BeamSearch::max_output_length(int64_t source_tokens) const {
  if (options_.rule == SearchRule::marian) {
    // Marian ends the search after the step t with t + 1 >= factor * (source tokens + eos).
    const double limit =
        static_cast<double>(options_.max_length_a) * static_cast<double>(source_tokens + 1);
    // A --min-length beyond it raises it, as under the other rules (step N may end on eos).
    const double last = std::max({std::ceil(limit) - 1, 0.0, double(options_.min_length)});
    return static_cast<int64_t>(std::min(last, double(max_positions_ - 1)));
  }
  // In double, clamped before the conversion: a huge factor must not overflow int64.
  double length = std::floor(double(options_.max_length_a * static_cast<float>(source_tokens))) +
                  double(options_.max_length_b);
  length = std::max(length, double(options_.min_length));
  // Step t embeds position t; the last step (t = length) must stay within the encoding.
  return static_cast<int64_t>(std::min(length, double(max_positions_ - 1)));
}

// Sentences that joined the search together: their state, rows (blocks of
// rows.size() / active.size() per sentence, in the order of `active`) and steps decoded.
struct BeamSearch::Cohort {
  std::vector<nn::DecoderState> states;  // one per model
  std::vector<Sentence> sentences;
  std::vector<int64_t> active;  // sentences still in the batch, one block of rows each
  std::vector<Row> rows;
  Trail trail;  // the rows' tokens
  int64_t t = 0;
  int64_t source_width = 0;        // the longest source, eos counted
  std::vector<int32_t> shortlist;  // with a shortlist: the target ids its sentences may produce
  int64_t serial = 0;              // its place among the search's cohorts
  int64_t live() const {
    int64_t n = 0;
    for (int64_t k : active) n += !sentences[k].done;
    return n;
  }
};

std::vector<NBest> BeamSearch::search(const data::SourceBatch& batch) {
  std::vector<NBest> out(static_cast<size_t>(batch.size));
  int64_t r = 0;
  auto next = [&](SourceSentence& s) {
    if (r == batch.size) return false;
    s.index = r;
    s.prefix = batch.prefixes.empty() ? std::vector<int32_t>() : batch.prefixes[r];
    s.ids = batch.row(r++);
    return true;
  };
  search_stream(
      next, [&](int64_t index, NBest nbest) { out[index] = std::move(nbest); },
      SearchLimits{std::max<int64_t>(batch.size, 1), 0});
  return out;
}

void BeamSearch::search_stream(const std::function<bool(SourceSentence&)>& next, const Done& done,
                               const SearchLimits& limits) {
  Graph g(be_, GraphOptions{false, false});
  std::vector<Cohort> cohorts;
  std::deque<SourceSentence> pending;
  bool exhausted = false;
  while (true) {
    int64_t live = 0, width = 0;
    for (const Cohort& c : cohorts) {
      const int64_t n = c.live();
      live += n;
      if (n > 0) width = std::max(width, c.source_width);
    }
    // How many waiting sentences fit beside the live ones, reading more only while they could.
    int64_t fit = 0;
    while (true) {
      if (limits.max_sentences > 0 && live + fit >= limits.max_sentences) break;
      if (static_cast<int64_t>(pending.size()) == fit) {
        SourceSentence s;
        if (exhausted || !next(s)) {
          exhausted = true;
          break;
        }
        pending.push_back(std::move(s));
      }
      const int64_t w = std::max(width, static_cast<int64_t>(pending[fit].ids.size()));
      if (limits.max_tokens > 0 && live + fit > 0 && (live + fit + 1) * w > limits.max_tokens)
        break;
      width = w;
      ++fit;
    }
    // A new cohort when it makes at least a third of the batch: each costs an encoder run
    // and per-step attention calls of its own.
    if (fit > 0 && 3 * fit >= live + fit) {
      std::vector<SourceSentence> joining(std::make_move_iterator(pending.begin()),
                                          std::make_move_iterator(pending.begin() + fit));
      pending.erase(pending.begin(), pending.begin() + fit);
      cohorts.push_back(start(g, std::move(joining)));
      cohorts.back().serial = next_serial_++;
    }
    if (cohorts.empty()) {
      if (exhausted && pending.empty()) break;
      continue;
    }
    step(g, cohorts, done);
    cohorts.erase(std::remove_if(cohorts.begin(), cohorts.end(),
                                 [](const Cohort& c) { return c.live() == 0; }),
                  cohorts.end());
  }
}

BeamSearch::Cohort BeamSearch::start(Graph& g, std::vector<SourceSentence> sentences) const {
  const auto B = static_cast<int64_t>(sentences.size());
  Cohort c;
  int64_t steps = 0;
  for (const SourceSentence& s : sentences)
    c.source_width = std::max<int64_t>(c.source_width, s.ids.size());
  const int64_t S = c.source_width;
  std::vector<int32_t> src(static_cast<size_t>(B * S), model_.config().pad_id), lengths;
  // Every beam of a sentence would start from bos with the same score, so the first step runs
  // on one row per sentence (width 1) and its candidates fan each sentence out into `beam`
  // rows (the next reorder): 1 / beam of that step's decoder work.
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int32_t>& ids = sentences[b].ids;
    std::copy(ids.begin(), ids.end(), src.begin() + b * S);
    lengths.push_back(static_cast<int32_t>(ids.size()));
    Sentence s;
    s.index = sentences[b].index;
    s.max_length = max_output_length(static_cast<int64_t>(ids.size()) - 1);
    // The length limit counts the prefix; a longer prefix raises it to its own length (the
    // output ends after it), within the positions the model has.
    s.prefix = sentences[b].prefix;
    const int64_t positions = max_positions_ - 1;
    if (static_cast<int64_t>(s.prefix.size()) > positions)
      s.prefix.resize(static_cast<size_t>(positions));
    // (marian's max_length is the last step's index: the prefix's last token is step P - 1.)
    const int64_t prefix_end =
        static_cast<int64_t>(s.prefix.size()) - (options_.rule == SearchRule::marian ? 1 : 0);
    s.max_length = std::max<int64_t>(s.max_length, prefix_end);
    s.empty_source = ids.size() <= 1;
    if (options_.alignment) s.source = ids;
    steps = std::max(steps, s.max_length + 1);
    c.sentences.push_back(std::move(s));
    c.active.push_back(b);
    c.rows.push_back(Row{static_cast<int32_t>(b), model_.config().decoder_start_id, 0.0f, -1, {}});
    if (weighted_ && options_.scores) c.rows.back().parts.assign(models_.size(), 0.0f);
  }
  const io::ModelConfig& config = model_.config();
  for (const SourceSentence& s : sentences) {
    // (The Translator's sources always are: it crops a long line and appends eos.)
    TX_CHECK(!s.ids.empty() && s.ids.back() == config.eos_id &&
                 static_cast<int64_t>(s.ids.size()) <= max_positions_,
             "beam search: source ", s.index, " must be ids ending in eos (", config.eos_id,
             ") within the model's ", max_positions_, " positions; it has ", s.ids.size(), " ids",
             s.ids.empty() ? "" : str(", the last ", s.ids.back()));
    for (int32_t id : s.prefix) {
      TX_CHECK(id >= 0 && id < vocab_, "beam search: prefix id ", id,
               " is outside the target vocabulary of ", vocab_, " ids");
      // The search adds bos and eos itself, and never produces pad.
      TX_CHECK(id != config.eos_id && id != config.bos_id && id != config.pad_id,
               "beam search: the prefix of source index ", s.index, " holds the special id ", id,
               " (pad, bos or eos); a prefix is target words only");
    }
  }
  if (options_.shortlist) {
    std::vector<int32_t>& ids = c.shortlist;
    ids = options_.shortlist->always();
    ids.push_back(model_.config().eos_id);  // every sentence must be able to end
    for (const SourceSentence& s : sentences) {
      options_.shortlist->add_translations(s.ids, ids);
      ids.insert(ids.end(), s.prefix.begin(), s.prefix.end());
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    TX_CHECK(ids.front() >= 0 && ids.back() < vocab_, "beam search: the shortlist holds id ",
             ids.front() < 0 ? ids.front() : ids.back(), ", outside the target vocabulary of ",
             vocab_, " ids; make the shortlist with this model's vocabularies");
  }
  const Tensor src_lengths = be_.upload(lengths, {B});
  const Tensor src_ids = be_.upload(src, {B, S});
  // The caches are allocated once, for the cohort's longest output and its rows after the
  // fan-out: growing them copied the written steps (2.5% of a beam 5 x 32 run, most of it
  // first touches of fresh pages), and peak memory was higher with the doubling's two copies
  // alive at once. The layout is time-major, so steps never reached touch no pages.
  for (const nn::Transformer* model : models_)
    c.states.push_back(model->start_decoding(g, model->encode(g, src_ids, src_lengths), src_lengths,
                                             steps, B * options_.beam_size));
  return c;
}

const BeamSearch::Shortlisted& BeamSearch::shortlisted(const std::vector<Cohort>& cohorts) {
  // The union changes only when a cohort joins or leaves.
  std::vector<int64_t> serials;
  for (const Cohort& c : cohorts) serials.push_back(c.serial);
  if (serials == shortlisted_for_ && !shortlisted_.ids.empty()) return shortlisted_;
  shortlisted_for_ = std::move(serials);
  std::vector<int32_t> ids;
  for (const Cohort& c : cohorts) ids.insert(ids.end(), c.shortlist.begin(), c.shortlist.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  if (ids == shortlisted_.ids) return shortlisted_;
  Shortlisted s;
  s.position.assign(static_cast<size_t>(vocab_), -1);
  std::vector<float> mask, mask_no_eos;
  for (size_t k = 0; k < ids.size(); ++k) {
    s.position[static_cast<size_t>(ids[k])] = static_cast<int32_t>(k);
    mask.push_back(mask_host_[static_cast<size_t>(ids[k])]);
    mask_no_eos.push_back(mask_no_eos_host_[static_cast<size_t>(ids[k])]);
  }
  const auto K = static_cast<int64_t>(ids.size());
  s.mask = be_.upload(mask, {K});
  s.mask_no_eos = be_.upload(mask_no_eos, {K});
  for (const nn::Transformer* model : models_) s.outputs.push_back(model->output_subset(be_, ids));
  s.ids = std::move(ids);
  shortlisted_ = std::move(s);
  return shortlisted_;
}

void BeamSearch::step(Graph& g, std::vector<Cohort>& cohorts, const Done& done) {
  // With a shortlist, the step's outputs are K target ids: a candidate's index within a row is
  // a position in them (token_at), and an id's column is its position (column).
  const Shortlisted* list = options_.shortlist ? &shortlisted(cohorts) : nullptr;
  const int64_t V = list ? static_cast<int64_t>(list->ids.size()) : vocab_;
  auto token_at = [&](int32_t column) { return list ? list->ids[column] : column; };
  auto column = [&](int32_t id) { return list ? list->position[id] : id; };
  const Tensor& mask = list ? list->mask : mask_;
  const Tensor& mask_no_eos = list ? list->mask_no_eos : mask_no_eos_;
  const int32_t eos = model_.config().eos_id;
  const int beam = options_.beam_size;
  const int K = 2 * beam;
  std::vector<int32_t> tokens;
  std::vector<std::vector<nn::DecoderState*>> states(models_.size());
  for (Cohort& c : cohorts) {
    std::vector<int32_t> parents;
    for (const Row& r : c.rows) {
      parents.push_back(r.parent);
      tokens.push_back(r.token);
    }
    // The self-attention caches follow the parents; the memory stays put until sentences
    // leave (rows come in blocks of `beam` per sentence: DecoderState's groups).
    for (size_t m = 0; m < models_.size(); ++m) {
      c.states[m].reorder(parents);
      states[m].push_back(&c.states[m]);
    }
  }
  const auto rows = static_cast<int64_t>(tokens.size());
  const Tensor token_ids = be_.upload(tokens, {rows, 1});
  Var logits = model_.decode_step(g, states[0], token_ids, list ? &list->outputs[0] : nullptr);
  // An ensemble's "logits" are already its weighted log-probs: every use below that would take
  // a log-softmax of them takes them as they are.
  const bool ensemble = weighted_;
  // Each model's log-probs kept apart for the n-best lists' per-model scores.
  const bool breakdown = ensemble && options_.scores;
  std::vector<Tensor> model_lp;
  if (ensemble) {
    const Tensor combined = be_.empty({rows, V});
    Tensor lp = be_.empty({rows, V});
    for (size_t m = 0; m < models_.size(); ++m) {
      if (breakdown && m > 0) lp = be_.empty({rows, V});
      const Var step_logits = m == 0 ? logits
                                     : models_[m]->decode_step(g, states[m], token_ids,
                                                               list ? &list->outputs[m] : nullptr);
      be_.log_softmax(step_logits->value.view({rows, V}), lp);
      if (m == 0)
        be_.scale(lp, weights_[0], combined);
      else
        be_.axpy(weights_[m], lp, combined);
      if (breakdown) model_lp.push_back(lp);
    }
    logits = make_var(combined.view(logits->value.shape()));
  }

  // Each sentence's best candidates: one beam_top_k over every cohort's rows when they agree
  // on rows per sentence and mask (always in greedy search; with a beam, except on a new
  // cohort's first step), else one per cohort. top_values/top_ids hold `top` per sentence.
  auto width_of = [](const Cohort& c) {
    return static_cast<int32_t>(c.rows.size() / c.active.size());  // 1 at t = 0, then beam
  };
  auto eos_allowed = [&](const Cohort& c) { return c.t >= options_.min_length; };
  bool uniform = true;
  for (const Cohort& c : cohorts)
    uniform &=
        width_of(c) == width_of(cohorts.front()) && eos_allowed(c) == eos_allowed(cohorts.front());
  const bool log_probs = options_.scores || beam > 1 || options_.sampling.on || ensemble;
  std::vector<float> scores, top_values;
  std::vector<int32_t> top_ids;
  std::vector<int64_t> row_sentence, row_step;  // sampling: each row's stream (beam 1)
  for (const Cohort& c : cohorts) {
    for (const Row& r : c.rows) scores.push_back(r.score);
    if (options_.sampling.on)
      for (int64_t k : c.active) {
        row_sentence.push_back(c.sentences[k].index);
        row_step.push_back(c.t);
      }
  }
  const Tensor offsets = be_.upload(scores, {rows});
  // Sampling (beam 1): each row's masked log-probs, as beam_top_k computes them, then one token
  // drawn per row on the host, scored as beam_top_k would score it; the other candidates dead.
  auto sample = [&](const Tensor& rows_logits, int64_t first, int64_t count, int top, bool eos) {
    const Tensor lp = be_.empty({count, V});
    if (ensemble)
      be_.copy(rows_logits, lp);
    else
      be_.log_softmax(rows_logits, lp);
    be_.add_bias(lp, eos ? mask : mask_no_eos, lp);
    const std::vector<float> host = be_.download<float>(lp);
    const SamplingOptions& o = options_.sampling;
    // Over the whole vocabulary the probabilities at the temperature come from the backend's
    // softmax (vectorised exp); top-k weighs its k candidates on the host.
    std::vector<float> probs;
    if (o.top_k == 0) {
      // Scaled first, then a plain softmax, so that the best token's shifted logit is exactly
      // 0: the softmax's own scale rounds x / T before the shift, and at T ~ 1e-9 that error
      // alone (up to 128) underflowed every exp, the best token's too, into NaN probabilities.
      // Below 1e-20 every candidate but the best (or the tied best) has probability 0 in
      // float anyway; the floor keeps 1 / T and the scaled log-probs (at most ~1e9 x 1e20)
      // finite, where a subnormal T made them infinite and every probability NaN.
      const Tensor scaled = be_.empty({count, V}), p = be_.empty({count, V});
      be_.scale(lp, static_cast<float>(1.0 / std::max(double(o.temperature), 1e-20)), scaled);
      // Masked again: at a temperature near 1e30 the mask's -1e30 would scale to about -1.
      be_.add_bias(scaled, eos ? mask : mask_no_eos, scaled);
      be_.softmax(scaled, 1.0f, Tensor(), false, p);
      probs = be_.download<float>(p);
    }
    for (int64_t r = 0; r < count; ++r) {
      const float* row = host.data() + r * V;
      const float u = sampling_uniform(o.seed, row_sentence[first + r], row_step[first + r]);
      const int32_t token = o.top_k == 0 ? draw_token_from_probs(probs.data() + r * V, V, u)
                                         : draw_token(row, V, o.top_k, o.temperature, u);
      top_values.push_back(scores[first + r] + row[token]);
      top_ids.push_back(token);
      for (int i = 1; i < top; ++i) {
        top_values.push_back(kDead);
        top_ids.push_back(token);
      }
    }
  };
  auto best = [&](int64_t first, int64_t count, int64_t sentences, int32_t width, bool eos) {
    const int top = static_cast<int>(std::min<int64_t>(K, width * V));
    const Tensor rows_logits = logits->value.slice(first, first + count);
    if (options_.sampling.on) {
      sample(rows_logits, first, count, top, eos);
      return;
    }
    Tensor values = be_.empty({sentences, top}), ids = be_.empty({sentences, top}, DType::i32);
    if (ensemble) {
      // beam_top_k's composition without its log-softmax: mask, running scores, top-k.
      const Tensor scored = be_.empty({count, V});
      be_.add_bias(rows_logits, eos ? mask : mask_no_eos, scored);
      be_.gemm(offsets.slice(first, first + count).view({count, 1}), false,
               ones_.view({vocab_}).slice(0, V).view({1, V}), false, scored, 1.0f, 1.0f);
      be_.top_k(scored.view({sentences, width * V}), top, values, ids);
    } else if (log_probs) {
      be_.beam_top_k(rows_logits, eos ? mask : mask_no_eos, offsets.slice(first, first + count),
                     width, top, values, ids);
    } else {
      // Greedy without scores (width 1): the mask added in place, then each row's best.
      be_.add_bias(rows_logits, eos ? mask : mask_no_eos, rows_logits);
      be_.top_k(rows_logits, top, values, ids);
    }
    const std::vector<float> v = be_.download<float>(values);
    const std::vector<int32_t> i = be_.download<int32_t>(ids);
    top_values.insert(top_values.end(), v.begin(), v.end());
    top_ids.insert(top_ids.end(), i.begin(), i.end());
  };
  if (uniform) {
    int64_t sentences = 0;
    for (const Cohort& c : cohorts) sentences += static_cast<int64_t>(c.active.size());
    best(0, rows, sentences, width_of(cohorts.front()), eos_allowed(cohorts.front()));
  } else {
    int64_t first = 0;
    for (const Cohort& c : cohorts) {
      const auto R = static_cast<int64_t>(c.rows.size());
      best(first, R, static_cast<int64_t>(c.active.size()), width_of(c), eos_allowed(c));
      first += R;
    }
  }
  // A NaN would rank nothing (every comparison false) and end in empty lines scored -nan with
  // success; an infinite logit (greedy search without scores skips the log-softmax that turns
  // it into NaNs) would win every step. Masks and dead rows are finite (kDead), so a model with
  // finite weights gives either only when its activations overflow: in fp16 (65,504) sooner
  // than in bf16 or fp32.
  for (float v : top_values)
    TX_CHECK(std::isfinite(v), "the model's scores are NaN or infinite at output step ",
             cohorts.front().t + 1,
             ": its activations overflow (--precision fp16 ends at 65,504; translate with bf16 "
             "or fp32), or its weights are not a trained model's");

  // With alignments, the sentences that finish wait for one pass over all of them.
  struct Finished {
    std::vector<int32_t> source;
    int64_t index;
    NBest nbest;
  };
  std::vector<Finished> aligning;
  int64_t first = 0, candidate = 0;  // the cohort's first row and first candidate
  for (Cohort& c : cohorts) {
    const auto R = static_cast<int64_t>(c.rows.size());
    const auto A = static_cast<int64_t>(c.active.size());
    const int64_t t = c.t;
    const Tensor lp = logits->value.slice(first, first + R);
    const int32_t width = width_of(c);
    const int top = static_cast<int>(std::min<int64_t>(K, width * V));  // candidates per sentence
    const float* values = top_values.data() + candidate;
    const int32_t* ids = top_ids.data() + candidate;
    const float* row_scores = scores.data() + first;
    const int64_t row0 = first;  // the cohort's first row among all cohorts'
    first += R;
    candidate += A * top;
    // Sentences at their maximum length may only end: their candidates are each row's eos
    // entry, scored as beam_top_k scores it (R values, not a mask of R * V).
    std::vector<float> eos_scores, forced_scores;
    bool at_limit = false, forcing = false;
    const bool marian = options_.rule == SearchRule::marian;
    auto forced = [&](const Sentence& s) { return t < static_cast<int64_t>(s.prefix.size()); };
    for (int64_t k : c.active) {
      at_limit |= !marian && t >= c.sentences[k].max_length;
      forcing |= forced(c.sentences[k]);
    }
    // Without scores the logits are already masked and only eos's deadness matters.
    if ((at_limit || forcing) && log_probs && !ensemble) be_.log_softmax(lp, lp);
    // Each row's log-prob of one token (row r's token_of(r)), as beam_top_k scores it.
    auto scores_of = [&](const std::function<int32_t(int64_t)>& token_of) {
      std::vector<int32_t> index(static_cast<size_t>(R));
      for (int64_t r = 0; r < R; ++r) index[r] = static_cast<int32_t>(r * V + column(token_of(r)));
      Tensor picked = be_.empty({R, 1});
      be_.gather_rows(lp.view({R * V, 1}), be_.upload(index, {R}), picked);
      return be_.download<float>(picked);
    };
    if (at_limit) {
      eos_scores = scores_of([&](int64_t) { return eos; });
      const float eos_mask = eos_allowed(c) ? 0.0f : kDead;
      for (int64_t r = 0; r < R; ++r) eos_scores[r] = (eos_scores[r] + eos_mask) + row_scores[r];
    }
    if (forcing && log_probs) {
      // Rows of a sentence still in its prefix: its next prefix token, unmasked.
      forced_scores = scores_of([&](int64_t r) {
        const Sentence& s = c.sentences[c.active[r / width]];
        return forced(s) ? s.prefix[t] : eos;
      });
      for (int64_t r = 0; r < R; ++r) forced_scores[r] += row_scores[r];
    } else if (forcing) {
      // Greedy search without scores masked its logits in place and shows no score: a row keeps
      // its own, so that a token the mask forbids (unk, say) is forced all the same.
      forced_scores.assign(row_scores, row_scores + R);
    }

    // An ensemble's per-model log-probs of what this step may choose: every candidate
    // (slot k * top + i), each row's eos (slot A * top + r) and forced token (A * top + R + r).
    std::vector<std::vector<float>> picked;
    if (breakdown) {
      std::vector<int32_t> index;
      for (int64_t k = 0; k < A; ++k)
        for (int i = 0; i < top; ++i) {
          const int32_t id = ids[k * top + i];
          index.push_back(static_cast<int32_t>((row0 + k * width + id / V) * V + id % V));
        }
      for (int64_t r = 0; r < R; ++r)
        index.push_back(static_cast<int32_t>((row0 + r) * V + column(eos)));
      for (int64_t r = 0; r < R; ++r) {
        const Sentence& s = c.sentences[c.active[r / width]];
        index.push_back(
            static_cast<int32_t>((row0 + r) * V + column(forced(s) ? s.prefix[t] : eos)));
      }
      const Tensor where = be_.upload(index, {static_cast<int64_t>(index.size())});
      const Tensor values_m = be_.empty({static_cast<int64_t>(index.size()), 1});
      for (const Tensor& lp_m : model_lp) {
        be_.gather_rows(lp_m.view({rows * V, 1}), where, values_m);
        picked.push_back(be_.download<float>(values_m));
      }
    }
    // Row `row`'s per-model log-probs extended by what slot `slot` adds.
    auto parts_of = [&](int32_t row, int64_t slot) {
      std::vector<float> parts = c.rows[row].parts;
      parts.resize(picked.size(), 0.0f);
      for (size_t m = 0; m < picked.size(); ++m) parts[m] += picked[m][static_cast<size_t>(slot)];
      return parts;
    };
    const int64_t eos_slot = A * top, forced_slot = A * top + R;

    std::vector<Row> next_rows;
    std::vector<int64_t> next_active;
    for (int64_t k = 0; k < A; ++k) {
      Sentence& s = c.sentences[c.active[k]];
      // generate() with one beam is greedy search: the fairseq rule's.
      const bool hf = options_.rule == SearchRule::huggingface && beam > 1;
      auto finish = [&](int32_t row, float score, int64_t slot) {
        if (!hf && static_cast<int>(s.finished.size()) >= beam) return;
        const std::vector<int32_t> h = c.trail.ids(c.rows[row].last);
        if (!log_probs) score = std::numeric_limits<float>::quiet_NaN();
        s.finished.push_back({h,
                              score,
                              normalise(score, h.size() + 1, options_.length_penalty),
                              parts_of(row, slot),
                              true,
                              {}});
        if (hf && static_cast<int>(s.finished.size()) > beam) {
          // BeamHypotheses.add: the worst leaves (the earliest of equals).
          auto worst = std::min_element(
              s.finished.begin(), s.finished.end(),
              [](const Hypothesis& a, const Hypothesis& b) { return a.score < b.score; });
          s.finished.erase(worst);
        }
      };
      const bool was_done = s.done;
      std::vector<Row> live;
      const bool forced_now = !s.done && forced(s);
      // Marian's last step: a hypothesis ends with its token, without eos.
      const bool last = marian && t >= s.max_length;
      auto end_without_eos = [&](int32_t row, int32_t token, float score, int64_t slot) {
        std::vector<int32_t> h = c.trail.ids(c.rows[row].last);
        h.push_back(token);
        const float shown = log_probs ? score : std::numeric_limits<float>::quiet_NaN();
        s.finished.push_back({h,
                              shown,
                              normalise(shown, h.size(), options_.length_penalty),
                              parts_of(row, slot),
                              /*eos=*/false,
                              {}});
      };
      if (forced_now) {
        // The prefix's next token on the sentence's best live rows; nothing ends here but at
        // Marian's last step.
        std::vector<int32_t> order(static_cast<size_t>(width));
        for (int i = 0; i < width; ++i) order[i] = static_cast<int32_t>(k * width + i);
        std::stable_sort(order.begin(), order.end(),
                         [&](int32_t a, int32_t b) { return forced_scores[a] > forced_scores[b]; });
        int taken = 0;
        for (int32_t row : order) {
          if (forced_scores[row] < kDeadBelow || taken == beam) break;  // sorted
          ++taken;
          if (last)
            end_without_eos(row, s.prefix[t], forced_scores[row], forced_slot + row);
          else
            live.push_back(Row{row, s.prefix[t], forced_scores[row],
                               c.trail.extend(c.rows[row].last, s.prefix[t]),
                               parts_of(row, forced_slot + row)});
        }
      }
      if (marian && !s.done && !forced_now) {
        // Marian's rule: as many candidates as the sentence has live hypotheses.
        const int slots = beam - static_cast<int>(s.finished.size());
        if (s.empty_source && t == 0)
          s.finished.push_back({{}, 0.0f, 0.0f, std::vector<float>(picked.size(), 0.0f), true, {}});
        for (int i = 0, taken = 0; i < top && !s.empty_source && taken < slots; ++i, ++taken) {
          const float score = values[k * top + i];
          if (score < kDeadBelow) break;
          const int32_t row = static_cast<int32_t>(k * width + ids[k * top + i] / V);
          const int32_t token = token_at(ids[k * top + i] % V);
          if (token == eos) {
            finish(row, score, k * top + i);
          } else if (last) {
            end_without_eos(row, token, score, k * top + i);
          } else {
            live.push_back(Row{row, token, score, c.trail.extend(c.rows[row].last, token),
                               parts_of(row, k * top + i)});
          }
        }
        if (static_cast<int>(s.finished.size()) >= beam || live.empty() || s.empty_source)
          s.done = true;
      }
      if (!marian && !s.done && t >= s.max_length) {
        std::vector<int32_t> ending(static_cast<size_t>(width));
        for (int i = 0; i < width; ++i) ending[i] = static_cast<int32_t>(k * width + i);
        std::stable_sort(ending.begin(), ending.end(),
                         [&](int32_t a, int32_t b) { return eos_scores[a] > eos_scores[b]; });
        for (int32_t row : ending)
          if (eos_scores[row] >= kDeadBelow) finish(row, eos_scores[row], eos_slot + row);
      }
      for (int i = 0; i < top && !marian && !s.done && !forced_now && t < s.max_length &&
                      static_cast<int>(live.size()) < beam;
           ++i) {
        const float score = values[k * top + i];
        if (score < kDeadBelow) break;  // sorted: the rest are dead too
        const int32_t row = static_cast<int32_t>(k * width + ids[k * top + i] / V);
        const int32_t token = token_at(ids[k * top + i] % V);
        if (token == eos) {
          // Only an eos among the best `beam` candidates ends a hypothesis (fairseq's and
          // CTranslate2's rule); a worse one, reached while filling the live rows, is dropped,
          // or weak endings would fill the finished list and stop the search early.
          if (i < beam) finish(row, score, k * top + i);
        } else {
          live.push_back(Row{row, token, score, c.trail.extend(c.rows[row].last, token),
                             parts_of(row, k * top + i)});
        }
      }
      if (hf && !s.done && !live.empty() && static_cast<int>(s.finished.size()) >= beam &&
          t < s.max_length) {
        // BeamHypotheses.is_done: the best this step's candidates could still reach.
        float worst = s.finished.front().score;
        for (const Hypothesis& h : s.finished) worst = std::min(worst, h.score);
        const float best = normalise(values[k * top], t + 1, options_.length_penalty);
        s.done = worst >= best;
      } else if (static_cast<int>(s.finished.size()) >= beam || live.empty()) {
        s.done = true;
      }
      if (!s.done && options_.stop_when_settled && log_probs && weights_nonnegative_ &&
          settled(s, live, options_.n_best, options_.length_penalty))
        s.done = true;
      if (s.done && !was_done) {
        NBest nb = std::move(s.finished);
        std::stable_sort(nb.begin(), nb.end(), [](const Hypothesis& x, const Hypothesis& y) {
          return x.score > y.score;
        });
        if (static_cast<int>(nb.size()) > options_.n_best) nb.resize(options_.n_best);
        if (options_.alignment)
          aligning.push_back({std::move(s.source), s.index, std::move(nb)});
        else
          done(s.index, std::move(nb));
      }
      if (s.done) {
        if (options_.shrink_batch) continue;
        live.clear();
      }
      // Dead filler rows keep the block `beam` rows wide.
      while (static_cast<int>(live.size()) < beam)
        live.push_back(Row{static_cast<int32_t>(k * width), eos, kDead, -1,
                           std::vector<float>(picked.size(), 0.0f)});
      for (Row& r : live) next_rows.push_back(std::move(r));
      next_active.push_back(c.active[k]);
    }
    c.rows = std::move(next_rows);
    c.active = std::move(next_active);
    ++c.t;
  }
  if (aligning.empty()) return;
  std::vector<AlignmentRequest> requests;
  for (const Finished& f : aligning)
    for (const Hypothesis& h : f.nbest)
      if (!eos_to_eos(f.source, h)) requests.push_back({&f.source, &h.ids, h.eos});
  std::vector<SoftAlignment> soft = soft_alignments(g, model_, requests);
  size_t next = 0;
  for (Finished& f : aligning) {
    // An empty source's (Marian's rule) empty translation: its eos aligned to the source's.
    for (Hypothesis& h : f.nbest)
      h.alignment = eos_to_eos(f.source, h) ? SoftAlignment{{1.0f}} : std::move(soft[next++]);
    done(f.index, std::move(f.nbest));
  }
}

}  // namespace tx::decode
