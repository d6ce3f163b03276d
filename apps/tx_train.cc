// tx-train: trains a Transformer on parallel text. The work is train::Trainer; this file maps
// the options onto TrainerOptions. Under mpirun (or srun) every process runs this main() and
// joins the run's MPI world (train/collective.h): data-parallel training, rank 0 writing.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend/registry.h"
#include "common/app_log.h"
#include "common/command_line.h"
#include "common/precision.h"
#include "core/format.h"
#include "core/rng.h"
#include "nn/parameter_summary.h"
#include "nn/transformer.h"
#include "train/collective.h"
#include "train/trainer.h"

namespace {

using tx::grouped;

using tx::app::Options;
using tx::app::UsageError;

// tx-train's required options are checked here rather than by the registry's `required`, so
// that its options parse (and --dump-config works) without them.
void require(const Options& options, const std::string& name) {
  if (!options.has(name))
    throw UsageError(tx::str("--", name,
                             " is required; give it on the command line or in "
                             "--config (see 'tx-train --help')"));
}

// A list option of two files (SRC TGT: the table's check).
std::vector<std::string> pair_of(const Options& options, const std::string& name) {
  require(options, name);
  return options.list(name);
}

// The backend --device names. In a data-parallel run, `--device cuda` is cuda:<local rank>
// (one GPU per process), and --cpu-threads 0 shares this machine's cores among its processes.
std::unique_ptr<tx::Backend> backend_of(const Options& options,
                                        const tx::train::Collective* world = nullptr) {
  tx::register_builtin_backends();
  tx::BackendOptions bo = options.backend_options();
  std::string device = options.text("device");
  if (world && world->local_size() > 1) {
    if (device == "cuda")
      device = tx::str("cuda:", world->local_rank());
    else if (device.rfind("cuda:", 0) == 0)
      throw UsageError(tx::str("--device ", device, " under mpirun puts all ", world->local_size(),
                               " processes of this machine on one GPU; give --device cuda (each "
                               "process takes cuda:<local rank>)"));
    if (bo.threads == 0)
      bo.threads =
          std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / world->local_size());
  }
  return tx::create_backend(device, bo);
}

// --dry-run: the model the options describe, built for real on --device (so its memory is
// allocated too), with vocabularies of --dim-vocabs pieces; its counts go to stdout.
int dry_run(const Options& options) {
  tx::io::ModelConfig config = options.model_config();
  config.src_vocab_size = config.tgt_vocab_size = options.integer("dim-vocabs");
  config.validate(true, "the model options");
  std::unique_ptr<tx::Backend> be = backend_of(options);
  tx::nn::ParameterSet params;
  tx::Rng rng(static_cast<uint64_t>(options.integer("seed")));
  tx::nn::Transformer model(tx::nn::ParamScope(*be, params, rng), config);
  const nlohmann::json c = config.to_json();
  std::printf(
      "model: d_model %lld, d_ff %lld, heads %lld, %lld+%lld layers, %s, vocabularies "
      "%s/%s, tied embeddings: %s\n",
      (long long)config.d_model, (long long)config.d_ff, (long long)config.heads,
      (long long)config.encoder_layers, (long long)config.decoder_layers,
      config.pre_norm ? "pre-norm" : "post-norm", grouped(config.src_vocab_size).c_str(),
      grouped(config.tgt_vocab_size).c_str(), c.at("tied_embeddings").get<std::string>().c_str());
  for (const tx::nn::ComponentCount& part : tx::nn::parameter_summary(params)) {
    const std::string each =
        part.repeats > 1
            ? tx::str(" (", part.repeats, " x ", grouped(part.parameters / part.repeats), ")")
            : std::string();
    std::printf("  %-40s %14s\n", (part.name + each).c_str(), grouped(part.parameters).c_str());
  }
  std::printf("parameters: %lld\n", (long long)params.numel());
  return 0;
}

