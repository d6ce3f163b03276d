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
#include "core/rng.h"
#include "core/text_file.h"
#include "data/batcher.h"
#include "data/corpus.h"
#include "data/subword_sampling.h"
#include "data/vocab.h"
#include "data/vocab_train.h"
#include "formats/model_file.h"
#include "graph/graph.h"
#include "io/atomic_file.h"
#include "io/file_lock.h"
#include "nn/param_scope.h"
#include "nn/transformer.h"
#include "train/batch_plan.h"
#include "train/checkpoint.h"
#include "train/early_stopping.h"
#include "train/guided_alignment.h"
#include "train/run_files.h"
#include "train/run_inputs.h"
#include "train/run_schedule.h"
#include "train/stop_signals.h"
#include "train/time_budget.h"
#include "train/training_state.h"
#include "train/update_step.h"
#include "train/validation.h"

namespace tx::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string scientific(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

// The update the run will stop at, from --after-updates and --after-epochs (the epochs' batch
// plans are pure functions of the corpus and seed, so a resumed run computes the same number;
// an update spans epoch boundaries, so the last one may be partial); 0 when neither is set.
// `done` updates have brought the data to `from` (--no-restore-corpus: another plan's updates).
int64_t planned_updates(const data::Batcher& batcher, const TrainerOptions& o,
                        int64_t batches_per_update, data::BatchPosition from = {0, 0},
                        int64_t done = 0) {
  int64_t updates = 0;
  if (o.after_epochs > 0) {
    int64_t batches = -from.batch;
    for (int64_t e = from.epoch; e < o.after_epochs; ++e) batches += batcher.plan(e).batches();
    updates = done + (std::max<int64_t>(batches, 0) + batches_per_update - 1) / batches_per_update;
  }
  if (o.after_updates > 0)
    updates = updates > 0 ? std::min(updates, o.after_updates) : o.after_updates;
  return updates;
}

// Every process must read the same pairs: each takes its share of batches planned on its own
// copy, and a process with fewer would leave the others waiting in an all-reduce for ever (one
// with other tokens would train another model without a word). Throws on the process that
// differs; its error ends them all.
void check_same_data(Collective& world, const nlohmann::json& plan,
                     const data::ParallelCorpus& corpus) {
  uint64_t h = 0;
  for (int64_t i = 0; i < corpus.size(); ++i)
    for (const data::TokenSpan& s : {corpus.src(i), corpus.tgt(i)}) {
      for (const int32_t t : s) h = mix64(h ^ static_cast<uint32_t>(t));
      h = mix64(h ^ 0xfeedULL);  // the end of a sentence
    }
  nlohmann::json mine = plan;
  mine["tokens"] = hex16(h);
  const std::optional<nlohmann::json> first = first_if_different(world, mine);
  if (!first) return;
  const nlohmann::json& theirs = *first;
  std::string change;
  for (const auto& [key, value] : plan.items())
    if (theirs.value(key, nlohmann::json()) != value &&
        !(key == "lengths" && theirs.value("pairs", nlohmann::json()) != plan["pairs"])) {
      change += change.empty() ? "" : ", ";
      change += key == "lengths" ? std::string("pairs of other lengths")
                                 : str(key, " ", value.dump(), " against process 0's ",
                                       theirs.value(key, nlohmann::json()).dump());
    }
  if (change.empty()) change = "as many pairs of the same lengths, with other tokens";
  throw Error(str("this process's training data differ from process 0's (", change,
                  "); every process must read the same --train-sets files and vocabularies, "
                  "with the same flags (a copy on each machine must be identical)"));
}

// --sentencepiece-alphas: each epoch's pairs segmented anew by SentencePiece sampling.
void set_up_sampling(data::Batcher& batcher, const TrainerOptions& o, const RunInputs& in,
                     bool quiet) {
  // The alphas themselves were checked before the data was read (check_run_options).
  const data::Vocab& src_vocab = *in.src_vocab;
  const data::Vocab& tgt_vocab = in.tgt_vocab();
  data::SubwordSampling sampling;
  sampling.src_alpha = o.sentencepiece_alphas[0];
  sampling.tgt_alpha = o.sentencepiece_alphas.size() > 1 ? o.sentencepiece_alphas[1] : 0;
  for (const auto& [alpha, vocab] :
       {std::pair<float, const data::Vocab*>{sampling.src_alpha, &src_vocab},
        std::pair<float, const data::Vocab*>{sampling.tgt_alpha, &tgt_vocab}})
    TX_CHECK(alpha == 0 || vocab->has_sentencepiece(), "--sentencepiece-alphas: '", vocab->path(),
             "' is not a SentencePiece model; give 0 for its side");
  sampling.seed = o.seed;
  sampling.max_src_tokens = sampling.max_tgt_tokens =
      std::min<int64_t>(in.config.max_length - 1, o.max_tokens - 1);
  // The batcher calls this for the whole run: it holds pointers to what outlives the run's set-up.
  batcher.set_resampling([o = &o, src = &src_vocab, tgt = &tgt_vocab, corpus = in.corpus.get(),
                          sampling](int64_t epoch) {
    return data::sample_corpus(o->train_src, o->train_tgt, *src, *tgt, *corpus, epoch, sampling);
  });
  // Epoch 0's sample now: the schedule's length is planned on its lengths (every epoch's
  // would cost a sampling pass each; they differ by a few batches).
  batcher.batches_in_epoch();
  if (!quiet)
    log("subword sampling: each epoch segments the pairs anew, alpha ", sampling.src_alpha,
        " (source) and ", sampling.tgt_alpha, " (target)");
}

// The figures of the updates since the last log line.
struct DisplaySpan {
  double cost = 0, reduce_secs = 0;
  double grad_norms = 0;  // summed over the updates that were applied
  int64_t words = 0, updates = 0, applied = 0, clipped = 0;
  Clock::time_point start = Clock::now();

  double seconds() const { return std::chrono::duration<double>(Clock::now() - start).count(); }
  void restart() { *this = DisplaySpan(); }
};

// What the log says about the run before its first update.
void log_set_up(const TrainerOptions& o, const nn::ParameterSet& params,
                const io::ModelConfig& config, const std::string& schedule, const Backend& be,
                const LossScaler& scaler, const ExponentialSmoothing& smoothing,
                const Collective& world) {
  log("model: ", grouped(params.numel()), " parameters, vocabularies ",
      grouped(config.src_vocab_size), "/", grouped(config.tgt_vocab_size), "; learning rate ",
      schedule, "; device ", be.name());
  if (o.precision != DType::f32)
    log("precision: ", name_of(o.precision), " GEMM operands, f32 sums, weights and optimiser",
        scaler.enabled() ? str("; loss scale ", scaler.scale()) : std::string());
  if (smoothing.enabled())
    log("exponential smoothing: factor ", o.smoothing.factor,
        o.smoothing.reference_words > 0
            ? str(" per ", grouped(o.smoothing.reference_words), " target words")
            : std::string(),
        "; validation and the model files use the smoothed weights");
  if (world.size() > 1)
    log("data parallel: ", world.describe(), "; an update is ", world.size(), " x ",
        o.optimizer_delay, " batches");
}

// The log line and JSON record of a display span ending at `update`.
void log_span(const DisplaySpan& span, int64_t epoch, int64_t update, int64_t sentences, double lr,
              Backend& be, const LossScaler& scaler, const Collective& world, RunFiles& files,
              TrainerResult& result, bool quiet) {
  const double secs = span.seconds();
  const double cost = span.cost / double(std::max<int64_t>(span.words, 1));
  const double wps = secs > 0 ? double(span.words) / secs : 0;
  // Marian's gNorm: the mean global gradient norm (per target token, before clipping).
  const double grad_norm = span.grad_norms / double(std::max<int64_t>(span.applied, 1));
  if (!quiet)
    log("Ep. ", epoch, " : Up. ", grouped(update), " : Sen. ", grouped(sentences), " : Cost ",
        fixed(cost, 2), " : Time ", fixed(secs, 1), "s : ", grouped(int64_t(std::llround(wps))),
        " words/s : gNorm ", fixed(grad_norm, 4), " : L.r. ", scientific(lr),
        scaler.enabled() ? " : Loss scale " + shortest(float(scaler.scale())) : std::string());
  nlohmann::json j = {{"type", "train"},        {"epoch", epoch},
                      {"update", update},       {"sentences", sentences},
                      {"cost", cost},           {"time_s", secs},
                      {"words_per_s", wps},     {"lr", lr},
                      {"grad_norm", grad_norm}, {"clipped_updates", span.clipped}};
  // Seconds in the gradient all-reduce, waiting for the slowest process included.
  if (world.size() > 1) j["allreduce_s"] = span.reduce_secs;
  if (scaler.enabled()) j["loss_scale"] = scaler.scale();
  if (be.profiling()) {
    const Backend::GemmTally t = be.take_gemm_tally();
    j["gemm_s"] = t.seconds;
    j["gemm_gflop"] = t.flop / 1e9;
  }
  files.write_json(j);
  result.costs.push_back(cost);
  result.last_cost = cost;
}

// Validation after `update`: rank 0 scores the smoothed weights, every process takes the score
// (so all stop early together); logged, and the best model kept. True: stop early.
// Each of `metrics` (--valid-metrics) that beats its best in `best_scores` is recorded there
// and its model.best-<metric> written; the first is the stopper's.
bool validate(const Validator* validator, const nn::Transformer& model, int64_t epoch,
              int64_t update, Graph& graph, ExponentialSmoothing& smoothing, EarlyStopping& stopper,
              const std::vector<std::string>& metrics, std::map<std::string, double>& best_scores,
              Collective& world, RunFiles& files, TrainerResult& result, bool quiet) {
  Validation v;
  graph.trim();      // validation's own arena need not stack on the training step's
  smoothing.swap();  // validation, and the best model's file, on the smoothed weights
  if (world.rank() == 0) v = validator->run(model);
  world.broadcast(&v, sizeof v, 0);
  const bool best = stopper.update(v.score(stopper.metric()));
  result.last_valid_ce = v.ce;
  nlohmann::json j = {{"type", "valid"},
                      {"update", update},
                      {"cross-entropy", v.ce},
                      {"perplexity", v.perplexity},
                      {"stalled", stopper.stalled()}};
  std::string line =
      str("Ep. ", epoch, " : Up. ", grouped(update), " : cross-entropy : ", fixed(v.ce, 4),
          " : perplexity : ", fixed(v.perplexity, 4));
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
  files.write_json(j);
  for (const std::string& metric : metrics) {
    const double score = v.score(metric);
    const auto it = best_scores.find(metric);
    const bool improved = metric == stopper.metric()
                              ? best
                              : improves(direction_of(metric), score,
                                         it == best_scores.end() ? nullptr : &it->second);
    if (!improved) continue;
    best_scores[metric] = score;
    files.save_best(metric, update);
  }
  smoothing.swap();
  if (!stopper.should_stop()) return false;
  if (!quiet)
    log("early stopping: ", stopper.metric(), " did not improve in ", stopper.stalled(),
        " validations");
  return true;
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
  const int ranks = world.size();
  const bool writer = world.rank() == 0;  // the one process that writes files and logs
  const bool quiet = o.quiet || !writer;
  // A file-size limit must surface as a failed write (tx::Error), not kill the process.
  std::signal(SIGXFSZ, SIG_IGN);

  // ---- set-up: inputs, the model, the optimiser, the step -------------------------------------
  // A refusal after check_run_options (the data, another vocabulary, another architecture)
  // leaves nothing behind: the vocabularies the set-up wrote are removed (a next run would take
  // them as given, trained on the refused data), then the model directory if the run made it
  // and it is empty.
  std::error_code dir_ec;
  struct UndoSetUp {
    const std::string& dir;
    bool made_dir;
    std::vector<std::string> files;  // removed unless the set-up completes
    ~UndoSetUp() {
      std::error_code ec;
      for (const std::string& f : files) fs::remove(f, ec);
      if (made_dir && fs::is_directory(dir, ec) && fs::is_empty(dir, ec) && !ec)
        fs::remove(dir, ec);
    }
  } undo{o.model_dir, writer && !fs::exists(o.model_dir, dir_ec), {}};
  // Every process looks before any makes it (check_run_options).
  if (ranks > 1) world.barrier();
  check_run_options(o);
  // Two runs in one directory would each resume from the checkpoint and write over the other's
  // saves, interleaving one log.
  std::optional<io::FileLock> lock;
  if (writer) {
    const std::string lock_path = (fs::path(o.model_dir) / "train.lock").string();
    if (undo.made_dir) undo.files.push_back(lock_path);
    lock.emplace(lock_path);
    TX_CHECK(!lock->busy(), "another tx-train is training in --model '", o.model_dir,
             "' (it holds ", lock_path, "); wait for it to end, or give another --model");
    if (!lock->why_not().empty() && !quiet)
      log("cannot lock ", lock_path, " (", lock->why_not(),
          "): a second run in this directory would not be refused");
  }
  check_no_orphan_models(o.model_dir);
  // A directory the run cannot write in (read-only, immutable) would fail only at the first
  // save, after the training up to it: a file made and dropped now says so first.
  if (writer) {
    io::check_writable(checkpoint_path(o.model_dir));
    // The log is appended to, not replaced (a link to a file elsewhere stays one), but a pipe
    // there would block its open for good and a device swallow its records.
    const std::string kind = io::not_a_regular_file(log_path(o.model_dir));
    TX_CHECK(kind.empty(), "cannot write '", log_path(o.model_dir), "': it is ", kind,
             "; remove it (tx-train writes its log there as a regular file)");
  }
  const bool validate_on = !o.valid_src.empty() || !o.valid_tgt.empty();
  RunInputs in = read_run_inputs(o, world, writer, quiet, undo.files);
  const io::ModelConfig& config = in.config;
  data::BatcherOptions batcher_options;
  batcher_options.ids = data::special_ids(config);
  batcher_options.max_tokens = o.max_tokens;
  batcher_options.max_sentences = o.max_sentences;
  batcher_options.maxi_batch = o.maxi_batch;
  batcher_options.seed = o.seed;
  batcher_options.corpus_name =
      str("the training data '", o.train_src, "' and '", o.train_tgt, "'");
  data::Batcher batcher(*in.corpus, batcher_options);

  std::optional<Validator> validator;
  if (validate_on) {
    ValidatorOptions vo;
    vo.max_tokens = std::max(o.valid_max_tokens, o.max_tokens);
    vo.translate_max_tokens = o.valid_max_tokens;
    auto asked = [&](const char* m) {
      return std::find(o.valid_metrics.begin(), o.valid_metrics.end(), m) != o.valid_metrics.end();
    };
    vo.bleu = asked("bleu");
    vo.chrf = asked("chrf");
    vo.beam_size = o.beam_size;
    vo.normalize = o.normalize;
    vo.gemm_dtype = o.precision;
    validator.emplace(be_, config, *in.src_vocab, in.tgt_vocab(), o.valid_src, o.valid_tgt,
                      in.corpus_options, vo);
  }

  nn::ParameterSet params;
  Rng init_rng(o.seed);
  nn::Transformer model(nn::ParamScope(be_, params, init_rng).with_depth_scaling(o.depth_scaling),
                        config);
  Adam adam(be_, params, o.adam);
  if (o.samples_subwords()) set_up_sampling(batcher, o, in, quiet);
  // A resumed run's trainer state (the header only) comes first: where its data goes on
  // decides the schedule's end.
  const std::string ckpt = checkpoint_path(o.model_dir);
  std::error_code ec;
  std::optional<TrainingState> saved;
  if (fs::exists(ckpt, ec)) saved = read_training_state(ckpt);
  data::BatchPosition resume_at{0, 0};
  // {update, epoch, batch} from which the --after-epochs end is counted: from update 0, or from
  // where a --no-restore-corpus resume put the data (this run's, or an earlier one's).
  std::vector<int64_t> plan_from{0, 0, 0};
  const int64_t batches_per_update = int64_t(ranks) * o.optimizer_delay;
  // Resumed with another processes x --optimizer-delay than the checkpoint's: its updates were
  // of another size, so the epochs' end is counted from there, in this run's updates (from
  // update 0 at this size the line would end before or after the data).
  const bool resized =
      saved && saved->batches_per_update > 0 && saved->batches_per_update != batches_per_update;
  if (saved) {
    TX_CHECK(saved->data_position.size() == 3, "checkpoint '", ckpt,
             "' holds no tx-train data position; remove it or use another --model directory");
    resume_at = {saved->data_position[0], saved->data_position[1]};
    if (o.no_restore_corpus && resume_at.batch > 0) resume_at = {resume_at.epoch + 1, 0};
    if (o.no_restore_corpus || resized)
      plan_from = {saved->update, resume_at.epoch, resume_at.batch};
    else if (saved->plan_from.size() == 3)
      plan_from = saved->plan_from;
  }
  LrOptions lr_options = o.lr;
  lr_options.d_model = config.d_model;
  // Planning every epoch's batches costs a shuffle and a sort of the corpus per epoch: only
  // for a schedule that needs the last update.
  if (lr_options.needs_total_updates() && lr_options.total_updates <= 0)
    lr_options.total_updates =
        planned_updates(batcher, o, batches_per_update, {plan_from[1], plan_from[2]}, plan_from[0]);
  // --after-minutes with the linear schedule: the rates up to the end of the warm-up do not
  // depend on the last update, which is planned there from the pace (plan_by_time below);
  // until then the schedule ends at the epochs' or updates' limit, or at the warm-up.
  const bool plan_by_time = o.after_minutes > 0 && lr_options.needs_total_updates();
  int64_t limit_updates = lr_options.total_updates;  // 0: only the time limits the run
  if (plan_by_time && lr_options.total_updates <= 0) lr_options.total_updates = lr_options.warmup;
  LrSchedule lr_schedule = LrSchedule::from_options(lr_options);
  RunSchedule schedule(o, validate_on);
  EarlyStopping stopper(validate_on ? o.valid_metrics.front() : "cross-entropy", o.early_stopping);

  // ---- where to start: a checkpoint (resume), a pretrained model, or the initialisation -------
  TrainingState state;
  const nlohmann::json plan = batch_plan(o, *in.corpus);
  if (ranks > 1) check_same_data(world, plan, *in.corpus);
  state.rng_seed = o.seed ^ 0x9E3779B97F4A7C15ull;  // dropout: a stream apart from the init's
  int64_t epoch_sentences = 0;                      // "Sen." counts within the epoch
  int64_t resumed_at = 0;                           // the checkpoint's update
  TrainerResult result;
  // The writer's files only: another process removing them could race rank 0's next save.
  if (writer) {
    if (const int stale = io::remove_stale_temporaries(o.model_dir); stale > 0 && !quiet)
      log("removed ", stale, " unfinished file", stale == 1 ? "" : "s",
          " of an interrupted earlier run from ", o.model_dir);
  }
  if (!o.pretrained_model.empty() && !fs::exists(ckpt, ec)) {
    if (in.pretrained.format == formats::Format::tx)
      load_model(o.pretrained_model, be_, config, params);
    else
      nn::load_parameters(std::move(in.pretrained.params), be_, params,
                          str("model '", o.pretrained_model, "'"));
    if (!quiet)
      log("starting from ", formats::name_of(in.pretrained.format), " model ", o.pretrained_model);
  }
  // A resumed run takes its weights from the checkpoint: the imported ones need not stay.
  in.pretrained.params = io::TensorFile();
  if (saved) {
    state = load_checkpoint(ckpt, be_, config, params, adam);
    // The position is a batch index into the checkpoint's plan: under other batching options
    // or data it would name other pairs, skipping some of the epoch and repeating others.
    const std::string change = batch_plan_change(state.batch_plan, plan);
    TX_CHECK(change.empty() || o.no_restore_corpus, "checkpoint '", ckpt,
             "' planned its batches with ", change,
             "; resume with the saved run's values, or add --no-restore-corpus to go on from the "
             "next epoch's first batch under this run's");
    // The sentences counted within the epoch start afresh where the data skips ahead.
    epoch_sentences =
        resume_at.epoch == state.data_position[0] ? state.data_position[2] : int64_t(0);
    batcher.seek(resume_at);
    if (o.no_restore_corpus && !quiet)
      log("--no-restore-corpus: the data goes on from the first batch of epoch ",
          resume_at.epoch + 1, change.empty() ? "" : str(" (", change, ")"));
    // The epochs' end is counted in this run's plan from there (from update 0 it would count
    // the skipped batches and the old plan's as this plan's), and so by every later resume.
    if (o.no_restore_corpus || resized) state.plan_from = plan_from;
    // A checkpoint from before best_scores: the early-stopping state holds its metric's best.
    if (state.best_scores.empty() && state.early_stopping.has_best)
      state.best_scores[state.early_stopping.metric] = state.early_stopping.best;
    if (validate_on) {
      // The checkpoint's stopper goes on if it tracked this metric; another first
      // --valid-metrics (or one not validated yet) starts its stall count afresh, from the
      // metric's best so far where an earlier run validated it (model.best-<metric> holds it).
      const EarlyStopping::State& saved_stopper = state.early_stopping;
      const bool tracked = saved_stopper.validations > 0 || saved_stopper.has_best;
      const auto best = state.best_scores.find(stopper.metric());
      if (tracked && saved_stopper.metric == stopper.metric()) {
        stopper.restore(saved_stopper);
      } else {
        if (best != state.best_scores.end()) stopper.start_from_best(best->second);
        if (tracked && !quiet)
          log("early stopping: the checkpoint tracked ", saved_stopper.metric, "; this run tracks ",
              stopper.metric(), " from its next validation",
              best == state.best_scores.end() ? std::string()
                                              : str(", to beat its best so far, ", best->second));
      }
    }
    result.resumed = true;
    resumed_at = state.update;
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
  if (in.alignments)
    step.set_alignment({in.alignments.get(), in.corpus.get(), o.guided_alignment_weight,
                        config.aligned_layer(), config.alignment_head});
  step.set_rdrop_alpha(o.rdrop_alpha);
  ExponentialSmoothing smoothing(be_, params, step.flat_params(), o.smoothing);
  if (smoothing.enabled() && result.resumed && !load_smoothed(ckpt, be_, smoothing.tensors()) &&
      !quiet)
    log("the checkpoint has no smoothed weights: smoothing starts from its weights");
  // ---- --after-minutes ----------------------------------------------------------------------
  TimeBudget budget(o.after_minutes, state.train_seconds, state.update, state.untimed_updates);
  bool planned = false;  // the linear schedule's last update is fixed
  // The linear schedule to `last` (the epochs' or updates' limit if it comes first), and the
  // run's stop there.
  auto end_schedule_at = [&](int64_t last) {
    if (limit_updates > 0) last = std::min(last, limit_updates);
    last = std::max(last, lr_options.warmup);
    lr_schedule = LrSchedule::linear(lr_options.lr, lr_options.warmup, last);
    schedule.after_updates =
        schedule.after_updates > 0 ? std::min(schedule.after_updates, last) : last;
    planned = true;
  };
  // Rank 0's pace decides, so that every process ends the schedule at the same update.
  auto plan_from_pace = [&]() {
    int64_t last =
        budget.last_update(state.update, o.save_freq, validate_on ? o.valid_freq : int64_t(0));
    world.broadcast(&last, sizeof last, 0);
    state.time_last_update = last;
    state.time_budget_minutes = o.after_minutes;
    end_schedule_at(last);
    if (!quiet)
      log("--after-minutes ", o.after_minutes, ": ", grouped(state.update), " updates in ",
          fixed(budget.seconds(), 0), " s, so the learning rate comes down to 0 at update ",
          grouped(schedule.after_updates), " (--after-updates ", schedule.after_updates,
          " repeats this schedule)");
  };
  // The planned last update counted the checkpoint's update size: the same time holds the
  // batches left in fewer updates of more batches, or more of fewer.
  if (resized && state.time_last_update > state.update) {
    const int64_t left = (state.time_last_update - state.update) * saved->batches_per_update;
    state.time_last_update = state.update + (left + batches_per_update - 1) / batches_per_update;
  }
  if (plan_by_time) {
    if (state.time_last_update > 0 && state.time_budget_minutes == o.after_minutes)
      end_schedule_at(state.time_last_update);  // a resumed run keeps its plan
    else if (state.update >= lr_options.warmup && budget.earlier_pace_known())
      plan_from_pace();  // resumed past the warm-up with another budget
    else if (state.update >= lr_options.warmup) {
      // Resumed past the warm-up from a run without a budget: its pace is unknown, so the
      // rate keeps the line to the epochs' or updates' limit and the minutes only stop it.
      TX_CHECK(limit_updates > 0, "--after-minutes cannot plan the linear schedule from '", ckpt,
               "': it was written without --after-minutes, so its pace is unknown; add "
               "--after-epochs N or --after-updates N for the rate's end");
      state.time_last_update = limit_updates;
      state.time_budget_minutes = o.after_minutes;
      end_schedule_at(limit_updates);
      if (!quiet)
        log("--after-minutes ", o.after_minutes,
            ": the checkpoint holds no training time, so "
            "the learning rate comes down to 0 at update ",
            grouped(limit_updates),
            " (the limit) and the minutes, counted from now, may stop the run before it");
    }
  }
  if (!quiet) {
    std::string rate = lr_schedule.describe();
    if (plan_by_time && !planned)
      rate = str("linear(lr=", lr_options.lr, ", warmup=", lr_options.warmup,
                 ", to 0 at the update that --after-minutes ", o.after_minutes, " holds",
                 limit_updates > 0 ? str(" or at ", grouped(limit_updates), " if sooner") : "",
                 ", planned at the end of the warm-up)");
    log_set_up(o, params, config, rate, be_, scaler, smoothing, world);
  }

  RunFiles files(be_, o, config, params, smoothing, in.model_meta, writer, state.update);
  // The checkpoint first: it is the truth a resume starts from (see trainer.h).
  // `snapshot`: a --save-freq save or the run's end, not a stop on a signal.
  auto save = [&](bool snapshot) {
    const data::BatchPosition pos = batcher.position();
    state.epoch = pos.epoch;
    state.data_position = {pos.epoch, pos.batch, epoch_sentences};
    state.batch_plan = plan;
    state.rng_counter = graph.rng().counter();
    // A run without validation keeps the checkpoint's stopper (a run that early stopping ended
    // stays ended).
    if (validate_on) state.early_stopping = stopper.state();
    state.snapshot = snapshot;
    state.batches_per_update = batches_per_update;
    state.loss_scale = scaler.enabled() ? scaler.scale() : 0;
    state.loss_scale_clean = scaler.enabled() ? scaler.clean_updates() : 0;
    // Only under a budget: a run without one writes the same bytes however long it took.
    if (budget.enabled()) {
      state.train_seconds = budget.seconds();
      state.untimed_updates = budget.untimed_updates();
    }
    graph.trim();  // the host copies of the checkpoint need not stack on the step's memory
    const Clock::time_point start = Clock::now();
    files.save(state, adam);
    budget.add_save(std::chrono::duration<double>(Clock::now() - start).count());
  };
  if (result.resumed) files.catch_up_models(state, quiet);

  // ---- the loop ---------------------------------------------------------------------------------
  StopSignals signals(be_, o.handle_signals);
  data::Batch batch;
  // TX_PROFILE=1: each log line also says how much of its span went to GEMMs (a diagnostic for
  // bench/peers/train.py; GEMMs are synchronised, so a GPU loses its overlap).
  if (const char* p = std::getenv("TX_PROFILE"); p && *p && std::string(p) != "0") {
    be_.set_profiling(true);
    be_.take_gemm_tally();
  }
  DisplaySpan span;
  // The update's batches, every process's (they all count them); null once --after-epochs
  // epochs are done.
  // The log names the epoch of an update's last batch and counts the sentences of that epoch,
  // even when the next update will start another epoch.
  int64_t update_epoch = batcher.position().epoch + 1;
  auto next_batch = [&]() -> const data::Batch* {
    for (;;) {
      if (o.after_epochs > 0 && batcher.position().epoch >= o.after_epochs) return nullptr;
      if (batcher.next(batch)) break;
      if (!quiet) log("Ep. ", batcher.position().epoch, " : finished");
    }
    if (batcher.position().batch == 1) epoch_sentences = 0;  // the epoch's first batch
    update_epoch = batcher.position().epoch + 1;
    span.words += batch.tgt_tokens();
    epoch_sentences += batch.size;
    return &batch;
  };
  double lr = 0;
  // Processes decide on the time together, through the update's stop request: each one's clock
  // alone could leave the others waiting in the all-reduce.
  const auto own_stop_cause = [&]() {
    return signals.stop_requested() ? StopCause::signal
           : budget.spent()         ? StopCause::time_budget
                                    : StopCause::none;
  };
  // A run that had ended when it was started again trains nothing: its minutes spent (on rank
  // 0's word: a stop request inside the update would come after its gradients and still apply
  // them) or early stopping reached (raising --early-stopping goes on). Spent updates and epochs
  // end the loop by themselves.
  undo.files.clear();  // the set-up is complete: its vocabularies are the run's
  bool spent_at_start = budget.spent();
  if (ranks > 1) world.broadcast(&spent_at_start, sizeof spent_at_start, 0);
  const bool stopped_before = validate_on && stopper.should_stop();
  if (stopped_before) {
    if (!quiet)
      log("early stopping: ", stopper.metric(), " did not improve in ", stopper.stalled(),
          " validations in a row before this run; nothing to train (raise --early-stopping to "
          "go on)");
    result.early_stopped = true;
  }
  bool done = spent_at_start || stopped_before;
  while (!done && !schedule.finished(state.update) && (ranks > 1 || !budget.spent())) {
    const double step_lr = lr_schedule(state.update + 1);
    const UpdateStep::Result update = step.run(next_batch, step_lr, own_stop_cause);
    if (!update.complete) done = true;
    if (update.tokens == 0) break;  // the same on every process: they all read every batch
    lr = step_lr;                   // the last update's rate, which the log lines show
    const AdamStepInfo& info = update.adam;
    span.cost += update.cost;
    span.reduce_secs += update.reduce_secs;
    ++state.update;
    ++span.updates;
    if (!info.skipped) {
      smoothing.update(state.update - 1, update.tokens);
      span.grad_norms += info.grad_norm;
      ++span.applied;
    }
    if (info.clipped) ++span.clipped;
    if (info.skipped && !quiet) {
      if (scaler.enabled())
        log("update ", grouped(state.update), ": fp16 gradients overflowed at loss scale ",
            update.loss_scale, "; update skipped, scale now ", scaler.scale());
      else
        log("update ", grouped(state.update), ": gradient norm is not finite; update skipped");
    }
    const int64_t epoch = update_epoch;
    if (!quiet && stderr_is_terminal()) {
      const double secs = span.seconds();
      std::string eta;
      if (o.after_updates > 0 && secs > 0)
        eta = " : ETA " +
              duration_text(double(o.after_updates - state.update) * secs / double(span.updates));
      progress(str("Ep. ", epoch, " : Up. ", grouped(state.update), " : ",
                   grouped(int64_t(std::llround(span.words / std::max(secs, 1e-9)))), " words/s",
                   eta));
    }
    if (schedule.display(state.update, done)) {
      log_span(span, epoch, state.update, epoch_sentences, lr, be_, scaler, world, files, result,
               quiet);
      span.restart();
    }
    if (schedule.validation(state.update)) {
      const Clock::time_point start = Clock::now();
      if (validate(validator ? &*validator : nullptr, model, epoch, state.update, graph, smoothing,
                   stopper, o.valid_metrics, state.best_scores, world, files, result, quiet)) {
        result.early_stopped = true;
        done = true;
      }
      budget.add_validation(std::chrono::duration<double>(Clock::now() - start).count());
    }
    if (plan_by_time && !planned && state.update >= lr_options.warmup) plan_from_pace();
    if (schedule.save(state.update)) save(true);
    if (o.after_update) o.after_update(state.update);
    // Processes decide together; each one's own signal and clock decide a single process.
    const StopCause stop = ranks > 1 ? update.stop : own_stop_cause();
    if (stop != StopCause::none) {
      if (stop == StopCause::signal) {
        if (!quiet)
          log(signals.signal() ? str("stopping on signal ", signals.signal())
                               : std::string("stopping on a signal to another process"),
              ": saving a checkpoint");
        result.interrupted = true;
      } else if (!quiet) {
        const bool early = planned && state.update < schedule.after_updates;
        log("--after-minutes ", o.after_minutes, " reached at update ", grouped(state.update),
            early ? str(", before the planned ", grouped(schedule.after_updates),
                        ": the machine ran slower than in the warm-up, so the rate is ",
                        scientific(lr), ", not 0")
                  : std::string());
      }
      done = true;
    }
  }

  progress_done();
  // The updates since the last log line (a run that ends between two --disp-freq lines).
  if (span.updates > 0)
    log_span(span, update_epoch, state.update, epoch_sentences, lr, be_, scaler, world, files,
             result, quiet);
  if (result.resumed && state.update == resumed_at) {
    // Nothing trained: the checkpoint stays the truth it was (a --no-restore-corpus run would
    // otherwise record its moved position and plan, and the next resume skip data).
    if (!quiet)
      log(result.interrupted
              ? std::string("stopped before an update")
              : str("nothing trained: the run had ended at update ", grouped(state.update),
                    " (raise --after-updates, --after-epochs, --after-minutes or "
                    "--early-stopping to go on)"),
          "; ", ckpt, " is as it was");
  } else {
    // A signal during the run's last update stops nothing: that save is its end's, and makes
    // the snapshot an uninterrupted run makes.
    const data::BatchPosition at = batcher.position();
    const bool data_done =
        o.after_epochs > 0 &&
        (at.epoch >= o.after_epochs ||
         (at.epoch == o.after_epochs - 1 && at.batch >= batcher.plan(at.epoch).batches()));
    save(!result.interrupted || schedule.finished(state.update) || data_done ||
         result.early_stopped);
    if (!quiet)
      log("training finished at update ", grouped(state.update), "; saved ", ckpt, " and ",
          model_path(o.model_dir));
  }
  // A stop on a signal ends the log with a record of it (even under --quiet), so that a script
  // tells a stopped run from a finished one by the last line (examples/multi30k/run.sh).
  if (result.interrupted)
    files.write_json({{"type", "stop"}, {"update", state.update}, {"signal", signals.signal()}});
  result.updates = state.update;
  result.epochs = batcher.position().epoch;
  return result;
}

}  // namespace tx::train
