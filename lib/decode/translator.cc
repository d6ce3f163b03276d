#include "decode/translator.h"

#include <algorithm>
#include <charconv>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "core/format.h"
#include "core/text_file.h"
#include "data/ordered_output.h"

namespace tx::decode {
namespace {

// The rows of the batches `next_batch` hands out, one sentence at a time, for
// BeamSearch::search_stream. Empty rows (eos only) are not searched — a model given only eos
// would still invent words — but go to `empty` as they come.
std::function<bool(SourceSentence&)> sentences_of(
    std::function<bool(data::SourceBatch&)> next_batch, std::function<void(int64_t)> empty) {
  auto batch = std::make_shared<data::SourceBatch>();
  auto row = std::make_shared<int64_t>(0);
  return [=](SourceSentence& s) {
    while (true) {
      if (*row == batch->size) {
        if (!next_batch(*batch)) return false;
        *row = 0;
        continue;
      }
      const int64_t r = (*row)++;
      const int64_t index = batch->indices.empty() ? r : batch->indices[r];
      if (batch->src_lengths[r] <= 1) {
        empty(index);
        continue;
      }
      s.index = index;
      s.ids = batch->row(r);
      s.prefix = batch->prefixes.empty() ? std::vector<int32_t>() : batch->prefixes[r];
      return true;
    }
  };
}

// The search's options, with alignments when the output shows them.
BeamSearchOptions search_options(const TranslatorOptions& o) {
  BeamSearchOptions search = o.search;
  search.alignment = o.alignment.kind != AlignmentKind::none;
  return search;
}

// Token i's word for --alignment-words, -1 for none (eos).
WordMap words_of(const data::Vocab& vocab, const std::vector<int32_t>& ids) {
  // Words are the whitespace-separated words of the decoded text: a piece that starts with
  // U+2581 (SentencePiece's space) begins one; a piece of spaces alone goes with the word that
  // follows it, or with none at the end; eos is in none.
  static const std::string kSpace = "\xE2\x96\x81";
  WordMap words(ids.size(), -1);
  if (!vocab.has_sentencepiece()) {  // Marian's token lists: decode() joins tokens with spaces
    int32_t word = 0;
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] != vocab.eos_id()) words[i] = word++;
    return words;
  }
  std::vector<size_t> spaces;  // space-only pieces waiting for the next word
  int32_t word = -1;
  bool boundary = true;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == vocab.eos_id()) continue;
    std::string piece = vocab.piece(ids[i]);
    size_t at = 0;
    while (piece.compare(at, kSpace.size(), kSpace) == 0) at += kSpace.size();
    boundary = boundary || at > 0;
    if (at == piece.size()) {
      spaces.push_back(i);
      continue;
    }
    if (boundary) ++word;
    boundary = false;
    for (size_t k : spaces) words[k] = word;
    spaces.clear();
    words[i] = word;
  }
  return words;
}

// The words of the printed translation, each token's found by decoding the text up to it: a
// token printed otherwise than its piece is spelled (an unknown token's " ⁇ ", or nothing at
// all in some vocabularies) then counts as the printed text does. A token is in the word of the
// first non-space character it adds (or changes, where decoding rewrites the text before it);
// one that adds only spaces goes with the word that follows, or with none at the end; eos is in
// none. Each prefix is decoded, n^2 / 2 pieces for n tokens (20,000 for a 200-token output):
// small beside the search that made them, and it is done only with --alignment-words.
WordMap printed_words_of(const data::Vocab& vocab, const std::vector<int32_t>& ids) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  WordMap words(ids.size(), -1);
  std::vector<int32_t> prefix;
  std::string before;
  std::vector<size_t> waiting;  // tokens of spaces alone, for the next word
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == vocab.eos_id()) continue;
    prefix.push_back(ids[i]);
    std::string now = vocab.decode(prefix);
    size_t at = 0;
    while (at < before.size() && at < now.size() && before[at] == now[at]) ++at;
    while (at < now.size() && space(now[at])) ++at;
    if (at == now.size()) {
      waiting.push_back(i);
    } else {
      int32_t word = -1;  // the words that start at or before `at`, less one
      for (size_t k = 0; k <= at; ++k)
        if (!space(now[k]) && (k == 0 || space(now[k - 1]))) ++word;
      for (size_t k : waiting) words[k] = word;
      waiting.clear();
      words[i] = word;
    }
    before = std::move(now);
  }
  return words;
}

}  // namespace

