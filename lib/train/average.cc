#include "train/average.h"

#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/finite.h"
#include "formats/model_file.h"
#include "io/atomic_file.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "train/checkpoint.h"

namespace tx::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Adam's moments and the smoothed weights of a training checkpoint: not parameters of their
// own names.
bool is_optimiser_state(const std::string& name) {
  return name.compare(0, std::strlen("adam."), "adam.") == 0 ||
         name.compare(0, std::strlen(kSmoothedPrefix), kSmoothedPrefix) == 0;
}

// Two spellings of one file (relative, "..", symlinks, hard links) count as the same.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::equivalent(a, b, ec)) return true;
  fs::path ca = fs::weakly_canonical(a, ec);
  if (ec) return false;
  fs::path cb = fs::weakly_canonical(b, ec);
  return !ec && ca == cb;
}

io::ModelConfig config_of(const io::SafetensorsReader& reader) {
  auto it = reader.metadata().find(io::kModelConfigKey);
  TX_CHECK(it != reader.metadata().end(), "checkpoint '", reader.path(), "' has no '",
           io::kModelConfigKey,
           "' in its metadata, so it is not a tx model; average checkpoints written by tx-train");
  return io::ModelConfig::from_json_string(it->second, str("checkpoint '", reader.path(), "'"));
}

// "d_model 512 vs 1024, heads 8 vs 16": the architecture fields in which two configs differ
// ("" when none). Training choices (dropout, label smoothing, the alignment head) may change
// when a run resumes, so its snapshots may differ in them.
std::string config_difference(const io::ModelConfig& a, const io::ModelConfig& b) {
  const json ja = a.to_json(), jb = b.to_json();
  std::string out;
  for (const auto& [key, value] : ja.items()) {
    if (jb.at(key) == value || is_training_choice(key)) continue;
    if (!out.empty()) out += ", ";
    out += str(key, " ", value.dump(), " vs ", jb.at(key).dump());
  }
  return out;
}

// The parameter tensors of `reader`, in file order.
std::vector<const io::TensorEntry*> parameters_of(const io::SafetensorsReader& reader,
                                                  size_t* skipped) {
  std::vector<const io::TensorEntry*> out;
  for (const io::TensorEntry& e : reader.entries()) {
    if (!is_optimiser_state(e.name))
      out.push_back(&e);
    else if (e.name.compare(0, std::strlen(kSmoothedPrefix), kSmoothedPrefix) != 0)
      ++*skipped;  // Adam's; the smoothed weights are read in their parameters' place
  }
  return out;
}

// Requires `other` to hold exactly the parameters of `first`, with the same shapes and dtypes.
void check_same_tensors(const io::SafetensorsReader& first,
                        const std::vector<const io::TensorEntry*>& params,
                        const io::SafetensorsReader& other,
                        const std::vector<const io::TensorEntry*>& other_params) {
  const std::string fix = "; average checkpoints of one model (one training run)";
  for (const io::TensorEntry* e : params) {
    const io::TensorEntry* o = other.find(e->name);
    TX_CHECK(o != nullptr, "checkpoint '", other.path(), "' has no tensor '", e->name, "', which '",
             first.path(), "' has", fix);
    TX_CHECK(o->shape == e->shape, "checkpoint '", other.path(), "': tensor '", e->name,
             "' has shape ", o->shape.str(), " but ", e->shape.str(), " in '", first.path(), "'",
             fix);
    TX_CHECK(o->dtype == e->dtype, "checkpoint '", other.path(), "': tensor '", e->name, "' is ",
             name_of(o->dtype), " but ", name_of(e->dtype), " in '", first.path(), "'", fix,
             ", or convert them to one dtype");
  }
  if (other_params.size() == params.size()) return;
  for (const io::TensorEntry* o : other_params)
    TX_CHECK(first.find(o->name) != nullptr, "checkpoint '", other.path(), "' has tensor '",
             o->name, "', which '", first.path(), "' lacks", fix);
}

// What says which pieces the weights' ids are: an imported model's vocabulary files
// (formats::kVocabsKey: without it tx-translate would read them as tx's) and the pieces'
// fingerprint (which fine-tuning and translation check). The inputs that hold either must
// agree on it, and the output carries it; a file without it (a checkpoint written before
// 2026-12-01 holds neither) agrees with any.
void carry_vocabularies(const std::vector<std::unique_ptr<io::SafetensorsReader>>& readers,
                        io::TensorFile& out) {
  for (const char* key : {formats::kVocabsKey, kVocabFingerprintKey}) {
    const io::SafetensorsReader* holder = nullptr;  // the first input with the key
    for (const auto& reader : readers) {
      const auto it = reader->metadata().find(key);
      if (it == reader->metadata().end()) continue;
      if (!holder) holder = reader.get();
      TX_CHECK(it->second == holder->metadata().at(key), "'", reader->path(), "' ",
               key == kVocabFingerprintKey ? "was trained on other vocabularies than '"
                                           : "names other vocabulary files than '",
               holder->path(), "' (metadata '", key, "'); average checkpoints of one training run");
    }
    if (holder) out.metadata[key] = holder->metadata().at(key);
  }
}

