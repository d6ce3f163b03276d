#include "data/vocab.h"

#include <sentencepiece_processor.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "core/error.h"
#include "core/format.h"
#include "core/rng.h"
#include "core/utf8.h"

namespace tx::data {

static_assert(std::is_same_v<int, int32_t>, "SentencePiece's ids are int; tx's are int32_t");

namespace {

// Why `path` cannot be a vocabulary file ("no such file", "it is a directory"), or "".
std::string not_a_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "no such file";
  if (S_ISDIR(st.st_mode)) return "it is a directory";
  return S_ISREG(st.st_mode) ? "" : "not a regular file";
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void Vocab::load_spm(const std::string& path, const char* fix) {
  TX_CHECK(not_a_file(path).empty(), "cannot load vocabulary '", path, "': ", not_a_file(path),
           "; ", fix);
  sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  sentencepiece::util::Status status;
  try {
    status = sp_->Load(path);
  } catch (const std::exception& e) {  // SentencePiece's trie builder throws on some bad models
    status = sentencepiece::util::Status(sentencepiece::util::StatusCode::kInternal, e.what());
  }
  TX_CHECK(status.ok(), "cannot load vocabulary '", path, "': not a SentencePiece model (",
           status.message(), "); ", fix);
  // encode_head cuts a line before a space, which is exact only if no piece can hold the end of
  // a word and the space after it: spaces (▁) only as a piece's leading run, and ▁ a piece of
  // its own (an unknown ▁ would join the unknown character before it into one unk piece).
  static const std::string kSpace = "\xE2\x96\x81";
  pieces_end_at_spaces_ = !sp_->IsUnknown(sp_->PieceToId(kSpace));
  for (int i = 0; i < sp_->GetPieceSize() && pieces_end_at_spaces_; ++i) {
    const std::string& piece = sp_->IdToPiece(i);
    size_t at = 0;
    while (piece.compare(at, kSpace.size(), kSpace) == 0) at += kSpace.size();
    pieces_end_at_spaces_ =
        piece.find(kSpace, at) == std::string::npos && piece.find(' ', at) == std::string::npos;
  }
}

Vocab::Vocab(const std::string& path) : path_(path) {
  load_spm(path, "give the .spm file tx-train wrote beside the model");
  // Ids are baked into the embeddings: a model with another layout would silently read pad as
  // a word, so refuse it by name.
  bool same = sp_->pad_id() == kPadId && sp_->unk_id() == kUnkId && sp_->bos_id() == kBosId &&
              sp_->eos_id() == kEosId;
  TX_CHECK(same, "vocabulary '", path, "' has special ids pad ", sp_->pad_id(), ", unk ",
           sp_->unk_id(), ", bos ", sp_->bos_id(), ", eos ", sp_->eos_id(),
           " but tx needs pad 0, unk 1, bos 2, eos 3; let tx-train build the vocabulary or train ",
           "it with spm_train --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3");
}

Vocab Vocab::marian(const std::string& path) {
  Vocab v;
  v.path_ = path;
  if (ends_with(path, ".yml") || ends_with(path, ".yaml") || ends_with(path, ".json")) {
    v.read_table(path);
    return v;
  }
  TX_CHECK(!ends_with(path, ".fsv"), "vocabulary '", path,
           "' is a factored vocabulary (.fsv), which tx does not read; use a model trained "
           "with a plain .yml or .spm vocabulary");
  v.load_spm(path,
             "give the model's .spm or .yml vocabulary (marian-decoder's -v/--vocabs, in the "
             "order source target)");
  v.pad_ = v.sp_->pad_id();
  v.unk_ = v.sp_->unk_id();
  v.bos_ = v.sp_->bos_id();
  v.eos_ = v.sp_->eos_id();
  return v;
}

Vocab Vocab::pieces(const std::string& spm, const std::string& table) {
  Vocab v;
  v.path_ = table;
  v.load_spm(spm, "the Hugging Face directory needs source.spm and target.spm");
  v.read_table(table);
  v.unk_text_ = false;
  return v;
}

void Vocab::read_table(const std::string& path) {
  TX_CHECK(not_a_file(path).empty(), "cannot load vocabulary '", path, "': ", not_a_file(path),
           "; give the model's vocabulary file");
  std::vector<std::pair<std::string, int64_t>> entries;
  const std::string fix = "; give the model's own vocabulary (a token: id map)";
  if (ends_with(path, ".json")) {
    std::ifstream in(path, std::ios::binary);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw Error(str("cannot load vocabulary '", path, "': not valid JSON (", e.what(), ")", fix));
    }
    TX_CHECK(j.is_object(), "cannot load vocabulary '", path, "': not a JSON object", fix);
    for (const auto& [token, id] : j.items()) {
      TX_CHECK(id.is_number_integer(), "vocabulary '", path, "': the id of '", token,
               "' is not an integer", fix);
      entries.emplace_back(token, id.get<int64_t>());
    }
  } else {
    YAML::Node root;
    try {
      root = YAML::LoadFile(path);
    } catch (const YAML::Exception& e) {
      throw Error(str("cannot load vocabulary '", path, "': not valid YAML (", e.what(), ")", fix));
    }
    TX_CHECK(root.IsMap(), "cannot load vocabulary '", path, "': not a YAML map of token: id", fix);
    for (const auto& kv : root) {
      int64_t id = -1;
      try {
        id = kv.second.as<int64_t>();
      } catch (const YAML::Exception&) {
        throw Error(str("vocabulary '", path, "': the id of '", kv.first.Scalar(),
                        "' is not an integer", fix));
      }
      entries.emplace_back(kv.first.Scalar(), id);
    }
  }
  set_table(entries, path, fix);
}

Vocab Vocab::fairseq(const std::string& dict, const std::string& spm) {
  Vocab v;
  v.path_ = dict;
  if (!spm.empty())
    v.load_spm(spm, "give the SentencePiece model the fairseq model was trained with");
  TX_CHECK(not_a_file(dict).empty(), "cannot load vocabulary '", dict, "': ", not_a_file(dict),
           "; give the fairseq model's dictionary (dict.LANG.txt)");
  const std::string fix = "; give the fairseq model's own dict.LANG.txt (\"token count\" lines)";
  std::vector<std::pair<std::string, int64_t>> entries = {
      {"<s>", 0}, {"<pad>", 1}, {"</s>", 2}, {"<unk>", 3}};
  std::unordered_map<std::string, size_t> at;  // token -> its entry, for #fairseq:overwrite
  for (const auto& [token, id] : entries) at.emplace(token, static_cast<size_t>(id));
  std::ifstream in(dict, std::ios::binary);
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    // fairseq's Dictionary.add_from_file: the count is the last space-separated field, a token
    // already present is an error unless the line ends with "#fairseq:overwrite".
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    auto split = [&](std::string& rest, std::string& last) {
      const size_t space = rest.rfind(' ');
      TX_CHECK(space != std::string::npos && space > 0, "vocabulary '", dict, "' line ", number,
               ": expected \"token count\"", fix);
      last = rest.substr(space + 1);
      rest.resize(space);
    };
    std::string token = line, field;
    split(token, field);
    const bool overwrite = field == "#fairseq:overwrite";
    if (overwrite) split(token, field);
    TX_CHECK(!field.empty() && field.find_first_not_of("0123456789") == std::string::npos,
             "vocabulary '", dict, "' line ", number, ": the count '", field, "' is not a number",
             fix);
    // An overwritten token takes a new id (its old id still decodes to it), as in fairseq.
    TX_CHECK(overwrite || !at.count(token), "vocabulary '", dict, "' line ", number, ": '", token,
             "' is a duplicate (fairseq refuses it too, unless marked #fairseq:overwrite)", fix);
    TX_CHECK(entries.size() < (1u << 30), "vocabulary '", dict, "' is too large", fix);
    at[token] = entries.size();
    entries.emplace_back(token, static_cast<int64_t>(entries.size()));
  }
  v.set_table(entries, dict, fix);
  // fairseq's Dictionary fixes its specials at construction; an overwritten "<unk>" line gives
  // the token a new id but unknown words still map to 3.
  v.bos_ = 0;
  v.pad_ = 1;
  v.eos_ = 2;
  v.unk_ = 3;
  return v;
}

