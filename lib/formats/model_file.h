// ModelFile: a model as a file format holds it, turned into tx's terms — the architecture as a
// ModelConfig and the parameters under tx's names and layouts (f32). One reader per format
// (marian.cc, huggingface.cc, fairseq.cc; tx's own safetensors files are read by
// train/checkpoint.cc), and read_model_file() picks the reader from the path.
#pragma once

#include <string>
#include <vector>

#include "data/vocab.h"
#include "io/model_config.h"
#include "io/tensor_file.h"

namespace tx::formats {

enum class Format { tx, marian, huggingface, fairseq };
const char* name_of(Format format);

// How a model's vocabularies are read (data::Vocab's constructors).
enum class VocabKind {
  tx,       // tx's .spm with its fixed ids (data::Vocab(path))
  marian,   // Marian's .yml / .spm (data::Vocab::marian)
  pieces,   // Hugging Face: a SentencePiece model segments, a table numbers (data::Vocab::pieces)
  fairseq,  // fairseq's dict.LANG.txt, with its SentencePiece model or none (data::Vocab::fairseq)
};

struct VocabFiles {
  VocabKind kind = VocabKind::tx;
  // source then target: one path each (tx, marian) or the SentencePiece models (pieces)
  std::vector<std::string> paths;
  std::vector<std::string> tables;  // pieces: source then target token tables (vocab.json);
                                    // fairseq: the SentencePiece model of each side, or none
  // marian with no paths: why the decoder.yml beside the model named none ("" when there is
  // none), for the message that asks for -v.
  std::string why_none;
};

// Opens side 0 (source) or 1 (target) of an imported model's vocabularies (kind marian, pieces
// or fairseq).
data::Vocab open_vocab(const VocabFiles& vocabs, size_t side);

// Marian takes eos and unk from each vocabulary (a SentencePiece model's own ids; </s> 0 and
// <unk> 1 in a .yml list), not from the model: a Marian .npz model's ids become its
// vocabularies'. Throws naming `where` when the source's and the target's differ (tx keeps one
// eos per model).
void adopt_marian_ids(io::ModelConfig& config, const data::Vocab& src, const data::Vocab& tgt,
                      const std::string& where);

// A tx model file made from an imported model (tx-average of Marian models, a fine-tuned
// OPUS-MT model) keeps its vocabularies' kind and files in this metadata entry, so the programs
// read them as the original's: {"kind": "marian"|"pieces", "paths": [...], "tables": [...]}.
constexpr const char* kVocabsKey = "tx.vocabs";
std::string vocab_files_json(const VocabFiles& vocabs);  // paths made absolute
// Throws tx::Error naming `where` when the entry is damaged.
VocabFiles vocab_files_from_json(const std::string& text, const std::string& where);

struct ModelFile {
  std::string path;
  Format format = Format::tx;
  io::ModelConfig config;
  io::TensorFile params;  // tx names and layouts, f32; empty for Format::tx
  VocabFiles vocabs;      // found with the model (empty paths: the user gives -v)
};

// The format of `path`: a directory with fairseq.json is a fairseq model (converted by
// scripts/to_safetensors.py), another directory a Hugging Face model, "*.npz" a Marian model,
// anything else a tx safetensors file.
Format format_of(const std::string& path);

// Reads a Marian or Hugging Face model whole (config, parameters, vocabularies found beside
// it). For a tx file only the format and path are filled in: its reader is the checkpoint code.
ModelFile read_model_file(const std::string& path);

// The readers (read_model_file calls them).
ModelFile read_marian(const std::string& path);
ModelFile read_huggingface(const std::string& dir);
ModelFile read_fairseq(const std::string& dir);

}  // namespace tx::formats
