// Vocab: a SentencePiece model that turns a line of text into token ids and back.
//
// Special ids, the same in every tx model (train_vocab sets them through SentencePiece's
// --pad_id/--unk_id/--bos_id/--eos_id, and loading checks them):
//   pad 0  fills batches to a rectangle; the loss and attention ignore it
//   unk 1  any character the model does not know
//   bos 2  the first decoder input
//   eos 3  ends every source row and every target sequence
// A model file is an ordinary SentencePiece model (`spm_encode --model=vocab.spm` reads it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace tx::data {

class Vocab {
 public:
  static constexpr int32_t kPadId = 0;
  static constexpr int32_t kUnkId = 1;
  static constexpr int32_t kBosId = 2;
  static constexpr int32_t kEosId = 3;

  // Loads a SentencePiece model file (`<prefix>.spm`). Throws tx::Error naming the file when it
  // is missing, is not a SentencePiece model, or uses other special ids than the ones above.
  explicit Vocab(const std::string& path);
  ~Vocab();
  Vocab(Vocab&&) noexcept;
  Vocab& operator=(Vocab&&) noexcept;

  // The ids of a line, without bos or eos (the batcher adds those). Throws tx::Error on invalid
  // UTF-8; the caller adds which file and line. Safe to call from several threads at once.
  std::vector<int32_t> encode(std::string_view line) const;
  // The text of ids. pad, bos and eos give no text; unk gives " ⁇ ". Throws tx::Error for an id
  // outside [0, size()).
  std::string decode(const std::vector<int32_t>& ids) const;
  std::string decode(const int32_t* ids, size_t count) const;
  // The piece of one id ("▁Haus"), for debugging and n-best output.
  std::string piece(int32_t id) const;

  int32_t size() const;
  int32_t pad_id() const { return kPadId; }
  int32_t unk_id() const { return kUnkId; }
  int32_t bos_id() const { return kBosId; }
  int32_t eos_id() const { return kEosId; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace tx::data
