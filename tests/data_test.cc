// data: SentencePiece vocabulary training and round trips, UTF-8 checks, parallel corpus
// reading and filtering, training batches (coverage, token limit, layout, determinism, resume)
// and the translation batcher with output in input order.
#include <fcntl.h>
#include <sentencepiece_trainer.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/text_file.h"
#include "core/text_input.h"
#include "core/utf8.h"
#include "data/batch.h"
#include "data/batcher.h"
#include "data/corpus.h"
#include "data/inference_batcher.h"
#include "data/line_reader.h"
#include "data/ordered_output.h"
#include "data/vocab.h"
#include "data/vocab_train.h"
#include "metrics/read_lines.h"
#include "support/files.h"

using Catch::Contains;
using tx::data::Batch;
using tx::data::Batcher;
using tx::data::BatcherOptions;
using tx::data::BatchPosition;
using tx::data::ParallelCorpus;
using tx::data::Vocab;
namespace fs = std::filesystem;
using tx::test::slurp;
using tx::test::TempDir;
using tx::test::write_file;

namespace {

using tx::test::join_lines;

// A small deterministic stand-in for a parallel corpus: sentences of 2..11 words drawn from two
// word lists with umlauts, accents and Chinese, single spaces only (so SentencePiece's default
// normaliser leaves them as they are).
struct Synthetic {
  std::vector<std::string> src, tgt;
};

Synthetic synthetic_corpus(int lines, uint64_t seed = 7) {
  static const char* de[] = {"der",   "die",     "das",    "Mann",  "Frau",  "Männer", "Straße",
                             "grün",  "schön",   "läuft",  "über",  "Café",  "中文",   "Hund",
                             "Katze", "spielt",  "im",     "Park",  "ein",   "rotes",  "Auto",
                             "fährt", "schnell", "Kinder", "essen", "Äpfel", "und",    "Brot."};
  static const char* en[] = {"the",      "a",    "man",    "woman", "men",    "street", "green",
                             "nice",     "runs", "over",   "café",  "中文",   "dog",    "cat",
                             "plays",    "in",   "park",   "red",   "car",    "drives", "fast",
                             "children", "eat",  "apples", "and",   "bread.", "résumé", "naïve"};
  uint64_t state = seed;
  auto draw = [&](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<size_t>((state >> 33) % n);
  };
  Synthetic out;
  for (int i = 0; i < lines; ++i) {
    for (int side = 0; side < 2; ++side) {
      const char** words = side == 0 ? de : en;
      size_t count = side == 0 ? std::size(de) : std::size(en);
      std::string line;
      size_t n = 2 + draw(10);
      for (size_t w = 0; w < n; ++w) line += (w ? " " : "") + std::string(words[draw(count)]);
      (side == 0 ? out.src : out.tgt).push_back(line);
    }
  }
  return out;
}

// Writes the synthetic corpus as train.de / train.en in `dir` and trains a joint vocabulary.
struct TrainedVocab {
  std::string src_path, tgt_path, prefix;
  Synthetic text;
  tx::data::VocabTrainResult result;
};

TrainedVocab train_synthetic(const TempDir& dir, const std::string& name = "vocab",
                             int32_t size = 100, uint64_t seed = 1,
                             const std::string& type = "unigram") {
  TrainedVocab t;
  t.text = synthetic_corpus(300);
  t.src_path = dir.file("train.de");
  t.tgt_path = dir.file("train.en");
  write_file(t.src_path, join_lines(t.text.src));
  write_file(t.tgt_path, join_lines(t.text.tgt));
  tx::data::VocabTrainOptions o;
  o.inputs = {t.src_path, t.tgt_path};
  o.prefix = dir.file(name);
  o.vocab_size = size;
  o.seed = seed;
  o.model_type = type;
  t.prefix = o.prefix;
  t.result = tx::data::train_vocab(o);
  return t;
}

// A corpus of random lengths (ids are arbitrary), for the batcher.
ParallelCorpus random_corpus(int pairs, uint64_t seed, int max_len = 40) {
  uint64_t state = seed;
  auto draw = [&](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int>((state >> 33) % n);
  };
  ParallelCorpus c;
  for (int i = 0; i < pairs; ++i) {
    std::vector<int32_t> s(1 + draw(max_len)), t(1 + draw(max_len));
    for (auto& v : s) v = 4 + draw(100);
    for (auto& v : t) v = 4 + draw(100);
    c.add(s, t, i + 1);
  }
  return c;
}

// Every batch of one epoch.
std::vector<Batch> epoch_batches(Batcher& b) {
  std::vector<Batch> out;
  Batch batch;
  while (b.next(batch)) out.push_back(batch);
  return out;
}

std::vector<std::vector<int64_t>> indices_of(const std::vector<Batch>& batches) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& b : batches) out.push_back(b.indices);
  return out;
}

}  // namespace

// ---- UTF-8 ------------------------------------------------------------------------------------

TEST_CASE("data utf8: valid text passes, each kind of malformed sequence is found", "[data]") {
  using tx::find_invalid_utf8;
  const size_t ok = std::string_view::npos;
  CHECK(find_invalid_utf8("") == ok);
  CHECK(find_invalid_utf8("plain ASCII") == ok);
  CHECK(find_invalid_utf8("Männer, café, 中文, 😀") == ok);
  CHECK(find_invalid_utf8("\xF4\x8F\xBF\xBF") == ok);      // U+10FFFF
  CHECK(find_invalid_utf8("ab\xFF") == 2);                 // never valid
  CHECK(find_invalid_utf8("a\x80") == 1);                  // lone continuation
  CHECK(find_invalid_utf8("\xC0\x80") == 0);               // overlong NUL
  CHECK(find_invalid_utf8("\xE0\x80\x80") == 0);           // overlong 3-byte
  CHECK(find_invalid_utf8("x\xED\xA0\x80") == 1);          // surrogate U+D800
  CHECK(find_invalid_utf8("\xF4\x90\x80\x80") == 0);       // above U+10FFFF
  CHECK(find_invalid_utf8("ok \xE4\xB8") == 3);            // truncated 中
  CHECK(find_invalid_utf8(std::string("a\0b", 3)) == ok);  // NUL is valid UTF-8
  CHECK(tx::describe_invalid_utf8("ab\xFF") == "invalid UTF-8 at byte 3 (0xff)");
}

