// A Hugging Face MarianMTModel directory (OPUS-MT's published form): config.json for the
// architecture, model.safetensors (f32, f16 or bf16) under transformers' names, source.spm and
// target.spm segmenting text and vocab.json numbering the pieces. Torch Linear weights are
// [out, in], tx's layout, so only names change.
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "backend/device_math.h"
#include "core/error.h"
#include "formats/json_field.h"
#include "formats/model_file.h"
#include "formats/torch_names.h"
#include "io/safetensors.h"

namespace tx::formats {
namespace {

using nlohmann::json;

io::ModelConfig config_from_json(const json& j, const std::string& where) {
  const std::string type = field<std::string>(j, "model_type", "", where);
  TX_CHECK(type == "marian", where, " describes a '", type,
           "' model; tx reads Hugging Face MarianMTModel directories (model_type \"marian\")");
  // A key config.json lacks takes MarianConfig's default, as transformers loads it (the heads
  // above all: no tensor's shape shows them).
  io::ModelConfig c;
  c.d_model = field<int64_t>(j, "d_model", 1024, where);
  c.encoder_layers = field<int>(j, "encoder_layers", 12, where);
  c.decoder_layers = field<int>(j, "decoder_layers", 12, where);
  c.heads = field<int>(j, "encoder_attention_heads", 16, where);
  c.d_ff = field<int64_t>(j, "encoder_ffn_dim", 4096, where);
  const int decoder_heads = field<int>(j, "decoder_attention_heads", 16, where);
  const int64_t decoder_ffn = field<int64_t>(j, "decoder_ffn_dim", 4096, where);
  TX_CHECK(decoder_heads == c.heads && decoder_ffn == c.d_ff, where, ": the decoder's ",
           decoder_heads, " heads and feed-forward size ", decoder_ffn,
           " differ from the encoder's ", c.heads, " and ", c.d_ff,
           " (a key config.json lacks is MarianConfig's default: 16 heads, 4096), which tx does "
           "not implement");
  c.dropout = field<float>(j, "dropout", 0.1f, where);
  c.attention_dropout = field<float>(j, "attention_dropout", 0.0f, where);
  c.relu_dropout = field<float>(j, "activation_dropout", 0.0f, where);
  c.label_smoothing = 0.1f;
  c.max_length = field<int64_t>(j, "max_position_embeddings", 1024, where);
  c.embed_scale = field<bool>(j, "scale_embedding", false, where);
  // transformers' MarianMTModel is post-norm whatever its config says (modeling_marian.py has
  // no final layer norms to map): a normalize_before of true describes another model.
  TX_CHECK(!field<bool>(j, "normalize_before", false, where), where,
           ": normalize_before is true, but transformers' MarianMTModel is post-norm (it has no "
           "final layer norms); tx reads MarianMTModel directories as transformers runs them");
  c.pre_norm = false;
  c.final_norm = false;
  c.positions = io::Positions::halves_hf;
  c.norm_eps = 1e-5f;    // torch.nn.LayerNorm's default
  c.output_bias = true;  // final_logits_bias
  const std::string act = field<std::string>(j, "activation_function", "gelu", where);
  if (act == "swish" || act == "silu")
    c.activation = io::Activation::swish;
  else if (act == "relu")
    c.activation = io::Activation::relu;
  else
    throw Error(str(where, ": activation_function \"", act,
                    "\" is not implemented by tx (relu, swish/silu are)"));
  c.src_vocab_size = field<int64_t>(j, "vocab_size", 58101, where);
  c.tgt_vocab_size = field<int64_t>(j, "decoder_vocab_size", c.src_vocab_size, where);
  c.pad_id = field<int32_t>(j, "pad_token_id", 58100, where);
  c.eos_id = field<int32_t>(j, "eos_token_id", 0, where);
  c.decoder_start_id = field<int32_t>(j, "decoder_start_token_id", 58100, where);
  c.bos_id = -1;  // OPUS-MT models have none (their bos_token_id repeats eos's)
  c.unk_id = -1;  // from the vocabulary (read_huggingface)
  // Alignments as marian-decoder gives them on the Marian model the directory was converted
  // from: head 0 of the last decoder layer (OPUS-MT's transformer-align models trained it;
  // config.json does not record Marian's layer, whose default is the last).
  c.alignment_head = 0;
  const bool shared = field<bool>(j, "share_encoder_decoder_embeddings", true, where);
  const bool tied = field<bool>(j, "tie_word_embeddings", true, where);
  c.tied_embeddings = shared && tied ? io::TiedEmbeddings::all
                      : tied         ? io::TiedEmbeddings::decoder
                                     : io::TiedEmbeddings::none;
  TX_CHECK(!(shared && !tied), where,
           ": shared source and target embeddings with an untied "
           "output layer are not implemented by tx");
  return c;
}

// A stored MarianSinusoidalPositionalEmbedding table: [max_position_embeddings, d_model] of
// tx's halves_hf sinusoids (within a half-precision file's rounding). `sinusoids` holds them,
// computed by the first call (the encoder's and the decoder's tables are the same).
void check_positions(const io::NamedTensor& t, const io::ModelConfig& c, const std::string& where,
                     std::vector<float>& sinusoids) {
  const Shape table{c.max_length, c.d_model};
  TX_CHECK(t.shape == table, where, ": tensor '", t.name, "' is ", t.shape.str(), ", [",
           c.max_length, ", ", c.d_model,
           "] expected (max_position_embeddings, d_model); the file is damaged or edited");
  if (sinusoids.empty())
    for (int64_t pos = 0; pos < c.max_length; ++pos)
      for (int64_t i = 0; i < c.d_model; ++i)
        sinusoids.push_back(math::sinusoid(pos, i, c.d_model, math::PositionLayout::halves_hf));
  const std::vector<float> v = t.to_floats();
  for (int64_t pos = 0; pos < c.max_length; ++pos)
    for (int64_t i = 0; i < c.d_model; ++i) {
      const float want = sinusoids[pos * c.d_model + i];
      TX_CHECK(std::fabs(v[pos * c.d_model + i] - want) <= 1e-2f, where, ": tensor '", t.name,
               "' holds ", v[pos * c.d_model + i], " at position ", pos, ", column ", i,
               ", where MarianMTModel's sinusoids give ", want,
               "; tx computes those, so it would translate otherwise than transformers");
    }
}

// generate() takes the special ids from generation_config.json over config.json's, a forward
// pass (tx-score's teacher forcing) from config.json: where the two disagree there is no one
// model to compute.
void check_generation_config(const std::string& path, const io::ModelConfig& c,
                             const json& config) {
  if (!exists(path)) return;
  const json g = read_json_object(path);
  // (pad only pads finished rows in generate(): not compared.)
  for (const auto& [key, id] :
       {std::pair<const char*, int32_t>{"decoder_start_token_id", c.decoder_start_id},
        {"eos_token_id", c.eos_id}}) {
    if (!g.contains(key) || g.at(key).is_null()) continue;
    json v = g.at(key);
    if (v.is_array() && v.size() == 1) v = v.at(0);  // newer files list the eos ids
    TX_CHECK(v.is_number_integer() && v.get<int64_t>() == id, path, ": ", key, " is ",
             g.at(key).dump(), " where config.json ",
             config.contains(key) ? "gives " : "lacks it (MarianConfig's default: ", id,
             config.contains(key) ? "" : ")",
             "; generate() would take this file's, a forward pass config.json's: make them agree");
  }
}

}  // namespace

ModelFile read_huggingface(const std::string& dir) {
  const std::string where = str("model directory '", dir, "'");
  const std::string config_path = dir + "/config.json";
  TX_CHECK(exists(config_path), "'", dir,
           "' is a directory without config.json: give a model file, or a Hugging Face "
           "MarianMTModel directory as save_pretrained writes it");
  const std::string weights = dir + "/model.safetensors";
  if (!exists(weights)) {
    TX_CHECK(!exists(dir + "/pytorch_model.bin"), where,
             " holds its weights only as pytorch_model.bin (a Python pickle tx does not read); "
             "convert it once with `python3 scripts/to_safetensors.py ",
             dir, "`");
    throw Error(str(where, " has no model.safetensors; give a directory with the model's weights"));
  }
  const json j = read_json_object(config_path);

  ModelFile out;
  out.path = dir;
  out.format = Format::huggingface;
  io::ModelConfig& c = out.config;
  c = config_from_json(j, config_path);
  check_generation_config(dir + "/generation_config.json", c, j);
  const int64_t d = c.d_model;

  Mapper m(io::read_safetensors(weights), str("'", weights, "'"), "a MarianMTModel");
  auto first_of = [&](const std::vector<const char*>& names) -> std::string {
    for (const char* n : names)
      if (m.find(n)) return n;
    return names.front();  // take() then names it as missing
  };
  // Where the file may hold embeddings, the shared one first.
  const std::vector<const char*> embeddings = {
      "model.shared.weight", "model.encoder.embed_tokens.weight",
      "model.decoder.embed_tokens.weight", "lm_head.weight"};
  for (const char* n : embeddings)
    m.ignore(n);  // copies of what is taken below, or (untied) what the model does not use
  // The sinusoid tables tx computes: transformers would use a stored one, so it must be theirs.
  std::vector<float> sinusoids;
  for (const char* n :
       {"model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"}) {
    m.ignore(n);
    if (const io::NamedTensor* t = m.find(n))
      check_positions(*t, c, str("'", weights, "'"), sinusoids);
  }
  // Tied copies must be equal: which one a loaded model holds depends on transformers' version
  // and loading path (save_pretrained writes one copy).
  const char* tying = "tie_word_embeddings (with share_encoder_decoder_embeddings)";
  if (c.tied_embeddings == io::TiedEmbeddings::all) {
    const std::string first = first_of(embeddings);
    for (const char* n : embeddings)
      if (n != first) m.ignore_copy(n, first, tying);
    m.take(first, "embed_tokens.weight", {c.src_vocab_size, d});
  } else {
    if (c.tied_embeddings == io::TiedEmbeddings::decoder &&
        m.find("model.decoder.embed_tokens.weight"))
      m.ignore_copy("lm_head.weight", "model.decoder.embed_tokens.weight", "tie_word_embeddings");
    m.take(first_of({"model.encoder.embed_tokens.weight", "model.shared.weight"}),
           "encoder.embed_tokens.weight", {c.src_vocab_size, d});
    m.take(first_of({"model.decoder.embed_tokens.weight", "lm_head.weight"}),
           "decoder.embed_tokens.weight", {c.tgt_vocab_size, d});
    if (c.tied_embeddings == io::TiedEmbeddings::none)
      m.take("lm_head.weight", "decoder.output_proj.weight", {c.tgt_vocab_size, d});
  }
  m.take("final_logits_bias", "decoder.output_proj.bias", {c.tgt_vocab_size});
  take_layers(m, c, "model.");
  m.check_all_used();
  out.params = m.result();

  // The tokenizer's files: source.spm and target.spm segment, vocab.json numbers (or, with
  // separate vocabularies, source's vocab.json and target_vocab.json).
  out.vocabs.kind = VocabKind::pieces;
  for (const char* spm : {"source.spm", "target.spm"}) {
    const std::string p = dir + "/" + spm;
    TX_CHECK(exists(p), where, " has no ", spm,
             "; tx reads OPUS-MT models with SentencePiece vocabularies (BPE-only models without "
             ".spm files are not supported)");
    out.vocabs.paths.push_back(p);
  }
  out.vocabs.tables = {dir + "/vocab.json", exists(dir + "/target_vocab.json")
                                                ? dir + "/target_vocab.json"
                                                : dir + "/vocab.json"};
  TX_CHECK(exists(out.vocabs.tables[0]), where, " has no vocab.json (the token table)");
  // unk is the table's "<unk>" (config.json does not name it).
  try {
    std::ifstream in(out.vocabs.tables[1], std::ios::binary);
    const json table = json::parse(in);
    if (table.contains("<unk>") && table.at("<unk>").is_number_integer())
      c.unk_id = table.at("<unk>").get<int32_t>();
  } catch (const json::exception&) {
    // The vocabulary's own reader names the problem when the programs load it.
  }
  c.validate(true, where);
  return out;
}

}  // namespace tx::formats
