// What tx-translate and tx-score do first: open the device; for each model of -m, read its
// config (from a tx checkpoint, or from a Marian or Hugging Face model through formats/), load
// its vocabularies, check that they fit the model, build the Transformer and load its weights;
// for an ensemble, check that every model has the first's vocabularies and read --weights.
// Header-only: only the programs that run a model (and link tx_backends) include it.
#pragma once

#include <algorithm>
#include <cmath>
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

// One model of -m on the run's backend. The options it reads: vocabs (one joint or source +
// target), int8, precision.
class LoadedModel {
 public:
  // `precision`: checked_precision's, once for all models.
  LoadedModel(const Options& options, const std::string& path, Backend& backend, DType precision)
      : path_(path) {
    std::vector<std::string> vocabs =  // 1 or 2 when given (checked with the options)
        options.has("vocabs") ? options.list("vocabs") : std::vector<std::string>();
    // The cheap checks first: a tx config is in the header, a vocabulary loads in
    // milliseconds. An imported model is read whole here (its tensors change names and
    // layouts on the way).
    formats::ModelFile file = formats::read_model_file(path);
    format_ = file.format;
    std::string recorded_fingerprint;  // the pieces a tx file records (vocab_fingerprint); "": none
    bool names_vocabs = false;         // a tx file made from another engine's model (tx.vocabs)
    if (file.format == formats::Format::tx) {
      config_ = train::read_model_config(path);
      // A tx file made from an imported model reads its vocabularies as the original's.
      const auto metadata = train::read_checkpoint_metadata(path);
      const auto found = metadata.find(formats::kVocabsKey);
      if (found != metadata.end()) {
        names_vocabs = true;
        const formats::VocabFiles files =
            formats::vocab_files_from_json(found->second, str("model '", path, "'"));
        from_marian_ = files.kind == formats::VocabKind::marian;
        from_huggingface_ = files.kind == formats::VocabKind::pieces;
        from_fairseq_ = files.kind == formats::VocabKind::fairseq;
        load_vocabs(files, path, vocabs);
      } else {
        if (vocabs.empty())
          throw UsageError("give the vocabularies with -v/--vocabs SRC.spm TGT.spm (or one joint)");
        src_vocab_ = std::make_unique<data::Vocab>(vocabs.front());
        tgt_vocab_ = std::make_unique<data::Vocab>(vocabs.back());
      }
      const auto print = metadata.find(train::kVocabFingerprintKey);
      if (print != metadata.end()) recorded_fingerprint = print->second;
    } else {
      config_ = file.config;
      from_marian_ = file.format == formats::Format::marian;
      from_huggingface_ = file.format == formats::Format::huggingface;
      from_fairseq_ = file.format == formats::Format::fairseq;
      load_vocabs(file.vocabs, path, vocabs);
      if (from_marian_)
        formats::adopt_marian_ids(config_, *src_vocab_, *tgt_vocab_, str("model '", path, "'"));
    }
    check_size("source", config_.src_vocab_size, *src_vocab_, path);
    check_size("target", config_.tgt_vocab_size, *tgt_vocab_, path);
    check_ids(*src_vocab_, *tgt_vocab_, path);
    // Another vocabulary of the model's size would translate every id as another piece.
    TX_CHECK(recorded_fingerprint.empty() ||
                 recorded_fingerprint == data::pair_fingerprint(*src_vocab_, *tgt_vocab_),
             data::not_trained_on(*src_vocab_, *tgt_vocab_, str("the model '", path, "'")),
             names_vocabs ? "; leave out -v to use the vocabularies the model names"
                          : "; give the vocab*.spm files tx-train wrote beside it");

    if (file.format == formats::Format::tx && !names_vocabs && recorded_fingerprint.empty())
      info(options, "the model '", path,
           "' records no vocab_fingerprint (tx-train wrote it before it recorded one): its "
           "vocabularies are checked by size only, so give the .spm files trained with it");
    model_ = nn::Transformer(nn::ParamScope::for_loading(backend, params_), config_);
    if (file.format == formats::Format::tx)
      train::load_model(path, backend, config_, params_);
    else
      nn::load_parameters(std::move(file.params), backend, params_, str("model '", path, "'"));
    model_.prepare_inference(backend, options.flag("int8")       ? ops::WeightForm::int8
                                      : precision == DType::bf16 ? ops::WeightForm::bf16
                                      : precision == DType::f16  ? ops::WeightForm::f16
                                                                 : ops::WeightForm::f32);
    detail(options, formats::name_of(file.format), " model ", path, " on ", backend.name(),
           ": d_model ", config_.d_model, ", ", config_.encoder_layers, "+", config_.decoder_layers,
           " layers, vocabularies ", config_.src_vocab_size, "/", config_.tgt_vocab_size,
           "; architecture ", config_.to_json_string());
  }
  LoadedModel(const LoadedModel&) = delete;
  LoadedModel& operator=(const LoadedModel&) = delete;

