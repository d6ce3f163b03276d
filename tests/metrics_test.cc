// metrics: the 13a, intl and char tokenizers rule by rule, BLEU and chrF on hand-counted cases,
// signatures, input errors, and agreement with sacreBLEU on real test sets (../shared/data,
// skipped when absent).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/utf8.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/read_lines.h"
#include "metrics/signature.h"
#include "metrics/tokenize_13a.h"
#include "metrics/tokenize_intl.h"
#include "metrics/unicode.h"

using Catch::Contains;
using tx::metrics::BleuOptions;
using tx::metrics::BleuScore;
using tx::metrics::BleuSmoothing;
using tx::metrics::BleuTokenizer;
using tx::metrics::ChrfNgramStats;
using tx::metrics::ChrfOptions;
using tx::metrics::ChrfScore;
using tx::metrics::Lines;
using tx::metrics::tokenize_13a;
using tx::metrics::tokenize_char;
using tx::metrics::tokenize_intl;
namespace fs = std::filesystem;

namespace {

BleuScore bleu1(const std::string& hyp, const std::string& ref, BleuOptions options = {}) {
  return tx::metrics::corpus_bleu({hyp}, {{ref}}, options);
}

ChrfScore chrf1(const std::string& hyp, const std::string& ref, ChrfOptions options = {}) {
  return tx::metrics::corpus_chrf({hyp}, {{ref}}, options);
}

void require_stats(const ChrfScore& score, const std::vector<ChrfNgramStats>& expected) {
  REQUIRE(score.stats.size() == expected.size());
  for (std::size_t k = 0; k < expected.size(); ++k) {
    INFO("order index " << k);
    CHECK(score.stats[k].hyp == expected[k].hyp);
    CHECK(score.stats[k].ref == expected[k].ref);
    CHECK(score.stats[k].match == expected[k].match);
  }
}

}  // namespace

// ---- the 13a tokenizer, one rule at a time -----------------------------------------------------

TEST_CASE("metrics tokenize_13a: ASCII symbols become tokens, except apostrophe and dash",
          "[metrics]") {
  CHECK(tokenize_13a("Hello, world!") == "Hello , world !");
  CHECK(tokenize_13a("a{b}c|d~e[f]g\\h^i_j`k") == "a { b } c | d ~ e [ f ] g \\ h ^ i _ j ` k");
  CHECK(tokenize_13a("a!b\"c#d$e%f&g") == "a ! b \" c # d $ e % f & g");
  CHECK(tokenize_13a("(a)*+") == "( a ) * +");
  CHECK(tokenize_13a("x:y;z<w=v>u?t@s/r") == "x : y ; z < w = v > u ? t @ s / r");
  CHECK(tokenize_13a("it's x-ray a-1") == "it's x-ray a-1");
}

TEST_CASE("metrics tokenize_13a: periods and commas split unless between digits", "[metrics]") {
  CHECK(tokenize_13a("3.14 1,000 1.000,50") == "3.14 1,000 1.000,50");
  CHECK(tokenize_13a("end.") == "end .");
  CHECK(tokenize_13a("5.") == "5 .");  // followed by a non-digit (the padding space)
  CHECK(tokenize_13a(".5") == ". 5");  // preceded by a non-digit (the padding space)
  CHECK(tokenize_13a("a.b a,b 1,a") == "a . b a , b 1 , a");
  CHECK(tokenize_13a("U.S.A.") == "U . S . A .");
  CHECK(tokenize_13a("caf\xC3\xA9.") == "caf\xC3\xA9 .");  // a multi-byte letter before '.'
}

TEST_CASE("metrics tokenize_13a: regex passes do not overlap their matches", "[metrics]") {
  // Pass "non-digit then [.,]" matches "x." and resumes after the '.', so the ',' (preceded by
  // the consumed '.') is not split; pass "[.,] then non-digit" skips ",5" since 5 is a digit.
  CHECK(tokenize_13a("x.,5") == "x . ,5");
}

TEST_CASE("metrics tokenize_13a: a dash after a digit is split off", "[metrics]") {
  CHECK(tokenize_13a("1-2 1990-2000") == "1 - 2 1990 - 2000");
  CHECK(tokenize_13a("4-5-6") == "4 - 5 - 6");
}

TEST_CASE("metrics tokenize_13a: entities, skipped tags and line breaks", "[metrics]") {
  CHECK(tokenize_13a("&quot;hi&quot; &amp; &lt;b&gt;") == "\" hi \" & < b >");
  CHECK(tokenize_13a("&amp;lt;") == "<");  // &amp; first, then &lt; in the result
  CHECK(tokenize_13a("a <skipped> b") == "a b");
  CHECK(tokenize_13a("inter-\nnational") == "international");
  CHECK(tokenize_13a("a\nb") == "a b");
}

TEST_CASE("metrics tokenize_13a: Python's Unicode whitespace separates tokens", "[metrics]") {
  CHECK(tokenize_13a("a\xC2\xA0"
                     "b\xE2\x80\x89"
                     "c\tx  y ") == "a b c x y");  // NBSP, thin space
  CHECK(tokenize_13a("a\xE2\x80\x8B"
                     "b") ==
        "a\xE2\x80\x8B"
        "b");  // zero-width space is not
  CHECK(tokenize_13a("") == "");
}

// ---- the intl and char tokenizers ---------------------------------------------------------------
// Expected strings from sacreBLEU 2.4.3 (regex 2026.11.15):
//   from sacrebleu.tokenizers.tokenizer_intl import TokenizerV14International
//   TokenizerV14International()(line)
// and for char, " ".join(TokenizerChar()(line).split()) (BLEU splits its output on whitespace).

TEST_CASE("metrics tokenize_intl: punctuation splits off unless a number is beside it",
          "[metrics]") {
  CHECK(tokenize_intl("Hello, world!") == "Hello , world !");
  CHECK(tokenize_intl("3.14 1,000 1.000,50") == "3.14 1,000 1.000,50");
  CHECK(tokenize_intl("end.") == "end .");
  CHECK(tokenize_intl("in 2019.") == "in 2019.");  // no padding: mteval-v14 keeps a year's period
  CHECK(tokenize_intl("x.1 1.x") == "x . 1 1 . x");
  CHECK(tokenize_intl("U.S.A.") == "U . S . A .");
  CHECK(tokenize_intl("(a) [b] {c}") == "( a ) [ b ] { c }");
  CHECK(tokenize_intl("it's x-ray a-1 1-a") == "it ' s x - ray a - 1 1 - a");
}

