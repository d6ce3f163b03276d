// tx-train --guided-alignment (train/guided_alignment.h): the term against Marian's formula
// computed on the host from the head's attention probabilities, the file's errors, and a
// training run whose head learns the alignments of the reversal corpus.
#include "train/guided_alignment.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/corpus.h"
#include "data/vocab.h"
#include "decode/alignment.h"
#include "gradient_check.h"
#include "nn/transformer.h"
#include "support/backends.h"
#include "support/programs.h"
#include "support/random_model.h"
#include "support/reference.h"
#include "support/train_runs.h"
#include "train/batch_loss.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace {

using tx::Graph;
using tx::GraphOptions;
using tx::data::Vocab;
using tx::test::TempDir;
using tx::train::GuidedAlignments;
using Ids = std::vector<int32_t>;

TEMPLATE_TEST_CASE("guided alignment: the term is Marian's cross-entropy of head 0's attention",
                   "[guided-alignment]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TempDir dir;
  const tx::io::ModelConfig c = tx::test::small_config(12, 1, 2);
  tx::test::RandomModel random(*be, c, 7);
  const tx::nn::Transformer& model = random.model;

  tx::data::ParallelCorpus corpus;
  corpus.add({4, 5, 6}, {7, 8}, 1);
  corpus.add({9, 10}, {11, 4, 5, 6}, 2);
  corpus.add({4}, {5}, 3);
  // Line 2: two points on target 1, one on target 0, one outside the pair (left out); line 3:
  // none (only eos-eos).
  const std::string path = dir.file("train.align");
  std::ofstream(path) << "0-0 2-1\n0-1 1-1  1-0 7-2\n\n";
  const GuidedAlignments alignments(path);
  REQUIRE(alignments.lines() == 3);
  const std::vector<int64_t> order = {1, 0, 2};  // batch rows need not follow the corpus
  const tx::data::Batch b = tx::data::make_batch(corpus, order.data(), 3);

  for (int layer : {0, 1}) {
    INFO("layer " << layer);
    const float weight = 0.7f;
    tx::train::AlignmentTerm term{&alignments, &corpus, weight, layer, 0};
    Graph g(*be, GraphOptions{false, false});
    const double with =
        be->download<float>(tx::train::batch_loss(g, model, b, 0.1f, 0, false, &term)->value)[0];
    const double without =
        be->download<float>(tx::train::batch_loss(g, model, b, 0.1f, 0, false)->value)[0];

    // Host: head 0's probabilities of that layer, Marian's points and weights.
    tx::io::ModelConfig head0 = c;
    head0.alignment_head = 0;
    head0.alignment_layer = layer + 1;
    tx::test::RandomModel random_head0(*be, head0, 7);  // the same weights
    const tx::nn::Transformer& same = random_head0.model;
    double want = 0;
    for (int64_t r = 0; r < b.size; ++r) {
      const Ids src(b.src.begin() + r * b.src_len,
                    b.src.begin() + r * b.src_len + b.src_lengths[r]);
      const Ids tgt(b.tgt_out.begin() + r * b.tgt_len,
                    b.tgt_out.begin() + r * b.tgt_len + b.tgt_lengths[r] - 1);
      const tx::decode::SoftAlignment p =
          tx::decode::soft_alignments(g, same, {{&src, &tgt, true}})[0];
      std::vector<std::pair<int, int>> points;
      for (const auto& [s, t] : alignments.line(corpus.line(order[r])))
        if (s < int(src.size()) && t < int(p.size())) points.emplace_back(s, t);
      points.emplace_back(int(src.size()) - 1, int(p.size()) - 1);
      std::map<int, int> per_target;
      for (const auto& pt : points) ++per_target[pt.second];
      for (const auto& [s, t] : points) want -= std::log(double(p[t][s])) / per_target[t];
    }
    want *= weight;
    CHECK(std::abs((with - without) - want) < 1e-4 * std::abs(want) + 1e-5);
    CHECK(want > 0.1);  // the term is there, not lost in the tolerance
  }
}

