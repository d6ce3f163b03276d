// Options: typed values keyed by option name, and the order in which defaults, the --task
// preset, the --config file and the command line override each other.
#include "common/options.h"

#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace tx::app {
namespace {

using nlohmann::json;

const char* type_text(OptionType type) {
  switch (type) {
    case OptionType::flag:
      return "true or false";
    case OptionType::integer:
      return "an integer";
    case OptionType::number:
      return "a number";
    case OptionType::text:
      return "a string";
    case OptionType::list:
      return "a list of strings";
  }
  return "?";
}

// `v` converted to the option's type (an integer is a fine number), or null when it is not.
json typed(const OptionSpec& spec, const json& v) {
  switch (spec.type) {
    case OptionType::flag:
      return v.is_boolean() ? v : json();
    case OptionType::integer:
      if (v.is_number_unsigned())
        return v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()) ? v : json();
      return v.is_number_integer() ? v : json();
    case OptionType::number:
      return v.is_number() ? json(v.get<double>()) : json();
    case OptionType::text:
      return v.is_string() ? v : json();
    case OptionType::list:
      // A config's "model": "a.npz" is a list of one, as Marian's YAML reads a scalar, and
      // numbers ("weights": [0.6, 0.4]) are their text.
      if (v.is_string() || v.is_number()) return typed(spec, json::array({v}));
      if (!v.is_array()) return json();
      json out = json::array();
      for (const json& item : v) {
        if (item.is_number())
          out.push_back(item.dump());
        else if (item.is_string())
          out.push_back(item);
        else
          return json();
      }
      return out;
  }
  return json();
}

}  // namespace

std::optional<double> parse_number(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || std::isnan(x)) return std::nullopt;
  // An overflow is ±infinity, which every caller's range check names as written (stod threw:
  // "1e400 is not a number"); a spelled "inf" is no number.
  if (std::isinf(x) && errno != ERANGE) return std::nullopt;
  return x;
}

const char* program_name(Program program) {
  switch (program) {
    case kTrain:
      return "tx-train";
    case kTranslate:
      return "tx-translate";
    case kScore:
      return "tx-score";
    case kAverage:
      return "tx-average";
  }
  return "tx";
}

std::vector<const OptionSpec*> options_of(Program program) {
  std::vector<const OptionSpec*> out;
  for (const OptionSpec& s : option_registry())
    if (s.programs & program) out.push_back(&s);
  return out;
}

Options::Options(Program program) : program_(program) {
  for (const OptionSpec* s : options_of(program))
    // Typed as a value given is (a number's 0 as 0.0), so that --dump-config's output read
    // back with --config dumps the same bytes.
    if (!s->default_for(program).is_null()) {
      values_[s->name] = typed(*s, s->default_for(program));
      TX_CHECK(!values_[s->name].is_null(), "the default of --", s->name,
               " is not of its type; fix its row in apps/common/option_table.cc");
    }
}

const OptionSpec& Options::spec(const std::string& name) const {
  for (const OptionSpec* s : options_of(program_))
    if (s->name == name) return *s;
  // A program asking for an option it does not declare is a bug in the program, not the user's.
  throw Error(str(program_name(program_), " does not declare option '", name,
                  "'; add it to the table in apps/common/option_table.cc"));
}

void Options::set(const std::string& name, const json& value, const std::string& source) {
  const OptionSpec& s = spec(name);
  json v = typed(s, value);
  if (v.is_null())
    throw UsageError(str(source, ": expected ", type_text(s.type), ", got ", value.dump()));
  if (s.type == OptionType::list && s.max_values > 0 &&
      v.size() > static_cast<size_t>(s.max_values))
    throw UsageError(str(source, ": ", v.dump(), " has ", v.size(), " values; --", name,
                         " takes at most ", s.max_values));
  // Not through dump(), which writes NaN and infinities as JSON's null.
  if (s.type == OptionType::number && !std::isfinite(v.get<double>()))
    throw UsageError(str(source, ": ", v.get<double>(), " is not a finite number"));
  if (s.check) {
    const std::string problem = s.check(v);
    if (!problem.empty()) throw UsageError(str(source, ": ", v.dump(), " ", problem));
  }
  values_[name] = std::move(v);
}

void Options::apply_preset(const std::string& task, const std::string& source) {
  io::ModelConfig preset;
  try {
    preset = io::ModelConfig::preset(task);
  } catch (const Error& e) {
    throw UsageError(str(source, ": ", e.what()));
  }
  const json j = preset.to_json();
  for (const OptionSpec* s : options_of(program_))
    if (!s->model_key.empty()) values_[s->name] = j.at(s->model_key);
}

void Options::check_required() const {
  for (const OptionSpec* s : options_of(program_)) {
    if (!(s->required & program_)) continue;
    if (has(s->name) && value(s->name) == json(""))  // -m "": a path that names nothing
      throw UsageError(str("--", s->name, " is empty; give a value (see '", program_name(program_),
                           " --help')"));
    if (has(s->name)) continue;
    throw UsageError(str("--", s->name, " is required; give it on the command line or in --config",
                         " (see '", program_name(program_), " --help')"));
  }
}

bool Options::declares(const std::string& name) const {
  for (const OptionSpec* s : options_of(program_))
    if (s->name == name) return true;
  return false;
}

bool Options::has(const std::string& name) const {
  spec(name);
  return values_.contains(name);
}

const json& Options::value(const std::string& name) const {
  spec(name);
  auto it = values_.find(name);
  TX_CHECK(it != values_.end(), "option --", name, " has no value; give it or make it required");
  return *it;
}