Translator::Translator(Backend& be, const nn::Transformer& model, const data::Vocab& src_vocab,
                       const data::Vocab& tgt_vocab, TranslatorOptions options)
    : Translator(be, std::vector<const nn::Transformer*>{&model}, src_vocab, tgt_vocab, options) {}

Translator::Translator(Backend& be, std::vector<const nn::Transformer*> models,
                       const data::Vocab& src_vocab, const data::Vocab& tgt_vocab,
                       TranslatorOptions options, std::vector<float> weights)
    : src_vocab_(src_vocab),
      tgt_vocab_(tgt_vocab),
      options_(options),
      search_(be, models, search_options(options), std::move(weights)) {
  int64_t max_length = models.front()->config().max_length;
  for (const nn::Transformer* model : models) {
    TX_CHECK(model->config().src_vocab_size == src_vocab.size(),
             "the model's source vocabulary has ", model->config().src_vocab_size, " ids but '",
             src_vocab.path(), "' has ", src_vocab.size(),
             "; give the vocabulary the model was trained with");
    TX_CHECK(model->config().tgt_vocab_size == tgt_vocab.size(),
             "the model's target vocabulary has ", model->config().tgt_vocab_size, " ids but '",
             tgt_vocab.path(), "' has ", tgt_vocab.size(),
             "; give the vocabulary the model was trained with");
    max_length = std::min<int64_t>(max_length, model->config().max_length);
  }
  if (options_.deterministic) options_.batching.max_sentences = 1;
  if (options_.force_decode) options_.batching.prefix_vocab = &tgt_vocab_;
  options_.search = search_options(options_);
  options_.batching.ids = data::special_ids(models.front()->config());
  // Positions 0 .. max_length - 1 hold the source tokens and eos (of every model).
  TX_CHECK(max_length >= 2, "the model's max_length of ", max_length,
           " leaves no position for a source token beside eos; it cannot translate");
  const int64_t fits = max_length - 1;
  if (options_.batching.max_source_tokens <= 0 || options_.batching.max_source_tokens > fits)
    options_.batching.max_source_tokens = fits;
  // A --force-decode prefix: positions 0 .. max_length - 2 hold the target tokens the search
  // steps through (beam_search.cc crops to the same).
  options_.batching.max_prefix_tokens = fits;
  if (models.size() > 1 && options_.search.scores) empty_.model_log_probs.assign(models.size(), 0);
  // marian-decoder decodes an empty line as eos alone and aligns the two eos: ` ||| 0-0`.
  if (options_.search.alignment) empty_.alignment = {{1.0f}};
}

std::string Translator::alignment_of(const Hypothesis& h,
                                     const std::vector<int32_t>* source) const {
  const AlignmentOptions& o = options_.alignment;
  if (!o.words) return format_alignment(h.alignment, o);
  const std::vector<int32_t> eos_only{src_vocab_.eos_id()};  // an empty line's source
  if (!source) source = &eos_only;
  std::vector<int32_t> target = h.ids;
  if (h.eos) target.push_back(tgt_vocab_.eos_id());
  // The source's words are its line's, which its pieces spell (an unknown token stands for what
  // the line held there); the translation's are those printed.
  const WordMap src = words_of(src_vocab_, *source), tgt = printed_words_of(tgt_vocab_, target);
  return format_alignment(h.alignment, o, &src, &tgt);
}

SearchLimits Translator::limits() const {
  return {options_.batching.max_sentences, options_.batching.max_tokens};
}

std::string Translator::format(int64_t index, const NBest& nbest) const {
  return format(index, nbest, {});
}

