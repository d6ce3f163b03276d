// The decoder layer and the whole Transformer: gradients against finite differences, causality
// and padding, tied embeddings, incremental decoding against the full forward, beam reordering,
// and the parameter count of transformer-base.
#include "nn/transformer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "backend/registry.h"
#include "gradient_check.h"
#include "nn/decoder_layer.h"
#include "nn/loss.h"
#include "support/backends.h"
#include "support/reference.h"
#include "train/batch_loss.h"

namespace {

using tx::Graph;
using tx::GraphOptions;
using tx::Tensor;
using tx::Var;
using tx::io::ModelConfig;
using tx::io::TiedEmbeddings;
using tx::nn::DecoderLayer;
using tx::nn::DecoderLayerConfig;
using tx::nn::DecoderState;
using tx::nn::ParameterSet;
using tx::nn::ParamScope;
using tx::nn::Transformer;
using tx::test::GradientChecker;
using tx::test::perturb_params;
using tx::test::random_normal;

constexpr int32_t kPad = 0, kBos = 1, kEos = 2;

ModelConfig tiny_config(TiedEmbeddings tied, bool pre_norm) {
  ModelConfig c;
  c.src_vocab_size = c.tgt_vocab_size = 11;
  c.d_model = 8;
  c.d_ff = 16;
  c.heads = 2;
  c.encoder_layers = c.decoder_layers = 2;
  c.dropout = 0.1f;
  c.tied_embeddings = tied;
  c.pre_norm = pre_norm;
  return c;
}

// A batch of token ids: real tokens in [3, vocab), pad after each row's length.
std::vector<int32_t> random_ids(tx::Rng& rng, int64_t batch, int64_t time,
                                const std::vector<int32_t>& lengths, int64_t vocab) {
  std::vector<int32_t> ids(batch * time, kPad);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < lengths[b]; ++t)
      ids[b * time + t] = 3 + static_cast<int32_t>(rng.uniform() * float(vocab - 3));
  return ids;
}

// Rows `rows` of a [B, rest...] host array, in that order.
template <typename T>
std::vector<T> pick_rows(const std::vector<T>& v, int64_t batch, const std::vector<int32_t>& rows) {
  const size_t row = v.size() / batch;
  std::vector<T> out;
  for (int32_t r : rows) out.insert(out.end(), v.begin() + r * row, v.begin() + (r + 1) * row);
  return out;
}

// One sentence pair batch for the tiny models.
struct Batch {
  int64_t B, S, T;
  std::vector<int32_t> src, src_len, tgt_in, tgt_out;
};

Batch tiny_batch(tx::Rng& rng, int64_t vocab, std::vector<int32_t> src_len,
                 std::vector<int32_t> tgt_len, int64_t S, int64_t T) {
  Batch b{int64_t(src_len.size()), S, T, {}, src_len, {}, {}};
  b.src = random_ids(rng, b.B, S, src_len, vocab);
  // tgt_out = tokens, EOS, pads; tgt_in = BOS, tokens, (EOS), pads: the same sentence shifted.
  std::vector<int32_t> words = random_ids(rng, b.B, T, tgt_len, vocab);
  b.tgt_in.assign(b.B * T, kPad);
  b.tgt_out.assign(b.B * T, kPad);
  for (int64_t r = 0; r < b.B; ++r)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t n = tgt_len[r] - 1;  // real words; the last real target is EOS
      b.tgt_out[r * T + t] = t < n ? words[r * T + t] : (t == n ? kEos : kPad);
      b.tgt_in[r * T + t] = t == 0 ? kBos : (t <= n ? b.tgt_out[r * T + t - 1] : kPad);
    }
  return b;
}

// The logits of a no-grad, no-dropout forward, on the host.
std::vector<float> eval_logits(tx::Backend& be, const Transformer& model, const Batch& b) {
  Graph g(be, GraphOptions{false, false});
  Var y = model.forward(g, be.upload(b.src, {b.B, b.S}), be.upload(b.src_len, {b.B}),
                        be.upload(b.tgt_in, {b.B, b.T}));
  return be.download<float>(y->value);
}

// Runs decode_step over the first `steps` target inputs of `tgt_in` ([B, T]) starting at
// state.length(), and appends each step's logits [B, V] to `out`.
void decode_steps(tx::Backend& be, Graph& g, const Transformer& model, DecoderState& state,
                  const std::vector<int32_t>& tgt_in, int64_t T, int64_t steps,
                  std::vector<std::vector<float>>& out) {
  const int64_t B = state.batch();
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t t = state.length();
    std::vector<int32_t> ids(B);
    for (int64_t r = 0; r < B; ++r) ids[r] = tgt_in[r * T + t];
    Var logits = model.decode_step(g, state, be.upload(ids, {B, 1}), t);
    REQUIRE(logits->value.shape() == (tx::Shape{B, model.config().tgt_vocab_size}));
    out.push_back(be.download<float>(logits->value));
  }
}

// Checks step logits (out[t] for t in [from, from + out.size())) against full logits
// [B, T, V] of rows `rows`.
void check_steps_match(const std::vector<std::vector<float>>& steps, int64_t from,
                       const std::vector<float>& full, const std::vector<int32_t>& rows, int64_t T,
                       int64_t V) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const int64_t t = from + int64_t(i);
    for (size_t r = 0; r < rows.size(); ++r) {
      INFO("step " << t << ", batch row " << r << " (full row " << rows[r] << ")");
      double worst = 0;
      for (int64_t v = 0; v < V; ++v)
        worst = std::max(worst,
                         double(std::abs(steps[i][r * V + v] - full[(rows[r] * T + t) * V + v])));
      CHECK(worst <= 1e-5);
    }
  }
}

DecoderLayerConfig small_layer_config() {
  DecoderLayerConfig c;
  c.d_model = 8;
  c.heads = 2;
  c.d_ff = 16;
  c.dropout = 0.1f;
  return c;
}

}  // namespace

// ---- the decoder layer --------------------------------------------------------------------

