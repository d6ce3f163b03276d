// Word alignments (decode/alignment.h): Marian's text rules on hand-made matrices, and a tx
// model's default alignment (its last decoder layer's cross-attention averaged over heads)
// against a host computation of that attention from the model's parameters in plain loops.
#include "decode/alignment.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "data/vocab.h"
#include "decode/beam_search.h"
#include "gradient_check.h"
#include "nn/transformer.h"
#include "support/backends.h"
#include "support/random_model.h"
#include "support/reference.h"

namespace {

using tx::Graph;
using tx::GraphOptions;
using tx::data::Vocab;
using tx::decode::AlignmentKind;
using tx::decode::AlignmentOptions;
using tx::decode::AlignmentRequest;
using tx::decode::format_alignment;
using tx::decode::parse_alignment;
using tx::decode::SoftAlignment;
using tx::decode::WordMap;
using Ids = std::vector<int32_t>;
using Matrix = std::vector<std::vector<double>>;

TEST_CASE("alignment option values as Marian reads them", "[alignment]") {
  CHECK(parse_alignment({}).kind == AlignmentKind::hard);
  CHECK(parse_alignment({"hard"}).kind == AlignmentKind::hard);
  CHECK(parse_alignment({"soft"}).kind == AlignmentKind::soft);
  CHECK(parse_alignment({"1"}).kind == AlignmentKind::hard);
  CHECK(parse_alignment({"0.99999999999"}).kind == AlignmentKind::hard);  // 1 as a float
  const AlignmentOptions t = parse_alignment({"0.25"});
  CHECK(t.kind == AlignmentKind::threshold);
  CHECK(t.threshold == 0.25f);
  for (const char* bad :
       {"0", "-0.5", "1.5", "hardest", "0.5x", "", " 0.5", "nan", "inf", "1e-999"})
    CHECK_THROWS_WITH(parse_alignment({bad}), Catch::Contains("--alignment"));
  // A threshold below float's range is a threshold (every pair above probability 0).
  const AlignmentOptions tiny = parse_alignment({"1e-50"});
  CHECK(tiny.kind == AlignmentKind::threshold);
  CHECK(tiny.threshold == 0.0f);
  CHECK_THROWS_WITH(parse_alignment({"1e-999"}), Catch::Contains("in (0, 1]"));
  CHECK_THROWS_WITH(parse_alignment({"hard", "soft"}), Catch::Contains("one value"));
}

TEST_CASE("Marian's alignment text: hard, threshold, soft, words", "[alignment]") {
  // Rows: target tokens (eos last); columns: source tokens (eos last).
  const SoftAlignment a = {{0.1f, 0.6f, 0.3f},    // t0: s1
                           {0.4f, 0.4f, 0.2f},    // t1: a tie, the first (s0) wins
                           {0.05f, 0.15f, 0.8f},  // t2 (eos): s2
                           {0.7f, 0.2f, 0.1f}};   // t3: s0
  AlignmentOptions o;
  o.kind = AlignmentKind::hard;
  // Sorted by source, then target.
  CHECK(format_alignment(a, o) == "0-1 0-3 1-0 2-2");
  o.kind = AlignmentKind::threshold;
  o.threshold = 0.4f;  // strictly above: the 0.4s of t1 are out
  CHECK(format_alignment(a, o) == "0-3 1-0 2-2");
  o.threshold = 0.3f;
  CHECK(format_alignment(a, o) == "0-1 0-3 1-0 1-1 2-2");
  o.kind = AlignmentKind::soft;
  const SoftAlignment s = {{0.5f, 0.25f, 7.0627754e-05f}, {1.0f, 0.0f, 0.123456789f}};
  CHECK(format_alignment(s, o) == "0.5,0.25,7.06278e-05 1,0,0.123457");
  o.kind = AlignmentKind::none;
  CHECK(format_alignment(a, o).empty());

  // Words: source tokens 0 1 | 2 (eos in none), target tokens 0 | 1 2 | 3 (eos in none).
  const SoftAlignment w = {{0.6f, 0.1f, 0.2f, 0.1f},
                           {0.1f, 0.1f, 0.7f, 0.1f},
                           {0.2f, 0.5f, 0.2f, 0.1f},
                           {0.0f, 0.0f, 0.1f, 0.9f}};
  const WordMap src = {0, 0, 1, -1}, tgt = {0, 1, 1, -1};
  o.kind = AlignmentKind::hard;  // tokens: 0-0 2-1 1-2 3-3 -> words 0-0 1-1 0-1, eos dropped
  CHECK(format_alignment(w, o, &src, &tgt) == "0-0 0-1 1-1");
  o.kind = AlignmentKind::soft;  // word rows: sums over a word's source tokens, mean over its
                                 // target tokens: (0.7, 0.2), ((0.2 + 0.7) / 2, (0.7 + 0.2) / 2)
  CHECK(format_alignment(w, o, &src, &tgt) == "0.7,0.2 0.45,0.45");
}

// Plain-loop pieces of the host reference.
std::vector<double> affine(const std::vector<float>& w, const std::vector<float>& b,
                           const std::vector<double>& x) {
  const size_t out = b.size(), in = x.size();
  std::vector<double> y(out);
  for (size_t o = 0; o < out; ++o) {
    double s = b[o];
    for (size_t i = 0; i < in; ++i) s += double(w[o * in + i]) * x[i];
    y[o] = s;
  }
  return y;
}

std::vector<double> layer_norm(const std::vector<double>& x, const std::vector<float>& g,
                               const std::vector<float>& b, double eps) {
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= double(x.size());
  for (double v : x) var += (v - mean) * (v - mean);
  var /= double(x.size());
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) / std::sqrt(var + eps) * g[i] + b[i];
  return y;
}

