// Trainer: the training loop of tx-train as a library class.
//
// One run: vocabularies (loaded, or trained on the fly where the .spm files do not exist yet),
// the training corpus, the model (fresh, or resumed from <model_dir>/checkpoint.safetensors),
// then updates until --after-updates / --after-epochs / early stopping / a signal:
//
//   batch -> upload ids -> forward -> label-smoothed loss summed over target tokens
//         -> backward (gradients accumulate over optimizer_delay batches)
//         -> Adam step with lr = schedule(update) and grad_scale = 1 / target tokens
//
// Every disp_freq updates a Marian-style line goes to stderr
//   Ep. 1 : Up. 1000 : Sen. 32,000 : Cost 3.12 : Time 41.2s : 9,870 words/s : L.r. 3.1e-04
// and the same figures as a JSON line to <model_dir>/train.log.jsonl. Every save_freq updates
// (and at the end) <model_dir>/checkpoint.safetensors (weights, Adam, trainer state: exact
// resume) and then <model_dir>/model.safetensors (weights only) are replaced atomically, each
// naming its update in its metadata ("update"); with keep_last N, model.u<update>.safetensors
// is written too and the newest N are kept. The checkpoint is the truth: a crash between the
// renames leaves model.safetensors one save behind, and the next run (a resume) rewrites it
// from the checkpoint before training, so the two never disagree once the run is going. Every
// valid_freq updates the validation set is scored (cross-entropy per target token, perplexity,
// optionally BLEU) and early stopping consulted.
//
// Data parallel (options.collective with P processes, e.g. `mpirun -np P tx-train`): every
// process reads the same corpus in the same shuffled order and holds the same model; an update
// is P x optimizer_delay batches, of which process r runs batches r, r + P, r + 2P, ...; one
// all-reduce sums the gradients (one flat buffer) and the processes' losses, and every process
// makes the same Adam step with grad_scale = 1 / the target tokens of all the batches. That is
// the update one process makes with optimizer_delay P x D, to float rounding: batch k of an
// update draws its dropout masks from counter (start + k * 2^36) in both. Rank 0 alone trains
// vocabularies (the others wait and read them), validates, logs and writes files; a resume
// may use another P, as long as P x optimizer_delay stays the same to continue the same run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "io/model_config.h"
#include "train/collective.h"
#include "train/loss_scaler.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"
#include "train/smoothing.h"

namespace tx::train {

struct TrainerOptions {
  std::string model_dir;  // created when missing
  std::string train_src, train_tgt;
  std::string valid_src, valid_tgt;  // both empty: no validation
  // .spm paths; one path twice is a joint vocabulary. Empty: <model_dir>/vocab.spm (joint)
  // with --tied-embeddings all, else <model_dir>/vocab.src.spm and vocab.tgt.spm. A path that
  // does not exist is trained there on the fly from the training files.
  std::string src_vocab, tgt_vocab;
  int32_t vocab_size = 32000;  // pieces per vocabulary trained on the fly
  // --sentencepiece-options (Marian's): spm_train fields for a vocabulary trained on the fly,
  // e.g. "--model_type=bpe" (data::parse_trainer_fields); an existing vocabulary is read as is.
  std::string sentencepiece_options;
  // A model to start from (Marian's --pretrained-model): a Marian model.npz, a Hugging Face
  // directory or a tx model file. Its architecture and vocabularies replace `model`'s and the
  // vocabulary options (dropout and label smoothing stay `model`'s); its weights are the
  // first update's starting point (a resumed run starts from its checkpoint instead).
  std::string pretrained_model;

  io::ModelConfig model;  // vocabulary sizes are filled in from the vocabularies