std::string Translator::format(int64_t index, const NBest& nbest,
                               const std::vector<int32_t>& source) const {
  const bool aligned = options_.alignment.kind != AlignmentKind::none;
  auto alignment = [&](const Hypothesis& h) {
    return " ||| " + alignment_of(h, source.empty() ? nullptr : &source);
  };
  if (options_.search.n_best == 1) {
    if (nbest.empty()) return aligned ? " ||| " : "";
    return tgt_vocab_.decode(nbest[0].ids) + (aligned ? alignment(nbest[0]) : "");
  }
  if (nbest.empty()) {
    // A search that found nothing (a shortlist and --min-length leaving no token to choose):
    // an empty translation's entry, without alignment, so that every index still appears.
    Hypothesis none = empty_;
    none.alignment.clear();
    return format(index, NBest{none}, source);
  }
  std::ostringstream s;
  for (size_t i = 0; i < nbest.size(); ++i) {
    if (i > 0) s << '\n';
    s << index << " ||| " << tgt_vocab_.decode(nbest[i].ids);
    if (aligned) s << (nbest[i].alignment.empty() ? " ||| " : alignment(nbest[i]));
    s << " |||";
    // An ensemble's lines give each model's log-prob, as marian-decoder's do.
    const std::vector<float>& parts = nbest[i].model_log_probs;
    if (parts.empty()) s << " F0= " << shortest(nbest[i].log_prob);
    for (size_t m = 0; m < parts.size(); ++m) s << " F" << m << "= " << shortest(parts[m]);
    s << " ||| " << shortest(nbest[i].score);
  }
  return s.str();
}

int64_t Translator::translate_stream(std::istream& in, std::ostream& out, const std::string& name,
                                     const std::function<void(int64_t)>& on_batch) {
  data::InferenceBatcher batcher(in, name, src_vocab_, options_.batching);
  data::OrderedOutput output(out);
  int64_t done = 0;
  // Alignments in words need each sentence's source pieces until it is printed.
  const bool words = options_.alignment.kind != AlignmentKind::none && options_.alignment.words;
  std::unordered_map<int64_t, std::vector<int32_t>> sources;
  auto finished = [&](int64_t index, const NBest& nbest) {
    auto it = sources.find(index);
    output.put(index,
               it == sources.end() ? format(index, nbest) : format(index, nbest, it->second));
    if (it != sources.end()) sources.erase(it);
    if (on_batch) on_batch(++done);
  };
  // An input error (a bad line) ends the input for the search, which then finishes the lines
  // before it: they are written, and the error raised after them.
  std::exception_ptr input_error;
  auto next = sentences_of(
      [&](data::SourceBatch& b) {
        try {
          return batcher.next(b);
        } catch (const Error&) {
          input_error = std::current_exception();
          return false;
        }
      },
      [&](int64_t index) { finished(index, NBest{empty_}); });
  search_.search_stream(
      [&](SourceSentence& s) {
        if (!next(s)) return false;
        if (words) sources[s.index] = s.ids;
        return true;
      },
      finished, limits());
  output.finish(batcher.lines_read());
  lines_cropped_ = batcher.lines_cropped();
  first_cropped_line_ = batcher.first_cropped_line();
  if (input_error) std::rethrow_exception(input_error);
  return batcher.lines_read();
}

std::vector<std::string> Translator::translate_lines(const std::vector<std::string>& lines) {
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(lines.size());
  lines_cropped_ = first_cropped_line_ = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    try {
      // The stream's LineReader's check: invalid UTF-8, or a NUL (binary or UTF-16 text).
      const std::string problem = describe_text_line_problem(lines[i]);
      TX_CHECK(problem.empty(), problem);
      ids.push_back(src_vocab_.encode_head(lines[i], options_.batching.max_source_tokens));
    } catch (const Error& e) {
      throw Error("line " + std::to_string(i + 1) + ": " + e.what());
    }
    if (data::crop_source(ids.back(), options_.batching.max_source_tokens) && lines_cropped_++ == 0)
      first_cropped_line_ = static_cast<int64_t>(i) + 1;
  }
  std::vector<std::string> out(lines.size());
  const std::vector<data::SourceBatch> batches =
      data::make_source_batches(ids, 0, options_.batching);
  size_t next = 0;
  search_.search_stream(
      sentences_of(
          [&](data::SourceBatch& b) {
            if (next == batches.size()) return false;
            b = batches[next++];
            return true;
          },
          [](int64_t) {}),
      [&](int64_t index, const NBest& nbest) {
        out[index] = nbest.empty() ? "" : tgt_vocab_.decode(nbest[0].ids);
      },
      limits());
  return out;
}

}  // namespace tx::decode
