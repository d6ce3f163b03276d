// The autodiff tape: small graphs, every op's backward against finite differences, modes.
#include <algorithm>
#include <catch2/catch.hpp>

#include "backend/registry.h"
#include "gradient_check.h"
#include "graph/ops.h"
#include "nn/parameters.h"
#include "support/backends.h"

namespace {

using tx::Graph;
using tx::GraphOptions;
using tx::Var;
using tx::test::GradientChecker;
using tx::test::random_normal;

Var input(tx::Backend& be, const std::vector<float>& v, const tx::Shape& s, bool grad = true) {
  return tx::make_var(be.upload(v, s), grad);
}

void check_all(GradientChecker& gc, const std::vector<std::pair<std::string, Var>>& vars,
               double eps = 1e-2) {
  gc.run_backward();
  for (const auto& nv : vars) {
    tx::test::GradReport rep = gc.compare(nv.second, eps);
    INFO(nv.first << ": " << rep.str());
    CHECK(rep.ok);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("graph: linear + relu + sum gives the hand-computed gradients", "[graph]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Graph g(*be);
  const int R = 3, I = 4, O = 2;
  std::vector<float> xh = {1, -2, 3, 0.5f, -1, 2, -0.5f, 1, 0, 1, 1, -3};
  std::vector<float> wh = {0.5f, -1, 0.25f, 2, -0.75f, 0.5f, 1, -1};
  std::vector<float> bh = {0.1f, -0.2f};
  Var x = input(*be, xh, {R, I}), w = input(*be, wh, {O, I}), b = input(*be, bh, {O});
  Var loss = tx::ops::sum(g, tx::ops::relu(g, tx::ops::linear(g, x, w, b)));
  CHECK(g.tape_size() == 3);
  g.backward(loss);
  CHECK(g.tape_size() == 0);

  // Expected on the host: z = x W^T + b, mask = z > 0.
  std::vector<float> dx(R * I, 0), dw(O * I, 0), db(O, 0);
  double expect_loss = 0;
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < O; ++o) {
      double z = bh[o];
      for (int i = 0; i < I; ++i) z += xh[r * I + i] * wh[o * I + i];
      if (z <= 0) continue;
      expect_loss += z;
      db[o] += 1;
      for (int i = 0; i < I; ++i) {
        dx[r * I + i] += wh[o * I + i];
        dw[o * I + i] += xh[r * I + i];
      }
    }
  CHECK(be->download<float>(loss->value)[0] == Approx(expect_loss));
  auto gx = be->download<float>(x->grad), gw = be->download<float>(w->grad),
       gb = be->download<float>(b->grad);
  for (int k = 0; k < R * I; ++k) CHECK(gx[k] == Approx(dx[k]));
  for (int k = 0; k < O * I; ++k) CHECK(gw[k] == Approx(dw[k]));
  for (int k = 0; k < O; ++k) CHECK(gb[k] == Approx(db[k]));
}

TEMPLATE_TEST_CASE("graph: a value used twice accumulates the gradients of both uses", "[graph]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Graph g(*be);
  std::vector<float> xh = {-1.5f, -0.5f, 0.5f, 2.0f};
  Var x = input(*be, xh, {4});
  // loss = sum(x + x) + sum(relu(x) + 3 x): d/dx = 2 + (x > 0) + 3.
  Var twice = tx::ops::add(g, x, x);
  Var mixed = tx::ops::add(g, tx::ops::relu(g, x), tx::ops::scale(g, x, 3.0f));
  Var loss = tx::ops::add(g, tx::ops::sum(g, twice), tx::ops::sum(g, mixed));
  g.backward(loss);
  auto gx = be->download<float>(x->grad);
  for (int i = 0; i < 4; ++i) CHECK(gx[i] == Approx(5.0 + (xh[i] > 0 ? 1.0 : 0.0)));
}

TEMPLATE_TEST_CASE("graph: no-grad mode records nothing and allocates no gradient buffers",
                   "[graph]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(3);
  Graph g(*be, GraphOptions{/*grad=*/false, /*training=*/false});
  tx::nn::ParameterSet params;
  Var w = params.add("w", be->upload(random_normal(rng, 12), {3, 4}));
  Var b = params.add("b", be->upload(random_normal(rng, 3), {3}));
  Var x = input(*be, random_normal(rng, 8), {2, 4});
  Var y = tx::ops::sum(g, tx::ops::relu(g, tx::ops::linear(g, x, w, b)));
  CHECK(g.tape_size() == 0);
  CHECK_FALSE(y->requires_grad);
  CHECK_THROWS_AS(g.backward(y), tx::Error);
  CHECK_FALSE(x->grad.defined());
  CHECK_FALSE(w->grad.defined());
  CHECK_FALSE(b->grad.defined());

  // The same ops with grad on give the same value and do record.
  Graph tg(*be);
  Var y2 = tx::ops::sum(tg, tx::ops::relu(tg, tx::ops::linear(tg, x, w, b)));
  CHECK(tg.tape_size() == 3);
  CHECK(be->download<float>(y2->value)[0] == be->download<float>(y->value)[0]);

  // A scope turns recording off inside a training graph.
  {
    tx::NoGradScope no_grad(tg);
    tx::ops::relu(tg, x);
    CHECK(tg.tape_size() == 3);
  }
  CHECK(tg.grad_enabled());
}

TEMPLATE_TEST_CASE("graph: inputs that need no gradient get none", "[graph]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(4);
  Graph g(*be);
  Var x = input(*be, random_normal(rng, 8), {2, 4}, /*grad=*/false);
  Var w = input(*be, random_normal(rng, 12), {3, 4});
  Var y = tx::ops::sum(g, tx::ops::linear(g, x, w, nullptr));
  g.backward(y);
  CHECK_FALSE(x->grad.defined());
  CHECK(w->grad.defined());
  // Nothing needs a gradient: nothing is recorded.
  Var c = input(*be, random_normal(rng, 4), {4}, false);
  tx::ops::relu(g, c);
  CHECK(g.tape_size() == 0);
}

TEMPLATE_TEST_CASE("graph: parameter gradients accumulate over backward passes until zero_grad",
                   "[graph]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(5);
  tx::nn::ParameterSet params;
  Var w = params.add("layer.weight", be->upload(random_normal(rng, 6), {2, 3}));
  Var x = input(*be, random_normal(rng, 12), {4, 3}, false);
  Graph g(*be);
  auto step = [&] { g.backward(tx::ops::sum(g, tx::ops::linear(g, x, w, nullptr))); };
  step();
  auto once = be->download<float>(w->grad);
  step();
  auto twice = be->download<float>(w->grad);
  for (size_t i = 0; i < once.size(); ++i) CHECK(twice[i] == Approx(2 * once[i]));
  params.zero_grad(*be);
  for (float v : be->download<float>(w->grad)) CHECK(v == 0.0f);
  step();
  auto again = be->download<float>(w->grad);
  for (size_t i = 0; i < once.size(); ++i) CHECK(again[i] == Approx(once[i]));
  CHECK(params.get("layer.weight") == w);
  CHECK_THROWS_AS(params.get("layer.bias"), tx::Error);
  CHECK_THROWS_AS(params.add("layer.weight", be->zeros({1})), tx::Error);
}

TEMPLATE_TEST_CASE(
    "graph: matmul backward, every transpose combination, matches finite differences", "[graph]",
    TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(6);
  Graph g(*be, GraphOptions{true, false});
  const int64_t B = 2, H = 3, M = 4, K = 5, N = 3;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      DYNAMIC_SECTION("trans_a=" << ta << " trans_b=" << tb) {
        tx::Shape sa = ta ? tx::Shape{B, H, K, M} : tx::Shape{B, H, M, K};
        tx::Shape sb = tb ? tx::Shape{B, H, N, K} : tx::Shape{B, H, K, N};
        Var a = input(*be, random_normal(rng, sa.numel()), sa);
        Var b = input(*be, random_normal(rng, sb.numel()), sb);
        GradientChecker gc(
            *be, g, [&] { return tx::ops::matmul(g, a, ta, b, tb, 0.5f); },
            random_normal(rng, B * H * M * N));
        check_all(gc, {{"a", a}, {"b", b}});
      }
    }
}

TEMPLATE_TEST_CASE(
    "graph: attention ops backward (heads, masked and causal softmax) matches finite "
    "differences",
    "[graph]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(7);
  Graph g(*be, GraphOptions{true, false});
  const int64_t B = 2, T = 4, D = 6;
  const int heads = 2;
  Var x = input(*be, random_normal(rng, B * T * D), {B, T, D});
  Var k = input(*be, random_normal(rng, B * T * D), {B, T, D});
  tx::Tensor lengths = be->upload(std::vector<int32_t>{4, 2}, {B});
  for (int causal = 0; causal < 2; ++causal) {
    DYNAMIC_SECTION("causal=" << causal) {
      GradientChecker gc(
          *be, g,
          [&] {
            Var q = tx::ops::split_heads(g, x, heads);
            Var kk = tx::ops::split_heads(g, k, heads);
            Var s = tx::ops::matmul(g, q, false, kk, true);
            Var p = tx::ops::softmax(g, s, 0.7f, lengths, causal);
            return tx::ops::merge_heads(g, tx::ops::matmul(g, p, false, q, false));
          },
          random_normal(rng, B * T * D));
      check_all(gc, {{"x", x}, {"k", k}});
    }
  }
}

TEMPLATE_TEST_CASE(
    "graph: layer_norm, embedding, positions, cross_entropy backward match finite "
    "differences",
    "[graph]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(8);
  Graph g(*be, GraphOptions{true, false});
  const int64_t B = 2, T = 3, D = 4, V = 5;
  Var table = input(*be, random_normal(rng, V * D), {V, D});
  std::vector<float> gh = random_normal(rng, D, 0.3f);
  for (float& v : gh) v += 1.0f;
  Var gamma = input(*be, gh, {D});
  Var beta = input(*be, random_normal(rng, D), {D});
  Var w = input(*be, random_normal(rng, V * D), {V, D});
  tx::Tensor ids = be->upload(std::vector<int32_t>{1, 3, 1, 0, 4, 4}, {B, T});
  tx::Tensor targets = be->upload(std::vector<int32_t>{2, 0, -1, 4, 1, 3}, {B * T});
  GradientChecker gc(
      *be, g,
      [&] {
        Var e = tx::ops::add_positions(g, tx::ops::embedding(g, table, ids, 2.0f), 1);
        Var h = tx::ops::layer_norm(g, e, gamma, beta, 1e-5f);
        Var logits = tx::ops::linear(g, h, w, nullptr);  // [B, T, V]
        return tx::ops::cross_entropy(g, logits, targets, 0.1f, /*ignore_index=*/-1);
      },
      random_normal(rng, B * T));
  check_all(gc, {{"table", table}, {"gamma", gamma}, {"beta", beta}, {"w", w}});
}

TEMPLATE_TEST_CASE("graph: dropout is the identity when not training and replays its mask backward",
                   "[graph]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(9);
  const int64_t n = 4000;
  Var x = input(*be, random_normal(rng, n), {n});
  Graph eval(*be, GraphOptions{true, false});
  CHECK(tx::ops::dropout(eval, x, 0.3f) == x);

  Graph train(*be, GraphOptions{true, true, /*seed=*/42});
  Var y1 = tx::ops::dropout(train, x, 0.3f);
  Var y2 = tx::ops::dropout(train, x, 0.3f);
  auto xh = be->download<float>(x->value), h1 = be->download<float>(y1->value),
       h2 = be->download<float>(y2->value);
  int dropped = 0, differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (h1[i] == 0.0f)
      ++dropped;
    else
      CHECK(h1[i] == Approx(xh[i] / 0.7f));
    if (h1[i] != h2[i]) ++differ;
  }
  CHECK(dropped == Approx(0.3 * n).margin(0.05 * n));
  CHECK(differ > n / 4);  // each call draws a fresh mask

