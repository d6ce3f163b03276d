// Marian's model.npz: the options in its "special:model.yml" array, the parameters under
// Marian's names (transformer.h: encoder_l1_self_Wq, ..., decoder_ff_logit_out_W), weights
// stored [in, out] (x W) where tx keeps [out, in] (x W^T).
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>
#include <type_traits>

#include "core/error.h"
#include "core/finite.h"
#include "formats/model_file.h"
#include "formats/npz.h"

namespace tx::formats {
namespace {

constexpr const char* kUnsupported =
    "; tx reads Marian Transformers (--type transformer) "
    "with standard layers (docs/models.md)";

// Option `key` (or a list's entry `key`, of option `name`) as marian writes it, else `fallback`.
template <typename T, typename Key>
T option(const YAML::Node& yml, Key key, T fallback, const std::string& where,
         const char* name = nullptr) {
  const YAML::Node v = yml[key];
  if (!v || v.IsNull()) return fallback;
  try {
    return v.as<T>();
  } catch (const YAML::Exception&) {
    const char* kind = std::is_same_v<T, bool>          ? "true or false"
                       : std::is_same_v<T, std::string> ? "text"
                       : std::is_integral_v<T>          ? "a whole number"
                                                        : "a number";
    const std::string what = name ? str("'", name, "' entry ", key) : str("'", key, "'");
    throw Error(str(where, ": option ", what, " is '", YAML::Dump(v), "', not ", kind,
                    " as marian writes it; the model.yml inside the model is damaged"));
  }
}

// marian reads a model.yml entry by entry (Config::override), so of a key given twice the
// last counts, where a lookup finds the first: a file that repeats one is refused.
void check_unique_keys(const YAML::Node& yml, const std::string& where) {
  std::set<std::string> seen;
  for (const auto& entry : yml) {
    const std::string key = entry.first.Scalar();
    TX_CHECK(seen.insert(key).second, where, ": its special:model.yml gives option '", key,
             "' twice; marian would take the last, tx takes neither: keep one");
  }
}

// Marian's pre/postprocess strings without 'd' (dropout only matters in training).
std::string without_dropout(std::string ops) {
  std::string out;
  for (char c : ops)
    if (c != 'd') out += c;
  return out;
}

io::ModelConfig config_from_yaml(const YAML::Node& yml, const std::string& where) {
  io::ModelConfig c;
  const std::string type = option<std::string>(yml, "type", "", where);
  TX_CHECK(type == "transformer", where, " is a Marian '", type, "' model, not a Transformer",
           kUnsupported);
  c.d_model = option<int64_t>(yml, "dim-emb", 512, where);
  c.d_ff = option<int64_t>(yml, "transformer-dim-ffn", 2048, where);
  c.heads = option<int>(yml, "transformer-heads", 8, where);
  // (marian's defaults: one layer a side.)
  c.encoder_layers = option<int>(yml, "enc-depth", 1, where);
  c.decoder_layers = option<int>(yml, "dec-depth", 1, where);
  c.dropout = option<float>(yml, "transformer-dropout", 0.0f, where);
  c.attention_dropout = option<float>(yml, "transformer-dropout-attention", 0.0f, where);
  c.relu_dropout = option<float>(yml, "transformer-dropout-ffn", 0.0f, where);
  c.label_smoothing = option<float>(yml, "label-smoothing", 0.0f, where);
  c.norm_eps = 1e-6f;  // Marian's layerNorm (layers/generic.h)
  c.positions = io::Positions::halves;
  c.output_bias = !option<bool>(yml, "output-omit-bias", false, where);
  // Marian's ids: </s> 0 and <unk> 1 in the vocabularies it makes (a vocabulary with others
  // brings its own: adopt_marian_ids), no bos or pad, and decoding starts from a zero embedding
  // (the shifted target history).
  c.eos_id = 0;
  c.unk_id = 1;
  c.pad_id = -1;
  c.bos_id = -1;
  c.decoder_start_id = -1;

  const std::string autoreg =
      option<std::string>(yml, "transformer-decoder-autoreg", "self-attention", where);
  TX_CHECK(autoreg == "self-attention", where, ": its decoder is '", autoreg,
           "' (--transformer-decoder-autoreg), which tx does not implement (it decodes with "
           "self-attention only); translate this model with marian-decoder");
  // (A decoder depth of 0 is the encoder's.)
  const int decoder_ffn_depth = option<int>(yml, "transformer-decoder-ffn-depth", 0, where);
  TX_CHECK(option<int>(yml, "transformer-ffn-depth", 2, where) == 2 &&
               (decoder_ffn_depth == 0 || decoder_ffn_depth == 2),
           where, " has a feed-forward depth other than 2", kUnsupported);
  const int64_t dec_ffn = option<int64_t>(yml, "transformer-decoder-dim-ffn", 0, where);
  TX_CHECK(dec_ffn == 0 || dec_ffn == c.d_ff, where,
           " has a decoder feed-forward size other than the encoder's", kUnsupported);
  // marian's `transformer` type reads its learned-positions switch under this name, not the
  // --transformer-train-position-embeddings it writes (models/transformer.h since 2019), so a
  // model.yml with that flag true still has sinusoids there; a Wpos array would be left over.
  TX_CHECK(!option<bool>(yml, "transformer-train-positions", false, where), where,
           " has learned positions (transformer-train-positions); tx has sinusoids only");
  TX_CHECK(!option<bool>(yml, "transformer-no-projection", false, where), where,
           " has attention without output projection", kUnsupported);
  TX_CHECK(!option<bool>(yml, "transformer-disable-position-embeddings", false, where), where,
           " has no position embeddings (--transformer-disable-position-embeddings)", kUnsupported);
  for (const char* flag : {"transformer-no-bias", "transformer-no-affine",
                           "transformer-alibi-shift", "transformer-pool", "right-left"})
    TX_CHECK(!option<bool>(yml, flag, false, where), where, " was trained with --", flag,
             kUnsupported);
  const std::string mask = option<std::string>(yml, "transformer-attention-mask", "default", where);
  TX_CHECK(mask == "default", where, " has --transformer-attention-mask ", mask, kUnsupported);
  TX_CHECK(option<int>(yml, "lemma-dim-emb", 0, where) == 0, where,
           " uses factored vocabularies (--lemma-dim-emb), which tx does not read; translate "
           "this model with marian-decoder");
  const YAML::Node tied_layers = yml["transformer-tied-layers"];
  TX_CHECK(
      !tied_layers || tied_layers.IsNull() || (tied_layers.IsSequence() && tied_layers.size() == 0),
      where, " ties decoder layers (--transformer-tied-layers ", YAML::Dump(tied_layers), ")",
      kUnsupported);

  const std::string act = option<std::string>(yml, "transformer-ffn-activation", "swish", where);
  if (act == "swish")
    c.activation = io::Activation::swish;
  else if (act == "relu")
    c.activation = io::Activation::relu;
  else
    throw Error(str(where, " uses the '", act,
                    "' activation; tx implements relu and swish (--transformer-ffn-activation)"));

  const std::string pre =
      without_dropout(option<std::string>(yml, "transformer-preprocess", "", where));
  const std::string post =
      without_dropout(option<std::string>(yml, "transformer-postprocess", "dan", where));
  const std::string emb =
      without_dropout(option<std::string>(yml, "transformer-postprocess-emb", "d", where));
  const std::string top =
      without_dropout(option<std::string>(yml, "transformer-postprocess-top", "", where));
  if (pre.empty() && post == "an") {
    c.pre_norm = false;
  } else if (pre == "n" && post == "a") {
    c.pre_norm = true;
  } else {
    throw Error(str(where, " has --transformer-preprocess '", pre,
                    "' and --transformer-"
                    "postprocess '",
                    post,
                    "' (without d); tx reads post-norm (\"\", \"dan\") and "
                    "pre-norm (\"n\", \"da\") layers"));
  }
  TX_CHECK(emb.empty() || emb == "n", where, " has --transformer-postprocess-emb '", emb,
           "'; tx reads \"d\" and \"n\"/\"dn\"");
  c.embed_norm = emb == "n";
  TX_CHECK(top.empty() || (top == "n" && c.pre_norm), where, " has --transformer-postprocess-top '",
           top, "'; tx reads a final norm (\"n\") after pre-norm layers only");
  c.final_norm = top == "n";
  c.marian_prenorm_cache = c.pre_norm;
  // marian-decoder's alignments: head 0 of this layer (1-based, "last" by default), whether or
  // not the model was trained with --guided-alignment.
  const std::string layer =
      option<std::string>(yml, "transformer-guided-alignment-layer", "last", where);
  c.alignment_head = 0;
  if (layer != "last") {
    int n = 0;
    const auto [end, ec] = std::from_chars(layer.data(), layer.data() + layer.size(), n);
    TX_CHECK(
        ec == std::errc() && end == layer.data() + layer.size() && n >= 1 && n <= c.decoder_layers,
        where, " has --transformer-guided-alignment-layer '", layer,
        "'; expected 'last' or a decoder layer from 1 to ", c.decoder_layers);
    c.alignment_layer = n;
  }
  return c;
}

// Moves Marian's arrays into tx's names, checking that each is used once.
class Mapper {
 public:
  Mapper(std::vector<NpyArray> arrays, std::string where) : where_(std::move(where)) {
    for (NpyArray& a : arrays) {
      std::string name = a.name;
      arrays_.emplace(std::move(name), std::move(a));
    }
  }
  bool has(const std::string& name) const { return arrays_.count(name) != 0; }
  const NpyArray& get(const std::string& name) const {
    auto it = arrays_.find(name);
    TX_CHECK(it != arrays_.end(), where_, " has no array '", name,
             "', which its options call for; the file is damaged or not a Marian Transformer");
    return it->second;
  }
  // A vector ([1, n] or [n] in the file) as tx's [n].
  void vector(const std::string& from, const std::string& to, int64_t n) {
    const NpyArray& a = get(from);
    TX_CHECK(a.numel() == n, where_, ": array '", from, "' has ", a.numel(), " values, ", n,
             " expected");
    add(from, to, {n});
  }
  // A matrix as stored ([rows, cols]), e.g. an embedding table.
  void matrix(const std::string& from, const std::string& to, int64_t rows, int64_t cols) {
    const NpyArray& a = get(from);
    check_shape(a, rows, cols);
    add(from, to, {rows, cols});
  }
  // A weight Marian stores [in, out] as tx's [out, in].
  void transposed(const std::string& from, const std::string& to, int64_t in, int64_t out) {
    const NpyArray& a = get(from);
    check_shape(a, in, out);
    // float32 arrays are read in place; float16 ones widened first.
    const std::vector<float> wide = a.descr == "<f4" ? std::vector<float>() : a.floats();
    const uint8_t* v = wide.empty() ? a.data.data() : reinterpret_cast<const uint8_t*>(wide.data());
    // Checked here, in the file's name and order: tx's transposed copy would name neither.
    check_finite(reinterpret_cast<const float*>(v), in * out, where_, from);
    io::NamedTensor t{to, DType::f32, Shape{out, in}, {}};
    t.data.resize(t.nbytes());
    uint8_t* w = t.data.data();
    // In tiles, so that both sides are read and written a cache line at a time.
    constexpr int64_t kTile = 32;
    for (int64_t i0 = 0; i0 < in; i0 += kTile)
      for (int64_t o0 = 0; o0 < out; o0 += kTile)
        for (int64_t i = i0; i < std::min(in, i0 + kTile); ++i)
          for (int64_t o = o0; o < std::min(out, o0 + kTile); ++o)
            std::memcpy(w + 4 * (o * in + i), v + 4 * (i * out + o), 4);
    place(from, std::move(t));
  }
  void norm(const std::string& prefix, const std::string& suffix, const std::string& to,
            int64_t d) {
    vector(prefix + "_ln_scale" + suffix, to + ".weight", d);
    vector(prefix + "_ln_bias" + suffix, to + ".bias", d);
  }
  void mark_used(const std::string& name) { used_.insert(name); }
  // Every array must have found a place: one left over is a variant tx would silently drop.
  void check_all_used() const {
    for (const auto& [name, a] : arrays_)
      TX_CHECK(used_.count(name), where_, " has an array '", name,
               "' that tx does not map; the model has a layer tx does not implement", kUnsupported);
  }
  io::TensorFile take() { return std::move(file_); }