TEST_CASE("metrics tokenize_intl: Unicode punctuation, symbols and numbers", "[metrics]") {
  CHECK(tokenize_intl("\u201EDas ist gut\u201C, sagte er \u2013 nicht wahr?") ==
        "\u201E Das ist gut \u201C , sagte er \u2013 nicht wahr ?");
  CHECK(tokenize_intl("\u00ABBonjour\u00BB \u00BFQu\u00E9? \u00A1S\u00ED!") ==
        "\u00AB Bonjour \u00BB \u00BF Qu\u00E9 ? \u00A1 S\u00ED !");
  // Symbols (Sc, Sm, Sk, So) always split, digits or not.
  CHECK(tokenize_intl("5\u20AC $5 a+b 2\u00D73 \u00A9 x^2 `q`") ==
        "5 \u20AC $ 5 a + b 2 \u00D7 3 \u00A9 x ^ 2 ` q `");
  CHECK(tokenize_intl("\u65E5\u672C\u8A9E\u3001\u30C6\u30B9\u30C8\u3002") ==
        "\u65E5\u672C\u8A9E \u3001 \u30C6\u30B9\u30C8 \u3002");
  // Arabic-Indic digits are numbers too; a Roman numeral (Nl) or superscript two (No) as well.
  CHECK(tokenize_intl("\u0663.\u0661\u0664 \u0663\u060C\u0661\u0664") ==
        "\u0663.\u0661\u0664 \u0663\u060C\u0661\u0664");
  CHECK(tokenize_intl("\u216B. \u00BD, x\u00B2.") == "\u216B . \u00BD , x\u00B2.");
  // Python's whitespace (no-break space, ideographic space) separates tokens.
  CHECK(tokenize_intl("a\u00A0b\u3000c") == "a b c");
}

TEST_CASE("metrics tokenize_intl: substitutions do not overlap their matches", "[metrics]") {
  // Pass 1 matches "a." and resumes after it, so ",b" is left to pass 2, which splits it.
  CHECK(tokenize_intl("a.,b") == "a . , b");
  CHECK(tokenize_intl("1.,2") == "1 . , 2");
}

TEST_CASE("metrics tokenize_char: every non-space character is a token", "[metrics]") {
  CHECK(tokenize_char("Ab c") == "A b c");
  CHECK(tokenize_char("x-1!") == "x - 1 !");
  CHECK(tokenize_char("\u65E5\u672C\u8A9E") == "\u65E5 \u672C \u8A9E");
  CHECK(tokenize_char("a\u3000b\u00A0c ") == "a b c");
  CHECK(tokenize_char("") == "");
}

// ---- signatures --------------------------------------------------------------------------------
// sacreBLEU 2.4.3's, e.g. BLEU(smooth_method='floor').get_signature().format() after a
// corpus_score, with its "version:2.4.3" in place of tx's.

