// What tx-translate and tx-score do first: open the device, read the model's config (from a
// tx checkpoint, or from a Marian or Hugging Face model through formats/), load both
// vocabularies, check that they fit the model, build the Transformer and load its weights.
// Header-only: only the programs that run a model (and link tx_backends) include it.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "common/app_log.h"
#include "common/options.h"
#include "common/precision.h"
#include "core/rng.h"
#include "data/vocab.h"
#include "formats/model_file.h"
#include "nn/parameters.h"
#include "nn/transformer.h"
#include "train/checkpoint.h"

namespace tx::app {

// The options it reads: model, vocabs (one joint or source + target), device, cpu-threads, tf32,
// int8, precision.
class LoadedModel {
 public:
  explicit LoadedModel(const Options& options) {
    if (!options.has("model")) throw UsageError("give the model file with -m/--model");
    const std::string path = options.text("model");
    std::vector<std::string> vocabs =
        options.has("vocabs") ? options.list("vocabs") : std::vector<std::string>();
    if (vocabs.size() > 2)
      throw UsageError(
          str("--vocabs: expected 1 (joint) or 2 (source, target) vocabulary files, "
              "got ",
              vocabs.size()));
    // The cheap checks first: a tx config is in the header, a vocabulary loads in
    // milliseconds. An imported model is read whole here (its tensors change names and
    // layouts on the way).
    formats::ModelFile file = formats::read_model_file(path);
    format_ = file.format;
    if (file.format == formats::Format::tx) {
      config_ = train::read_model_config(path);
      // A tx file made from an imported model reads its vocabularies as the original's.
      const auto metadata = train::read_checkpoint_metadata(path);
      const auto found = metadata.find(formats::kVocabsKey);
      if (found != metadata.end()) {
        const formats::VocabFiles files =
            formats::vocab_files_from_json(found->second, str("model '", path, "'"));
        from_marian_ = files.kind == formats::VocabKind::marian;
        from_huggingface_ = files.kind == formats::VocabKind::pieces;
        load_vocabs(files, path, vocabs);
      } else {
        if (vocabs.empty())
          throw UsageError("give the vocabularies with -v/--vocabs SRC.spm TGT.spm (or one joint)");
        src_vocab_ = std::make_unique<data::Vocab>(vocabs.front());
        tgt_vocab_ = std::make_unique<data::Vocab>(vocabs.back());
      }
    } else {
      config_ = file.config;
      from_marian_ = file.format == formats::Format::marian;
      from_huggingface_ = file.format == formats::Format::huggingface;
      load_vocabs(file.vocabs, path, vocabs);
    }
    check_size("source", config_.src_vocab_size, *src_vocab_, path);
    check_size("target", config_.tgt_vocab_size, *tgt_vocab_, path);
    check_ids(*src_vocab_, *tgt_vocab_, path);

    register_builtin_backends();
    backend_ = create_backend(options.text("device"), options.backend_options());
    model_ = nn::Transformer(nn::ParamScope::for_loading(*backend_, params_), config_);
    if (file.format == formats::Format::tx)
      train::load_model(path, *backend_, config_, params_);
    else
      nn::load_parameters(file.params, *backend_, params_, str("model '", path, "'"));
    const DType precision = checked_precision(options, *backend_);
    model_.prepare_inference(*backend_, options.flag("int8")       ? ops::WeightForm::int8
                                        : precision == DType::bf16 ? ops::WeightForm::bf16
                                        : precision == DType::f16  ? ops::WeightForm::f16
                                                                   : ops::WeightForm::f32);
    detail(options, formats::name_of(file.format), " model ", path, " on ", backend_->name(),
           ": d_model ", config_.d_model, ", ", config_.encoder_layers, "+", config_.decoder_layers,
           " layers, vocabularies ", config_.src_vocab_size, "/", config_.tgt_vocab_size,
           "; architecture ", config_.to_json_string());
  }
  LoadedModel(const LoadedModel&) = delete;
  LoadedModel& operator=(const LoadedModel&) = delete;