TEMPLATE_TEST_CASE("decoder layer: parameters are named by the module tree", "[nn][decoder]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(1);
  ParameterSet params;
  DecoderLayer layer(ParamScope(*be, params, rng, "decoder.layers.0"), small_layer_config());
  std::vector<std::string> want;
  for (std::string attn : {"self_attn", "cross_attn"}) {
    for (std::string proj : {"q_proj", "k_proj", "v_proj", "out_proj"})
      for (std::string leaf : {"weight", "bias"}) want.push_back(attn + "." + proj + "." + leaf);
    want.push_back(attn + "_norm.weight");
    want.push_back(attn + "_norm.bias");
  }
  for (std::string leaf : {"ffn.fc1.weight", "ffn.fc1.bias", "ffn.fc2.weight", "ffn.fc2.bias",
                           "ffn_norm.weight", "ffn_norm.bias"})
    want.push_back(leaf);
  REQUIRE(params.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i)
    CHECK(params.items()[i].first == "decoder.layers.0." + want[i]);
  CHECK(params.numel() == 8 * (64 + 8) + 3 * 16 + (128 + 16) + (128 + 8));
}

TEMPLATE_TEST_CASE(
    "decoder layer backward: finite differences w.r.t. input, memory and every parameter, "
    "with source padding",
    "[nn][decoder][gradcheck]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (int variant = 0; variant < 3; ++variant) {
    const char* names[] = {"post-norm (the paper)", "pre-norm", "post-norm with dropout on"};
    DYNAMIC_SECTION(names[variant]) {
      tx::Rng rng(10 + variant);
      ParameterSet params;
      DecoderLayerConfig cfg = small_layer_config();
      cfg.pre_norm = variant == 1;
      if (variant == 2) {
        cfg.dropout = 0.2f;
        cfg.attention_dropout = 0.1f;
        cfg.relu_dropout = 0.1f;
      }
      DecoderLayer layer(ParamScope(*be, params, rng, "decoder.layers.0"), cfg);
      perturb_params(*be, params, rng);
      const int64_t B = 2, T = 4, S = 5, D = cfg.d_model;
      // The second source sentence is shorter: its last two memory positions are padding.
      Tensor lengths = be->upload(std::vector<int32_t>{5, 3}, {B});
      Var x = tx::make_var(be->upload(random_normal(rng, B * T * D), {B, T, D}), true);
      Var mem = tx::make_var(be->upload(random_normal(rng, B * S * D), {B, S, D}), true);
      Graph g(*be, GraphOptions{true, /*training=*/variant == 2, 5});
      GradientChecker gc(
          *be, g,
          [&] {
            g.rng().set_counter(0);  // the same dropout masks for every evaluation
            return layer.forward(g, x, mem, lengths);
          },
          random_normal(rng, B * T * D));
      gc.run_backward();
      std::vector<std::pair<std::string, Var>> vars = {{"input", x}, {"memory", mem}};
      for (const auto& item : params.items()) vars.push_back(item);
      for (const auto& nv : vars) {
        tx::test::GradReport rep = gc.compare(nv.second, 1e-2, 64);
        INFO(nv.first << ": " << rep.str());
        CHECK(rep.ok);
      }
      // Padded memory positions are keys nobody sees: their gradient is exactly zero.
      std::vector<float> gm = be->download<float>(mem->grad);
      for (int64_t s = 3; s < S; ++s)
        for (int64_t d = 0; d < D; ++d) CHECK(gm[(1 * S + s) * D + d] == 0.0f);
    }
  }
}

TEMPLATE_TEST_CASE("decoder layer: position t does not see later target positions", "[nn][decoder]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(12);
  ParameterSet params;
  DecoderLayer layer(ParamScope(*be, params, rng, "dec"), small_layer_config());
  const int64_t B = 2, T = 5, S = 4, D = 8;
  Tensor lengths = be->upload(std::vector<int32_t>{4, 2}, {B});
  std::vector<float> xh = random_normal(rng, B * T * D);
  Var mem = tx::make_var(be->upload(random_normal(rng, B * S * D), {B, S, D}));
  Graph g(*be, GraphOptions{false, false});
  auto run = [&](const std::vector<float>& x) {
    return be->download<float>(
        layer.forward(g, tx::make_var(be->upload(x, {B, T, D})), mem, lengths)->value);
  };
  std::vector<float> y0 = run(xh);
  for (int64_t t = 0; t + 1 < T; ++t) {
    std::vector<float> x2 = xh;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t u = t + 1; u < T; ++u)
        for (int64_t d = 0; d < D; ++d) x2[(b * T + u) * D + d] += 3.0f;
    std::vector<float> y1 = run(x2);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t u = 0; u <= t; ++u)
        for (int64_t d = 0; d < D; ++d) CHECK(y1[(b * T + u) * D + d] == y0[(b * T + u) * D + d]);
  }
}

TEMPLATE_TEST_CASE(
    "decoder layer: inference (fused bias-relu and residual-norm, unpadded attention) equals the "
    "recorded forward (bit for bit on the CPU)",
    "[nn][decoder]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (const bool pre_norm : {false, true}) {
    INFO("pre_norm " << pre_norm);
    tx::Rng rng(13);
    ParameterSet params;
    DecoderLayerConfig cfg = small_layer_config();
    cfg.pre_norm = pre_norm;
    DecoderLayer layer(ParamScope(*be, params, rng, "dec"), cfg);
    perturb_params(*be, params, rng);
    const int64_t B = 2, T = 4, S = 5, D = cfg.d_model;
    Tensor lengths = be->upload(std::vector<int32_t>{5, 3}, {B});
    const std::vector<float> xh = random_normal(rng, B * T * D);
    Var mem = tx::make_var(be->upload(random_normal(rng, B * S * D), {B, S, D}));
    // Recorded (gradients on, not training): add_bias, relu, add and layer_norm one by one.
    Graph recorded(*be, GraphOptions{true, false});
    Var x = tx::make_var(be->upload(xh, {B, T, D}), true);
    const std::vector<float> want =
        be->download<float>(layer.forward(recorded, x, mem, lengths)->value);
    CHECK(recorded.tape_size() > 0);
    Graph inference(*be, GraphOptions{false, false});
    const std::vector<float> got = be->download<float>(
        layer.forward(inference, tx::make_var(be->upload(xh, {B, T, D})), mem, lengths)->value);
    REQUIRE(got.size() == want.size());
    CHECK(tx::test::inference_matches_recorded(got, want, std::is_same_v<TestType, tx::test::Cpu>));
  }
}