bool Options::flag(const std::string& name) const {
  return value(name).get<bool>();
}
int64_t Options::integer(const std::string& name) const {
  return value(name).get<int64_t>();
}
int Options::int32(const std::string& name) const {
  const int64_t v = integer(name);
  // (The option's own check, e.g. "positive", has passed: only the field's bound is news.)
  if (v > std::numeric_limits<int32_t>::max())
    throw UsageError(str("--", name, " ", v, " is beyond ", std::numeric_limits<int32_t>::max(),
                         ", the most it takes"));
  if (v < std::numeric_limits<int32_t>::min())
    throw UsageError(str("--", name, " ", v, " is below ", std::numeric_limits<int32_t>::min(),
                         ", the least it takes"));
  return static_cast<int>(v);
}
double Options::number(const std::string& name) const {
  return value(name).get<double>();
}
std::string Options::text(const std::string& name) const {
  return value(name).get<std::string>();
}
std::vector<std::string> Options::list(const std::string& name) const {
  return value(name).get<std::vector<std::string>>();
}

LogLevel Options::log_level() const {
  if (flag("quiet")) return LogLevel::quiet;
  return flag("verbose") ? LogLevel::verbose : LogLevel::normal;
}

io::ModelConfig Options::model_config() const {
  json j = json::object();
  for (const OptionSpec* s : options_of(program_))
    if (!s->model_key.empty()) j[s->model_key] = value(s->name);
  io::ModelConfig c;
  c.update(j, "model options");
  c.validate(/*require_vocab=*/false, "model options");
  return c;
}

BackendOptions Options::backend_options() const {
  BackendOptions o;
  o.threads = int32("cpu-threads");
  o.tf32 = flag("tf32");
  // A usage error, as --precision bf16 on a CPU without it: the command asks the device for
  // what it has not (the backend checks too, for library callers).
  if (o.tf32 && text("device") == "cpu")
    throw UsageError(
        "--tf32 is a mode of NVIDIA GPUs' tensor cores; remove it for --device cpu (fp32 GEMMs "
        "there are exact fp32)");
  // Decoding's cohorts need blocks of ever new sizes; with a large cache every size the stream
  // recently used stays resident beside the blocks in use (bench/soak/README.md: a d256 stream's
  // memory a third lower at 128 MiB). At d512 and beam 5 x 32 a cohort's caches alone outgrow
  // 128 MiB, and each cohort faulted its pages in afresh: 512 MiB took 1,000 lines from 621k
  // to 360k page faults and 2.5 to 1.4 s of system time, 6% faster, for 15% more resident
  // memory (752 -> 866 MB). Training keeps the default.
  if (program_ == kTranslate) o.max_cached_bytes = size_t(512) << 20;
  return o;
}

json read_config_file(const std::string& path, Program program) {
  const std::string where = str("--config '", path, "'");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UsageError(str(where, ": it is a directory; give a JSON file of options"));
  std::ifstream in(path);
  if (!in) throw UsageError(str(where, ": cannot open the file; check the path"));
  std::stringstream text;
  text << in.rdbuf();
  json j;
  std::set<std::string> keys;
  std::string twice;  // the first option given twice: JSON would keep its last value silently
  auto note_key = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !keys.insert(parsed.get<std::string>()).second && twice.empty())
      twice = parsed.get<std::string>();
    return true;
  };
  try {
    j = json::parse(text.str(), note_key);
  } catch (const json::exception& e) {  // parse_error, or out_of_range (number overflow)
    // A Marian config is YAML, which this reader does not take.
    const std::string ext = std::filesystem::path(path).extension().string();
    throw UsageError(str(where, ": not valid JSON (", e.what(), "); ",
                         ext == ".yml" || ext == ".yaml"
                             ? "configs are JSON, not YAML: write it as a JSON object of flag "
                               "names and values (a Marian config's keys are mostly tx's flag "
                               "names)"
                             : "fix the file"));
  }
  if (!twice.empty()) throw UsageError(str(where, ": '", twice, "' is given twice; keep one"));
  if (!j.is_object())
    throw UsageError(str(where, ": expected a JSON object of option names and values"));
  for (const auto& item : j.items()) {
    bool known = false;
    for (const OptionSpec* s : options_of(program)) known = known || s->name == item.key();
    if (!known)
      throw UsageError(str(where, ": '", item.key(), "' is not an option of ",
                           program_name(program),
                           "; check the spelling (keys are flag names "
                           "without '--'; see --help or --dump-config)"));
  }
  return j;
}

Options resolve_options(Program program, const std::string& config_path, const json& command_line,
                        bool check_required) {
  Options o(program);
  const json file = config_path.empty() ? json::object() : read_config_file(config_path, program);
  const std::string file_source = str("--config '", config_path, "'");

  // The preset first, so that the file's and the command line's model values override it.
  if (o.declares("task")) {
    if (command_line.contains("task"))
      o.set("task", command_line["task"], "--task");
    else if (file.contains("task"))
      o.set("task", file["task"], str(file_source, ": 'task'"));
    o.apply_preset(o.text("task"), "--task");
  }
  for (const auto& [name, value] : file.items())
    o.set(name, value, str(file_source, ": '", name, "'"));
  for (const auto& [name, value] : command_line.items()) o.set(name, value, "--" + name);

  if (o.declares("quiet") && o.flag("quiet") && o.flag("verbose"))
    throw UsageError("--quiet and --verbose contradict each other; give one of them");
  if (o.declares("task")) {
    try {
      o.model_config();
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }
  if (check_required) o.check_required();
  return o;
}

}  // namespace tx::app
