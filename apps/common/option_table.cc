// The option table: one row per option of any tx program. Add a program's options here (with
// its Program bit) and they become flags, --config keys and --dump-config entries at once.
#include <cmath>

#include "common/options.h"

namespace tx::app {
namespace {

using nlohmann::json;

constexpr unsigned kCompute = kTrain | kTranslate | kScore;  // programs that run a model
constexpr const char* kModelGroup = "Model (set by --task, overridable one by one)";

// Checks: each returns why a value is invalid, or "".
std::string non_negative(const json& v) {
  return v.get<int64_t>() >= 0 ? "" : "must be 0 or more";
}
std::string positive(const json& v) {
  return v.get<double>() > 0 ? "" : "must be positive";
}
std::string rate(const json& v) {
  double r = v.get<double>();
  return std::isfinite(r) && r >= 0 && r < 1 ? "" : "must lie in [0, 1)";
}
std::function<std::string(const json&)> one_of(std::vector<std::string> choices) {
  return [choices](const json& v) {
    std::string list;
    for (const std::string& c : choices) {
      if (v.get<std::string>() == c) return std::string();
      list += (list.empty() ? "" : ", ") + c;
    }
    return "must be one of " + list;
  };
}
// "cpu", "cuda" or "cuda:N"; whether that device exists is the backend registry's question.
std::string device_spec(const json& v) {
  const std::string s = v.get<std::string>();
  if (s == "cpu" || s == "cuda") return "";
  if (s.size() > 5 && s.compare(0, 5, "cuda:") == 0 &&
      s.find_first_not_of("0123456789", 5) == std::string::npos)
    return "";
  return "must be cpu, cuda or cuda:N (N a GPU index)";
}

OptionType type_of(const json& v) {
  if (v.is_boolean()) return OptionType::flag;
  if (v.is_number_integer()) return OptionType::integer;
  if (v.is_number()) return OptionType::number;
  return OptionType::text;
}

// A model option: type and default from io::ModelConfig (transformer-base), set by --task.
OptionSpec model_option(std::string name, std::string model_key, std::string help,
                        std::function<std::string(const json&)> check = nullptr) {
  static const json defaults = io::ModelConfig().to_json();
  OptionSpec s;
  s.name = std::move(name);
  s.default_value = defaults.at(model_key);
  s.type = type_of(s.default_value);
  s.help = std::move(help);
  s.programs = kTrain;
  s.group = kModelGroup;
  s.model_key = std::move(model_key);
  s.check = std::move(check);
  return s;
}

OptionSpec option(std::string name, OptionType type, json default_value, std::string help,
                  unsigned programs, std::string group,
                  std::function<std::string(const json&)> check = nullptr) {
  OptionSpec s;
  s.name = std::move(name);
  s.type = type;
  s.default_value = std::move(default_value);
  s.help = std::move(help);
  s.programs = programs;
  s.group = std::move(group);
  s.check = std::move(check);
  return s;
}

std::vector<OptionSpec> make_registry() {
  const std::string general = "General", device = "Device", average = "Averaging";
  std::vector<OptionSpec> t;
  t.push_back(option("quiet", OptionType::flag, false, "Log errors only", kAllPrograms, general));
  t.push_back(option("verbose", OptionType::flag, false, "Log more detail", kAllPrograms, general));

  t.push_back(option("device", OptionType::text, "cpu", "Device to run on: cpu, cuda or cuda:N",
                     kCompute, device, device_spec));
  t.push_back(option("cpu-threads", OptionType::integer, 0, "CPU threads; 0 = all cores", kCompute,
                     device, non_negative));
  t.push_back(option("seed", OptionType::integer, 1,
                     "Seed of every random choice (initialisation, dropout, shuffling)", kCompute,
                     device, non_negative));

  t.push_back(option("task", OptionType::text, "transformer-base",
                     "Model preset (paper Table 3): transformer-base or transformer-big", kTrain,
                     kModelGroup, one_of(io::ModelConfig::preset_names())));
  t.push_back(model_option("d-model", "d_model", "Model (embedding) size", positive));
  t.push_back(model_option("d-ff", "d_ff", "Inner size of the feed-forward layers", positive));
  t.push_back(model_option("heads", "heads", "Attention heads (must divide --d-model)", positive));
  t.push_back(model_option("enc-layers", "encoder_layers", "Encoder layers", positive));
  t.push_back(model_option("dec-layers", "decoder_layers", "Decoder layers", positive));
  t.push_back(
      model_option("dropout", "dropout", "Dropout on sublayer outputs and embeddings", rate));
  t.push_back(model_option("attention-dropout", "attention_dropout",
                           "Dropout on attention probabilities", rate));
  t.push_back(
      model_option("relu-dropout", "relu_dropout", "Dropout inside the feed-forward layers", rate));
  t.push_back(model_option("label-smoothing", "label_smoothing", "Label smoothing epsilon", rate));
  t.push_back(model_option("tied-embeddings", "tied_embeddings",
                           "Shared embeddings: none, decoder (target = output) or all",
                           one_of({"none", "decoder", "all"})));
  t.push_back(model_option("pre-norm", "pre_norm", "Pre-norm layers (the paper is post-norm)"));
  t.push_back(
      model_option("max-length", "max_length", "Longest sequence the positions cover", positive));
  t.push_back(model_option("norm-eps", "norm_eps", "LayerNorm epsilon", positive));

  OptionSpec output = option("output", OptionType::text, nullptr,
                             "Output model file (.safetensors)", kAverage, average);
  output.short_name = "o";
  output.required = kAverage;
  t.push_back(output);
  OptionSpec inputs = option("inputs", OptionType::list, nullptr,
                             "Checkpoints to average (also as bare arguments)", kAverage, average);
  inputs.positional = true;
  inputs.required = kAverage;
  t.push_back(inputs);
  return t;
}

}  // namespace

const std::vector<OptionSpec>& option_registry() {
  static const std::vector<OptionSpec> registry = make_registry();
  return registry;
}

}  // namespace tx::app
