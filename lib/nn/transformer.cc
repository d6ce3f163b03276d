#include "nn/transformer.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace tx::nn {

namespace {
// The per-layer sizes and options, the same for encoder and decoder layers.
EncoderLayerConfig layer_config(const io::ModelConfig& c) {
  EncoderLayerConfig l;
  l.d_model = c.d_model;
  l.heads = c.heads;
  l.d_ff = c.d_ff;
  l.dropout = c.dropout;
  l.attention_dropout = c.attention_dropout;
  l.relu_dropout = c.relu_dropout;
  l.pre_norm = c.pre_norm;
  l.norm_eps = c.norm_eps;
  l.activation = c.activation;
  l.marian_prenorm_cache = c.pre_norm && c.marian_prenorm_cache;
  return l;
}

// Layer i (from 0) of a stack: with depth scaling its Glorot weights (attention projections and
// feed-forward layers; Marian's set) span 1/sqrt(i + 1) of the usual range.
ParamScope layer_scope(const ParamScope& stack, int i) {
  ParamScope s = stack.child("layers").child(std::to_string(i));
  return stack.depth_scaling() ? s.scaled(1.0f / std::sqrt(static_cast<float>(i + 1))) : s;
}
}  // namespace

Transformer::Transformer(ParamScope scope, const io::ModelConfig& config) : config_(config) {
  config.validate();
  const EncoderLayerConfig layer = layer_config(config);
  ParamScope enc = scope.child("encoder"), dec = scope.child("decoder");

  if (config.tied_embeddings == io::TiedEmbeddings::all)
    src_embed_ = Embedding(scope.child("embed_tokens"), config.src_vocab_size, config.d_model);
  else
    src_embed_ = Embedding(enc.child("embed_tokens"), config.src_vocab_size, config.d_model);
  if (config.embed_norm)
    src_embed_norm_ = LayerNorm(enc.child("embed_norm"), config.d_model, config.norm_eps);
  for (int i = 0; i < config.encoder_layers; ++i) encoder_.emplace_back(layer_scope(enc, i), layer);
  // Pre-norm layers leave their output unnormalised; post-norm layers end with a LayerNorm.
  if (final_norm())
    encoder_norm_ = LayerNorm(enc.child("final_norm"), config.d_model, config.norm_eps);

  if (config.tied_embeddings == io::TiedEmbeddings::all)
    tgt_embed_ = src_embed_;  // the same Var: both lookups add into one gradient
  else
    tgt_embed_ = Embedding(dec.child("embed_tokens"), config.tgt_vocab_size, config.d_model);
  if (config.embed_norm)
    tgt_embed_norm_ = LayerNorm(dec.child("embed_norm"), config.d_model, config.norm_eps);
  for (int i = 0; i < config.decoder_layers; ++i) decoder_.emplace_back(layer_scope(dec, i), layer);
  if (final_norm())
    decoder_norm_ = LayerNorm(dec.child("final_norm"), config.d_model, config.norm_eps);

  if (config.tied_embeddings == io::TiedEmbeddings::none)
    // Untied, the projection is drawn like an embedding (as fairseq does), so logits start at
    // the same scale either way.
    output_weight_ = dec.child("output_proj")
                         .normal("weight", {config.tgt_vocab_size, config.d_model},
                                 1.0f / std::sqrt(static_cast<float>(config.d_model)));
  else
    output_weight_ = tgt_embed_.weight();
  if (config.output_bias)
    output_bias_ = dec.child("output_proj").constant("bias", {config.tgt_vocab_size}, 0.0f);
}

Var Transformer::forward(Graph& g, const Tensor& src_ids, const Tensor& src_lengths,
                         const Tensor& tgt_in_ids, TappedLayer* tapped) const {
  return decode(g, encode(g, src_ids, src_lengths), src_lengths, tgt_in_ids, tapped);
}

float Transformer::embed_scale() const {
  return config_.embed_scale ? std::sqrt(static_cast<float>(config_.d_model)) : 1.0f;
}

math::PositionLayout Transformer::position_layout() const {
  return static_cast<math::PositionLayout>(config_.positions);
}

