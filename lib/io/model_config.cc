#include "io/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/format.h"

namespace tx::io {
namespace {

using nlohmann::json;

template <typename Int>
void read_int(const json& v, const std::string& key, const std::string& where, Int* out) {
  TX_CHECK(v.is_number_integer(), where, ": '", key, "' must be an integer, got ", v.dump());
  // Compare in the widest types so a huge value cannot wrap into range.
  bool fits = v.is_number_unsigned()
                  ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<Int>::max())
                  : v.get<int64_t>() >= static_cast<int64_t>(std::numeric_limits<Int>::min()) &&
                        v.get<int64_t>() <= static_cast<int64_t>(std::numeric_limits<Int>::max());
  TX_CHECK(fits, where, ": '", key, "' = ", v.dump(), " is out of range");
  *out = v.is_number_unsigned() ? static_cast<Int>(v.get<uint64_t>())
                                : static_cast<Int>(v.get<int64_t>());
}

void read_float(const json& v, const std::string& key, const std::string& where, float* out) {
  TX_CHECK(v.is_number(), where, ": '", key, "' must be a number, got ", v.dump());
  *out = v.get<float>();
}

void read_bool(const json& v, const std::string& key, const std::string& where, bool* out) {
  TX_CHECK(v.is_boolean(), where, ": '", key, "' must be true or false, got ", v.dump());
  *out = v.get<bool>();
}

void read_tied(const json& v, const std::string& key, const std::string& where,
               TiedEmbeddings* out) {
  std::string s = v.is_string() ? v.get<std::string>() : "";
  if (s == "none")
    *out = TiedEmbeddings::none;
  else if (s == "decoder")
    *out = TiedEmbeddings::decoder;
  else if (s == "all")
    *out = TiedEmbeddings::all;
  else
    throw Error(
        str(where, ": '", key, "' must be \"none\", \"decoder\" or \"all\", got ", v.dump()));
}

template <typename Enum>
void read_enum(const json& v, const std::string& key, const std::string& where,
               std::initializer_list<Enum> values, Enum* out) {
  std::string s = v.is_string() ? v.get<std::string>() : "";
  std::string names;
  for (Enum e : values) {
    if (s == name_of(e)) {
      *out = e;
      return;
    }
    names += str(names.empty() ? "" : ", ", "\"", name_of(e), "\"");
  }
  throw Error(str(where, ": '", key, "' must be one of ", names, ", got ", v.dump()));
}

void check_rate(float v, const char* key, const std::string& where) {
  TX_CHECK(std::isfinite(v) && v >= 0.0f && v < 1.0f, where, ": ", key, " = ", v,
           " must lie in [0, 1)");
}

}  // namespace

const char* name_of(TiedEmbeddings tied) {
  switch (tied) {
    case TiedEmbeddings::none:
      return "none";
    case TiedEmbeddings::decoder:
      return "decoder";
    case TiedEmbeddings::all:
      return "all";
  }
  return "?";
}

const char* name_of(Activation activation) {
  return activation == Activation::swish ? "swish" : "relu";
}

const char* name_of(Positions positions) {
  switch (positions) {
    case Positions::interleaved:
      return "interleaved";
    case Positions::halves:
      return "halves";
    case Positions::halves_hf:
      return "halves_hf";
  }
  return "?";
}

std::vector<std::string> ModelConfig::preset_names() {
  return {"transformer-base", "transformer-big"};
}

ModelConfig ModelConfig::preset(const std::string& name) {
  ModelConfig c;  // the defaults are transformer-base
  if (name == "transformer-base") return c;
  if (name == "transformer-big") {
    c.d_model = 1024;
    c.d_ff = 4096;
    c.heads = 16;
    c.dropout = 0.3f;  // EN-DE big; the paper used 0.1 for EN-FR
    return c;
  }
  throw Error(str("unknown model preset '", name, "'; choose transformer-base or transformer-big"));
}