void Vocab::set_table(const std::vector<std::pair<std::string, int64_t>>& entries,
                      const std::string& path, const std::string& fix) {
  TX_CHECK(!entries.empty(), "vocabulary '", path, "' is empty", fix);
  TX_CHECK(entries.size() < (1u << 30), "vocabulary '", path, "' is too large", fix);
  const int64_t n = static_cast<int64_t>(entries.size());
  table_.assign(entries.size(), std::string());
  std::vector<int64_t> owner(entries.size(), -1);  // id -> its entry
  for (int64_t i = 0; i < n; ++i)
    if (entries[i].second >= 0 && entries[i].second < n) {
      const int64_t id = entries[i].second;
      TX_CHECK(owner[id] < 0, "vocabulary '", path, "': tokens '", entries[owner[id]].first,
               "' and '", entries[i].first, "' both have id ", id, fix);
      owner[id] = i;
    }
  for (const auto& [token, id] : entries) {
    if (id < 0 || id >= n) {
      // n tokens over ids 0..n-1 with one outside: some id below n has no token. Name it, not
      // only the token that took its place.
      const int64_t hole = std::find(owner.begin(), owner.end(), -1) - owner.begin();
      throw Error(str("vocabulary '", path, "': token '", token, "' has id ", id, ", but its ", n,
                      " tokens must number 0..", n - 1, " each once (id ", hole, " has no token)",
                      fix));
    }
    table_[id] = token;
    // The last entry of a token numbers it (fairseq's #fairseq:overwrite; maps have one each).
    index_[token] = static_cast<int32_t>(id);
  }
  auto find = [&](const char* token) {
    auto it = index_.find(token);
    return it == index_.end() ? -1 : it->second;
  };
  eos_ = find("</s>");
  unk_ = find("<unk>");
  pad_ = find("<pad>");
  bos_ = find("<s>");
  TX_CHECK(eos_ >= 0, "vocabulary '", path, "' has no '</s>' token", fix);
}

