// A fairseq Transformer as scripts/to_safetensors.py writes it from a checkpoint (a Python
// pickle tx never reads): fairseq.json holds the checkpoint's model options (cfg.model) and
// names the dictionaries (dict.LANG.txt) and the optional SentencePiece model copied beside it;
// model.safetensors holds the state dict under fairseq's own names.
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "data/vocab.h"
#include "formats/json_field.h"
#include "formats/model_file.h"
#include "formats/torch_names.h"
#include "io/safetensors.h"

namespace tx::formats {
namespace {

using nlohmann::json;

io::ModelConfig config_from_options(const json& o, const std::string& where) {
  auto unsupported = [&](bool refused, const std::string& what) {
    TX_CHECK(!refused, where, ": the model uses ", what,
             ", which tx does not implement; tx reads fairseq's sinusoidal Transformer "
             "(--arch transformer and its sizes)");
  };
  io::ModelConfig c;
  c.d_model = field<int64_t>(o, "encoder_embed_dim", 512, where);
  c.d_ff = field<int64_t>(o, "encoder_ffn_embed_dim", 2048, where);
  c.heads = field<int>(o, "encoder_attention_heads", 8, where);
  c.encoder_layers = field<int>(o, "encoder_layers", 6, where);
  c.decoder_layers = field<int>(o, "decoder_layers", 6, where);
  unsupported(field<int64_t>(o, "decoder_embed_dim", c.d_model, where) != c.d_model ||
                  field<int64_t>(o, "decoder_output_dim", c.d_model, where) != c.d_model ||
                  field<int64_t>(o, "decoder_input_dim", c.d_model, where) != c.d_model,
              "a decoder width other than the encoder's");
  // (fairseq's base_architecture: decoder heads 8 whatever the encoder's.)
  const int decoder_heads = field<int>(o, "decoder_attention_heads", 8, where);
  const int64_t decoder_ffn = field<int64_t>(o, "decoder_ffn_embed_dim", c.d_ff, where);
  unsupported(decoder_ffn != c.d_ff || decoder_heads != c.heads,
              str("decoder heads or feed-forward size other than the encoder's (", decoder_heads,
                  " and ", decoder_ffn, " against ", c.heads, " and ", c.d_ff,
                  "; a missing decoder_attention_heads is base_architecture's 8)"));
  c.pre_norm = field<bool>(o, "encoder_normalize_before", false, where);
  unsupported(field<bool>(o, "decoder_normalize_before", false, where) != c.pre_norm,
              "pre-norm on one side only");
  // fairseq puts a LayerNorm after each pre-norm stack (the decoder's unless
  // --no-decoder-final-norm).
  c.final_norm = c.pre_norm;
  unsupported(c.pre_norm && field<bool>(o, "no_decoder_final_norm", false, where),
              "--no-decoder-final-norm");
  unsupported(field<bool>(o, "encoder_learned_pos", false, where) ||
                  field<bool>(o, "decoder_learned_pos", false, where),
              "learned positional embeddings");
  unsupported(field<bool>(o, "no_token_positional_embeddings", false, where),
              "--no-token-positional-embeddings");
  unsupported(!field<std::string>(o, "adaptive_softmax_cutoff", "", where).empty(),
              "an adaptive softmax");
  unsupported(field<bool>(o, "cross_self_attention", false, where), "--cross-self-attention");
  unsupported(field<bool>(o, "no_cross_attention", false, where), "--no-cross-attention");
  unsupported(field<double>(o, "quant_noise_pq", 0.0, where) != 0.0, "quant-noise");
  // fairseq prunes the listed layers' weights at load (LayerDrop) and renumbers the rest.
  unsupported(!field<std::string>(o, "encoder_layers_to_keep", "", where).empty() ||
                  !field<std::string>(o, "decoder_layers_to_keep", "", where).empty(),
              "--encoder-layers-to-keep or --decoder-layers-to-keep (LayerDrop pruning)");
  const std::string act = field<std::string>(o, "activation_fn", "relu", where);
  if (act == "relu")
    c.activation = io::Activation::relu;
  else if (act == "swish")
    c.activation = io::Activation::swish;
  else
    throw Error(
        str(where, ": --activation-fn ", act, " is not implemented by tx (relu and swish are)"));
  c.embed_scale = !field<bool>(o, "no_scale_embedding", false, where);
  c.embed_norm = field<bool>(o, "layernorm_embedding", false, where);
  c.positions = io::Positions::halves;
  c.norm_eps = 1e-5f;  // torch.nn.LayerNorm's default
  c.output_bias = false;
  c.dropout = field<float>(o, "dropout", 0.1f, where);
  c.attention_dropout = field<float>(o, "attention_dropout", 0.0f, where);
  c.relu_dropout = field<float>(o, "activation_dropout", 0.0f, where);
  c.label_smoothing = 0.1f;
  // fairseq's Dictionary: <s> 0, <pad> 1, </s> 2, <unk> 3; the decoder starts from </s>, and
  // positions count from the padding id + 1.
  c.bos_id = 0;
  c.pad_id = 1;
  c.eos_id = 2;
  c.unk_id = 3;
  c.decoder_start_id = c.eos_id;
  c.position_offset = c.pad_id + 1;
  // fairseq-generate caps the output at max_target_positions - 1 and skips longer sources.
  c.max_length = std::min(field<int64_t>(o, "max_source_positions", 1024, where),
                          field<int64_t>(o, "max_target_positions", 1024, where));
  const bool share_all = field<bool>(o, "share_all_embeddings", false, where);
  const bool share_output = field<bool>(o, "share_decoder_input_output_embed", false, where);
  c.tied_embeddings = share_all      ? io::TiedEmbeddings::all
                      : share_output ? io::TiedEmbeddings::decoder
                                     : io::TiedEmbeddings::none;
  return c;
}

// A fairseq dictionary's symbols in id order: what fairseq's Dictionary equality compares.
std::vector<std::string> dictionary_symbols(const std::string& path) {
  const data::Vocab v = data::Vocab::fairseq(path);
  std::vector<std::string> symbols;
  for (int32_t id = 0; id < v.size(); ++id) symbols.push_back(v.piece(id));
  return symbols;
}

}  // namespace

ModelFile read_fairseq(const std::string& dir) {
  const std::string where = str("fairseq model directory '", dir, "'");
  const std::string options_path = dir + "/fairseq.json";
  const std::string weights = dir + "/model.safetensors";
  TX_CHECK(exists(weights), where,
           " has no model.safetensors; make the directory from a checkpoint with "
           "`python3 scripts/to_safetensors.py checkpoint.pt DATA_BIN OUT_DIR`");
  const json j = read_json_object(options_path);
  TX_CHECK(j.contains("model") && j.at("model").is_object(), options_path,
           ": has no \"model\" object (the checkpoint's model options); remake the directory "
           "with scripts/to_safetensors.py");

  ModelFile out;
  out.path = dir;
  out.format = Format::fairseq;
  io::ModelConfig& c = out.config;
  c = config_from_options(j.at("model"), options_path);

  // The dictionaries fix the vocabulary sizes; the embeddings must agree (Mapper::take).
  out.vocabs.kind = VocabKind::fairseq;
  for (const char* key : {"source_dict", "target_dict"}) {
    const std::string name = field<std::string>(j, key, "", options_path);
    TX_CHECK(!name.empty(), options_path, ": names no ", key,
             "; remake the directory with scripts/to_safetensors.py and the model's data-bin");
    TX_CHECK(exists(dir + "/" + name), where, " has no ", name, " (the ", key,
             " fairseq.json names); copy the model's dict.LANG.txt files beside it");
    out.vocabs.paths.push_back(dir + "/" + name);
  }
  const std::string spm = field<std::string>(j, "sentencepiece", "", options_path);
  if (!spm.empty()) {
    TX_CHECK(exists(dir + "/" + spm), where, " has no ", spm,
             " (the SentencePiece model fairseq.json names)");
    out.vocabs.tables = {dir + "/" + spm, dir + "/" + spm};
  }

  Mapper m(io::read_safetensors(weights), str("'", weights, "'"),
           "a fairseq Transformer's state dict");
  const io::NamedTensor* src = m.find("encoder.embed_tokens.weight");
  const io::NamedTensor* tgt = m.find("decoder.embed_tokens.weight");
  // With every embedding shared the converter keeps one copy, the encoder's.
  if (!tgt && c.tied_embeddings == io::TiedEmbeddings::all) tgt = src;
  TX_CHECK(src && tgt && src->shape.ndim() == 2 && tgt->shape.ndim() == 2, where,
           ": model.safetensors lacks the embeddings encoder.embed_tokens.weight and "
           "decoder.embed_tokens.weight; it is not a fairseq Transformer's state dict");
  c.src_vocab_size = src->shape[0];
  c.tgt_vocab_size = tgt->shape[0];
  const int64_t d = c.d_model;
  for (const char* n :
       {"encoder.embed_positions._float_tensor", "decoder.embed_positions._float_tensor",
        "encoder.version", "decoder.version"})
    m.ignore(n);  // the sinusoid tables tx computes, and fairseq's bookkeeping
  // fairseq 0.12's packed copies for torch's fused encoder layer: stale in a saved state dict
  // (its loader rebuilds them from the named weights, as tx reads those).
  for (int i = 0; i < c.encoder_layers; ++i)
    for (const char* n : {"in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias",
                          "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"})
      m.ignore("encoder.layers." + std::to_string(i) + "." + n);
  if (c.tied_embeddings == io::TiedEmbeddings::all) {
    // fairseq's build_model: "--share-all-embeddings requires a joined dictionary".
    TX_CHECK(dictionary_symbols(out.vocabs.paths[0]) == dictionary_symbols(out.vocabs.paths[1]),
             where, ": share_all_embeddings joins the two dictionaries, but ", out.vocabs.paths[0],
             " and ", out.vocabs.paths[1],
             " differ (fairseq refuses such a model); give the directory its joined dictionary");
    m.take("encoder.embed_tokens.weight", "embed_tokens.weight", {c.src_vocab_size, d});
    m.ignore_copy("decoder.embed_tokens.weight", "encoder.embed_tokens.weight",
                  "share_all_embeddings");
    m.ignore_copy("decoder.output_projection.weight", "encoder.embed_tokens.weight",
                  "share_all_embeddings");
  } else {
    m.take("encoder.embed_tokens.weight", "encoder.embed_tokens.weight", {c.src_vocab_size, d});
    m.take("decoder.embed_tokens.weight", "decoder.embed_tokens.weight", {c.tgt_vocab_size, d});
    if (c.tied_embeddings == io::TiedEmbeddings::none)
      m.take("decoder.output_projection.weight", "decoder.output_proj.weight",
             {c.tgt_vocab_size, d});
    else
      m.ignore_copy("decoder.output_projection.weight", "decoder.embed_tokens.weight",
                    "share_decoder_input_output_embed");
  }
  for (const std::string side : {"encoder", "decoder"}) {
    auto norm = [&](const std::string& from, const std::string& to) {
      m.take(side + "." + from + ".weight", side + "." + to + ".weight", {d});
      m.take(side + "." + from + ".bias", side + "." + to + ".bias", {d});
    };
    if (c.embed_norm) norm("layernorm_embedding", "embed_norm");
    if (c.final_norm) norm("layer_norm", "final_norm");
  }
  take_layers(m, c, "");
  m.check_all_used();
  out.params = m.result();
  c.validate(true, where);
  return out;
}

}  // namespace tx::formats