  // Backward: gradient 1/(1-p) where kept, 0 where dropped, from the same mask.
  train.backward(tx::ops::sum(train, y1));
  auto gx = be->download<float>(x->grad);
  for (int64_t i = 0; i < n; ++i) CHECK(gx[i] == Approx(h1[i] == 0.0f ? 0.0 : 1.0 / 0.7));
}

TEMPLATE_TEST_CASE("graph: drop_rows zeroes whole rows at the stated rate and scales the rest",
                   "[graph]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(10);
  const int64_t B = 40, T = 50, D = 8, n = B * T;
  Var x = input(*be, random_normal(rng, n * D), {B, T, D});
  Graph eval(*be, GraphOptions{true, false});
  CHECK(tx::ops::drop_rows(eval, x, 0.25f) == x);

  Graph train(*be, GraphOptions{true, true, /*seed=*/43});
  Var y = tx::ops::drop_rows(train, x, 0.25f);
  Var again = tx::ops::drop_rows(train, x, 0.25f);
  CHECK(y->value.shape() == x->value.shape());
  auto xh = be->download<float>(x->value), yh = be->download<float>(y->value),
       ah = be->download<float>(again->value);
  int dropped = 0, differ = 0;
  std::vector<bool> kept(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    int zeros = 0;
    for (int64_t d = 0; d < D; ++d) zeros += yh[r * D + d] == 0.0f;
    INFO("row " << r);
    REQUIRE((zeros == 0 || zeros == D));  // whole rows, never parts of one
    kept[r] = zeros == 0;
    dropped += !kept[r];
    differ += (ah[r * D] == 0.0f) != !kept[r];
    if (kept[r])
      for (int64_t d = 0; d < D; ++d) CHECK(yh[r * D + d] == xh[r * D + d] * (1.0f / 0.75f));
  }
  // 2,000 rows at p = 0.25: 500 expected, standard deviation 19.4.
  CHECK(dropped == Approx(500).margin(80));
  CHECK(differ > n / 8);  // each call draws fresh rows

  train.backward(tx::ops::sum(train, y));
  auto gx = be->download<float>(x->grad);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t d = 0; d < D; ++d) CHECK(gx[r * D + d] == Approx(kept[r] ? 1.0 / 0.75 : 0.0));
}

