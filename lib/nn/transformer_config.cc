#include "nn/transformer_config.h"

namespace tx::nn {

std::string to_string(TiedEmbeddings tied) {
  switch (tied) {
    case TiedEmbeddings::none:
      return "none";
    case TiedEmbeddings::decoder:
      return "decoder";
    case TiedEmbeddings::all:
      return "all";
  }
  return "none";
}

TiedEmbeddings parse_tied_embeddings(const std::string& name) {
  if (name == "none") return TiedEmbeddings::none;
  if (name == "decoder") return TiedEmbeddings::decoder;
  if (name == "all") return TiedEmbeddings::all;
  throw Error(str("tied embeddings '", name, "' is not one of none, decoder, all"));
}

EncoderLayerConfig TransformerConfig::layer() const {
  EncoderLayerConfig c;
  c.d_model = d_model;
  c.heads = heads;
  c.d_ff = d_ff;
  c.dropout = dropout;
  c.attention_dropout = attention_dropout;
  c.relu_dropout = relu_dropout;
  c.pre_norm = pre_norm;
  c.norm_eps = norm_eps;
  return c;
}

void TransformerConfig::validate() const {
  TX_CHECK(src_vocab > 0 && tgt_vocab > 0, "TransformerConfig: vocab sizes ", src_vocab, " and ",
           tgt_vocab, " must be positive");
  TX_CHECK(d_model > 0 && d_ff > 0, "TransformerConfig: d_model ", d_model, " and d_ff ", d_ff,
           " must be positive");
  TX_CHECK(heads > 0 && d_model % heads == 0, "TransformerConfig: d_model ", d_model,
           " must be divisible by heads=", heads);
  TX_CHECK(encoder_layers >= 1 && decoder_layers >= 1, "TransformerConfig: encoder_layers ",
           encoder_layers, " and decoder_layers ", decoder_layers, " must be at least 1");
  for (float p : {dropout, attention_dropout, relu_dropout})
    TX_CHECK(p >= 0.0f && p < 1.0f, "TransformerConfig: dropout ", p, " must be in [0, 1)");
  TX_CHECK(tied != TiedEmbeddings::all || src_vocab == tgt_vocab,
           "TransformerConfig: tied embeddings 'all' needs one shared vocabulary, but src_vocab ",
           src_vocab, " != tgt_vocab ", tgt_vocab, "; use tied 'decoder' or 'none'");
  TX_CHECK(norm_eps > 0.0f, "TransformerConfig: norm_eps ", norm_eps, " must be positive");
}

}  // namespace tx::nn
