// Vocab: a SentencePiece model that turns a line of text into token ids and back.
//
// Special ids, the same in every tx model (train_vocab sets them through SentencePiece's
// --pad_id/--unk_id/--bos_id/--eos_id, and loading checks them):
//   pad 0  fills batches to a rectangle; the loss and attention ignore it
//   unk 1  any character the model does not know
//   bos 2  the first decoder input
//   eos 3  ends every source row and every target sequence
// A model file is an ordinary SentencePiece model (`spm_encode --model=vocab.spm` reads it).
//
// Models made elsewhere bring their own vocabularies (docs/models.md), made by the named
// constructors below: Marian's `.yml` token lists (text split at spaces, the way marian-decoder
// reads pre-segmented text), a SentencePiece model whose own ids are the model's (Marian's
// `.spm`), and Hugging Face's pair of a SentencePiece model that segments and a `vocab.json`
// that numbers the pieces. Their special ids are whatever the tokens `</s>`, `<unk>`, `<pad>`
// and `<s>` have (-1 when absent).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
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
  // A Marian vocabulary: `.yml` or `.json` (a token -> id map; text split at spaces) or a
  // SentencePiece model (its own ids). Throws naming the file and the fix.
  static Vocab marian(const std::string& path);
  // Hugging Face's Marian tokenizer: `spm` segments a line into pieces, `table` (vocab.json,
  // or a Marian .yml) numbers them; a piece it lacks is unk.
  static Vocab pieces(const std::string& spm, const std::string& table);
  // A fairseq dictionary (`dict.en.txt`: "token count" lines, numbered from 4 after fairseq's
  // <s> 0, <pad> 1, </s> 2, <unk> 3); text is split at whitespace as fairseq reads it, or, with
  // `spm` (fairseq's --bpe sentencepiece), segmented by that SentencePiece model first.
  static Vocab fairseq(const std::string& dict, const std::string& spm = "");
  ~Vocab();
  Vocab(Vocab&&) noexcept;
  Vocab& operator=(Vocab&&) noexcept;

  // The ids of a line, without bos or eos (the batcher adds those). Throws tx::Error on invalid
  // UTF-8; the caller adds which file and line. Safe to call from several threads at once.
  std::vector<int32_t> encode(std::string_view line) const;
  // encode(line) when it has at most `limit` ids (0: no limit); a longer line's first limit + 1
  // ids or more, the same as encode()'s, from a head of the line cut at a space. What a
  // caller crops or drops past `limit` is then never split: a runaway line of 8 MB would cost
  // about 1 GB in SentencePiece. A line without such a space, or a vocabulary whose pieces may
  // span one, is encoded whole.
  std::vector<int32_t> encode_head(std::string_view line, int64_t limit) const;
  // A sampled segmentation of a line (SentencePiece's SampleEncode over all segmentations,
  // smoothing `alpha`; BPE models: merge dropout alpha), numbered as encode() numbers pieces:
  // tx-train --sentencepiece-alphas. Draws from the calling thread's SentencePiece generator
  // (data/subword_sampling.h makes that deterministic). Throws for a vocabulary without a
  // SentencePiece model.
  std::vector<int32_t> sample(std::string_view line, float alpha) const;
  bool has_sentencepiece() const { return sp_ != nullptr; }
  // The text of ids. pad, bos and eos give no text; unk gives " ⁇ ", or no text for a Hugging
  // Face vocabulary (pieces(): as MarianTokenizer decodes with skip_special_tokens, the way
  // transformers' translation pipeline does). Throws tx::Error for an id outside [0, size()).
  std::string decode(const std::vector<int32_t>& ids) const;
  std::string decode(const int32_t* ids, size_t count) const;
  // The piece of one id ("▁Haus"), for debugging and n-best output.
  std::string piece(int32_t id) const;

  int32_t size() const;
  // A hash of the pieces in id order (16 hex digits): two vocabularies of one size but other
  // pieces or ids differ in it. tx-train records it, so that a model is never resumed or
  // fine-tuned on a vocabulary that only has its size (see pair_fingerprint).
  std::string fingerprint() const;
  int32_t pad_id() const { return pad_; }
  int32_t unk_id() const { return unk_; }
  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  const std::string& path() const { return path_; }

 private:
  Vocab() = default;
  // Reads a token -> id map (YAML or JSON) into table_ and index_; finds the special ids.
  void read_table(const std::string& path);
  // Makes table_ and index_ from (token, id) pairs (ids 0..n-1, each once); finds the specials.
  void set_table(const std::vector<std::pair<std::string, int64_t>>& entries,
                 const std::string& path, const std::string& fix);
  void load_spm(const std::string& path, const char* fix);

  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;  // segments (and numbers if no table)
  std::vector<std::string> table_;                             // id -> piece, when a table numbers
  std::unordered_map<std::string, int32_t> index_;             // piece -> id
  int32_t pad_ = kPadId, unk_ = kUnkId, bos_ = kBosId, eos_ = kEosId;
  bool unk_text_ = true;  // false: unk gives no text (MarianTokenizer's skip_special_tokens)
  bool pieces_end_at_spaces_ = true;  // no piece holds a space but as its leading run
};

// A model's two vocabularies, as model files record them (metadata "vocab_fingerprint"):
// the source's fingerprint, a space, the target's (one joint vocabulary: its own twice).
inline std::string pair_fingerprint(const Vocab& src, const Vocab& tgt) {
  return src.fingerprint() + " " + tgt.fingerprint();
}

// "the vocabulary 'v.spm' is not the one <what> was trained on (other pieces under the same
// ids)": the start of the error for a fingerprint that differs.
inline std::string not_trained_on(const Vocab& src, const Vocab& tgt, const std::string& what) {
  return (src.path() == tgt.path() ? "the vocabulary '" + src.path() + "' is not the one "
                                   : "the vocabularies '" + src.path() + "' and '" + tgt.path() +
                                         "' are not the ones ") +
         what + " was trained on (other pieces under the same ids)";
}

}  // namespace tx::data