TEMPLATE_TEST_CASE(
    "graph: relu_dropout equals relu then dropout, forward and backward, bit for bit", "[graph]",
    TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(12);
  const int64_t n = 5000;
  std::vector<float> xh = random_normal(rng, n), dyh = random_normal(rng, n);
  auto run = [&](bool fused, std::vector<float>& y, std::vector<float>& dx) {
    Graph g(*be, GraphOptions{true, true, /*seed=*/7});
    Var x = input(*be, xh, {n});
    Var out =
        fused ? tx::ops::relu_dropout(g, x, 0.3f) : tx::ops::dropout(g, tx::ops::relu(g, x), 0.3f);
    g.backward(out, be->upload(dyh, {n}));
    y = be->download<float>(out->value);
    dx = be->download<float>(x->grad);
  };
  std::vector<float> y1, dx1, y2, dx2;
  run(false, y1, dx1);
  run(true, y2, dx2);
  CHECK(y1 == y2);
  CHECK(dx1 == dx2);
  // Against plain loops: dx = dy / 0.7 where the output is positive, else 0.
  int kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (y2[i] > 0) {
      ++kept;
      CHECK(y2[i] == Approx(xh[i] / 0.7f));
      CHECK(dx2[i] == Approx(dyh[i] / 0.7f));
    } else {
      CHECK(dx2[i] == 0.0f);
    }
  }
  CHECK(kept == Approx(0.5 * 0.7 * n).margin(0.05 * n));

  Graph eval(*be, GraphOptions{true, false});
  Var x = input(*be, xh, {n});
  auto r = be->download<float>(tx::ops::relu_dropout(eval, x, 0.3f)->value);
  for (int64_t i = 0; i < n; ++i) CHECK(r[i] == std::max(xh[i], 0.0f));
}