TEST_CASE("metrics signatures: sacreBLEU's fields and order, tx's version", "[metrics]") {
  const std::string v = "version:" + tx::metrics::signature_version();
  CHECK(tx::metrics::signature_version().rfind("tx-", 0) == 0);
  BleuOptions o;
  CHECK(tx::metrics::bleu_signature(o, 1) == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|" + v);
  o.lowercase = true;
  o.tokenizer = BleuTokenizer::kIntl;
  o.effective_order = true;
  CHECK(tx::metrics::bleu_signature(o, 2) == "nrefs:2|case:lc|eff:yes|tok:intl|smooth:exp|" + v);
  o = BleuOptions();
  o.tokenizer = BleuTokenizer::kChar;
  o.smoothing = BleuSmoothing::kFloor;
  CHECK(tx::metrics::bleu_signature(o, 1) ==
        "nrefs:1|case:mixed|eff:no|tok:char|smooth:floor[0.10]|" + v);
  o.smooth_value = 0.05;
  CHECK(tx::metrics::bleu_signature(o, 1) ==
        "nrefs:1|case:mixed|eff:no|tok:char|smooth:floor[0.05]|" + v);
  o = BleuOptions();
  o.tokenizer = BleuTokenizer::kNone;
  o.smoothing = BleuSmoothing::kAddK;
  CHECK(tx::metrics::bleu_signature(o, 1) ==
        "nrefs:1|case:mixed|eff:no|tok:none|smooth:add-k[1.00]|" + v);
  o.smoothing = BleuSmoothing::kNone;
  CHECK(tx::metrics::bleu_signature(o, 1) == "nrefs:1|case:mixed|eff:no|tok:none|smooth:none|" + v);

  CHECK(tx::metrics::chrf_signature(ChrfOptions(), 1) ==
        "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|" + v);
  ChrfOptions pp = tx::metrics::chrf_plus_plus_options();
  pp.lowercase = true;
  CHECK(tx::metrics::chrf_signature(pp, 3) == "nrefs:3|case:lc|eff:yes|nc:6|nw:2|space:no|" + v);

  // In the line, the signature follows the name, as in sacreBLEU's text output.
  CHECK(bleu1("a b c d", "a b c d").format(2, "sig") ==
        "BLEU|sig = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 4 "
        "ref_len = 4)");
  CHECK(chrf1("abc", "abc").format(2, "sig") == "chrF2|sig = 100.00");
}

TEST_CASE("metrics BLEU: max_order other than 4", "[metrics]") {
  BleuOptions o;
  o.max_order = 2;
  // Unigrams 5/5, bigrams 3/4 ("on mat" is not in the reference), hand-counted; 5 tokens
  // against 6 gives BP exp(1 - 6/5).
  const BleuScore s = bleu1("the cat sat on mat", "the cat sat on the mat", o);
  CHECK(s.counts == std::vector<int64_t>{5, 3});
  CHECK(s.totals == std::vector<int64_t>{5, 4});
  CHECK(s.score == Approx(100 * std::exp(-0.2) * std::sqrt(0.75)).epsilon(1e-12));
  CHECK(s.format() == "BLEU = 70.90 100.0/75.0 (BP = 0.819 ratio = 0.833 hyp_len = 5 ref_len = 6)");
  CHECK(s.precisions.size() == 2);
}

TEST_CASE("metrics BLEU: a max_order below 1 and a negative smoothing value are errors",
          "[metrics]") {
  const Lines hyp = {"the cat sat"}, ref = {"the cat sat on the mat"};
  BleuOptions o;
  o.max_order = -1;  // once a std::length_error from sizing the statistics
  CHECK_THROWS_WITH(tx::metrics::corpus_bleu(hyp, {ref}, o), Contains("max_order is -1"));
  o = BleuOptions();
  o.smoothing = BleuSmoothing::kFloor;
  o.smooth_value = -0.1;  // once a silent NaN: the log of a negative precision
  CHECK_THROWS_WITH(tx::metrics::corpus_bleu(hyp, {ref}, o),
                    Contains("smoothing value -0.1 must be a finite number >= 0"));
  o.smooth_value = 0.1;
  CHECK(std::isfinite(tx::metrics::corpus_bleu(hyp, {ref}, o).score));
}

TEST_CASE("metrics unicode: lowercase follows Python's str.lower", "[metrics]") {
  // ÄRGER ΟΔΟΣ İ -> ärger οδος (final sigma ς) i + combining dot above.
  CHECK(tx::metrics::to_lower("\xC3\x84RGER \xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3 \xC4\xB0") ==
        "\xC3\xA4rger \xCE\xBF\xCE\xB4\xCE\xBF\xCF\x82 i\xCC\x87");
  CHECK(tx::metrics::to_lower("\xCE\xA3\xCE\x91") == "\xCF\x83\xCE\xB1");  // ΣΑ: not final
  CHECK(tx::metrics::to_lower("ABC def") == "abc def");
}

TEST_CASE("metrics utf8: invalid sequences are found where Python's decoder fails", "[metrics]") {
  using tx::find_invalid_utf8;
  const auto npos = std::string::npos;
  CHECK(find_invalid_utf8("plain \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") == npos);
  CHECK(find_invalid_utf8("ab\xC3") == 2);            // truncated
  CHECK(find_invalid_utf8("\xC0\xAF") == 0);          // overlong '/'
  CHECK(find_invalid_utf8("a\xED\xA0\x80") == 1);     // a surrogate
  CHECK(find_invalid_utf8("\xF4\x90\x80\x80") == 0);  // above U+10FFFF
  CHECK(find_invalid_utf8("x\x80") == 1);             // a lone continuation byte
  CHECK(tx::decode_utf8("\xC3\xBC"
                        "b") == std::u32string{0xFC, 'b'});
}

// ---- BLEU on hand-counted cases ----------------------------------------------------------------

// hyp "the cat sat on the mat", ref "the cat is on the mat" (6 tokens each):
//   1-grams: the x2, cat, on, mat match             -> 5/6
//   2-grams: "the cat", "on the", "the mat" match    -> 3/5 ("cat sat", "sat on" do not)
//   3-grams: "on the mat" matches                     -> 1/4
//   4-grams: none of "the cat sat on", "cat sat on the", "sat on the mat" -> 0/3
TEST_CASE("metrics BLEU: hand-counted n-grams with each smoothing method", "[metrics]") {
  const std::string hyp = "the cat sat on the mat", ref = "the cat is on the mat";
  const BleuScore exp = bleu1(hyp, ref);
  CHECK(exp.counts == std::vector<int64_t>{5, 3, 1, 0});
  CHECK(exp.totals == std::vector<int64_t>{6, 5, 4, 3});
  CHECK(exp.sys_len == 6);
  CHECK(exp.ref_len == 6);
  CHECK(exp.bp == 1.0);
  // exp smoothing: the first zero precision becomes 1 / (2 * total) = 1/6.
  CHECK(exp.score == Approx(std::pow(500.0 / 6 * 60.0 * 25.0 * (100.0 / 6), 0.25)));
  CHECK(exp.format() ==
        "BLEU = 37.99 83.3/60.0/25.0/16.7 (BP = 1.000 ratio = 1.000 hyp_len = 6 ref_len = 6)");

  BleuOptions none;
  none.smoothing = BleuSmoothing::kNone;
  CHECK(bleu1(hyp, ref, none).score == 0.0);

  BleuOptions floor;
  floor.smoothing = BleuSmoothing::kFloor;  // 0 matches count as 0.1: 0.1/3
  CHECK(bleu1(hyp, ref, floor).score ==
        Approx(std::pow(500.0 / 6 * 60.0 * 25.0 * (10.0 / 3), 0.25)));
  CHECK(bleu1(hyp, ref, floor).format(1) ==
        "BLEU = 25.4 83.3/60.0/25.0/3.3 (BP = 1.000 ratio = 1.000 hyp_len = 6 ref_len = 6)");

  BleuOptions add_k;
  add_k.smoothing = BleuSmoothing::kAddK;  // +1 to orders 2..4: 4/6, 2/5, 1/4
  const BleuScore k = bleu1(hyp, ref, add_k);
  CHECK(k.score == Approx(std::pow(500.0 / 6 * (400.0 / 6) * 40.0 * 25.0, 0.25)));
  CHECK(k.counts == std::vector<int64_t>{5, 3, 1, 0});  // reported without the additions
  add_k.smooth_value = 0.5;                             // 3.5/5.5, 1.5/4.5, 0.5/3.5
  CHECK(bleu1(hyp, ref, add_k).score ==
        Approx(std::pow(500.0 / 6 * (350.0 / 5.5) * (150.0 / 4.5) * (50.0 / 3.5), 0.25)));
}

// hyp "the cat" against "the cat sat on the mat": 2/2 unigrams, 1/1 bigram, no trigram at all.
TEST_CASE("metrics BLEU: brevity penalty and effective order", "[metrics]") {
  const BleuScore corpus = bleu1("the cat", "the cat sat on the mat");
  CHECK(corpus.totals == std::vector<int64_t>{2, 1, 0, 0});
  CHECK(corpus.bp == Approx(std::exp(1.0 - 6.0 / 2.0)));
  CHECK(corpus.score == 0.0);  // no 3-grams: precision 0 (not smoothed, there is no total)
  CHECK(corpus.format() ==
        "BLEU = 0.00 100.0/100.0/0.0/0.0 (BP = 0.135 ratio = 0.333 hyp_len = 2 ref_len = 6)");
  // Sentence BLEU averages the two orders present: bp * 100.
  const BleuScore sentence = tx::metrics::sentence_bleu("the cat", {"the cat sat on the mat"});
  CHECK(sentence.score == Approx(100.0 * std::exp(-2.0)));
  CHECK(sentence.format() ==
        "BLEU = 13.53 100.0/100.0/0.0/0.0 (BP = 0.135 ratio = 0.333 hyp_len = 2 ref_len = 6)");
}

TEST_CASE("metrics BLEU: two references, clipped by the max count and closest length",
          "[metrics]") {
  // hyp "a b c d", refs "a b x" (3 tokens) and "c d y y y" (5): both 1 away, the shorter wins.
  //   1-grams: a, b (ref 1), c, d (ref 2) -> 4/4;  2-grams: "a b", "c d" -> 2/3
  //   3-grams 0/2 -> 100/(2*2);  4-grams 0/1 -> 100/(4*1)
  const BleuScore s = tx::metrics::corpus_bleu({"a b c d"}, {{"a b x"}, {"c d y y y"}});
  CHECK(s.counts == std::vector<int64_t>{4, 2, 0, 0});
  CHECK(s.ref_len == 3);
  CHECK(s.score == Approx(std::pow(100.0 * (200.0 / 3) * 25.0 * 25.0, 0.25)));
  CHECK(s.format() ==
        "BLEU = 45.18 100.0/66.7/25.0/25.0 (BP = 1.000 ratio = 1.333 hyp_len = 4 ref_len = 3)");

  // "the" x3 against "the cat" (1) and "the the dog" (2): clipped at 2, the max, not the sum 3.
  // "the the" x2 against 1 in ref 2; "the the the" 0/1; no 4-gram, so corpus BLEU is 0.
  const BleuScore t = tx::metrics::corpus_bleu({"the the the"}, {{"the cat"}, {"the the dog"}});
  CHECK(t.counts == std::vector<int64_t>{2, 1, 0, 0});
  CHECK(t.ref_len == 3);
  CHECK(t.format() ==
        "BLEU = 0.00 66.7/50.0/50.0/0.0 (BP = 1.000 ratio = 1.000 hyp_len = 3 ref_len = 3)");
}

TEST_CASE("metrics BLEU: empty hypotheses and an empty corpus score 0", "[metrics]") {
  const BleuScore s = tx::metrics::corpus_bleu({"", ""}, {{"the cat sat", "on the mat"}});
  CHECK(s.score == 0.0);
  CHECK(s.format() ==
        "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 6)");
  CHECK(tx::metrics::corpus_bleu(Lines{}, std::vector<Lines>{Lines{}}).score == 0.0);
}

TEST_CASE("metrics BLEU: lowercase and tokenizer options", "[metrics]") {
  BleuOptions lower;
  lower.lowercase = true;
  CHECK(bleu1("THE CAT SAT", "the cat sat").score == 0.0);
  CHECK(bleu1("THE CAT SAT", "the cat sat", lower).counts == std::vector<int64_t>{3, 2, 1, 0});
  BleuOptions none;
  none.tokenizer = BleuTokenizer::kNone;
  CHECK(bleu1("a, b.", "a , b .").sys_len == 4);
  CHECK(bleu1("a, b.", "a , b .", none).sys_len == 2);
  CHECK(tx::metrics::parse_bleu_smoothing("add-k") == BleuSmoothing::kAddK);
  CHECK_THROWS_WITH(tx::metrics::parse_bleu_smoothing("exponential"),
                    Contains("none, floor, add-k, exp"));
  for (const char* name : {"13a", "intl", "char", "none"})
    CHECK(tx::metrics::bleu_tokenizer_name(tx::metrics::parse_bleu_tokenizer(name)) == name);
  CHECK_THROWS_WITH(tx::metrics::parse_bleu_tokenizer("zh"), Contains("13a, intl, char, none"));
}

// ---- chrF on hand-counted cases ----------------------------------------------------------------

TEST_CASE("metrics chrF: whitespace is removed and absent orders are left out", "[metrics]") {
  // "ab c" and "abc" are both "abc": orders 1..3 match fully, orders 4..6 exist on neither side.
  const ChrfScore s = chrf1("ab c", "abc");
  CHECK(s.score == Approx(100.0));
  require_stats(s, {{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}});
  CHECK(s.format() == "chrF2 = 100.00");
  CHECK(chrf1("a\xC2\xA0"
              "b",
              "ab")
            .score == Approx(100.0));  // NBSP is whitespace
}

// "abcd" vs "abce": 1-grams a b c match 3/4, 2-grams ab bc 2/3, 3-grams abc 1/2, 4-grams 0/1.
// Precision equals recall at every order, so F2 is their mean: (3/4 + 2/3 + 1/2 + 0) / 4.
TEST_CASE("metrics chrF: hand-counted character n-grams", "[metrics]") {
  const ChrfScore s = chrf1("abcd", "abce");
  require_stats(s, {{4, 4, 3}, {3, 3, 2}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0}, {0, 0, 0}});
  CHECK(s.score == Approx(100.0 * (0.75 + 2.0 / 3 + 0.5) / 4));
  CHECK(s.format() == "chrF2 = 47.92");
  // Code points, not bytes: "über" vs "uber" shares b, e, r and "be", "er", "ber".
  require_stats(chrf1("\xC3\xBC"
                      "ber",
                      "uber"),
                {{4, 4, 3}, {3, 3, 2}, {2, 2, 1}, {1, 1, 0}, {0, 0, 0}, {0, 0, 0}});
}

