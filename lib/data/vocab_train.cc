#include "data/vocab_train.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "core/rng.h"
#include "data/line_reader.h"
#include "data/vocab.h"
#include "io/atomic_file.h"

namespace tx::data {
namespace {

// Counts the non-empty lines of every input, checking each line's UTF-8 on the way, so a bad
// byte is reported with its file and line before any training starts.
int64_t count_lines(const std::vector<std::string>& paths) {
  // Open every file first, so a typo in the last name fails now, not after a long pass.
  std::vector<std::unique_ptr<LineReader>> readers;
  for (const auto& p : paths) readers.push_back(std::make_unique<LineReader>(p));
  int64_t n = 0;
  std::string line;
  for (auto& r : readers) {
    while (r->next(line)) n += line.empty() ? 0 : 1;
    r.reset();
  }
  return n;
}

std::string quoted_list(const std::vector<std::string>& paths) {
  std::string out;
  for (size_t i = 0; i < paths.size(); ++i) out += (i ? ", '" : "'") + paths[i] + "'";
  return out;
}

// Feeds SentencePiece the non-empty lines of every input in turn, or a uniform sample of
// `keep` of the `total`. tx samples rather than SentencePiece (--input_sentence_size), whose
// sampler ignores the seed: selection sampling (Knuth's Algorithm S) keeps each line with
// probability still-needed / still-left, from tx's counter-based hash, so the sample is a
// function of the seed and streams with no memory.
class FileSentences : public sentencepiece::SentenceIterator {
 public:
  FileSentences(const std::vector<std::string>& paths, int64_t total, int64_t keep, uint64_t seed)
      : paths_(paths), total_(total), keep_(std::min(keep, total)), seed_(mix64(seed)) {
    Next();
  }
  bool done() const override { return done_; }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override {
    if (error_.empty()) return {};
    return {sentencepiece::util::StatusCode::kInvalidArgument, error_};
  }
  void Next() override {
    try {
      while (kept_ < keep_) {
        if (!reader_) {
          if (file_ == paths_.size()) {
            // Fewer lines than counted: a pipe, read to its end by the count, or a file that
            // shrank. Either way the sample would not be the one planned.
            TX_CHECK(seen_ == total_, "cannot train a vocabulary on ", quoted_list(paths_),
                     ": they held ", total_, " non-empty lines when counted but ", seen_,
                     " when read again (a pipe can be read only once; a file may have changed); "
                     "give regular files that stay as they are, or an existing --vocabs");
            break;
          }
          reader_ = std::make_unique<LineReader>(paths_[file_++]);
        }
        if (!reader_->next(line_)) {
          reader_.reset();
          continue;
        }
        if (line_.empty()) continue;
        longest_ = std::max(longest_, line_.size());
        int64_t left = total_ - seen_;
        uint64_t h = mix64(seed_ + mix64(static_cast<uint64_t>(seen_)));
        double u = static_cast<double>(h >> 11) * 0x1.0p-53;
        ++seen_;
        if (u * static_cast<double>(left) < static_cast<double>(keep_ - kept_)) {
          ++kept_;
          return;
        }
      }
    } catch (const Error& e) {
      // The file changed since it was counted: stop, and let train_vocab rethrow.
      error_ = e.what();
    }
    done_ = true;
  }
  const std::string& error() const { return error_; }
  int64_t kept() const { return kept_; }
  size_t longest() const { return longest_; }  // bytes, of the lines read so far

