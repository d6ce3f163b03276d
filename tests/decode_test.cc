// Beam search and the translator on a tiny random Transformer: exhaustive search, greedy
// decoding, batch invariance, n-best lists and length limits against the full teacher-forced
// forward; input order and line structure of translate_stream.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/vocab.h"
#include "data/vocab_train.h"
#include "decode/beam_search.h"
#include "decode/translator.h"
#include "gradient_check.h"
#include "nn/transformer.h"
#include "support/backends.h"
#include "support/tiny_translator.h"
#include "train_tiny.h"

namespace {

using tx::Graph;
using tx::GraphOptions;
using tx::Var;
using tx::data::SourceBatch;
using tx::data::Vocab;
using tx::decode::BeamSearch;
using tx::decode::BeamSearchOptions;
using tx::decode::Hypothesis;
using tx::decode::NBest;
using tx::nn::ParameterSet;
using tx::nn::ParamScope;
using tx::nn::Transformer;
using Ids = std::vector<int32_t>;

constexpr int32_t kEos = Vocab::kEosId;
constexpr int64_t kVocab = 9;  // pad, unk, bos, eos and 5 words (4..8)

tx::io::ModelConfig tiny_config(int64_t vocab = kVocab) {
  tx::io::ModelConfig c;
  c.src_vocab_size = c.tgt_vocab_size = vocab;
  c.d_model = 8;
  c.d_ff = 16;
  c.heads = 2;
  c.encoder_layers = c.decoder_layers = 1;
  c.dropout = 0.0f;
  return c;
}

// A random model whose output distribution is far from uniform, so that hypotheses differ.
struct TinyModel {
  explicit TinyModel(tx::Backend& be, uint64_t seed = 5, int64_t vocab = kVocab)
      : rng(seed), model(ParamScope(be, params, rng), tiny_config(vocab)) {
    tx::test::perturb_params(be, params, rng);
  }
  ParameterSet params;
  tx::Rng rng;
  Transformer model;
};

// Rows of source words (without eos) as a padded batch, row r tagged r.
SourceBatch source_batch(const std::vector<Ids>& rows) {
  std::vector<const Ids*> ptrs;
  std::vector<int64_t> indices;
  for (size_t i = 0; i < rows.size(); ++i) {
    ptrs.push_back(&rows[i]);
    indices.push_back(static_cast<int64_t>(i));
  }
  return tx::data::make_source_batch(ptrs, indices);
}

// For each target prefix, the full teacher-forced forward's log-probabilities (in double) at
// every position: out[b][t][v] = log P(v | src, [bos] + prefix[0..t)), t = 0..prefix size.
std::vector<std::vector<std::vector<double>>> forward_log_probs(tx::Backend& be,
                                                                const Transformer& model,
                                                                const Ids& src,
                                                                const std::vector<Ids>& prefixes) {
  const auto B = static_cast<int64_t>(prefixes.size());
  const int64_t S = static_cast<int64_t>(src.size()) + 1;
  int64_t T = 1;
  for (const Ids& p : prefixes) T = std::max<int64_t>(T, static_cast<int64_t>(p.size()) + 1);
  Ids src_ids, src_len(B, static_cast<int32_t>(S)), tgt_in(B * T, Vocab::kPadId);
  for (int64_t b = 0; b < B; ++b) {
    src_ids.insert(src_ids.end(), src.begin(), src.end());
    src_ids.push_back(kEos);
    tgt_in[b * T] = Vocab::kBosId;
    for (size_t t = 0; t < prefixes[b].size(); ++t) tgt_in[b * T + t + 1] = prefixes[b][t];
  }
  Graph g(be, GraphOptions{false, false});
  Var logits = model.forward(g, be.upload(src_ids, {B, S}), be.upload(src_len, {B}),
                             be.upload(tgt_in, {B, T}));
  const std::vector<float> y = be.download<float>(logits->value);
  const int64_t V = model.config().tgt_vocab_size;
  std::vector<std::vector<std::vector<double>>> out(B);
  for (int64_t b = 0; b < B; ++b)
    for (size_t t = 0; t <= prefixes[b].size(); ++t) {
      const float* row = &y[(b * T + t) * V];
      const double max = *std::max_element(row, row + V);
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - max);
      std::vector<double> lp(V);
      for (int64_t v = 0; v < V; ++v) lp[v] = row[v] - max - std::log(sum);
      out[b].push_back(std::move(lp));
    }
  return out;
}

// log P(hyp + eos | src) of each hypothesis by the full forward.
std::vector<double> rescore(tx::Backend& be, const Transformer& model, const Ids& src,
                            const std::vector<Ids>& hyps) {
  const auto lp = forward_log_probs(be, model, src, hyps);
  std::vector<double> out;
  for (size_t b = 0; b < hyps.size(); ++b) {
    double total = 0;
    for (size_t t = 0; t <= hyps[b].size(); ++t)
      total += lp[b][t][t < hyps[b].size() ? hyps[b][t] : kEos];
    out.push_back(total);
  }
  return out;
}

double normalised(double log_prob, size_t tokens, float alpha) {
  return log_prob / std::pow(static_cast<double>(tokens + 1), alpha);
}