// hyp "the cat." vs ref "the cat": characters "thecat." (7) vs "thecat" (6), every reference
// n-gram is matched, so recall is 1 and precision is (n-grams - 1) / n-grams at orders 1..6.
// Words: "cat." splits into "cat" "." -> unigrams 2/3 ("the", "cat"), bigrams 1/2 ("the cat").
TEST_CASE("metrics chrF++: word n-grams with punctuation split off", "[metrics]") {
  const ChrfScore pp = chrf1("the cat.", "the cat", tx::metrics::chrf_plus_plus_options());
  require_stats(
      pp, {{7, 6, 6}, {6, 5, 5}, {5, 4, 4}, {4, 3, 3}, {3, 2, 2}, {2, 1, 1}, {3, 2, 2}, {2, 1, 1}});
  const double p =
      (6.0 / 7 + 5.0 / 6 + 4.0 / 5 + 3.0 / 4 + 2.0 / 3 + 1.0 / 2 + 2.0 / 3 + 1.0 / 2) / 8;
  CHECK(pp.score == Approx(100.0 * 5 * p / (4 * p + 1)));  // F2 with recall 1
  CHECK(pp.format() == "chrF2++ = 91.99");
  CHECK(chrf1("the cat.", "the cat").format() == "chrF2 = 93.26");

  // Only one symbol is split off, from the end first: "(hi)" gives "(hi" and ")".
  ChrfOptions words_only;
  words_only.char_order = 0;
  words_only.word_order = 1;
  require_stats(chrf1("(hi)", "( hi )", words_only), {{2, 3, 1}});
  require_stats(chrf1("'s . ab", "' s . ab", words_only), {{4, 4, 4}});
}

TEST_CASE("metrics chrF: empty hypotheses, lowercase, best of two references", "[metrics]") {
  CHECK(tx::metrics::corpus_chrf({"", ""}, {{"abc", "d"}}).score == 0.0);
  ChrfOptions lower;
  lower.lowercase = true;
  CHECK(chrf1("\xC3\x84RGER", "\xC3\xA4rger", lower).score == Approx(100.0));
  // The second reference matches better, so its statistics are the segment's.
  const ChrfScore two = tx::metrics::corpus_chrf({"abc"}, {{"xyz"}, {"abc"}});
  CHECK(two.score == Approx(100.0));
  CHECK(two.stats[0].match == 3);
  CHECK(tx::metrics::sentence_chrf("abc", {"xyz", "abc"}).score == Approx(100.0));
}

TEST_CASE("metrics chrF: corpus statistics are summed, not sentence scores averaged", "[metrics]") {
  // Sentence scores 100 ("aa") and 0 ("b" vs "c") average to 50; summed statistics weigh by
  // n-grams: unigrams 2/3, bigrams 1/1 (only "aa" has one) -> F2 of P = R = 5/6.
  const ChrfScore s = tx::metrics::corpus_chrf({"aa", "b"}, {{"aa", "c"}});
  CHECK(s.score == Approx(100.0 * (2.0 / 3 + 1.0) / 2));
}

// ---- input errors ------------------------------------------------------------------------------

TEST_CASE("metrics: mismatched line counts and invalid UTF-8 are named", "[metrics]") {
  const Lines hyps = {"a", "b", "c"};
  CHECK_THROWS_WITH(tx::metrics::corpus_bleu(hyps, {{"a", "b"}}),
                    Contains("3 lines") && Contains("reference 1 has 2 lines"));
  CHECK_THROWS_WITH(tx::metrics::corpus_chrf(hyps, {hyps, {"a"}}),
                    Contains("3 lines") && Contains("reference 2 has 1 lines"));
  CHECK_THROWS_WITH(tx::metrics::corpus_bleu(hyps, {}), Contains("no reference"));
  CHECK_THROWS_WITH(tx::metrics::corpus_bleu({"ok", "bad \xFF"}, {{"a", "b"}}),
                    Contains("invalid UTF-8 in the hypotheses, line 2") && Contains("iconv"));
  CHECK_THROWS_WITH(tx::metrics::corpus_chrf({"a"}, {{"\xC3"}}),
                    Contains("invalid UTF-8 in reference 1, line 1"));
}

TEST_CASE("metrics read_lines: split at newlines, trailing whitespace removed", "[metrics]") {
  std::string pattern = (fs::temp_directory_path() / "tx_metrics_test_XXXXXX").string();
  REQUIRE(::mkdtemp(&pattern[0]) != nullptr);
  const fs::path dir = pattern, path = dir / "lines.txt";
  {
    std::ofstream out(path, std::ios::binary);
    out << "a \r\nb\n\n  c\t";
  }
  CHECK(tx::metrics::read_lines(path.string()) == Lines{"a", "b", "", "  c"});
  {
    std::ofstream out(path, std::ios::binary);
    out << "one\ntwo\n";  // a final newline ends the last line, it adds none
  }
  CHECK(tx::metrics::read_lines(path.string()) == Lines{"one", "two"});
  {
    std::ofstream out(path, std::ios::binary);
    out << "one\nt\xE9o\n";  // Latin-1 é
  }
  CHECK_THROWS_WITH(tx::metrics::read_lines(path.string()),
                    Contains(path.string()) && Contains("line 2"));
  fs::remove_all(dir);
  CHECK_THROWS_WITH(tx::metrics::read_lines(path.string()), Contains("cannot read"));
}