// ---- the whole model ----------------------------------------------------------------------

TEMPLATE_TEST_CASE("transformer: parameter names and counts for each tied-embeddings mode",
                   "[nn][transformer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  auto build = [&](TiedEmbeddings tied, bool pre_norm, ParameterSet& params) {
    tx::Rng rng(1);
    return Transformer(ParamScope(*be, params, rng), tiny_config(tied, pre_norm));
  };
  ParameterSet none, decoder, all, pre;
  Transformer m_none = build(TiedEmbeddings::none, false, none);
  Transformer m_dec = build(TiedEmbeddings::decoder, false, decoder);
  Transformer m_all = build(TiedEmbeddings::all, false, all);
  build(TiedEmbeddings::none, true, pre);
  const int64_t V = 11, D = 8;
  CHECK(none.numel() - decoder.numel() == V * D);
  CHECK(none.numel() - all.numel() == 2 * V * D);
  CHECK(pre.numel() - none.numel() == 2 * 2 * D);  // encoder and decoder final norms

  CHECK(none.items().front().first == "encoder.embed_tokens.weight");
  CHECK(none.contains("decoder.embed_tokens.weight"));
  CHECK(none.items().back().first == "decoder.output_proj.weight");
  CHECK(none.contains("encoder.layers.1.ffn_norm.bias"));
  CHECK(none.contains("decoder.layers.1.cross_attn.v_proj.weight"));
  CHECK_FALSE(none.contains("encoder.final_norm.weight"));
  CHECK(pre.contains("encoder.final_norm.weight"));
  CHECK(pre.contains("decoder.final_norm.bias"));
  CHECK_FALSE(decoder.contains("decoder.output_proj.weight"));
  CHECK(all.items().front().first == "embed_tokens.weight");
  CHECK_FALSE(all.contains("encoder.embed_tokens.weight"));
  CHECK_FALSE(all.contains("decoder.embed_tokens.weight"));

  // Tied means one tensor, not equal copies.
  CHECK(m_none.src_embedding().weight() != m_none.tgt_embedding().weight());
  CHECK(m_none.output_weight() != m_none.tgt_embedding().weight());
  CHECK(m_dec.output_weight() == m_dec.tgt_embedding().weight());
  CHECK(m_dec.src_embedding().weight() != m_dec.tgt_embedding().weight());
  CHECK(m_all.src_embedding().weight() == m_all.tgt_embedding().weight());
  CHECK(m_all.output_weight() == all.get("embed_tokens.weight"));

  // Embeddings are Normal(0, d_model^-0.5).
  std::vector<float> e = be->download<float>(m_all.output_weight()->value);
  double var = 0;
  for (float v : e) var += double(v) * v;
  CHECK(var / double(e.size()) == Approx(1.0 / D).epsilon(0.3));
}

TEMPLATE_TEST_CASE(
    "transformer: depth scaling (Marian's --transformer-depth-scaling) draws layer l's Glorot "
    "weights in 1/sqrt(l) of the range, from the same draws, and nothing else differently",
    "[nn][transformer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // Matrices of 1,024+ values, so that the largest draw is within 1% of the bound.
  ModelConfig c = tiny_config(TiedEmbeddings::all, false);
  c.d_model = 32;
  c.d_ff = 64;
  c.heads = 4;
  c.encoder_layers = c.decoder_layers = 3;
  auto build = [&](bool depth_scaling, ParameterSet& params) {
    tx::Rng rng(7);
    Transformer(ParamScope(*be, params, rng).with_depth_scaling(depth_scaling), c);
  };
  ParameterSet plain, scaled;
  build(false, plain);
  build(true, scaled);
  REQUIRE(plain.size() == scaled.size());
  int glorot = 0;
  for (const auto& [name, var] : scaled.items()) {
    INFO(name);
    const std::vector<float> s = be->download<float>(var->value);
    const std::vector<float> p = be->download<float>(plain.get(name)->value);
    const size_t at = name.find(".layers.");
    if (at == std::string::npos || var->value.shape().ndim() != 2) {
      CHECK(s == p);  // embeddings, LayerNorms, biases
      continue;
    }
    // "decoder.layers.2.cross_attn.k_proj.weight": layer l = 3 of its stack.
    const int l = std::stoi(name.substr(at + 8)) + 1;
    const tx::Shape& shape = var->value.shape();
    const double bound = std::sqrt(6.0 / double(shape[0] + shape[1]) / double(l));
    double largest = 0, worst = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      largest = std::max(largest, double(std::abs(s[i])));
      worst = std::max(worst, std::abs(double(s[i]) - double(p[i]) / std::sqrt(double(l))));
    }
    CHECK(largest <= bound * (1 + 1e-6));
    CHECK(largest > 0.99 * bound);
    CHECK(worst <= 1e-6 * bound);
    ++glorot;
  }
  // Per layer: the encoder's q, k, v, out, fc1, fc2; the decoder's two attentions and fc1, fc2.
  CHECK(glorot == 3 * 6 + 3 * 10);
}

TEMPLATE_TEST_CASE("transformer: a separate vocabulary per side cannot tie all embeddings",
                   "[nn][transformer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(1);
  ParameterSet params;
  ModelConfig cfg = tiny_config(TiedEmbeddings::all, false);
  cfg.tgt_vocab_size = 13;
  CHECK_THROWS_WITH(Transformer(ParamScope(*be, params, rng), cfg),
                    Catch::Contains("shared vocabulary"));
}

