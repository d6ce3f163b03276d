// tx-translate: translates stdin (or --input) to stdout with beam search, one output line per
// input line in input order. The work is decode::Translator; this file is the command line.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common/app_log.h"
#include "common/command_line.h"
#include "common/model_setup.h"
#include "core/text_file.h"
#include "core/text_input.h"
#include "decode/shortlist.h"
#include "decode/translator.h"

namespace {

using tx::app::Options;

// Lines of a regular file, gzip or not (a last line without '\n' counts), or 0 when it cannot
// be read or is not a regular file (a pipe can be read only once: translation needs it).
int64_t count_lines(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return 0;
  try {
    tx::TextInput f(path);
    int64_t lines = 0;
    char last = '\n';
    std::vector<char> buf(1 << 16);
    while (f.read(buf.data(), std::streamsize(buf.size())) || f.gcount() > 0) {
      const std::streamsize n = f.gcount();
      lines += std::count(buf.data(), buf.data() + n, '\n');
      last = buf[size_t(n) - 1];
    }
    return f.bad() ? 0 : lines + (last != '\n');
  } catch (const tx::Error&) {
    return 0;
  }
}

// --output-sampling full [T] | topk K [T], as Marian reads it.
tx::decode::SamplingOptions sampling_options(const std::vector<std::string>& v) {
  const std::string usage = "; give 'full [TEMPERATURE]' or 'topk K [TEMPERATURE]'";
  tx::decode::SamplingOptions s;
  s.on = true;
  auto number = [&](const std::string& text, const char* what) {
    if (const std::optional<double> x = tx::app::parse_number(text)) return *x;
    throw tx::app::UsageError(
        tx::str("--output-sampling: ", what, " '", text, "' is not a number", usage));
  };
  size_t next = 1;
  if (v.empty() || (v[0] != "full" && v[0] != "topk"))
    throw tx::app::UsageError(
        tx::str("--output-sampling: unknown mode '", v.empty() ? "" : v[0], "'", usage));
  if (v[0] == "topk") {
    if (v.size() < 2) throw tx::app::UsageError("--output-sampling topk: K is missing" + usage);
    const double k = number(v[1], "K");
    if (k < 1 || k != std::floor(k))
      throw tx::app::UsageError(
          tx::str("--output-sampling topk ", v[1], ": K must be a positive integer", usage));
    // Beyond the vocabulary K is the whole of it ('full' draws the same).
    if (k > 1e9)
      throw tx::app::UsageError(tx::str("--output-sampling topk ", v[1],
                                        ": K is beyond any vocabulary; give 'full' to draw from "
                                        "the whole vocabulary"));
    s.top_k = static_cast<int>(k);
    next = 2;
  }
  if (v.size() > next) {
    const double t = number(v[next], "temperature");
    // Checked as written, not as the float it becomes (1e-50 is 0 there, 1e39 infinity).
    if (t <= 0 || t > 1e30)
      throw tx::app::UsageError(tx::str("--output-sampling: the temperature ", v[next],
                                        " must lie in (0, 1e30] (below 1 sharper, above 1 "
                                        "flatter; near 0 the most probable token)",
                                        usage));
    s.temperature = static_cast<float>(std::max(t, 1e-38));
  }
  if (v.size() > next + 1)
    throw tx::app::UsageError(tx::str("--output-sampling: unexpected '", v[next + 1], "'", usage));
  return s;
}

tx::decode::TranslatorOptions translator_options(const Options& o) {
  tx::decode::TranslatorOptions t;
  t.search.beam_size = o.int32("beam-size");
  t.search.n_best = o.int32("n-best");
  // Only the n-best format prints scores; greedy search then skips the log-softmax.
  t.search.scores = t.search.n_best > 1;
  t.search.length_penalty = static_cast<float>(o.number("normalize"));
  t.search.max_length_a = static_cast<float>(o.number("max-length-factor"));
  t.search.max_length_b = o.int32("max-length-b");
  t.batching.max_tokens = o.integer("max-tokens");
  t.batching.max_sentences = o.integer("mini-batch");
  t.batching.maxi_batch = o.integer("maxi-batch");
  t.deterministic = o.flag("deterministic");
  t.force_decode = o.flag("force-decode");
  if (o.has("output-sampling")) {
    t.search.sampling = sampling_options(o.list("output-sampling"));
    t.search.sampling.seed = static_cast<uint64_t>(o.integer("seed"));
    t.search.beam_size = 1;  // Marian's: sampling implies --beam-size 1
  }
  if (o.has("alignment")) {
    try {
      t.alignment = tx::decode::parse_alignment(o.list("alignment"));
    } catch (const tx::Error& e) {
      throw tx::app::UsageError(e.what());
    }
    t.alignment.words = o.flag("alignment-words");
  } else if (o.flag("alignment-words")) {
    throw tx::app::UsageError("--alignment-words needs --alignment (hard, soft or a threshold)");
  }
  try {
    t.search.validate();
  } catch (const tx::Error& e) {  // e.g. --n-best above --beam-size: the caller's mistake
    throw tx::app::UsageError(e.what());
  }
  return t;
}

// One vocabulary for both sides (Marian: the same file as source and target vocabulary).
bool shared_vocabularies(const tx::app::LoadedModels& m) {
  std::error_code ec;
  return m.src_vocab().path() == m.tgt_vocab().path() ||
         std::filesystem::equivalent(m.src_vocab().path(), m.tgt_vocab().path(), ec);
}

// --shortlist FILE [FIRST [BEST]], Marian's defaults.
std::unique_ptr<tx::decode::LexicalShortlist> shortlist(const Options& o,
                                                        const tx::app::LoadedModels& m) {
  if (!o.has("shortlist")) return nullptr;
  const std::vector<std::string> v = o.list("shortlist");
  const std::string usage = "; give FILE [FIRST [BEST]], e.g. --shortlist lex.s2t 100 100";
  if (v.empty() || v.size() > 3)
    throw tx::app::UsageError(
        tx::str("--shortlist: expected 1 to 3 values, got ", v.size(), usage));
  auto count = [&](size_t i, const char* what) -> int64_t {
    if (i >= v.size()) return 100;
    const std::optional<double> n = tx::app::parse_number(v[i]);
    if (n && *n >= 0 && *n == std::floor(*n) && *n < 1e15) return static_cast<int64_t>(*n);
    throw tx::app::UsageError(
        tx::str("--shortlist: ", what, " '", v[i], "' is not a count (0 or more)", usage));
  };
  const int64_t first = count(1, "FIRST"), best = count(2, "BEST");
  auto list = std::make_unique<tx::decode::LexicalShortlist>(v[0], m.src_vocab(), m.tgt_vocab(),
                                                             first, best, shared_vocabularies(m));
  tx::app::detail(o, "shortlist ", v[0], ": ", list->pairs(), " pairs, the first ", first,
                  " target words and ", best, " translations per source word");
  return list;
}

int translate(const Options& options) {
  tx::decode::TranslatorOptions topts = translator_options(options);
  const auto start = std::chrono::steady_clock::now();
  tx::app::LoadedModels m(options);
  const std::unique_ptr<tx::decode::LexicalShortlist> lexical = shortlist(options, m);
  topts.search.shortlist = lexical.get();
  const std::string rule = options.text("search-rule");
  if (rule == "marian" || (rule == "auto" && m.from_marian()))
    topts.search.rule = tx::decode::SearchRule::marian;
  if (rule == "huggingface" || (rule == "auto" && m.from_huggingface()))
    topts.search.rule = tx::decode::SearchRule::huggingface;
  // marian-decoder never produces <unk> unless --allow-unk.
  if (m.from_marian()) topts.search.allow_unk = false;
  // fairseq-generate forbids an empty output (its --min-len 1).
  const int min_length = options.int32("min-length");
  topts.search.min_length = min_length >= 0 ? min_length : m.from_fairseq() ? 1 : 0;
  tx::decode::Translator translator(m.backend(), m.transformers(), m.src_vocab(), m.tgt_vocab(),
                                    topts, m.weights());
  // TX_PROFILE=1: the GEMMs' share of the translation, on stderr at the end (a diagnostic; each
  // GEMM is synchronised, so a GPU loses its overlap).
  const char* profile = std::getenv("TX_PROFILE");
  const bool profiling = profile && *profile && std::string(profile) != "0";
  if (profiling) {
    m.backend().set_profiling(true);
    m.backend().take_gemm_tally();
  }
  const auto translating = std::chrono::steady_clock::now();

  const std::string input = options.has("input") ? options.text("input") : "-";
  if (input != "-") tx::check_readable_file(input, "input file (--input)");
  // gzip or not, as tx-train's and tx-score's text (core/text_input.h); stdin too.
  const std::unique_ptr<tx::TextInput> in =
      input == "-" ? std::make_unique<tx::TextInput>(0) : std::make_unique<tx::TextInput>(input);
  // The progress display (terminals only): lines done and their rate, with an ETA when the
  // input is a file whose lines can be counted first.
  std::function<void(int64_t)> on_batch;
  if (tx::stderr_is_terminal() && options.log_level() != tx::app::LogLevel::quiet) {
    const int64_t total = input == "-" ? 0 : count_lines(input);
    on_batch = [start, total](int64_t done) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double rate = done / std::max(secs, 1e-9);
      std::string text = tx::str(done, total > 0 ? tx::str(" / ", total) : "",
                                 " lines : ", static_cast<int64_t>(rate), " lines/s");
      if (total > 0 && rate > 0)
        text += tx::str(" : ETA ", static_cast<int64_t>((total - done) / rate), "s");
      tx::progress(text);
    };
  }
  const int64_t lines =
      translator.translate_stream(*in, std::cout, input == "-" ? "<stdin>" : input, on_batch);
  tx::progress_done();
  std::cout.flush();
  if (!std::cout) throw tx::Error("writing the translations to stdout failed");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  tx::app::info(options, "translated ", lines, " line", lines == 1 ? "" : "s", " in ",
                tx::str(static_cast<int64_t>(seconds * 100) / 100.0), "s");
  if (profiling) {
    const tx::Backend::GemmTally t = m.backend().take_gemm_tally();
    const double search =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - translating).count();
    std::fprintf(stderr,
                 "tx-translate: profile: GEMMs %.2f s of %.2f s translating (%.0f%%), "
                 "%lld calls, %.1f GFLOP/s\n",
                 t.seconds, search, 100 * t.seconds / search, static_cast<long long>(t.calls),
                 t.flop / 1e9 / std::max(t.seconds, 1e-9));
  }
  if (translator.lines_cropped() > 0)
    tx::app::info(options, "cropped ", translator.lines_cropped(),
                  options.flag("force-decode") ? " line" : " source line",
                  translator.lines_cropped() == 1 ? "" : "s",
                  options.flag("force-decode") ? " (source or prefix)" : "", " (the first: line ",
                  translator.first_cropped_line(), ") to the ",
                  translator.options().batching.max_source_tokens,
                  " tokens the model's positions cover (its max_length is ", m.max_length(),
                  "); split long lines before translating");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);  // stdin and stdout through iostreams only: unsynced is faster
  return tx::app::run_main(tx::app::kTranslate,
                           "tx-translate: translate stdin to stdout with beam search, one output "
                           "line per input line.\nExample: tx-translate -m model.safetensors -v "
                           "src.spm tgt.spm --beam-size 5 < input.txt > output.txt",
                           argc, argv, translate);
}