 private:
  std::vector<std::string> paths_;
  size_t file_ = 0;
  std::unique_ptr<LineReader> reader_;
  int64_t total_, keep_;
  uint64_t seed_;
  int64_t seen_ = 0, kept_ = 0;
  std::string line_;
  std::string error_;
  bool done_ = false;
  size_t longest_ = 0;
};

// SentencePiece skips longer sentences (its max_sentence_length, left at its default).
constexpr size_t kMaxSentenceBytes = 4192;

// SentencePiece's messages start with its source location and the failed check
// ("./src/trainer_interface.cc(660) [(a) == (b)] Vocabulary size too high ..."): keep the text.
std::string spm_text(const sentencepiece::util::Status& status) {
  std::string m = status.message();
  size_t loc = m.find(".cc(");
  if (loc != std::string::npos) {
    size_t close = m.find("] ", loc);
    if (close != std::string::npos) m = m.substr(close + 2);
  }
  while (!m.empty() && (m.back() == ' ' || m.back() == '\n')) m.pop_back();
  return m;
}

std::string fix_for(const std::string& spm_message) {
  if (spm_message.find("Vocabulary size too high") != std::string::npos)
    return "lower --dim-vocabs";
  if (spm_message.find("required_chars") != std::string::npos)
    return "raise --dim-vocabs: the text's characters alone need more pieces";
  if (spm_message.find("unknown field name") != std::string::npos)
    return "check --sentencepiece-options (spm_train --help lists the fields)";
  return "check the training files and the vocabulary options";
}

std::unordered_map<std::string, std::string> trainer_args(const VocabTrainOptions& o) {
  auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  std::ostringstream coverage;
  coverage.precision(17);
  coverage << o.character_coverage;
  std::unordered_map<std::string, std::string> args = {
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"character_coverage", coverage.str()},
      {"hard_vocab_limit", flag(o.hard_vocab_limit)},
      {"input_sentence_size", "0"},  // FileSentences has sampled already
      {"num_threads", std::to_string(o.num_threads)},
      {"normalization_rule_name", o.normalization},
      {"byte_fallback", flag(o.byte_fallback)},
      {"pad_id", std::to_string(Vocab::kPadId)},
      {"unk_id", std::to_string(Vocab::kUnkId)},
      {"bos_id", std::to_string(Vocab::kBosId)},
      {"eos_id", std::to_string(Vocab::kEosId)},
      // SentencePiece logs with LOG(INFO) to std::cerr: 0 shows it, 2 keeps only errors.
      {"minloglevel", o.verbose ? "0" : "2"},
  };
  for (const auto& [name, value] : o.trainer_fields) args[name] = value;
  return args;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_trainer_fields(const std::string& text) {
  // What tx decides itself: the ids its models number pieces by, the size (--dim-vocabs), and
  // the text, which tx samples and hands over in memory.
  static const std::vector<std::pair<std::string, std::string>> owned = {
      {"pad_id", "tx numbers pad, unk, bos and eos itself"},
      {"unk_id", "tx numbers pad, unk, bos and eos itself"},
      {"bos_id", "tx numbers pad, unk, bos and eos itself"},
      {"eos_id", "tx numbers pad, unk, bos and eos itself"},
      {"vocab_size", "give the size with --dim-vocabs"},
      {"input", "tx gives SentencePiece the training files"},
      {"input_format", "tx gives SentencePiece the training files"},
      {"model_prefix", "tx writes the vocabulary beside the model"},
      {"input_sentence_size", "tx samples at most 2,000,000 lines itself"},
  };
  std::vector<std::pair<std::string, std::string>> fields;
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    std::string field = word.compare(0, 2, "--") == 0 ? word.substr(2) : word;
    const size_t eq = field.find('=');
    std::string name = field.substr(0, eq);
    std::string value = eq == std::string::npos ? "true" : field.substr(eq + 1);
    TX_CHECK(!name.empty() && name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") ==
                                  std::string::npos,
             "has '", word,
             "', which is not a SentencePiece trainer field; give --name=value, e.g. "
             "--model_type=bpe");
    for (const auto& [owned_name, why] : owned)
      TX_CHECK(name != owned_name, "sets ", name, ", which is tx's (", why, "); leave it out");
    fields.emplace_back(std::move(name), std::move(value));
  }
  return fields;
}

VocabTrainResult train_vocab(const VocabTrainOptions& o) {
  TX_CHECK(!o.inputs.empty(), "cannot train a vocabulary: no input files; give the training text");
  TX_CHECK(!o.prefix.empty(),
           "cannot train a vocabulary: no output prefix; give where to write it");
  TX_CHECK(o.model_type == "unigram" || o.model_type == "bpe", "unknown vocabulary type '",
           o.model_type, "'; use unigram or bpe");
  TX_CHECK(o.vocab_size > 4, "vocabulary size ", o.vocab_size,
           " leaves no room beside pad, unk, bos and eos; use a size above 4 (e.g. 8000)");
  TX_CHECK(o.character_coverage > 0 && o.character_coverage <= 1, "character coverage ",
           o.character_coverage, " is outside (0, 1]; use 1.0 or e.g. 0.9995");
  TX_CHECK(o.max_lines >= 0, "the line sample size must be >= 0 (0 takes every line)");
  TX_CHECK(o.num_threads > 0, "the vocabulary trainer needs at least one thread");
  TX_CHECK(o.normalization == "nmt_nfkc" || o.normalization == "identity" ||
               o.normalization == "nfkc" || o.normalization == "nmt_nfkc_cf" ||
               o.normalization == "nfkc_cf",
           "unknown normalization '", o.normalization, "'; use nmt_nfkc or identity");

  std::string files = quoted_list(o.inputs);
  const int64_t total = count_lines(o.inputs);
  TX_CHECK(total > 0, "cannot train a vocabulary on ", files,
           ": no non-empty line; give the training text");
  FileSentences sentences(o.inputs, total, o.max_lines > 0 ? o.max_lines : total, o.seed);
  // Training draws no random numbers today; seeding SentencePiece's process-wide generator
  // anyway keeps a later version that does deterministic. 0xffffffff means "unset" to it.
  uint32_t spm_seed = static_cast<uint32_t>(o.seed ^ (o.seed >> 32));
  sentencepiece::SetRandomGeneratorSeed(spm_seed == 0xffffffffu ? 0u : spm_seed);

  std::string proto;  // trained in memory: SentencePiece writes no file of its own
  auto status = sentencepiece::SentencePieceTrainer::Train(trainer_args(o), &sentences, &proto);
  if (!sentences.error().empty()) throw Error(sentences.error());
  if (!status.ok()) {
    const std::string text = spm_text(status);
    std::string reason = text + " (SentencePiece)";
    if (text.empty() && sentences.longest() > kMaxSentenceBytes)
      reason = str("SentencePiece gave no reason, but it skips lines over ", kMaxSentenceBytes,
                   " bytes and the longest here has ", sentences.longest(),
                   " (a file with CR-only line endings is one long line: tr '\\r' '\\n' "
                   "converts it)");
    else if (text.empty())
      reason = "SentencePiece gave no reason";
    throw Error(str("cannot train a vocabulary of ", o.vocab_size, " pieces on ", files, ": ",
                    reason, "; ", fix_for(text)));
  }

  sentencepiece::SentencePieceProcessor sp;
  auto loaded = sp.LoadFromSerializedProto(proto);
  TX_CHECK(loaded.ok(), "SentencePiece produced a model it cannot load (", loaded.message(),
           "); this is a bug, please report it");

  VocabTrainResult result;
  result.model_path = o.prefix + ".spm";
  result.vocab_path = o.prefix + ".vocab";
  result.lines = total;
  result.sampled = sentences.kept();
  result.size = sp.GetPieceSize();

  std::ostringstream vocab;
  for (int i = 0; i < sp.GetPieceSize(); ++i)
    vocab << sp.IdToPiece(i) << '\t' << sp.GetScore(i) << '\n';
  // Each file goes to a temporary beside its destination and is renamed into place; the model
  // last, since it is the file readers look for.
  io::AtomicFile vocab_file(result.vocab_path);
  io::AtomicFile model_file(result.model_path);
  vocab_file.write(vocab.str());
  model_file.write(proto);
  vocab_file.commit();
  model_file.commit();
  return result;
}

}  // namespace tx::data