// Every word sequence of 0..max_len tokens from `words`.
std::vector<Ids> all_sequences(const Ids& words, int max_len) {
  std::vector<Ids> out = {{}};
  std::vector<Ids> frontier = {{}};
  for (int len = 1; len <= max_len; ++len) {
    std::vector<Ids> next;
    for (const Ids& p : frontier)
      for (int32_t w : words) {
        Ids s = p;
        s.push_back(w);
        next.push_back(s);
      }
    out.insert(out.end(), next.begin(), next.end());
    frontier = std::move(next);
  }
  return out;
}

void check_same_nbest(const NBest& a, const NBest& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("hypothesis " << i);
    CHECK(a[i].ids == b[i].ids);
    CHECK(a[i].log_prob == Approx(b[i].log_prob).margin(1e-5));
    CHECK(a[i].score == Approx(b[i].score).margin(1e-5));
  }
}

const std::vector<Ids> kSources = {{4, 5, 6, 7, 8}, {6}, {8, 4, 4}, {5, 6, 7, 8, 4, 5, 6}};

}  // namespace

TEMPLATE_TEST_CASE("decode beam search: a wide beam finds every sequence and the exhaustive best",
                   "[decode]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel m(*be);
  const int max_len = 3;
  const Ids words = {4, 5, 6, 7, 8};  // unk forbidden
  const std::vector<Ids> space = all_sequences(words, max_len);
  REQUIRE(space.size() == 156);
  for (float alpha : {0.0f, 1.0f}) {
    for (const Ids& src : {kSources[0], kSources[2]}) {
      INFO("alpha " << alpha << ", source of " << src.size() << " words");
      const std::vector<double> exact = rescore(*be, m.model, src, space);
      size_t best = 0;
      for (size_t i = 0; i < space.size(); ++i)
        if (normalised(exact[i], space[i].size(), alpha) >
            normalised(exact[best], space[best].size(), alpha))
          best = i;

      BeamSearchOptions o;
      o.beam_size = o.n_best = 200;  // more than the 156 sequences
      o.max_length_a = 0;
      o.max_length_b = max_len;
      o.length_penalty = alpha;
      o.allow_unk = false;
      NBest nb = BeamSearch(*be, m.model, o).search(source_batch({src})).at(0);
      REQUIRE(nb.size() == space.size());
      CHECK(nb[0].ids == space[best]);
      CHECK(nb[0].log_prob == Approx(exact[best]).margin(1e-4));
      CHECK(nb[0].score == Approx(normalised(exact[best], space[best].size(), alpha)).margin(1e-4));
      // Every sequence once, each with its exact score.
      std::map<Ids, double> want;
      for (size_t i = 0; i < space.size(); ++i) want[space[i]] = exact[i];
      for (const Hypothesis& h : nb) {
        REQUIRE(want.count(h.ids) == 1);
        CHECK(h.log_prob == Approx(want[h.ids]).margin(1e-4));
        want.erase(h.ids);
      }
    }
  }
}

TEMPLATE_TEST_CASE("decode beam search: beam 1 is the greedy loop over the full forward",
                   "[decode]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel m(*be, 11);
  for (const int min_len : {0, 2}) {
    const bool allow_unk = min_len == 0;
    INFO("min_length " << min_len << ", allow_unk " << allow_unk);
    BeamSearchOptions o;
    o.beam_size = 1;
    o.max_length_a = 1.0f;
    o.max_length_b = 2;
    o.min_length = min_len;
    o.allow_unk = allow_unk;
    const std::vector<NBest> found = BeamSearch(*be, m.model, o).search(source_batch(kSources));
    REQUIRE(found.size() == kSources.size());
    // Without scores: the largest masked logit of each row, the same picks, NaN scores.
    o.scores = false;
    const std::vector<NBest> unscored = BeamSearch(*be, m.model, o).search(source_batch(kSources));
    REQUIRE(unscored.size() == kSources.size());
    for (size_t s = 0; s < kSources.size(); ++s) {
      INFO("sentence " << s);
      const size_t max_len = kSources[s].size() + 2;
      Ids y;
      double log_prob = 0;
      for (;;) {
        // The distribution after y is the last position of the full forward of [bos] + y.
        const std::vector<double> lp = forward_log_probs(*be, m.model, kSources[s], {y})[0].back();
        int32_t best = -1;
        for (int32_t w = 0; w < kVocab; ++w) {
          if (w == Vocab::kPadId || w == Vocab::kBosId) continue;
          if (!allow_unk && w == Vocab::kUnkId) continue;
          if (y.size() == max_len && w != kEos) continue;
          if (static_cast<int>(y.size()) < min_len && w == kEos) continue;
          if (best < 0 || lp[w] > lp[best]) best = w;
        }
        log_prob += lp[best];
        if (best == kEos) break;
        y.push_back(best);
      }
      REQUIRE(found[s].size() == 1);
      CHECK(found[s][0].ids == y);
      CHECK(found[s][0].log_prob == Approx(log_prob).margin(1e-4));
      CHECK(found[s][0].score == Approx(normalised(log_prob, y.size(), 1.0f)).margin(1e-4));
      REQUIRE(unscored[s].size() == 1);
      CHECK(unscored[s][0].ids == y);
      CHECK(std::isnan(unscored[s][0].log_prob));
      CHECK(std::isnan(unscored[s][0].score));
    }
  }
}

