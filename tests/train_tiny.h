// Test support for lib/train: a synthetic copy task, a tiny Transformer trained on it, and a
// scratch directory.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gradient_check.h"
#include "nn/loss.h"
#include "nn/transformer.h"
#include "support/files.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"
#include "train/training_state.h"

namespace tx::test {

constexpr int32_t kPad = 0, kBos = 1, kEos = 2;

// 2 + 2 layers, d_model 8, vocabulary 11, every dropout on: the resume test must replay masks.
inline io::ModelConfig tiny_train_config() {
  io::ModelConfig c;
  c.src_vocab_size = c.tgt_vocab_size = 11;
  c.d_model = 8;
  c.d_ff = 16;
  c.heads = 2;
  c.encoder_layers = c.decoder_layers = 2;
  c.dropout = 0.1f;
  c.attention_dropout = 0.1f;
  c.relu_dropout = 0.1f;
  c.tied_embeddings = io::TiedEmbeddings::all;
  return c;
}

// One batch of the copy task (target = source): B sentences of 2..6 tokens in [3, 11).
struct CopyBatch {
  int64_t B = 4, S = 0, T = 0;
  std::vector<int32_t> src, src_len, tgt_in, tgt_out;
  int64_t tokens = 0;  // non-pad target tokens (EOS included): the loss normaliser
};

// Batch `index` of the stream: a pure function of the index, so the data position of a
// resumed run is just the next index.
inline CopyBatch copy_batch(int64_t index) {
  std::mt19937_64 gen(1000 + static_cast<uint64_t>(index));
  CopyBatch b;
  std::vector<std::vector<int32_t>> words(b.B);
  for (auto& w : words) {
    w.resize(2 + gen() % 5);
    for (int32_t& t : w) t = 3 + static_cast<int32_t>(gen() % 8);
    b.S = std::max<int64_t>(b.S, int64_t(w.size()));
  }
  b.T = b.S + 1;
  b.src.assign(b.B * b.S, kPad);
  b.tgt_in.assign(b.B * b.T, kPad);
  b.tgt_out.assign(b.B * b.T, kPad);
  for (int64_t r = 0; r < b.B; ++r) {
    const auto& w = words[r];
    b.src_len.push_back(int32_t(w.size()));
    b.tgt_in[r * b.T] = kBos;
    for (size_t t = 0; t < w.size(); ++t) {
      b.src[r * b.S + t] = w[t];
      b.tgt_in[r * b.T + t + 1] = w[t];
      b.tgt_out[r * b.T + t] = w[t];
    }
    b.tgt_out[r * b.T + w.size()] = kEos;
    b.tokens += int64_t(w.size()) + 1;
  }
  return b;
}

// A tiny model with its optimiser and dropout stream: the objects a trainer holds.
struct TinyRun {
  TinyRun(Backend& backend, uint64_t init_seed, uint64_t dropout_seed,
          train::AdamOptions options = {}, io::ModelConfig cfg = tiny_train_config())
      : be(backend),
        config(cfg),
        init_rng(init_seed),
        model(nn::ParamScope(be, params, init_rng), config),
        adam(be, params, options),
        graph(std::make_unique<Graph>(be, GraphOptions{true, true, dropout_seed})) {}

  // Forward and backward on batch next_batch (gradients accumulate in params).
  void forward_backward() {
    CopyBatch b = copy_batch(next_batch);
    Var logits = model.forward(*graph, be.upload(b.src, {b.B, b.S}), be.upload(b.src_len, {b.B}),
                               be.upload(b.tgt_in, {b.B, b.T}));
    Var loss = nn::label_smoothed_loss(*graph, logits, be.upload(b.tgt_out, {b.B, b.T}),
                                       config.label_smoothing, kPad);
    graph->backward(loss);
    graph->reset();
    last_tokens = b.tokens;
  }

  // One update with a token-normalised loss, as tx-train does.
  train::AdamStepInfo step() {
    forward_backward();
    ++next_batch;
    train::AdamStepInfo info =
        adam.step(float(schedule(adam.steps() + 1)), 1.0f / float(last_tokens));
    params.zero_grad(be);
    return info;
  }

  train::TrainingState state() const {
    train::TrainingState s;
    s.update = adam.steps();
    s.data_position = {next_batch};
    s.rng_seed = graph->rng().seed();
    s.rng_counter = graph->rng().counter();
    s.early_stopping.metric = "cross-entropy";
    return s;
  }

  // Continues from a loaded state: the data position and a new Graph on the saved stream.
  void resume(const train::TrainingState& s) {
    next_batch = s.data_position.at(0);
    graph = std::make_unique<Graph>(be, GraphOptions{true, true, s.rng_seed});
    graph->rng().set_counter(s.rng_counter);
  }

  Backend& be;
  io::ModelConfig config;
  nn::ParameterSet params;
  Rng init_rng;
  nn::Transformer model;
  train::Adam adam;
  std::unique_ptr<Graph> graph;
  train::LrSchedule schedule = train::LrSchedule::transformer(8, 4, 0.5);
  int64_t next_batch = 0;
  int64_t last_tokens = 0;
};

}  // namespace tx::test