  Backend& backend() const { return *backend_; }
  formats::Format format() const { return format_; }
  // A Marian model, or a tx file made from one (tx-average): marian-decoder's search applies.
  bool from_marian() const { return from_marian_; }
  // A Hugging Face model, or a tx file made from one: generate()'s search applies.
  bool from_huggingface() const { return from_huggingface_; }
  const io::ModelConfig& config() const { return config_; }
  const nn::Transformer& model() const { return model_; }
  const data::Vocab& src_vocab() const { return *src_vocab_; }
  const data::Vocab& tgt_vocab() const { return *tgt_vocab_; }

 private:
  // An imported model's vocabularies: those given with -v, else those found with the model.
  void load_vocabs(const formats::VocabFiles& found, const std::string& model,
                   std::vector<std::string> given) {
    if (found.kind == formats::VocabKind::pieces) {
      if (!given.empty())
        throw UsageError(
            str("-v/--vocabs: the Hugging Face model '", model,
                "' brings its own (source.spm, target.spm, vocab.json); leave -v out"));
      src_vocab_ =
          std::make_unique<data::Vocab>(data::Vocab::pieces(found.paths.at(0), found.tables.at(0)));
      tgt_vocab_ =
          std::make_unique<data::Vocab>(data::Vocab::pieces(found.paths.at(1), found.tables.at(1)));
      return;
    }
    if (given.size() == 2 && found.paths.size() == 2 && swapped(given, found.paths))
      throw Error(str("--vocabs gives '", given.front(), "' first, but the model '", model,
                      "' names it as its target vocabulary (decoder.yml); give the source "
                      "vocabulary first, then the target's"));
    if (given.empty()) given = found.paths;
    if (given.empty())
      throw UsageError(str("give the vocabularies of the Marian model '", model,
                           "' with -v/--vocabs SRC TGT (its .yml or .spm files, as for "
                           "marian-decoder)"));
    src_vocab_ = std::make_unique<data::Vocab>(data::Vocab::marian(given.front()));
    tgt_vocab_ = std::make_unique<data::Vocab>(data::Vocab::marian(given.back()));
  }

  // Whether `given` names `found`'s two distinct files in the other order.
  static bool swapped(const std::vector<std::string>& given,
                      const std::vector<std::string>& found) {
    auto same = [](const std::string& a, const std::string& b) {
      std::error_code ec;
      return std::filesystem::equivalent(a, b, ec);
    };
    return !same(found[0], found[1]) && same(given[0], found[1]) && same(given[1], found[0]);
  }

  // The vocabularies' eos and unk must be the model's: a vocabulary of another model, or the
  // two given in the wrong order, would translate into nonsense.
  void check_ids(const data::Vocab& src, const data::Vocab& tgt, const std::string& path) const {
    for (const data::Vocab* v : {&src, &tgt}) {
      if (v->eos_id() != config_.eos_id || (config_.unk_id >= 0 && v->unk_id() != config_.unk_id))
        throw Error(str("the vocabulary '", v->path(), "' has eos ", v->eos_id(), " and unk ",
                        v->unk_id(), " but the model '", path, "' has eos ", config_.eos_id,
                        " and unk ", config_.unk_id,
                        "; give the vocabularies the model was trained with, source first"));
    }
  }

  static void check_size(const char* side, int64_t expected, const data::Vocab& vocab,
                         const std::string& model_path) {
    if (vocab.size() != expected)
      throw Error(str("the ", side, " vocabulary '", vocab.path(), "' has ", vocab.size(),
                      " pieces but the model '", model_path, "' expects ", expected,
                      "; give the vocabulary the model was trained with"));
  }

  io::ModelConfig config_;
  formats::Format format_ = formats::Format::tx;
  bool from_marian_ = false, from_huggingface_ = false;
  std::unique_ptr<data::Vocab> src_vocab_, tgt_vocab_;
  std::unique_ptr<Backend> backend_;
  nn::ParameterSet params_;
  nn::Transformer model_;
};

}  // namespace tx::app
