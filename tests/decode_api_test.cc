// The decoding library as an extender calls it: what BeamSearch and the Translator do with
// inputs and options that tx-translate never passes (a prefix a mask forbids, a temperature
// near 1e30, sources without eos, a search that finds nothing, a bad line mid-stream).
#include <algorithm>
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/batch.h"
#include "data/vocab.h"
#include "decode/beam_search.h"
#include "decode/sampling.h"
#include "decode/shortlist.h"
#include "decode/translator.h"
#include "support/tiny_translator.h"

namespace {

using tx::data::Vocab;
using tx::decode::BeamSearch;
using tx::decode::BeamSearchOptions;
using tx::decode::NBest;
using tx::decode::SourceSentence;
using tx::test::RandomModel;
using tx::test::small_config;
using Ids = std::vector<int32_t>;

constexpr int32_t kEos = Vocab::kEosId;
constexpr int32_t kUnk = Vocab::kUnkId;
constexpr int64_t kVocab = 9;  // pad, unk, bos, eos and 5 words (4..8)

// Searches `sources` (ids ending in eos), sentence i with prefixes[i] if given; results by index.
std::vector<NBest> run_search(BeamSearch& bs, const std::vector<Ids>& sources,
                              const std::vector<Ids>& prefixes = {}) {
  std::vector<NBest> out(sources.size());
  size_t next = 0;
  bs.search_stream(
      [&](SourceSentence& s) {
        if (next == sources.size()) return false;
        s.index = static_cast<int64_t>(next);
        s.ids = sources[next];
        s.prefix = next < prefixes.size() ? prefixes[next] : Ids{};
        ++next;
        return true;
      },
      [&](int64_t i, NBest nb) { out[i] = std::move(nb); }, {});
  return out;
}

Ids head(const Ids& ids, size_t n) {
  return Ids(ids.begin(), ids.begin() + std::min(n, ids.size()));
}

std::string translate(tx::decode::Translator& tr, const std::string& text) {
  std::istringstream in(text);
  std::ostringstream out;
  tr.translate_stream(in, out);
  return out.str();
}

}  // namespace

TEST_CASE("decode api: greedy search without scores forces a prefix token the mask forbids",
          "[decode][prefix]") {
  auto be = tx::test::cpu_backend();
  RandomModel m(*be, small_config(kVocab, 1, 1), 5);
  const Ids prefix{5, kUnk, 6};
  BeamSearchOptions o;
  o.beam_size = 1;
  o.allow_unk = false;  // unk masked, as for Marian's models
  o.scores = true;
  BeamSearch scored(*be, m.model, o);
  o.scores = false;  // tx-translate's greedy 1-best: the mask added to the logits in place
  BeamSearch plain(*be, m.model, o);
  const NBest a = run_search(scored, {{4, 5, 6, kEos}}, {prefix})[0];
  const NBest b = run_search(plain, {{4, 5, 6, kEos}}, {prefix})[0];
  REQUIRE(a.size() == 1);
  REQUIRE(b.size() == 1);
  CHECK(head(a[0].ids, 3) == prefix);
  CHECK(b[0].ids == a[0].ids);
}

TEST_CASE("decode api: sampling never draws a masked token, at any temperature",
          "[decode][sampling]") {
  // A masked entry (beam search's -1e30) first, then two real tokens.
  const float lp[3] = {tx::decode::kDead, -0.5f, -1.0f};
  for (float temperature : {1.0f, 1e20f, 1e30f, 3e38f}) {
    int masked = 0, second = 0;
    for (int i = 0; i < 1000; ++i) {
      const float u = (static_cast<float>(i) + 0.5f) / 1000.0f;
      for (int top_k : {0, 3}) {
        const int32_t token = tx::decode::draw_token(lp, 3, top_k, temperature, u);
        masked += token == 0;
        second += token == 2;
      }
    }
    INFO("temperature " << temperature);
    CHECK(masked == 0);
    if (temperature >= 1e20f) CHECK(second == Approx(1000).margin(10));  // uniform over two
  }
  // Through the search: at 1e30 every sentence gets a translation without pad or bos.
  auto be = tx::test::cpu_backend();
  RandomModel m(*be, small_config(kVocab, 1, 1), 5);
  std::vector<Ids> sources;
  for (int32_t i = 0; i < 20; ++i) sources.push_back({4 + i % 5, 5, kEos});
  for (int top_k : {0, 9}) {
    BeamSearchOptions o;
    o.beam_size = 1;
    o.allow_unk = false;
    o.sampling = {true, top_k, 1e30f, 7};
    BeamSearch bs(*be, m.model, o);
    for (const NBest& nb : run_search(bs, sources)) {
      REQUIRE(nb.size() == 1);
      for (int32_t id : nb[0].ids) CHECK(id >= 4);
    }
  }
}

