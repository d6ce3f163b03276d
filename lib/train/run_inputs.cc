#include "train/run_inputs.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/format.h"
#include "core/log.h"
#include "core/text_file.h"
#include "data/vocab_train.h"
#include "io/atomic_file.h"
#include "train/checkpoint.h"
#include "train/lr_schedule.h"
#include "train/trainer.h"

namespace tx::train {
namespace {

// A small file's bytes (a vocabulary), for a copy.
std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  TX_CHECK(in.good() || in.eof(), "cannot read '", path, "'; check the file and its permissions");
  return bytes;
}

namespace fs = std::filesystem;

void require_file(const std::string& path, const std::string& what) {
  TX_CHECK(!path.empty(), what, ": no file given");
  check_readable_file(path, what);
}

// Whether a vocabulary numbers its pieces as Marian's SentencePiece models do: no pad and no
// bos (</s> 0, <unk> 1 as marian makes them). A fresh run then trains a model in Marian's ids,
// as marian does with that file. Other layouts than tx's and Marian's stay refused (data::Vocab).
bool marian_numbering(const data::Vocab& v) {
  return v.pad_id() < 0 && v.bos_id() < 0 && v.eos_id() >= 0 && v.unk_id() >= 0;
}

// The vocabulary at `path`, trained there from `inputs` first when the file does not exist
// and `may_train` (rank 0 of a data-parallel run trains it; the others read its file).
data::Vocab vocab_at(const std::string& path, const std::vector<std::string>& inputs,
                     const TrainerOptions& o, bool may_train, bool quiet,
                     std::vector<std::string>& made) {
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
    vo.trainer_fields = data::parse_trainer_fields(o.sentencepiece_options);
    data::VocabTrainResult r = data::train_vocab(vo);
    made.push_back(r.model_path);
    made.push_back(r.vocab_path);
    if (!quiet)
      log("trained vocabulary ", r.model_path, ": ", grouped(r.size), " pieces from ",
          grouped(r.sampled), " lines",
          o.sentencepiece_options.empty() ? "" : " (" + o.sentencepiece_options + ")");
  }
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".spm") == 0) {
    data::Vocab v = data::Vocab::marian(path);  // the file's own ids, whatever they are
    if (marian_numbering(v)) return v;
  }
  return data::Vocab(path);
}

// What a new model needs of its config and vocabularies: a position for a piece beside eos (the
// corpus's length limit is max_length - 1; 0 would mean none), and one vocabulary for embeddings
// tied across both sides.
void check_layout(const io::ModelConfig& config, bool joint_vocab) {
  TX_CHECK(config.max_length >= 2, "--max-length ", config.max_length,
           " leaves no position for a piece beside eos; give 2 or more");
  TX_CHECK(config.tied_embeddings != io::TiedEmbeddings::all || joint_vocab,
           "--tied-embeddings all needs one joint vocabulary: give one path twice in --vocabs "
           "(or none), or use --tied-embeddings decoder or none");
}

// What the options alone decide, checked before a vocabulary is trained or the corpus read
// (minutes on a large corpus, and files left behind) and before the model directory exists.
// read_run_inputs and the trainer check the same again with the data's figures.
void check_options_before_data(const TrainerOptions& o) {
  try {
    data::parse_trainer_fields(o.sentencepiece_options);
  } catch (const Error& e) {
    throw Error(str("--sentencepiece-options '", o.sentencepiece_options, "' ", e.what()));
  }
  TX_CHECK(o.sentencepiece_alphas.size() <= 2, "--sentencepiece-alphas takes one alpha per ",
           "vocabulary (source, target), got ", o.sentencepiece_alphas.size());
  for (float a : o.sentencepiece_alphas)
    TX_CHECK(std::isfinite(a) && a >= 0, "--sentencepiece-alphas ", a,
             " must be 0 (the best segmentation) or more");
  TX_CHECK(!o.samples_subwords() || o.guided_alignment.empty(),
           "--sentencepiece-alphas changes the pieces ",
           "that --guided-alignment's positions count; use one or the other (as Marian)");
  // The schedule as far as the options give it: its name, rate and warm-up, whether a linear
  // one has an end, and an --after-updates end before the warm-up's (the epochs' end needs the
  // corpus). d_model: a pretrained model's own is checked when it is read.
  LrOptions lr = o.lr;
  lr.d_model = std::max<int64_t>(o.model.d_model, 1);
  if (lr.needs_total_updates() && lr.total_updates <= 0) {
    if (o.after_updates > 0)
      lr.total_updates = o.after_updates;
    else if (o.after_epochs > 0 || o.after_minutes > 0)
      lr.total_updates = std::numeric_limits<int64_t>::max();
  }
  LrSchedule::from_options(lr);
  if (!o.pretrained_model.empty()) return;  // the architecture is the pretrained model's
  o.model.validate(false, "the model options");
  check_layout(o.model, o.src_vocab == o.tgt_vocab);
}

}  // namespace