TEMPLATE_TEST_CASE(
    "transformer: transformer-base with a shared 32k vocabulary has the paper's ~60M parameters",
    "[nn][transformer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(1);
  ParameterSet params;
  ModelConfig cfg = ModelConfig::preset("transformer-base");  // tied all
  cfg.src_vocab_size = cfg.tgt_vocab_size = 32000;
  REQUIRE(cfg.tied_embeddings == TiedEmbeddings::all);
  Transformer model(ParamScope(*be, params, rng), cfg);
  const int64_t V = 32000, d = 512, d_ff = 2048, N = 6;
  const int64_t attention = 4 * (d * d + d);  // q, k, v, out projections with biases
  const int64_t ffn = d * d_ff + d_ff + d_ff * d + d;
  const int64_t norm = 2 * d;
  const int64_t encoder_layer = attention + ffn + 2 * norm;
  const int64_t decoder_layer = 2 * attention + ffn + 3 * norm;
  const int64_t expected = V * d + N * encoder_layer + N * decoder_layer;
  CHECK(expected == 60522496);
  CHECK(params.numel() == expected);
}

TEMPLATE_TEST_CASE("transformer: forward is decode of encode and has the logits shape",
                   "[nn][transformer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(20);
  ParameterSet params;
  Transformer model(ParamScope(*be, params, rng), tiny_config(TiedEmbeddings::none, false));
  Batch b = tiny_batch(rng, 11, {5, 3}, {4, 2}, 5, 4);
  Graph g(*be, GraphOptions{false, false});
  Tensor src = be->upload(b.src, {b.B, b.S}), len = be->upload(b.src_len, {b.B});
  Tensor tgt = be->upload(b.tgt_in, {b.B, b.T});
  Var y = model.forward(g, src, len, tgt);
  CHECK(y->value.shape() == (tx::Shape{b.B, b.T, 11}));
  Var memory = model.encode(g, src, len);
  CHECK(memory->value.shape() == (tx::Shape{b.B, b.S, 8}));
  CHECK(be->download<float>(model.decode(g, memory, len, tgt)->value) ==
        be->download<float>(y->value));
}

TEMPLATE_TEST_CASE("transformer loss backward: finite differences for every kind of parameter",
                   "[nn][transformer][gradcheck]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  using tx::io::Activation;
  using tx::io::Positions;
  struct Variant {
    const char* name;
    TiedEmbeddings tied;
    bool pre_norm;
    // The imported models' variants (docs/models.md): Marian's and OPUS-MT's swish with an
    // output bias, unscaled embeddings with their own LayerNorm, each position layout.
    Activation activation = Activation::relu;
    bool output_bias = false, embed_norm = false, embed_scale = true;
    Positions positions = Positions::interleaved;
  };
  const Variant variants[] = {
      {"untied, post-norm", TiedEmbeddings::none, false},
      {"decoder tied, post-norm", TiedEmbeddings::decoder, false},
      {"all tied, pre-norm", TiedEmbeddings::all, true},
      {"Marian post-norm: all tied, swish, output bias, [sin | cos]", TiedEmbeddings::all, false,
       Activation::swish, true, false, true, Positions::halves},
      {"Marian pre-norm: decoder tied, embedding norm, unscaled", TiedEmbeddings::decoder, true,
       Activation::swish, false, true, false, Positions::halves},
      {"Hugging Face: untied, output bias, its halves", TiedEmbeddings::none, false,
       Activation::swish, true, false, false, Positions::halves_hf}};
  for (const Variant& v : variants) {
    DYNAMIC_SECTION(v.name) {
      tx::Rng rng(30);
      ParameterSet params;
      ModelConfig config = tiny_config(v.tied, v.pre_norm);
      config.activation = v.activation;
      config.output_bias = v.output_bias;
      config.embed_norm = v.embed_norm;
      config.embed_scale = v.embed_scale;
      config.positions = v.positions;
      Transformer model(ParamScope(*be, params, rng), config);
      perturb_params(*be, params, rng);
      Batch b = tiny_batch(rng, 11, {5, 3}, {4, 2}, 5, 4);
      Tensor src = be->upload(b.src, {b.B, b.S}), len = be->upload(b.src_len, {b.B});
      Tensor tgt_in = be->upload(b.tgt_in, {b.B, b.T});
      Tensor tgt_out = be->upload(b.tgt_out, {b.B * b.T});
      Graph g(*be, GraphOptions{true, false});
      // The per-token losses, summed in double by the checker: the loss with less float noise
      // in the finite differences than a float sum.
      GradientChecker gc(
          *be, g,
          [&] {
            Var logits = model.forward(g, src, len, tgt_in);
            return tx::ops::cross_entropy(g, logits, tgt_out, 0.1f, kPad);
          },
          std::vector<float>(b.B * b.T, 1.0f));
      gc.run_backward();
      for (const auto& item : params.items()) {
        // The loss of four layers carries ~1e-6 of float noise: ~1e-3 in a difference at
        // the smallest step, so a tensor of 8 checked elements with |fd| ~0.03 sees relative
        // L2 errors of 1-1.5% from noise alone (measured on an idle Zen 3); a wrong gradient
        // is off by tens of percent.
        tx::test::GradReport rep =
            gc.compare(item.second, 1e-2, 8, 2e-2, /*atol=*/2e-3, /*rel_l2_max=*/3e-2);
        INFO(item.first << ": " << rep.str());
        CHECK(rep.ok);
      }
    }
  }
}

TEMPLATE_TEST_CASE("transformer loss: label_smoothed_loss sums the non-pad token losses",
                   "[nn][transformer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(31);
  ParameterSet params;
  Transformer model(ParamScope(*be, params, rng), tiny_config(TiedEmbeddings::all, false));
  Batch b = tiny_batch(rng, 11, {5, 3}, {4, 2}, 5, 4);
  Graph g(*be, GraphOptions{true, false});
  Var logits = model.forward(g, be->upload(b.src, {b.B, b.S}), be->upload(b.src_len, {b.B}),
                             be->upload(b.tgt_in, {b.B, b.T}));
  Tensor nll;
  Var loss =
      tx::nn::label_smoothed_loss(g, logits, be->upload(b.tgt_out, {b.B, b.T}), 0.1f, kPad, &nll);
  REQUIRE(loss->value.shape() == tx::Shape{1});
  Var rows = tx::ops::cross_entropy(g, logits, be->upload(b.tgt_out, {b.B * b.T}), 0.1f, kPad);
  std::vector<float> per = be->download<float>(rows->value), n = be->download<float>(nll);
  double total = 0;
  for (size_t i = 0; i < per.size(); ++i) {
    total += per[i];
    if (b.tgt_out[i] == kPad) CHECK(per[i] == 0.0f);
    if (b.tgt_out[i] == kPad) CHECK(n[i] == 0.0f);
    if (b.tgt_out[i] != kPad) CHECK(n[i] > 0.0f);
  }
  CHECK(be->download<float>(loss->value)[0] == Approx(total).epsilon(1e-5));
  g.backward(loss);
  CHECK(model.output_weight()->grad.defined());
}