// ---- agreement with sacreBLEU on real test sets ------------------------------------------------
//
// The hypotheses are derived from the references (derive() below) and the expected numbers were
// produced with sacrebleu 2.6.0 (Python 3.11.7, pip install sacrebleu) from the repository root:
//
//   from sacrebleu.metrics import BLEU, CHRF
//   def derive(lines, drop_every, swap_every, upper_every, empty_every):
//       out = []
//       for i, line in enumerate(lines):
//           words = [w for w in line.split(' ') if w]
//           words = [w for j, w in enumerate(words) if drop_every == 0 or (j + 1) % drop_every]
//           if swap_every and i % swap_every == swap_every - 1:
//               for j in range(0, len(words) - 1, 2):
//                   words[j], words[j + 1] = words[j + 1], words[j]
//           if upper_every and i % upper_every == 1 and words:
//               words[0] = ''.join(c.upper() if 'a' <= c <= 'z' else c for c in words[0])
//           if empty_every and i % empty_every == empty_every - 1:
//               words = []
//           out.append(' '.join(words))
//       return out
//   read = lambda p: [l.rstrip() for l in open(p, encoding='utf-8', newline='\n')]
//   ref = read('../shared/data/wmt14/newstest2013.de')    # or multi30k/val.de
//   hyp, ref2 = derive(ref, 7, 3, 5, 50), derive(ref, 4, 2, 0, 0)
//   s = BLEU(**options).corpus_score(hyp, [ref])          # or [ref, ref2]
//   print(repr(s.score), s.counts, s.totals, s.sys_len, s.ref_len, s)
//   m = CHRF(**options); s = m.corpus_score(hyp, [ref])
//   st = m._extract_corpus_statistics(hyp, [ref])         # summed per order for the counts
//
// The command line agrees, e.g. for the first BLEU and chrF rows below (hyp written to a file):
//   sacrebleu ../shared/data/wmt14/newstest2013.de -i hyp -m bleu chrf -w 2 -f text
//   BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = 50.97 98.9/63.7/50.4/40.7
//     (BP = 0.850 ratio = 0.860 hyp_len = 54827 ref_len = 63737)
//   chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0 = 74.33

namespace {

// ../shared/data beside the repository root: from $TX_SOURCE_DIR, else the first directory
// upwards from the working directory that has it (a build directory sits inside the root).
std::optional<fs::path> shared_data() {
  std::vector<fs::path> starts;
  if (const char* root = std::getenv("TX_SOURCE_DIR")) starts.emplace_back(root);
  std::error_code error;
  starts.push_back(fs::current_path(error));
  for (const fs::path& start : starts) {
    for (fs::path dir = fs::absolute(start, error); !dir.empty(); dir = dir.parent_path()) {
      const fs::path data = dir / ".." / "shared" / "data";
      if (fs::is_directory(data, error)) return data.lexically_normal();
      if (dir == dir.parent_path()) break;
    }
  }
  std::cout << "SKIPPED: ../shared/data not found" << std::endl;
  return std::nullopt;
}

std::vector<std::string> split_spaces(const std::string& line) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < line.size()) {
    const std::size_t end = std::min(line.find(' ', i), line.size());
    if (end > i) words.push_back(line.substr(i, end - i));
    i = end + 1;
  }
  return words;
}

// The Python derive() above, rule for rule: words split at ASCII spaces; every drop_every-th
// word dropped; neighbours swapped in every swap_every-th line; the first word's ASCII letters
// uppercased where line % upper_every == 1; every empty_every-th line emptied (0: rule off).
Lines derive(const Lines& lines, int drop_every, int swap_every, int upper_every, int empty_every) {
  Lines out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::vector<std::string> words;
    const std::vector<std::string> all = split_spaces(lines[i]);
    for (std::size_t j = 0; j < all.size(); ++j) {
      if (drop_every == 0 || (j + 1) % drop_every != 0) words.push_back(all[j]);
    }
    if (swap_every && i % swap_every == static_cast<std::size_t>(swap_every - 1)) {
      for (std::size_t j = 0; j + 1 < words.size(); j += 2) std::swap(words[j], words[j + 1]);
    }
    if (upper_every && i % upper_every == 1 && !words.empty()) {
      for (char& c : words[0]) {
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      }
    }
    if (empty_every && i % empty_every == static_cast<std::size_t>(empty_every - 1)) words.clear();
    std::string line;
    for (const std::string& w : words) line += (line.empty() ? "" : " ") + w;
    out.push_back(line);
  }
  return out;
}

struct Corpus {
  Lines hyp, ref, ref2;
};

std::optional<Corpus> load(const std::string& relative) {
  const std::optional<fs::path> data = shared_data();
  if (!data) return std::nullopt;
  Corpus c;
  c.ref = tx::metrics::read_lines((*data / relative).string());
  c.hyp = derive(c.ref, 7, 3, 5, 50);
  c.ref2 = derive(c.ref, 4, 2, 0, 0);
  return c;
}

struct BleuExpected {
  double score;
  std::vector<int64_t> counts, totals;
  int64_t sys_len, ref_len;
  std::string line;
};

void require_bleu(const BleuScore& s, const BleuExpected& e) {
  CHECK(s.counts == e.counts);
  CHECK(s.totals == e.totals);
  CHECK(s.sys_len == e.sys_len);
  CHECK(s.ref_len == e.ref_len);
  CHECK(s.score == Approx(e.score).epsilon(1e-12));
  CHECK(s.format() == e.line);
}

void require_chrf(const ChrfScore& s, double score, const std::string& line,
                  const std::vector<int64_t>& flat_stats) {
  std::vector<ChrfNgramStats> stats;
  for (std::size_t k = 0; k + 2 < flat_stats.size(); k += 3) {
    stats.push_back({flat_stats[k], flat_stats[k + 1], flat_stats[k + 2]});
  }
  require_stats(s, stats);
  CHECK(s.score == Approx(score).epsilon(1e-12));
  CHECK(s.format() == line);
}

BleuOptions lowercase_bleu() {
  BleuOptions o;
  o.lowercase = true;
  return o;
}

BleuOptions untokenized_bleu() {
  BleuOptions o;
  o.tokenizer = BleuTokenizer::kNone;
  return o;
}

ChrfOptions lowercase_chrf_pp() {
  ChrfOptions o = tx::metrics::chrf_plus_plus_options();
  o.lowercase = true;
  return o;
}

}  // namespace