TEMPLATE_TEST_CASE("decode beam search: a padded batch gives the results of one sentence at a time",
                   "[decode]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel m(*be, 23);
  BeamSearchOptions o;
  o.beam_size = 4;
  o.n_best = 4;
  o.max_length_a = 1.0f;
  o.max_length_b = 3;
  BeamSearch search(*be, m.model, o);
  const std::vector<NBest> together = search.search(source_batch(kSources));
  REQUIRE(together.size() == kSources.size());
  for (size_t s = 0; s < kSources.size(); ++s) {
    INFO("sentence " << s);
    check_same_nbest(together[s], search.search(source_batch({kSources[s]})).at(0));
  }

  SECTION("done sentences leaving the batch change nothing") {
    o.shrink_batch = false;
    const std::vector<NBest> kept = BeamSearch(*be, m.model, o).search(source_batch(kSources));
    for (size_t s = 0; s < kSources.size(); ++s) {
      INFO("sentence " << s);
      check_same_nbest(together[s], kept[s]);
    }
  }
}

TEMPLATE_TEST_CASE(
    "decode beam search: a sentence stops once no live hypothesis can enter its n-best list, "
    "with the n-best lists of searching on",
    "[decode]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel b(*be, 37);
  using tx::decode::SearchRule;
  int64_t fewer = 0;                // searches in which stopping early saved decoder steps
  for (uint64_t seed : {31, 61}) {  // 61: a sentence whose 2nd and 3rd best come late
    TinyModel a(*be, seed);
    for (SearchRule rule : {SearchRule::fairseq, SearchRule::marian, SearchRule::huggingface})
      for (float alpha : {0.0f, 0.6f, 1.0f})
        for (int n_best : {1, 2, 3})
          for (bool ensemble : {false, true}) {
            INFO("seed " << seed << ", rule " << static_cast<int>(rule) << ", alpha " << alpha
                         << ", n_best " << n_best << ", ensemble " << ensemble);
            BeamSearchOptions o;
            o.beam_size = 4;
            o.n_best = n_best;
            o.length_penalty = alpha;
            o.max_length_b = 6;
            o.rule = rule;
            const std::vector<const Transformer*> models =
                ensemble ? std::vector<const Transformer*>{&a.model, &b.model}
                         : std::vector<const Transformer*>{&a.model};
            const std::vector<float> weights =
                ensemble ? std::vector<float>{0.3f, 0.9f} : std::vector<float>{};
            auto run = [&](bool settle, int64_t& gemms) {
              o.stop_when_settled = settle;
              be->set_profiling(true);
              be->take_gemm_tally();
              std::vector<NBest> found =
                  BeamSearch(*be, models, o, weights).search(source_batch(kSources));
              gemms = be->take_gemm_tally().calls;
              be->set_profiling(false);
              return found;
            };
            int64_t settled_gemms = 0, full_gemms = 0;
            const std::vector<NBest> settled = run(true, settled_gemms);
            const std::vector<NBest> full = run(false, full_gemms);
            REQUIRE(settled.size() == full.size());
            for (size_t s = 0; s < full.size(); ++s) {
              INFO("sentence " << s);
              check_same_nbest(settled[s], full[s]);
            }
            CHECK(settled_gemms <= full_gemms);
            fewer += settled_gemms < full_gemms;
          }
  }
  // Ranking by the plain log-prob, the common case (Marian's default) stops early for real.
  CHECK(fewer >= 6);
}

TEMPLATE_TEST_CASE(
    "decode beam search: continuous batching (sentences joining as others finish) gives the "
    "results of one sentence at a time",
    "[decode]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel m(*be, 29);
  // Twelve sentences of mixed lengths; at most three decoded together, so later ones join
  // cohorts still decoding (each its own step, cache and memory width).
  std::vector<Ids> sources;
  for (int i = 0; i < 3; ++i)
    for (const Ids& s : kSources) sources.push_back(s);
  std::rotate(sources.begin(), sources.begin() + 5, sources.end());
  for (int beam : {1, 3}) {
    for (int min_length : {0, 2}) {
      INFO("beam " << beam << ", min_length " << min_length);
      BeamSearchOptions o;
      o.beam_size = beam;
      o.n_best = beam;
      o.min_length = min_length;
      o.max_length_b = 6;
      BeamSearch search(*be, m.model, o);
      size_t handed = 0, finished = 0, most_in_flight = 0;
      std::map<int64_t, NBest> results;
      auto next = [&](tx::decode::SourceSentence& s) {
        if (handed == sources.size()) return false;
        // Asked only when the batch has room: never more than three outstanding.
        CHECK(handed - finished < 3);
        s.index = 100 + static_cast<int64_t>(handed);
        s.ids = sources[handed];
        s.ids.push_back(kEos);
        ++handed;
        most_in_flight = std::max(most_in_flight, handed - finished);
        return true;
      };
      auto done = [&](int64_t index, NBest nbest) {
        ++finished;
        CHECK(results.emplace(index, std::move(nbest)).second);  // each sentence once
      };
      search.search_stream(next, done, tx::decode::SearchLimits{3, 0});
      CHECK(most_in_flight == 3);
      REQUIRE(results.size() == sources.size());
      for (size_t i = 0; i < sources.size(); ++i) {
        INFO("sentence " << i);
        REQUIRE(results.count(100 + static_cast<int64_t>(i)) == 1);
        check_same_nbest(results[100 + static_cast<int64_t>(i)],
                         search.search(source_batch({sources[i]})).at(0));
      }
    }
  }
}