TEST_CASE("data text lines: NUL bytes and UTF-16 are refused with the fix that fits", "[data]") {
  using Catch::Contains;
  using Catch::StartsWith;
  using tx::describe_text_line_problem;
  CHECK(describe_text_line_problem("Männer, café") == "");
  CHECK_THAT(describe_text_line_problem(std::string("ab\0c", 4)),
             StartsWith("NUL byte at byte 3;") && Contains("iconv -f UTF-16"));
  // The first problem wins: invalid UTF-8 before the NUL is reported as such.
  CHECK_THAT(describe_text_line_problem(std::string("\xE9 a\0", 4)),
             StartsWith("invalid UTF-8 at byte 1 (0xe9)") && Contains("LATIN1"));
  CHECK_THAT(describe_text_line_problem(std::string("\xFF\xFEh\0i\0", 6)),
             StartsWith("invalid UTF-8 at byte 1 (0xff)") && Contains("looks like UTF-16"));
  // UTF-32's little-endian mark starts as UTF-16's; its big-endian one with NULs.
  CHECK_THAT(describe_text_line_problem(std::string("\xFF\xFE\0\0h\0\0\0", 8)),
             Contains("looks like UTF-32") && Contains("iconv -f UTF-32 -t UTF-8"));
  CHECK_THAT(describe_text_line_problem(std::string("\0\0\xFE\xFF\0\0\0h", 8)),
             Contains("iconv -f UTF-32"));
  // The metrics' reader (sacreBLEU's rules) gives the same conversion.
  CHECK_THROWS_WITH(tx::check_utf8_line(std::string("\xFE\xFF\0h", 4), "hyps", 1),
                    Contains("iconv -f UTF-16 -t UTF-8"));
}

// ---- vocabulary -------------------------------------------------------------------------------

