// Subword sampling (tx-train --sentencepiece-alphas, data/subword_sampling.h): each epoch's
// segmentations decode to the pairs' text, differ between epochs, repeat for a seed whatever the
// thread count, and a run stopped and resumed mid-way trains as one run straight.
#include "data/subword_sampling.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "data/vocab.h"
#include "data/vocab_train.h"
#include "gradient_check.h"
#include "support/programs.h"
#include "support/train_runs.h"
#include "train/trainer.h"

namespace {

using tx::data::ParallelCorpus;
using tx::data::SubwordSampling;
using tx::data::Vocab;
using tx::test::TempDir;
using tx::train::Trainer;
using tx::train::TrainerOptions;

std::vector<int32_t> ids_of(tx::data::TokenSpan span) {
  return std::vector<int32_t>(span.begin(), span.end());
}

// A corpus of longer words than the reversal corpus's, so that a word has many segmentations.
struct SampledCorpus {
  SampledCorpus() {
    static const char* words[] = {"house", "houses", "garden",   "gardener",  "river", "rivers",
                                  "stone", "stones", "mountain", "mountains", "the",   "a"};
    std::mt19937_64 gen(4);
    std::ofstream s(dir.file("train.src")), t(dir.file("train.tgt"));
    for (int i = 0; i < 2500; ++i) {  // three blocks of kSamplingBlock pairs
      std::string line;
      for (size_t k = 0, n = 3 + gen() % 6; k < n; ++k)
        line += (k ? " " : "") + std::string(words[gen() % 12]);
      s << line << "\n";
      t << (i % 97 == 0 ? "" : line) << "\n";  // some empty targets: dropped pairs
    }
    s.close();
    t.close();
    tx::data::VocabTrainOptions vo;
    vo.inputs = {dir.file("train.src"), dir.file("train.tgt")};
    vo.prefix = dir.file("vocab");
    vo.vocab_size = 60;
    vo.hard_vocab_limit = false;
    vocab = std::make_unique<Vocab>(tx::data::train_vocab(vo).model_path);
    best = tx::data::load_parallel_corpus(dir.file("train.src"), dir.file("train.tgt"), *vocab,
                                          *vocab);
  }
  ParallelCorpus sample(int64_t epoch, SubwordSampling o) const {
    return tx::data::sample_corpus(dir.file("train.src"), dir.file("train.tgt"), *vocab, *vocab,
                                   best, epoch, o);
  }
  TempDir dir;
  std::unique_ptr<Vocab> vocab;
  ParallelCorpus best;
};

TEST_CASE("subword sampling: the pairs' text in new pieces, each epoch its own, per seed",
          "[sampling]") {
  SampledCorpus c;
  REQUIRE(c.best.size() > 2 * tx::data::kSamplingBlock);
  REQUIRE(c.best.size() < 2500);  // the empty targets were dropped
  SubwordSampling o;
  o.src_alpha = 0.5f;
  o.tgt_alpha = 0.0f;  // the target keeps its best segmentation
  o.num_threads = 2;
  const ParallelCorpus e0 = c.sample(0, o), e1 = c.sample(1, o);
  o.num_threads = 1;
  const ParallelCorpus again = c.sample(0, o);
  o.seed = 2;
  const ParallelCorpus other_seed = c.sample(0, o);
  REQUIRE(e0.size() == c.best.size());
  int64_t differs_from_best = 0, differs_between_epochs = 0, differs_between_seeds = 0;
  for (int64_t i = 0; i < c.best.size(); ++i) {
    INFO("pair " << i);
    CHECK(e0.line(i) == c.best.line(i));
    // Any segmentation decodes to the line's text.
    CHECK(c.vocab->decode(ids_of(e0.src(i))) == c.vocab->decode(ids_of(c.best.src(i))));
    CHECK(ids_of(e0.tgt(i)) == ids_of(c.best.tgt(i)));
    CHECK(ids_of(again.src(i)) == ids_of(e0.src(i)));  // one thread or two: the same samples
    differs_from_best += ids_of(e0.src(i)) != ids_of(c.best.src(i));
    differs_between_epochs += ids_of(e0.src(i)) != ids_of(e1.src(i));
    differs_between_seeds += ids_of(e0.src(i)) != ids_of(other_seed.src(i));
  }
  const int64_t n = c.best.size();
  INFO(differs_from_best << " " << differs_between_epochs << " " << differs_between_seeds << " of "
                         << n);
  CHECK(differs_from_best > n / 20);
  CHECK(differs_between_epochs > n / 20);
  CHECK(differs_between_seeds > n / 20);

  // A crop keeps samples within the positions and batches.
  o.max_src_tokens = 3;
  const ParallelCorpus cropped = c.sample(0, o);
  for (int64_t i = 0; i < n; ++i) CHECK(cropped.src_length(i) <= 3);
}

TEST_CASE("subword sampling: a Marian vocabulary without SentencePiece cannot sample",
          "[sampling]") {
  TempDir dir;
  std::ofstream(dir.file("vocab.yml")) << "</s>: 0\n<unk>: 1\nab: 2\n";
  const Vocab v = Vocab::marian(dir.file("vocab.yml"));
  CHECK_THROWS_WITH(v.sample("ab", 0.5f), Catch::Contains("not a SentencePiece model"));
}

TEST_CASE(
    "tx-train --sentencepiece-alphas: stopped and resumed equals one run, and differs "
    "from no sampling",
    "[sampling][trainer]") {
  auto be = tx::test::cpu_backend();
  TempDir straight, split, plain;
  auto options = [](const TempDir& dir) {
    TrainerOptions o = tx::test::tiny_options(dir);
    o.sentencepiece_alphas = {0.5f, 0.5f};
    o.after_updates = 40;  // about three epochs of the reversal corpus
    return o;
  };
  TrainerOptions a = options(straight);
  tx::train::TrainerResult ra;
  CHECK(tx::test::resume_difference(*be, a, straight, split, 17, &ra) == "");
  CHECK(ra.epochs >= 2);
  const std::string wa = tx::test::slurp(Trainer::model_path(a.model_dir));

  TrainerOptions p = options(plain);
  p.sentencepiece_alphas = {};
  Trainer(*be, p).run();
  CHECK(wa != tx::test::slurp(Trainer::model_path(p.model_dir)));

  TrainerOptions bad = options(plain);
  bad.model_dir = plain.file("bad");
  bad.sentencepiece_alphas = {0.5f};
  {
    std::ofstream align(plain.file("train.align"));
    for (int i = 0; i < 200; ++i) align << "0-0\n";
  }
  bad.guided_alignment = plain.file("train.align");
  CHECK_THROWS_WITH(Trainer(*be, bad).run(), Catch::Contains("use one or the other"));
}

}  // namespace