  const std::string& path() const { return path_; }
  formats::Format format() const { return format_; }
  // A Marian model, or a tx file made from one (tx-average): marian-decoder's search applies.
  bool from_marian() const { return from_marian_; }
  // A Hugging Face model, or a tx file made from one: generate()'s search applies.
  bool from_huggingface() const { return from_huggingface_; }
  // A fairseq model, or a tx file made from one: fairseq-generate's --min-len 1 applies.
  bool from_fairseq() const { return from_fairseq_; }
  const io::ModelConfig& config() const { return config_; }
  const nn::Transformer& model() const { return model_; }
  const data::Vocab& src_vocab() const { return *src_vocab_; }
  const data::Vocab& tgt_vocab() const { return *tgt_vocab_; }

 private:
  // An imported model's vocabularies: those given with -v, else those found with the model.
  void load_vocabs(const formats::VocabFiles& found, const std::string& model,
                   std::vector<std::string> given) {
    if (found.kind == formats::VocabKind::pieces || found.kind == formats::VocabKind::fairseq) {
      if (!given.empty())
        throw UsageError(str(
            "-v/--vocabs: the ",
            found.kind == formats::VocabKind::pieces ? "Hugging Face model '" : "fairseq model '",
            model,
            found.kind == formats::VocabKind::pieces
                ? "' brings its own (source.spm, target.spm, vocab.json)"
                : "' brings its own (the dict.LANG.txt files fairseq.json names)",
            "; leave -v out"));
      src_vocab_ = std::make_unique<data::Vocab>(formats::open_vocab(found, 0));
      tgt_vocab_ = std::make_unique<data::Vocab>(formats::open_vocab(found, 1));
      return;
    }
    if (given.size() == 2 && found.paths.size() == 2 && swapped(given, found.paths))
      throw Error(str("--vocabs gives '", given.front(), "' first, but the model '", model,
                      "' names it as its target vocabulary (decoder.yml); give the source "
                      "vocabulary first, then the target's"));
    if (given.empty()) {
      given = found.paths;
      for (const std::string& p : given)
        if (!std::filesystem::exists(p))
          throw Error(str("the vocabulary '", p, "' that the model '", model,
                          "' names (a Marian model in its decoder.yml, a tx file in its "
                          "tx.vocabs) is missing; give its vocabularies with -v/--vocabs SRC "
                          "TGT"));
    }
    if (given.empty())
      throw UsageError(str("give the vocabularies of the Marian model '", model,
                           "' with -v/--vocabs SRC TGT (its .yml or .spm files, as for "
                           "marian-decoder)",
                           found.why_none.empty() ? "" : "; " + found.why_none));
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

  std::string path_;
  io::ModelConfig config_;
  formats::Format format_ = formats::Format::tx;
  bool from_marian_ = false, from_huggingface_ = false, from_fairseq_ = false;
  std::unique_ptr<data::Vocab> src_vocab_, tgt_vocab_;
  nn::ParameterSet params_;
  nn::Transformer model_;
};

// The models of -m on one backend. One model is the usual run; several are an ensemble
// (decode::BeamSearch's rule), whose vocabularies are the first model's: every other model must
// have the same pieces in the same order (a tx model fine-tuned from a Marian one does). The
// options it reads: model, weights, device, cpu-threads, tf32 and LoadedModel's.
class LoadedModels {
 public:
  explicit LoadedModels(const Options& options) {
    if (!options.has("model") || options.list("model").empty())
      throw UsageError("give the model file with -m/--model");
    const std::vector<std::string> paths = options.list("model");
    if (options.has("weights")) {
      const std::vector<std::string> given = options.list("weights");
      if (given.size() != paths.size())
        throw UsageError(str("--weights: ", given.size(), " weight", given.size() == 1 ? "" : "s",
                             " for ", paths.size(), " model", paths.size() == 1 ? "" : "s",
                             " (-m); give one per model, in -m's order"));
      for (const std::string& w : given) weights_.push_back(weight(w));
      // A weight of 0 or below is Marian's too (a negative one steers away from that model's
      // choices), but with none above 0 no model says what a good translation is.
      if (std::none_of(weights_.begin(), weights_.end(), [](float w) { return w > 0; }))
        throw UsageError(str("--weights ", join(given),
                             ": no weight is above 0, so no model ranks the translations; give "
                             "the models that should decide a positive weight"));
      for (size_t i = 0; i < weights_.size(); ++i)
        if (weights_[i] <= 0)
          info(options, "--weights: model ", paths[i], " has weight ", given[i],
               weights_[i] == 0 ? ": it is run but has no say"
                                : ": its preferences count against a translation");
    }
    register_builtin_backends();
    backend_ = create_backend(options.text("device"), options.backend_options());
    // Before any model is read (a large one takes a while): --int8 beside --precision, a
    // precision the device lacks; its note once, not once per model.
    const DType precision = checked_precision(options, *backend_);
    for (const std::string& path : paths) {
      models_.push_back(std::make_unique<LoadedModel>(options, path, *backend_, precision));
      if (models_.size() > 1) {
        check_same_vocabs(*models_.front(), *models_.back());
        check_same_start(*models_.front(), *models_.back());
      }
    }
    if (models_.size() > 1)
      detail(options, "ensemble of ", models_.size(), " models, weights ",
             weights_.empty() ? std::string("1/N each") : join(options.list("weights")));
  }

