#include "train/checkpoint.h"

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "core/finite.h"
#include "formats/model_file.h"
#include "io/safetensors.h"

namespace tx::train {
namespace {

using nlohmann::json;

constexpr const char* kModelFormat = "model";
constexpr const char* kTrainingFormat = "training";

std::string where_of(const std::string& path) {
  return str("checkpoint '", path, "'");
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

// The host copy of a device tensor, bit for bit.
io::NamedTensor download(Backend& be, const std::string& name, const Tensor& t) {
  return io::NamedTensor::from_floats(name, DType::f32, t.shape(), be.download<float>(t));
}

io::TensorFile model_file(Backend& be, const io::ModelConfig& config,
                          const nn::ParameterSet& params,
                          const std::map<std::string, std::string>& extra) {
  io::TensorFile file;
  for (const auto& [key, value] : extra) {
    // tx.vocabs: an imported model's vocabularies (formats/model_file.h), the trainer's to set.
    TX_CHECK(!starts_with(key, "tx.") || key == formats::kVocabsKey, "checkpoint metadata key '",
             key, "' is reserved for tx; choose a key without the 'tx.' prefix");
    file.metadata[key] = value;
  }
  file.metadata[io::kModelConfigKey] = config.to_json_string();
  file.metadata[kFormatKey] = kModelFormat;
  for (const auto& [name, var] : params.items()) {
    TX_CHECK(!starts_with(name, "adam."), "parameter '", name,
             "': names starting with 'adam.' are reserved for optimiser state; rename it");
    file.add(download(be, name, var->value));
  }
  return file;
}

// What to do with a safetensors file that is not tx's: a Hugging Face or fairseq model's
// weights are read through their directory, which holds the config beside them.
std::string not_tx_fix(const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  for (const char* config : {"fairseq.json", "config.json"})
    if (std::filesystem::exists(dir / config, ec))
      return str("it sits beside ", config, ": give its directory, '",
                 dir.empty() ? std::string(".") : dir.string(), "', instead of the file");
  return "load a checkpoint written by tx";
}

// The config fields that a run's vocabularies fill in.
bool is_vocabulary_field(const std::string& key) {
  for (const char* field : {"src_vocab_size", "tgt_vocab_size", "pad_id", "unk_id", "bos_id",
                            "eos_id", "decoder_start_id"})
    if (key == field) return true;
  return false;
}

// Parses the file's config and requires its architecture to equal `config`'s (but for the
// vocabularies' fields when `skip_vocabulary_fields`).
void check_config(const std::string& path, const std::map<std::string, std::string>& metadata,
                  const io::ModelConfig& config, bool skip_vocabulary_fields = false) {
  auto it = metadata.find(io::kModelConfigKey);
  TX_CHECK(it != metadata.end(), where_of(path), " has no '", io::kModelConfigKey,
           "' in its metadata, so it is not a tx model; ", not_tx_fix(path));
  io::ModelConfig saved =
      io::ModelConfig::from_json_string(it->second, where_of(path) + " model config");
  const json have = saved.to_json(), want = config.to_json();
  std::string diffs;
  int count = 0;
  for (const auto& [key, value] : want.items()) {
    if (is_training_choice(key) || (skip_vocabulary_fields && is_vocabulary_field(key)) ||
        (have.contains(key) && have.at(key) == value))
      continue;
    if (count++ < 3)
      diffs += str(diffs.empty() ? "" : ", ", key, " is ",
                   have.contains(key) ? have.at(key).dump() : "absent", " there but ", value.dump(),
                   " here");
  }
  TX_CHECK(count == 0, where_of(path), " holds a different model (", diffs,
           count > 3 ? str(" and ", count - 3, " more") : std::string(),
           "); resume with the model options it was trained with (the flags of these fields: "
           "d_model is --d-model, encoder_layers --enc-layers), or train in another --model "
           "directory");
}

std::string format_of(const std::map<std::string, std::string>& metadata) {
  auto it = metadata.find(kFormatKey);
  return it == metadata.end() ? std::string() : it->second;
}

json parse_json(const std::map<std::string, std::string>& metadata, const char* key,
                const std::string& path) {
  auto it = metadata.find(key);
  TX_CHECK(it != metadata.end(), where_of(path), " has no '", key,
           "' in its metadata; the file is damaged or not a tx training checkpoint");
  try {
    return json::parse(it->second);
  } catch (const json::exception& e) {
    throw Error(str(where_of(path), ": metadata '", key, "' is not valid JSON (", e.what(),
                    "); the file is damaged"));
  }
}

void check_training_format(const std::string& path,
                           const std::map<std::string, std::string>& metadata) {
  const std::string format = format_of(metadata);
  TX_CHECK(
      format == kTrainingFormat, where_of(path), " is ",
      format.empty() ? std::string("not a tx training checkpoint") : str("a '", format, "' file"),
      ", without optimiser and trainer state; resume from a training checkpoint, or "
      "start a new run from these weights (load_model)");
}

// A device tensor to fill from the file tensor of the same name.
struct Target {
  std::string name;
  Tensor dst;
};

// Checks the whole header against `targets` first (so a mismatch changes nothing), then copies
// each tensor in. Tensors whose name `skip` accepts are ignored; any other extra is an error.
template <typename Skip>
void load_tensors(io::SafetensorsReader& reader, Backend& be, const std::vector<Target>& targets,
                  Skip skip, const std::string& missing_hint) {
  const std::string where = where_of(reader.path());
  std::set<std::string> wanted;
  for (const Target& t : targets) {
    wanted.insert(t.name);
    const io::TensorEntry* e = reader.find(t.name);
    TX_CHECK(e, where, " has no tensor '", t.name, "' (f32", t.dst.shape().str(), ")",
             missing_hint);
    TX_CHECK(e->dtype != DType::i32, where, ": tensor '", t.name,
             "' is I32 but it must be floating point; the file is not a tx checkpoint of this "
             "model");
    TX_CHECK(e->shape == t.dst.shape(), where, ": tensor '", t.name, "' has shape ", e->shape.str(),
             " but the model's is ", t.dst.shape().str(),
             "; the file is damaged or is not a checkpoint of this model");
  }
  for (const io::TensorEntry& e : reader.entries())
    TX_CHECK(wanted.count(e.name) || skip(e.name), where, " has a tensor '", e.name,
             "' that the model does not have; it was written for another model version; "
             "build the model from the checkpoint's config or load a checkpoint of this model");
  for (const Target& t : targets) {
    io::NamedTensor h = reader.read(t.name);
    if (h.dtype == DType::f32) {
      const auto* x = reinterpret_cast<const float*>(h.data.data());
      check_finite(x, h.shape.numel(), where, t.name);
      be.copy_from_host(x, t.dst);
    } else {
      std::vector<float> wide = h.to_floats();  // f16 / bf16 model files
      check_finite(wide.data(), h.shape.numel(), where, t.name);
      be.copy_from_host(wide.data(), t.dst);
    }
  }
}

std::vector<Target> param_targets(const nn::ParameterSet& params) {
  std::vector<Target> targets;
  for (const auto& [name, var] : params.items()) targets.push_back({name, var->value});
  return targets;
}

}  // namespace

// Training choices that may change between runs of one model; every other field shapes the
// parameters or the function they compute. The alignment layer and head only name which
// attention --alignment reads (and --guided-alignment trains): a plain model may be fine-tuned
// to align.
bool is_training_choice(const std::string& key) {
  return key == "dropout" || key == "attention_dropout" || key == "relu_dropout" ||
         key == "dropout_src" || key == "dropout_trg" || key == "label_smoothing" ||
         key == "alignment_layer" || key == "alignment_head";
}

void save_model(const std::string& path, Backend& be, const io::ModelConfig& config,
                const nn::ParameterSet& params, const std::map<std::string, std::string>& extra) {
  io::write_safetensors(path, model_file(be, config, params, extra));
}

io::ModelConfig read_model_config(const std::string& path) {
  io::SafetensorsReader reader(path);
  auto it = reader.metadata().find(io::kModelConfigKey);
  TX_CHECK(it != reader.metadata().end(), where_of(path), " has no '", io::kModelConfigKey,
           "' in its metadata, so it is not a tx model; ", not_tx_fix(path));
  return io::ModelConfig::from_json_string(it->second, where_of(path) + " model config");
}

void load_model(const std::string& path, Backend& be, const io::ModelConfig& config,
                const nn::ParameterSet& params) {
  io::SafetensorsReader reader(path);
  check_config(path, reader.metadata(), config);
  const std::string hint = "; the file is damaged or from another model version";
  // A checkpoint of an --exponential-smoothing run: its model is the smoothed weights, as its
  // model files and tx-average have it, not the raw ones beside them.
  if (!params.items().empty() && reader.find(kSmoothedPrefix + params.items().front().first)) {
    std::vector<Target> smoothed;
    for (const auto& [name, var] : params.items())
      smoothed.push_back({kSmoothedPrefix + name, var->value});
    load_tensors(
        reader, be, smoothed,
        [](const std::string& name) { return !starts_with(name, kSmoothedPrefix); }, hint);
    return;
  }
  load_tensors(
      reader, be, param_targets(params),
      [](const std::string& name) {
        return starts_with(name, "adam.") || starts_with(name, kSmoothedPrefix);
      },
      hint);
}

void save_checkpoint(const std::string& path, Backend& be, const io::ModelConfig& config,
                     const nn::ParameterSet& params, const Adam& adam, const TrainingState& state,
                     const std::map<std::string, std::string>& extra,
                     const NamedTensors& smoothed) {
  TX_CHECK(&adam.params() == &params && adam.params().size() == params.size(),
           "save_checkpoint: the optimiser was made for another parameter set; pass the "
           "model's own Adam");
  io::TensorFile file = model_file(be, config, params, extra);
  file.metadata[kFormatKey] = kTrainingFormat;
  const auto& items = params.items();
  // All m tensors, then all v tensors: each group in parameter order, like the parameters.
  for (size_t i = 0; i < items.size(); ++i)
    file.add(download(be, kAdamMPrefix + items[i].first, adam.m(i)));
  for (size_t i = 0; i < items.size(); ++i)
    file.add(download(be, kAdamVPrefix + items[i].first, adam.v(i)));
  for (const auto& [name, tensor] : smoothed) file.add(download(be, name, tensor));
  const AdamOptions& o = adam.options();
  file.metadata[kOptimizerKey] = json{
      {"type", "adam"},          {"step", adam.steps()}, {"beta1", o.beta1},
      {"beta2", o.beta2},        {"eps", o.eps},         {"weight_decay", o.weight_decay},
      {"clip_norm", o.clip_norm}}.dump();
  file.metadata[kTrainingStateKey] = state.to_json().dump();
  io::write_safetensors(path, file);
}

TrainingState load_checkpoint(const std::string& path, Backend& be, const io::ModelConfig& config,
                              const nn::ParameterSet& params, Adam& adam) {
  TX_CHECK(&adam.params() == &params && adam.params().size() == params.size(),
           "load_checkpoint: the optimiser was made for another parameter set; pass the "
           "model's own Adam");
  io::SafetensorsReader reader(path);
  const std::string where = where_of(path);
  check_training_format(path, reader.metadata());
  check_config(path, reader.metadata(), config);

  // Everything from the metadata is parsed before any tensor is touched.
  const json opt = parse_json(reader.metadata(), kOptimizerKey, path);
  TX_CHECK(opt.is_object() && opt.value("type", "") == "adam" && opt.contains("step") &&
               opt.at("step").is_number_integer() && opt.at("step").get<int64_t>() >= 0,
           where, ": optimiser state ", opt.dump(),
           " is not Adam's with a step count; the file is damaged");
  const int64_t step = opt.at("step").get<int64_t>();
  TrainingState state =
      TrainingState::from_json(parse_json(reader.metadata(), kTrainingStateKey, path), where);

  std::vector<Target> targets = param_targets(params);
  const auto& items = params.items();
  for (size_t i = 0; i < items.size(); ++i)
    targets.push_back({kAdamMPrefix + items[i].first, adam.m(i)});
  for (size_t i = 0; i < items.size(); ++i)
    targets.push_back({kAdamVPrefix + items[i].first, adam.v(i)});
  load_tensors(
      reader, be, targets,
      [](const std::string& name) { return starts_with(name, kSmoothedPrefix); },
      "; the file is damaged or from another model version");
  adam.set_steps(step);
  return state;
}

bool load_smoothed(const std::string& path, Backend& be, const NamedTensors& smoothed) {
  io::SafetensorsReader reader(path);
  if (smoothed.empty() || !reader.find(smoothed.front().first)) return false;
  std::vector<Target> targets;
  for (const auto& [name, tensor] : smoothed) targets.push_back({name, tensor});
  load_tensors(
      reader, be, targets,
      [](const std::string& name) { return !starts_with(name, kSmoothedPrefix); },
      "; the file's smoothed weights are incomplete: the file is damaged");
  return true;
}

void check_architecture(const std::string& path, const io::ModelConfig& config) {
  check_config(path, io::SafetensorsReader(path).metadata(), config, true);
}

TrainingState read_training_state(const std::string& path) {
  const io::SafetensorsReader reader(path);
  check_training_format(path, reader.metadata());
  return TrainingState::from_json(parse_json(reader.metadata(), kTrainingStateKey, path),
                                  where_of(path));
}

std::map<std::string, std::string> read_checkpoint_metadata(const std::string& path) {
  return io::SafetensorsReader(path).metadata();
}

}  // namespace tx::train