  int64_t max_tokens = 4096;    // padded tokens per batch
  int64_t max_sentences = 0;    // 0: no cap
  int64_t maxi_batch = 100;     // batches sorted together by length
  LrOptions lr;                 // lr.d_model is taken from the model
  AdamOptions adam;             // clip_norm among them
  int64_t optimizer_delay = 1;  // batches accumulated per update
  // --transformer-depth-scaling: layer l of each stack initialised in 1/sqrt(l) of Glorot's
  // range (nn::ParamScope::with_depth_scaling); a new model only.
  bool depth_scaling = false;
  // --precision: the GEMMs' operands (f32, bf16 or f16; Graph's gemm_dtype), fp32 master
  // weights and optimiser either way. f16 scales the loss (loss_scaling.enabled is set here).
  DType precision = DType::f32;
  LossScalerOptions loss_scaling;
  // --exponential-smoothing: validation and the model files use the smoothed weights; the
  // checkpoint holds both (train/smoothing.h).
  SmoothingOptions smoothing;
  // --guided-alignment FILE (one `s-t ...` line per training pair, train/guided_alignment.h):
  // the model config's alignment layer and head (head 0 when it is -1, as Marian) learn the
  // alignments; tx-translate --alignment reads them. Empty: none.
  std::string guided_alignment;
  // --sentencepiece-alphas A [B]: each epoch, the source (A) and target (B) sides segmented by
  // SentencePiece sampling with these alphas (Marian's; 0 or missing: the best segmentation);
  // validation and translation keep the best (data/subword_sampling.h).
  std::vector<float> sentencepiece_alphas;
  // Whether an alpha samples (one above 0): alphas of 0 keep the best segmentation.
  bool samples_subwords() const {
    for (float a : sentencepiece_alphas)
      if (a != 0) return true;
    return false;
  }
  float guided_alignment_weight = 0.1f;
  // --rdrop-alpha (fairseq's R-Drop): each batch runs twice, with dropout masks of their own,
  // and the loss adds this weight times the two passes' symmetric KL (train/batch_loss.h). An
  // update costs about twice as much. 0: none.
  float rdrop_alpha = 0.0f;

  int64_t after_epochs = 0;   // 0: no limit
  int64_t after_updates = 0;  // total updates (a resumed run counts those done before)
  // --after-minutes: stop once the training loop has run this long (a resumed run counts the
  // time before it); with the linear schedule, its last update is planned from the warm-up's
  // pace (train/time_budget.h). 0: no limit.
  double after_minutes = 0;
  int64_t disp_freq = 1000;
  int64_t save_freq = 10000;
  int64_t valid_freq = 10000;
  // The first drives early stopping: cross-entropy, perplexity, bleu.
  std::vector<std::string> valid_metrics{"cross-entropy"};
  int64_t early_stopping = 10;  // stalled validations before stopping; 0: never
  int beam_size = 6;            // validation BLEU
  float normalize = 1.0f;       // validation BLEU: tx-translate's --normalize
  int64_t keep_last = 0;        // model.u<update>.safetensors kept; 0: none written
  int64_t valid_max_tokens = 4096;

  uint64_t seed = 1;
  // --no-restore-corpus (Marian's): a resume goes on from the first batch of the checkpoint's
  // next epoch (its own when the checkpoint ends one), under this run's batching options and
  // data, rather than from the checkpoint's batch, which needs the saved run's.
  bool no_restore_corpus = false;
  bool quiet = false;  // no progress lines on stderr (the JSON log is still written)
  // SIGINT/SIGTERM: finish the current update, save a checkpoint, return normally.
  bool handle_signals = false;
  // Called after every update with the number of updates done (tests inject crashes here).
  std::function<void(int64_t update)> after_update;
  // The processes of a data-parallel run (see above); null: this process alone.
  Collective* collective = nullptr;
};

struct TrainerResult {
  int64_t updates = 0;  // total, including those before a resume
  int64_t epochs = 0;   // completed
  bool resumed = false;
  bool early_stopped = false;
  bool interrupted = false;   // by SIGINT/SIGTERM
  double last_cost = 0;       // label-smoothed loss per target token over the last display span
  std::vector<double> costs;  // the cost of every display span, in order
  double last_valid_ce = 0;   // 0 when never validated
};

class Trainer {
 public:
  Trainer(Backend& be, TrainerOptions options);
  // Trains as described at the top of this file. Throws tx::Error (one line, naming the file
  // or option and the fix) for bad inputs and failed writes; checkpoints written before stay.
  TrainerResult run();

  static std::string checkpoint_path(const std::string& model_dir);
  static std::string model_path(const std::string& model_dir);
  static std::string log_path(const std::string& model_dir);
  // <model_dir>/model.u<update>.safetensors: the snapshots --keep-last keeps.
  static std::string snapshot_path(const std::string& model_dir, int64_t update);
  // The snapshots in `model_dir`, oldest first, as (update, path).
  static std::vector<std::pair<int64_t, std::string>> snapshots(const std::string& model_dir);

 private:
  Backend& be_;
  TrainerOptions options_;
};

}  // namespace tx::train
