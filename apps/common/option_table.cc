// The option table: one row per option of any tx program. Add a program's options here (with
// its Program bit) and they become flags, --config keys and --dump-config entries at once.
#include <cmath>
#include <optional>

#include "common/options.h"
#include "core/format.h"
#include "data/vocab_train.h"
#include "train/lr_schedule.h"

namespace tx::app {
namespace {

using nlohmann::json;

constexpr unsigned kCompute = kTrain | kTranslate | kScore;  // programs that run a model
constexpr const char* kModelGroup = "Model (set by --task, overridable one by one)";

// Checks: each returns why a value is invalid, or "".
std::string non_negative(const json& v) {
  return v.get<int64_t>() >= 0 ? "" : "must be 0 or more";
}
std::string positive(const json& v) {
  return v.get<double>() > 0 ? "" : "must be positive";
}
// A size of the model: positive, and within ModelConfig's bounds (no product of them overflows).
std::function<std::string(const json&)> size_up_to(int64_t most, int64_t least = 1) {
  return [most, least](const json& v) {
    const double x = v.get<double>();
    if (x >= double(least) && x <= double(most)) return std::string();
    return str("must be ",
               least == 1   ? std::string("positive")
               : least == 0 ? std::string("0 or more")
                            : str("at least ", least),
               " and at most ", most);
  };
}
std::string rate(const json& v) {
  double r = v.get<double>();
  return std::isfinite(r) && r >= 0 && r < 1 ? "" : "must lie in [0, 1)";
}
std::function<std::string(const json&)> one_of(std::vector<std::string> choices) {
  return [choices](const json& v) {
    std::string list;
    for (const std::string& c : choices) {
      if (v.get<std::string>() == c) return std::string();
      list += (list.empty() ? "" : ", ") + c;
    }
    return "must be one of " + list;
  };
}
// "cpu", "cuda" or "cuda:N"; whether that device exists is the backend registry's question.
std::string device_spec(const json& v) {
  const std::string s = v.get<std::string>();
  if (s == "cpu" || s == "cuda") return "";
  if (s.size() > 5 && s.compare(0, 5, "cuda:") == 0 &&
      s.find_first_not_of("0123456789", 5) == std::string::npos)
    return "";
  return "must be cpu, cuda or cuda:N (N a GPU index)";
}

OptionType type_of(const json& v) {
  if (v.is_boolean()) return OptionType::flag;
  if (v.is_number_integer()) return OptionType::integer;
  if (v.is_number()) return OptionType::number;
  return OptionType::text;
}

// A model option: type and default from io::ModelConfig (transformer-base), set by --task.
OptionSpec model_option(std::string name, std::string model_key, std::string help,
                        std::function<std::string(const json&)> check = nullptr) {
  static const json defaults = io::ModelConfig().to_json();
  OptionSpec s;
  s.name = std::move(name);
  s.default_value = defaults.at(model_key);
  s.type = type_of(s.default_value);
  s.help = std::move(help);
  s.programs = kTrain;
  s.group = kModelGroup;
  s.model_key = std::move(model_key);
  s.check = std::move(check);
  return s;
}

OptionSpec option(std::string name, OptionType type, json default_value, std::string help,
                  unsigned programs, std::string group,
                  std::function<std::string(const json&)> check = nullptr) {
  OptionSpec s;
  s.name = std::move(name);
  s.type = type;
  s.default_value = std::move(default_value);
  s.help = std::move(help);
  s.programs = programs;
  s.group = std::move(group);
  s.check = std::move(check);
  return s;
}

std::vector<OptionSpec> make_registry() {
  const std::string general = "General", device = "Device", average = "Averaging";
  std::vector<OptionSpec> t;
  t.push_back(option("quiet", OptionType::flag, false, "Log errors only", kAllPrograms, general));
  t.push_back(option("verbose", OptionType::flag, false, "Log more detail", kAllPrograms, general));

  t.push_back(option("device", OptionType::text, "cpu", "Device to run on: cpu, cuda or cuda:N",
                     kCompute, device, device_spec));
  // OpenMP fails, or crashes, when asked for tens of thousands of threads.
  t.push_back(option("cpu-threads", OptionType::integer, 0, "CPU threads; 0 = all cores", kCompute,
                     device, [](const json& v) {
                       const int64_t n = v.get<int64_t>();
                       return n >= 0 && n <= 1024 ? "" : "must be 0 (all cores) to 1,024";
                     }));
  t.push_back(
      option("tf32", OptionType::flag, false,
             "cuda: fp32 GEMMs on TF32 tensor cores (inputs rounded to 10-bit "
             "mantissas, fp32 sums): faster, results no longer the CPU's (docs/backends.md)",
             kCompute, device));
  t.push_back(option("precision", OptionType::text, "fp32",
                     "GEMM operands: fp32, bf16 or fp16 (f32 sums; weights, optimiser, LayerNorm, "
                     "softmax and loss stay fp32; fp16 training scales the loss). bf16 needs "
                     "AVX-512 on the CPU (docs/precision.md)",
                     kCompute, device, [](const json& v) {
                       // Marian's names for the same: named, so that its users find tx's.
                       const std::string p = v.get<std::string>();
                       const std::string ours = p == "float32"    ? "fp32"
                                                : p == "float16"  ? "fp16"
                                                : p == "bfloat16" ? "bf16"
                                                                  : "";
                       if (!ours.empty()) return "is Marian's name; tx's is " + ours;
                       return one_of({"fp32", "bf16", "fp16"})(v);
                     }));
  t.push_back(option("seed", OptionType::integer, 1,
                     "Seed of every random choice: tx-train's initialisation, dropout and "
                     "shuffling, tx-translate's --output-sampling (tx-score draws nothing)",
                     kCompute, device, non_negative));

  t.push_back(option("task", OptionType::text, "transformer-base",
                     "Model preset (paper Table 3): transformer-base or transformer-big", kTrain,
                     kModelGroup, one_of(io::ModelConfig::preset_names())));
  t.push_back(model_option("d-model", "d_model", "Model (embedding) size",
                           size_up_to(io::ModelConfig::kMaxWidth)));
  t.push_back(model_option("d-ff", "d_ff", "Inner size of the feed-forward layers",
                           size_up_to(io::ModelConfig::kMaxWidth)));
  t.push_back(model_option("heads", "heads", "Attention heads (must divide --d-model)",
                           size_up_to(io::ModelConfig::kMaxWidth)));
  t.push_back(model_option("enc-layers", "encoder_layers", "Encoder layers",
                           size_up_to(io::ModelConfig::kMaxLayers)));
  t.push_back(model_option("dec-layers", "decoder_layers", "Decoder layers",
                           size_up_to(io::ModelConfig::kMaxLayers)));
  t.push_back(
      model_option("dropout", "dropout", "Dropout on sublayer outputs and embeddings", rate));
  t.push_back(model_option("attention-dropout", "attention_dropout",
                           "Dropout on attention probabilities", rate));
  t.push_back(
      model_option("relu-dropout", "relu_dropout", "Dropout inside the feed-forward layers", rate));
  t.push_back(model_option("dropout-src", "dropout_src",
                           "Word dropout: whole source token embeddings zeroed (Marian's)", rate));
  t.push_back(model_option("dropout-trg", "dropout_trg",
                           "Word dropout: whole target token embeddings zeroed (Marian's)", rate));
  t.push_back(model_option("label-smoothing", "label_smoothing", "Label smoothing epsilon", rate));
  t.push_back(model_option("tied-embeddings", "tied_embeddings",
                           "Shared embeddings: none, decoder (target = output) or all",
                           one_of({"none", "decoder", "all"})));
  t.push_back(model_option("pre-norm", "pre_norm", "Pre-norm layers (the paper is post-norm)"));
  // (2: a position for a piece beside eos.)
  t.push_back(model_option("max-length", "max_length", "Longest sequence the positions cover",
                           size_up_to(io::ModelConfig::kMaxPositions, 2)));
  t.push_back(model_option("norm-eps", "norm_eps", "LayerNorm epsilon", positive));
  // The variants of imported models (docs/models.md), trainable too.
  t.push_back(model_option("embed-scale", "embed_scale",
                           "Scale embeddings by sqrt(d-model) (--embed-scale=false: unscaled)"));
  t.push_back(model_option("positions", "positions",
                           "Sinusoid layout: interleaved (tx), halves (Marian, fairseq), "
                           "halves_hf (Hugging Face Marian)",
                           one_of({"interleaved", "halves", "halves_hf"})));
  t.push_back(model_option("position-offset", "position_offset",
                           "Position of the first token (fairseq: padding id + 1)",
                           size_up_to(io::ModelConfig::kMaxPositions, 0)));
  t.push_back(
      model_option("embed-norm", "embed_norm",
                   "LayerNorm after the embeddings (Marian's --transformer-postprocess-emb n)"));
  t.push_back(model_option("final-norm", "final_norm",
                           "With --pre-norm, a LayerNorm after each stack (Marian's "
                           "--transformer-postprocess-top n)"));
  t.push_back(model_option("ffn-activation", "activation", "Feed-forward activation: relu or swish",
                           one_of({"relu", "swish"})));
  t.push_back(model_option("output-bias", "output_bias", "A bias on the output logits"));
  const auto token_id = [](const json& v) {
    return v.get<int64_t>() >= -1 ? "" : "must be a token id, or -1 for none";
  };
  t.push_back(model_option("pad-id", "pad_id", "Padding id (-1: none)", token_id));
  t.push_back(model_option("unk-id", "unk_id", "Unknown-token id (-1: none)", token_id));
  t.push_back(model_option("bos-id", "bos_id", "Begin-of-sentence id (-1: none)", token_id));
  t.push_back(model_option("eos-id", "eos_id", "End-of-sentence id", non_negative));
  t.push_back(model_option("decoder-start-id", "decoder_start_id",
                           "The decoder's first input (-1: a zero vector, Marian's)", token_id));
  t.push_back(model_option("transformer-guided-alignment-layer", "alignment_layer",
                           "The decoder layer (1-based; 0 the last) whose cross-attention "
                           "tx-translate --alignment reads and --guided-alignment trains",
                           non_negative));
  t.push_back(model_option(
      "alignment-head", "alignment_head",
      "That layer's head (-1: the average over heads; --guided-alignment "
      "trains head 0 then, as Marian)",
      [](const json& v) { return v.get<int64_t>() >= -1 ? "" : "must be -1 or more"; }));
  t.push_back(model_option("marian-prenorm-cache", "marian_prenorm_cache",
                           "Decode pre-norm layers as marian-decoder does (docs/models.md)"));

  // tx-translate and tx-score (Marian's names where Marian has the option).
  const std::string model_files = "Model files", search = "Search", batching = "Batching",
                    metrics = "Metrics", scoring = "Model scoring";
  auto at_least_zero = [](const json& v) {
    return std::isfinite(v.get<double>()) && v.get<double>() >= 0 ? "" : "must be 0 or more";
  };
  // A list's count of values, checked where it is read (command line or config), so that
  // --dump-config refuses what a run would.
  auto values = [](size_t least, size_t most, std::string what) {
    return [=](const json& v) {
      return v.size() >= least && v.size() <= most
                 ? std::string()
                 : str("is ", v.size(), v.size() == 1 ? " value" : " values", "; give ", what);
    };
  };
  // One idea, two shapes (Marian's too: --model in training, --models in decoding): the
  // programs that run a model take several, an ensemble.
  OptionSpec models = option("model", OptionType::list, nullptr,
                             "Models to run: tx .safetensors files, Marian model.npz files or "
                             "Hugging Face MarianMTModel directories (docs/models.md); several "
                             "make an ensemble (--weights)",
                             kTranslate | kScore, model_files);
  models.short_name = "m";
  models.required = kTranslate;
  t.push_back(models);
  OptionSpec model =
      option("model", OptionType::text, nullptr, "The model directory (tx-average: with --last)",
             kTrain | kAverage, model_files);
  model.short_name = "m";
  t.push_back(model);  // tx-train checks its own (its tests parse without)
  t.push_back(option("shortlist", OptionType::list, nullptr,
                     "Lexical shortlist (Marian's): FILE [FIRST [BEST]] (defaults 100 100): the "
                     "output layer covers the FIRST most frequent target words and each source "
                     "word's BEST translations in FILE (lex.s2t: target source probability)",
                     kTranslate, search));
  t.push_back(option("weights", OptionType::list, nullptr,
                     "Ensemble weights, one per model: each step ranks by the sum of weight x "
                     "log-prob (Marian's rule); default 1/N each, so scores stay log-probs",
                     kTranslate | kScore, model_files));
  t.push_back(option("pretrained-model", OptionType::text, "",
                     "Start from this model (a Marian model.npz, a Hugging Face directory or a "
                     "tx model file): its architecture and vocabularies, its weights as the "
                     "first update's (docs/models.md)",
                     kTrain, model_files));
  OptionSpec vocabs = option("vocabs", OptionType::list, nullptr,
                             "Vocabularies: source then target, or one joint (tx: .spm; Marian: "
                             ".yml or .spm, default those its decoder.yml names; a Hugging Face "
                             "directory brings its own)",
                             kTranslate | kScore | kTrain, model_files,
                             values(1, 2, "1 (joint) or 2 (source, target) vocabulary files"));
  vocabs.short_name = "v";
  t.push_back(vocabs);
  OptionSpec input =
      option("input", OptionType::text, "-", "Input text file (tx-score: hypotheses); - is stdin",
             kTranslate | kScore, general);
  input.short_name = "i";
  t.push_back(input);
  OptionSpec beam = option("beam-size", OptionType::integer, 5, "Beam size; 1 is greedy search",
                           kTranslate | kTrain, search, positive);
  beam.short_name = "b";
  t.push_back(beam);
  t.push_back(option("n-best", OptionType::integer, 1,
                     "Hypotheses per line (<= --beam-size); above 1 prints Marian's n-best "
                     "format 'i ||| text ||| F0= log-prob ||| score'",
                     kTranslate, search, positive));
  // 1 for search (fairseq's and CTranslate2's default: without it beam search favours short
  // outputs); tx-score reports the plain log-prob unless asked, as marian-scorer does.
  OptionSpec normalize = option("normalize", OptionType::number, 1.0,
                                "Length normalisation: score = log-prob / length^ALPHA (length "
                                "counts eos); 0 is the plain log-prob. tx-train uses it for "
                                "validation BLEU",
                                kTranslate | kScore | kTrain, search, [](const json& v) {
                                  // length^ALPHA must stay within float for lengths up to
                                  // thousands of tokens (4,096^10 = 1.3e36), or scores tie at 0.
                                  const double a = v.get<double>();
                                  return std::isfinite(a) && a >= 0 && a <= 10
                                             ? ""
                                             : "must lie in [0, 10] (0.6 to 2 are usual)";
                                });
  normalize.short_name = "n";
  normalize.program_defaults = {{kScore, 0.0}};
  t.push_back(normalize);
  t.push_back(option("output-sampling", OptionType::list, nullptr,
                     "Sample instead of search (back-translation), Marian's syntax: 'full [T]' "
                     "draws each token from the model's distribution at temperature T (default "
                     "1), 'topk K [T]' from its K best; implies --beam-size 1; --seed picks the "
                     "samples, each line its own stream",
                     kTranslate, search));
  OptionSpec alignment =
      option("alignment", OptionType::list, nullptr,
             "Append each translation's word alignment, Marian's: 'hard' (alone: hard) gives "
             "each target token's most probable source token, a threshold T in (0, 1] every "
             "pair above T, 'soft' every probability; 's-t' pairs of SentencePiece pieces with "
             "eos, from the model's alignment layer and head (docs/tx-translate.md)",
             kTranslate, search);
  alignment.max_values = 1;
  t.push_back(alignment);
  t.push_back(option("alignment-words", OptionType::flag, false,
                     "With --alignment: number words (pieces joined at their word starts, eos "
                     "left out) instead of pieces",
                     kTranslate, search));
  t.push_back(option("force-decode", OptionType::flag, false,
                     "Each input line may end in a tab and a prefix (target text) that its "
                     "translation must start with; the search goes on from there and the "
                     "scores count it",
                     kTranslate, search));
  t.push_back(option("search-rule", OptionType::text, "auto",
                     "How hypotheses end: fairseq (beam stays full; tx's models), marian "
                     "(each ending shrinks the beam, Marian's length limit), huggingface "
                     "(generate()'s stopping rule); auto: the rule of the engine that made "
                     "the model",
                     kTranslate, search, one_of({"auto", "fairseq", "marian", "huggingface"})));
  t.push_back(option("max-length-factor", OptionType::number, 1.5,
                     "Output tokens at most factor * source tokens + --max-length-b", kTranslate,
                     search, [](const json& v) {
                       // Held in a float; a huge factor is capped by the model's positions.
                       const double a = v.get<double>();
                       return std::isfinite(a) && a >= 0 && a <= 1e38
                                  ? ""
                                  : "must lie in [0, 1e38] (the model's positions cap the length "
                                    "anyway)";
                     }));
  t.push_back(option("max-length-b", OptionType::integer, 10,
                     "Output tokens added to --max-length-factor * source tokens", kTranslate,
                     search, non_negative));
  t.push_back(option("min-length", OptionType::integer, -1,
                     "Output tokens before eos may end a hypothesis (fairseq's --min-len); -1: "
                     "the model's engine's default, 1 for fairseq models (fairseq-generate's), "
                     "else 0",
                     kTranslate, search, [](const json& v) {
                       return v.get<int64_t>() >= -1 ? "" : "must be -1 (auto) or more";
                     }));
  t.push_back(option("max-tokens", OptionType::integer, 4096,
                     "Padded tokens per batch: rows * the longest sequence the batch reads "
                     "(source or target; translation reads only the source)",
                     kTranslate | kScore | kTrain, batching, positive));
  t.push_back(option("mini-batch", OptionType::integer, 0,
                     "Sentences per batch at most; 0 = no cap beyond --max-tokens",
                     kTranslate | kScore | kTrain, batching, non_negative));
  t.push_back(option("maxi-batch", OptionType::integer, 100,
                     "Batches' worth of sentences read and sorted by length together; "
                     "0 = the whole input. Translation with --maxi-batch 1 --mini-batch 1 "
                     "writes each line as soon as it is read",
                     kTrain | kTranslate, batching, non_negative));
  t.push_back(option("int8", OptionType::flag, false,
                     "int8 inference: the linear layers' weights quantised per output row at "
                     "load, activations per row on the fly, exact i32 sums (docs/int8.md)",
                     kTranslate | kScore, device));
  t.push_back(option("deterministic", OptionType::flag, false,
                     "Results bit-identical whatever else is in the input or the batch sizes: "
                     "each sentence in a batch of its own (slower; docs/determinism.md)",
                     kTranslate | kScore, batching));
  t.push_back(option("metrics", OptionType::list, json::array({"bleu"}),
                     "Metrics without a model: bleu, chrf, chrf++ (comma- or space-separated)",
                     kScore, metrics));
  OptionSpec refs = option("references", OptionType::list, nullptr,
                           "Reference files, one line per hypothesis (metrics)", kScore, metrics);
  refs.short_name = "r";
  t.push_back(refs);
  t.push_back(option("lowercase", OptionType::flag, false,
                     "Case-insensitive metrics (every metric, unlike sacreBLEU's -lc)", kScore,
                     metrics));
  t.push_back(option("tokenize", OptionType::text, "13a",
                     "BLEU tokenizer (sacreBLEU's): 13a, intl (Unicode punctuation and "
                     "symbols), char (every character) or none",
                     kScore, metrics, one_of({"13a", "intl", "char", "none"})));
  // Each order is a table per line: 100 is far beyond any use (4 is the standard) and keeps a
  // mistyped value from exhausting memory.
  t.push_back(option("max-ngram-order", OptionType::integer, 4,
                     "BLEU's highest n-gram order (sacreBLEU's max_ngram_order), 1 to 100", kScore,
                     metrics, [](const json& v) {
                       const int64_t n = v.get<int64_t>();
                       return n >= 1 && n <= 100 ? "" : "must lie in 1..100 (4 is BLEU's)";
                     }));
  t.push_back(option("sentence-level", OptionType::flag, false,
                     "One score per hypothesis line instead of one per corpus (sacreBLEU's "
                     "sentence_bleu: effective order on); one metric only",
                     kScore, metrics));
  t.push_back(option("score-only", OptionType::flag, false,
                     "Print the score alone, without the signature and statistics", kScore,
                     metrics));
  t.push_back(option("src", OptionType::text, nullptr,
                     "Source sentences, one per line (model scoring)", kScore, scoring));
  t.push_back(option("tgt", OptionType::text, nullptr,
                     "Target sentences to score, one per line (model scoring)", kScore, scoring));
  t.push_back(option("n-best-list", OptionType::text, nullptr,
                     "Marian n-best list to rescore in place of --tgt ('i ||| text ||| "
                     "features ||| score', i the 0-based --src line); each line comes back "
                     "with the model's score appended to its features",
                     kScore, scoring));
  t.push_back(option("n-best-feature", OptionType::text, nullptr,
                     "Feature name for the score --n-best-list appends (Marian's "
                     "--n-best-feature); default: the first F<k> the list does not use (F1 "
                     "after tx-translate's F0)",
                     kScore, scoring));

  // tx-train (it shares model, vocabs, max-tokens and beam-size with the rows above).
  const std::string train_data = "Training data", training = "Training", validation = "Validation";
  t.push_back(option("train-sets", OptionType::list, nullptr,
                     "Training corpus: SRC TGT (one sentence per line, aligned); required", kTrain,
                     train_data, values(2, 2, "2 files (source, target)")));
  t.push_back(option("valid-sets", OptionType::list, nullptr,
                     "Validation corpus: SRC TGT (none: no validation)", kTrain, train_data,
                     values(2, 2, "2 files (source, target)")));
  t.push_back(option("dim-vocabs", OptionType::integer, 32000,
                     "Pieces of each vocabulary trained on the fly (fewer on a small corpus)",
                     kTrain, train_data, size_up_to(io::ModelConfig::kMaxVocab, 5)));
  t.push_back(option("sentencepiece-options", OptionType::text, "",
                     "SentencePiece trainer fields for a vocabulary trained on the fly "
                     "(Marian's), spm_train's flags in one value: e.g. "
                     "--sentencepiece-options=--model_type=bpe; a vocabulary file that "
                     "exists is read as it is",
                     kTrain, train_data, [](const json& v) {
                       try {
                         data::parse_trainer_fields(v.get<std::string>());
                       } catch (const Error& e) {
                         return std::string(e.what());
                       }
                       return std::string();
                     }));
  t.push_back(option("lr-schedule", OptionType::text, "transformer",
                     "Learning-rate schedule: transformer (the paper's), inverse-sqrt "
                     "(fairseq's), linear (warm-up, then down to 0 at the last update of "
                     "--after-epochs/--after-updates/--after-minutes) or constant",
                     kTrain, training, one_of(train::LrSchedule::names())));
  t.push_back(option("learn-rate", OptionType::number, 5e-4,
                     "Peak rate (inverse-sqrt, linear) or the rate (constant); transformer "
                     "ignores it",
                     kTrain, training, positive));
  t.push_back(option("lr-warmup", OptionType::integer, 4000,
                     "Warm-up updates (transformer, inverse-sqrt, linear)", kTrain, training,
                     positive));
  t.push_back(option("lr-factor", OptionType::number, 1.0,
                     "transformer: multiplies d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)",
                     kTrain, training, positive));
  t.push_back(
      option("clip-norm", OptionType::number, 0.0,
             "Clip the global gradient norm to this; 0 = no clipping", kTrain, training,
             [](const json& v) { return v.get<double>() >= 0 ? "" : "must be 0 or more"; }));
  t.push_back(option(
      "optimizer-params", OptionType::list, nullptr,
      "Adam's BETA1 [BETA2 [EPS [WEIGHT_DECAY]]] (Marian's; default the paper's 0.9 0.98 1e-9, no "
      "decay)",
      kTrain, training, [](const json& v) {
        if (v.empty() || v.size() > 4)
          return str("is ", v.size(), " values; give BETA1 [BETA2 [EPS [WEIGHT_DECAY]]]");
        const char* names[] = {"beta1", "beta2", "epsilon", "weight decay"};
        for (size_t i = 0; i < v.size(); ++i) {
          const std::string text = v[i].get<std::string>();
          const std::optional<double> x = parse_number(text);
          const bool ok = x && std::isfinite(*x) && *x >= 0 && (i >= 2 || *x < 1);
          if (!ok)
            return str("has the ", names[i], " '", text, "'; it must be a number ",
                       i < 2 ? "at least 0 and below 1" : "at least 0");
        }
        return std::string();
      }));
  t.push_back(option("optimizer-delay", OptionType::integer, 1,
                     "Batches whose gradients are summed per update (per process under mpirun)",
                     kTrain, training, positive));
  t.push_back(option("transformer-depth-scaling", OptionType::flag, false,
                     "Initialise layer l of each stack in 1/sqrt(l) of Glorot's range (Marian's; "
                     "DS-Init): a deep post-norm stack learns sooner (docs/tx-train.md)",
                     kTrain, training));
  t.push_back(option("guided-alignment", OptionType::text, "",
                     "Word alignments of the training pairs (Marian's): one line per pair of "
                     "'s-t' token positions, counted over the vocabularies' pieces; head 0 of "
                     "--transformer-guided-alignment-layer learns them (head 0 unless "
                     "--alignment-head), for tx-translate --alignment",
                     kTrain, training));
  t.push_back(option("sentencepiece-alphas", OptionType::list, nullptr,
                     "Subword regularisation (Marian's): each epoch, the source (A) and target "
                     "(B) sides segmented by SentencePiece sampling with smoothing alpha A [B] "
                     "(0: the best segmentation, as validation and translation use)",
                     kTrain, training, [](const json& v) {
                       if (v.empty() || v.size() > 2)
                         return str("is ", v.size(), " values; give A [B] (source, target)");
                       for (const json& a : v) {
                         const std::optional<double> x = parse_number(a.get<std::string>());
                         if (!x || !(*x >= 0) || !std::isfinite(static_cast<float>(*x)))
                           return str("has '", a.get<std::string>(),
                                      "', which is not an alpha (a number >= 0; 0 keeps the best "
                                      "segmentation)");
                       }
                       return std::string();
                     }));
  t.push_back(option("guided-alignment-weight", OptionType::number, 0.1,
                     "Weight of the guided-alignment cross-entropy beside the translation loss",
                     kTrain, training, at_least_zero));
  t.push_back(option("rdrop-alpha", OptionType::number, 0.0,
                     "R-Drop (fairseq's): each batch runs twice and the loss adds this weight "
                     "times the symmetric KL between the two passes; an update costs about 2x "
                     "(0: off)",
                     kTrain, training, at_least_zero));
  OptionSpec smoothing =
      option("exponential-smoothing", OptionType::list, nullptr,
             "Keep exponentially smoothed weights for validation and the model files (Marian's): "
             "FACTOR (alone: 1e-4) [REFERENCE_TARGET_WORDS_PER_UPDATE]",
             kTrain, training, [](const json& v) {
               const std::vector<std::string> given = v.get<std::vector<std::string>>();
               const std::optional<double> factor = given.empty() ? 1e-4 : parse_number(given[0]);
               if (!factor || !(*factor >= 0 && *factor < 1))
                 return str("has the factor '", given[0],
                            "'; it must be a number at least 0 and below 1 (0 turns smoothing off; "
                            "Marian's usual value is 1e-4)");
               if (given.size() < 2) return std::string();
               const std::optional<double> words = parse_number(given[1]);
               if (!words || !(*words >= 1 && *words == std::floor(*words) && *words <= 1e15))
                 return str("has the reference target words '", given[1],
                            "'; they must be a positive integer");
               return std::string();
             });
  smoothing.max_values = 2;
  t.push_back(smoothing);
  t.push_back(option("after-epochs", OptionType::integer, 0,
                     "Stop after this many epochs; 0 = no limit", kTrain, training, non_negative));
  t.push_back(option("after-updates", OptionType::integer, 0,
                     "Stop after this many updates in all (a resumed run counts earlier ones); "
                     "0 = no limit",
                     kTrain, training, non_negative));
  t.push_back(option("after-minutes", OptionType::number, 0,
                     "Stop once training has run this many minutes (a resumed run counts earlier "
                     "ones); the linear schedule plans its last update from the warm-up's pace; "
                     "0 = no limit",
                     kTrain, training, at_least_zero));
  t.push_back(option("disp-freq", OptionType::integer, 1000, "Log every this many updates", kTrain,
                     training, positive));
  t.push_back(option("save-freq", OptionType::integer, 10000,
                     "Save the checkpoint and model every this many updates (and at the end)",
                     kTrain, training, positive));
  t.push_back(option("keep-last", OptionType::integer, 0,
                     "Also write model.u<update>.safetensors at every --save-freq save and at the "
                     "run's end, and keep the newest N of them (for tx-average --last); 0 = none",
                     kTrain, training, non_negative));
  t.push_back(option("no-restore-corpus", OptionType::flag, false,
                     "On resume, go on from the next epoch's first batch instead of the "
                     "checkpoint's batch: allows other --max-tokens, --mini-batch, "
                     "--maxi-batch, --seed, --sentencepiece-alphas or data than the saved "
                     "run's (Marian's)",
                     kTrain, training));
  t.push_back(option("dry-run", OptionType::flag, false,
                     "Build the model from the options (vocabularies of --dim-vocabs pieces), "
                     "print its parameter counts and exit; reads no data",
                     kTrain, training));
  t.push_back(option("valid-freq", OptionType::integer, 10000, "Validate every this many updates",
                     kTrain, validation, positive));
  t.push_back(option("valid-metrics", OptionType::list, json::array({"cross-entropy"}),
                     "Validation metrics: cross-entropy, perplexity, bleu, chrf (the last two "
                     "translate the validation set with --beam-size); the first drives early "
                     "stopping and names the best model",
                     kTrain, validation, [](const json& v) {
                       for (const json& m : v) {
                         const std::string s = m.get<std::string>();
                         if (s != "cross-entropy" && s != "perplexity" && s != "bleu" &&
                             s != "chrf")
                           return "'" + s + "' is not one of cross-entropy, perplexity, bleu, chrf";
                       }
                       return v.empty() ? std::string("needs at least one metric") : std::string();
                     }));
  t.push_back(option("early-stopping", OptionType::integer, 10,
                     "Stop after this many validations without a new best; 0 = never", kTrain,
                     validation, non_negative));

  OptionSpec output = option("output", OptionType::text, nullptr,
                             "Output model file (.safetensors)", kAverage, average);
  output.short_name = "o";
  output.required = kAverage;
  t.push_back(output);
  OptionSpec inputs = option("inputs", OptionType::list, nullptr,
                             "Checkpoints to average (also as bare arguments)", kAverage, average);
  inputs.positional = true;
  t.push_back(inputs);
  t.push_back(option("last", OptionType::integer, 0,
                     "Average the newest N model.u<update>.safetensors of the model directory "
                     "-m DIR (written by tx-train --keep-last) instead of --inputs",
                     kAverage, average, non_negative));
  return t;
}

}  // namespace

const std::vector<OptionSpec>& option_registry() {
  static const std::vector<OptionSpec> registry = make_registry();
  return registry;
}

}  // namespace tx::app
