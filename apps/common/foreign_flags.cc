#include "common/foreign_flags.h"

#include <set>

#include "core/format.h"

namespace tx::app {
namespace {

struct Foreign {
  const char* name;   // as the other engine spells it
  unsigned programs;  // the tx programs that lack it
  const char* engine;
  const char* advice;
};

constexpr unsigned kRun = kTranslate | kScore;

// Only names no tx program of `programs` has; tx's own flags never reach this table.
constexpr Foreign kForeign[] = {
    {"--models", kRun, "Marian's", "give the model files to -m/--model (several make an ensemble)"},
    {"--path", kRun, "fairseq's",
     "give the model to -m/--model (a fairseq checkpoint is converted once: docs/models.md)"},
    {"-d", kRun | kTrain, "Marian's",
     "use --device cuda:N (one GPU per process) or --cpu-threads N"},
    {"--devices", kRun, "Marian's", "use --device cuda:N (one GPU) or --cpu-threads N"},
    {"--devices", kTrain, "Marian's",
     "use --device cuda:N (one GPU per process; mpirun for several) or --cpu-threads N"},
    {"--cpu", kRun | kTrain, "fairseq's", "--device cpu is the default"},
    {"--fp16", kRun | kTrain, "fairseq's", "use --precision fp16"},
    {"--bf16", kRun | kTrain, "fairseq's", "use --precision bf16"},
    {"--workspace", kRun | kTrain, "Marian's", "tx takes the memory it needs; leave it out"},
    {"-w", kTranslate | kTrain, "Marian's", "tx takes the memory it needs; leave it out"},
    {"--batch-size", kRun | kTrain, "fairseq's", "use --mini-batch N (sentences per batch)"},
    {"--mini-batch-words", kRun | kTrain, "Marian's",
     "use --max-tokens N (padded tokens per batch)"},
    {"--beam", kTranslate, "fairseq's", "use -b/--beam-size N"},
    {"--nbest", kTranslate, "fairseq's", "use --n-best N"},
    {"--lenpen", kTranslate, "fairseq's", "use -n/--normalize ALPHA"},
    {"--max-len-a", kTranslate, "fairseq's", "use --max-length-factor A"},
    {"--max-len-b", kTranslate, "fairseq's", "use --max-length-b B"},
    {"--min-len", kTranslate, "fairseq's", "use --min-length N"},
    {"--sampling", kTranslate, "fairseq's", "use --output-sampling full [T]"},
    {"--sampling-topk", kTranslate, "fairseq's", "use --output-sampling topk K [T]"},
    {"--temperature", kTranslate, "fairseq's", "use --output-sampling full T (or topk K T)"},
    {"--print-alignment", kTranslate, "fairseq's", "use --alignment"},
    {"--prefix-size", kTranslate, "fairseq's",
     "use --force-decode with source<TAB>prefix input lines"},
    {"--max-length", kTranslate, "Marian's",
     "tx-translate crops a source longer than the model's positions by itself, and limits the "
     "output with --max-length-factor and --max-length-b"},
    {"--max-length-crop", kTranslate, "Marian's",
     "tx-translate always crops a source longer than the model's positions"},
    {"-o", kTranslate | kScore, "Marian's", "the output is stdout: redirect it (> FILE)"},
    {"--output", kTranslate | kScore, "Marian's", "the output is stdout: redirect it (> FILE)"},
    {"-tok", kScore, "sacreBLEU's", "use --tokenize"},
    {"-lc", kScore, "sacreBLEU's", "use --lowercase"},
    {"-sl", kScore, "sacreBLEU's", "use --sentence-level"},
    {"-b", kScore, "sacreBLEU's", "use --score-only"},
    {"-l", kScore, "sacreBLEU's", "tx-score needs no language pair; leave it out"},
    {"--language-pair", kScore, "sacreBLEU's", "tx-score needs no language pair; leave it out"},
    {"-w", kScore, "sacreBLEU's (width) and marian-scorer's (workspace)",
     "tx-score prints sacreBLEU's width and takes the memory it needs; leave it out"},
    {"--width", kScore, "sacreBLEU's", "tx-score prints sacreBLEU's default width; leave it out"},
};

// Flags another engine lets stand alone, with their meaning there.
struct Implicit {
  const char* flag;  // as CLI11 names it in "--x: 1 required ... missing"
  unsigned programs;
  const char* advice;
};
constexpr Implicit kImplicit[] = {
    {"--normalize", kTranslate, "Marian's -n alone means 0.6: give the value (-n 0.6)"},
    {"--output-sampling", kTranslate,
     "Marian's --output-sampling alone means full: give --output-sampling full"},
    {"--n-best", kTranslate,
     "Marian's --n-best alone prints all --beam-size hypotheses: give that count (--n-best 5)"},
};

}  // namespace

std::string foreign_flag_advice(Program program, const std::string& error, int argc,
                                const char* const argv[]) {
  if (error.find(" required ") != std::string::npos && error.find(" missing") != std::string::npos)
    for (const Implicit& i : kImplicit)
      if ((i.programs & program) && error.rfind(std::string(i.flag) + ":", 0) == 0)
        return str(i.flag, " needs a value; ", i.advice);
  std::set<std::string> own;  // (the table names none of them; a guard against a new flag)
  for (const OptionSpec* spec : options_of(program)) {
    own.insert("--" + spec->name);
    if (!spec->short_name.empty()) own.insert("-" + spec->short_name);
  }
  for (int k = 1; k < argc; ++k) {
    std::string arg = argv[k];
    arg = arg.substr(0, arg.find('='));
    if (arg.size() < 2 || arg[0] != '-' || own.count(arg)) continue;
    for (const Foreign& f : kForeign)
      if ((f.programs & program) && arg == f.name)
        return str(arg, " is ", f.engine, " name, not ", program_name(program), "'s: ", f.advice,
                   " (run '", program_name(program), " --help' for the options)");
    // Another tx program's flag (tx-train --int8, tx-average --d-model).
    std::string others;
    for (const Program p : {kTrain, kTranslate, kScore, kAverage})
      for (const OptionSpec* spec : options_of(p))
        if (arg == "--" + spec->name ||
            (!spec->short_name.empty() && arg == "-" + spec->short_name)) {
          others += std::string(others.empty() ? "" : " and ") + program_name(p);
          break;
        }
    if (!others.empty())
      return str(arg, " is a flag of ", others, ", not of ", program_name(program), " (run '",
                 program_name(program), " --help' for its options)");
  }
  return "";
}

}  // namespace tx::app