TEST_CASE("metrics sacreBLEU agreement: newstest2013.de BLEU", "[metrics][sacrebleu]") {
  const std::optional<Corpus> c = load("wmt14/newstest2013.de");
  if (!c) return;
  using tx::metrics::corpus_bleu;
  require_bleu(corpus_bleu(c->hyp, {c->ref}),
               {50.96899913328491,
                {54238, 33064, 24658, 18745},
                {54827, 51887, 48954, 46039},
                54827,
                63737,
                "BLEU = 50.97 98.9/63.7/50.4/40.7 (BP = 0.850 ratio = 0.860 hyp_len = 54827 "
                "ref_len = 63737)"});
  require_bleu(corpus_bleu(c->hyp, {c->ref}, lowercase_bleu()),
               {51.788355294212856,
                {54827, 33510, 25089, 19167},
                {54827, 51887, 48954, 46039},
                54827,
                63737,
                "BLEU = 51.79 100.0/64.6/51.3/41.6 (BP = 0.850 ratio = 0.860 hyp_len = 54827 "
                "ref_len = 63737)"});
  require_bleu(corpus_bleu(c->hyp, {c->ref}, untokenized_bleu()),
               {47.83343031219729,
                {46611, 25369, 19595, 14157},
                {47200, 44260, 41335, 38424},
                47200,
                54702,
                "BLEU = 47.83 98.8/57.3/47.4/36.8 (BP = 0.853 ratio = 0.863 hyp_len = 47200 "
                "ref_len = 54702)"});
  require_bleu(corpus_bleu(c->hyp, {c->ref, c->ref2}),
               {61.63360910206359,
                {54238, 34444, 25536, 19394},
                {54827, 51887, 48954, 46039},
                54827,
                54370,
                "BLEU = 61.63 98.9/66.4/52.2/42.1 (BP = 1.000 ratio = 1.008 hyp_len = 54827 "
                "ref_len = 54370)"});
}

TEST_CASE("metrics sacreBLEU agreement: newstest2013.de chrF and chrF++", "[metrics][sacrebleu]") {
  const std::optional<Corpus> c = load("wmt14/newstest2013.de");
  if (!c) return;
  using tx::metrics::chrf_plus_plus_options;
  using tx::metrics::corpus_chrf;
  const std::vector<int64_t> chars = {279611, 325378, 277241, 276671, 322378, 259069,
                                      273731, 319378, 238370, 270791, 316378, 217991,
                                      267852, 313379, 200996, 264914, 310381, 186176};
  require_chrf(corpus_chrf(c->hyp, {c->ref}), 74.33488466364405, "chrF2 = 74.33", chars);
  std::vector<int64_t> pp = chars;
  pp.insert(pp.end(), {54188, 62974, 53599, 51248, 59974, 32425});
  require_chrf(corpus_chrf(c->hyp, {c->ref}, chrf_plus_plus_options()), 73.65639082995237,
               "chrF2++ = 73.66", pp);
}

TEST_CASE("metrics sacreBLEU agreement: newstest2013.de chrF++ lowercase and two references",
          "[metrics][sacrebleu]") {
  const std::optional<Corpus> c = load("wmt14/newstest2013.de");
  if (!c) return;
  using tx::metrics::chrf_plus_plus_options;
  using tx::metrics::corpus_chrf;
  require_chrf(corpus_chrf(c->hyp, {c->ref}, lowercase_chrf_pp()), 74.5760992050165,
               "chrF2++ = 74.58", {279611, 325378, 279611, 276671, 322378, 262556, 273731, 319378,
                                   241688, 270791, 316378, 221001, 267852, 313379, 203698, 264914,
                                   310381, 188676, 54188,  62974,  54188,  51248,  59974,  32871});
  require_chrf(corpus_chrf(c->hyp, {c->ref, c->ref2}, chrf_plus_plus_options()), 74.74129592680919,
               "chrF2++ = 74.74", {279611, 314185, 270579, 276671, 311185, 252332, 273731, 308185,
                                   233517, 270791, 305185, 215566, 267852, 302186, 200262, 264914,
                                   299188, 186621, 54188,  60681,  51529,  51248,  57681,  33132});
}

TEST_CASE("metrics sacreBLEU agreement: multi30k val.de BLEU", "[metrics][sacrebleu]") {
  const std::optional<Corpus> c = load("multi30k/val.de");
  if (!c) return;
  using tx::metrics::corpus_bleu;
  require_bleu(corpus_bleu(c->hyp, {c->ref}),
               {50.96150916529676,
                {10921, 6286, 4577, 3317},
                {11124, 10130, 9136, 8142},
                11124,
                12825,
                "BLEU = 50.96 98.2/62.1/50.1/40.7 (BP = 0.858 ratio = 0.867 hyp_len = 11124 "
                "ref_len = 12825)"});
  require_bleu(corpus_bleu(c->hyp, {c->ref}, lowercase_bleu()),
               {52.38879117314185,
                {11124, 6427, 4715, 3453},
                {11124, 10130, 9136, 8142},
                11124,
                12825,
                "BLEU = 52.39 100.0/63.4/51.6/42.4 (BP = 0.858 ratio = 0.867 hyp_len = 11124 "
                "ref_len = 12825)"});
  require_bleu(corpus_bleu(c->hyp, {c->ref}, untokenized_bleu()),
               {49.766482294381085,
                {9886, 5251, 3979, 2820},
                {10089, 9095, 8101, 7107},
                10089,
                11568,
                "BLEU = 49.77 98.0/57.7/49.1/39.7 (BP = 0.864 ratio = 0.872 hyp_len = 10089 "
                "ref_len = 11568)"});
  require_bleu(corpus_bleu(c->hyp, {c->ref, c->ref2}),
               {59.26016740105555,
                {10921, 6478, 4617, 3327},
                {11124, 10130, 9136, 8142},
                11124,
                11263,
                "BLEU = 59.26 98.2/63.9/50.5/40.9 (BP = 0.988 ratio = 0.988 hyp_len = 11124 "
                "ref_len = 11263)"});
}

TEST_CASE("metrics sacreBLEU agreement: multi30k val.de chrF and chrF++", "[metrics][sacrebleu]") {
  const std::optional<Corpus> c = load("multi30k/val.de");
  if (!c) return;
  using tx::metrics::chrf_plus_plus_options;
  using tx::metrics::corpus_chrf;
  const std::vector<int64_t> chars = {54838, 63138, 54147, 53844, 62124, 49957,
                                      52850, 61110, 45446, 51856, 60096, 41010,
                                      50862, 59082, 37207, 49868, 58068, 33949};
  require_chrf(corpus_chrf(c->hyp, {c->ref}), 73.70556498063601, "chrF2 = 73.71", chars);
  std::vector<int64_t> pp = chars;
  pp.insert(pp.end(), {11122, 12823, 10919, 10128, 11809, 6284});
  require_chrf(corpus_chrf(c->hyp, {c->ref}, chrf_plus_plus_options()), 73.05992622317817,
               "chrF2++ = 73.06", pp);
  require_chrf(corpus_chrf(c->hyp, {c->ref}, lowercase_chrf_pp()), 74.43504064228101,
               "chrF2++ = 74.44",
               {54838, 63138, 54838, 53844, 62124, 50914, 52850, 61110, 46349, 51856, 60096, 41845,
                50862, 59082, 37946, 49868, 58068, 34629, 11122, 12823, 11122, 10128, 11809, 6425});
  require_chrf(corpus_chrf(c->hyp, {c->ref, c->ref2}, chrf_plus_plus_options()), 73.90756798393366,
               "chrF2++ = 73.91",
               {54838, 61693, 53135, 53844, 60679, 49074, 52850, 59665, 44936, 51856, 58651, 40889,
                50862, 57637, 37336, 49868, 56623, 34218, 11122, 12477, 10578, 10128, 11463, 6391});
}