// Marian or Hugging Face models (formats/): each read whole, in tx's names, one at a time into
// running sums (double, in input order, as the tx files' are), so memory stays near four times
// one model's float32 size (the sums, one input as read and as converted) however many inputs
// there are. The output is a tx model file that keeps the first input's vocabularies
// (formats::kVocabsKey).
AverageSummary average_imported(const std::vector<std::string>& inputs, const std::string& output) {
  for (const std::string& in : inputs)
    TX_CHECK(formats::format_of(in) != formats::Format::tx, "'", in, "' is a tx checkpoint and '",
             inputs.front(), "' an imported model; average models of one format");
  formats::ModelFile first = formats::read_model_file(inputs.front());
  std::vector<std::vector<double>> sums;
  for (const io::NamedTensor& t : first.params.tensors)
    sums.emplace_back(static_cast<size_t>(t.shape.numel()), 0.0);
  // Input `n`'s parameters added to the sums, each found by the first input's name and shape.
  auto add = [&](const formats::ModelFile& m, size_t n) {
    for (size_t i = 0; i < sums.size(); ++i) {
      const io::NamedTensor& t = first.params.tensors[i];
      const io::NamedTensor* o = m.params.find(t.name);
      TX_CHECK(o && o->shape == t.shape, "model '", inputs[n], "' lacks parameter '", t.name, "' ",
               t.shape.str(), ", which '", inputs.front(), "' has");
      const std::vector<float> values = o->to_floats();
      for (size_t k = 0; k < values.size(); ++k) sums[i][k] += values[k];
    }
  };
  add(first, 0);
  for (io::NamedTensor& t : first.params.tensors) std::vector<uint8_t>().swap(t.data);
  for (size_t n = 1; n < inputs.size(); ++n) {
    const formats::ModelFile m = formats::read_model_file(inputs[n]);
    TX_CHECK(config_difference(first.config, m.config).empty(), "model '", inputs[n],
             "' has another architecture than '", inputs.front(), "' (",
             config_difference(first.config, m.config), "); average models of one training run");
    add(m, n);
  }
  AverageSummary summary;
  summary.inputs = inputs.size();
  io::TensorFile out;
  out.metadata[kFormatKey] = "model";
  out.metadata[io::kModelConfigKey] = first.config.to_json_string();
  out.metadata["tx.averaged_from"] = json(inputs).dump();
  out.metadata[formats::kVocabsKey] = formats::vocab_files_json(first.vocabs);
  const double scale = 1.0 / static_cast<double>(inputs.size());
  for (size_t i = 0; i < sums.size(); ++i) {
    const io::NamedTensor& t = first.params.tensors[i];
    std::vector<float> mean(sums[i].size());
    for (size_t k = 0; k < mean.size(); ++k) mean[k] = static_cast<float>(sums[i][k] * scale);
    std::vector<double>().swap(sums[i]);
    out.add(io::NamedTensor::from_floats(t.name, DType::f32, t.shape, mean));
    ++summary.tensors;
    summary.parameters += t.shape.numel();
  }
  io::write_safetensors(output, out);
  return summary;
}

}  // namespace

