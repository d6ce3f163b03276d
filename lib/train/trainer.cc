#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "core/format.h"
#include "core/log.h"
#include "core/text_file.h"
#include "data/batcher.h"
#include "data/corpus.h"
#include "data/subword_sampling.h"
#include "data/vocab.h"
#include "data/vocab_train.h"
#include "formats/model_file.h"
#include "graph/graph.h"
#include "io/atomic_file.h"
#include "nn/param_scope.h"
#include "nn/transformer.h"
#include "train/checkpoint.h"
#include "train/early_stopping.h"
#include "train/guided_alignment.h"
#include "train/training_state.h"
#include "train/update_step.h"
#include "train/validation.h"

namespace tx::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int signal) {
  g_stop_signal = signal;
}

// Installs the SIGINT/SIGTERM handlers for the scope of a run and puts the old ones back.
class StopSignals {
 public:
  explicit StopSignals(bool on) : on_(on) {
    if (!on_) return;
    g_stop_signal = 0;
    struct sigaction sa = {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    if (!on_) return;
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  bool stop_requested() const { return on_ && g_stop_signal != 0; }

 private:
  bool on_;
  struct sigaction old_int_ = {}, old_term_ = {};
};

std::string scientific(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

void require_file(const std::string& path, const std::string& what) {
  TX_CHECK(!path.empty(), what, ": no file given");
  check_readable_file(path, what);
}

// The vocabulary at `path`, trained there from `inputs` first when the file does not exist
// and `may_train` (rank 0 of a data-parallel run trains it; the others read its file).
data::Vocab vocab_at(const std::string& path, const std::vector<std::string>& inputs,
                     const TrainerOptions& o, bool may_train, bool quiet) {
  std::error_code ec;
  if (!may_train)
    TX_CHECK(fs::exists(path, ec), "vocabulary '", path,
             "' that rank 0 trained is not visible to this process; put --model (and "
             "--vocabs) on a file system that every process of the run sees");
  if (!fs::exists(path, ec)) {
    const std::string suffix = ".spm";
    TX_CHECK(path.size() > suffix.size() &&
                 path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0,
             "vocabulary '", path,
             "' does not exist and cannot be trained there: its name must end in .spm");
    data::VocabTrainOptions vo;
    vo.inputs = inputs;
    vo.prefix = path.substr(0, path.size() - suffix.size());
    vo.vocab_size = o.vocab_size;
    vo.hard_vocab_limit = false;  // a small corpus gives a smaller vocabulary, not an error
    vo.seed = o.seed;
    data::VocabTrainResult r = data::train_vocab(vo);
    if (!quiet)
      log("trained vocabulary ", r.model_path, ": ", grouped(r.size), " pieces from ",
          grouped(r.sampled), " lines");
  }
  return data::Vocab(path);
}

// The update the run will stop at, from --after-updates and --after-epochs (the epochs' batch
// plans are pure functions of the corpus and seed, so a resumed run computes the same number;
// an update spans epoch boundaries, so the last one may be partial); 0 when neither is set.
int64_t planned_updates(const data::Batcher& batcher, const TrainerOptions& o,
                        int64_t batches_per_update) {
  int64_t updates = 0;
  if (o.after_epochs > 0) {
    int64_t batches = 0;
    for (int64_t e = 0; e < o.after_epochs; ++e) batches += batcher.plan(e).batches();
    updates = (batches + batches_per_update - 1) / batches_per_update;
  }
  if (o.after_updates > 0)
    updates = updates > 0 ? std::min(updates, o.after_updates) : o.after_updates;
  return updates;
}

}  // namespace

std::string Trainer::checkpoint_path(const std::string& model_dir) {
  return (fs::path(model_dir) / "checkpoint.safetensors").string();
}
std::string Trainer::model_path(const std::string& model_dir) {
  return (fs::path(model_dir) / "model.safetensors").string();
}
std::string Trainer::log_path(const std::string& model_dir) {
  return (fs::path(model_dir) / "train.log.jsonl").string();
}
std::string Trainer::snapshot_path(const std::string& model_dir, int64_t update) {
  return (fs::path(model_dir) / ("model.u" + std::to_string(update) + ".safetensors")).string();
}

std::vector<std::pair<int64_t, std::string>> Trainer::snapshots(const std::string& model_dir) {
  const std::string prefix = "model.u", suffix = ".safetensors";
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(model_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix))
      continue;
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    found.emplace_back(std::stoll(digits), e.path().string());
  }
  TX_CHECK(!ec, "cannot list the model directory '", model_dir, "': ", ec.message());
  std::sort(found.begin(), found.end());
  return found;
}

