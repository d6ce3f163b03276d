// nn layers: parameter naming and init, the encoder layer against a host reference, and its
// gradients against finite differences.
#include <catch2/catch.hpp>
#include <cmath>
#include <type_traits>

#include "backend/registry.h"
#include "gradient_check.h"
#include "nn/attention.h"
#include "nn/encoder_layer.h"
#include "support/backends.h"

namespace {

using tx::Graph;
using tx::GraphOptions;
using tx::Var;
using tx::nn::EncoderLayer;
using tx::nn::EncoderLayerConfig;
using tx::nn::ParameterSet;
using tx::nn::ParamScope;
using tx::test::ends_with;
using tx::test::GradientChecker;
using tx::test::perturb_params;
using tx::test::random_normal;

EncoderLayerConfig small_config() {
  EncoderLayerConfig c;
  c.d_model = 8;
  c.heads = 2;
  c.d_ff = 16;
  c.dropout = 0.1f;
  return c;
}

// ---- a plain host implementation of the encoder layer, for the forward check ---------------

using HostVec = std::vector<double>;

HostVec host_linear(const HostVec& x, int64_t rows, const std::vector<float>& w,
                    const std::vector<float>& b, int64_t in, int64_t out) {
  HostVec y(rows * out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b[o];
      for (int64_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
      y[r * out + o] = s;
    }
  return y;
}

HostVec host_layer_norm(const HostVec& x, int64_t rows, int64_t d, const std::vector<float>& g,
                        const std::vector<float>& b) {
  HostVec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += x[r * d + i];
    mean /= d;
    for (int64_t i = 0; i < d; ++i) var += (x[r * d + i] - mean) * (x[r * d + i] - mean);
    var /= d;
    for (int64_t i = 0; i < d; ++i)
      y[r * d + i] = (x[r * d + i] - mean) / std::sqrt(var + 1e-5) * g[i] + b[i];
  }
  return y;
}

HostVec host_encoder_layer(tx::Backend& be, const ParameterSet& ps, const std::string& pre,
                           const HostVec& x, int64_t B, int64_t T, int64_t D, int heads, int64_t F,
                           const std::vector<int32_t>& lengths) {
  auto p = [&](const std::string& n) { return be.download<float>(ps.get(pre + n)->value); };
  const int64_t R = B * T, dh = D / heads;
  HostVec q = host_linear(x, R, p("self_attn.q_proj.weight"), p("self_attn.q_proj.bias"), D, D);
  HostVec k = host_linear(x, R, p("self_attn.k_proj.weight"), p("self_attn.k_proj.bias"), D, D);
  HostVec v = host_linear(x, R, p("self_attn.v_proj.weight"), p("self_attn.v_proj.bias"), D, D);
  HostVec ctx(R * D, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int h = 0; h < heads; ++h)
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> s(T, 0.0);
        double mx = -1e300, z = 0;
        for (int64_t j = 0; j < lengths[b]; ++j) {
          for (int64_t e = 0; e < dh; ++e)
            s[j] += q[(b * T + i) * D + h * dh + e] * k[(b * T + j) * D + h * dh + e];
          s[j] /= std::sqrt(double(dh));
          mx = std::max(mx, s[j]);
        }
        for (int64_t j = 0; j < lengths[b]; ++j) z += (s[j] = std::exp(s[j] - mx));
        for (int64_t j = 0; j < lengths[b]; ++j)
          for (int64_t e = 0; e < dh; ++e)
            ctx[(b * T + i) * D + h * dh + e] += s[j] / z * v[(b * T + j) * D + h * dh + e];
      }
  HostVec attn =
      host_linear(ctx, R, p("self_attn.out_proj.weight"), p("self_attn.out_proj.bias"), D, D);
  for (int64_t i = 0; i < R * D; ++i) attn[i] += x[i];
  HostVec y = host_layer_norm(attn, R, D, p("self_attn_norm.weight"), p("self_attn_norm.bias"));
  HostVec h = host_linear(y, R, p("ffn.fc1.weight"), p("ffn.fc1.bias"), D, F);
  for (double& e : h) e = std::max(e, 0.0);
  HostVec f = host_linear(h, R, p("ffn.fc2.weight"), p("ffn.fc2.bias"), F, D);
  for (int64_t i = 0; i < R * D; ++i) f[i] += y[i];
  return host_layer_norm(f, R, D, p("ffn_norm.weight"), p("ffn_norm.bias"));
}

}  // namespace