Vocab::~Vocab() = default;
Vocab::Vocab(Vocab&&) noexcept = default;
Vocab& Vocab::operator=(Vocab&&) noexcept = default;

std::vector<int32_t> Vocab::encode(std::string_view line) const {
  std::string problem = describe_invalid_utf8(line);
  TX_CHECK(problem.empty(), problem, "; convert the text to UTF-8");
  std::vector<int32_t> ids;  // SentencePiece's std::vector<int>: no copy
  if (!table_.empty()) {
    auto number = [&](const std::string& piece) {
      auto it = index_.find(piece);
      ids.push_back(it != index_.end() ? it->second : unk_);
    };
    if (!sp_) {  // Marian's default vocabulary: tokens between spaces
      std::istringstream words{std::string(line)};
      for (std::string word; words >> word;) number(word);
      return ids;
    }
    std::vector<std::string> pieces;
    auto status = sp_->Encode(line, &pieces);
    TX_CHECK(status.ok(), "cannot encode a line with '", path_, "': ", status.message());
    for (const std::string& piece : pieces) number(piece);
    return ids;
  }
  auto status = sp_->Encode(line, &ids);
  TX_CHECK(status.ok(), "cannot encode a line with '", path_, "': ", status.message());
  return ids;
}

std::vector<int32_t> Vocab::encode_head(std::string_view line, int64_t limit) const {
  // A first head of 64 bytes per id holds `limit` ids of any usual text; it doubles until it
  // holds more than `limit` ids or no cut is left.
  size_t head = std::max<size_t>(4096, 64 * static_cast<size_t>(std::min<int64_t>(limit, 1 << 24)));
  if (limit <= 0 || !pieces_end_at_spaces_ || line.size() <= head) return encode(line);
  std::string problem = describe_invalid_utf8(line);  // of the whole line, as encode() says it
  TX_CHECK(problem.empty(), problem, "; convert the text to UTF-8");
  // A cut before a space that follows a printable ASCII character (not a space, nor a byte of
  // a character the normaliser might turn into one) ends a piece in every segmentation of the
  // line, so the head's pieces are the line's first ones.
  const auto graphic = [](char c) { return c > ' ' && c < 0x7F; };
  while (head < line.size()) {
    size_t cut = line.find(' ', head);
    while (cut != std::string_view::npos && !graphic(line[cut - 1])) cut = line.find(' ', cut + 1);
    if (cut == std::string_view::npos) break;
    std::vector<int32_t> ids = encode(line.substr(0, cut));
    if (static_cast<int64_t>(ids.size()) > limit) return ids;
    head = 2 * cut;
  }
  return encode(line);
}