TEMPLATE_TEST_CASE(
    "transformer tied embeddings: the shared tensor's gradient is the sum of its three uses",
    "[nn][transformer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(40);
  ParameterSet tied_params, free_params;
  Transformer tied(ParamScope(*be, tied_params, rng), tiny_config(TiedEmbeddings::all, false));
  Transformer untied(ParamScope(*be, free_params, rng), tiny_config(TiedEmbeddings::none, false));
  perturb_params(*be, tied_params, rng);
  // The untied model gets the same values: the shared table in all three places.
  const Var& shared = tied_params.get("embed_tokens.weight");
  for (const auto& item : free_params.items()) {
    const Var& src = tied_params.contains(item.first) ? tied_params.get(item.first) : shared;
    be->copy(src->value, item.second->value);
  }
  Batch b = tiny_batch(rng, 11, {5, 4}, {4, 3}, 5, 4);
  auto loss_grads = [&](const Transformer& m) {
    Graph g(*be, GraphOptions{true, false});
    Var logits = m.forward(g, be->upload(b.src, {b.B, b.S}), be->upload(b.src_len, {b.B}),
                           be->upload(b.tgt_in, {b.B, b.T}));
    g.backward(
        tx::nn::label_smoothed_loss(g, logits, be->upload(b.tgt_out, {b.B, b.T}), 0.1f, kPad));
  };
  loss_grads(tied);
  loss_grads(untied);
  std::vector<float> want(11 * 8, 0.0f);
  for (const char* name : {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight",
                           "decoder.output_proj.weight"}) {
    std::vector<float> part = be->download<float>(free_params.get(name)->grad);
    double norm = 0;
    for (size_t i = 0; i < part.size(); ++i) {
      want[i] += part[i];
      norm += std::abs(part[i]);
    }
    INFO(name);
    CHECK(norm > 0.0);  // each use contributes
  }
  std::vector<float> got = be->download<float>(shared->grad);
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-5));
}

TEMPLATE_TEST_CASE(
    "transformer: logits at position t ignore later target tokens and padded source tokens "
    "(bit-identical)",
    "[nn][transformer]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (int pre_norm = 0; pre_norm < 2; ++pre_norm) {
    DYNAMIC_SECTION((pre_norm ? "pre-norm" : "post-norm")) {
      tx::Rng rng(50);
      ParameterSet params;
      Transformer model(ParamScope(*be, params, rng),
                        tiny_config(TiedEmbeddings::decoder, pre_norm));
      perturb_params(*be, params, rng);
      Batch b = tiny_batch(rng, 11, {6, 3}, {5, 5}, 6, 5);
      const int64_t T = b.T, V = 11;
      std::vector<float> y0 = eval_logits(*be, model, b);

      // Causality: new tokens after position t leave positions 0..t as they were.
      for (int64_t t = 0; t + 1 < T; ++t) {
        Batch c = b;
        for (int64_t r = 0; r < b.B; ++r)
          for (int64_t u = t + 1; u < T; ++u)
            c.tgt_in[r * T + u] = 3 + (c.tgt_in[r * T + u] - 3 + 1) % 8;  // another word
        std::vector<float> y1 = eval_logits(*be, model, c);
        for (int64_t r = 0; r < b.B; ++r)
          for (int64_t u = 0; u <= t; ++u)
            for (int64_t v = 0; v < V; ++v) {
              INFO("changed from " << t + 1 << ", row " << r << ", position " << u);
              CHECK(y1[(r * T + u) * V + v] == y0[(r * T + u) * V + v]);
            }
        // ... and the changed positions do change.
        CHECK(y1 != y0);
      }

      // Padding: other tokens in the padded source positions change nothing at all.
      Batch c = b;
      for (int64_t s = b.src_len[1]; s < b.S; ++s) c.src[1 * b.S + s] = 3 + int32_t(s);
      CHECK(eval_logits(*be, model, c) == y0);
    }
  }
}

// ---- incremental decoding -----------------------------------------------------------------

TEMPLATE_TEST_CASE(
    "transformer decode_step: step-by-step logits equal the full forward at every position",
    "[nn][transformer][decoding]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  struct Variant {
    const char* name;
    TiedEmbeddings tied;
    bool pre_norm;
    int64_t capacity;
  };
  const Variant variants[] = {
      {"post-norm, cache preallocated", TiedEmbeddings::none, false, 16},
      {"pre-norm, all tied, cache grows from 1", TiedEmbeddings::all, true, 1},
      {"post-norm, decoder tied, cache grows from 3", TiedEmbeddings::decoder, false, 3}};
  for (const Variant& v : variants) {
    DYNAMIC_SECTION(v.name) {
      tx::Rng rng(60);
      ParameterSet params;
      Transformer model(ParamScope(*be, params, rng), tiny_config(v.tied, v.pre_norm));
      perturb_params(*be, params, rng);
      Batch b = tiny_batch(rng, 11, {6, 4, 2}, {7, 7, 7}, 6, 7);
      std::vector<float> full = eval_logits(*be, model, b);

      // A training graph: decode_step itself turns gradients and dropout off.
      Graph eval(*be, GraphOptions{false, false});
      Var memory = model.encode(eval, be->upload(b.src, {b.B, b.S}), be->upload(b.src_len, {b.B}));
      Graph g(*be, GraphOptions{true, true, 3});
      DecoderState state =
          model.start_decoding(g, memory, be->upload(b.src_len, {b.B}), v.capacity);
      std::vector<std::vector<float>> steps;
      decode_steps(*be, g, model, state, b.tgt_in, b.T, b.T, steps);
      CHECK(state.length() == b.T);
      CHECK(state.capacity() >= b.T);
      CHECK(g.tape_size() == 0);
      CHECK(g.grad_enabled());
      CHECK(g.training());
      check_steps_match(steps, 0, full, {0, 1, 2}, b.T, 11);

      // Steps go in order.
      CHECK_THROWS_WITH(
          model.decode_step(g, state, be->upload(std::vector<int32_t>{3, 3, 3}, {3, 1}), 2),
          Catch::Contains("in order"));
    }
  }
}