TEMPLATE_TEST_CASE("nn: encoder layer parameters are named by the module tree", "[nn]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(1);
  ParameterSet params;
  EncoderLayer layer(ParamScope(*be, params, rng, "encoder.layers.0"), small_config());
  std::vector<std::pair<std::string, tx::Shape>> want = {
      {"encoder.layers.0.self_attn.q_proj.weight", {8, 8}},
      {"encoder.layers.0.self_attn.q_proj.bias", {8}},
      {"encoder.layers.0.self_attn.k_proj.weight", {8, 8}},
      {"encoder.layers.0.self_attn.k_proj.bias", {8}},
      {"encoder.layers.0.self_attn.v_proj.weight", {8, 8}},
      {"encoder.layers.0.self_attn.v_proj.bias", {8}},
      {"encoder.layers.0.self_attn.out_proj.weight", {8, 8}},
      {"encoder.layers.0.self_attn.out_proj.bias", {8}},
      {"encoder.layers.0.self_attn_norm.weight", {8}},
      {"encoder.layers.0.self_attn_norm.bias", {8}},
      {"encoder.layers.0.ffn.fc1.weight", {16, 8}},
      {"encoder.layers.0.ffn.fc1.bias", {16}},
      {"encoder.layers.0.ffn.fc2.weight", {8, 16}},
      {"encoder.layers.0.ffn.fc2.bias", {8}},
      {"encoder.layers.0.ffn_norm.weight", {8}},
      {"encoder.layers.0.ffn_norm.bias", {8}},
  };
  REQUIRE(params.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK(params.items()[i].first == want[i].first);
    CHECK(params.items()[i].second->value.shape() == want[i].second);
    CHECK(params.items()[i].second->requires_grad);
  }
  CHECK(params.numel() == 4 * (64 + 8) + 2 * 16 + (128 + 16) + (128 + 8));
}

TEMPLATE_TEST_CASE(
    "nn: initialisation is Xavier-uniform, zero biases, LayerNorm ones and zeros, and "
    "reproducible from the seed",
    "[nn]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  auto build = [&](uint64_t seed, ParameterSet& params) {
    tx::Rng rng(seed);
    EncoderLayerConfig c;  // transformer-base sizes: the bound is easy to check statistically
    EncoderLayer layer(ParamScope(*be, params, rng, "enc"), c);
  };
  ParameterSet a, b, c;
  build(1, a);
  build(1, b);
  build(2, c);
  for (const auto& item : a.items()) {
    INFO(item.first);
    std::vector<float> h = be->download<float>(item.second->value);
    if (ends_with(item.first, "_norm.weight")) {
      for (float v : h) CHECK(v == 1.0f);
    } else if (ends_with(item.first, ".bias")) {
      for (float v : h) CHECK(v == 0.0f);
    } else {
      const tx::Shape& s = item.second->value.shape();
      double bound = std::sqrt(6.0 / double(s[0] + s[1])), mx = 0, mean = 0;
      for (float v : h) {
        mx = std::max(mx, double(std::abs(v)));
        mean += v;
      }
      mean /= double(h.size());
      CHECK(mx <= bound);
      CHECK(mx > 0.99 * bound);  // the whole range is used
      CHECK(std::abs(mean) < 0.01 * bound);
      CHECK(h == be->download<float>(b.get(item.first)->value));
      CHECK(h != be->download<float>(c.get(item.first)->value));
    }
  }
}

TEMPLATE_TEST_CASE("nn: encoder layer forward matches a plain host implementation of the paper",
                   "[nn][encoder]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(2);
  ParameterSet params;
  EncoderLayerConfig cfg = small_config();
  EncoderLayer layer(ParamScope(*be, params, rng, "enc"), cfg);
  perturb_params(*be, params, rng);
  const int64_t B = 2, T = 5, D = cfg.d_model;
  std::vector<int32_t> lengths = {5, 3};
  std::vector<float> xh = random_normal(rng, B * T * D);
  Graph g(*be, GraphOptions{false, false});
  Var y = layer.forward(g, tx::make_var(be->upload(xh, {B, T, D})), be->upload(lengths, {B}));
  REQUIRE(y->value.shape() == tx::Shape{B, T, D});
  HostVec want = host_encoder_layer(*be, params, "enc.", HostVec(xh.begin(), xh.end()), B, T, D,
                                    cfg.heads, cfg.d_ff, lengths);
  std::vector<float> got = be->download<float>(y->value);
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-4));
}