TEMPLATE_TEST_CASE("guided alignment backward: finite differences through the term",
                   "[guided-alignment][gradcheck]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TempDir dir;
  tx::test::RandomModel random(*be, tx::test::small_config(12, 1, 2), 9);
  const tx::nn::Transformer& model = random.model;
  const tx::nn::ParameterSet& params = random.params;
  tx::data::ParallelCorpus corpus;
  corpus.add({4, 5, 6, 7}, {7, 8, 9}, 1);
  corpus.add({9, 10}, {11, 4}, 2);  // padded keys
  const std::string path = dir.file("train.align");
  std::ofstream(path) << "0-0 1-0 3-2\n1-1\n";  // two points on one target
  const GuidedAlignments alignments(path);
  const std::vector<int64_t> order = {0, 1};
  const tx::data::Batch b = tx::data::make_batch(corpus, order.data(), 2);
  std::vector<const GuidedAlignments::Points*> points = {&alignments.line(1), &alignments.line(2)};
  const tx::Tensor src = be->upload(b.src, {b.size, b.src_len}),
                   len = be->upload(b.src_lengths, {b.size}),
                   tgt = be->upload(b.tgt_in, {b.size, b.tgt_len});
  Graph g(*be, GraphOptions{true, false});
  tx::test::GradientChecker gc(
      *be, g,
      [&] {
        tx::nn::Transformer::TappedLayer tapped{1, {}};
        model.forward(g, src, len, tgt, &tapped);
        return tx::train::guided_alignment_loss(g, tapped.tap.scores, 4, 0, b, points, 0.7f);
      },
      std::vector<float>{1.0f});
  gc.run_backward();
  int checked = 0;
  for (const auto& item : params.items()) {
    tx::test::GradReport rep = gc.compare(item.second, 1e-2, 8, 2e-2, 2e-3, 3e-2);
    INFO(item.first << ": " << rep.str());
    CHECK(rep.ok);
    checked += item.first.find("layers.1.cross_attn.q_proj.weight") != std::string::npos;
  }
  CHECK(checked == 1);
}

TEST_CASE("guided alignment: a malformed pair names the file, line and token",
          "[guided-alignment]") {
  TempDir dir;
  for (const char* bad : {"0-1 2_3", "0-1 -2", "0-x", "3-", "1-2-3", "a-b"}) {
    INFO(bad);
    std::ofstream(dir.file("a")) << "0-0\n" << bad << "\n";
    CHECK_THROWS_WITH(GuidedAlignments(dir.file("a")), Catch::Contains(dir.file("a")) &&
                                                           Catch::Contains("line 2") &&
                                                           Catch::Contains("source-target pair"));
  }
  CHECK_THROWS_WITH(GuidedAlignments(dir.file("missing")), Catch::Contains("cannot open"));
  std::ofstream(dir.file("ok")) << "0-0 1-1\r\n\n 2-3  \n";
  const GuidedAlignments ok(dir.file("ok"));
  REQUIRE(ok.lines() == 3);
  CHECK(ok.line(1) == GuidedAlignments::Points{{0, 0}, {1, 1}});
  CHECK(ok.line(2).empty());
  CHECK(ok.line(3) == GuidedAlignments::Points{{2, 3}});
}

// The reversal corpus's alignments over `vocab`'s pieces: piece j of source word k to piece j
// of target word n - 1 - k (the same word).
std::string reversal_alignments(const Vocab& vocab, const std::string& src_path) {
  std::ifstream in(src_path);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> words;
    std::istringstream ws(line);
    for (std::string w; ws >> w;) words.push_back(w);
    std::vector<int> start, size;  // each word's first piece and piece count, both sides
    int at = 0;
    for (const std::string& w : words) {
      start.push_back(at);
      size.push_back(int(vocab.encode(w).size()));
      at += size.back();
    }
    std::vector<int> tstart(words.size());
    at = 0;
    for (size_t k = words.size(); k-- > 0;) {
      tstart[k] = at;
      at += size[k];
    }
    std::string points;
    for (size_t k = 0; k < words.size(); ++k)
      for (int j = 0; j < size[k]; ++j)
        points += (points.empty() ? "" : " ") + std::to_string(start[k] + j) + "-" +
                  std::to_string(tstart[k] + j);
    out += points + "\n";
  }
  return out;
}