TEMPLATE_TEST_CASE("graph: release frees a value no backward reads and keeps the gradient flowing",
                   "[graph]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(13);
  std::vector<float> xh = random_normal(rng, 24), wh = random_normal(rng, 20);
  auto run = [&](bool released, std::vector<float>& dx, std::vector<float>& dw) {
    Graph g(*be);
    Var x = input(*be, xh, {2, 3, 4});
    Var w = input(*be, wh, {5, 4});
    Var h = tx::ops::linear(g, x, w, nullptr);  // linear's backward reads x and w, not h
    Var y = tx::ops::relu(g, tx::ops::scale(g, h, 3.0f));
    if (released) {
      tx::ops::release(g, h);
      CHECK_FALSE(h->value.defined());
      CHECK(h->value.shape() == tx::Shape{2, 3, 5});  // the gradient still gets its shape
      // What a backward reads stays: linear's input, relu's output, parameters.
      tx::ops::release(g, x);
      tx::ops::release(g, y);
      CHECK(x->value.defined());
      CHECK(y->value.defined());
      // A forward that reads a released value is an error, not a crash.
      CHECK_THROWS_WITH(tx::ops::scale(g, h, 1.0f), Catch::Contains("ops::release"));
      // Nor is downloading it.
      CHECK_THROWS_WITH(be->download<float>(h->value),
                        Catch::Contains("of shape [2, 3, 5], a graph value ops::release freed"));
    }
    g.backward(tx::ops::sum(g, y));
    dx = be->download<float>(x->grad);
    dw = be->download<float>(w->grad);
  };
  std::vector<float> dx1, dw1, dx2, dw2;
  run(false, dx1, dw1);
  run(true, dx2, dw2);
  CHECK(dx1 == dx2);
  CHECK(dw1 == dw2);

  Graph inference(*be, GraphOptions{false, false});
  Var v = input(*be, xh, {24}, false);
  tx::ops::release(inference, v);  // nothing records: a value dies with its last handle
  CHECK(v->value.defined());
}