// The English side as a "hypothesis" of the German: low scores, where smoothing and the
// precision of small counts matter. sacreBLEU as above with hyp = read('.../newstest2013.en').
TEST_CASE("metrics sacreBLEU agreement: newstest2013.en scored against newstest2013.de",
          "[metrics][sacrebleu]") {
  const std::optional<fs::path> data = shared_data();
  if (!data) return;
  const Lines en = tx::metrics::read_lines((*data / "wmt14/newstest2013.en").string());
  const Lines de = tx::metrics::read_lines((*data / "wmt14/newstest2013.de").string());
  require_bleu(tx::metrics::corpus_bleu(en, {de}),
               {2.5218568508497166,
                {10848, 1808, 764, 348},
                {64505, 61505, 58512, 55538},
                64505,
                63737,
                "BLEU = 2.52 16.8/2.9/1.3/0.6 (BP = 1.000 ratio = 1.012 hyp_len = 64505 "
                "ref_len = 63737)"});
  const std::vector<int64_t> chars = {276839, 325378, 212456, 273839, 322378, 97300,
                                      270839, 319378, 41119,  267838, 316378, 25340,
                                      264838, 313379, 18270,  261842, 310381, 13535};
  require_chrf(tx::metrics::corpus_chrf(en, {de}), 21.74692093866493, "chrF2 = 21.75", chars);
  std::vector<int64_t> pp = chars;
  pp.insert(pp.end(), {63832, 62974, 9910, 60829, 59974, 1476});
  require_chrf(tx::metrics::corpus_chrf(en, {de}, tx::metrics::chrf_plus_plus_options()),
               18.587820899784322, "chrF2++ = 18.59", pp);
}

// ---- sacreBLEU agreement: tokenizers, orders, signatures, sentence level ----------------------
// newstest2019-deen.de (WMT19, often cited with tok:intl) and the derive() hypotheses above,
// from sacreBLEU 2.4.3 (regex 2026.11.15) in a venv (pip install sacrebleu==2.4.3):
//   ref = read('../shared/data/wmt-newstest-de-en/newstest2019-deen.de')
//   hyp, ref2 = derive(ref, 7, 3, 5, 50), derive(ref, 4, 2, 0, 0)
//   m = BLEU(tokenize='intl')                   # or lowercase=True, max_ngram_order=6, ...
//   s = m.corpus_score(hyp, [ref])              # or [ref, ref2]
//   print(repr(s.score), s.counts, s.totals, s.sys_len, s.ref_len,
//         s.format(2, signature=m.get_signature().format()))
// The command line prints the same lines (hyp and ref2 written to files; the CLI has no
// max_ngram_order), and tx-score's output was checked equal to it byte for byte, version aside:
//   sacrebleu newstest2019-deen.de -i hyp.de -m bleu -w 2 -f text -tok intl
//   sacrebleu newstest2019-deen.de -i hyp.de -w 2 -sl -m bleu      (and -m chrf -cw 2, -tok intl)

namespace {

// sacreBLEU's line with its own version replaced by tx's.
std::string with_tx_version(std::string line) {
  const std::string theirs = "version:2.4.3";
  const std::size_t at = line.find(theirs);
  REQUIRE(at != std::string::npos);
  return line.replace(at, theirs.size(), "version:" + tx::metrics::signature_version());
}

void require_bleu_signed(const BleuScore& s, const BleuExpected& e, const BleuOptions& o,
                         int num_refs, const std::string& sacrebleu_line) {
  require_bleu(s, e);
  CHECK(s.format(2, tx::metrics::bleu_signature(o, num_refs)) == with_tx_version(sacrebleu_line));
}

BleuOptions bleu_with(BleuTokenizer tokenizer, int max_order = 4, bool lowercase = false) {
  BleuOptions o;
  o.tokenizer = tokenizer;
  o.max_order = max_order;
  o.lowercase = lowercase;
  return o;
}

}  // namespace

TEST_CASE("metrics sacreBLEU agreement: newstest2019-deen.de BLEU with tok intl and char",
          "[metrics][sacrebleu]") {
  const std::optional<Corpus> c = load("wmt-newstest-de-en/newstest2019-deen.de");
  if (!c) return;
  using tx::metrics::corpus_bleu;
  const BleuOptions intl = bleu_with(BleuTokenizer::kIntl);
  require_bleu_signed(corpus_bleu(c->hyp, {c->ref}, intl),
                      {52.07085047230729,
                       {31785, 19464, 14606, 11004},
                       {32191, 30231, 28271, 26314},
                       32191,
                       37221,
                       "BLEU = 52.07 98.7/64.4/51.7/41.8 (BP = 0.855 ratio = 0.865 hyp_len = 32191 "
                       "ref_len = 37221)"},
                      intl, 1,
                      "BLEU|nrefs:1|case:mixed|eff:no|tok:intl|smooth:exp|version:2.4.3 = 52.07 "
                      "98.7/64.4/51.7/41.8 (BP = 0.855 ratio = 0.865 hyp_len = 32191 ref_len = "
                      "37221)");
  const BleuOptions intl_lc = bleu_with(BleuTokenizer::kIntl, 4, true);
  require_bleu_signed(corpus_bleu(c->hyp, {c->ref}, intl_lc),
                      {53.071841573286044,
                       {32179, 19783, 14914, 11302},
                       {32191, 30231, 28271, 26314},
                       32191,
                       37221,
                       "BLEU = 53.07 100.0/65.4/52.8/43.0 (BP = 0.855 ratio = 0.865 hyp_len = "
                       "32191 ref_len = 37221)"},
                      intl_lc, 1,
                      "BLEU|nrefs:1|case:lc|eff:no|tok:intl|smooth:exp|version:2.4.3 = 53.07 "
                      "100.0/65.4/52.8/43.0 (BP = 0.855 ratio = 0.865 hyp_len = 32191 ref_len = "
                      "37221)");
  require_bleu_signed(corpus_bleu(c->hyp, {c->ref, c->ref2}, intl),
                      {61.67454758644021,
                       {31786, 20131, 14992, 11255},
                       {32191, 30231, 28271, 26314},
                       32191,
                       32435,
                       "BLEU = 61.67 98.7/66.6/53.0/42.8 (BP = 0.992 ratio = 0.992 hyp_len = 32191 "
                       "ref_len = 32435)"},
                      intl, 2,
                      "BLEU|nrefs:2|case:mixed|eff:no|tok:intl|smooth:exp|version:2.4.3 = 61.67 "
                      "98.7/66.6/53.0/42.8 (BP = 0.992 ratio = 0.992 hyp_len = 32191 ref_len = "
                      "32435)");
  const BleuOptions chars = bleu_with(BleuTokenizer::kChar);
  require_bleu_signed(corpus_bleu(c->hyp, {c->ref}, chars),
                      {76.65614992915482,
                       {158875, 147928, 135842, 124045},
                       {160538, 158578, 156618, 154658},
                       160538,
                       185443,
                       "BLEU = 76.66 99.0/93.3/86.7/80.2 (BP = 0.856 ratio = 0.866 hyp_len = "
                       "160538 ref_len = 185443)"},
                      chars, 1,
                      "BLEU|nrefs:1|case:mixed|eff:no|tok:char|smooth:exp|version:2.4.3 = 76.66 "
                      "99.0/93.3/86.7/80.2 (BP = 0.856 ratio = 0.866 hyp_len = 160538 ref_len = "
                      "185443)");
}