TEMPLATE_TEST_CASE("encoder layer backward: finite differences w.r.t. input and every parameter",
                   "[nn][encoder][gradcheck]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (int pre_norm = 0; pre_norm < 2; ++pre_norm) {
    DYNAMIC_SECTION((pre_norm ? "pre-norm" : "post-norm (the paper)")) {
      tx::Rng rng(3);
      ParameterSet params;
      EncoderLayerConfig cfg = small_config();
      cfg.pre_norm = pre_norm;
      EncoderLayer layer(ParamScope(*be, params, rng, "encoder.layers.0"), cfg);
      perturb_params(*be, params, rng);
      const int64_t B = 2, T = 5, D = cfg.d_model;
      // The second sentence is shorter: its last two positions are padding.
      tx::Tensor lengths = be->upload(std::vector<int32_t>{5, 3}, {B});
      Var x = tx::make_var(be->upload(random_normal(rng, B * T * D), {B, T, D}), true);
      Graph g(*be, GraphOptions{true, /*training=*/false});  // dropout off
      GradientChecker gc(
          *be, g, [&] { return layer.forward(g, x, lengths); }, random_normal(rng, B * T * D));
      gc.run_backward();
      std::vector<std::pair<std::string, Var>> vars = {{"input", x}};
      for (const auto& item : params.items()) vars.push_back(item);
      for (const auto& nv : vars) {
        tx::test::GradReport rep = gc.compare(nv.second);
        INFO(nv.first << ": " << rep.str());
        CHECK(rep.ok);
      }
    }
  }
}

TEMPLATE_TEST_CASE(
    "encoder layer backward: padded positions get gradient only through their own row",
    "[nn][encoder]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(4);
  ParameterSet params;
  EncoderLayerConfig cfg = small_config();
  EncoderLayer layer(ParamScope(*be, params, rng, "enc"), cfg);
  perturb_params(*be, params, rng);
  const int64_t B = 2, T = 5, D = cfg.d_model;
  const std::vector<int32_t> len = {5, 3};
  tx::Tensor lengths = be->upload(len, {B});
  std::vector<float> xh = random_normal(rng, B * T * D);
  auto is_pad = [&](int64_t b, int64_t t) { return t >= len[b]; };

  // Seed gradient only on real positions: padded inputs are keys nobody may see, so their
  // gradient must be exactly zero.
  std::vector<float> r = random_normal(rng, B * T * D);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      if (is_pad(b, t))
        for (int64_t d = 0; d < D; ++d) r[(b * T + t) * D + d] = 0.0f;
  Graph g(*be, GraphOptions{true, false});
  Var x = tx::make_var(be->upload(xh, {B, T, D}), true);
  Var y = layer.forward(g, x, lengths);
  g.backward(y, be->upload(r, {B, T, D}));
  std::vector<float> gx = be->download<float>(x->grad);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      double norm = 0;
      for (int64_t d = 0; d < D; ++d) norm += std::abs(gx[(b * T + t) * D + d]);
      INFO("batch " << b << " position " << t);
      if (is_pad(b, t))
        CHECK(norm == 0.0);
      else
        CHECK(norm > 0.0);
    }

  // Forward: changing the padded inputs leaves every real position's output unchanged.
  std::vector<float> y0 = be->download<float>(y->value);
  std::vector<float> xh2 = xh;
  for (int64_t t = len[1]; t < T; ++t)
    for (int64_t d = 0; d < D; ++d) xh2[(1 * T + t) * D + d] += 5.0f;
  std::vector<float> y1 = be->download<float>(
      layer.forward(g, tx::make_var(be->upload(xh2, {B, T, D})), lengths)->value);
  // And so does inference, which attends over the real keys alone.
  Graph inference(*be, GraphOptions{false, false});
  auto infer = [&](const std::vector<float>& in) {
    return be->download<float>(
        layer.forward(inference, tx::make_var(be->upload(in, {B, T, D})), lengths)->value);
  };
  const std::vector<float> i0 = infer(xh), i1 = infer(xh2);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < len[b]; ++t)
      for (int64_t d = 0; d < D; ++d) {
        CHECK(y1[(b * T + t) * D + d] == y0[(b * T + t) * D + d]);
        CHECK(i1[(b * T + t) * D + d] == i0[(b * T + t) * D + d]);
      }
}