TEMPLATE_TEST_CASE(
    "graph: cross_entropy with release_logits writes the same gradient over the "
    "logits",
    "[graph]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(14);
  const int64_t rows = 6, in = 5, vocab = 40;
  std::vector<float> xh = random_normal(rng, rows * in), wh = random_normal(rng, vocab * in);
  const std::vector<int32_t> targets = {3, 0, 39, -1, 7, 12};  // -1: an ignored row
  auto run = [&](bool release, std::vector<float>& dx, std::vector<float>& dw, float& loss) {
    Graph g(*be);
    Var x = input(*be, xh, {rows, in});
    Var w = input(*be, wh, {vocab, in});
    Var logits = tx::ops::linear(g, x, w, nullptr);
    Var l = tx::ops::sum(g, tx::ops::cross_entropy(g, logits, be->upload(targets, {rows}), 0.1f, -1,
                                                   nullptr, release));
    loss = be->download<float>(l->value)[0];
    g.backward(l);
    CHECK(logits->value.defined() == !release);
    dx = be->download<float>(x->grad);
    dw = be->download<float>(w->grad);
  };
  std::vector<float> dx1, dw1, dx2, dw2;
  float l1, l2;
  run(false, dx1, dw1, l1);
  run(true, dx2, dw2, l2);
  CHECK(l1 == l2);
  CHECK(dx1 == dx2);
  CHECK(dw1 == dw2);
}

TEMPLATE_TEST_CASE(
    "graph: release_logits keeps logits another backward reads (relu and a reshape of it)",
    "[graph]", TX_BACKENDS) {
  // relu's backward reads its output: written over by the loss's gradient, relu would pass the
  // gradient where the softmax was positive instead of where x was.
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(15);
  const std::vector<float> xh = random_normal(rng, 12);
  const std::vector<int32_t> targets = {1, 0, 2, 1};
  for (bool through_reshape : {false, true}) {
    DYNAMIC_SECTION((through_reshape ? "reshape(relu(x))" : "relu(x)")) {
      auto dx = [&](bool release) {
        Graph g(*be);
        Var x = input(*be, xh, through_reshape ? tx::Shape{12} : tx::Shape{4, 3});
        Var y = tx::ops::relu(g, x);
        Var logits = through_reshape ? tx::ops::reshape(g, y, {2, 6}) : y;
        Var l = tx::ops::sum(
            g, tx::ops::cross_entropy(
                   g, logits,
                   be->upload(std::vector<int32_t>(targets.begin(),
                                                   targets.begin() + logits->value.dim(0)),
                              {logits->value.dim(0)}),
                   0.0f, -1, nullptr, release));
        g.backward(l);
        return be->download<float>(x->grad);
      };
      const std::vector<float> kept = dx(false), released = dx(true);
      CHECK(released == kept);
      for (size_t i = 0; i < xh.size(); ++i)
        if (xh[i] <= 0) CHECK(kept[i] == 0.0f);
    }
  }
}