// softmax over scores[0..n) of q_h . k_h / sqrt(d_head) for head h.
std::vector<double> attention_row(const std::vector<double>& q, const Matrix& keys, size_t n,
                                  int head, int64_t d_head) {
  std::vector<double> p(n);
  double top = -1e300, sum = 0;
  for (size_t u = 0; u < n; ++u) {
    double s = 0;
    for (int64_t i = 0; i < d_head; ++i) s += q[head * d_head + i] * keys[u][head * d_head + i];
    p[u] = s / std::sqrt(double(d_head));
    top = std::max(top, p[u]);
  }
  for (double& v : p) sum += (v = std::exp(v - top));
  for (double& v : p) v /= sum;
  return p;
}

// Decoder layer 0's cross-attention probabilities [head][t][s] of a one-layer post-norm tx
// model (tied embeddings, tx's interleaved positions), from its parameters; `memory` [S, d]
// the encoder output.
std::vector<Matrix> host_cross_attention(tx::Backend& be, const tx::nn::ParameterSet& p,
                                         const tx::io::ModelConfig& c, const Ids& tgt_in,
                                         const std::vector<float>& memory) {
  auto get = [&](const std::string& name) { return tx::test::fetch(be, p.get(name)->value); };
  const int64_t d = c.d_model, dh = d / c.heads;
  const size_t T = tgt_in.size(), S = memory.size() / size_t(d);
  const std::vector<float> table = get("embed_tokens.weight");
  const std::string l = "decoder.layers.0.";
  Matrix x(T), q(T), k(T), v(T);
  for (size_t t = 0; t < T; ++t) {
    x[t].resize(size_t(d));
    for (int64_t i = 0; i < d; ++i) {
      const double freq = std::pow(10000.0, -double(i - i % 2) / double(d));
      const double pe = i % 2 == 0 ? std::sin(double(t) * freq) : std::cos(double(t) * freq);
      x[t][i] = double(table[tgt_in[t] * d + i]) * std::sqrt(double(d)) + pe;
    }
    q[t] = affine(get(l + "self_attn.q_proj.weight"), get(l + "self_attn.q_proj.bias"), x[t]);
    k[t] = affine(get(l + "self_attn.k_proj.weight"), get(l + "self_attn.k_proj.bias"), x[t]);
    v[t] = affine(get(l + "self_attn.v_proj.weight"), get(l + "self_attn.v_proj.bias"), x[t]);
  }
  Matrix mem_keys(S);
  for (size_t s = 0; s < S; ++s) {
    const std::vector<double> m(memory.begin() + s * d, memory.begin() + (s + 1) * d);
    mem_keys[s] = affine(get(l + "cross_attn.k_proj.weight"), get(l + "cross_attn.k_proj.bias"), m);
  }
  std::vector<Matrix> out(size_t(c.heads), Matrix(T));
  for (size_t t = 0; t < T; ++t) {
    std::vector<double> ctx(size_t(d), 0.0);
    for (int h = 0; h < c.heads; ++h) {
      const std::vector<double> w = attention_row(q[t], k, t + 1, h, dh);  // causal
      for (size_t u = 0; u <= t; ++u)
        for (int64_t i = 0; i < dh; ++i) ctx[h * dh + i] += w[u] * v[u][h * dh + i];
    }
    std::vector<double> y =
        affine(get(l + "self_attn.out_proj.weight"), get(l + "self_attn.out_proj.bias"), ctx);
    for (int64_t i = 0; i < d; ++i) y[i] += x[t][i];
    y = layer_norm(y, get(l + "self_attn_norm.weight"), get(l + "self_attn_norm.bias"), c.norm_eps);
    const std::vector<double> cq =
        affine(get(l + "cross_attn.q_proj.weight"), get(l + "cross_attn.q_proj.bias"), y);
    for (int h = 0; h < c.heads; ++h) out[h][t] = attention_row(cq, mem_keys, S, h, dh);
  }
  return out;
}

