// The option registry: every option of the four programs, defined once (Marian's
// config_parser idea), so a flag means the same in every program that takes it.
//
// An option is one row of the table in option_table.cc: a name ("d-model"), a type, a default,
// a help line, a group, and the programs that declare it. Each row becomes the CLI11 flag
// "--d-model" in those programs (command_line.cc) and the key "d-model" of a --config JSON
// file; --dump-config prints the resolved values under the same keys, so a dump read back
// with --config gives the same run.
//
// Resolution, later wins: the row's default, the --task preset (model options only), the
// --config file, the command line.
//
// This header does not include CLI11 (slow to compile): only command_line.cc does.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "io/model_config.h"

namespace tx::app {

// The programs, as bits so a row can name several.
enum Program : unsigned {
  kTrain = 1,
  kTranslate = 2,
  kScore = 4,
  kAverage = 8,
};
constexpr unsigned kAllPrograms = kTrain | kTranslate | kScore | kAverage;

// "tx-average" for kAverage.
const char* program_name(Program program);

enum class OptionType {
  flag,     // bool: "--pre-norm" sets true, "--pre-norm=false" false; JSON true/false
  integer,  // int64; JSON integer
  number,   // double; JSON number
  text,     // string; JSON string
  list,     // strings: "--inputs a b" or positionals; JSON array of strings
};

struct OptionSpec {
  std::string name;  // flag "--<name>" and JSON key "<name>"
  OptionType type = OptionType::text;
  nlohmann::json default_value;  // null: no default (the option is absent unless given)
  std::string help;
  unsigned programs = 0;    // Program bits that declare it
  std::string group;        // heading in --help
  unsigned required = 0;    // Program bits that need a value (from the command line or --config)
  std::string short_name;   // "o" for "-o"; empty for none
  bool positional = false;  // bare arguments fill it (one list option per program at most)
  // A list option given alone ("--exponential-smoothing") is an empty list, and takes at most
  // this many values; 0: at least one value, no limit.
  int max_values = 0;
  // The ModelConfig JSON key this option sets ("d_model"), or empty: the model options take
  // their defaults and --task presets from io::ModelConfig, the one description of a model.
  std::string model_key;
  // Returns why `value` (already of the right type) is invalid, or "" when it is fine.
  std::function<std::string(const nlohmann::json&)> check;
  // Program bits whose default differs from default_value (one meaning, another job: tx-score
  // reports plain log-probs where search ranks by normalised scores).
  std::vector<std::pair<unsigned, nlohmann::json>> program_defaults;

  const nlohmann::json& default_for(Program program) const {
    for (const auto& [programs, value] : program_defaults)
      if (programs & program) return value;
    return default_value;
  }
};

// The whole table, in --help order.
const std::vector<OptionSpec>& option_registry();
// The rows `program` declares.
std::vector<const OptionSpec*> options_of(Program program);

// A bad flag, value, or config file: the caller's mistake, exit code 2 (see run_main).
// The number `text` spells in full ("1e-4", "0.6", "100"; one beyond double's range is
// ±infinity, for the caller's range check), or nullopt for no number (also "nan", "inf"): the
// values of list options that hold numbers (--weights, --shortlist, --exponential-smoothing,
// --output-sampling) are text, and each names its own mistake.
std::optional<double> parse_number(const std::string& text);

class UsageError : public Error {
 public:
  using Error::Error;
};

enum class LogLevel { quiet, normal, verbose };

// The resolved options of one program: name -> value for every declared option that has one.
class Options {
 public:
  explicit Options(Program program);

  Program program() const { return program_; }

  // Sets `name` from `value` after checking its type and the row's check; `source` names where
  // the value came from ("--d-model", "config 'run.json'") in the UsageError.
  void set(const std::string& name, const nlohmann::json& value, const std::string& source);
  // Sets the model options from io::ModelConfig::preset(task); throws UsageError for an
  // unknown preset.
  void apply_preset(const std::string& task, const std::string& source);
  // Throws UsageError naming the first required option without a value.
  void check_required() const;

  // Whether this program declares `name` (asking for an undeclared option is a bug: tx::Error).
  bool declares(const std::string& name) const;
  bool has(const std::string& name) const;  // declared and holds a value
  bool flag(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  // An integer option a 32-bit field takes (beam size, lengths, threads): a value beyond
  // int32 is a UsageError, not a truncation.
  int int32(const std::string& name) const;
  double number(const std::string& name) const;
  std::string text(const std::string& name) const;
  std::vector<std::string> list(const std::string& name) const;

  // --quiet / --verbose (both at once is a UsageError, reported at parse time).
  LogLevel log_level() const;
  // The model options as a ModelConfig (vocabulary sizes 0: tx-train sets them), validated.
  io::ModelConfig model_config() const;
  // --cpu-threads and --tf32 as backend options (--device's index is the registry's).
  BackendOptions backend_options() const;

  // Every value as one JSON object keyed by option name: the --dump-config output.
  const nlohmann::json& values() const { return values_; }

 private:
  const OptionSpec& spec(const std::string& name) const;  // declared by this program
  const nlohmann::json& value(const std::string& name) const;

  Program program_;
  nlohmann::json values_ = nlohmann::json::object();
};

// Reads a --config file: a JSON object whose keys are options of `program`. Throws UsageError
// naming the file and the fix for a missing file, invalid JSON or an unknown key.
nlohmann::json read_config_file(const std::string& path, Program program);

// The resolution order in one place: defaults, then the --task preset (the command line's, else
// the config file's, else the default), then the config file's values, then `command_line`
// (name -> value of each flag given). Checks every value, the model options as a whole, and
// --quiet with --verbose; `check_required` is false for --dump-config and --help.
Options resolve_options(Program program, const std::string& config_path,
                        const nlohmann::json& command_line, bool check_required);

}  // namespace tx::app