Var Transformer::embed(Graph& g, const Embedding& table, const LayerNorm& norm, const Tensor& ids,
                       int64_t start, float word_dropout) const {
  TX_CHECK(ids.defined() && ids.dtype() == DType::i32 && ids.ndim() == 2, "Transformer: token ids ",
           ids.str(), " must be i32 [batch, time]");
  Var looked_up = table.forward(g, ids, embed_scale());
  // Word dropout: the source's or the target's, by the table (tied: the caller's side).
  Var scaled = ops::drop_rows(g, looked_up, word_dropout);
  if (scaled != looked_up) ops::release(g, looked_up);
  Var positioned =
      ops::add_positions(g, scaled, start + config_.position_offset, position_layout());
  ops::release(g, scaled);
  return embed_end(g, norm, positioned);
}

Var Transformer::embed_end(Graph& g, const LayerNorm& norm, const Var& x) const {
  Var normed = x;
  if (config_.embed_norm) {
    normed = norm.forward(g, x);
    ops::release(g, x);
  }
  Var out = ops::dropout(g, normed, config_.dropout);
  if (out != normed) ops::release(g, normed);
  return out;
}

Var Transformer::encode(Graph& g, const Tensor& src_ids, const Tensor& src_lengths) const {
  TX_CHECK(src_lengths.defined() && src_lengths.dtype() == DType::i32 &&
               src_lengths.shape() == Shape{src_ids.dim(0)},
           "Transformer::encode: src_lengths ", src_lengths.str(), " must be i32 [", src_ids.dim(0),
           "] for src_ids ", src_ids.str());
  Var x = embed(g, src_embed_, src_embed_norm_, src_ids, 0, config_.dropout_src);
  for (const EncoderLayer& layer : encoder_) x = layer.forward(g, x, src_lengths);
  return final_norm() ? encoder_norm_.forward(g, x) : x;
}

Var Transformer::logits(Graph& g, const Var& x, const OutputSubset* subset) const {
  Var h = final_norm() ? decoder_norm_.forward(g, x) : x;
  if (subset) return ops::linear(g, h, subset->weight, subset->bias, subset->prepared);
  return ops::linear(g, h, output_weight_, output_bias_, output_prepared_);
}

OutputSubset Transformer::output_subset(Backend& be, std::vector<int32_t> ids) const {
  TX_CHECK(!ids.empty() && std::is_sorted(ids.begin(), ids.end()) && ids.front() >= 0 &&
               ids.back() < config_.tgt_vocab_size,
           "Transformer::output_subset: ", ids.size(), " ids must be sorted target ids below ",
           config_.tgt_vocab_size);
  OutputSubset s;
  const auto K = static_cast<int64_t>(ids.size());
  const Tensor index = be.upload(ids, {K});
  Tensor w = be.empty({K, config_.d_model});
  be.gather_rows(output_weight_->value, index, w);
  s.weight = make_var(w);
  if (output_bias_) {
    Tensor b = be.empty({K, 1});
    be.gather_rows(output_bias_->value.view({config_.tgt_vocab_size, 1}), index, b);
    s.bias = make_var(b.view({K}));
  }
  s.prepared = ops::PreparedWeight::prepare(be, w, weight_form_);
  s.ids = std::move(ids);
  return s;
}

void Transformer::prepare_inference(Backend& be, ops::WeightForm form) {
  for (EncoderLayer& layer : encoder_) layer.prepare_inference(be, form);
  for (DecoderLayer& layer : decoder_) layer.prepare_inference(be, form);
  output_prepared_ = ops::PreparedWeight::prepare(be, output_weight_->value, form);
  weight_form_ = form;
}

Var Transformer::decode(Graph& g, const Var& memory, const Tensor& src_lengths,
                        const Tensor& tgt_in_ids, TappedLayer* tapped) const {
  TX_CHECK(tgt_in_ids.ndim() == 2 && memory->value.ndim() == 3 &&
               tgt_in_ids.dim(0) == memory->value.dim(0),
           "Transformer::decode: target ids ", tgt_in_ids.str(), " and memory ",
           memory->value.str(), " must share the batch size");
  Var x = embed(g, tgt_embed_, tgt_embed_norm_, tgt_in_ids, 0, config_.dropout_trg);
  x = decoder_stack(g, x, memory, src_lengths, int(decoder_.size()) - 1, tapped, false);
  return logits(g, x);
}

Var Transformer::decoder_stack(Graph& g, Var x, const Var& memory, const Tensor& src_lengths,
                               int last, TappedLayer* tapped, bool as_decoded) const {
  TX_CHECK(!tapped || (tapped->layer >= 0 && tapped->layer <= last), "Transformer: no decoder ",
           "layer ", tapped ? tapped->layer + 1 : 0, " of ", last + 1, " to keep the attention of");
  for (int i = 0; i <= last; ++i)
    x = decoder_[static_cast<size_t>(i)].forward(
        g, x, memory, src_lengths, tapped && i == tapped->layer ? &tapped->tap : nullptr,
        as_decoded);
  return x;
}

