// train_vocab: builds a SentencePiece model from text files on the fly (spm_train, in process).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tx::data {

struct VocabTrainOptions {
  // One or more text files, one sentence per line, all UTF-8. Give the source and the target
  // files together for one joint vocabulary (tied embeddings), or train one per side.
  std::vector<std::string> inputs;
  // Writes `<prefix>.spm` (the model Vocab loads) and `<prefix>.vocab` (piece<TAB>score per
  // line, for reading).
  std::string prefix;
  int32_t vocab_size = 32000;
  std::string model_type = "unigram";  // "unigram" or "bpe"
  // 1.0 keeps every character of the text in the vocabulary, so each training line decodes
  // back exactly; lower values map rare characters to unk (SentencePiece uses 0.9995).
  double character_coverage = 1.0;
  // false lets SentencePiece stop below vocab_size when the text has too few distinct pieces
  // (small corpora) instead of failing.
  bool hard_vocab_limit = true;
  // Lines SentencePiece trains on: a uniform sample of this many non-empty lines, drawn with
  // the seed, when the files hold more (its memory and time grow with it); 0 takes every line.
  // Reading is two passes over the files (count, then sample), with no copy of the text.
  int64_t max_lines = 2000000;
  // The model is a function of the text, the options, the seed and num_threads (each thread
  // sums its share of the statistics, and float sums depend on the split). A fixed default
  // rather than the core count keeps one command giving one vocabulary on every machine.
  uint64_t seed = 1;
  int32_t num_threads = 4;
  // SentencePiece's normaliser: "nmt_nfkc" (its default: NFKC plus whitespace clean-up, so
  // "a  b" decodes as "a b") or "identity" (bytes kept as they are).
  std::string normalization = "nmt_nfkc";
  // Characters outside the vocabulary become UTF-8 byte pieces instead of unk (costs 256 ids).
  bool byte_fallback = false;
  // SentencePiece's progress log on stderr; off, only errors reach the caller (as tx::Error).
  bool verbose = false;
  // More trainer fields, in spm_train's names and values ({"model_type", "bpe"}), over the
  // ones above; from parse_trainer_fields. SentencePiece refuses a name it does not know.
  std::vector<std::pair<std::string, std::string>> trainer_fields;
};

struct VocabTrainResult {
  std::string model_path;  // <prefix>.spm
  std::string vocab_path;  // <prefix>.vocab
  int64_t lines = 0;       // non-empty lines in the inputs
  int64_t sampled = 0;     // of which SentencePiece trained on (max_lines at most)
  int32_t size = 0;        // pieces in the model (below vocab_size only without the hard limit)
};

// Trains in memory, then writes each file atomically (a temporary beside it, renamed into
// place; the model last): no file is ever partial, and a failed training leaves an existing
// model at `prefix` untouched. Throws tx::Error naming the files and
// the fix for a missing or unreadable file, invalid UTF-8 (file and line), text with no
// non-empty line, and a vocab_size the text cannot fill. Not thread-safe: SentencePiece's
// seed and log level are process-wide.
VocabTrainResult train_vocab(const VocabTrainOptions& options);

// The fields of Marian's --sentencepiece-options text, spm_train's flags ("--model_type=bpe
// --split_digits"): separated by blanks, each --name=value or --name (true; the dashes may be
// left out); a later name wins. Throws tx::Error naming a field tx sets itself (the special
// ids, vocab_size, the input and its sample) or one that is not name[=value]; its message
// reads after the text ("has 'x', which is not ...", "sets vocab_size, which is tx's ...").
std::vector<std::pair<std::string, std::string>> parse_trainer_fields(const std::string& text);

}  // namespace tx::data