  Backend& backend() const { return *backend_; }
  const LoadedModel& first() const { return *models_.front(); }
  size_t size() const { return models_.size(); }
  const LoadedModel& operator[](size_t i) const { return *models_.at(i); }
  std::vector<const nn::Transformer*> transformers() const {
    std::vector<const nn::Transformer*> out;
    for (const auto& m : models_) out.push_back(&m->model());
    return out;
  }
  // One per model as given, or empty: 1/N each (decode::BeamSearch).
  const std::vector<float>& weights() const { return weights_; }
  // The weight of model i as the ensemble uses it.
  double weight(size_t i) const {
    return weights_.empty() ? 1.0 / double(models_.size()) : double(weights_.at(i));
  }
  // The first model's: the vocabularies, the search rule, the positions every model covers.
  const data::Vocab& src_vocab() const { return first().src_vocab(); }
  const data::Vocab& tgt_vocab() const { return first().tgt_vocab(); }
  bool from_marian() const { return first().from_marian(); }
  bool from_huggingface() const { return first().from_huggingface(); }
  bool from_fairseq() const { return first().from_fairseq(); }
  int64_t max_length() const {
    int64_t fewest = first().config().max_length;
    for (const auto& m : models_) fewest = std::min<int64_t>(fewest, m->config().max_length);
    return fewest;
  }

 private:
  static float weight(const std::string& text) {
    const std::optional<double> w = parse_number(text);
    if (!w)
      throw UsageError(str("--weights: '", text, "' is not a number; give one weight per model"));
    // The search's sums of weighted log-probs must stay far above its "impossible" score
    // (-1e29) and above float's rounding: a weight of 1e28 made every hypothesis impossible,
    // one of 1e-45 rounded every score to 0.
    const double size = std::abs(*w);
    if (size != 0 && (size < 1e-6 || size > 1e6))
      throw UsageError(str("--weights: ", text,
                           " is outside the weights tx computes with (0, or 1e-6 to 1e6 either "
                           "side of 0); only the ratios of the weights matter to beam search, so "
                           "scale them into that range"));
    return static_cast<float>(*w);
  }

  static std::string join(const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& item : items) out += (out.empty() ? "" : " ") + item;
    return out;
  }

  // An ensemble's models share the first model's vocabularies: the same pieces under the
  // same ids, on each side.
  static void check_same_vocabs(const LoadedModel& first, const LoadedModel& other) {
    auto differ = [](const data::Vocab& a, const data::Vocab& b) -> std::string {
      if (a.size() != b.size()) return str(b.size(), " pieces against ", a.size());
      for (int32_t id = 0; id < a.size(); ++id)
        if (a.piece(id) != b.piece(id))
          return str("id ", id, " is '", b.piece(id), "' against '", a.piece(id), "'");
      return "";
    };
    const struct {
      const char* side;
      const data::Vocab &a, &b;
    } sides[] = {{"source", first.src_vocab(), other.src_vocab()},
                 {"target", first.tgt_vocab(), other.tgt_vocab()}};
    for (const auto& s : sides) {
      const std::string why = differ(s.a, s.b);
      if (!why.empty())
        throw Error(str("ensemble: the ", s.side, " vocabulary of model '", other.path(), "' ('",
                        s.b.path(), "') differs from that of model '", first.path(), "' ('",
                        s.a.path(), "'): ", why,
                        "; an ensemble's models must share their vocabularies"));
    }
  }

  // The search starts every model's decoder from one token (and tx-score scores as it does).
  static void check_same_start(const LoadedModel& first, const LoadedModel& other) {
    const io::ModelConfig &a = first.config(), &b = other.config();
    if (a.decoder_start_id != b.decoder_start_id || a.bos_id != b.bos_id || a.pad_id != b.pad_id)
      throw Error(str("ensemble: model '", other.path(), "' starts its decoder from id ",
                      b.decoder_start_id, " (bos ", b.bos_id, ", pad ", b.pad_id, ") but model '",
                      first.path(), "' from ", a.decoder_start_id, " (bos ", a.bos_id, ", pad ",
                      a.pad_id,
                      "); ensemble models of the same family (tx with tx, or a tx model "
                      "fine-tuned from a Marian model with that model)"));
  }

  std::unique_ptr<Backend> backend_;
  std::vector<std::unique_ptr<LoadedModel>> models_;
  std::vector<float> weights_;
};

}  // namespace tx::app