TEMPLATE_TEST_CASE(
    "decode beam search: n-best lists are sorted, distinct and scored like the forward", "[decode]",
    TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel m(*be, 31);
  for (float alpha : {0.0f, 0.6f, 1.0f}) {
    INFO("alpha " << alpha);
    BeamSearchOptions o;
    o.beam_size = 6;
    o.n_best = 5;
    o.length_penalty = alpha;
    const std::vector<NBest> found = BeamSearch(*be, m.model, o).search(source_batch(kSources));
    for (size_t s = 0; s < kSources.size(); ++s) {
      INFO("sentence " << s);
      const NBest& nb = found[s];
      REQUIRE(nb.size() == 5);
      std::set<Ids> distinct;
      std::vector<Ids> hyps;
      for (size_t i = 0; i < nb.size(); ++i) {
        if (i > 0) CHECK(nb[i - 1].score >= nb[i].score);
        CHECK(distinct.insert(nb[i].ids).second);
        CHECK(std::find(nb[i].ids.begin(), nb[i].ids.end(), kEos) == nb[i].ids.end());
        CHECK(nb[i].score ==
              Approx(normalised(nb[i].log_prob, nb[i].ids.size(), alpha)).margin(1e-5));
        hyps.push_back(nb[i].ids);
      }
      const std::vector<double> exact = rescore(*be, m.model, kSources[s], hyps);
      for (size_t i = 0; i < nb.size(); ++i) CHECK(nb[i].log_prob == Approx(exact[i]).margin(1e-4));
    }
  }
}

TEMPLATE_TEST_CASE(
    "decode beam search: maximum and minimum output lengths hold, unk can be forbidden", "[decode]",
    TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel m(*be, 41);
  BeamSearchOptions o;
  o.beam_size = 3;
  o.n_best = 3;
  o.max_length_a = 0.5f;
  o.max_length_b = 1;
  o.allow_unk = false;
  BeamSearch search(*be, m.model, o);
  const std::vector<NBest> found = search.search(source_batch(kSources));
  for (size_t s = 0; s < kSources.size(); ++s) {
    INFO("sentence " << s);
    const auto limit = static_cast<size_t>(std::floor(0.5 * double(kSources[s].size())) + 1);
    CHECK(search.max_output_length(static_cast<int64_t>(kSources[s].size())) == int64_t(limit));
    for (const Hypothesis& h : found[s]) {
      CHECK(h.ids.size() <= limit);
      CHECK(std::count(h.ids.begin(), h.ids.end(), Vocab::kUnkId) == 0);
    }
  }

  // min_length == max length: every hypothesis has exactly that many tokens.
  o.max_length_a = 0;
  o.max_length_b = 4;
  o.min_length = 4;
  for (const NBest& nb : BeamSearch(*be, m.model, o).search(source_batch(kSources))) {
    CHECK(nb.size() == 3);
    for (const Hypothesis& h : nb) CHECK(h.ids.size() == 4);
  }
  // A minimum above the limit raises it, under each rule: every hypothesis reaches it.
  for (const tx::decode::SearchRule rule :
       {tx::decode::SearchRule::fairseq, tx::decode::SearchRule::marian,
        tx::decode::SearchRule::huggingface}) {
    INFO("rule " << int(rule));
    BeamSearchOptions r = o;
    r.rule = rule;
    r.max_length_a = 0.5f;
    r.max_length_b = 0;
    r.min_length = 6;
    BeamSearch raised(*be, m.model, r);
    CHECK(raised.max_output_length(3) >= 6);
    for (const NBest& nb : raised.search(source_batch(kSources))) {
      REQUIRE_FALSE(nb.empty());
      for (const Hypothesis& h : nb) CHECK(h.ids.size() >= 6);
    }
  }

  // The model's positional range caps the length.
  CHECK(search.max_output_length(100000) == m.model.config().max_length - 1);
}

namespace {

// Each sentence of `sources` (words, without eos) searched as sentence `i` of a stream with
// `limits`; the n-best lists by index.
std::map<int64_t, NBest> search_all(BeamSearch& search, const std::vector<Ids>& sources,
                                    tx::decode::SearchLimits limits,
                                    const std::vector<Ids>& prefixes = {}) {
  size_t handed = 0;
  std::map<int64_t, NBest> results;
  search.search_stream(
      [&](tx::decode::SourceSentence& s) {
        if (handed == sources.size()) return false;
        s.index = static_cast<int64_t>(handed);
        s.prefix = prefixes.empty() ? Ids{} : prefixes[handed];
        s.ids = sources[handed++];
        s.ids.push_back(kEos);
        return true;
      },
      [&](int64_t index, NBest nbest) { results.emplace(index, std::move(nbest)); }, limits);
  return results;
}

}  // namespace