TEST_CASE("decode api: search of a SourceBatch keeps its prefixes", "[decode][prefix]") {
  auto be = tx::test::cpu_backend();
  RandomModel m(*be, small_config(kVocab, 1, 1), 5);
  const std::vector<Ids> rows = {{4, 5}, {6}};
  tx::data::SourceBatch batch = tx::data::make_source_batch({&rows[0], &rows[1]}, {0, 1});
  batch.prefixes = {{8, 8, 8}, {7, 7}};
  BeamSearchOptions o;
  o.beam_size = 2;
  BeamSearch bs(*be, m.model, o);
  const std::vector<NBest> r = bs.search(batch);
  const std::vector<NBest> s = run_search(bs, {{4, 5, kEos}, {6, kEos}}, batch.prefixes);
  for (size_t i = 0; i < 2; ++i) {
    REQUIRE(!r[i].empty());
    CHECK(head(r[i][0].ids, batch.prefixes[i].size()) == batch.prefixes[i]);
    CHECK(r[i][0].ids == s[i][0].ids);
  }
}

TEST_CASE("decode api: sources, prefixes and options a search cannot take are named", "[decode]") {
  auto be = tx::test::cpu_backend();
  RandomModel m(*be, small_config(kVocab, 1, 1), 5);
  tx::io::ModelConfig short_config = small_config(kVocab, 1, 1);
  short_config.max_length = 4;
  RandomModel short_model(*be, short_config, 5);
  BeamSearch bs(*be, m.model, BeamSearchOptions{});
  BeamSearch short_search(*be, short_model.model, BeamSearchOptions{});
  using Catch::Contains;
  CHECK_THROWS_WITH(run_search(bs, {Ids{}}), Contains("ending in eos"));
  CHECK_THROWS_WITH(run_search(bs, {Ids{4, 5}}), Contains("ending in eos"));
  CHECK_THROWS_WITH(run_search(short_search, {Ids{4, 5, 6, 7, kEos}}), Contains("4 positions"));
  CHECK(run_search(short_search, {Ids{4, 5, 6, kEos}})[0].size() == 1);
  for (int32_t special : {0, 2, kEos})
    CHECK_THROWS_WITH(run_search(bs, {Ids{4, kEos}}, {Ids{5, special}}),
                      Contains("special id " + std::to_string(special)));
  CHECK_THROWS_WITH(BeamSearch(*be, {&m.model, nullptr}, {}), Contains("model 2 of 2 is null"));
  BeamSearchOptions o;
  o.length_penalty = INFINITY;
  CHECK_THROWS_WITH(BeamSearch(*be, m.model, o), Contains("--normalize"));
  o = {};
  o.beam_size = o.n_best = BeamSearchOptions::kMaxBeam + 1;
  CHECK_THROWS_WITH(BeamSearch(*be, m.model, o), Contains("--beam-size"));
  CHECK_THROWS_WITH(BeamSearch(*be, {&m.model, &m.model}, {}, {1.0f, INFINITY}),
                    Contains("weight 2 (inf) is not a finite number"));
}