// --exponential-smoothing [FACTOR [REFERENCE_WORDS]], as Marian reads it: alone, 1e-4 (the
// values were checked with the options).
tx::train::SmoothingOptions smoothing_options(const Options& options) {
  const std::vector<std::string> v = options.list("exponential-smoothing");
  tx::train::SmoothingOptions s;
  s.factor = v.empty() ? 1e-4 : *tx::app::parse_number(v[0]);
  if (v.size() > 1) s.reference_words = static_cast<int64_t>(*tx::app::parse_number(v[1]));
  return s;
}

// mpirun starts every process with one command line; a wrapper that gives one process other
// flags would have it train another model beside the others, or leave them waiting in an
// all-reduce for ever. Throws on the process that differs; its error ends them all.
// (Not compared: what only rank 0 uses, its log's level, and --after-minutes, on which the
// processes decide together each update.)
void check_same_options(tx::train::Collective& world, const Options& options) {
  nlohmann::json compared = options.values();
  for (const char* own : {"quiet", "verbose", "after-minutes"}) compared.erase(own);
  const std::optional<nlohmann::json> first = tx::train::first_if_different(world, compared);
  if (!first) return;
  const nlohmann::json& theirs = *first;
  std::string change;
  for (const auto& [key, value] : compared.items())
    if (theirs.value(key, nlohmann::json()) != value)
      change += tx::str(change.empty() ? "" : ", ", "--", key, " ", value.dump(),
                        " against process 0's ", theirs.value(key, nlohmann::json()).dump());
  throw tx::Error(tx::str("this process was given other options than process 0 (", change,
                          "); every process must run the same command line"));
}

