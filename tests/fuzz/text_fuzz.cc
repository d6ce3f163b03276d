// Fuzz target: the text readers. The bytes are read as lines by LineReader (model programs)
// and read_lines (metrics), each readable line goes through the 13a and intl tokenizers and
// sentence BLEU/chrF against itself, and the first half and second half are read as a
// parallel corpus with a small vocabulary.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"
#include "data/corpus.h"
#include "data/line_reader.h"
#include "data/vocab_train.h"
#include "fuzz_file.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "metrics/read_lines.h"

namespace {

// A vocabulary trained once per process on a few lines, in a scratch directory.
const tx::data::Vocab& vocab() {
  static const tx::data::Vocab v = [] {
    const std::string dir = std::filesystem::temp_directory_path() / "tx_text_fuzz_vocab";
    std::filesystem::create_directories(dir);
    {
      std::ofstream text(dir + "/text.txt");
      for (int i = 0; i < 50; ++i)
        text << "Ein Mann fährt " << i << " Fahrräder. A man rides " << i * 7 << " bikes.\n";
    }
    tx::data::VocabTrainOptions o;
    o.inputs = {dir + "/text.txt"};
    o.prefix = dir + "/vocab";
    o.vocab_size = 60;
    o.hard_vocab_limit = false;
    return tx::data::Vocab(tx::data::train_vocab(o).model_path);
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    std::istringstream in(bytes);
    tx::data::LineReader reader(in, "fuzz");
    for (std::string line; reader.next(line);) {
      tx::metrics::sentence_bleu(line, {line});
      for (const auto tokenizer :
           {tx::metrics::BleuTokenizer::kIntl, tx::metrics::BleuTokenizer::kChar}) {
        tx::metrics::BleuOptions o = tx::metrics::sentence_bleu_options();
        o.tokenizer = tokenizer;
        o.lowercase = true;
        tx::metrics::sentence_bleu(line, {line}, o);
      }
      tx::metrics::sentence_chrf(line, {line});
      vocab().decode(vocab().encode(line));
    }
  } catch (const tx::Error&) {
  }
  tx::fuzz::MemFile file(data, size);
  try {
    tx::metrics::read_lines(file.path());
  } catch (const tx::Error&) {
  }
  tx::fuzz::MemFile src(data, size / 2), tgt(data + size / 2, size - size / 2);
  try {
    tx::data::CorpusOptions o;
    o.num_threads = 1;
    o.max_src_tokens = o.max_tgt_tokens = 50;
    tx::data::load_parallel_corpus(src.path(), tgt.path(), vocab(), vocab(), o);
  } catch (const tx::Error&) {
  }
  return 0;
}