void check_run_options(const TrainerOptions& o) {
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
  check_options_before_data(o);
  std::error_code ec;
  // A Hugging Face or fairseq directory holds its weights as model.safetensors, the file the
  // run writes: fine-tuning into it would overwrite the pretrained model.
  TX_CHECK(o.pretrained_model.empty() || !fs::is_directory(o.pretrained_model) ||
               !fs::equivalent(o.pretrained_model, o.model_dir, ec),
           "--pretrained-model '", o.pretrained_model, "' is the model directory --model '",
           o.model_dir,
           "': the run would write its model.safetensors over the pretrained weights; give "
           "--model a directory of its own");
  fs::create_directories(o.model_dir, ec);
  TX_CHECK(fs::is_directory(o.model_dir), "cannot create the model directory '", o.model_dir, "'",
           ec ? ": " + ec.message() : std::string(), "; check the path and permissions");
}

void check_no_orphan_models(const std::string& model_dir) {
  // Without a checkpoint the run starts afresh and writes over the directory's models: a
  // trained model whose checkpoint was deleted would be lost and its snapshots mixed with the
  // new run's. (Best files alone are not counted: validation writes them before the first
  // checkpoint, and a run killed then must start again.)
  std::error_code ec;
  if (fs::exists(Trainer::checkpoint_path(model_dir), ec)) return;
  std::string model;
  if (fs::exists(Trainer::model_path(model_dir), ec))
    model = Trainer::model_path(model_dir);
  else if (const auto snapshots = Trainer::snapshots(model_dir); !snapshots.empty())
    model = snapshots.back().second;
  TX_CHECK(model.empty(), "--model '", model_dir, "' holds a trained model ('", model,
           "') but no checkpoint.safetensors to resume from, and a new run would write over "
           "it; restore the checkpoint, or train in a new --model directory (with "
           "--pretrained-model '",
           model, "' to start from its weights)");
}