TEST_CASE("decode api: an empty source's alignment under fairseq's rule has a row per token",
          "[decode][alignment]") {
  auto be = tx::test::cpu_backend();
  RandomModel m(*be, small_config(kVocab, 1, 1), 5);
  BeamSearchOptions o;
  o.beam_size = 2;
  o.n_best = 2;
  o.alignment = true;
  for (auto rule : {tx::decode::SearchRule::fairseq, tx::decode::SearchRule::marian}) {
    o.rule = rule;
    BeamSearch bs(*be, m.model, o);
    const std::vector<NBest> found = run_search(bs, {{kEos}});
    for (const auto& h : found[0]) {
      INFO("rule " << static_cast<int>(rule) << ", " << h.ids.size() << " tokens");
      CHECK(h.alignment.size() == h.ids.size() + (h.eos ? 1 : 0));
      for (const auto& row : h.alignment) {
        REQUIRE(row.size() == 1);  // the source's eos
        CHECK(row[0] == Approx(1.0f));
      }
    }
  }
}

TEST_CASE("decode api: a search that finds nothing still prints every n-best index",
          "[decode][shortlist]") {
  tx::test::TinyTranslator t;
  // The shortlist allows eos alone, which --min-length forbids at the first step.
  tx::decode::LexicalShortlist list(Ids{}, {});
  tx::decode::TranslatorOptions o;
  o.search.beam_size = 2;
  o.search.n_best = 2;
  o.search.min_length = 1;
  o.search.shortlist = &list;
  tx::decode::Translator tr(*t.be, t.model->model, *t.vocab, *t.vocab, o);
  CHECK(translate(tr, "das Haus\n\nder Hund\n") ==
        "0 |||  ||| F0= 0 ||| 0\n1 |||  ||| F0= 0 ||| 0\n2 |||  ||| F0= 0 ||| 0\n");
}

TEST_CASE("decode api: a bad line mid-stream ends the output after the lines before it",
          "[decode]") {
  tx::test::TinyTranslator t;
  tx::decode::TranslatorOptions o;
  o.search.beam_size = 2;
  tx::decode::Translator tr(*t.be, t.model->model, *t.vocab, *t.vocab, o);
  const std::vector<std::string> good = tr.translate_lines({"das Haus", "der Hund"});
  std::istringstream in("das Haus\nder Hund\nalt \xff\ngrün\n");
  std::ostringstream out;
  // The default window (maxi-batch 100) holds all four lines: the first two are written.
  CHECK_THROWS_WITH(tr.translate_stream(in, out, "input"), Catch::Contains("line 3"));
  CHECK(out.str() == good[0] + "\n" + good[1] + "\n");
  // The first line bad: nothing to write.
  std::istringstream first("\xff\ndas Haus\n");
  std::ostringstream none;
  CHECK_THROWS(tr.translate_stream(first, none, "input"));
  CHECK(none.str().empty());
  // The bad line first in a window, while the window before it is still being searched.
  o.batching.maxi_batch = 1;
  o.batching.max_sentences = 2;
  tx::decode::Translator small(*t.be, t.model->model, *t.vocab, *t.vocab, o);
  const std::vector<std::string> six = {"das Haus", "der Hund", "alt",
                                        "grün",     "ein Baum", "das Haus ist klein"};
  std::string text;
  for (const std::string& line : six) text += line + "\n";
  std::istringstream boundary(text + "bad \xff line\ngrün\n");
  std::ostringstream written;
  CHECK_THROWS_WITH(small.translate_stream(boundary, written, "input"), Catch::Contains("line 7"));
  std::string want;
  for (const std::string& line : small.translate_lines(six)) want += line + "\n";
  CHECK(written.str() == want);
  CHECK_THROWS_WITH(tr.translate_lines({"das", std::string("Haus\0", 5)}),
                    Catch::Contains("line 2: NUL byte at byte 5"));
}

TEST_CASE("decode api: a model of one position cannot translate and says so", "[decode]") {
  tx::test::TinyTranslator t;
  tx::io::ModelConfig c = small_config(t.vocab->size(), 1, 1);
  c.max_length = 1;
  RandomModel one(*t.be, c, 3);
  CHECK_THROWS_WITH(tx::decode::Translator(*t.be, one.model, *t.vocab, *t.vocab),
                    Catch::Contains("max_length of 1"));
}