void ModelConfig::validate(bool require_vocab, const std::string& where) const {
  if (require_vocab) {
    TX_CHECK(src_vocab_size > 0 && tgt_vocab_size > 0, where, ": src_vocab_size = ", src_vocab_size,
             " and tgt_vocab_size = ", tgt_vocab_size,
             " must be positive; set them from the vocabulary");
  } else {
    TX_CHECK(src_vocab_size >= 0 && tgt_vocab_size >= 0, where,
             ": vocabulary sizes must not be negative");
  }
  // The upper bounds are far beyond any translation model; a damaged or hostile file's sizes
  // would otherwise make products that overflow before the first allocation.
  auto in_range = [&](int64_t v, const char* key, int64_t most) {
    TX_CHECK(v > 0 && v <= most, where, ": ", key, " = ", v, " must be positive and at most ",
             most);
  };
  in_range(d_model, "d_model", kMaxWidth);
  in_range(d_ff, "d_ff", kMaxWidth);
  in_range(heads, "heads", kMaxWidth);
  in_range(encoder_layers, "encoder_layers", kMaxLayers);
  in_range(decoder_layers, "decoder_layers", kMaxLayers);
  in_range(max_length, "max_length", kMaxPositions);
  TX_CHECK(src_vocab_size <= kMaxVocab && tgt_vocab_size <= kMaxVocab, where, ": vocabulary sizes ",
           src_vocab_size, " and ", tgt_vocab_size, " must be at most ", kMaxVocab);
  TX_CHECK(d_model % heads == 0, where, ": d_model = ", d_model,
           " is not divisible by heads = ", heads, "; choose heads that divide d_model");
  check_rate(dropout, "dropout", where);
  check_rate(attention_dropout, "attention_dropout", where);
  check_rate(relu_dropout, "relu_dropout", where);
  check_rate(dropout_src, "dropout_src", where);
  check_rate(dropout_trg, "dropout_trg", where);
  check_rate(label_smoothing, "label_smoothing", where);
  TX_CHECK(std::isfinite(norm_eps) && norm_eps > 0.0f, where, ": norm_eps = ", norm_eps,
           " must be positive");
  TX_CHECK(positions == Positions::interleaved || d_model % 2 == 0, where,
           ": positions = ", name_of(positions), " needs an even d_model, got ", d_model);
  TX_CHECK(position_offset >= 0 && position_offset <= kMaxPositions, where,
           ": position_offset = ", position_offset, " must be between 0 and ", kMaxPositions);
  auto check_id = [&](int32_t id, const char* key, int64_t vocab, bool optional) {
    TX_CHECK((optional && id == -1) || (id >= 0 && (vocab == 0 || id < vocab)), where, ": ", key,
             " = ", id, " must be a token id below the vocabulary size ", vocab,
             optional ? " (or -1 for none)" : "");
  };
  check_id(pad_id, "pad_id", std::min(src_vocab_size, tgt_vocab_size), true);
  check_id(unk_id, "unk_id", std::min(src_vocab_size, tgt_vocab_size), true);
  check_id(bos_id, "bos_id", tgt_vocab_size, true);
  check_id(eos_id, "eos_id", std::min(src_vocab_size, tgt_vocab_size), false);
  check_id(decoder_start_id, "decoder_start_id", tgt_vocab_size, true);
  TX_CHECK(alignment_layer >= 0 && alignment_layer <= decoder_layers, where,
           ": alignment_layer = ", alignment_layer, " must name one of the ", decoder_layers,
           " decoder layers (1-based; 0 for the last)");
  TX_CHECK(alignment_head >= -1 && alignment_head < heads, where,
           ": alignment_head = ", alignment_head, " must name one of the ", heads,
           " heads (0-based; -1 for their average)");
  // With unknown sizes (0) the check waits until they are set.
  TX_CHECK(tied_embeddings != TiedEmbeddings::all || src_vocab_size == 0 || tgt_vocab_size == 0 ||
               src_vocab_size == tgt_vocab_size,
           where,
           ": tied_embeddings = all needs one shared vocabulary, but "
           "src_vocab_size = ",
           src_vocab_size, " and tgt_vocab_size = ", tgt_vocab_size,
           "; use a joint vocabulary or tied_embeddings = decoder");
}

json ModelConfig::to_json() const {
  // nlohmann's json object sorts keys, so the text is the same for the same config.
  return json{{"src_vocab_size", src_vocab_size},
              {"tgt_vocab_size", tgt_vocab_size},
              {"d_model", d_model},
              {"d_ff", d_ff},
              {"heads", heads},
              {"encoder_layers", encoder_layers},
              {"decoder_layers", decoder_layers},
              {"dropout", shortest_double(dropout)},
              {"attention_dropout", shortest_double(attention_dropout)},
              {"relu_dropout", shortest_double(relu_dropout)},
              {"dropout_src", shortest_double(dropout_src)},
              {"dropout_trg", shortest_double(dropout_trg)},
              {"label_smoothing", shortest_double(label_smoothing)},
              {"tied_embeddings", name_of(tied_embeddings)},
              {"pre_norm", pre_norm},
              {"max_length", max_length},
              {"norm_eps", shortest_double(norm_eps)},
              {"embed_scale", embed_scale},
              {"positions", name_of(positions)},
              {"position_offset", position_offset},
              {"embed_norm", embed_norm},
              {"final_norm", final_norm},
              {"activation", name_of(activation)},
              {"output_bias", output_bias},
              {"pad_id", pad_id},
              {"unk_id", unk_id},
              {"bos_id", bos_id},
              {"eos_id", eos_id},
              {"decoder_start_id", decoder_start_id},
              {"marian_prenorm_cache", marian_prenorm_cache},
              {"alignment_layer", alignment_layer},
              {"alignment_head", alignment_head}};
}

std::string ModelConfig::to_json_string() const {
  return to_json().dump();
}

