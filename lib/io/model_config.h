// ModelConfig: the Transformer's architecture and regularisation, with the paper's presets.
//
// It travels as JSON in a checkpoint's "__metadata__" under kModelConfigKey, so a checkpoint
// alone is enough to rebuild its model.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace tx::io {

// Which embedding matrices share one weight (paper section 3.4 shares all three).
enum class TiedEmbeddings {
  none,     // source embedding, target embedding and output projection are separate
  decoder,  // target embedding = output projection
  all,      // source = target embedding = output projection (needs one shared vocabulary)
};

const char* name_of(TiedEmbeddings tied);

// The feed-forward layer's activation: the paper's ReLU, or Swish (SiLU, x * sigmoid(x)) as
// Marian's --transformer-ffn-activation swish and OPUS-MT models use.
enum class Activation { relu, swish };
const char* name_of(Activation activation);

// The sinusoid table's layout (backend/device_math.h, math::PositionLayout): "interleaved" (tx,
// the paper), "halves" (Marian, fairseq: [sin | cos]), "halves_hf" (Hugging Face's Marian).
enum class Positions { interleaved = 0, halves = 1, halves_hf = 2 };
const char* name_of(Positions positions);

constexpr const char* kModelConfigKey = "tx.model_config";

struct ModelConfig {
  // validate()'s upper bounds: far beyond any translation model, low enough that no product of
  // them overflows.
  static constexpr int64_t kMaxWidth = int64_t(1) << 17;      // d_model, d_ff, heads
  static constexpr int64_t kMaxLayers = 1024;                 // each stack
  static constexpr int64_t kMaxPositions = int64_t(1) << 20;  // max_length, position_offset
  static constexpr int64_t kMaxVocab = int64_t(1) << 24;      // each vocabulary

  // 0 means "not yet known": tx-train fills them in from the vocabulary.
  int64_t src_vocab_size = 0;
  int64_t tgt_vocab_size = 0;
  int64_t d_model = 512;
  int64_t d_ff = 2048;
  int heads = 8;
  int encoder_layers = 6;
  int decoder_layers = 6;
  float dropout = 0.1f;            // sublayer outputs and embedding sums (paper P_drop)
  float attention_dropout = 0.0f;  // on attention probabilities
  float relu_dropout = 0.0f;       // inside the feed-forward network
  // Whole token embeddings zeroed (the rest scaled by 1 / (1 - p)), before the positions are
  // added: source and target words (Marian's --dropout-src, --dropout-trg).
  float dropout_src = 0.0f;
  float dropout_trg = 0.0f;
  float label_smoothing = 0.1f;
  TiedEmbeddings tied_embeddings = TiedEmbeddings::all;
  bool pre_norm = false;      // the paper is post-norm
  int64_t max_length = 1024;  // longest sequence the positional encoding covers
  float norm_eps = 1e-5f;

  // The variants of the models tx reads (docs/models.md); the defaults are tx's own model.
  bool embed_scale =
      true;  // embeddings times sqrt(d_model) (off: Hugging Face scale_embedding false)
  Positions positions = Positions::interleaved;
  int64_t position_offset = 0;  // the first token's position (fairseq: padding id + 1)
  bool embed_norm = false;      // a LayerNorm after embeddings + positions (Marian's emb "n")
  bool final_norm = true;       // with pre_norm: a LayerNorm after each stack (Marian's top "n")
  Activation activation = Activation::relu;
  bool output_bias =
      false;  // a bias on the logits (Marian's default, Hugging Face's final_logits_bias)
  // Special token ids, -1 for none. pad fills batches (-1: rows of zeros) and is the loss's
  // ignored target; unk, bos and pad are never produced (unk unless allowed); eos ends a
  // sentence; decoder_start is the decoder's first input (-1: a zero vector, Marian's start).
  int32_t pad_id = 0;
  int32_t unk_id = 1;
  int32_t bos_id = 2;
  int32_t eos_id = 3;
  int32_t decoder_start_id = 2;
  // Marian's decoder (models/transformer.h, DecoderLayerSelfAttention) caches a pre-norm
  // layer's self-attention keys and values from the layer's un-normalised input after the
  // first step, unlike its training and scoring. On for Marian's pre-norm models, so that
  // tx-translate equals marian-decoder; only incremental decoding reads it.
  bool marian_prenorm_cache = false;
  // The cross-attention that word alignments read (decode/alignment.h) and tx-train
  // --guided-alignment trains: decoder layer alignment_layer (1-based, 0 the last: Marian's
  // --transformer-guided-alignment-layer) and head alignment_head (-1 the average over heads,
  // fairseq's rule; guided alignment trains head 0 then, as Marian). A Marian model's is head 0
  // of its transformer-guided-alignment-layer, as marian-decoder reads it.
  int32_t alignment_layer = 0;
  int32_t alignment_head = -1;
  // alignment_layer as a 0-based decoder layer.
  int aligned_layer() const {
    return alignment_layer == 0 ? decoder_layers - 1 : alignment_layer - 1;
  }

  // "transformer-base" or "transformer-big" (paper Table 3); vocabulary sizes stay 0.
  static ModelConfig preset(const std::string& name);
  static std::vector<std::string> preset_names();

  // Throws tx::Error naming the first invalid field and the fix. With require_vocab false,
  // vocabulary sizes of 0 (not yet known) pass.
  void validate(bool require_vocab = true, const std::string& where = "model config") const;

  // Every field, keyed by its name above; tied_embeddings as "none" | "decoder" | "all".
  nlohmann::json to_json() const;
  std::string to_json_string() const;  // compact, for "__metadata__"

  // Overrides the fields present in `j` (an object); an unknown key or a wrong type is an
  // error naming the key and `where`. Does not validate: a preset plus overrides may be
  // validated once all are applied.
  void update(const nlohmann::json& j, const std::string& where = "model config");

  // Defaults (transformer-base) overridden by `j`, then validated with vocabulary sizes.
  static ModelConfig from_json(const nlohmann::json& j, const std::string& where = "model config");
  static ModelConfig from_json_string(const std::string& text,
                                      const std::string& where = "model config");

  bool operator==(const ModelConfig& o) const;
  bool operator!=(const ModelConfig& o) const { return !(*this == o); }
};

}  // namespace tx::io
