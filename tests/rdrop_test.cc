// tx-train --rdrop-alpha (R-Drop, train/batch_loss.h): the loss against its formula computed on
// the host from the two passes' logits, dropout 0 giving plain training's loss and gradients,
// finite differences through the KL term, exact resume, and the flag.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/corpus.h"
#include "gradient_check.h"
#include "nn/transformer.h"
#include "support/backends.h"
#include "support/programs.h"
#include "support/random_model.h"
#include "support/reference.h"
#include "support/train_runs.h"
#include "train/batch_loss.h"
#include "train/trainer.h"

namespace {

using tx::Graph;
using tx::GraphOptions;
using tx::test::TempDir;
using tx::train::Trainer;
using tx::train::TrainerOptions;

// Three pairs of different lengths: the batch has padding on both sides.
tx::data::Batch three_pairs() {
  tx::data::ParallelCorpus corpus;
  corpus.add({4, 5, 6, 7}, {7, 8, 9}, 1);
  corpus.add({9, 10}, {11, 4, 5, 6, 8}, 2);
  corpus.add({6}, {5}, 3);
  const std::vector<int64_t> order = {0, 1, 2};
  return tx::data::make_batch(corpus, order.data(), 3);
}

TEMPLATE_TEST_CASE("R-Drop: the loss is half of both passes' cross-entropy plus alpha times KL",
                   "[rdrop]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::io::ModelConfig c = tx::test::small_config(12, 1, 2);
  c.dropout = 0.2f;
  c.attention_dropout = 0.1f;
  tx::test::RandomModel random(*be, c, 5);
  const tx::data::Batch b = three_pairs();
  const float smoothing = 0.1f, alpha = 3.0f;
  Graph g(*be, GraphOptions{false, true});  // no tape, dropout on
  g.rng().set_counter(1000);
  const double got = be->template download<float>(
      tx::train::batch_loss(g, random.model, b, smoothing, 0, false, nullptr, alpha)->value)[0];

  // The same two passes by hand: the doubled batch's logits under the same masks.
  g.rng().set_counter(1000);
  const tx::data::Batch d = tx::data::doubled(b);
  REQUIRE(d.size == 6);
  const std::vector<float> logits = be->template download<float>(
      random.model
          .forward(g, be->upload(d.src, {d.size, d.src_len}), be->upload(d.src_lengths, {d.size}),
                   be->upload(d.tgt_in, {d.size, d.tgt_len}))
          ->value);
  const int64_t v = 12, pairs = b.size * b.tgt_len;
  REQUIRE(int64_t(logits.size()) == 2 * pairs * v);
  double ce = 0, kl = 0;
  for (int64_t row = 0; row < 2 * pairs; ++row) {
    const int32_t t = d.tgt_out[row];
    if (t == 0) continue;  // pad
    const std::vector<double> lp = tx::test::log_softmax_row(logits.data() + row * v, v);
    for (int64_t j = 0; j < v; ++j)
      ce -= (smoothing / v + (j == t ? 1.0 - smoothing : 0.0)) * lp[j];
    if (row >= pairs) continue;
    const std::vector<double> other =
        tx::test::log_softmax_row(logits.data() + (pairs + row) * v, v);
    for (int64_t j = 0; j < v; ++j)
      kl += 0.5 * (std::exp(lp[j]) - std::exp(other[j])) * (lp[j] - other[j]);
  }
  const double want = 0.5 * (ce + alpha * kl);
  INFO("got " << got << ", want " << want << " (cross-entropy " << ce << ", KL " << kl << ")");
  CHECK(std::abs(got - want) <= 1e-5 * std::abs(want) + 1e-5);
  CHECK(alpha * kl > 1e-3);  // the passes' masks differ: the term is there
  // Without R-Drop the same counter gives one pass's loss: a different figure.
  g.rng().set_counter(1000);
  const double plain = be->template download<float>(
      tx::train::batch_loss(g, random.model, b, smoothing, 0, false)->value)[0];
  CHECK(std::abs(plain - want) > 1e-3);
}

TEMPLATE_TEST_CASE("R-Drop with dropout 0: plain training's loss and gradients", "[rdrop]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::test::RandomModel random(*be, tx::test::small_config(12, 2, 2), 6);  // dropout 0
  const tx::data::Batch b = three_pairs();
  auto loss_and_grads = [&](float alpha) {
    Graph g(*be, GraphOptions{true, true});
    random.params.zero_grad(*be);
    // release_logits as training has it: cross_entropy must leave the logits to the KL's
    // backward (it reads them; here, with equal passes, its gradient is 0 whatever it reads).
    tx::Var loss = tx::train::batch_loss(g, random.model, b, 0.1f, 0, true, nullptr, alpha);
    const float value = be->template download<float>(loss->value)[0];
    g.backward(loss);
    std::vector<float> grads;
    for (const auto& item : random.params.items()) {
      const std::vector<float> gi = be->template download<float>(item.second->grad);
      grads.insert(grads.end(), gi.begin(), gi.end());
    }
    return std::make_pair(value, grads);
  };
  const auto [plain, plain_grads] = loss_and_grads(0.0f);
  const auto [rdrop, rdrop_grads] = loss_and_grads(5.0f);
  CHECK(std::abs(rdrop - plain) <= 1e-5 * std::abs(plain));
  REQUIRE(rdrop_grads.size() == plain_grads.size());
  double diff2 = 0, norm2 = 0;
  for (size_t i = 0; i < plain_grads.size(); ++i) {
    diff2 += double(rdrop_grads[i] - plain_grads[i]) * (rdrop_grads[i] - plain_grads[i]);
    norm2 += double(plain_grads[i]) * plain_grads[i];
  }
  CHECK(norm2 > 0);
  CHECK(std::sqrt(diff2) <= 1e-5 * std::sqrt(norm2));
}

TEMPLATE_TEST_CASE("R-Drop backward: finite differences through both passes and the KL",
                   "[rdrop][gradcheck]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::io::ModelConfig c = tx::test::small_config(12, 1, 1);
  c.dropout = 0.3f;
  tx::test::RandomModel random(*be, c, 9);
  const tx::data::Batch b = three_pairs();
  Graph g(*be, GraphOptions{true, true});
  tx::test::GradientChecker gc(
      *be, g,
      [&] {
        g.rng().set_counter(77);  // the same masks at every evaluation
        return tx::train::batch_loss(g, random.model, b, 0.1f, 0, true, nullptr, 4.0f);
      },
      std::vector<float>{1.0f});
  gc.run_backward();
  for (const auto& item : random.params.items()) {
    tx::test::GradReport rep = gc.compare(item.second, 1e-2, 8, 2e-2, 2e-3, 3e-2);
    INFO(item.first << ": " << rep.str());
    CHECK(rep.ok);
  }
}

TEMPLATE_TEST_CASE("R-Drop: N updates, stop, resume equals 2N straight", "[rdrop][trainer]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  TempDir straight, split, plain;
  TrainerOptions a = tx::test::tiny_options(straight);
  a.rdrop_alpha = 5.0f;
  a.after_updates = 12;
  CHECK(tx::test::resume_difference(*be, a, straight, split, 6) == "");
  // And it is not plain training.
  TrainerOptions p = tx::test::tiny_options(plain);
  p.after_updates = 12;
  Trainer(*be, p).run();
  CHECK(tx::test::slurp(Trainer::model_path(a.model_dir)) !=
        tx::test::slurp(Trainer::model_path(p.model_dir)));
}

TEST_CASE("tx-train --rdrop-alpha: a negative weight exits 2 naming the flag", "[rdrop]") {
  TempDir dir;
  const std::string flags = tx::test::tiny_flags(dir) + " --after-updates 2";
  tx::test::Run ok = tx::test::run_program(dir, TX_TRAIN_BIN, flags + " --rdrop-alpha 5");
  INFO(ok.err);
  CHECK(ok.status == 0);
  for (const std::string& bad : {std::string("-1"), std::string("x")}) {
    INFO(bad);
    tx::test::Run r = tx::test::run_program(dir, TX_TRAIN_BIN, flags + " --rdrop-alpha " + bad);
    CHECK(r.status == 2);
    CHECK(tx::test::one_line(r.err));
    CHECK_THAT(r.err, Catch::Contains("rdrop-alpha"));
  }
}

}  // namespace