TEMPLATE_TEST_CASE("a tx model's alignment: its last layer's cross-attention averaged over heads",
                   "[alignment]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const tx::io::ModelConfig c = tx::test::small_config(9, 1, 1);
  tx::test::RandomModel random(*be, c, 11);
  const tx::nn::ParameterSet& params = random.params;
  const tx::nn::Transformer& model = random.model;

  const int32_t eos = Vocab::kEosId;
  const Ids src_a = {4, 5, 6, 7, eos}, src_b = {8, 4, eos};
  const Ids tgt_a = {5, 8, 4}, tgt_a2 = {6}, tgt_b = {7, 7, 5, 6};
  // Two hypotheses of one sentence, one of another, one ended without eos.
  const std::vector<AlignmentRequest> requests = {
      {&src_a, &tgt_a, true}, {&src_a, &tgt_a2, true}, {&src_b, &tgt_b, false}};
  Graph g(*be, GraphOptions{false, false});
  const std::vector<SoftAlignment> got = tx::decode::soft_alignments(g, model, requests);
  REQUIRE(got.size() == 3);

  for (size_t n = 0; n < requests.size(); ++n) {
    INFO("request " << n);
    const AlignmentRequest& r = requests[n];
    const size_t rows = r.target->size() + (r.eos ? 1 : 0), S = r.source->size();
    REQUIRE(got[n].size() == rows);
    // The host reference: the memory of this source alone, the decoder inputs bos + target.
    Ids tgt_in = {c.decoder_start_id};
    for (size_t t = 0; t + 1 < rows; ++t) tgt_in.push_back((*r.target)[t]);
    Graph h(*be, GraphOptions{false, false});
    const tx::Var memory =
        model.encode(h, be->upload(*r.source, {1, int64_t(S)}), be->upload(Ids{int32_t(S)}, {1}));
    const std::vector<Matrix> want =
        host_cross_attention(*be, params, c, tgt_in, tx::test::fetch(*be, memory->value));
    for (size_t t = 0; t < rows; ++t) {
      REQUIRE(got[n][t].size() == S);
      for (size_t s = 0; s < S; ++s) {
        INFO("t " << t << " s " << s);
        CHECK(std::abs(got[n][t][s] - 0.5 * (want[0][t][s] + want[1][t][s])) < 2e-6);
      }
    }
  }

  // alignment_head picks one head; a model trained to align (tx-train --guided-alignment)
  // records it.
  tx::io::ModelConfig one = c;
  one.alignment_head = 1;
  tx::test::RandomModel random1(*be, one, 11);
  const tx::nn::Transformer& model1 = random1.model;
  const std::vector<SoftAlignment> head1 = tx::decode::soft_alignments(g, model1, {requests[2]});
  Graph h(*be, GraphOptions{false, false});
  const tx::Var memory = model1.encode(h, be->upload(src_b, {1, 3}), be->upload(Ids{3}, {1}));
  const std::vector<Matrix> want =
      host_cross_attention(*be, random1.params, one, {one.decoder_start_id, 7, 7, 5},
                           tx::test::fetch(*be, memory->value));
  for (size_t t = 0; t < 4; ++t)
    for (size_t s = 0; s < 3; ++s) CHECK(std::abs(head1[0][t][s] - want[1][t][s]) < 2e-6);
}

