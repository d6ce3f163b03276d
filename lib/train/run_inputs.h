// RunInputs: what a training run reads before its first update: its options checked, the
// vocabularies (loaded, a pretrained model's, or trained on the fly), the model config (the
// options', or a pretrained model's with this run's regularisation), the corpus and any guided
// alignments.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "data/vocab.h"
#include "formats/model_file.h"
#include "io/model_config.h"
#include "train/collective.h"
#include "train/guided_alignment.h"
#include "train/trainer.h"

namespace tx::train {

struct RunInputs {
  formats::ModelFile pretrained;                  // path empty: none (--pretrained-model)
  std::map<std::string, std::string> model_meta;  // what every model file written carries
  std::unique_ptr<data::Vocab> src_vocab;
  std::unique_ptr<data::Vocab> tgt_vocab_own;  // null: the vocabulary is joint
  io::ModelConfig config;                      // vocabulary sizes and special ids filled in
  data::CorpusOptions corpus_options;
  std::unique_ptr<data::ParallelCorpus> corpus;
  std::unique_ptr<GuidedAlignments> alignments;  // null without --guided-alignment

  const data::Vocab& tgt_vocab() const { return tgt_vocab_own ? *tgt_vocab_own : *src_vocab; }
};

// Checks the options and their input files, then creates the model directory: nothing is
// written before the options are known to be usable. Throws tx::Error naming the option.
void check_run_options(const TrainerOptions& o);
// Refuses a model directory holding a trained model (model.safetensors or a snapshot, written
// only after a checkpoint) but no checkpoint: a new run there would write over it.
void check_no_orphan_models(const std::string& model_dir);

// Reads the run's inputs. Rank 0 (`writer`) trains the vocabularies that do not exist yet (or
// copies a pretrained tx model's), adding each file it writes to `made` as it goes; the other
// processes wait for it at a barrier of `world` and read its files.
RunInputs read_run_inputs(const TrainerOptions& o, Collective& world, bool writer, bool quiet,
                          std::vector<std::string>& made);

}  // namespace tx::train