TEMPLATE_TEST_CASE(
    "encoder layer: dropout changes the output in training, and no-grad equals grad mode "
    "without dropout (bit for bit on the CPU)",
    "[nn][encoder]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(5);
  ParameterSet params;
  EncoderLayer layer(ParamScope(*be, params, rng, "enc"), small_config());
  const int64_t B = 2, T = 5, D = 8;
  tx::Tensor lengths = be->upload(std::vector<int32_t>{5, 3}, {B});
  Var x = tx::make_var(be->upload(random_normal(rng, B * T * D), {B, T, D}), true);

  Graph eval_grad(*be, GraphOptions{true, false});
  Graph eval_nograd(*be, GraphOptions{false, false});
  Graph train(*be, GraphOptions{true, true, /*seed=*/7});
  Var ye = layer.forward(eval_grad, x, lengths);
  Var yn = layer.forward(eval_nograd, x, lengths);
  CHECK(eval_grad.tape_size() > 0);
  CHECK(eval_nograd.tape_size() == 0);
  CHECK_FALSE(yn->requires_grad);
  CHECK(tx::test::inference_matches_recorded(be->download<float>(yn->value),
                                             be->download<float>(ye->value),
                                             std::is_same_v<TestType, tx::test::Cpu>));

  std::vector<float> t1 = be->download<float>(layer.forward(train, x, lengths)->value);
  std::vector<float> t2 = be->download<float>(layer.forward(train, x, lengths)->value);
  CHECK(t1 != be->download<float>(ye->value));
  CHECK(t1 != t2);  // a fresh mask each step
  // The same seed and counter give the same mask.
  train.rng().set_counter(0);
  CHECK(be->download<float>(layer.forward(train, x, lengths)->value) == t1);
}

TEMPLATE_TEST_CASE(
    "encoder layer backward with dropout on matches finite differences (the mask is "
    "replayed)",
    "[nn][encoder][gradcheck]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(6);
  ParameterSet params;
  EncoderLayerConfig cfg = small_config();
  cfg.dropout = 0.2f;
  cfg.attention_dropout = 0.1f;
  cfg.relu_dropout = 0.1f;
  EncoderLayer layer(ParamScope(*be, params, rng, "enc"), cfg);
  perturb_params(*be, params, rng);
  const int64_t B = 2, T = 5, D = cfg.d_model;
  tx::Tensor lengths = be->upload(std::vector<int32_t>{4, 5}, {B});
  Var x = tx::make_var(be->upload(random_normal(rng, B * T * D), {B, T, D}), true);
  Graph g(*be, GraphOptions{true, true, 11});
  GradientChecker gc(
      *be, g,
      [&] {
        g.rng().set_counter(0);  // the same masks for every evaluation
        return layer.forward(g, x, lengths);
      },
      random_normal(rng, B * T * D));
  gc.run_backward();
  std::vector<std::pair<std::string, Var>> vars = {{"input", x}};
  for (const auto& item : params.items()) vars.push_back(item);
  for (const auto& nv : vars) {
    tx::test::GradReport rep = gc.compare(nv.second, 1e-2, 64);
    INFO(nv.first << ": " << rep.str());
    CHECK(rep.ok);
  }
}