TEMPLATE_TEST_CASE("graph: a second backward over a replayed tape is an error, not a no-op",
                   "[graph]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(16);
  const std::vector<float> xh = random_normal(rng, 6);
  Graph g(*be);
  Var x = input(*be, xh, {6});
  Var l = tx::ops::sum(g, tx::ops::scale(g, x, 3.0f));
  g.backward(l);
  CHECK(be->download<float>(x->grad)[0] == 3.0f);
  CHECK_THROWS_WITH(g.backward(l),
                    Catch::Contains("an earlier backward replayed this graph's tape"));
  // The gradient was not touched by the refused call; a forward recorded again runs.
  CHECK(be->download<float>(x->grad)[0] == 3.0f);
  g.reset();
  g.backward(tx::ops::sum(g, tx::ops::scale(g, x, 2.0f)));
  CHECK(be->download<float>(x->grad)[0] == 5.0f);
}

TEMPLATE_TEST_CASE("graph: reshape shares the value and passes the gradient through", "[graph]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(10);
  Graph g(*be);
  Var x = input(*be, random_normal(rng, 6), {2, 3});
  Var y = tx::ops::reshape(g, x, {3, 2});
  CHECK(y->value.same_memory(x->value));
  g.backward(tx::ops::sum(g, tx::ops::scale(g, y, 2.0f)));
  for (float v : be->download<float>(x->grad)) CHECK(v == Approx(2.0));
  CHECK_THROWS_AS(tx::ops::reshape(g, x, {4}), tx::Error);
}

TEMPLATE_TEST_CASE("graph: arena mode gives the same values and gradients as plain allocation",
                   "[graph]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(11);
  std::vector<float> xh = random_normal(rng, 24), wh = random_normal(rng, 20);
  auto run = [&](bool arena, std::vector<float>& out, std::vector<float>& grad) {
    Graph g(*be, GraphOptions{true, false, 1, arena});
    for (int step = 0; step < 2; ++step) {  // the second step reuses the rewound arena
      Var x = input(*be, xh, {2, 3, 4});
      Var w = input(*be, wh, {5, 4});
      Var y = tx::ops::relu(g, tx::ops::linear(g, x, w, nullptr));
      g.backward(tx::ops::sum(g, y));
      out = be->download<float>(y->value);
      grad = be->download<float>(x->grad);
      g.reset();
    }
  };
  std::vector<float> y1, g1, y2, g2;
  run(false, y1, g1);
  run(true, y2, g2);
  CHECK(y1 == y2);
  CHECK(g1 == g2);
}

TEMPLATE_TEST_CASE("graph: a backward that throws leaves no tape to replay twice", "[graph]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Graph g(*be);
  Var x = input(*be, {1.0f, -2.0f, 3.0f}, {3});
  Var loss = tx::ops::sum(g, tx::ops::scale(g, x, 2.0f));
  int replayed = 0;
  g.record([&](Graph&) { ++replayed; });
  g.record([](Graph&) { throw tx::Error("planted failure"); });
  CHECK_THROWS_WITH(g.backward(loss), Catch::Contains("planted failure"));
  CHECK(g.tape_size() == 0);
  CHECK(replayed == 0);  // the closures after the throwing one (in replay order) never ran
  CHECK_FALSE(x->grad.defined());
}

TEMPLATE_TEST_CASE("graph: matmul over an empty time axis gives empty results and zero gradients",
                   "[graph]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(5);
  Graph g(*be);
  Var q = input(*be, {}, {2, 4, 0, 8});
  Var k = input(*be, random_normal(rng, 2 * 4 * 6 * 8), {2, 4, 6, 8});
  Var scores = tx::ops::matmul(g, q, false, k, true);
  CHECK(scores->value.shape() == tx::Shape{2, 4, 0, 6});
  g.backward(scores, be->empty({2, 4, 0, 6}));
  std::vector<float> dk = be->download<float>(g.grad(k));
  CHECK(std::all_of(dk.begin(), dk.end(), [](float v) { return v == 0.0f; }));
}