TEMPLATE_TEST_CASE(
    "transformer decode_step: reorder by a permutation, a fan-out and a shrunk batch matches "
    "decoding those rows alone",
    "[nn][transformer][decoding]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(70);
  ParameterSet params;
  const int64_t V = 11;
  Transformer model(ParamScope(*be, params, rng), tiny_config(TiedEmbeddings::all, false));
  perturb_params(*be, params, rng);
  Batch b = tiny_batch(rng, V, {6, 4, 2}, {6, 6, 6}, 6, 6);
  std::vector<float> full = eval_logits(*be, model, b);
  Graph g(*be, GraphOptions{false, false});

  auto start = [&](const Batch& x, int64_t capacity, int64_t slots = 0) {
    Var memory = model.encode(g, be->upload(x.src, {x.B, x.S}), be->upload(x.src_len, {x.B}));
    return model.start_decoding(g, memory, be->upload(x.src_len, {x.B}), capacity, slots);
  };
  // Decoding continues with each kept row's own target tokens.
  auto after = [&](const std::vector<int32_t>& rows) { return pick_rows(b.tgt_in, b.B, rows); };

  SECTION("permutation") {
    const std::vector<int32_t> perm = {2, 0, 1};
    DecoderState state = start(b, 4);
    std::vector<std::vector<float>> before, later;
    decode_steps(*be, g, model, state, b.tgt_in, b.T, 2, before);
    state.reorder(perm);
    CHECK(state.batch() == 3);
    decode_steps(*be, g, model, state, after(perm), b.T, b.T - 2, later);  // grows past 4
    check_steps_match(before, 0, full, {0, 1, 2}, b.T, V);
    check_steps_match(later, 2, full, perm, b.T, V);
  }
  SECTION("the identity (greedy search's every step) keeps rows, memory and caches") {
    const std::vector<int32_t> same = {0, 1, 2};
    DecoderState state = start(b, 4);
    const void* memory = state.memory(0).keys->value.raw();
    std::vector<std::vector<float>> before, later;
    decode_steps(*be, g, model, state, b.tgt_in, b.T, 3, before);
    state.reorder(same);
    CHECK(state.batch() == 3);
    CHECK(state.group() == 1);
    CHECK(state.length() == 3);
    CHECK(state.memory(0).keys->value.raw() == memory);
    decode_steps(*be, g, model, state, after(same), b.T, b.T - 3, later);  // grows past 4
    check_steps_match(before, 0, full, same, b.T, V);
    check_steps_match(later, 3, full, same, b.T, V);
  }
  SECTION("fan-out into beams, then shrink to the rows that survive") {
    const std::vector<int32_t> fan = {0, 0, 1, 1, 2, 2};
    DecoderState state = start(b, 8);
    state.reorder(fan);  // before the first step, as beam search starts
    CHECK(state.group() == 2);
    std::vector<std::vector<float>> first, second;
    decode_steps(*be, g, model, state, after(fan), b.T, 3, first);
    check_steps_match(first, 0, full, fan, b.T, V);
    // Beams 5 (sentence 2) and 1 (sentence 0) survive, in that order.
    const std::vector<int32_t> keep = {5, 1};
    state.reorder(keep);
    CHECK(state.batch() == 2);
    CHECK(state.group() == 1);
    decode_steps(*be, g, model, state, after({2, 0}), b.T, b.T - 3, second);
    check_steps_match(second, 3, full, {2, 0}, b.T, V);

    // The same two sentences decoded alone, as a batch of their own.
    Batch alone = b;
    alone.B = 2;
    alone.src = pick_rows(b.src, b.B, {2, 0});
    alone.src_len = pick_rows(b.src_len, b.B, {2, 0});
    alone.tgt_in = after({2, 0});
    DecoderState own = start(alone, 8);
    std::vector<std::vector<float>> own_steps;
    decode_steps(*be, g, model, own, alone.tgt_in, b.T, b.T, own_steps);
    for (size_t i = 0; i < second.size(); ++i)
      for (size_t k = 0; k < second[i].size(); ++k)
        CHECK(second[i][k] == Approx(own_steps[3 + i][k]).margin(1e-5));

    // Every hypothesis done: a state of no rows is refused by name, not deep in attention.
    state.reorder({});
    CHECK(state.batch() == 0);
    CHECK_THROWS_WITH(
        model.decode_step(g, state, be->upload(std::vector<int32_t>{}, {0, 1}), state.length()),
        Catch::Contains("a state has no rows left"));
  }
  SECTION("fan-out after the first step into preallocated slots, as beam search does") {
    // One row per sentence decodes step 0; the fan-out then fills the slots given at the start
    // (no reallocation), each beam continuing from its sentence's step-0 keys and values. With
    // a hint below the batch, the state starts with a slot per row and the fan-out adds slots.
    const std::vector<int32_t> fan = {0, 0, 1, 1, 2, 2};
    for (const int64_t hint : {6, 2}) {
      INFO("slots hint " << hint);
      DecoderState state = start(b, b.T, hint);
      CHECK(state.slots() == std::max<int64_t>(hint, b.B));
      std::vector<std::vector<float>> first, later;
      decode_steps(*be, g, model, state, b.tgt_in, b.T, 1, first);
      state.reorder(fan);
      CHECK(state.slots() == 6);
      decode_steps(*be, g, model, state, after(fan), b.T, b.T - 1, later);
      CHECK(state.capacity() == b.T);
      check_steps_match(first, 0, full, {0, 1, 2}, b.T, V);
      check_steps_match(later, 1, full, fan, b.T, V);
    }
  }
  SECTION("within sentences: the caches move, the memory stays where it is") {
    // Beams of one sentence with different histories: after the fan-out, row i reads the
    // target tokens of sentence i % 3, so the two beams of a sentence hold different caches.
    const std::vector<int32_t> fan = {0, 0, 1, 1, 2, 2};
    const std::vector<int32_t> tokens = after({0, 1, 2, 0, 1, 2});
    const std::vector<int32_t> within = {1, 0, 3, 2, 5, 4};  // swap each sentence's beams
    // history: the tokens of the first two steps; every row continues with its own tokens.
    auto run = [&](bool swap, const std::vector<int32_t>& history) {
      DecoderState state = start(b, 8);
      const void* memory = state.memory(0).keys->value.raw();
      state.reorder(fan);
      CHECK(state.memory(0).keys->value.raw() == memory);  // the fan-out copies no memory
      std::vector<std::vector<float>> steps;
      decode_steps(*be, g, model, state, history, b.T, 2, steps);
      if (swap) state.reorder(within);
      CHECK(state.batch() == 6);
      CHECK(state.group() == 2);
      CHECK(state.memory(0).keys->value.raw() == memory);
      steps.clear();
      decode_steps(*be, g, model, state, tokens, b.T, b.T - 2, steps);
      return steps;
    };
    // Swapping the caches after two steps equals decoding each row's first two steps with
    // its partner beam's tokens: the memory of both beams is the same sentence's.
    std::vector<int32_t> partner_history = tokens;
    for (int r = 0; r < 6; ++r)
      for (int64_t t = 0; t < 2; ++t) partner_history[r * b.T + t] = tokens[within[r] * b.T + t];
    const auto swapped = run(true, tokens), partnered = run(false, partner_history);
    const auto plain = run(false, tokens);
    CHECK(swapped != plain);
    REQUIRE(swapped.size() == partnered.size());
    for (size_t i = 0; i < swapped.size(); ++i)
      for (size_t k = 0; k < swapped[i].size(); ++k)
        CHECK(swapped[i][k] == Approx(partnered[i][k]).margin(1e-5));
  }
  SECTION("bad indices are refused") {
    DecoderState state = start(b, 4);
    // A backend may run gather_rows asynchronously: the error is raised by the next
    // synchronisation at the latest (the CPU raises it at once).
    CHECK_THROWS([&] { state.reorder(std::vector<int32_t>{0, 3}); }());
  }
}