std::vector<int32_t> Vocab::sample(std::string_view line, float alpha) const {
  TX_CHECK(sp_, "'", path_, "' is not a SentencePiece model, so it cannot sample segmentations; ",
           "use SentencePiece vocabularies or leave out --sentencepiece-alphas");
  std::string problem = describe_invalid_utf8(line);
  TX_CHECK(problem.empty(), problem, "; convert the text to UTF-8");
  std::vector<int32_t> ids;
  if (!table_.empty()) {
    std::vector<std::string> pieces;
    auto status = sp_->SampleEncode(line, -1, alpha, &pieces);
    TX_CHECK(status.ok(), "cannot sample a segmentation with '", path_, "': ", status.message());
    for (const std::string& piece : pieces) {
      auto it = index_.find(piece);
      ids.push_back(it != index_.end() ? it->second : unk_);
    }
    return ids;
  }
  auto status = sp_->SampleEncode(line, -1, alpha, &ids);
  TX_CHECK(status.ok(), "cannot sample a segmentation with '", path_, "': ", status.message());
  return ids;
}

std::string Vocab::decode(const std::vector<int32_t>& ids) const {
  return decode(ids.data(), ids.size());
}

std::string Vocab::decode(const int32_t* ids, size_t count) const {
  const int32_t n = size();
  std::vector<int> v(count);
  for (size_t i = 0; i < count; ++i) {
    TX_CHECK(ids[i] >= 0 && ids[i] < n, "cannot decode id ", ids[i], " with '", path_,
             "': the vocabulary has ids 0..", n - 1,
             "; the model and the vocabulary do not belong together");
    v[i] = ids[i];
  }
  std::string text;
  if (!table_.empty()) {
    // Special tokens give no text, as SentencePiece's decoding of tx's ids.
    std::vector<std::string> pieces;
    for (int id : v)
      if (id != eos_ && id != pad_ && id != bos_ && (unk_text_ || id != unk_))
        pieces.push_back(table_[id]);
    if (!sp_) {
      for (size_t i = 0; i < pieces.size(); ++i) text += (i ? " " : "") + pieces[i];
      return text;
    }
    auto status = sp_->Decode(pieces, &text);
    TX_CHECK(status.ok(), "cannot decode pieces with '", path_, "': ", status.message());
    // MarianTokenizer strips the text it decodes (a final "▁" piece leaves a space).
    const size_t first = text.find_first_not_of(' '), last = text.find_last_not_of(' ');
    return first == std::string::npos ? std::string() : text.substr(first, last - first + 1);
  }
  auto status = sp_->Decode(v, &text);
  TX_CHECK(status.ok(), "cannot decode ids with '", path_, "': ", status.message());
  return text;
}

std::string Vocab::piece(int32_t id) const {
  TX_CHECK(id >= 0 && id < size(), "id ", id, " is outside the vocabulary '", path_, "' (0..",
           size() - 1, ")");
  return table_.empty() ? sp_->IdToPiece(id) : table_[id];
}

std::string Vocab::fingerprint() const {
  uint64_t h = mix64(static_cast<uint64_t>(size()));
  for (int32_t id = 0; id < size(); ++id) {
    for (const unsigned char c : piece(id)) h = mix64(h ^ c);
    h = mix64(h ^ (0x100u + static_cast<uint64_t>(id)));  // the piece's end: above any byte
  }
  return hex16(h);
}

int32_t Vocab::size() const {
  return table_.empty() ? sp_->GetPieceSize() : static_cast<int32_t>(table_.size());
}

}  // namespace tx::data