TEST_CASE("decode sampling: draw_token inverts the cumulative distribution, top-k and masks",
          "[decode][sampling]") {
  using tx::decode::draw_token;
  // p = 0.1, 0.2, 0.3, 0.4 and a masked token (as beam search's mask leaves it).
  const float lp[5] = {std::log(0.1f), std::log(0.2f), -1e30f, std::log(0.3f), std::log(0.4f)};
  CHECK(draw_token(lp, 5, 0, 1.0f, 0.0f) == 0);
  CHECK(draw_token(lp, 5, 0, 1.0f, 0.099f) == 0);
  CHECK(draw_token(lp, 5, 0, 1.0f, 0.101f) == 1);
  CHECK(draw_token(lp, 5, 0, 1.0f, 0.35f) == 3);
  CHECK(draw_token(lp, 5, 0, 1.0f, 0.61f) == 4);
  CHECK(draw_token(lp, 5, 0, 1.0f, 0.99999f) == 4);
  // Top 2 in rank order (4, then 3), renormalised: 4/7 and 3/7.
  CHECK(draw_token(lp, 5, 2, 1.0f, 0.56f) == 4);
  CHECK(draw_token(lp, 5, 2, 1.0f, 0.58f) == 3);
  CHECK(draw_token(lp, 5, 1, 1.0f, 0.99f) == 4);
  // Temperature 0.5: p^2 = .01, .04, .09, .16 over 0.3: cumulative .033, .167, .467, 1.
  CHECK(draw_token(lp, 5, 0, 0.5f, 0.03f) == 0);
  CHECK(draw_token(lp, 5, 0, 0.5f, 0.1f) == 1);
  CHECK(draw_token(lp, 5, 0, 0.5f, 0.4f) == 3);
  CHECK(draw_token(lp, 5, 0, 0.5f, 0.5f) == 4);
  // From probabilities at the temperature: the same inverse (0.1, 0.2, 0, 0.3, 0.4).
  const float p[5] = {0.1f, 0.2f, 0.0f, 0.3f, 0.4f};
  CHECK(tx::decode::draw_token_from_probs(p, 5, 0.0f) == 0);
  CHECK(tx::decode::draw_token_from_probs(p, 5, 0.101f) == 1);
  CHECK(tx::decode::draw_token_from_probs(p, 5, 0.35f) == 3);
  CHECK(tx::decode::draw_token_from_probs(p, 5, 0.99999f) == 4);
  // Every sentence and step its own number; the same ones again for the same seed.
  const float u = tx::decode::sampling_uniform(7, 3, 0);
  CHECK(u == tx::decode::sampling_uniform(7, 3, 0));
  CHECK(u != tx::decode::sampling_uniform(7, 4, 0));
  CHECK(u != tx::decode::sampling_uniform(7, 3, 1));
  CHECK(u != tx::decode::sampling_uniform(8, 3, 0));
}

TEMPLATE_TEST_CASE("decode sampling: topk 1 is greedy search, tokens and scores",
                   "[decode][sampling]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel m(*be, 11);
  BeamSearchOptions greedy;
  greedy.beam_size = 1;
  greedy.max_length_b = 4;
  BeamSearchOptions sampled = greedy;
  sampled.sampling.on = true;
  sampled.sampling.top_k = 1;
  sampled.sampling.temperature = 0.7f;  // no effect on one candidate
  const std::vector<NBest> want = BeamSearch(*be, m.model, greedy).search(source_batch(kSources));
  const std::vector<NBest> got = BeamSearch(*be, m.model, sampled).search(source_batch(kSources));
  REQUIRE(got.size() == want.size());
  for (size_t s = 0; s < want.size(); ++s) {
    INFO("sentence " << s);
    CHECK(got[s][0].ids == want[s][0].ids);
    CHECK(got[s][0].log_prob == want[s][0].log_prob);
    CHECK(got[s][0].score == want[s][0].score);
  }
}

TEMPLATE_TEST_CASE(
    "decode sampling: the first token over 20,000 draws follows the model's "
    "softmax at the temperature (chi-square)",
    "[decode][sampling][draws]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel m(*be, 5);
  const Ids src = {4, 5, 6};
  const std::vector<double> lp = forward_log_probs(*be, m.model, src, {{}})[0][0];
  // The first token's distribution at temperature T over what beam search allows (not pad,
  // not bos): p^(1/T), renormalised.
  auto expected = [&](double T) {
    std::vector<double> p(kVocab, 0.0);
    double total = 0;
    for (int32_t v = 0; v < kVocab; ++v)
      if (v != Vocab::kPadId && v != Vocab::kBosId) total += p[v] = std::exp(lp[v] / T);
    for (double& x : p) x /= total;
    return p;
  };
  // Chi-square over the allowed tokens: 7 bins, 6 degrees of freedom; 22.46 is the 0.1% tail.
  auto chi_square = [&](const std::vector<int>& counts, const std::vector<double>& p, int n) {
    double x2 = 0;
    for (int32_t v = 0; v < kVocab; ++v)
      if (p[v] > 0) x2 += std::pow(counts[v] - n * p[v], 2) / (n * p[v]);
    return x2;
  };
  const int n = 20000;
  const std::vector<Ids> sources(n, src);
  for (const double T : {1.0, 0.5}) {
    BeamSearchOptions o;
    o.beam_size = 1;
    o.max_length_a = 0.0f;
    o.max_length_b = 1;  // the first token, then eos
    o.sampling.on = true;
    o.sampling.temperature = static_cast<float>(T);
    o.sampling.seed = 3;
    BeamSearch search(*be, m.model, o);
    const std::map<int64_t, NBest> found = search_all(search, sources, {2048, 0});
    REQUIRE(found.size() == size_t(n));
    std::vector<int> counts(kVocab, 0);
    for (const auto& [index, nbest] : found)
      ++counts[nbest.at(0).ids.empty() ? kEos : nbest.at(0).ids[0]];
    INFO("temperature " << T);
    CHECK(counts[Vocab::kPadId] == 0);
    CHECK(counts[Vocab::kBosId] == 0);
    CHECK(chi_square(counts, expected(T), n) < 22.46);
    // The test can fail: the samples at 0.5 are far from the distribution at 1.
    if (T == 0.5) CHECK(chi_square(counts, expected(1.0), n) > 22.46);
  }
}