AverageSummary average_checkpoints(const std::vector<std::string>& inputs,
                                   const std::string& output) {
  TX_CHECK(!inputs.empty(), "no checkpoints to average; name one or more input files");
  // A model directory (Hugging Face, fairseq) is read through its files: the output may not
  // replace one of them (model.safetensors is its weights; the .json files its config and
  // vocabulary, the .spm and dict .txt files its pieces). Another file beside them may.
  // Where the write lands: a link's file, not the link (AtomicFile writes through links).
  const fs::path out_path(io::link_target(output));
  const std::string ext = out_path.extension().string();
  const bool read_by_model =
      out_path.filename() == "model.safetensors" ||
      (fs::exists(out_path) && (ext == ".json" || ext == ".spm" || ext == ".txt" || ext == ".bin"));
  const std::string out_dir =
      out_path.parent_path().empty() ? "." : out_path.parent_path().string();
  for (const std::string& in : inputs) {
    TX_CHECK(!same_file(in, output), "the output '", output, "' is the input '", in,
             "'; write the average to a new file");
    TX_CHECK(!read_by_model || !fs::is_directory(in) || !same_file(out_dir, in), "the output '",
             output, "' is a file the input model directory '", in,
             "' is read from (its weights, config or vocabularies); write the average to "
             "another name");
  }
  // An output that cannot be written (no such directory, a device) is named before the inputs
  // are read, not after.
  io::check_writable(output);
  if (formats::format_of(inputs.front()) != formats::Format::tx)
    return average_imported(inputs, output);
  // (A directory is no tx file: the reader below names it as one.)
  for (const std::string& in : inputs)
    TX_CHECK(fs::is_directory(in) || formats::format_of(in) == formats::Format::tx, "'", in,
             "' is a ", formats::name_of(formats::format_of(in)), " model and '", inputs.front(),
             "' a tx checkpoint; average models of one format");

  // Every header is read and checked before any tensor data: a mismatch costs no time.
  std::vector<std::unique_ptr<io::SafetensorsReader>> readers;
  for (const std::string& in : inputs)
    readers.push_back(std::make_unique<io::SafetensorsReader>(in));
  const io::SafetensorsReader& first = *readers[0];
  const io::ModelConfig config = config_of(first);

  AverageSummary summary;
  summary.inputs = inputs.size();
  const std::vector<const io::TensorEntry*> params = parameters_of(first, &summary.skipped_tensors);
  TX_CHECK(!params.empty(), "checkpoint '", first.path(),
           "' holds no parameters; average model files or training checkpoints");
  for (size_t i = 1; i < readers.size(); ++i) {
    const io::SafetensorsReader& r = *readers[i];
    const io::ModelConfig c = config_of(r);
    TX_CHECK(config_difference(config, c).empty(), "checkpoint '", r.path(),
             "' has another model config than '", first.path(), "' (", config_difference(config, c),
             "); average checkpoints of one model (one training run)");
    check_same_tensors(first, params, r, parameters_of(r, &summary.skipped_tensors));
  }
  for (const io::TensorEntry* e : params)
    TX_CHECK(e->dtype != DType::i32, "checkpoint '", first.path(), "': tensor '", e->name,
             "' is i32; only floating-point parameters can be averaged");

  io::TensorFile out;
  out.metadata[kFormatKey] = "model";
  out.metadata[io::kModelConfigKey] = config.to_json_string();
  out.metadata["tx.averaged_from"] = json(inputs).dump();
  carry_vocabularies(readers, out);
  const double scale = 1.0 / static_cast<double>(inputs.size());
  // A training checkpoint of an --exponential-smoothing run holds its model as "ema.<name>":
  // that, not the raw weights beside it, is what its model file would hold. All or none, each
  // like its parameter.
  for (auto& reader : readers) {
    if (!reader->find(kSmoothedPrefix + params.front()->name)) continue;
    ++summary.smoothed_inputs;
    for (const io::TensorEntry* e : params) {
      const io::TensorEntry* s = reader->find(kSmoothedPrefix + e->name);
      TX_CHECK(s && s->shape == e->shape && s->dtype == e->dtype, "checkpoint '", reader->path(),
               "': its smoothed weights lack '", kSmoothedPrefix, e->name,
               "' or differ from the parameter in shape or dtype; the file is damaged");
    }
  }
  for (const io::TensorEntry* e : params) {
    std::vector<double> sum(static_cast<size_t>(e->shape.numel()), 0.0);
    for (auto& reader : readers) {
      const std::string smoothed = kSmoothedPrefix + e->name;
      const std::string name = reader->find(smoothed) ? smoothed : e->name;
      const std::vector<float> values = reader->read(name).to_floats();
      // A NaN would pass into the average silently and make every translation of it empty;
      // named here, the diverged snapshot can be left out.
      check_finite(values.data(), static_cast<int64_t>(values.size()),
                   "model '" + reader->path() + "'", name);
      for (size_t k = 0; k < sum.size(); ++k) sum[k] += values[k];
    }
    std::vector<float> mean(sum.size());
    for (size_t k = 0; k < sum.size(); ++k) mean[k] = static_cast<float>(sum[k] * scale);
    out.add(io::NamedTensor::from_floats(e->name, e->dtype, e->shape, mean));
    ++summary.tensors;
    summary.parameters += e->shape.numel();
  }
  io::write_safetensors(output, out);
  return summary;
}

}  // namespace tx::train