TEST_CASE("metrics sacreBLEU agreement: newstest2019-deen.de BLEU with max_ngram_order 1, 2, 6",
          "[metrics][sacrebleu]") {
  const std::optional<Corpus> c = load("wmt-newstest-de-en/newstest2019-deen.de");
  if (!c) return;
  using tx::metrics::corpus_bleu;
  require_bleu(corpus_bleu(c->hyp, {c->ref}, bleu_with(BleuTokenizer::k13a, 2)),
               {67.81998461879834,
                {31131, 18810},
                {31521, 29561},
                31521,
                36440,
                "BLEU = 67.82 98.8/63.6 (BP = 0.856 ratio = 0.865 hyp_len = 31521 ref_len = "
                "36440)"});
  require_bleu(corpus_bleu(c->hyp, {c->ref}, bleu_with(BleuTokenizer::k13a, 6)),
               {38.52639379309668,
                {31131, 18810, 14033, 10531, 7384, 4438},
                {31521, 29561, 27601, 25644, 23693, 21759},
                31521,
                36440,
                "BLEU = 38.53 98.8/63.6/50.8/41.1/31.2/20.4 (BP = 0.856 ratio = 0.865 hyp_len = "
                "31521 ref_len = 36440)"});
  require_bleu(corpus_bleu(c->hyp, {c->ref}, bleu_with(BleuTokenizer::kIntl, 1)),
               {84.45534238350373,
                {31785},
                {32191},
                32191,
                37221,
                "BLEU = 84.46 98.7 (BP = 0.855 ratio = 0.865 hyp_len = 32191 ref_len = 37221)"});
}

// The English side as a "hypothesis" of the German: low counts, where smoothing matters.
// sacreBLEU as above with hyp = read('.../newstest2019-deen.en').
TEST_CASE("metrics sacreBLEU agreement: newstest2019-deen.en scored against the .de",
          "[metrics][sacrebleu]") {
  const std::optional<fs::path> data = shared_data();
  if (!data) return;
  const Lines en =
      tx::metrics::read_lines((*data / "wmt-newstest-de-en/newstest2019-deen.en").string());
  const Lines de =
      tx::metrics::read_lines((*data / "wmt-newstest-de-en/newstest2019-deen.de").string());
  using tx::metrics::corpus_bleu;
  require_bleu(corpus_bleu(en, {de}, bleu_with(BleuTokenizer::kIntl)),
               {5.119406982529408,
                {8265, 2377, 1080, 603},
                {40010, 38010, 36010, 34013},
                40010,
                37221,
                "BLEU = 5.12 20.7/6.3/3.0/1.8 (BP = 1.000 ratio = 1.075 hyp_len = 40010 ref_len = "
                "37221)"});
  require_bleu(corpus_bleu(en, {de}, bleu_with(BleuTokenizer::kChar)),
               {26.751570375717733,
                {129273, 62045, 31636, 22513},
                {171574, 169574, 167574, 165574},
                171574,
                185443,
                "BLEU = 26.75 75.3/36.6/18.9/13.6 (BP = 0.922 ratio = 0.925 hyp_len = 171574 "
                "ref_len = 185443)"});
  require_bleu(corpus_bleu(en, {de}, bleu_with(BleuTokenizer::k13a, 6)),
               {3.234912058377542,
                {8074, 2433, 1120, 610, 429, 311},
                {39227, 37227, 35227, 33230, 31238, 29261},
                39227,
                36440,
                "BLEU = 3.23 20.6/6.5/3.2/1.8/1.4/1.1 (BP = 1.000 ratio = 1.076 hyp_len = 39227 "
                "ref_len = 36440)"});
}

// Sentence level, as sacreBLEU's BLEU(effective_order=True).sentence_score(h, [r]) over every
// line (and CHRF(word_order=2).sentence_score): the first five scores, the sum of all 2000, and
// a few whole lines with signatures.
TEST_CASE("metrics sacreBLEU agreement: newstest2019-deen.de sentence BLEU and chrF++",
          "[metrics][sacrebleu]") {
  const std::optional<Corpus> c = load("wmt-newstest-de-en/newstest2019-deen.de");
  if (!c) return;
  const auto check_all = [&](const auto& score_line, const std::vector<double>& first, double sum) {
    double total = 0;
    for (std::size_t i = 0; i < c->hyp.size(); ++i) {
      const double s = score_line(i).score;
      if (i < first.size()) {
        INFO("line " << i);
        CHECK(s == Approx(first[i]).epsilon(1e-12));
      }
      total += s;
    }
    CHECK(total == Approx(sum).epsilon(1e-12));
  };

  const BleuOptions sentence = tx::metrics::sentence_bleu_options();
  const auto bleu_line = [&](std::size_t i) {
    return tx::metrics::sentence_bleu(c->hyp[i], {c->ref[i]}, sentence);
  };
  check_all(bleu_line,
            {74.26141117870938, 52.70837136273562, 50.81327481546149, 100.00000000000004,
             61.84887106540979},
            101504.49627271513);
  const std::string sig = tx::metrics::bleu_signature(sentence, 1);
  CHECK(bleu_line(0).format(2, sig) ==
        with_tx_version("BLEU|nrefs:1|case:mixed|eff:yes|tok:13a|smooth:exp|version:2.4.3 = "
                        "74.26 100.0/90.0/77.8/62.5 (BP = 0.913 ratio = 0.917 hyp_len = 11 "
                        "ref_len = 12)"));
  CHECK(bleu_line(49).format(2, sig) ==  // an emptied hypothesis
        with_tx_version("BLEU|nrefs:1|case:mixed|eff:yes|tok:13a|smooth:exp|version:2.4.3 = "
                        "0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = "
                        "23)"));

  BleuOptions intl_lc = sentence;
  intl_lc.tokenizer = BleuTokenizer::kIntl;
  intl_lc.lowercase = true;
  const auto intl_line = [&](std::size_t i) {
    return tx::metrics::sentence_bleu(c->hyp[i], {c->ref[i], c->ref2[i]}, intl_lc);
  };
  check_all(intl_line,
            {74.26141117870938, 100.00000000000004, 50.81327481546149, 100.00000000000004,
             80.51226126912722},
            116489.79349014517);
  CHECK(intl_line(2).format(2, tx::metrics::bleu_signature(intl_lc, 2)) ==
        with_tx_version("BLEU|nrefs:2|case:lc|eff:yes|tok:intl|smooth:exp|version:2.4.3 = "
                        "50.81 100.0/66.7/40.0/25.0 (BP = 1.000 ratio = 1.000 hyp_len = 7 "
                        "ref_len = 7)"));

  const ChrfOptions pp = tx::metrics::chrf_plus_plus_options();
  const auto chrf_line = [&](std::size_t i) {
    return tx::metrics::sentence_chrf(c->hyp[i], {c->ref[i]}, pp);
  };
  check_all(chrf_line,
            {91.31226760444515, 78.44250182021827, 61.91287878787879, 100.0, 76.905035826698},
            147953.52339451577);
  CHECK(chrf_line(0).format(2, tx::metrics::chrf_signature(pp, 1)) ==
        with_tx_version(
            "chrF2++|nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:2.4.3 = 91.31"));
}