TEMPLATE_TEST_CASE("decode sampling: a sentence's sample depends on the seed, not on the batch",
                   "[decode][sampling]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel m(*be, 5);
  std::vector<Ids> sources;
  for (int i = 0; i < 60; ++i) sources.push_back(kSources[i % kSources.size()]);
  BeamSearchOptions o;
  o.beam_size = 1;
  o.sampling.on = true;
  o.sampling.seed = 9;
  BeamSearch search(*be, m.model, o);
  const std::map<int64_t, NBest> alone = search_all(search, sources, {1, 0});
  REQUIRE(alone.size() == sources.size());
  for (const tx::decode::SearchLimits limits :
       {tx::decode::SearchLimits{7, 0}, tx::decode::SearchLimits{64, 0},
        tx::decode::SearchLimits{0, 40}}) {
    const std::map<int64_t, NBest> batched = search_all(search, sources, limits);
    for (const auto& [index, nbest] : alone) {
      INFO("limits " << limits.max_sentences << "/" << limits.max_tokens << ", sentence " << index);
      CHECK(batched.at(index).at(0).ids == nbest.at(0).ids);
    }
  }
  // The same source, sentence after sentence: samples differ between sentences.
  std::set<Ids> distinct;
  for (size_t i = 0; i < sources.size(); i += kSources.size())
    distinct.insert(alone.at(i).at(0).ids);
  CHECK(distinct.size() > 1);
  o.sampling.seed = 10;
  BeamSearch other(*be, m.model, o);
  const std::map<int64_t, NBest> reseeded = search_all(other, sources, {64, 0});
  int differ = 0;
  for (const auto& [index, nbest] : alone)
    differ += reseeded.at(index).at(0).ids != nbest.at(0).ids;
  CHECK(differ > 0);
}

TEMPLATE_TEST_CASE(
    "decode prefix: outputs start with their prefix and score it - the best "
    "translation as prefix gives the unconstrained output and score",
    "[decode][prefix]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel m(*be, 11);
  for (const int beam : {1, 5}) {
    INFO("beam " << beam);
    BeamSearchOptions o;
    o.beam_size = beam;
    o.max_length_b = 4;
    BeamSearch search(*be, m.model, o);
    const std::map<int64_t, NBest> free = search_all(search, kSources, {8, 0});
    std::vector<Ids> best, forced;
    for (const auto& [index, nbest] : free) {
      best.push_back(nbest.at(0).ids);
      forced.push_back({8, 4, 8});  // unlike anything the model prefers
    }
    const std::map<int64_t, NBest> same = search_all(search, kSources, {8, 0}, best);
    const std::map<int64_t, NBest> pushed = search_all(search, kSources, {8, 0}, forced);
    for (size_t s = 0; s < kSources.size(); ++s) {
      INFO("sentence " << s);
      const Hypothesis& want = free.at(s).at(0);
      CHECK(same.at(s).at(0).ids == want.ids);
      CHECK(same.at(s).at(0).log_prob == Approx(want.log_prob).margin(1e-6));
      CHECK(same.at(s).at(0).score == Approx(want.score).margin(1e-6));
      const Hypothesis& got = pushed.at(s).at(0);
      REQUIRE(got.ids.size() >= 3);
      CHECK(Ids(got.ids.begin(), got.ids.begin() + 3) == forced[s]);
      // The score counts the prefix's tokens: the full forward's log-prob of the whole output.
      CHECK(got.log_prob == Approx(rescore(*be, m.model, kSources[s], {got.ids})[0]).margin(1e-4));
      CHECK(got.log_prob < want.log_prob);
    }
  }
}

TEMPLATE_TEST_CASE(
    "decode prefix: a prefix longer than the length limit is the whole output, under each rule",
    "[decode][prefix]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel m(*be, 11);
  const Ids prefix = {8, 4, 8, 5, 6, 7, 8, 4, 5, 6, 4};  // 11 tokens; the limits allow 1-3
  using tx::decode::SearchRule;
  for (const SearchRule rule : {SearchRule::fairseq, SearchRule::huggingface, SearchRule::marian}) {
    for (const int beam : {1, 4}) {
      INFO("rule " << int(rule) << ", beam " << beam);
      BeamSearchOptions o;
      o.rule = rule;
      o.beam_size = beam;
      o.max_length_a = rule == SearchRule::marian ? 0.5f : 0.0f;  // marian: 0.5 x (words + eos)
      o.max_length_b = 2;
      BeamSearch search(*be, m.model, o);
      const std::map<int64_t, NBest> got =
          search_all(search, kSources, {8, 0}, std::vector<Ids>(kSources.size(), prefix));
      for (size_t s = 0; s < kSources.size(); ++s) {
        INFO("sentence " << s);
        CHECK(got.at(s).at(0).ids == prefix);
      }
    }
  }
}

