// What tx-translate and tx-score do first: open the device, read the model's config from the
// checkpoint, load both vocabularies, check that they fit the model, build the Transformer and
// load its weights. Header-only: only the programs that run a model (and link tx_backends)
// include it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "common/app_log.h"
#include "common/options.h"
#include "core/rng.h"
#include "data/vocab.h"
#include "nn/parameters.h"
#include "nn/transformer.h"
#include "train/checkpoint.h"

namespace tx::app {

// The options it reads: model, vocabs (one joint or source + target), device, cpu-threads, int8.
class LoadedModel {
 public:
  explicit LoadedModel(const Options& options) {
    if (!options.has("model")) throw UsageError("give the model file with -m/--model");
    if (!options.has("vocabs"))
      throw UsageError("give the vocabularies with -v/--vocabs SRC.spm TGT.spm (or one joint)");
    const std::string path = options.text("model");
    const std::vector<std::string> vocabs = options.list("vocabs");
    if (vocabs.empty() || vocabs.size() > 2)
      throw UsageError(
          str("--vocabs: expected 1 (joint) or 2 (source, target) vocabulary files, "
              "got ",
              vocabs.size()));
    // The cheap checks first: the config is in the header, a vocabulary loads in milliseconds.
    config_ = train::read_model_config(path);
    src_vocab_ = std::make_unique<data::Vocab>(vocabs.front());
    tgt_vocab_ = std::make_unique<data::Vocab>(vocabs.back());
    check_size("source", config_.src_vocab_size, *src_vocab_, path);
    check_size("target", config_.tgt_vocab_size, *tgt_vocab_, path);

    register_builtin_backends();
    BackendOptions bo;
    bo.threads = static_cast<int>(options.integer("cpu-threads"));
    backend_ = create_backend(options.text("device"), bo);
    model_ = nn::Transformer(nn::ParamScope::for_loading(*backend_, params_), config_);
    train::load_model(path, *backend_, config_, params_);
    model_.prepare_inference(*backend_, options.flag("int8"));
    detail(options, "model ", path, " on ", backend_->name(), ": d_model ", config_.d_model, ", ",
           config_.encoder_layers, "+", config_.decoder_layers, " layers, vocabularies ",
           config_.src_vocab_size, "/", config_.tgt_vocab_size);
  }
  LoadedModel(const LoadedModel&) = delete;
  LoadedModel& operator=(const LoadedModel&) = delete;

  Backend& backend() const { return *backend_; }
  const io::ModelConfig& config() const { return config_; }
  const nn::Transformer& model() const { return model_; }
  const data::Vocab& src_vocab() const { return *src_vocab_; }
  const data::Vocab& tgt_vocab() const { return *tgt_vocab_; }

 private:
  static void check_size(const char* side, int64_t expected, const data::Vocab& vocab,
                         const std::string& model_path) {
    if (vocab.size() != expected)
      throw Error(str("the ", side, " vocabulary '", vocab.path(), "' has ", vocab.size(),
                      " pieces but the model '", model_path, "' expects ", expected,
                      "; give the vocabulary the model was trained with"));
  }

  io::ModelConfig config_;
  std::unique_ptr<data::Vocab> src_vocab_, tgt_vocab_;
  std::unique_ptr<Backend> backend_;
  nn::ParameterSet params_;
  nn::Transformer model_;
};

}  // namespace tx::app
