#include "decode/translator.h"

#include <charconv>
#include <sstream>

#include "core/error.h"
#include "data/ordered_output.h"

namespace tx::decode {
namespace {

// The shortest text that reads back as exactly `v`: n-best scores keep every bit, so two runs
// can be compared exactly, and stay as short as Marian's where six digits suffice.
std::string shortest(float v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, ec == std::errc() ? end : buf);
}

}  // namespace

Translator::Translator(Backend& be, const nn::Transformer& model, const data::Vocab& src_vocab,
                       const data::Vocab& tgt_vocab, TranslatorOptions options)
    : src_vocab_(src_vocab),
      tgt_vocab_(tgt_vocab),
      options_(options),
      search_(be, model, options.search) {
  TX_CHECK(model.config().src_vocab_size == src_vocab.size(), "the model's source vocabulary has ",
           model.config().src_vocab_size, " ids but '", src_vocab.path(), "' has ",
           src_vocab.size(), "; give the vocabulary the model was trained with");
  TX_CHECK(model.config().tgt_vocab_size == tgt_vocab.size(), "the model's target vocabulary has ",
           model.config().tgt_vocab_size, " ids but '", tgt_vocab.path(), "' has ",
           tgt_vocab.size(), "; give the vocabulary the model was trained with");
  if (options_.deterministic) options_.batching.max_sentences = 1;
  // Positions 0 .. max_length - 1 hold the source tokens and eos.
  const int64_t fits = model.config().max_length - 1;
  if (options_.batching.max_source_tokens <= 0 || options_.batching.max_source_tokens > fits)
    options_.batching.max_source_tokens = fits;
}

std::vector<NBest> Translator::translate_batch(const data::SourceBatch& batch) {
  // The non-empty rows, as a batch of their own (same width: padding is harmless).
  data::SourceBatch rest;
  rest.src_len = batch.src_len;
  std::vector<int64_t> kept;
  for (int64_t r = 0; r < batch.size; ++r) {
    if (batch.src_lengths[r] <= 1) continue;
    kept.push_back(r);
    rest.src.insert(rest.src.end(), batch.src.begin() + r * batch.src_len,
                    batch.src.begin() + (r + 1) * batch.src_len);
    rest.src_lengths.push_back(batch.src_lengths[r]);
    rest.indices.push_back(batch.indices.empty() ? r : batch.indices[r]);
  }
  rest.size = static_cast<int64_t>(kept.size());
  std::vector<NBest> found = search_.search(rest);
  std::vector<NBest> out(static_cast<size_t>(batch.size), NBest{Hypothesis{}});
  for (size_t i = 0; i < kept.size(); ++i) out[kept[i]] = std::move(found[i]);
  return out;
}

std::string Translator::format(int64_t index, const NBest& nbest) const {
  if (options_.search.n_best == 1) return nbest.empty() ? "" : tgt_vocab_.decode(nbest[0].ids);
  std::ostringstream s;
  for (size_t i = 0; i < nbest.size(); ++i) {
    if (i > 0) s << '\n';
    s << index << " ||| " << tgt_vocab_.decode(nbest[i].ids)
      << " ||| F0= " << shortest(nbest[i].log_prob) << " ||| " << shortest(nbest[i].score);
  }
  return s.str();
}

int64_t Translator::translate_stream(std::istream& in, std::ostream& out, const std::string& name,
                                     const std::function<void(int64_t)>& on_batch) {
  data::InferenceBatcher batcher(in, name, src_vocab_, options_.batching);
  data::OrderedOutput output(out);
  data::SourceBatch batch;
  int64_t done = 0;
  while (batcher.next(batch)) {
    std::vector<NBest> results = translate_batch(batch);
    for (int64_t r = 0; r < batch.size; ++r)
      output.put(batch.indices[r], format(batch.indices[r], results[r]));
    done += batch.size;
    if (on_batch) on_batch(done);
  }
  output.finish(batcher.lines_read());
  lines_cropped_ = batcher.lines_cropped();
  first_cropped_line_ = batcher.first_cropped_line();
  return batcher.lines_read();
}

std::vector<std::string> Translator::translate_lines(const std::vector<std::string>& lines) {
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(lines.size());
  lines_cropped_ = first_cropped_line_ = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    try {
      ids.push_back(src_vocab_.encode(lines[i]));
    } catch (const Error& e) {
      throw Error("line " + std::to_string(i + 1) + ": " + e.what());
    }
    if (data::crop_source(ids.back(), options_.batching.max_source_tokens) && lines_cropped_++ == 0)
      first_cropped_line_ = static_cast<int64_t>(i) + 1;
  }
  std::vector<std::string> out(lines.size());
  for (const data::SourceBatch& batch : data::make_source_batches(ids, 0, options_.batching)) {
    std::vector<NBest> results = translate_batch(batch);
    for (int64_t r = 0; r < batch.size; ++r)
      out[batch.indices[r]] = results[r].empty() ? "" : tgt_vocab_.decode(results[r][0].ids);
  }
  return out;
}

}  // namespace tx::decode
