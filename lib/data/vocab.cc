#include "data/vocab.h"

#include <sentencepiece_processor.h>
#include <sys/stat.h>

#include <type_traits>

#include "core/error.h"
#include "core/utf8.h"

namespace tx::data {

static_assert(std::is_same_v<int, int32_t>, "SentencePiece's ids are int; tx's are int32_t");

Vocab::Vocab(const std::string& path)
    : path_(path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  struct stat st;
  TX_CHECK(::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode), "cannot load vocabulary '", path,
           "': no such file; give the .spm file tx-train wrote beside the model");
  sentencepiece::util::Status status;
  try {
    status = sp_->Load(path);
  } catch (const std::exception& e) {  // SentencePiece's trie builder throws on some bad models
    status = sentencepiece::util::Status(sentencepiece::util::StatusCode::kInternal, e.what());
  }
  TX_CHECK(status.ok(), "cannot load vocabulary '", path, "': not a SentencePiece model (",
           status.message(), "); give the .spm file tx-train ", "wrote beside the model");
  // Ids are baked into the embeddings: a model with another layout would silently read pad as
  // a word, so refuse it by name.
  bool same = sp_->pad_id() == kPadId && sp_->unk_id() == kUnkId && sp_->bos_id() == kBosId &&
              sp_->eos_id() == kEosId;
  TX_CHECK(same, "vocabulary '", path, "' has special ids pad ", sp_->pad_id(), ", unk ",
           sp_->unk_id(), ", bos ", sp_->bos_id(), ", eos ", sp_->eos_id(),
           " but tx needs pad 0, unk 1, bos 2, eos 3; let tx-train build the vocabulary or train ",
           "it with spm_train --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3");
}

Vocab::~Vocab() = default;
Vocab::Vocab(Vocab&&) noexcept = default;
Vocab& Vocab::operator=(Vocab&&) noexcept = default;

std::vector<int32_t> Vocab::encode(std::string_view line) const {
  std::string problem = describe_invalid_utf8(line);
  TX_CHECK(problem.empty(), problem, "; convert the text to UTF-8");
  std::vector<int32_t> ids;  // SentencePiece's std::vector<int>: no copy
  auto status = sp_->Encode(line, &ids);
  TX_CHECK(status.ok(), "cannot encode a line with '", path_, "': ", status.message());
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
  auto status = sp_->Decode(v, &text);
  TX_CHECK(status.ok(), "cannot decode ids with '", path_, "': ", status.message());
  return text;
}

std::string Vocab::piece(int32_t id) const {
  TX_CHECK(id >= 0 && id < size(), "id ", id, " is outside the vocabulary '", path_, "' (0..",
           size() - 1, ")");
  return sp_->IdToPiece(id);
}

int32_t Vocab::size() const {
  return sp_->GetPieceSize();
}

}  // namespace tx::data