RunInputs read_run_inputs(const TrainerOptions& o, Collective& world, bool writer, bool quiet,
                          std::vector<std::string>& made) {
  RunInputs in;
  formats::ModelFile& pretrained = in.pretrained;
  std::map<std::string, std::string>& model_meta = in.model_meta;
  const std::string ckpt = Trainer::checkpoint_path(o.model_dir);
  const bool resuming = fs::exists(ckpt);
  // A resumed run's metadata: the checkpoint's, or the model file's where only it names the
  // vocabulary files (checkpoints from before 2026-12-01).
  std::map<std::string, std::string> recorded;
  if (resuming) {
    for (const std::string& file : {ckpt, Trainer::model_path(o.model_dir)}) {
      try {
        recorded = read_checkpoint_metadata(file);
      } catch (const Error&) {  // missing or unreadable: the next file, then the run's own
      }
      if (recorded.count(formats::kVocabsKey)) break;
    }
  }
  // A resume under other model options (--tied-embeddings none would name other vocabulary
  // files, and train them) is refused before the vocabularies are looked for.
  if (resuming && o.pretrained_model.empty()) check_architecture(ckpt, o.model);
  // Fine-tuning: the architecture and an imported model's vocabulary files come from the
  // pretrained model, or once the run has a checkpoint, from it, as in Marian, where
  // --pretrained-model only starts a run: the file need not outlive its start. (An older run
  // that recorded no vocabulary files of an imported model reads them from the model again,
  // while it is there.)
  const bool read_pretrained =
      !o.pretrained_model.empty() &&
      (!resuming || (!recorded.count(formats::kVocabsKey) && fs::exists(o.pretrained_model) &&
                     formats::format_of(o.pretrained_model) != formats::Format::tx));
  const std::string architecture_from = read_pretrained ? o.pretrained_model : ckpt;
  if (!o.pretrained_model.empty()) {
    if (read_pretrained) pretrained = formats::read_model_file(o.pretrained_model);
    if (pretrained.format == formats::Format::tx) {
      pretrained.config = read_model_config(architecture_from);
      const auto meta = read_pretrained ? read_checkpoint_metadata(o.pretrained_model) : recorded;
      const auto found = meta.find(formats::kVocabsKey);
      if (found != meta.end())
        pretrained.vocabs =
            formats::vocab_files_from_json(found->second, str("model '", architecture_from, "'"));
    }
    if (!read_pretrained && !quiet)
      log("resuming: the weights are the checkpoint's; --pretrained-model ", o.pretrained_model,
          " is not read");
    // As tx-translate: a Hugging Face or fairseq model's vocabularies are its own files; a -v
    // beside it was silently ignored, even a missing file or one of another size.
    const bool brings_own = pretrained.vocabs.kind == formats::VocabKind::pieces ||
                            pretrained.vocabs.kind == formats::VocabKind::fairseq;
    // (A tx model fine-tuned from one names them too: the kind is what its metadata records.)
    TX_CHECK(!brings_own || o.src_vocab.empty(), "--vocabs: the model '", o.pretrained_model,
             "' comes with its own ",
             pretrained.vocabs.kind == formats::VocabKind::pieces
                 ? "Hugging Face vocabularies (source.spm, target.spm, vocab.json)"
                 : "fairseq vocabularies (its dict.LANG.txt files)",
             ", which it names; leave --vocabs out");
    if (pretrained.vocabs.kind == formats::VocabKind::marian && !o.src_vocab.empty())
      pretrained.vocabs.paths = {o.src_vocab, o.tgt_vocab};
    if (pretrained.vocabs.kind != formats::VocabKind::tx) {
      TX_CHECK(pretrained.vocabs.paths.size() == 2, "give the vocabularies of the model '",
               o.pretrained_model, "' with --vocabs SRC TGT (its .yml or .spm files)",
               pretrained.vocabs.why_none.empty() ? "" : "; " + pretrained.vocabs.why_none);
      model_meta[formats::kVocabsKey] = formats::vocab_files_json(pretrained.vocabs);
    }
  }

  // ---- vocabularies ----------------------------------------------------------------------------
  std::string src_vocab_path = o.src_vocab, tgt_vocab_path = o.tgt_vocab;
  if (src_vocab_path.empty() != tgt_vocab_path.empty())
    throw Error(
        "give both vocabularies (--vocabs SRC.spm TGT.spm), or one path twice for a "
        "joint one");
  if (src_vocab_path.empty() && o.pretrained_model.empty() && resuming) {
    // A resumed run that was started on Marian-numbered vocabularies (given with -v): the files
    // it recorded, not a tx vocabulary trained into the model directory.
    const auto found = recorded.find(formats::kVocabsKey);
    if (found != recorded.end()) {
      const formats::VocabFiles files = formats::vocab_files_from_json(
          found->second, str("model '", Trainer::model_path(o.model_dir), "'"));
      if (files.kind == formats::VocabKind::marian && files.paths.size() == 2) {
        for (const std::string& p : files.paths)
          TX_CHECK(fs::exists(p), "the run in '", o.model_dir, "' was trained on the vocabulary '",
                   p, "', which is gone; give its vocabularies with --vocabs");
        src_vocab_path = files.paths[0];
        tgt_vocab_path = files.paths[1];
        if (!quiet)
          log("resuming with the vocabularies the run recorded: ", src_vocab_path,
              src_vocab_path == tgt_vocab_path ? "" : " " + tgt_vocab_path);
      }
    }
  }
  // A tx model file on tx vocabularies (not Marian's: those are named in the file).
  const bool tx_pretrained =
      !o.pretrained_model.empty() && pretrained.vocabs.kind == formats::VocabKind::tx;
  if (src_vocab_path.empty()) {
    const io::TiedEmbeddings tied =
        tx_pretrained ? pretrained.config.tied_embeddings : o.model.tied_embeddings;
    const bool joint = tied == io::TiedEmbeddings::all;
    const std::vector<std::string> names =
        joint ? std::vector<std::string>{"vocab.spm"}
              : std::vector<std::string>{"vocab.src.spm", "vocab.tgt.spm"};
    const fs::path dir(o.model_dir);
    src_vocab_path = (dir / names.front()).string();
    tgt_vocab_path = (dir / names.back()).string();
    // Fine-tuning a tx model: its vocabularies are the files tx-train wrote beside it, copied
    // into this run's directory (a resume finds them there); never new ones trained here.
    // Each file this run lacks (a crash may have left one of two).
    if (tx_pretrained) {
      const fs::path from = fs::path(o.pretrained_model).parent_path();
      for (const std::string& name : names) {
        if (fs::exists(dir / name)) continue;
        TX_CHECK(fs::exists(from / name), "the model '", o.pretrained_model,
                 "' has no vocabulary '", (from / name).string(),
                 "' beside it; give the vocabularies it was trained with (--vocabs)");
        if (writer) {
          io::AtomicFile copy((dir / name).string());
          copy.write(file_bytes((from / name).string()));
          copy.commit();
          made.push_back((dir / name).string());
        }
        if (!quiet)
          log("fine-tuning on the vocabulary of ", o.pretrained_model, ": ",
              (from / name).string());
      }
    }
  }
  const bool joint_vocab = src_vocab_path == tgt_vocab_path;
  std::unique_ptr<data::Vocab>&src_vocab = in.src_vocab, &tgt_vocab_own = in.tgt_vocab_own;
  auto load_vocabs = [&]() {
    if (joint_vocab) {
      src_vocab = std::make_unique<data::Vocab>(
          vocab_at(src_vocab_path, {o.train_src, o.train_tgt}, o, writer, quiet, made));
    } else {
      src_vocab = std::make_unique<data::Vocab>(
          vocab_at(src_vocab_path, {o.train_src}, o, writer, quiet, made));
      tgt_vocab_own = std::make_unique<data::Vocab>(
          vocab_at(tgt_vocab_path, {o.train_tgt}, o, writer, quiet, made));
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
  // The pieces the model was trained on, recorded in its files and its checkpoint: a size
  // alone would let another vocabulary of that size through, every id meaning another piece.
  const std::string fingerprint = data::pair_fingerprint(*src_vocab, tgt_vocab);
  model_meta[kVocabFingerprintKey] = fingerprint;
  auto check_fingerprint = [&](const std::string& file, const std::string& fix) {
    std::map<std::string, std::string> meta;
    try {
      meta = read_checkpoint_metadata(file);
    } catch (const Error&) {  // unreadable: its own load says why
      return;
    }
    const auto it = meta.find(kVocabFingerprintKey);
    TX_CHECK(it == meta.end() || it->second == fingerprint,
             data::not_trained_on(*src_vocab, tgt_vocab, "'" + file + "'"), "; ", fix);
  };
  if (!o.pretrained_model.empty() && !resuming && pretrained.format == formats::Format::tx)
    check_fingerprint(o.pretrained_model, "give the vocabularies it was trained with (--vocabs)");
  if (resuming)
    check_fingerprint(ckpt,
                      "resume with the run's own vocabularies, or train into a new --model "
                      "directory");
  // A fresh run on Marian-layout vocabularies (vocab_at): the model takes Marian's ids.
  const bool marian_ids = o.pretrained_model.empty() && marian_numbering(*src_vocab);
  if (o.pretrained_model.empty())
    TX_CHECK(marian_ids == marian_numbering(tgt_vocab), "the vocabularies '", src_vocab_path,
             "' and '", tgt_vocab_path,
             "' number their special pieces differently (one tx's, one Marian's); give two "
             "of one kind");

  // ---- model config -------------------------------------------------------------------------
  io::ModelConfig& config = in.config;
  config = o.model;
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
        src_vocab->size(), " and ", tgt_vocab.size(), " pieces but the model '", architecture_from,
        "' has ", config.src_vocab_size, " and ", config.tgt_vocab_size,
        "; give the vocabularies the model was trained with (--vocabs)");
  }
  if (marian_ids) {
    // Marian's: eos and unk from the vocabularies, no pad or bos, decoding from a zero vector.
    config.pad_id = -1;
    config.bos_id = -1;
    config.decoder_start_id = -1;
    formats::adopt_marian_ids(config, *src_vocab, tgt_vocab, "the run");
    formats::VocabFiles files;
    files.kind = formats::VocabKind::marian;
    files.paths = {fs::absolute(src_vocab_path).string(), fs::absolute(tgt_vocab_path).string()};
    model_meta[formats::kVocabsKey] = formats::vocab_files_json(files);
    if (!quiet)
      log("vocabulary ", src_vocab_path, " has Marian's special ids (eos ", tgt_vocab.eos_id(),
          ", unk ", tgt_vocab.unk_id(),
          ", no pad or bos): the model takes them and starts decoding from a zero vector");
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
  // Again with the config and vocabularies found (a resume takes the files its run recorded; a
  // pretrained model brings its own ties).
  check_layout(config, joint_vocab || !o.pretrained_model.empty());
  // The layer and head are the model options' (a pretrained model's own when fine-tuning).
  if (!o.guided_alignment.empty() && config.alignment_head < 0) config.alignment_head = 0;
  config.validate(true, "the model options");

  // ---- data ---------------------------------------------------------------------------------
  data::CorpusOptions& corpus_options = in.corpus_options;
  corpus_options.max_src_tokens = corpus_options.max_tgt_tokens = config.max_length - 1;
  in.corpus = std::make_unique<data::ParallelCorpus>(
      data::load_parallel_corpus(o.train_src, o.train_tgt, *src_vocab, tgt_vocab, corpus_options));
  const data::ParallelCorpus& corpus = *in.corpus;
  if (!quiet) log("training data: ", corpus.stats().summary(corpus_options));
  std::unique_ptr<GuidedAlignments>& alignments = in.alignments;
  if (!o.guided_alignment.empty()) {
    alignments = std::make_unique<GuidedAlignments>(o.guided_alignment);
    TX_CHECK(alignments->lines() == corpus.stats().pairs_read, "--guided-alignment: '",
             o.guided_alignment, "' has ", alignments->lines(), " lines but the training data ",
             corpus.stats().pairs_read, " pairs; give one alignment line per pair");
    alignments->check(corpus);
  }
  return in;
}

}  // namespace tx::train
