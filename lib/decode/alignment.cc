#include "decode/alignment.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <utility>

#include "core/error.h"

namespace tx::decode {

AlignmentOptions parse_alignment(const std::vector<std::string>& values) {
  const std::string usage = "; give hard, soft or a threshold in (0, 1], e.g. --alignment 0.5";
  TX_CHECK(values.size() <= 1, "--alignment takes one value, got ", values.size(), usage);
  AlignmentOptions o;
  const std::string v = values.empty() ? "hard" : values[0];
  if (v == "hard") {
    o.kind = AlignmentKind::hard;
    return o;
  }
  if (v == "soft") {
    o.kind = AlignmentKind::soft;
    return o;
  }
  // In double: a threshold below float's range (1e-50) is still one, which links every pair
  // with a probability above 0, as its float, 0, does.
  char* end = nullptr;
  const double t = v.empty() || std::isspace(static_cast<unsigned char>(v[0]))
                       ? std::nan("")
                       : std::strtod(v.c_str(), &end);
  TX_CHECK(end == v.c_str() + v.size(), "--alignment: unknown value '", v, "'", usage);
  TX_CHECK(t > 0.0 && t <= 1.0, "--alignment ", v, ": a threshold must be in (0, 1]", usage);
  // Marian: a threshold of 1 is the hard alignment (no probability exceeds 1); decided on the
  // float the threshold is compared as (0.99999999999 is 1 there).
  o.threshold = static_cast<float>(t);
  o.kind = o.threshold == 1.0f ? AlignmentKind::hard : AlignmentKind::threshold;
  return o;
}

std::vector<SoftAlignment> soft_alignments(Graph& g, const nn::Transformer& model,
                                           const std::vector<AlignmentRequest>& requests) {
  if (requests.empty()) return {};
  const io::ModelConfig& c = model.config();
  Backend& be = g.backend();
  // Each distinct source once (a sentence's n-best share it), then its memory row per request.
  std::vector<const std::vector<int32_t>*> sources;
  std::vector<int32_t> source_of;
  int64_t S = 0, T = 0;
  for (const AlignmentRequest& r : requests) {
    if (sources.empty() || sources.back() != r.source) sources.push_back(r.source);
    source_of.push_back(static_cast<int32_t>(sources.size() - 1));
    S = std::max<int64_t>(S, static_cast<int64_t>(r.source->size()));
    // Decoder inputs: the start and every target token but the last row's (eos or the last).
    T = std::max<int64_t>(T, static_cast<int64_t>(r.target->size()) + (r.eos ? 1 : 0));
  }
  const auto B = static_cast<int64_t>(sources.size()), N = static_cast<int64_t>(requests.size());
  if (T == 0) return std::vector<SoftAlignment>(requests.size());
  std::vector<int32_t> src(static_cast<size_t>(B * S), c.pad_id), lengths;
  for (int64_t b = 0; b < B; ++b) {
    std::copy(sources[b]->begin(), sources[b]->end(), src.begin() + b * S);
    lengths.push_back(static_cast<int32_t>(sources[b]->size()));
  }
  std::vector<int32_t> tgt(static_cast<size_t>(N * T), c.pad_id), request_lengths;
  for (int64_t n = 0; n < N; ++n) {
    const AlignmentRequest& r = requests[n];
    tgt[n * T] = c.decoder_start_id;
    const int64_t rows = static_cast<int64_t>(r.target->size()) + (r.eos ? 1 : 0);
    for (int64_t t = 1; t < rows; ++t) tgt[n * T + t] = (*r.target)[t - 1];
    request_lengths.push_back(lengths[source_of[n]]);
  }
  NoGradScope no_grad(g);
  EvalScope eval(g);
  const Var memory = model.encode(g, be.upload(src, {B, S}), be.upload(lengths, {B}));
  Var rows = memory;
  if (B != N) {
    const int64_t d = memory->value.dim(2);
    const Tensor copies = g.alloc({N, S, d});
    be.gather_rows(memory->value.view({B, S * d}), be.upload(source_of, {N}),
                   copies.view({N, S * d}));
    rows = make_var(copies);
  }
  const int layer = c.aligned_layer();
  const Var probs = model.cross_attention(g, rows, be.upload(request_lengths, {N}),
                                          be.upload(tgt, {N, T}), layer);
  const std::vector<float> p = be.download<float>(probs->value);  // [N, H, T, S]
  const int H = c.heads, head = c.alignment_head;
  TX_CHECK(head < H, "the model's alignment head ", head, " is not among its ", H, " heads");
  std::vector<SoftAlignment> out(requests.size());
  for (int64_t n = 0; n < N; ++n) {
    const AlignmentRequest& r = requests[n];
    const int64_t rows_n = static_cast<int64_t>(r.target->size()) + (r.eos ? 1 : 0);
    const int64_t cols = request_lengths[n];
    SoftAlignment& a = out[n];
    a.assign(static_cast<size_t>(rows_n), std::vector<float>(static_cast<size_t>(cols), 0.0f));
    auto at = [&](int64_t h, int64_t t, int64_t s) { return p[((n * H + h) * T + t) * S + s]; };
    for (int64_t t = 0; t < rows_n; ++t)
      for (int64_t s = 0; s < cols; ++s) {
        if (head >= 0) {
          a[t][s] = at(head, t, s);
          continue;
        }
        float sum = 0;
        for (int h = 0; h < H; ++h) sum += at(h, t, s);
        a[t][s] = sum / static_cast<float>(H);
      }
  }
  return out;
}

namespace {

// Rows and columns summed into words (rows then divided by their word's tokens).
SoftAlignment in_words(const SoftAlignment& a, const WordMap& src, const WordMap& tgt) {
  auto count = [](const WordMap& m) {
    int32_t n = 0;
    for (int32_t w : m) n = std::max(n, w + 1);
    return n;
  };
  const int32_t rows = count(tgt), cols = count(src);
  SoftAlignment w(static_cast<size_t>(rows), std::vector<float>(static_cast<size_t>(cols), 0.0f));
  std::vector<int> tokens(static_cast<size_t>(rows), 0);
  for (size_t t = 0; t < a.size() && t < tgt.size(); ++t) {
    if (tgt[t] < 0) continue;
    ++tokens[tgt[t]];
    for (size_t s = 0; s < a[t].size() && s < src.size(); ++s)
      if (src[s] >= 0) w[tgt[t]][src[s]] += a[t][s];
  }
  for (int32_t t = 0; t < rows; ++t)
    for (float& v : w[t]) v /= static_cast<float>(std::max(tokens[t], 1));
  return w;
}

}  // namespace

std::string format_alignment(const SoftAlignment& alignment, const AlignmentOptions& options,
                             const WordMap* source_words, const WordMap* target_words) {
  const bool words = source_words && target_words;
  std::ostringstream out;
  if (options.kind == AlignmentKind::soft) {
    const SoftAlignment& a = words ? in_words(alignment, *source_words, *target_words) : alignment;
    for (size_t t = 0; t < a.size(); ++t) {
      if (t > 0) out << ' ';
      for (size_t s = 0; s < a[t].size(); ++s) {
        if (s > 0) out << ',';
        out << a[t][s];  // the stream's default: 6 significant digits, as Marian prints
      }
    }
    return out.str();
  }
  if (options.kind == AlignmentKind::none) return "";
  std::vector<std::pair<int32_t, int32_t>> pairs;  // (source, target)
  for (size_t t = 0; t < alignment.size(); ++t) {
    const std::vector<float>& row = alignment[t];
    if (options.kind == AlignmentKind::hard) {
      size_t best = 0;
      for (size_t s = 0; s < row.size(); ++s)
        if (row[best] < row[s]) best = s;
      if (!row.empty()) pairs.emplace_back(static_cast<int32_t>(best), static_cast<int32_t>(t));
    } else {
      for (size_t s = 0; s < row.size(); ++s)
        if (row[s] > options.threshold)
          pairs.emplace_back(static_cast<int32_t>(s), static_cast<int32_t>(t));
    }
  }
  if (words) {
    std::vector<std::pair<int32_t, int32_t>> mapped;
    for (const auto& [s, t] : pairs) {
      const int32_t ws = s < static_cast<int32_t>(source_words->size()) ? (*source_words)[s] : -1;
      const int32_t wt = t < static_cast<int32_t>(target_words->size()) ? (*target_words)[t] : -1;
      if (ws >= 0 && wt >= 0) mapped.emplace_back(ws, wt);
    }
    pairs = std::move(mapped);
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  for (size_t i = 0; i < pairs.size(); ++i)
    out << (i > 0 ? " " : "") << pairs[i].first << '-' << pairs[i].second;
  return out.str();
}

}  // namespace tx::decode