TEMPLATE_TEST_CASE(
    "transformer decode_step: states decoded together, each at its own step and group, equal "
    "each decoded alone",
    "[nn][transformer][decoding]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  tx::Rng rng(75);
  ParameterSet params;
  const int64_t V = 11;
  for (bool pre_norm : {false, true}) {
    DYNAMIC_SECTION((pre_norm ? "pre-norm" : "post-norm")) {
      Transformer model(ParamScope(*be, params, rng), tiny_config(TiedEmbeddings::all, pre_norm));
      perturb_params(*be, params, rng);
      // Sources of different widths, so the two states' memories differ in length too.
      Batch b = tiny_batch(rng, V, {6, 4, 2}, {7, 7, 7}, 6, 7);
      std::vector<float> full = eval_logits(*be, model, b);
      Graph g(*be, GraphOptions{false, false});
      auto start = [&](const std::vector<int32_t>& rows, int64_t width) {
        const std::vector<int32_t> src_len = pick_rows(b.src_len, b.B, rows);
        std::vector<int32_t> src;
        for (int32_t r : rows)
          src.insert(src.end(), b.src.begin() + r * b.S, b.src.begin() + r * b.S + width);
        const auto n = static_cast<int64_t>(rows.size());
        Var memory = model.encode(g, be->upload(src, {n, width}), be->upload(src_len, {n}));
        return model.start_decoding(g, memory, be->upload(src_len, {n}), 2);
      };
      // First: sentences 0 and 1 as beams of 2 (group 2); second: sentence 2 alone, a
      // source of width 2, joining three steps later.
      DecoderState first = start({0, 1}, 6), second = start({2}, 2);
      const std::vector<int32_t> first_rows = {0, 0, 1, 1}, second_rows = {2};
      first.reorder({0, 0, 1, 1});
      REQUIRE(first.group() == 2);
      auto tokens = [&](const std::vector<int32_t>& rows, int64_t t) {
        std::vector<int32_t> ids;
        for (int32_t r : rows) ids.push_back(b.tgt_in[r * b.T + t]);
        return ids;
      };
      auto check = [&](const std::vector<float>& logits, int64_t offset,
                       const std::vector<int32_t>& rows, int64_t t) {
        for (size_t i = 0; i < rows.size(); ++i) {
          INFO("step " << t << ", row " << i << " (sentence " << rows[i] << ")");
          double worst = 0;
          for (int64_t v = 0; v < V; ++v)
            worst = std::max(worst, double(std::abs(logits[(offset + i) * V + v] -
                                                    full[(rows[i] * b.T + t) * V + v])));
          CHECK(worst <= 1e-5);
        }
      };
      for (int64_t t = 0; t < 3; ++t)
        check(be->download<float>(
                  model.decode_step(g, first, be->upload(tokens(first_rows, t), {4, 1}), t)->value),
              0, first_rows, t);
      for (int64_t t = 3; t < b.T; ++t) {  // the first state's cache grows past 2 and 4 here
        std::vector<int32_t> ids = tokens(first_rows, t);
        for (int32_t id : tokens(second_rows, t - 3)) ids.push_back(id);
        Var logits = model.decode_step(g, std::vector<DecoderState*>{&first, &second},
                                       be->upload(ids, {5, 1}));
        REQUIRE(logits->value.shape() == (tx::Shape{5, V}));
        const std::vector<float> host = be->download<float>(logits->value);
        check(host, 0, first_rows, t);
        check(host, 4, second_rows, t - 3);
      }
      CHECK(first.length() == b.T);
      CHECK(second.length() == b.T - 3);
      // tgt_ids must cover both states' rows.
      CHECK_THROWS_WITH(model.decode_step(g, std::vector<DecoderState*>{&first, &second},
                                          be->upload(std::vector<int32_t>{3, 3, 3, 3}, {4, 1})),
                        Catch::Contains("must be i32 [5, 1]"));
    }
  }
}