Trainer::Trainer(Backend& be, TrainerOptions options) : be_(be), options_(std::move(options)) {}

TrainerResult Trainer::run() {
  const TrainerOptions& o = options_;
  std::unique_ptr<Collective> alone;
  Collective& world = o.collective ? *o.collective : *(alone = single_process());
  const int ranks = world.size(), rank = world.rank();
  const bool writer = rank == 0;  // the one process that writes files and logs
  const bool quiet = o.quiet || !writer;
  // A file-size limit must surface as a failed write (tx::Error), not kill the process.
  std::signal(SIGXFSZ, SIG_IGN);

  // ---- check the options and inputs before anything is written --------------------------------
  TX_CHECK(!o.model_dir.empty(), "no model directory given; pass --model DIR");
  require_file(o.train_src, "training source file (--train-sets)");
  require_file(o.train_tgt, "training target file (--train-sets)");
  const bool validate = !o.valid_src.empty() || !o.valid_tgt.empty();
  if (validate) {
    require_file(o.valid_src, "validation source file (--valid-sets)");
    require_file(o.valid_tgt, "validation target file (--valid-sets)");
    TX_CHECK(!o.valid_metrics.empty(),
             "--valid-metrics is empty; give cross-entropy, perplexity, bleu or chrf");
    for (const std::string& m : o.valid_metrics)
      TX_CHECK(m == "cross-entropy" || m == "perplexity" || m == "bleu" || m == "chrf",
               "unknown validation metric '", m, "'; use cross-entropy, perplexity, bleu or chrf");
  }
  TX_CHECK(o.optimizer_delay >= 1, "--optimizer-delay must be 1 or more");
  TX_CHECK(o.disp_freq >= 1 && o.save_freq >= 1 && o.valid_freq >= 1,
           "--disp-freq, --save-freq and --valid-freq must be 1 or more");
  std::error_code ec;
  fs::create_directories(o.model_dir, ec);
  TX_CHECK(fs::is_directory(o.model_dir), "cannot create the model directory '", o.model_dir, "'",
           ec ? ": " + ec.message() : std::string(), "; check the path and permissions");

  // ---- a model to start from ------------------------------------------------------------------
  formats::ModelFile pretrained;
  std::map<std::string, std::string> model_meta;  // what every model file written carries
  if (!o.pretrained_model.empty()) {
    pretrained = formats::read_model_file(o.pretrained_model);
    if (pretrained.format == formats::Format::tx) {
      pretrained.config = read_model_config(o.pretrained_model);
      const auto meta = read_checkpoint_metadata(o.pretrained_model);
      const auto found = meta.find(formats::kVocabsKey);
      if (found != meta.end())
        pretrained.vocabs =
            formats::vocab_files_from_json(found->second, str("model '", o.pretrained_model, "'"));
    }
    if (pretrained.vocabs.kind == formats::VocabKind::marian && !o.src_vocab.empty())
      pretrained.vocabs.paths = {o.src_vocab, o.tgt_vocab};
    if (pretrained.vocabs.kind != formats::VocabKind::tx) {
      TX_CHECK(pretrained.vocabs.paths.size() == 2, "give the vocabularies of the model '",
               o.pretrained_model, "' with --vocabs SRC TGT (its .yml or .spm files)");
      model_meta[formats::kVocabsKey] = formats::vocab_files_json(pretrained.vocabs);
    }
  }

  // ---- vocabularies ----------------------------------------------------------------------------
  std::string src_vocab_path = o.src_vocab, tgt_vocab_path = o.tgt_vocab;
  if (src_vocab_path.empty() != tgt_vocab_path.empty())
    throw Error(
        "give both vocabularies (--vocabs SRC.spm TGT.spm), or one path twice for a "
        "joint one");
  if (src_vocab_path.empty()) {
    const bool joint = o.model.tied_embeddings == io::TiedEmbeddings::all;
    const fs::path dir(o.model_dir);
    src_vocab_path = (dir / (joint ? "vocab.spm" : "vocab.src.spm")).string();
    tgt_vocab_path = (dir / (joint ? "vocab.spm" : "vocab.tgt.spm")).string();
  }
  const bool joint_vocab = src_vocab_path == tgt_vocab_path;
  std::unique_ptr<data::Vocab> src_vocab, tgt_vocab_own;
  auto load_vocabs = [&]() {
    if (joint_vocab) {
      src_vocab = std::make_unique<data::Vocab>(
          vocab_at(src_vocab_path, {o.train_src, o.train_tgt}, o, writer, quiet));
    } else {
      src_vocab =
          std::make_unique<data::Vocab>(vocab_at(src_vocab_path, {o.train_src}, o, writer, quiet));
      tgt_vocab_own =
          std::make_unique<data::Vocab>(vocab_at(tgt_vocab_path, {o.train_tgt}, o, writer, quiet));
    }
  };
  const formats::VocabFiles& imported = pretrained.vocabs;
  if (imported.kind != formats::VocabKind::tx) {
    // The imported model's own vocabularies, read as its engine reads them.
    src_vocab = std::make_unique<data::Vocab>(formats::open_vocab(imported, 0));
    tgt_vocab_own = std::make_unique<data::Vocab>(formats::open_vocab(imported, 1));
  } else {
    // Trained once, by rank 0; the others read its files once it is done.
    if (writer) load_vocabs();
    world.barrier();
    if (!writer) load_vocabs();
  }
  const data::Vocab& tgt_vocab = tgt_vocab_own ? *tgt_vocab_own : *src_vocab;

  // ---- model config -------------------------------------------------------------------------
  io::ModelConfig config = o.model;
  if (!o.pretrained_model.empty()) {
    // The imported architecture; the regularisation is this run's.
    config = pretrained.config;
    if (pretrained.format == formats::Format::marian)
      formats::adopt_marian_ids(config, *src_vocab, tgt_vocab,
                                str("model '", o.pretrained_model, "'"));
    config.dropout = o.model.dropout;
    config.attention_dropout = o.model.attention_dropout;
    config.relu_dropout = o.model.relu_dropout;
    config.dropout_src = o.model.dropout_src;
    config.dropout_trg = o.model.dropout_trg;
    config.label_smoothing = o.model.label_smoothing;
    TX_CHECK(
        src_vocab->size() == config.src_vocab_size && tgt_vocab.size() == config.tgt_vocab_size,
        "the vocabularies '", src_vocab->path(), "' and '", tgt_vocab.path(), "' have ",
        src_vocab->size(), " and ", tgt_vocab.size(), " pieces but the model '", o.pretrained_model,
        "' has ", config.src_vocab_size, " and ", config.tgt_vocab_size,
        "; give the vocabularies the model was trained with (--vocabs)");
  }
  config.src_vocab_size = src_vocab->size();
  config.tgt_vocab_size = tgt_vocab.size();
  // The model's special ids are the vocabularies' (--pad-id and the like change neither).
  for (const data::Vocab* v : {static_cast<const data::Vocab*>(src_vocab.get()), &tgt_vocab}) {
    auto same = [](int32_t model, int32_t vocab) { return model < 0 || model == vocab; };
    TX_CHECK(v->eos_id() == config.eos_id && same(config.unk_id, v->unk_id()) &&
                 same(config.pad_id, v->pad_id()) && same(config.bos_id, v->bos_id()),
             "the vocabulary '", v->path(), "' has pad ", v->pad_id(), ", unk ", v->unk_id(),
             ", bos ", v->bos_id(), ", eos ", v->eos_id(), " but the model options say pad ",
             config.pad_id, ", unk ", config.unk_id, ", bos ", config.bos_id, ", eos ",
             config.eos_id, "; leave the id options at the vocabulary's");
  }
  TX_CHECK(config.tied_embeddings != io::TiedEmbeddings::all || joint_vocab ||
               !o.pretrained_model.empty(),
           "--tied-embeddings all needs one joint vocabulary: give one path twice in --vocabs "
           "(or none), or use --tied-embeddings decoder or none");
  // The layer and head are the model options' (a pretrained model's own when fine-tuning).
  if (!o.guided_alignment.empty() && config.alignment_head < 0) config.alignment_head = 0;
  config.validate(true, "the model options");

  // ---- data ---------------------------------------------------------------------------------
  data::CorpusOptions corpus_options;
  corpus_options.max_src_tokens = corpus_options.max_tgt_tokens = config.max_length - 1;
  const data::ParallelCorpus corpus =
      data::load_parallel_corpus(o.train_src, o.train_tgt, *src_vocab, tgt_vocab, corpus_options);
  if (!quiet) log("training data: ", corpus.stats().summary(corpus_options));
  std::unique_ptr<GuidedAlignments> alignments;
  if (!o.guided_alignment.empty()) {
    alignments = std::make_unique<GuidedAlignments>(o.guided_alignment);
    TX_CHECK(alignments->lines() == corpus.stats().pairs_read, "--guided-alignment: '",
             o.guided_alignment, "' has ", alignments->lines(), " lines but the training data ",
             corpus.stats().pairs_read, " pairs; give one alignment line per pair");
    alignments->check(corpus);
  }
  data::BatcherOptions batcher_options;
  batcher_options.ids = data::special_ids(config);
  batcher_options.max_tokens = o.max_tokens;
  batcher_options.max_sentences = o.max_sentences;
  batcher_options.maxi_batch = o.maxi_batch;
  batcher_options.seed = o.seed;
  data::Batcher batcher(corpus, batcher_options);
  // With subword sampling each epoch samples its own segmentation (set_resampling below).
  const bool sampling = std::any_of(o.sentencepiece_alphas.begin(), o.sentencepiece_alphas.end(),
                                    [](float a) { return a != 0; });
  const int64_t crop = std::min<int64_t>(config.max_length - 1, o.max_tokens - 1);

  std::optional<Validator> validator;
  if (validate) {
    ValidatorOptions vo;
    vo.max_tokens = std::max(o.valid_max_tokens, o.max_tokens);
    vo.translate_max_tokens = o.valid_max_tokens;
    vo.bleu =
        std::find(o.valid_metrics.begin(), o.valid_metrics.end(), "bleu") != o.valid_metrics.end();
    vo.chrf =
        std::find(o.valid_metrics.begin(), o.valid_metrics.end(), "chrf") != o.valid_metrics.end();
    vo.beam_size = o.beam_size;
    vo.normalize = o.normalize;
    vo.gemm_dtype = o.precision;
    validator.emplace(be_, config, *src_vocab, tgt_vocab, o.valid_src, o.valid_tgt, corpus_options,
                      vo);
  }

  // ---- model, optimiser, state ----------------------------------------------------------------
  nn::ParameterSet params;
  Rng init_rng(o.seed);
  nn::Transformer model(nn::ParamScope(be_, params, init_rng), config);
  Adam adam(be_, params, o.adam);
  if (sampling) {
    TX_CHECK(o.sentencepiece_alphas.size() <= 2, "--sentencepiece-alphas takes one alpha per ",
             "vocabulary (source, target), got ", o.sentencepiece_alphas.size());
    for (float a : o.sentencepiece_alphas)
      TX_CHECK(std::isfinite(a) && a >= 0, "--sentencepiece-alphas ", a,
               " must be 0 (the best segmentation) or more");
    TX_CHECK(o.guided_alignment.empty(), "--sentencepiece-alphas changes the pieces that ",
             "--guided-alignment's positions count; use one or the other (as Marian)");
    data::SubwordSampling sampling_options;
    sampling_options.src_alpha = o.sentencepiece_alphas[0];
    sampling_options.tgt_alpha = o.sentencepiece_alphas.size() > 1 ? o.sentencepiece_alphas[1] : 0;
    for (const auto& [alpha, vocab] :
         {std::pair<float, const data::Vocab*>{sampling_options.src_alpha, src_vocab.get()},
          std::pair<float, const data::Vocab*>{sampling_options.tgt_alpha, &tgt_vocab}})
      TX_CHECK(alpha == 0 || vocab->has_sentencepiece(), "--sentencepiece-alphas: '", vocab->path(),
               "' is not a SentencePiece model; give 0 for its side");
    sampling_options.seed = o.seed;
    sampling_options.max_src_tokens = sampling_options.max_tgt_tokens = crop;
    batcher.set_resampling([&, sampling_options](int64_t epoch) {
      return data::sample_corpus(o.train_src, o.train_tgt, *src_vocab, tgt_vocab, corpus, epoch,
                                 sampling_options);
    });
    // Epoch 0's sample now: the schedule's length is planned on its lengths (every epoch's
    // would cost a sampling pass each; they differ by a few batches).
    batcher.batches_in_epoch();
    if (!quiet)
      log("subword sampling: each epoch segments the pairs anew, alpha ",
          sampling_options.src_alpha, " (source) and ", sampling_options.tgt_alpha, " (target)");
  }
  LrOptions lr_options = o.lr;
  lr_options.d_model = config.d_model;
  // Planning every epoch's batches costs a shuffle and a sort of the corpus per epoch: only
  // for a schedule that needs the last update.
  if (lr_options.needs_total_updates() && lr_options.total_updates <= 0)
    lr_options.total_updates = planned_updates(batcher, o, int64_t(ranks) * o.optimizer_delay);
  const LrSchedule schedule = LrSchedule::from_options(lr_options);
  EarlyStopping stopper(validate ? o.valid_metrics.front() : "cross-entropy", o.early_stopping);

  TrainingState state;
  state.rng_seed = o.seed ^ 0x9E3779B97F4A7C15ull;  // dropout: a stream apart from the init's
  int64_t epoch_sentences = 0;                      // "Sen." counts within the epoch
  TrainerResult result;
  const std::string ckpt = checkpoint_path(o.model_dir);
  // The writer's files only: another process removing them could race rank 0's next save.
  if (writer) {
    if (const int stale = io::remove_stale_temporaries(o.model_dir); stale > 0 && !quiet)
      log("removed ", stale, " unfinished file", stale == 1 ? "" : "s",
          " of an interrupted earlier run from ", o.model_dir);
  }
  if (!o.pretrained_model.empty() && !fs::exists(ckpt, ec)) {
    if (pretrained.format == formats::Format::tx)
      load_model(o.pretrained_model, be_, config, params);
    else
      nn::load_parameters(pretrained.params, be_, params, str("model '", o.pretrained_model, "'"));
    if (!quiet)
      log("starting from ", formats::name_of(pretrained.format), " model ", o.pretrained_model);
  }
  if (fs::exists(ckpt, ec)) {
    state = load_checkpoint(ckpt, be_, config, params, adam);
    TX_CHECK(state.data_position.size() == 3, "checkpoint '", ckpt,
             "' holds no tx-train data position; remove it or use another --model directory");
    batcher.seek({state.data_position[0], state.data_position[1]});
    epoch_sentences = state.data_position[2];
    if (validate && state.early_stopping.validations > 0) stopper.restore(state.early_stopping);
    result.resumed = true;
    if (!quiet)
      log("resuming from ", ckpt, " at update ", grouped(state.update), ", epoch ",
          state.epoch + 1);
  }
  Graph graph(be_, GraphOptions{true, true, state.rng_seed, true, o.precision});
  graph.rng().set_counter(state.rng_counter);
  LossScalerOptions scaling = o.loss_scaling;
  scaling.enabled = o.precision == DType::f16;
  LossScaler scaler(scaling);
  if (scaler.enabled() && state.loss_scale > 0)
    scaler.restore(state.loss_scale, state.loss_scale_clean);
  UpdateStep step(be_, model, params, adam, graph, config, world, o.optimizer_delay, scaler);
  if (alignments)
    step.set_alignment({alignments.get(), &corpus, o.guided_alignment_weight,
                        config.aligned_layer(), config.alignment_head});
  ExponentialSmoothing smoothing(be_, params, step.flat_params(), o.smoothing);
  if (smoothing.enabled() && result.resumed && !load_smoothed(ckpt, be_, smoothing.tensors()) &&
      !quiet)
    log("the checkpoint has no smoothed weights: smoothing starts from its weights");
  if (!quiet)
    log("model: ", grouped(params.numel()), " parameters, vocabularies ",
        grouped(config.src_vocab_size), "/", grouped(config.tgt_vocab_size), "; learning rate ",
        schedule.describe(), "; device ", be_.name());
  if (!quiet && o.precision != DType::f32)
    log("precision: ", name_of(o.precision), " GEMM operands, f32 sums, weights and optimiser",
        scaler.enabled() ? str("; loss scale ", scaler.scale()) : std::string());
  if (!quiet && smoothing.enabled())
    log("exponential smoothing: factor ", o.smoothing.factor,
        o.smoothing.reference_words > 0
            ? str(" per ", grouped(o.smoothing.reference_words), " target words")
            : std::string(),
        "; validation and the model files use the smoothed weights");
  if (!quiet && ranks > 1)
    log("data parallel: ", world.describe(), "; an update is ", ranks, " x ", o.optimizer_delay,
        " batches");

  std::ofstream json_log;
  if (writer) {
    json_log.open(log_path(o.model_dir), std::ios::app);
    TX_CHECK(json_log, "cannot open '", log_path(o.model_dir),
             "' for appending; check the "
             "model directory's permissions");
  }
  auto write_json = [&](const nlohmann::json& j) {
    if (!writer) return;
    json_log << j.dump() << '\n';
    json_log.flush();
    TX_CHECK(json_log, "writing '", log_path(o.model_dir), "' failed (disk full?)");
  };

  // The model files of the weights as they are now: model.safetensors, and the snapshot
  // --keep-last keeps (older ones beyond the newest keep_last removed). Each names its update.
  // With smoothing, the smoothed weights (swapped in and out around the writes).
  auto save_models = [&]() {
    if (!writer) return;
    std::map<std::string, std::string> meta = model_meta;
    meta[kUpdateKey] = std::to_string(state.update);
    smoothing.swap();
    save_model(model_path(o.model_dir), be_, config, params, meta);
    if (o.keep_last > 0)
      save_model(snapshot_path(o.model_dir, state.update), be_, config, params, meta);
    smoothing.swap();
    if (o.keep_last <= 0) return;
    std::vector<std::pair<int64_t, std::string>> old = snapshots(o.model_dir);
    for (size_t i = 0; i + size_t(o.keep_last) < old.size(); ++i) fs::remove(old[i].second, ec);
  };
  // The checkpoint first: it is the truth a resume starts from (see trainer.h).
  auto save = [&]() {
    const data::BatchPosition pos = batcher.position();
    state.epoch = pos.epoch;
    state.data_position = {pos.epoch, pos.batch, epoch_sentences};
    state.rng_counter = graph.rng().counter();
    state.early_stopping = stopper.state();
    state.loss_scale = scaler.enabled() ? scaler.scale() : 0;
    state.loss_scale_clean = scaler.enabled() ? scaler.clean_updates() : 0;
    graph.trim();  // the host copies of the checkpoint need not stack on the step's memory
    if (writer) save_checkpoint(ckpt, be_, config, params, adam, state, {}, smoothing.tensors());
    save_models();
  };
  // After a crash between the checkpoint's rename and the model's, model.safetensors is one
  // save behind the checkpoint: put the checkpoint's weights there before going on.
  if (result.resumed && writer) {
    std::string model_update;
    try {
      const auto meta = read_checkpoint_metadata(model_path(o.model_dir));
      auto it = meta.find(kUpdateKey);
      if (it != meta.end()) model_update = it->second;
    } catch (const Error&) {  // missing or unreadable: rewritten below
    }
    const bool snapshot_missing =
        o.keep_last > 0 && !fs::exists(snapshot_path(o.model_dir, state.update), ec);
    if (model_update != std::to_string(state.update) || snapshot_missing) {
      if (!quiet)
        log(model_path(o.model_dir), " is not the checkpoint's update ", state.update,
            "; writing the checkpoint's weights there");
      save_models();
    }
  }

  // ---- the loop ---------------------------------------------------------------------------------
  StopSignals signals(o.handle_signals);
  data::Batch batch;
  // The next batch; false once --after-epochs epochs are done.
  auto fetch = [&]() {
    for (;;) {
      if (o.after_epochs > 0 && batcher.position().epoch >= o.after_epochs) return false;
      if (batcher.next(batch)) return true;
      epoch_sentences = 0;
      if (!quiet) log("Ep. ", batcher.position().epoch, " : finished");
    }
  };

  // TX_PROFILE=1: each log line also says how much of its span went to GEMMs (a diagnostic for
  // bench/peers/train.py; GEMMs are synchronised, so a GPU loses its overlap).
  if (const char* p = std::getenv("TX_PROFILE"); p && *p && std::string(p) != "0") {
    be_.set_profiling(true);
    be_.take_gemm_tally();
  }
  double span_cost = 0, span_reduce_secs = 0;
  int64_t span_tokens = 0, span_words = 0, span_updates = 0;
  auto span_start = Clock::now();
  double lr = 0;
  bool done = false;
  // Every process's batches pass here: the counters count them all.
  auto next_batch = [&]() -> const data::Batch* {
    if (!fetch()) return nullptr;
    span_tokens += batch.tgt_tokens();
    span_words += batch.tgt_tokens();
    epoch_sentences += batch.size;
    return &batch;
  };
  while (!done) {
    if (o.after_updates > 0 && state.update >= o.after_updates) break;
    lr = schedule(state.update + 1);
    const UpdateStep::Result update =
        step.run(next_batch, lr, [&]() { return signals.stop_requested(); });
    if (!update.complete) done = true;
    if (update.tokens == 0) break;  // the same on every process: they all read every batch
    const bool stop = update.stop;
    const AdamStepInfo& info = update.adam;
    span_cost += update.cost;
    span_reduce_secs += update.reduce_secs;
    ++state.update;
    ++span_updates;
    if (!info.skipped) smoothing.update(state.update - 1, update.tokens);
    if (info.skipped && !quiet) {
      if (scaler.enabled())
        log("update ", grouped(state.update), ": fp16 gradients overflowed at loss scale ",
            update.loss_scale, "; update skipped, scale now ", scaler.scale());
      else
        log("update ", grouped(state.update), ": gradient norm is not finite; update skipped");
    }
    if (!quiet && stderr_is_terminal()) {
      const double secs = std::chrono::duration<double>(Clock::now() - span_start).count();
      std::string eta;
      if (o.after_updates > 0 && secs > 0)
        eta = " : ETA " +
              duration_text(double(o.after_updates - state.update) * secs / double(span_updates));
      progress(str("Ep. ", batcher.position().epoch + 1, " : Up. ", grouped(state.update), " : ",
                   grouped(int64_t(std::llround(span_words / std::max(secs, 1e-9)))), " words/s",
                   eta));
    }

    if (state.update % o.disp_freq == 0 || done) {
      const double secs = std::chrono::duration<double>(Clock::now() - span_start).count();
      const double cost = span_cost / double(std::max<int64_t>(span_tokens, 1));
      const int64_t epoch = batcher.position().epoch + 1;
      const double wps = secs > 0 ? double(span_words) / secs : 0;
      if (!quiet)
        log("Ep. ", epoch, " : Up. ", grouped(state.update), " : Sen. ", grouped(epoch_sentences),
            " : Cost ", fixed(cost, 2), " : Time ", fixed(secs, 1),
            "s : ", grouped(int64_t(std::llround(wps))), " words/s : L.r. ", scientific(lr));
      nlohmann::json j = {{"type", "train"},        {"epoch", epoch},
                          {"update", state.update}, {"sentences", epoch_sentences},
                          {"cost", cost},           {"time_s", secs},
                          {"words_per_s", wps},     {"lr", lr}};
      // Seconds in the gradient all-reduce, waiting for the slowest process included.
      if (ranks > 1) j["allreduce_s"] = span_reduce_secs;
      if (scaler.enabled()) j["loss_scale"] = scaler.scale();
      if (be_.profiling()) {
        const Backend::GemmTally t = be_.take_gemm_tally();
        j["gemm_s"] = t.seconds;
        j["gemm_gflop"] = t.flop / 1e9;
      }
      write_json(j);
      result.costs.push_back(cost);
      result.last_cost = cost;
      span_cost = span_reduce_secs = 0;
      span_tokens = span_words = span_updates = 0;
      span_start = Clock::now();
    }

    if (validate && state.update % o.valid_freq == 0) {
      // Rank 0 validates; every process takes its score, so all stop early together.
      Validation v;
      graph.trim();      // validation's own arena need not stack on the training step's
      smoothing.swap();  // validation, and the best model's file, on the smoothed weights
      if (writer) v = validator->run(model);
      world.broadcast(&v, sizeof v, 0);
      const double score = v.score(stopper.metric());
      const bool best = stopper.update(score);
      result.last_valid_ce = v.ce;
      nlohmann::json j = {{"type", "valid"},
                          {"update", state.update},
                          {"cross-entropy", v.ce},
                          {"perplexity", v.perplexity},
                          {"stalled", stopper.stalled()}};
      std::string line =
          str("Ep. ", batcher.position().epoch + 1, " : Up. ", grouped(state.update),
              " : cross-entropy : ", fixed(v.ce, 4), " : perplexity : ", fixed(v.perplexity, 4));
      if (v.bleu >= 0) {
        j["bleu"] = v.bleu;
        line += " : bleu : " + fixed(v.bleu, 2);
      }
      if (v.chrf >= 0) {
        j["chrf"] = v.chrf;
        line += " : chrf : " + fixed(v.chrf, 2);
      }
      line += best ? " : new best" : str(" : stalled ", stopper.stalled(), " times");
      if (!quiet) log(line);
      write_json(j);
      if (best && writer)
        save_model(
            (fs::path(o.model_dir) / ("model.best-" + stopper.metric() + ".safetensors")).string(),
            be_, config, params, model_meta);
      smoothing.swap();
      if (stopper.should_stop()) {
        if (!quiet)
          log("early stopping: ", stopper.metric(), " did not improve in ", stopper.stalled(),
              " validations");
        result.early_stopped = true;
        done = true;
      }
    }

    if (state.update % o.save_freq == 0) save();
    if (o.after_update) o.after_update(state.update);
    if (ranks > 1 ? stop : signals.stop_requested()) {
      if (!quiet)
        log(g_stop_signal ? str("stopping on signal ", int(g_stop_signal))
                          : std::string("stopping on a signal to another process"),
            ": saving a checkpoint");
      result.interrupted = true;
      done = true;
    }
  }

  progress_done();
  save();
  if (!quiet)
    log("training finished at update ", grouped(state.update), "; saved ", ckpt, " and ",
        model_path(o.model_dir));
  result.updates = state.update;
  result.epochs = batcher.position().epoch;
  return result;
}

}  // namespace tx::train