int train(const Options& options) {
  // (Under mpirun the report once, from rank 0.)
  if (options.flag("dry-run")) return tx::train::launched_rank() == 0 ? dry_run(options) : 0;
  tx::train::TrainerOptions t;
  require(options, "model");
  if (options.text("model").empty())  // -m "": a path that names nothing
    throw UsageError("--model is empty; give the model directory (see 'tx-train --help')");
  t.model_dir = options.text("model");
  t.pretrained_model = options.text("pretrained-model");
  const std::vector<std::string> train_sets = pair_of(options, "train-sets");
  t.train_src = train_sets[0];
  t.train_tgt = train_sets[1];
  if (options.has("valid-sets")) {
    const std::vector<std::string> valid_sets = pair_of(options, "valid-sets");
    t.valid_src = valid_sets[0];
    t.valid_tgt = valid_sets[1];
  }
  if (options.has("vocabs")) {
    const std::vector<std::string> vocabs = options.list("vocabs");  // 1 or 2 (checked)
    t.src_vocab = vocabs.front();
    t.tgt_vocab = vocabs.back();
  }
  t.vocab_size = options.int32("dim-vocabs");  // the table's check: positive, at most 2^24
  t.sentencepiece_options = options.text("sentencepiece-options");
  t.model = options.model_config();

  t.max_tokens = options.integer("max-tokens");
  t.max_sentences = options.integer("mini-batch");
  t.maxi_batch = options.integer("maxi-batch");
  t.lr.schedule = options.text("lr-schedule");
  t.lr.lr = options.number("learn-rate");
  t.lr.warmup = options.integer("lr-warmup");
  t.lr.factor = options.number("lr-factor");
  t.adam.clip_norm = static_cast<float>(options.number("clip-norm"));
  if (options.has("optimizer-params")) {  // (checked with the options)
    const std::vector<std::string> p = options.list("optimizer-params");
    float* fields[] = {&t.adam.beta1, &t.adam.beta2, &t.adam.eps, &t.adam.weight_decay};
    for (size_t i = 0; i < p.size(); ++i)
      *fields[i] = static_cast<float>(*tx::app::parse_number(p[i]));
  }
  t.optimizer_delay = options.integer("optimizer-delay");
  t.depth_scaling = options.flag("transformer-depth-scaling");
  if (t.depth_scaling && !t.pretrained_model.empty())
    throw UsageError(
        "--transformer-depth-scaling draws a new model's first weights, but --pretrained-model "
        "brings them: drop one of the two");
  if (options.has("exponential-smoothing")) t.smoothing = smoothing_options(options);
  t.guided_alignment = options.text("guided-alignment");
  if (t.guided_alignment == "none") t.guided_alignment.clear();  // Marian's "off"
  const std::vector<std::string> alphas = options.has("sentencepiece-alphas")
                                              ? options.list("sentencepiece-alphas")
                                              : std::vector<std::string>();
  for (const std::string& a : alphas)  // (checked with the options)
    t.sentencepiece_alphas.push_back(static_cast<float>(*tx::app::parse_number(a)));
  t.guided_alignment_weight = static_cast<float>(options.number("guided-alignment-weight"));
  t.rdrop_alpha = static_cast<float>(options.number("rdrop-alpha"));

  t.after_epochs = options.integer("after-epochs");
  t.after_updates = options.integer("after-updates");
  t.after_minutes = options.number("after-minutes");
  t.disp_freq = options.integer("disp-freq");
  t.save_freq = options.integer("save-freq");
  t.valid_freq = options.integer("valid-freq");
  t.valid_metrics = options.list("valid-metrics");
  t.early_stopping = options.integer("early-stopping");
  t.beam_size = options.int32("beam-size");
  t.normalize = static_cast<float>(options.number("normalize"));
  t.keep_last = options.integer("keep-last");
  t.valid_max_tokens = t.max_tokens;

  t.seed = static_cast<uint64_t>(options.integer("seed"));
  t.no_restore_corpus = options.flag("no-restore-corpus");
  t.quiet = options.log_level() == tx::app::LogLevel::quiet;
  t.handle_signals = true;
  // The end of a pipe that reads the log (a `| tee` that Ctrl-C ended first) must not kill the
  // run before the save it is making: its log lines are lost, not the training. (Data goes to
  // stdout only in --dry-run and --dump-config, which return before this.)
  std::signal(SIGPIPE, SIG_IGN);

  // Declared before the backend, so that the world (MPI, NCCL) outlives it.
  std::unique_ptr<tx::train::Collective> world = tx::train::launch_world();
  try {
    if (world->size() > 1) check_same_options(*world, options);
    std::unique_ptr<tx::Backend> be = backend_of(options, world.get());
    tx::train::use_device(world, *be);
    t.collective = world.get();
    t.precision = tx::app::checked_precision(options, *be);
    tx::train::Trainer trainer(*be, t);
    const tx::train::TrainerResult r = trainer.run();
    tx::app::detail(options, "updates: ", r.updates, ", epochs: ", r.epochs,
                    r.early_stopped ? ", stopped early" : "", r.interrupted ? ", interrupted" : "");
  } catch (const std::exception& e) {
    if (world->size() == 1) throw;
    // The other processes may be waiting in a collective for this one: say why, end them all.
    // Every process may be refusing the same start: the others wait 2 s, which process
    // 0's abort ends, so that such an error is said once, and so that rank 0 first removes
    // what its set-up wrote (a vocabulary trained on refused data). An error of one other
    // process alone is still said, by it, 2 s later.
    if (world->rank() != 0) std::this_thread::sleep_for(std::chrono::seconds(2));
    std::fprintf(stderr, "tx-train: error: process %d of %d: %s\n", world->rank(), world->size(),
                 e.what());
    std::fflush(stderr);
    world->abort(dynamic_cast<const UsageError*>(&e) ? 2 : 1);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tx::app::run_main(tx::app::kTrain,
                           "tx-train: train a Transformer translation model on parallel text.\n"
                           "Example: tx-train --train-sets corpus.de corpus.en --valid-sets "
                           "dev.de dev.en --model model.de-en --after-epochs 20",
                           argc, argv, train);
}