TEMPLATE_TEST_CASE("decode ensemble: a model with itself searches as the model alone",
                   "[decode][ensemble]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel m(*be, 11);
  for (const int beam : {1, 5}) {
    INFO("beam " << beam);
    BeamSearchOptions o;
    o.beam_size = beam;
    o.n_best = beam;
    o.max_length_b = 4;
    const std::vector<NBest> alone = BeamSearch(*be, m.model, o).search(source_batch(kSources));
    const std::vector<NBest> twice =
        BeamSearch(*be, {&m.model, &m.model}, o).search(source_batch(kSources));
    REQUIRE(twice.size() == alone.size());
    for (size_t s = 0; s < alone.size(); ++s) {
      INFO("sentence " << s);
      REQUIRE(twice[s].size() == alone[s].size());
      for (size_t i = 0; i < alone[s].size(); ++i) {
        CHECK(twice[s][i].ids == alone[s][i].ids);
        CHECK(twice[s][i].log_prob == alone[s][i].log_prob);  // 0.5 lp + 0.5 lp is lp exactly
        CHECK(twice[s][i].score == alone[s][i].score);
      }
    }
  }
}

TEMPLATE_TEST_CASE(
    "decode ensemble: greedy search over two models follows the weighted sum of "
    "their log-probs",
    "[decode][ensemble]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel a(*be, 11), b(*be, 23);
  const float wa = 0.3f, wb = 0.9f;  // Marian's rule: not renormalised
  BeamSearchOptions o;
  o.beam_size = 1;
  o.max_length_b = 3;
  const std::vector<NBest> found =
      BeamSearch(*be, {&a.model, &b.model}, o, {wa, wb}).search(source_batch(kSources));
  for (size_t s = 0; s < kSources.size(); ++s) {
    INFO("sentence " << s);
    const size_t max_len = static_cast<size_t>(1.5 * kSources[s].size()) + 3;
    Ids y;
    double log_prob = 0;
    for (;;) {
      const std::vector<double> la = forward_log_probs(*be, a.model, kSources[s], {y})[0].back();
      const std::vector<double> lb = forward_log_probs(*be, b.model, kSources[s], {y})[0].back();
      int32_t best = -1;
      double best_lp = 0;
      for (int32_t w = 0; w < kVocab; ++w) {
        if (w == Vocab::kPadId || w == Vocab::kBosId) continue;
        if (y.size() == max_len && w != kEos) continue;
        const double lp = wa * la[w] + wb * lb[w];
        if (best < 0 || lp > best_lp) best = w, best_lp = lp;
      }
      log_prob += best_lp;
      if (best == kEos) break;
      y.push_back(best);
    }
    CHECK(found[s].at(0).ids == y);
    CHECK(found[s].at(0).log_prob == Approx(log_prob).margin(1e-4));
  }
  // Models that do not share the vocabulary: one line naming both.
  TinyModel c(*be, 5, kVocab + 2);
  REQUIRE_THROWS_WITH(BeamSearch(*be, {&a.model, &c.model}, o),
                      Catch::Contains("model 2") && Catch::Contains("share their vocabularies"));
  REQUIRE_THROWS_WITH(BeamSearch(*be, {&a.model, &b.model}, o, {1.0f}),
                      Catch::Contains("--weights") && Catch::Contains("one per model"));
}

TEMPLATE_TEST_CASE("decode beam search: invalid options name the flag", "[decode]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel m(*be);
  BeamSearchOptions o;
  o.beam_size = 2;
  o.n_best = 3;
  CHECK_THROWS_WITH(BeamSearch(*be, m.model, o), Catch::Contains("--n-best"));
  o.n_best = 1;
  o.beam_size = 0;
  CHECK_THROWS_WITH(BeamSearch(*be, m.model, o), Catch::Contains("--beam-size"));
}