 private:
  void check_shape(const NpyArray& a, int64_t rows, int64_t cols) const {
    TX_CHECK(a.shape.size() == 2 && a.shape[0] == rows && a.shape[1] == cols, where_, ": array '",
             a.name, "' has shape ", shape_text(a.shape), ", [", rows, ", ", cols,
             "] expected from the model's options");
  }
  static std::string shape_text(const std::vector<int64_t>& s) {
    std::string t = "[";
    for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
    return t + "]";
  }
  // The array as it is: a float32 array's bytes move over, a float16 one is widened.
  void add(const std::string& from, const std::string& to, Shape shape) {
    NpyArray& a = arrays_.at(from);
    if (a.descr == "<f4" && a.data.size() == static_cast<size_t>(shape.numel()) * 4) {
      check_finite(reinterpret_cast<const float*>(a.data.data()), shape.numel(), where_, from);
      place(from, io::NamedTensor{to, DType::f32, std::move(shape), std::move(a.data)});
    } else {
      const std::vector<float> values = a.floats();
      check_finite(values.data(), static_cast<int64_t>(values.size()), where_, from);
      place(from, io::NamedTensor::from_floats(to, DType::f32, std::move(shape), values));
    }
  }
  void place(const std::string& from, io::NamedTensor t) {
    used_.insert(from);
    file_.add(std::move(t));
    // Each array goes to one place: its bytes can go now, so that the file's arrays and tx's
    // tensors are not both held whole.
    std::vector<uint8_t>().swap(arrays_.at(from).data);
  }