TEMPLATE_TEST_CASE(
    "beam search with alignments: each n-best hypothesis aligned, the search unchanged",
    "[alignment]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::test::RandomModel random(*be, tx::test::small_config(9, 2, 2), 3);
  const tx::nn::Transformer& model = random.model;
  const std::vector<Ids> sources = {
      {4, 5, 6, Vocab::kEosId}, {7, Vocab::kEosId}, {8, 8, 4, 5, 6, Vocab::kEosId}};
  // Marian's rule with a short limit: some hypotheses end there without eos (no eos row).
  const bool marian = GENERATE(false, true);
  auto run = [&](bool align) {
    tx::decode::BeamSearchOptions o;
    o.beam_size = 3;
    o.n_best = 3;
    o.alignment = align;
    if (marian) {
      o.rule = tx::decode::SearchRule::marian;
      o.max_length_a = 0.8f;
    }
    tx::decode::BeamSearch search(*be, model, o);
    std::vector<tx::decode::NBest> out(sources.size());
    size_t next = 0;
    search.search_stream(
        [&](tx::decode::SourceSentence& s) {
          if (next == sources.size()) return false;
          s.index = int64_t(next);
          s.ids = sources[next++];
          return true;
        },
        [&](int64_t index, tx::decode::NBest nb) { out[size_t(index)] = std::move(nb); },
        {2, 0});  // two at a time: sentences finish in different steps
    return out;
  };
  const auto plain = run(false), aligned = run(true);
  Graph g(*be, GraphOptions{false, false});
  int without_eos = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    REQUIRE(aligned[i].size() == plain[i].size());
    for (size_t k = 0; k < plain[i].size(); ++k) {
      const auto& h = aligned[i][k];
      CHECK(h.ids == plain[i][k].ids);
      CHECK(h.score == plain[i][k].score);
      CHECK(plain[i][k].alignment.empty());
      // Each alone, the same rows (a row per token and eos, a column per source token).
      const SoftAlignment alone =
          tx::decode::soft_alignments(g, model, {{&sources[i], &h.ids, h.eos}})[0];
      REQUIRE(h.alignment.size() == h.ids.size() + (h.eos ? 1 : 0));
      without_eos += !h.eos;
      REQUIRE(h.alignment.size() == alone.size());
      for (size_t t = 0; t < alone.size(); ++t) {
        REQUIRE(h.alignment[t].size() == sources[i].size());
        double sum = 0;
        for (size_t s = 0; s < alone[t].size(); ++s) {
          CHECK(std::abs(h.alignment[t][s] - alone[t][s]) < 1e-6);
          sum += h.alignment[t][s];
        }
        CHECK(std::abs(sum - 1.0) < 1e-5);
      }
    }
  }
  if (marian) CHECK(without_eos > 0);
}

}  // namespace