namespace {

using tx::test::TinyTranslator;

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("decode translator: one output per input line in input order, n-best indices",
          "[decode]") {
  TinyTranslator t;
  const std::vector<std::string> input = {"das Haus ist klein",
                                          "",
                                          "der Hund",
                                          "ein grün Baum ist alt und das Haus läuft schnell",
                                          "alt",
                                          "",
                                          "das",
                                          "der Hund läuft schnell",
                                          "grün"};
  std::string text;
  for (const std::string& l : input) text += l + "\n";
  tx::decode::TranslatorOptions o;
  o.search.beam_size = 3;
  o.batching.max_tokens = 12;
  o.batching.maxi_batch = 1;

  SECTION("1-best: one line each, empty lines stay empty, as translate_lines") {
    tx::decode::Translator tr(*t.be, t.model->model, *t.vocab, *t.vocab, o);
    std::istringstream in(text);
    std::ostringstream out;
    CHECK(tr.translate_stream(in, out) == int64_t(input.size()));
    const std::vector<std::string> lines = split_lines(out.str());
    REQUIRE(lines.size() == input.size());
    CHECK(lines[1].empty());
    CHECK(lines[5].empty());
    CHECK(tr.translate_lines(input) == lines);
  }
  SECTION("n-best: every index in order, n entries per non-empty line") {
    o.search.n_best = 3;
    tx::decode::Translator tr(*t.be, t.model->model, *t.vocab, *t.vocab, o);
    std::istringstream in(text);
    std::ostringstream out;
    tr.translate_stream(in, out);
    std::vector<int64_t> indices;
    for (const std::string& line : split_lines(out.str())) {
      const size_t bar = line.find(" ||| ");
      REQUIRE(bar != std::string::npos);
      REQUIRE(line.find(" ||| F0= ") != std::string::npos);
      indices.push_back(std::stoll(line.substr(0, bar)));
    }
    std::vector<int64_t> want;
    for (int64_t i = 0; i < int64_t(input.size()); ++i)
      want.insert(want.end(), input[i].empty() ? 1 : 3, i);
    CHECK(indices == want);
    CHECK(split_lines(out.str())[3] == "1 |||  ||| F0= 0 ||| 0");
  }
}

TEST_CASE(
    "decode translator: --force-decode reads a tab and a prefix that each translation "
    "starts with",
    "[decode][prefix]") {
  TinyTranslator t;
  const std::vector<std::string> sources = {"das Haus ist klein", "der Hund", "alt",
                                            "der Hund läuft schnell"};
  const std::vector<std::string> prefixes = {"Baum ist", "", "grün grün", "das"};
  std::string text;
  for (size_t i = 0; i < sources.size(); ++i)
    text += sources[i] + (prefixes[i].empty() ? "" : "\t" + prefixes[i]) + "\n";
  tx::decode::TranslatorOptions o;
  o.search.beam_size = 3;
  o.batching.max_tokens = 12;
  o.force_decode = true;
  tx::decode::Translator tr(*t.be, t.model->model, *t.vocab, *t.vocab, o);
  std::istringstream in(text);
  std::ostringstream out;
  CHECK(tr.translate_stream(in, out) == int64_t(sources.size()));
  const std::vector<std::string> lines = split_lines(out.str());
  REQUIRE(lines.size() == sources.size());
  // Without a prefix, the line's own translation; with one, an output that starts with it.
  o.force_decode = false;
  tx::decode::Translator plain(*t.be, t.model->model, *t.vocab, *t.vocab, o);
  CHECK(lines[1] == plain.translate_lines({sources[1]})[0]);
  for (size_t i = 0; i < sources.size(); ++i) {
    INFO("line " << i << ": " << lines[i]);
    CHECK(lines[i].rfind(prefixes[i], 0) == 0);
  }
  // Without --force-decode the tab is text: the source would not be the same.
  CHECK(plain.translate_lines({sources[0] + "\t" + prefixes[0]})[0].rfind("Baum ist", 0) != 0);
}

TEMPLATE_TEST_CASE("decode shortlist: the whole vocabulary as shortlist is the full search",
                   "[decode][shortlist]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel m(*be, 13);
  BeamSearchOptions o;
  o.beam_size = o.n_best = 3;
  const std::vector<NBest> full = BeamSearch(*be, m.model, o).search(source_batch(kSources));
  Ids every(kVocab);
  std::iota(every.begin(), every.end(), 0);
  const tx::decode::LexicalShortlist all(every, {});
  o.shortlist = &all;
  const std::vector<NBest> listed = BeamSearch(*be, m.model, o).search(source_batch(kSources));
  REQUIRE(listed.size() == full.size());
  for (size_t s = 0; s < full.size(); ++s) {
    INFO("sentence " << s);
    check_same_nbest(listed[s], full[s]);
  }
}

TEMPLATE_TEST_CASE(
    "decode shortlist: greedy search is the greedy loop over the shortlist's softmax",
    "[decode][shortlist]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TinyModel m(*be, 11);
  // eos always (and not unk, which this model favours); source word w may become w alone: 5, 6
  // and 7 never appear unless a source holds them.
  std::vector<Ids> translations(kVocab);
  for (int32_t w = 4; w < kVocab; ++w) translations[w] = Ids{w};
  const tx::decode::LexicalShortlist list({kEos}, translations);
  const std::vector<Ids> sources = {{4, 4, 8}, {8}, {4, 8, 8, 4}};
  Ids allowed = {kEos, 4, 8};  // the union of the batch's shortlists
  BeamSearchOptions o;
  o.beam_size = 1;
  o.max_length_a = 1.0f;
  o.max_length_b = 2;
  o.shortlist = &list;
  const std::vector<NBest> found = BeamSearch(*be, m.model, o).search(source_batch(sources));
  REQUIRE(found.size() == sources.size());
  bool restricted = false;  // some step's best full-vocabulary token was left out
  for (size_t s = 0; s < sources.size(); ++s) {
    INFO("sentence " << s);
    const size_t max_len = sources[s].size() + 2;
    Ids y;
    double log_prob = 0;
    for (;;) {
      const std::vector<double> lp = forward_log_probs(*be, m.model, sources[s], {y})[0].back();
      // The search's log-softmax runs over the shortlist's columns only.
      double sum = 0;
      for (int32_t w : allowed) sum += std::exp(lp[w]);
      int32_t best = -1;
      for (int32_t w : allowed) {
        if (y.size() == max_len && w != kEos) continue;
        if (best < 0 || lp[w] > lp[best]) best = w;
      }
      int32_t best_full = kEos;  // what the full vocabulary's search would pick here
      for (int32_t w = 0; w < kVocab; ++w)
        if (w != Vocab::kPadId && w != Vocab::kBosId && lp[w] > lp[best_full]) best_full = w;
      restricted |= y.size() < max_len && best_full != best;
      log_prob += lp[best] - std::log(sum);
      if (best == kEos) break;
      y.push_back(best);
    }
    REQUIRE(found[s].size() == 1);
    CHECK(found[s][0].ids == y);
    CHECK(found[s][0].log_prob == Approx(log_prob).margin(1e-4));
  }
  CHECK(restricted);  // else the shortlist changed nothing this test could see
}