TEST_CASE("data text lines: gzip files read as their text, damage is named", "[data]") {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "Zeile " + std::to_string(i) + " \xC3\xA4\r\n";
  write_file(dir.file("plain.txt"), text);
  write_file(dir.file("copy.txt"), text);
  // Two members, as `cat a.gz b.gz` makes: gzip -d reads both.
  REQUIRE(std::system(("gzip -n -f " + dir.file("copy.txt") + " && cat " + dir.file("copy.txt.gz") +
                       " " + dir.file("copy.txt.gz") + " > " + dir.file("twice.gz"))
                          .c_str()) == 0);
  auto lines_of = [](const std::string& path) {
    tx::data::LineReader reader(path);
    std::vector<std::string> lines;
    for (std::string line; reader.next(line);) lines.push_back(line);
    return lines;
  };
  const std::vector<std::string> plain = lines_of(dir.file("plain.txt"));
  REQUIRE(plain.size() == 20000);
  CHECK(plain[7] == "Zeile 7 \xC3\xA4");
  auto is_gzip = [](const std::string& path) {
    tx::TextInput in(path);
    in.get();
    return in.gzip();
  };
  CHECK(is_gzip(dir.file("copy.txt.gz")));
  CHECK_FALSE(is_gzip(dir.file("plain.txt")));
  CHECK(lines_of(dir.file("copy.txt.gz")) == plain);
  std::vector<std::string> both = plain;
  both.insert(both.end(), plain.begin(), plain.end());
  CHECK(lines_of(dir.file("twice.gz")) == both);
  CHECK(tx::metrics::read_bytes(dir.file("copy.txt.gz")) == text);

  // Cut short: the lines before the cut, then an error naming the file and gzip.
  const std::string gz = slurp(dir.file("copy.txt.gz"));
  write_file(dir.file("cut.gz"), gz.substr(0, gz.size() / 2));
  CHECK_THROWS_WITH(lines_of(dir.file("cut.gz")),
                    Contains("cut.gz' after line") && Contains("gzip -t"));
  CHECK_THROWS_WITH(tx::metrics::read_bytes(dir.file("cut.gz")),
                    Contains("cut.gz'") && Contains("gzip -t"));
  // Damaged inside (its deflate data overwritten): zlib's reason, the file, gzip -t.
  std::string damaged = gz;
  for (size_t i = gz.size() / 3; i < gz.size() / 3 + 64; ++i) damaged[i] = '\xff';
  write_file(dir.file("damaged.gz"), damaged);
  CHECK_THROWS_WITH(lines_of(dir.file("damaged.gz")),
                    Contains("damaged.gz' after line") && Contains("gzip -t"));
  // Bytes after the last member that start no other are ignored, as gzip -d and zlib's gzread
  // do (tape padding).
  write_file(dir.file("padded.gz"), gz + std::string(3, '\0'));
  CHECK(lines_of(dir.file("padded.gz")) == plain);
  // A descriptor (stdin's way) reads as the path does, and stays open.
  const int fd = open(dir.file("twice.gz").c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  {
    tx::TextInput in(fd);
    tx::data::LineReader reader(in, "fd");
    std::vector<std::string> lines;
    for (std::string line; reader.next(line);) lines.push_back(line);
    CHECK(lines == both);
    CHECK(in.gzip());
  }
  CHECK(close(fd) == 0);
}

// What arrives through a pipe is read as it arrives: a line typed into tx-translate is
// translated before the next is typed (a reader that waits for a full block, as gzread and
// stdio's fread do, would wait for the writer to close).
TEST_CASE("data text lines: a pipe's first line is read before the writer closes, gzip or not",
          "[data]") {
  for (const bool gzip : {false, true}) {
    CAPTURE(gzip);
    int ends[2];
    REQUIRE(pipe(ends) == 0);
    std::string first = "Ein Hund rennt.\n";
    if (gzip) {
      // A gzip stream flushed after its first line, as `gzip` does not but a program's
      // Z_SYNC_FLUSH would: its bytes carry the line, with no end of stream yet.
      z_stream z{};
      REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
      std::string out(1024, '\0');
      z.next_in = reinterpret_cast<Bytef*>(first.data());
      z.avail_in = static_cast<uInt>(first.size());
      z.next_out = reinterpret_cast<Bytef*>(out.data());
      z.avail_out = static_cast<uInt>(out.size());
      REQUIRE(deflate(&z, Z_SYNC_FLUSH) == Z_OK);
      out.resize(out.size() - z.avail_out);
      deflateEnd(&z);
      first = out;
    }
    REQUIRE(write(ends[1], first.data(), first.size()) == ssize_t(first.size()));
    auto line = std::async(std::launch::async, [&] {
      tx::TextInput in("/dev/fd/" + std::to_string(ends[0]));  // a path, as -i <(...) gives
      std::string got;
      std::getline(in, got);
      return got;
    });
    const bool arrived = line.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
    close(ends[1]);  // lets a reader that waited for more finish, so the test ends either way
    CHECK(arrived);
    CHECK(line.get() == "Ein Hund rennt.");
    close(ends[0]);
  }
}

TEST_CASE("data vocab: trained on the fly, special ids, exact round trip with non-ASCII",
          "[data]") {
  TempDir dir;
  auto t = train_synthetic(dir);
  CHECK(t.result.model_path == t.prefix + ".spm");
  CHECK(t.result.lines == 600);
  CHECK(t.result.sampled == 600);
  // Only the two corpus files and the two vocabulary files: no temporary left behind.
  CHECK(dir.entries() ==
        std::vector<std::string>{"train.de", "train.en", "vocab.spm", "vocab.vocab"});
  Vocab v(t.result.model_path);
  CHECK(v.size() == 100);
  CHECK(v.size() == t.result.size);
  CHECK(v.pad_id() == 0);
  CHECK(v.unk_id() == 1);
  CHECK(v.bos_id() == 2);
  CHECK(v.eos_id() == 3);
  CHECK(v.piece(0) == "<pad>");
  CHECK(v.piece(1) == "<unk>");
  CHECK(v.piece(2) == "<s>");
  CHECK(v.piece(3) == "</s>");
  // The .vocab file lists every piece, in id order.
  std::istringstream listing(slurp(t.result.vocab_path));
  std::string entry;
  int32_t count = 0;
  while (std::getline(listing, entry)) {
    CHECK(entry.substr(0, entry.find('\t')) == v.piece(count));
    ++count;
  }
  CHECK(count == v.size());

  int non_ascii = 0;
  for (const auto* side : {&t.text.src, &t.text.tgt}) {
    for (const auto& line : *side) {
      auto ids = v.encode(line);
      INFO(line);
      REQUIRE(!ids.empty());
      CHECK(std::find(ids.begin(), ids.end(), Vocab::kUnkId) == ids.end());
      CHECK(std::all_of(ids.begin(), ids.end(), [](int32_t id) { return id > 3; }));
      CHECK(v.decode(ids) == line);
      if (line.find("中文") != std::string::npos || line.find("ä") != std::string::npos ||
          line.find("é") != std::string::npos)
        ++non_ascii;
    }
  }
  CHECK(non_ascii > 100);

  // pad, bos and eos produce no text; a character never seen maps to unk.
  auto ids = v.encode("die Katze");
  std::vector<int32_t> framed = {Vocab::kBosId};
  framed.insert(framed.end(), ids.begin(), ids.end());
  framed.insert(framed.end(), {Vocab::kEosId, Vocab::kPadId, Vocab::kPadId});
  CHECK(v.decode(framed) == "die Katze");
  auto unseen = v.encode("Ω");
  CHECK(std::find(unseen.begin(), unseen.end(), Vocab::kUnkId) != unseen.end());
  CHECK(v.encode("").empty());
  CHECK_THROWS_WITH(v.decode({5, 100000}), Contains("100000") && Contains("0..99"));
  CHECK_THROWS_WITH(v.encode("ab\xFF"), Contains("invalid UTF-8 at byte 3"));
}

TEST_CASE("data vocab: the same seed gives the same model and ids, BPE too", "[data]") {
  TempDir dir;
  auto a = train_synthetic(dir, "a", 100, 5);
  auto b = train_synthetic(dir, "b", 100, 5);
  CHECK(slurp(a.result.model_path) == slurp(b.result.model_path));
  Vocab va(a.result.model_path), vb(b.result.model_path);
  for (int i = 0; i < 50; ++i) CHECK(va.encode(a.text.src[i]) == vb.encode(a.text.src[i]));

  // A sample of the lines (max_lines below the line count) is drawn with the seed.
  auto sampled = [&](const std::string& name, uint64_t seed) {
    tx::data::VocabTrainOptions o;
    o.inputs = {a.src_path, a.tgt_path};
    o.prefix = dir.file(name);
    o.vocab_size = 100;
    o.max_lines = 150;
    o.hard_vocab_limit = false;
    o.seed = seed;
    return slurp(tx::data::train_vocab(o).model_path);
  };
  CHECK(sampled("s1", 11) == sampled("s2", 11));
  CHECK(sampled("s3", 11) != sampled("s4", 12));

  auto bpe = train_synthetic(dir, "bpe", 100, 1, "bpe");
  Vocab vb2(bpe.result.model_path);
  CHECK(vb2.size() == 100);
  for (const auto& line : bpe.text.tgt) CHECK(vb2.decode(vb2.encode(line)) == line);
}

TEST_CASE("data vocab: --sentencepiece-options fields reach the trainer, tx's own are refused",
          "[data]") {
  using tx::data::parse_trainer_fields;
  using Fields = std::vector<std::pair<std::string, std::string>>;
  CHECK(parse_trainer_fields("") == Fields{});
  CHECK(parse_trainer_fields("  --model_type=bpe\t--split_digits  character_coverage=0.99 ") ==
        Fields{{"model_type", "bpe"}, {"split_digits", "true"}, {"character_coverage", "0.99"}});
  CHECK(parse_trainer_fields("--user_defined_symbols=") == Fields{{"user_defined_symbols", ""}});
  CHECK_THROWS_WITH(parse_trainer_fields("--vocab_size=100"), Contains("--dim-vocabs"));
  for (const char* id : {"--pad_id=0", "--unk_id=3", "--bos_id=-1", "--eos_id=1"})
    CHECK_THROWS_WITH(parse_trainer_fields(id), Contains("numbers pad, unk, bos and eos"));
  CHECK_THROWS_WITH(parse_trainer_fields("--input_sentence_size=10"), Contains("samples"));
  for (const char* bad : {"--=bpe", "--Model_Type=bpe", "-model_type=bpe", "--"})
    CHECK_THROWS_WITH(parse_trainer_fields(bad),
                      Contains(std::string("'") + bad + "'") && Contains("--name=value"));

  // A field over tx's own option gives the model that option gives; a later name wins.
  TempDir dir;
  auto bpe = train_synthetic(dir, "bpe", 100, 1, "bpe");
  auto unigram = train_synthetic(dir, "unigram", 100, 1, "unigram");
  REQUIRE(slurp(bpe.result.model_path) != slurp(unigram.result.model_path));
  auto with_fields = [&](const std::string& name, const std::string& text) {
    tx::data::VocabTrainOptions o;
    o.inputs = {bpe.src_path, bpe.tgt_path};
    o.prefix = dir.file(name);
    o.vocab_size = 100;
    o.trainer_fields = parse_trainer_fields(text);
    return slurp(tx::data::train_vocab(o).model_path);
  };
  CHECK(with_fields("f1", "--model_type=bpe") == slurp(bpe.result.model_path));
  CHECK(with_fields("f2", "--model_type=bpe --model_type=unigram") ==
        slurp(unigram.result.model_path));
  // A field tx has no option for: pieces of at most 2 characters (the default's go to 16).
  auto longest_piece = [&](const std::string& name) {
    std::ifstream vocab(dir.file(name + ".vocab"));
    size_t longest = 0;
    for (std::string line; std::getline(vocab, line);) {
      const std::string piece = line.substr(0, line.find('\t'));
      if (piece.front() == '<') continue;  // <pad>, <unk>, <s>, </s>
      // UTF-8 characters: the bytes that are not continuation bytes.
      longest = std::max<size_t>(longest, std::count_if(piece.begin(), piece.end(), [](char c) {
                                   return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
                                 }));
    }
    return longest;
  };
  with_fields("short", "--max_sentencepiece_length=2");
  CHECK(longest_piece("short") == 2);
  CHECK(longest_piece("unigram") > 2);

  tx::data::VocabTrainOptions o;
  o.inputs = {bpe.src_path};
  o.prefix = dir.file("unknown");
  o.vocab_size = 100;
  o.trainer_fields = {{"no_such_field", "1"}};
  CHECK_THROWS_WITH(tx::data::train_vocab(o),
                    Contains("no_such_field") && Contains("check --sentencepiece-options"));
  CHECK_FALSE(std::filesystem::exists(dir.file("unknown.spm")));
}

TEST_CASE("data vocab: encode_head gives encode's first pieces of a long line without the rest*",
          "[data]") {
  TempDir dir;
  for (const char* type : {"unigram", "bpe"}) {
    const TrainedVocab t = train_synthetic(dir, std::string("head_") + type, 100, 1, type);
    const Vocab v(t.result.model_path);
    // About 100 kB of text with runs of spaces and tabs and non-ASCII words before spaces: a
    // cut may fall only before a space that follows a printable ASCII character.
    std::string line;
    const char* gaps[] = {" ", "  ", " \t ", "\t", " "};
    for (int i = 0; i < 4000; ++i)
      line += t.text.src[static_cast<size_t>(i) % t.text.src.size()] + gaps[i % 5];
    const std::vector<int32_t> whole = v.encode(line);
    INFO(type << ": " << line.size() << " bytes, " << whole.size() << " pieces");
    REQUIRE(whole.size() > 20000);
    for (int64_t limit : {1, 7, 100, 1000, 20000, 1000000}) {
      const std::vector<int32_t> head = v.encode_head(line, limit);
      INFO("limit " << limit << ": " << head.size() << " pieces");
      if (static_cast<int64_t>(whole.size()) > limit) {
        CHECK(static_cast<int64_t>(head.size()) > limit);
        // The head is a prefix of the line's pieces, and for a small limit far from all of them.
        CHECK(std::equal(head.begin(), head.end(), whole.begin()));
        if (limit <= 100) CHECK(head.size() < whole.size() / 4);
      } else {
        CHECK(head == whole);
      }
    }
    CHECK(v.encode_head(line, 0) == whole);  // no limit
    // No space to cut at: the whole line.
    const std::string word(50000, 'a');
    CHECK(v.encode_head(word, 3) == v.encode(word));
    // Invalid UTF-8 past the head is still found.
    CHECK_THROWS_WITH(v.encode_head(line + "\xff", 7), Contains("UTF-8"));
  }
}

TEST_CASE("data vocab: training errors name the file and the fix", "[data]") {
  TempDir dir;
  std::string tiny = dir.file("tiny.txt");
  write_file(tiny, "ein Hund\nzwei Katzen\n");
  tx::data::VocabTrainOptions o;
  o.prefix = dir.file("v");
  o.vocab_size = 5000;

  o.inputs = {dir.file("missing.txt")};
  CHECK_THROWS_WITH(tx::data::train_vocab(o), Contains("missing.txt") && Contains("cannot read"));

  std::string blank = dir.file("blank.txt");
  write_file(blank, "\n\n\n");
  o.inputs = {blank};
  CHECK_THROWS_WITH(tx::data::train_vocab(o),
                    Contains("blank.txt") && Contains("no non-empty line"));

  o.inputs = {tiny};
  CHECK_THROWS_WITH(tx::data::train_vocab(o),
                    Contains("tiny.txt") && Contains("5000") && Contains("lower --dim-vocabs"));
  o.vocab_size = 8;  // fewer pieces than the text has characters
  CHECK_THROWS_WITH(tx::data::train_vocab(o),
                    Contains("tiny.txt") && Contains("raise --dim-vocabs"));
  CHECK(dir.entries() == std::vector<std::string>{"blank.txt", "tiny.txt"});

  // Without the hard limit the same tiny text gives a smaller vocabulary.
  o.vocab_size = 5000;
  o.hard_vocab_limit = false;
  auto r = tx::data::train_vocab(o);
  CHECK(r.size > 4);
  CHECK(r.size < 5000);
  CHECK(Vocab(r.model_path).decode(Vocab(r.model_path).encode("zwei Katzen")) == "zwei Katzen");

  // A failed training leaves the existing model as it was.
  std::string before = slurp(r.model_path);
  std::string bad = dir.file("bad.txt");
  write_file(bad, "gut\nauch gut\nschlecht \xC3\x28 hier\nnie gelesen\n");
  o.inputs = {tiny, bad};
  CHECK_THROWS_WITH(tx::data::train_vocab(o), Contains("bad.txt' line 3") &&
                                                  Contains("invalid UTF-8 at byte 10") &&
                                                  Contains("convert the file to UTF-8"));
  CHECK(slurp(r.model_path) == before);

  o.inputs = {tiny};
  o.model_type = "wordpiece";
  CHECK_THROWS_WITH(tx::data::train_vocab(o), Contains("unigram or bpe"));
  o.model_type = "unigram";

  // Old Mac line endings: one line longer than SentencePiece takes, and it says nothing.
  std::string cr_text;
  for (int i = 0; i < 400; ++i) cr_text += "ein Hund und zwei Katzen\r";
  write_file(dir.file("cr.txt"), cr_text);
  o.inputs = {dir.file("cr.txt")};
  CHECK_THROWS_WITH(tx::data::train_vocab(o), Contains("skips lines over 4192 bytes") &&
                                                  Contains("longest here has 9999") &&
                                                  Contains("CR-only"));

  // A pipe, read to its end by the count: the sample would be empty.
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const std::string text = "ein Hund\nzwei Katzen\n";
  REQUIRE(write(fds[1], text.data(), text.size()) == ssize_t(text.size()));
  close(fds[1]);
  o.inputs = {"/dev/fd/" + std::to_string(fds[0])};
  CHECK_THROWS_WITH(tx::data::train_vocab(o), Contains("2 non-empty lines when counted but 0") &&
                                                  Contains("a pipe can be read only once"));
  close(fds[0]);
}

TEST_CASE("data vocab: loading errors name the file", "[data]") {
  TempDir dir;
  CHECK_THROWS_WITH(Vocab(dir.file("nope.spm")), Contains("nope.spm") && Contains("no such file"));
  std::string junk = dir.file("junk.spm");
  write_file(junk, "this is not a model");
  CHECK_THROWS_WITH(Vocab(junk), Contains("junk.spm") && Contains("not a SentencePiece model"));

  // A model made by spm_train with its own default ids (unk 0, bos 1, eos 2, no pad).
  std::string text = dir.file("t.txt");
  write_file(text, join_lines(synthetic_corpus(50).src));
  auto status = sentencepiece::SentencePieceTrainer::Train({{"input", text},
                                                            {"model_prefix", dir.file("foreign")},
                                                            {"vocab_size", "80"},
                                                            {"hard_vocab_limit", "false"},
                                                            {"minloglevel", "2"}});
  INFO(status.ToString());
  REQUIRE(status.ok());
  CHECK_THROWS_WITH(Vocab(dir.file("foreign.model")),
                    Contains("foreign.model") && Contains("pad -1, unk 0, bos 1, eos 2") &&
                        Contains("--pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3"));
}

// ---- corpus -----------------------------------------------------------------------------------

TEST_CASE("data corpus: pairs become ids once, empty and long pairs are dropped and counted",
          "[data]") {
  TempDir dir;
  auto t = train_synthetic(dir);
  Vocab v(t.result.model_path);
  // Line 2 is empty on the target side, line 4 blank on the source side, line 5 long, and the
  // source file has Windows line ends.
  std::vector<std::string> src = {
      "der Mann", "die Frau", "ein Hund", "  ", "der Mann und die Frau und der Hund und die Katze",
      "中文 Café"};
  std::vector<std::string> tgt = {"the man", "", "a dog", "nothing", "the man", "中文 café"};
  std::string crlf;
  for (const auto& l : src) crlf += l + "\r\n";
  write_file(dir.file("c.de"), crlf);
  write_file(dir.file("c.en"), join_lines(tgt));

  tx::data::CorpusOptions o;
  o.max_src_tokens = 8;
  o.num_threads = 2;
  auto c = tx::data::load_parallel_corpus(dir.file("c.de"), dir.file("c.en"), v, v, o);
  REQUIRE(c.size() == 3);
  CHECK(c.line(0) == 1);
  CHECK(c.line(1) == 3);
  CHECK(c.line(2) == 6);
  CHECK(c.src(0).to_vector() == v.encode("der Mann"));
  CHECK(c.tgt(1).to_vector() == v.encode("a dog"));
  CHECK(v.decode(c.src(2).to_vector()) == "中文 Café");
  const auto& s = c.stats();
  CHECK(s.pairs_read == 6);
  CHECK(s.kept == 3);
  CHECK(s.dropped_empty == 2);
  CHECK(s.dropped_too_long == 1);
  CHECK(s.src_tokens == c.src_length(0) + c.src_length(1) + c.src_length(2));
  CHECK_THAT(s.summary(o), Contains("read 6 pairs: kept 3, dropped 2 empty and 1 too long"));

  o.empty_lines = tx::data::EmptyLines::kKeep;
  o.max_src_tokens = 0;
  auto all = tx::data::load_parallel_corpus(dir.file("c.de"), dir.file("c.en"), v, v, o);
  CHECK(all.size() == 6);
  CHECK(all.tgt_length(1) == 0);

  o.empty_lines = tx::data::EmptyLines::kReject;
  CHECK_THROWS_WITH(tx::data::load_parallel_corpus(dir.file("c.de"), dir.file("c.en"), v, v, o),
                    Contains("c.en' line 2 is empty"));

  // The same ids whatever the thread count, on a corpus bigger than one thread's share.
  o.empty_lines = tx::data::EmptyLines::kSkip;
  auto one = tx::data::load_parallel_corpus(t.src_path, t.tgt_path, v, v, {});
  o.num_threads = 3;
  auto three = tx::data::load_parallel_corpus(t.src_path, t.tgt_path, v, v, o);
  REQUIRE(one.size() == 300);
  REQUIRE(three.size() == 300);
  for (int64_t i = 0; i < 300; ++i) {
    CHECK(one.src(i).to_vector() == three.src(i).to_vector());
    CHECK(v.decode(one.tgt(i).to_vector()) == t.text.tgt[i]);
  }
}

TEST_CASE("data corpus: line-count mismatch and invalid UTF-8 name the files", "[data]") {
  TempDir dir;
  auto t = train_synthetic(dir);
  Vocab v(t.result.model_path);
  write_file(dir.file("a.de"), "eins\nzwei\ndrei\nvier\n");
  write_file(dir.file("a.en"), "one\ntwo\nthree\n");
  CHECK_THROWS_WITH(
      tx::data::load_parallel_corpus(dir.file("a.de"), dir.file("a.en"), v, v),
      Contains("a.de' has 4 lines but '") && Contains("a.en' has 3") && Contains("aligned"));
  CHECK_THROWS_WITH(tx::data::load_parallel_corpus(dir.file("a.en"), dir.file("a.de"), v, v),
                    Contains("a.en' has 3 lines but '") && Contains("a.de' has 4"));
  write_file(dir.file("b.en"), "one\ntw\xF0\x28o\nthree\nfour\n");
  CHECK_THROWS_WITH(tx::data::load_parallel_corpus(dir.file("a.de"), dir.file("b.en"), v, v),
                    Contains("b.en' line 2: invalid UTF-8 at byte 3 (0xf0)"));
  CHECK_THROWS_WITH(tx::data::load_parallel_corpus(dir.file("none.de"), dir.file("a.en"), v, v),
                    Contains("cannot read text file '") && Contains("none.de"));
}

// ---- training batches -------------------------------------------------------------------------

TEST_CASE("data batcher: every pair once per epoch, every batch within the limits", "[data]") {
  auto corpus = random_corpus(1000, 3);
  BatcherOptions o;
  o.max_tokens = 300;
  o.max_sentences = 24;
  o.maxi_batch = 10;
  Batcher b(corpus, o);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    CHECK(b.position() == BatchPosition{epoch, 0});
    int64_t expected = b.batches_in_epoch();
    auto batches = epoch_batches(b);
    CHECK(static_cast<int64_t>(batches.size()) == expected);
    std::vector<int> seen(corpus.size(), 0);
    int64_t padded = 0, real = 0;
    for (const auto& batch : batches) {
      CHECK(batch.size > 0);
      CHECK(batch.size <= 24);
      CHECK(batch.padded_tokens() <= 300);
      for (int64_t i : batch.indices) ++seen[i];
      padded += batch.padded_tokens();
      real += std::max(batch.src_tokens(), batch.tgt_tokens());
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    // Sorting within windows keeps padding small (random lengths unsorted waste ~40%).
    CHECK(static_cast<double>(real) / padded > 0.75);
  }
  CHECK(b.position() == BatchPosition{3, 0});
}

TEST_CASE("data batcher: source, bos/eos and padding layout is exact", "[data]") {
  ParallelCorpus c;
  c.add({10, 11, 12}, {20}, 1);
  c.add({13}, {21, 22, 23, 24}, 2);
  c.add({}, {25, 26}, 3);  // kept empty (scoring): the source row is eos alone
  const int64_t rows[] = {0, 1, 2};
  Batch b = tx::data::make_batch(c, rows, 3);
  CHECK(b.size == 3);
  CHECK(b.src_len == 4);
  CHECK(b.tgt_len == 5);
  CHECK(b.src == std::vector<int32_t>{10, 11, 12, 3, /**/ 13, 3, 0, 0, /**/ 3, 0, 0, 0});
  CHECK(b.src_lengths == std::vector<int32_t>{4, 2, 1});
  CHECK(b.tgt_in == std::vector<int32_t>{2, 20, 0, 0, 0, /**/ 2, 21, 22, 23, 24, /**/
                                         2, 25, 26, 0, 0});
  CHECK(b.tgt_out == std::vector<int32_t>{20, 3, 0, 0, 0, /**/ 21, 22, 23, 24, 3, /**/
                                          25, 26, 3, 0, 0});
  CHECK(b.tgt_lengths == std::vector<int32_t>{2, 5, 3});
  CHECK(b.indices == std::vector<int64_t>{0, 1, 2});
  CHECK(b.src_tokens() == 7);
  CHECK(b.tgt_tokens() == 10);
  CHECK(b.padded_tokens() == 15);

  // Every batch of an epoch, row by row, against the corpus.
  auto corpus = random_corpus(200, 9);
  BatcherOptions o;
  o.max_tokens = 256;
  Batcher batcher(corpus, o);
  for (const auto& batch : epoch_batches(batcher)) {
    for (int64_t r = 0; r < batch.size; ++r) {
      auto x = corpus.src(batch.indices[r]).to_vector();
      auto y = corpus.tgt(batch.indices[r]).to_vector();
      std::vector<int32_t> src(batch.src.begin() + r * batch.src_len,
                               batch.src.begin() + (r + 1) * batch.src_len);
      std::vector<int32_t> in(batch.tgt_in.begin() + r * batch.tgt_len,
                              batch.tgt_in.begin() + (r + 1) * batch.tgt_len);
      std::vector<int32_t> out(batch.tgt_out.begin() + r * batch.tgt_len,
                               batch.tgt_out.begin() + (r + 1) * batch.tgt_len);
      auto want_src = x;
      want_src.push_back(3);
      want_src.resize(batch.src_len, 0);
      std::vector<int32_t> want_in = {2};
      want_in.insert(want_in.end(), y.begin(), y.end());
      want_in.resize(batch.tgt_len, 0);
      auto want_out = y;
      want_out.push_back(3);
      want_out.resize(batch.tgt_len, 0);
      CHECK(src == want_src);
      CHECK(in == want_in);
      CHECK(out == want_out);
      CHECK(batch.src_lengths[r] == static_cast<int32_t>(x.size() + 1));
      CHECK(batch.tgt_lengths[r] == static_cast<int32_t>(y.size() + 1));
    }
  }
}

TEST_CASE("data batcher: deterministic for a seed, different seeds and epochs differ", "[data]") {
  auto corpus = random_corpus(500, 4);
  BatcherOptions o;
  o.max_tokens = 200;
  o.seed = 42;
  Batcher a(corpus, o), b(corpus, o);
  auto a0 = indices_of(epoch_batches(a)), b0 = indices_of(epoch_batches(b));
  CHECK(a0 == b0);
  auto a1 = indices_of(epoch_batches(a));
  CHECK(a1 != a0);
  o.seed = 43;
  Batcher c(corpus, o);
  CHECK(indices_of(epoch_batches(c)) != a0);
  // The plan of an epoch does not depend on how the batcher got there.
  CHECK(b.plan(1).order == a.plan(1).order);

  // No shuffling: sorted within windows, the same every epoch.
  o.shuffle = false;
  o.maxi_batch = 0;
  Batcher d(corpus, o);
  auto d0 = epoch_batches(d);
  CHECK(indices_of(epoch_batches(d)) == indices_of(d0));
  for (size_t i = 1; i < d0.size(); ++i)
    CHECK(std::max(d0[i - 1].src_len, d0[i - 1].tgt_len) <= std::max(d0[i].src_len, d0[i].tgt_len));
}

TEST_CASE("data batcher: resuming at (epoch, batch) reproduces the remaining batches", "[data]") {
  auto corpus = random_corpus(600, 5);
  BatcherOptions o;
  o.max_tokens = 250;
  o.max_sentences = 16;
  o.seed = 7;
  Batcher full(corpus, o);
  epoch_batches(full);  // epoch 0
  Batch batch;
  for (int i = 0; i < 5; ++i) REQUIRE(full.next(batch));
  BatchPosition saved = full.position();
  CHECK(saved == BatchPosition{1, 5});
  auto rest = epoch_batches(full);
  auto after = epoch_batches(full);  // epoch 2

  Batcher resumed(corpus, o);
  resumed.seek(saved);
  auto rest2 = epoch_batches(resumed);
  auto after2 = epoch_batches(resumed);
  REQUIRE(rest.size() == rest2.size());
  for (size_t i = 0; i < rest.size(); ++i) {
    CHECK(rest[i].indices == rest2[i].indices);
    CHECK(rest[i].src == rest2[i].src);
    CHECK(rest[i].tgt_in == rest2[i].tgt_in);
    CHECK(rest[i].tgt_out == rest2[i].tgt_out);
  }
  CHECK(indices_of(after) == indices_of(after2));

  // Resuming exactly at an epoch's end gives no batch, then the next epoch.
  Batcher at_end(corpus, o);
  at_end.seek({0, at_end.plan(0).batches()});
  CHECK_FALSE(at_end.next(batch));
  CHECK(at_end.position() == BatchPosition{1, 0});
  CHECK_THROWS_WITH(at_end.seek({1, 100000}),
                    Contains("batch 100000 of epoch 1") && Contains("--mini-batch"));
}

TEST_CASE("data batcher: a --max-tokens beyond any window makes one batch of the corpus",
          "[data]") {
  auto corpus = random_corpus(300, 9);
  BatcherOptions o;
  o.max_tokens = int64_t(1) << 62;  // times --maxi-batch 100, it once wrapped to a negative
  Batcher b(corpus, o);
  CHECK(b.batches_in_epoch() == 1);
  o.max_sentences = int64_t(1) << 62;
  CHECK(Batcher(corpus, o).batches_in_epoch() == 1);
}

TEST_CASE("data batcher: errors for a pair wider than max_tokens and an empty corpus", "[data]") {
  ParallelCorpus c;
  c.add({5, 6}, {7}, 1);
  c.add(std::vector<int32_t>(40, 5), {7}, 2);
  BatcherOptions o;
  o.max_tokens = 32;
  CHECK_THROWS_WITH(Batcher(c, o),
                    Contains("line 2") && Contains("41 source") && Contains("--max-tokens 32"));
  ParallelCorpus empty;
  CHECK_THROWS_WITH(Batcher(empty, o), Contains("no sentence pair"));
  o.max_tokens = 0;
  CHECK_THROWS_WITH(Batcher(c, o), Contains("--max-tokens"));
}

// ---- translation batches ----------------------------------------------------------------------

TEST_CASE("data inference batcher: sorted batches, results written back in input order", "[data]") {
  TempDir dir;
  auto t = train_synthetic(dir);
  Vocab v(t.result.model_path);
  std::vector<std::string> lines(t.text.src.begin(), t.text.src.begin() + 97);
  lines[10] = "";  // an empty line still gets its output line
  std::string text = join_lines(lines);
  text.pop_back();  // no newline after the last line

  // (maxi_batch, max_sentences): one line at a time, one batch's worth, three, everything.
  for (auto [maxi_batch, max_sentences] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {1, 8}, {3, 8}, {0, 8}}) {
    INFO("maxi_batch " << maxi_batch << ", max_sentences " << max_sentences);
    std::istringstream in(text);
    tx::data::InferenceBatcherOptions o;
    o.max_tokens = 60;
    o.max_sentences = max_sentences;
    o.maxi_batch = maxi_batch;
    tx::data::InferenceBatcher batcher(in, "<stdin>", v, o);
    std::ostringstream out;
    tx::data::OrderedOutput output(out);
    tx::data::SourceBatch batch;
    std::set<int64_t> seen;
    int64_t batches = 0;
    while (batcher.next(batch)) {
      ++batches;
      CHECK(batch.size <= max_sentences);
      // A window is at most maxi_batch batches' worth of lines, so its lines are read lazily.
      if (maxi_batch == 1 && max_sentences == 1) CHECK(batcher.lines_read() == batches);
      CHECK((batch.size * batch.src_len <= 60 || batch.size == 1));
      // Results in reverse row order: the writer must still emit input order.
      for (int64_t r = batch.size - 1; r >= 0; --r) {
        int64_t line = batch.indices[r];
        CHECK(seen.insert(line).second);
        std::vector<int32_t> row(batch.src.begin() + r * batch.src_len,
                                 batch.src.begin() + r * batch.src_len + batch.src_lengths[r]);
        REQUIRE(row.back() == Vocab::kEosId);
        CHECK(std::count(batch.src.begin() + r * batch.src_len,
                         batch.src.begin() + (r + 1) * batch.src_len,
                         Vocab::kPadId) == batch.src_len - batch.src_lengths[r]);
        row.pop_back();
        output.put(line, "[" + v.decode(row) + "]");
      }
    }
    CHECK(batcher.lines_read() == 97);
    CHECK(seen.size() == 97);
    if (max_sentences == 1) CHECK(batches == 97);
    if (maxi_batch == 0) CHECK(batches < 40);  // the whole input sorted together
    output.finish(batcher.lines_read());
    std::string want;
    for (const auto& l : lines) want += "[" + l + "]\n";
    CHECK(out.str() == want);
  }

  // A bad line ends the input after the lines before it; the error comes once they are out.
  std::istringstream bad("gut\nnicht \xFF gut\n");
  tx::data::InferenceBatcher batcher(bad, "<stdin>", v, {});
  tx::data::SourceBatch batch;
  REQUIRE(batcher.next(batch));
  CHECK(batch.indices == std::vector<int64_t>{0});
  CHECK(batcher.lines_read() == 1);
  CHECK_THROWS_WITH(batcher.next(batch), Contains("'<stdin>' line 2: invalid UTF-8 at byte 7"));
  CHECK_THROWS(batcher.next(batch));  // and again: never an end of input
  std::istringstream first_bad("nicht \xFF gut\ngut\n");
  tx::data::InferenceBatcher first(first_bad, "<stdin>", v, {});
  CHECK_THROWS_WITH(first.next(batch), Contains("'<stdin>' line 1: invalid UTF-8 at byte 7"));
}

