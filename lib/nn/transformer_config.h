// TransformerConfig: the sizes and options of an encoder-decoder Transformer (paper Table 3).
#pragma once

#include <cstdint>
#include <string>

#include "nn/encoder_layer.h"

namespace tx::nn {

// Which embedding tables share one tensor (paper section 3.4 shares all three).
enum class TiedEmbeddings {
  none,     // source embedding, target embedding and output projection are separate
  decoder,  // the target embedding is the output projection's weight
  all,      // source = target = output projection: needs one vocabulary for both sides
};

// "none" | "decoder" | "all", and back; parse throws tx::Error naming the accepted values.
std::string to_string(TiedEmbeddings tied);
TiedEmbeddings parse_tied_embeddings(const std::string& name);

// Defaults are transformer-base with a shared 32k vocabulary.
struct TransformerConfig {
  int64_t src_vocab = 32000;
  int64_t tgt_vocab = 32000;
  int64_t d_model = 512;
  int64_t d_ff = 2048;
  int heads = 8;
  int encoder_layers = 6;
  int decoder_layers = 6;
  float dropout = 0.1f;  // P_drop: embeddings + positions, and each sublayer's output
  float attention_dropout = 0.0f;
  float relu_dropout = 0.0f;
  TiedEmbeddings tied = TiedEmbeddings::all;
  bool pre_norm = false;  // false: post-norm as in the paper
  float norm_eps = 1e-5f;

  // The per-layer sizes and options shared by encoder and decoder layers.
  EncoderLayerConfig layer() const;
  // Throws tx::Error naming the first field that is out of range.
  void validate() const;
};

}  // namespace tx::nn