TEMPLATE_TEST_CASE(
    "multi-head attention backward: cross-attention and causal self-attention match "
    "finite differences",
    "[nn][attention][gradcheck]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(7);
  ParameterSet params;
  tx::nn::MultiHeadAttention attn(ParamScope(*be, params, rng, "attn"), 8, 4);
  perturb_params(*be, params, rng);
  const int64_t B = 2, Tq = 3, Tk = 6, D = 8;
  Var q = tx::make_var(be->upload(random_normal(rng, B * Tq * D), {B, Tq, D}), true);
  Var mem = tx::make_var(be->upload(random_normal(rng, B * Tk * D), {B, Tk, D}), true);
  tx::Tensor lengths = be->upload(std::vector<int32_t>{6, 4}, {B});
  Graph g(*be, GraphOptions{true, false});
  for (int causal = 0; causal < 2; ++causal) {
    DYNAMIC_SECTION((causal ? "causal self-attention" : "cross-attention")) {
      GradientChecker gc(
          *be, g,
          [&] {
            return causal ? attn.forward(g, mem, mem, lengths, true)
                          : attn.forward(g, q, mem, lengths, false);
          },
          random_normal(rng, B * (causal ? Tk : Tq) * D));
      gc.run_backward();
      std::vector<std::pair<std::string, Var>> vars = {{"memory", mem}};
      if (!causal) vars.push_back({"query", q});
      for (const auto& item : params.items()) vars.push_back(item);
      for (const auto& nv : vars) {
        tx::test::GradReport rep = gc.compare(nv.second);
        INFO(nv.first << ": " << rep.str());
        CHECK(rep.ok);
      }
    }
  }
}

TEMPLATE_TEST_CASE(
    "multi-head attention project_step: the joined q|k|v projection gives each head of q, k and "
    "v as plain loops do, f32 and int8",
    "[nn][attention]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(11);
  ParameterSet params;
  const int64_t R = 5, D = 16;
  const int heads = 4, dh = D / heads;
  tx::nn::MultiHeadAttention attn(ParamScope(*be, params, rng, "attn"), D, heads);
  perturb_params(*be, params, rng);
  const std::vector<float> xh = random_normal(rng, R * D);
  const Var x = tx::make_var(be->upload(xh, {R, 1, D}));
  Graph g(*be, GraphOptions{false, false});
  auto p = [&](const std::string& n) {
    return be->download<float>(params.get("attn." + n)->value);
  };
  const HostVec xd(xh.begin(), xh.end());
  const HostVec want[3] = {host_linear(xd, R, p("q_proj.weight"), p("q_proj.bias"), D, D),
                           host_linear(xd, R, p("k_proj.weight"), p("k_proj.bias"), D, D),
                           host_linear(xd, R, p("v_proj.weight"), p("v_proj.bias"), D, D)};
  // Before prepare_inference: the three projections; after: the joined one.
  const tx::nn::StepProjection separate = attn.project_step(g, x);
  for (int int8 = 0; int8 < 2; ++int8) {
    DYNAMIC_SECTION((int8 ? "int8" : "f32")) {
      attn.prepare_inference(*be, int8 != 0 ? tx::ops::WeightForm::int8 : tx::ops::WeightForm::f32);
      const tx::nn::StepProjection joined = attn.project_step(g, x);
      const Var got[3] = {joined.queries, joined.kv.keys, joined.kv.values};
      const Var before[3] = {separate.queries, separate.kv.keys, separate.kv.values};
      for (int which = 0; which < 3; ++which) {
        REQUIRE(got[which]->value.shape() == tx::Shape{R, heads, 1, dh});
        const std::vector<float> v = be->download<float>(got[which]->value);
        // int8: 8-bit activations and 7-bit weights, ~1% of each product.
        const double margin = int8 ? 0.05 : 1e-5;
        for (int64_t r = 0; r < R; ++r)
          for (int h = 0; h < heads; ++h)
            for (int e = 0; e < dh; ++e) {
              INFO("part " << which << " row " << r << " head " << h << " element " << e);
              CHECK(v[(r * heads + h) * dh + e] ==
                    Approx(want[which][r * D + h * dh + e]).margin(margin));
            }
        if (!int8) {
          // The joined weight's GEMM against the separate ones: the same sums, in an order that
          // may differ (oneDNN's AVX2 kernels keep it at few rows, its AVX-512 ones do not), so
          // within a few units in the last place.
          const std::vector<float> b = be->download<float>(before[which]->value);
          for (size_t i = 0; i < v.size(); ++i)
            CHECK(v[i] == Approx(b[i]).epsilon(1e-6).margin(1e-6));
        }
      }
    }
  }
}