Var Transformer::cross_attention(Graph& g, const Var& memory, const Tensor& src_lengths,
                                 const Tensor& tgt_in_ids, int layer) const {
  TX_CHECK(layer >= 0 && layer < static_cast<int>(decoder_.size()), "cross-attention of layer ",
           layer + 1, ": the decoder has ", decoder_.size(), " layers");
  TX_CHECK(tgt_in_ids.ndim() == 2 && tgt_in_ids.dim(0) == memory->value.dim(0),
           "Transformer::cross_attention: target ids ", tgt_in_ids.str(), " and memory ",
           memory->value.str(), " must share the batch size");
  NoGradScope no_grad(g);
  EvalScope eval(g);
  TappedLayer tapped{layer, {}};
  decoder_stack(g, embed(g, tgt_embed_, tgt_embed_norm_, tgt_in_ids, 0), memory, src_lengths, layer,
                &tapped, true);
  return tapped.tap.probs;
}

DecoderState Transformer::start_decoding(Graph& g, const Var& memory, const Tensor& src_lengths,
                                         int64_t capacity, int64_t slots) const {
  NoGradScope no_grad(g);
  std::vector<AttentionKV> kv;
  for (const DecoderLayer& layer : decoder_) kv.push_back(layer.project_memory(g, memory));
  return DecoderState(g.backend(), std::move(kv), src_lengths, capacity, slots);
}

Var Transformer::decode_step(Graph& g, DecoderState& state, const Tensor& tgt_ids,
                             int64_t step) const {
  TX_CHECK(step == state.length(), "Transformer::decode_step: step ", step, " but the state holds ",
           state.length(), " steps; steps go 0, 1, 2, ... in order");
  return decode_step(g, std::vector<DecoderState*>{&state}, tgt_ids);
}

Var Transformer::decode_step(Graph& g, const std::vector<DecoderState*>& states,
                             const Tensor& tgt_ids, const OutputSubset* subset) const {
  TX_CHECK(!states.empty(), "Transformer::decode_step: no states to decode");
  int64_t rows = 0;
  for (const DecoderState* state : states) {
    rows += state->batch();
    TX_CHECK(state->batch() > 0,
             "Transformer::decode_step: a state has no rows left (reordered to none); drop it "
             "from the step once its hypotheses are done");
    TX_CHECK(state->layers() == static_cast<int>(decoder_.size()),
             "Transformer::decode_step: a state has ", state->layers(), " layers, the model ",
             decoder_.size());
  }
  TX_CHECK(tgt_ids.defined() && tgt_ids.shape() == (Shape{rows, 1}),
           "Transformer::decode_step: tgt_ids ", tgt_ids.str(), " must be i32 [", rows, ", 1]");
  NoGradScope no_grad(g);
  EvalScope eval(g);
  Var x = embed_step(g, tgt_ids, states);
  for (DecoderState* state : states) state->begin_step();
  for (size_t i = 0; i < decoder_.size(); ++i)
    x = decoder_[i].step(g, x, states, static_cast<int>(i));
  for (DecoderState* state : states) state->end_step();
  const int64_t outputs =
      subset ? static_cast<int64_t>(subset->ids.size()) : config_.tgt_vocab_size;
  return ops::reshape(g, logits(g, x, subset), {rows, outputs});
}

Var Transformer::embed_step(Graph& g, const Tensor& ids,
                            const std::vector<DecoderState*>& states) const {
  if (states.size() == 1)
    return embed(g, tgt_embed_, tgt_embed_norm_, ids, states.front()->length());
  // Each state's rows at its own position: the same arithmetic per row as embed() (no
  // dropout: inference).
  Var scaled = tgt_embed_.forward(g, ids, embed_scale());
  Tensor out = g.alloc(scaled->value.shape());
  int64_t first = 0;
  for (const DecoderState* state : states) {
    const int64_t end = first + state->batch();
    g.backend().add_positions(scaled->value.slice(first, end),
                              state->length() + config_.position_offset, out.slice(first, end),
                              position_layout());
    first = end;
  }
  return embed_end(g, tgt_embed_norm_, make_var(out));
}

}  // namespace tx::nn