  std::string where_;
  std::map<std::string, NpyArray> arrays_;
  std::set<std::string> used_;
  io::TensorFile file_;
};

void map_attention(Mapper& m, const std::string& from, const std::string& to, int64_t d) {
  for (const char* p : {"q", "k", "v", "o"}) {
    const std::string name = std::string(p) == "o" ? "out" : p;
    m.transposed(from + "_W" + p, to + "." + name + "_proj.weight", d, d);
    m.vector(from + "_b" + p, to + "." + name + "_proj.bias", d);
  }
}

std::string dirname_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// marian writes "<model>.decoder.yml" beside the model, naming its vocabularies; OPUS-MT's
// releases call it "decoder.yml". Sets `why_none` when one is there but names none for this
// model.
std::vector<std::string> vocabs_beside(const std::string& path, std::string& why_none) {
  std::string decoder_yml = path + ".decoder.yml";
  struct stat st;
  const bool own = ::stat(decoder_yml.c_str(), &st) == 0;
  if (!own) decoder_yml = dirname_of(path) + "/decoder.yml";
  if (::stat(decoder_yml.c_str(), &st) != 0) return {};
  std::vector<std::string> vocabs;
  try {
    const YAML::Node yml = YAML::LoadFile(decoder_yml);
    // The folder's decoder.yml is another model's when its models: list does not name this
    // file (by its name: marian writes the list relative or absolute): its vocabularies could
    // be of the same size and other pieces, and translate to garbage.
    if (!own && yml["models"]) {
      auto name_of = [](const std::string& p) { return p.substr(p.find_last_of('/') + 1); };
      // Listed by its name, or as the same file (model.npz a link to opus.model1.npz).
      auto lists = [&](const std::string& entry) {
        if (name_of(entry) == name_of(path)) return true;
        const std::string file =
            !entry.empty() && entry[0] == '/' ? entry : dirname_of(path) + "/" + entry;
        std::error_code ec;
        return std::filesystem::equivalent(file, path, ec);
      };
      const YAML::Node models = yml["models"];
      bool listed = models.IsScalar() && lists(models.as<std::string>());
      if (models.IsSequence())
        for (const auto& m : models) listed = listed || lists(m.as<std::string>());
      if (!listed) {
        why_none = str("the folder's '", decoder_yml,
                       "' is another model's (its models: list does not name '", path, "')");
        return {};
      }
    }
    for (const auto& v : yml["vocabs"]) {
      std::string p = v.as<std::string>();
      if (!p.empty() && p[0] != '/') {
        // Relative to the model's folder when it is there, else as written.
        const std::string beside = dirname_of(path) + "/" + p;
        if (::stat(beside.c_str(), &st) == 0) p = beside;
      }
      vocabs.push_back(p);
    }
  } catch (const YAML::Exception& e) {
    // Not fatal: -v makes it moot. The message that asks for -v names it.
    why_none = str("'", decoder_yml, "' is not valid YAML or its vocabs: are not a list of paths (",
                   e.what(), ")");
    return {};
  }
  if (vocabs.empty()) why_none = str("'", decoder_yml, "' has no vocabs: list");
  return vocabs;
}

}  // namespace

ModelFile read_marian(const std::string& path) {
  const std::string where = str("model '", path, "'");
  std::vector<NpyArray> arrays = read_npz(path);
  std::string yml_text;
  for (const NpyArray& a : arrays)
    if (a.name == "special:model.yml") yml_text = a.text();
  TX_CHECK(!yml_text.empty(), where,
           " has no 'special:model.yml' entry: it is not a model marian wrote (its options are "
           "missing); save it with marian or add the entry");
  YAML::Node yml;
  try {
    yml = YAML::Load(yml_text);
  } catch (const YAML::Exception& e) {
    throw Error(str(where, ": its special:model.yml is not valid YAML (", e.what(), ")"));
  }
  TX_CHECK(yml.IsMap(), where, ": its special:model.yml is not a map of options");
  check_unique_keys(yml, where);
  std::vector<std::string> names;
  for (const NpyArray& a : arrays) names.push_back(a.name);

  ModelFile out;
  out.path = path;
  out.format = Format::marian;
  io::ModelConfig& c = out.config;
  c = config_from_yaml(yml, where);
  const int64_t d = c.d_model;

  Mapper m(std::move(arrays), where);
  // marian skips every "special:" item when it loads the parameters.
  for (const std::string& name : names)
    if (name.rfind("special:", 0) == 0) m.mark_used(name);
  const bool shared = m.has("Wemb");
  // An untied output layer: "_Wt" [vocab, d] (tx's layout), or "_W" [d, vocab] in models from
  // before Marian stored it transposed (layers/output.cpp).
  const bool output = m.has("decoder_ff_logit_out_Wt") || m.has("decoder_ff_logit_out_W");
  // marian ties by its flags (embedding.cpp, transformer.h), whatever arrays the file has: one
  // the flags do not use is ignored, one they need and miss is drawn at random. tx reads the
  // arrays, so the two must agree.
  const bool all = option<bool>(yml, "tied-embeddings-all", false, where);
  const bool flag_shared = all || option<bool>(yml, "tied-embeddings-src", false, where);
  const bool flag_output = !all && !option<bool>(yml, "tied-embeddings", false, where);
  TX_CHECK(shared == flag_shared, where, ": its options ", flag_shared ? "share" : "do not share",
           " the source and target embeddings (--tied-embeddings-all, --tied-embeddings-src) but "
           "it has ",
           shared ? "the shared 'Wemb'" : "no shared 'Wemb'",
           "; marian would translate it otherwise: the file is damaged or edited");
  TX_CHECK(output == flag_output, where, ": its options ",
           flag_output ? "give the output layer its own weights" : "tie the output layer",
           " (--tied-embeddings, --tied-embeddings-all) but it has ",
           output ? "an output array 'decoder_ff_logit_out_W(t)'" : "no output array",
           "; marian would translate it otherwise: the file is damaged or edited");
  TX_CHECK(
      !(shared && output), where,
      " shares the source and target embeddings but not the output layer "
      "(--tied-embeddings-src without --tied-embeddings); tx ties all three or the target's two");
  if (shared) {
    const NpyArray& w = m.get("Wemb");
    TX_CHECK(w.shape.size() == 2 && w.shape[1] == d, where, ": 'Wemb' is not [vocab, ", d, "]");
    c.tied_embeddings = io::TiedEmbeddings::all;
    c.src_vocab_size = c.tgt_vocab_size = w.shape[0];
    m.matrix("Wemb", "embed_tokens.weight", w.shape[0], d);
  } else {
    const NpyArray& src = m.get("encoder_Wemb");
    const NpyArray& tgt = m.get("decoder_Wemb");
    TX_CHECK(src.shape.size() == 2 && tgt.shape.size() == 2, where,
             ": the embeddings are not matrices");
    c.src_vocab_size = src.shape[0];
    c.tgt_vocab_size = tgt.shape[0];
    c.tied_embeddings = output ? io::TiedEmbeddings::none : io::TiedEmbeddings::decoder;
    m.matrix("encoder_Wemb", "encoder.embed_tokens.weight", c.src_vocab_size, d);
    m.matrix("decoder_Wemb", "decoder.embed_tokens.weight", c.tgt_vocab_size, d);
  }
  if (m.has("decoder_ff_logit_out_Wt"))
    m.matrix("decoder_ff_logit_out_Wt", "decoder.output_proj.weight", c.tgt_vocab_size, d);
  else if (output)
    m.transposed("decoder_ff_logit_out_W", "decoder.output_proj.weight", d, c.tgt_vocab_size);
  if (c.output_bias)
    m.vector("decoder_ff_logit_out_b", "decoder.output_proj.bias", c.tgt_vocab_size);

  const std::string norm_suffix = c.pre_norm ? "_pre" : "";
  for (const std::string side : {"encoder", "decoder"}) {
    const int layers = side == "encoder" ? c.encoder_layers : c.decoder_layers;
    if (c.embed_norm) m.norm(side + "_emb", "_pre", side + ".embed_norm", d);
    if (c.final_norm) m.norm(side + "_top", "", side + ".final_norm", d);
    for (int i = 0; i < layers; ++i) {
      const std::string from = side + "_l" + std::to_string(i + 1);
      const std::string to = side + ".layers." + std::to_string(i);
      map_attention(m, from + "_self", to + ".self_attn", d);
      m.norm(from + "_self_Wo", norm_suffix, to + ".self_attn_norm", d);
      if (side == "decoder") {
        map_attention(m, from + "_context", to + ".cross_attn", d);
        m.norm(from + "_context_Wo", norm_suffix, to + ".cross_attn_norm", d);
      }
      m.transposed(from + "_ffn_W1", to + ".ffn.fc1.weight", d, c.d_ff);
      m.vector(from + "_ffn_b1", to + ".ffn.fc1.bias", c.d_ff);
      m.transposed(from + "_ffn_W2", to + ".ffn.fc2.weight", c.d_ff, d);
      m.vector(from + "_ffn_b2", to + ".ffn.fc2.bias", d);
      m.norm(from + "_ffn_ffn", norm_suffix, to + ".ffn_norm", d);
    }
  }
  // A layer past the options' depth: marian would run the depth and ignore it.
  for (const auto& [side, key, layers] :
       {std::tuple<std::string, const char*, int>{"encoder", "enc-depth", c.encoder_layers},
        {"decoder", "dec-depth", c.decoder_layers}})
    TX_CHECK(!m.has(side + "_l" + std::to_string(layers + 1) + "_self_Wq"), where, " has ", side,
             " layer ", layers + 1, " but its options give ", key, " ", layers,
             yml[key] ? "" : " (marian's default: the option is missing)", "; marian would run ",
             layers, ": the file is damaged or edited");
  m.check_all_used();
  // --dim-vocabs, when the file gives it (0: taken from the vocabulary), names the rows.
  const YAML::Node dims = yml["dim-vocabs"];
  if (dims && !dims.IsNull()) {
    TX_CHECK(dims.IsSequence() && dims.size() == 2, where, ": its --dim-vocabs is '",
             YAML::Dump(dims), "', not the two sizes (source, target) of a Transformer");
    const int64_t rows[2] = {c.src_vocab_size, c.tgt_vocab_size};
    for (size_t i = 0; i < 2; ++i) {
      const int64_t n = option<int64_t>(dims, i, 0, where, "dim-vocabs");
      TX_CHECK(n == 0 || n == rows[i], where, ": its --dim-vocabs gives the ",
               i == 0 ? "source" : "target", " vocabulary ", n, " ids but its embeddings have ",
               rows[i], " rows; the file is damaged or edited");
    }
  }
  c.validate(true, where);
  out.params = m.take();
  out.vocabs.kind = VocabKind::marian;
  out.vocabs.paths = vocabs_beside(path, out.vocabs.why_none);
  return out;
}

}  // namespace tx::formats
