// Test support: a small random Transformer whose parameters are pushed away from their
// initialisation, so that its outputs and attentions are far from uniform.
#pragma once

#include <cstdint>

#include "gradient_check.h"
#include "nn/transformer.h"

namespace tx::test {

// d_model 8, d_ff 16, 2 heads, no dropout, one joint vocabulary of `vocab` ids.
inline io::ModelConfig small_config(int64_t vocab, int encoder_layers, int decoder_layers) {
  io::ModelConfig c;
  c.src_vocab_size = c.tgt_vocab_size = vocab;
  c.d_model = 8;
  c.d_ff = 16;
  c.heads = 2;
  c.encoder_layers = encoder_layers;
  c.decoder_layers = decoder_layers;
  c.dropout = 0.0f;
  return c;
}

// The model of `config` drawn from `seed`, then perturbed (perturb_params).
struct RandomModel {
  RandomModel(Backend& be, const io::ModelConfig& config, uint64_t seed)
      : rng(seed), model(nn::ParamScope(be, params, rng), config) {
    perturb_params(be, params, rng);
  }
  nn::ParameterSet params;
  Rng rng;
  nn::Transformer model;
};

}  // namespace tx::test