TEST_CASE("tx-train --guided-alignment: head 0 learns the given alignments, the model records it",
          "[guided-alignment]") {
  auto be = tx::test::cpu_backend();
  TempDir dir;
  tx::train::TrainerOptions o = tx::test::tiny_options(dir);
  o.model.dropout = 0.0f;
  o.valid_src = o.valid_tgt = "";
  o.after_updates = 1;
  tx::train::Trainer(*be, o).run();  // the vocabulary (and a model we do not use)
  const std::string vocab_path = o.model_dir + "/vocab.spm";
  const Vocab vocab(vocab_path);
  const std::string align = dir.file("train.align");
  std::ofstream(align) << reversal_alignments(vocab, o.train_src);

  // The model's alignment's agreement with the gold one (argmax per target piece, eos rows
  // included) on the first 50 training pairs, teacher-forced.
  auto agreement = [&](const std::string& model_dir) {
    const std::string file = model_dir + "/model.safetensors";
    const tx::io::ModelConfig config = tx::train::read_model_config(file);
    tx::nn::ParameterSet params;
    tx::Rng rng(1);
    tx::nn::Transformer model(tx::nn::ParamScope(*be, params, rng), config);
    tx::train::load_model(file, *be, config, params);
    std::ifstream src(o.train_src), tgt(o.train_tgt), gold(align);
    Graph g(*be, GraphOptions{false, false});
    int right = 0, total = 0;
    for (int i = 0; i < 50; ++i) {
      std::string s, t, a;
      std::getline(src, s);
      std::getline(tgt, t);
      std::getline(gold, a);
      Ids sid = vocab.encode(s);
      sid.push_back(vocab.eos_id());
      const Ids tid = vocab.encode(t);
      const auto p = tx::decode::soft_alignments(g, model, {{&sid, &tid, true}})[0];
      std::map<int, int> want;  // target -> source
      std::istringstream in(a);
      for (std::string pt; in >> pt;)
        want[std::stoi(pt.substr(pt.find('-') + 1))] = std::stoi(pt.substr(0, pt.find('-')));
      want[int(p.size()) - 1] = int(sid.size()) - 1;
      for (const auto& [t_pos, s_pos] : want) {
        int best = 0;
        for (int k = 0; k < int(p[t_pos].size()); ++k)
          if (p[t_pos][k] > p[t_pos][best]) best = k;
        right += best == s_pos;
        ++total;
      }
    }
    return double(right) / total;
  };

  auto train = [&](const std::string& name, bool guided) {
    tx::train::TrainerOptions r = o;
    r.model_dir = dir.file(name);
    r.src_vocab = r.tgt_vocab = vocab_path;
    r.after_updates = 400;
    if (guided) {
      r.guided_alignment = align;
      r.guided_alignment_weight = 1.0f;
    }
    tx::train::Trainer(*be, r).run();
    return r.model_dir;
  };
  const std::string guided = train("guided", true), plain = train("plain", false);
  const tx::io::ModelConfig config = tx::train::read_model_config(guided + "/model.safetensors");
  CHECK(config.alignment_head == 0);
  CHECK(config.alignment_layer == 0);  // the last
  CHECK(tx::train::read_model_config(plain + "/model.safetensors").alignment_head == -1);
  const double with = agreement(guided), without = agreement(plain);
  INFO("agreement: guided (head 0) " << with << ", plain (heads averaged) " << without);
  CHECK(with >= 0.9);
  CHECK(with > without + 0.1);

  // Fine-tuning the plain model to align: the alignment layer and head are no architecture.
  {
    tx::train::TrainerOptions r = o;
    r.model_dir = dir.file("tuned");
    r.src_vocab = r.tgt_vocab = vocab_path;
    r.pretrained_model = plain + "/model.safetensors";
    r.after_updates = 2;
    r.guided_alignment = align;
    tx::train::Trainer(*be, r).run();
    CHECK(tx::train::read_model_config(r.model_dir + "/model.safetensors").alignment_head == 0);
  }
  // A point outside its pair (word positions where pieces were meant) is one line.
  {
    std::ifstream in(align);
    std::string text, line;
    for (int i = 0; std::getline(in, line); ++i) text += (i == 4 ? line + " 40-1" : line) + "\n";
    std::ofstream(dir.file("far.align")) << text;
    tx::train::TrainerOptions r = o;
    r.model_dir = dir.file("far");
    r.src_vocab = r.tgt_vocab = vocab_path;
    r.guided_alignment = dir.file("far.align");
    CHECK_THROWS_WITH(
        tx::train::Trainer(*be, r).run(),
        Catch::Contains("line 5: 40-1 is outside the pair") && Catch::Contains("spm_encode"));
  }
  // A file that does not match the training data is one line naming both.
  std::ofstream(dir.file("short.align")) << "0-0\n";
  tx::train::TrainerOptions bad = o;
  bad.model_dir = dir.file("bad");
  bad.src_vocab = bad.tgt_vocab = vocab_path;
  bad.guided_alignment = dir.file("short.align");
  CHECK_THROWS_WITH(tx::train::Trainer(*be, bad).run(),
                    Catch::Contains("has 1 lines but the training data 200 pairs"));
}

}  // namespace