TEST_CASE("data inference batcher: a --force-decode prefix holding a special token is named",
          "[data][prefix]") {
  // A Marian token list numbers "</s>" as eos: text can spell it.
  tx::test::TempDir dir;
  tx::test::write_file(dir.file("vocab.yml"), "</s>: 0\n<unk>: 1\nHaus: 2\nder: 3\n");
  const Vocab v = Vocab::marian(dir.file("vocab.yml"));
  tx::data::InferenceBatcherOptions o;
  o.prefix_vocab = &v;
  std::istringstream in("Haus\tder\nder\tder </s> Haus\n");
  tx::data::InferenceBatcher batcher(in, "input", v, o);
  tx::data::SourceBatch batch;
  REQUIRE(batcher.next(batch));
  CHECK(batch.prefixes == std::vector<std::vector<int32_t>>{{3}});
  CHECK_THROWS_WITH(batcher.next(batch),
                    Contains("'input' line 2: its --force-decode prefix holds '</s>'"));
}

TEST_CASE("data inference batcher: in-memory lines, longest first, oversized line alone",
          "[data]") {
  std::vector<std::vector<int32_t>> lines = {
      {5, 6}, {5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, {}, {7}, {8, 9, 10}, {9, 9}};
  tx::data::InferenceBatcherOptions o;
  o.max_tokens = 9;  // line 1 (11 tokens with eos) does not fit: a batch of its own
  auto batches = tx::data::make_source_batches(lines, 100, o);
  REQUIRE(batches.size() == 3);
  CHECK(batches[0].indices == std::vector<int64_t>{101});
  CHECK(batches[0].src_len == 11);
  CHECK(batches[1].indices == std::vector<int64_t>{104, 100});
  CHECK(batches[1].src == std::vector<int32_t>{8, 9, 10, 3, 5, 6, 3, 0});
  CHECK(batches[1].src_lengths == std::vector<int32_t>{4, 3});
  CHECK(batches[2].indices == std::vector<int64_t>{105, 103, 102});
  CHECK(batches[2].src == std::vector<int32_t>{9, 9, 3, 7, 3, 0, 3, 0, 0});
  CHECK(batches[2].src_lengths == std::vector<int32_t>{3, 2, 1});
  o.max_sentences = 1;
  CHECK(tx::data::make_source_batches(lines, 0, o).size() == 6);
}

TEST_CASE("data ordered output: waits for earlier lines, refuses duplicates and gaps", "[data]") {
  std::ostringstream out;
  tx::data::OrderedOutput o(out);
  o.put(2, "c");
  o.put(1, "b");
  CHECK(out.str().empty());
  CHECK(o.waiting() == 2);
  o.put(0, "a");
  CHECK(out.str() == "a\nb\nc\n");
  CHECK(o.written() == 3);
  CHECK_THROWS_WITH(o.put(1, "again"), Contains("line 2 was given twice"));
  o.put(4, "e");
  CHECK_THROWS_WITH(o.finish(5), Contains("3 of 5 lines written and 1 waiting"));
}

// ---- a real corpus, when the shared data is there ---------------------------------------------

namespace {

std::string squeeze_spaces(const std::string& line) {
  std::istringstream words(line);
  std::string word, out;
  while (words >> word) out += (out.empty() ? "" : " ") + word;
  return out;
}

}  // namespace

TEST_CASE("data vocab: Multi30k train.de+en, joint 8000 pieces, sampled, exact round trip",
          "[data]") {
  std::string data = tx::test::shared_data_dir();
  if (data.empty()) {
    std::cout << "SKIPPED: ../shared/data not found" << std::endl;
    return;
  }
  TempDir dir;
  std::string de = data + "/multi30k/train.de", en = data + "/multi30k/train.en";
  tx::data::VocabTrainOptions o;
  o.inputs = {de, en};
  o.prefix = dir.file("m30k");
  o.vocab_size = 8000;
  o.max_lines = 20000;  // a sample keeps the test fast
  auto start = std::chrono::steady_clock::now();
  auto r = tx::data::train_vocab(o);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("training took " << seconds << " s");
  CHECK(r.lines == 58000);
  CHECK(r.sampled == 20000);
  Vocab v(r.model_path);
  CHECK(v.size() == 8000);
  tx::data::CorpusOptions co;
  co.max_src_tokens = 100;
  co.max_tgt_tokens = 100;
  auto corpus = tx::data::load_parallel_corpus(de, en, v, v, co);
  CHECK(corpus.size() > 28900);
  tx::data::LineReader reader(de);
  std::string line;
  int unk_lines = 0;
  for (int i = 0; i < 2000 && reader.next(line); ++i) {
    auto ids = v.encode(line);
    if (std::find(ids.begin(), ids.end(), Vocab::kUnkId) != ids.end()) {
      ++unk_lines;  // a character outside the sample
      continue;
    }
    // The default normaliser trims and squeezes spaces (84 lines of train.de have extra ones).
    CHECK(v.decode(ids) == squeeze_spaces(line));
  }
  CHECK(unk_lines < 5);
  // Real text run together: encode_head's pieces are the whole line's first ones.
  std::string text;
  tx::data::LineReader more(en);
  for (int i = 0; i < 3000 && more.next(line); ++i) text += line + (i % 7 ? " " : "  ");
  const std::vector<int32_t> whole = v.encode(text);
  for (int64_t limit : {50, 1023, 2000}) {
    const std::vector<int32_t> head = v.encode_head(text, limit);
    INFO("limit " << limit << ": " << head.size() << " of " << whole.size() << " pieces");
    CHECK(static_cast<int64_t>(head.size()) > limit);
    CHECK(head.size() < whole.size());
    CHECK(std::equal(head.begin(), head.end(), whole.begin()));
  }
}