void ModelConfig::update(const json& j, const std::string& where) {
  TX_CHECK(j.is_object(), where, ": expected a JSON object, got ", j.dump());
  for (const auto& [key, v] : j.items()) {
    if (key == "src_vocab_size")
      read_int(v, key, where, &src_vocab_size);
    else if (key == "tgt_vocab_size")
      read_int(v, key, where, &tgt_vocab_size);
    else if (key == "d_model")
      read_int(v, key, where, &d_model);
    else if (key == "d_ff")
      read_int(v, key, where, &d_ff);
    else if (key == "heads")
      read_int(v, key, where, &heads);
    else if (key == "encoder_layers")
      read_int(v, key, where, &encoder_layers);
    else if (key == "decoder_layers")
      read_int(v, key, where, &decoder_layers);
    else if (key == "dropout")
      read_float(v, key, where, &dropout);
    else if (key == "attention_dropout")
      read_float(v, key, where, &attention_dropout);
    else if (key == "relu_dropout")
      read_float(v, key, where, &relu_dropout);
    else if (key == "dropout_src")
      read_float(v, key, where, &dropout_src);
    else if (key == "dropout_trg")
      read_float(v, key, where, &dropout_trg);
    else if (key == "label_smoothing")
      read_float(v, key, where, &label_smoothing);
    else if (key == "tied_embeddings")
      read_tied(v, key, where, &tied_embeddings);
    else if (key == "pre_norm")
      read_bool(v, key, where, &pre_norm);
    else if (key == "max_length")
      read_int(v, key, where, &max_length);
    else if (key == "norm_eps")
      read_float(v, key, where, &norm_eps);
    else if (key == "embed_scale")
      read_bool(v, key, where, &embed_scale);
    else if (key == "positions")
      read_enum(v, key, where, {Positions::interleaved, Positions::halves, Positions::halves_hf},
                &positions);
    else if (key == "position_offset")
      read_int(v, key, where, &position_offset);
    else if (key == "embed_norm")
      read_bool(v, key, where, &embed_norm);
    else if (key == "final_norm")
      read_bool(v, key, where, &final_norm);
    else if (key == "activation")
      read_enum(v, key, where, {Activation::relu, Activation::swish}, &activation);
    else if (key == "output_bias")
      read_bool(v, key, where, &output_bias);
    else if (key == "pad_id")
      read_int(v, key, where, &pad_id);
    else if (key == "unk_id")
      read_int(v, key, where, &unk_id);
    else if (key == "bos_id")
      read_int(v, key, where, &bos_id);
    else if (key == "eos_id")
      read_int(v, key, where, &eos_id);
    else if (key == "decoder_start_id")
      read_int(v, key, where, &decoder_start_id);
    else if (key == "marian_prenorm_cache")
      read_bool(v, key, where, &marian_prenorm_cache);
    else if (key == "alignment_layer")
      read_int(v, key, where, &alignment_layer);
    else if (key == "alignment_head")
      read_int(v, key, where, &alignment_head);
    else
      throw Error(str(where, ": unknown key '", key,
                      "'; check the spelling (keys: src_vocab_size, tgt_vocab_size, d_model, "
                      "d_ff, heads, encoder_layers, decoder_layers, dropout, attention_dropout, "
                      "relu_dropout, dropout_src, dropout_trg, label_smoothing, tied_embeddings, "
                      "pre_norm, max_length, "
                      "norm_eps, embed_scale, positions, position_offset, embed_norm, "
                      "final_norm, activation, output_bias, pad_id, unk_id, bos_id, eos_id, "
                      "decoder_start_id, marian_prenorm_cache, alignment_layer, alignment_head)"));
  }
}

ModelConfig ModelConfig::from_json(const json& j, const std::string& where) {
  ModelConfig c;
  c.update(j, where);
  c.validate(true, where);
  return c;
}

ModelConfig ModelConfig::from_json_string(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range (number overflow)
    throw Error(str(where, ": not valid JSON (", e.what(), "); fix or regenerate the config"));
  }
  return from_json(j, where);
}

bool ModelConfig::operator==(const ModelConfig& o) const {
  return src_vocab_size == o.src_vocab_size && tgt_vocab_size == o.tgt_vocab_size &&
         d_model == o.d_model && d_ff == o.d_ff && heads == o.heads &&
         encoder_layers == o.encoder_layers && decoder_layers == o.decoder_layers &&
         dropout == o.dropout && attention_dropout == o.attention_dropout &&
         relu_dropout == o.relu_dropout && dropout_src == o.dropout_src &&
         dropout_trg == o.dropout_trg && label_smoothing == o.label_smoothing &&
         tied_embeddings == o.tied_embeddings && pre_norm == o.pre_norm &&
         max_length == o.max_length && norm_eps == o.norm_eps && embed_scale == o.embed_scale &&
         positions == o.positions && position_offset == o.position_offset &&
         embed_norm == o.embed_norm && final_norm == o.final_norm && activation == o.activation &&
         output_bias == o.output_bias && pad_id == o.pad_id && unk_id == o.unk_id &&
         bos_id == o.bos_id && eos_id == o.eos_id && decoder_start_id == o.decoder_start_id &&
         marian_prenorm_cache == o.marian_prenorm_cache && alignment_layer == o.alignment_layer &&
         alignment_head == o.alignment_head;
}

}  // namespace tx::io