TEMPLATE_TEST_CASE("graph: linear_int8 is near linear, shapes kept, and refuses to record",
                   "[graph][int8]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const int64_t B = 2, T = 3, I = 64, O = 24;
  tx::Rng rng(31);
  const std::vector<float> xh = random_normal(rng, B * T * I), wh = random_normal(rng, O * I);
  const std::vector<float> bh = random_normal(rng, O);
  Var x = input(*be, xh, {B, T, I}), w = input(*be, wh, {O, I}), b = input(*be, bh, {O});
  const tx::ops::Int8Weight w8 = tx::ops::Int8Weight::quantize(*be, w->value);
  {
    Graph g(*be, tx::GraphOptions{false, false});
    Var y8 = tx::ops::linear_int8(g, x, w8, b);
    Var y = tx::ops::linear(g, x, w, b);
    REQUIRE(y8->value.shape() == tx::Shape{B, T, O});
    const std::vector<float> got = be->download<float>(y8->value);
    const std::vector<float> want = be->download<float>(y->value);
    double err2 = 0, ref2 = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      err2 += (got[i] - want[i]) * (got[i] - want[i]);
      ref2 += want[i] * want[i];
    }
    CHECK(std::sqrt(err2 / ref2) < 0.02);
    CHECK(err2 > 0);
  }
  Graph g(*be);  // recording: x needs a gradient the int8 layer cannot give
  REQUIRE_THROWS_WITH(tx::ops::linear_int8(g, x, w8, b),
                      Catch::Contains("int8 weights are for inference"));
}

TEMPLATE_TEST_CASE("graph: linear through a prepared weight: packed equals linear, int8 is near",
                   "[graph][packed]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const int64_t B = 2, T = 5, I = 48, O = 300;
  tx::Rng rng(37);
  const std::vector<float> xh = random_normal(rng, B * T * I), wh = random_normal(rng, O * I);
  const std::vector<float> bh = random_normal(rng, O);
  Var x = input(*be, xh, {B, T, I}), w = input(*be, wh, {O, I}), b = input(*be, bh, {O});
  const auto packed = tx::ops::PreparedWeight::prepare(*be, w->value, tx::ops::WeightForm::f32);
  const auto int8 = tx::ops::PreparedWeight::prepare(*be, w->value, tx::ops::WeightForm::int8);
  CHECK(packed.packed.defined());
  CHECK(!packed.int8.defined());
  CHECK(int8.int8.defined());
  CHECK(!int8.packed.defined());
  {
    Graph g(*be, tx::GraphOptions{false, false});
    const std::vector<float> want = be->download<float>(tx::ops::linear(g, x, w, b)->value);
    Var yp = tx::ops::linear(g, x, w, b, packed);
    REQUIRE(yp->value.shape() == tx::Shape{B, T, O});
    const std::vector<float> got = be->download<float>(yp->value);
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-4));
    // Without a bias, and through the int8 form: its own op's values.
    const std::vector<float> nobias =
        be->download<float>(tx::ops::linear(g, x, w, nullptr, packed)->value);
    for (size_t i = 0; i < nobias.size(); ++i)
      CHECK(nobias[i] == Approx(want[i] - bh[i % O]).margin(1e-4));
    CHECK(be->download<float>(tx::ops::linear(g, x, w, b, int8)->value) ==
          be->download<float>(tx::ops::linear_int8(g, x, int8.int8, b)->value));
  }
  Graph g(*be);  // recording: a packed weight gives no gradient either
  REQUIRE_THROWS_WITH(tx::ops::linear(g, x, w, b, packed),
                      Catch::Contains("packed weights are for inference"));
  // Unprepared, the same call records as plain linear does.
  Var y = tx::ops::linear(g, x, w, b, tx::ops::PreparedWeight{});
  CHECK(y->value.shape() == tx::Shape{B, T, O});
}