TEST_CASE("nn DecoderState: on the CPU, an ended state's never-written steps leave memory",
          "[nn][memory]") {
  // A block cached after a long user (every page resident) and reused by a short state: once
  // the state ends, only its written steps stay resident (a stream's memory would otherwise
  // climb to the longest state each block ever served).
  tx::register_builtin_backends();
  std::unique_ptr<tx::Backend> be = tx::create_backend("cpu");
  const int64_t B = 4, heads = 2, S = 5, d_head = 32, capacity = 2048, steps = 3;
  const int64_t step_bytes = B * heads * d_head * 4;  // 1 KiB: four steps a page
  Tensor earlier = be->empty({capacity, B, heads, d_head});
  be->fill(earlier, 1.0f);
  void* block = earlier.raw();
  const size_t bytes = earlier.nbytes();
  REQUIRE(bytes >= (size_t(1) << 20));  // a mapped block
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto resident = [&](size_t from, size_t to) {  // pages of [from, to) of the block in memory
    std::vector<unsigned char> in((bytes + page - 1) / page);
    REQUIRE(mincore(block, bytes, in.data()) == 0);
    size_t n = 0;
    for (size_t p = from / page; p < (to + page - 1) / page; ++p) n += in[p] & 1;
    return n;
  };
  std::vector<tx::nn::AttentionKV> memory;
  tx::Rng rng(5);
  for (int layer = 0; layer < 1; ++layer)
    memory.push_back({tx::make_var(be->upload(random_normal(rng, B * heads * S * d_head),
                                              {B, heads, S, d_head})),
                      tx::make_var(be->upload(random_normal(rng, B * heads * S * d_head),
                                              {B, heads, S, d_head}))});
  const Tensor lengths = be->upload(std::vector<int32_t>{5, 4, 3, 2}, {B});
  CHECK(resident(0, bytes) == bytes / page);
  earlier = Tensor();  // back to the allocator's cache, resident
  {
    DecoderState state(*be, memory, lengths, capacity, B);
    tx::nn::CachedKV cached;
    for (int64_t t = 0; t < steps; ++t) {
      state.begin_step();
      const Tensor k = be->upload(random_normal(rng, B * heads * d_head), {B, heads, 1, d_head});
      cached = state.append(0, {tx::make_var(k), tx::make_var(k)});
      state.end_step();
    }
    // The keys' cache took the block the earlier tensor left (the values' is a fresh one).
    REQUIRE((cached.keys.raw() == block || cached.values.raw() == block));
    CHECK(resident(0, bytes) == bytes / page);
  }
  const size_t kept = (steps * step_bytes + page - 1) / page * page;
  CHECK(resident(0, kept) == kept / page);
  CHECK(resident(kept, bytes) == 0);
  be->allocator()->trim();
}

TEMPLATE_TEST_CASE(
    "transformer: the trainer's graph (arena, released logits) gives the plain graph's gradients "
    "on a 4 + 3 model with dropout",
    "[nn][transformer]", TX_BACKENDS) {
  // tx-train's batch_loss draws activations from a rewound arena and lets the loss overwrite the
  // logits; the finite-difference checks above use neither and 2 + 2 layers. A buffer reused while
  // still needed would show only with depth and in the trainer's path: same masks, same gradients.
  TX_BACKEND_OR_SKIP(be);
  for (bool pre_norm : {false, true}) {
    DYNAMIC_SECTION((pre_norm ? "pre-norm" : "post-norm")) {
      tx::Rng rng(32);
      ParameterSet params;
      ModelConfig config = tiny_config(TiedEmbeddings::all, pre_norm);
      config.encoder_layers = 4;
      config.decoder_layers = 3;
      config.attention_dropout = config.relu_dropout = 0.1f;
      config.embed_norm = true;
      Transformer model(ParamScope(*be, params, rng), config);
      perturb_params(*be, params, rng);
      const Batch warm = tiny_batch(rng, 11, {6, 2, 4}, {5, 3, 2}, 6, 5);
      const Batch b = tiny_batch(rng, 11, {5, 3}, {4, 2}, 5, 4);
      auto grads = [&](bool trainer_path) {
        Graph g(*be, GraphOptions{true, true, /*seed=*/9, /*arena=*/trainer_path});
        std::vector<std::vector<float>> out;
        // The trainer's second step: the arena rewound over the first one's activations.
        for (const Batch* x : {&warm, &b}) {
          params.zero_grad(*be);
          g.rng().set_counter(0);
          tx::data::Batch db;
          db.size = x->B;
          db.src_len = x->S;
          db.tgt_len = x->T;
          db.src = x->src;
          db.src_lengths = x->src_len;
          db.tgt_in = x->tgt_in;
          db.tgt_out = x->tgt_out;
          g.backward(tx::train::batch_loss(g, model, db, 0.1f, kPad, trainer_path));
          g.reset();
        }
        for (const auto& item : params.items())
          out.push_back(be->download<float>(item.second->grad));
        return out;
      };
      const auto plain = grads(false), trainer = grads(true);
      // The trainer's loss drops the logits (the step's largest tensor) as its backward writes
      // their gradient over them: a guard against another reader must not turn that off.
      {
        Graph g(*be, GraphOptions{true, true, /*seed=*/9, /*arena=*/true});
        Var logits = model.forward(g, be->upload(b.src, {b.B, b.S}), be->upload(b.src_len, {b.B}),
                                   be->upload(b.tgt_in, {b.B, b.T}));
        g.backward(tx::nn::label_smoothed_loss(g, logits, be->upload(b.tgt_out, {b.B, b.T}), 0.1f,
                                               kPad, nullptr, /*release_logits=*/true));
        CHECK_FALSE(logits->value.defined());
      }
      REQUIRE(plain.size() == trainer.size());
      for (size_t i = 0; i < plain.size(); ++i) {
        INFO(params.items()[i].first);
        double norm = 0;
        for (float v : plain[i]) norm += double(v) * v;
        CHECK(norm > 0);  // every parameter is reached, the fourth encoder layer's too
        CHECK(tx::test::compare(trainer[i], plain[i], 1e-5, 1e-7) == "");
      }
    }
  }
}
