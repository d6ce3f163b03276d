// The one translation unit that includes CLI11 (about 7 s to compile): the registry's rows
// become CLI11 flags here, and the flags given become a JSON object for resolve_options.
#include "common/command_line.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <set>

#include "common/foreign_flags.h"

namespace tx::app {
namespace {

using nlohmann::json;

// Where CLI11 stores one flag's value; only the member of the row's type is used.
struct Slot {
  const OptionSpec* spec = nullptr;
  CLI::Option* option = nullptr;
  bool flag = false;
  int64_t integer = 0;
  double number = 0;
  std::string text;
  std::vector<std::string> list;

  json value() const {
    switch (spec->type) {
      case OptionType::flag:
        return flag;
      case OptionType::integer:
        return integer;
      case OptionType::number:
        return number;
      case OptionType::text:
        return text;
      case OptionType::list: {
        // CLI11 gives an option that may stand alone one empty value when it does.
        json values = json::array();
        for (const std::string& v : list)
          if (!(spec->max_values > 0 && v.empty())) values.push_back(v);
        return values;
      }
    }
    return json();
  }
};

// CLI11's spelling of the names: "-o,--output", "--inputs,inputs" (bare arguments too).
std::string cli_names(const OptionSpec& s) {
  std::string names = "--" + s.name;
  if (!s.short_name.empty()) names = "-" + s.short_name + "," + names;
  if (s.positional) names += "," + s.name;
  return names;
}

CLI::Option* add(CLI::App& app, Slot& slot) {
  const OptionSpec& s = *slot.spec;
  const std::string names = cli_names(s);
  switch (s.type) {
    case OptionType::flag:
      return app.add_flag(names, slot.flag, s.help);
    case OptionType::integer:
      // CLI11 clamps a value beyond int64 to its limit (--seed 18446744073709551616 ran as
      // 9223372036854775807) and reads "010" as octal 8 and "0x10" as 16, where a JSON config
      // has decimal only: decimal here too (leading zeros dropped), and beyond int64 refused.
      return app.add_option(names, slot.integer, s.help)
          ->transform(CLI::Validator(
              [](std::string& text) {
                const size_t digits = text[0] == '-' || text[0] == '+' ? 1 : 0;
                if (text.size() == digits ||
                    text.find_first_not_of("0123456789", digits) != std::string::npos)
                  return "'" + text + "' is not a whole number (decimal digits)";
                const size_t nonzero =
                    std::min(text.find_first_not_of('0', digits), text.size() - 1);
                text = (text[0] == '-' ? "-" : "") + text.substr(nonzero);
                errno = 0;
                std::strtoll(text.c_str(), nullptr, 10);
                return errno == ERANGE
                           ? text +
                                 " is beyond the integers tx holds (-9223372036854775808 to "
                                 "9223372036854775807)"
                           : std::string();
              },
              ""));
    case OptionType::number:
      return app.add_option(names, slot.number, s.help);
    case OptionType::text:
      return app.add_option(names, slot.text, s.help);
    case OptionType::list:
      if (s.max_values > 0)
        return app.add_option(names, slot.list, s.help)->expected(0, s.max_values);
      return app.add_option(names, slot.list, s.help);
  }
  return nullptr;
}

}  // namespace

ParseResult parse_command_line(Program program, const std::string& description, int argc,
                               const char* const argv[]) {
  const std::string name = program_name(program);
  CLI::App app(description, name);
  std::string config_path;
  bool dump = false;
  app.add_option("--config", config_path,
                 "Read options from a JSON file (keys are flag names); flags given here win")
      ->group("General");
  app.add_flag("--dump-config", dump, "Print the resolved options as JSON on stdout and exit")
      ->group("General");

  std::deque<Slot> slots;  // a deque: CLI11 keeps pointers into the slots
  for (const OptionSpec* s : options_of(program)) {
    Slot& slot = slots.emplace_back();
    slot.spec = s;
    slot.option = add(app, slot);
    slot.option->group(s->group);
    // CLI11 only shows the default in --help; resolve_options applies it.
    const json& fallback = s->default_for(program);
    if (!fallback.is_null())
      slot.option->default_str(fallback.is_string() ? fallback.get<std::string>()
                                                    : fallback.dump());
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return {true, app.help(), Options(program)};
  } catch (const CLI::ParseError& e) {
    // CLI11 words a repeated single-value flag "--x: At Most 1 required but received 2".
    // and a single-value flag given two values ("--alignment 0.5 soft") the same way: the
    // command line tells the two apart.
    const std::string what = e.what(), repeated = ": At Most 1 required but received ";
    const size_t at = what.find(repeated);
    if (at != std::string::npos) {
      const std::string flag = what.substr(0, at), count = what.substr(at + repeated.size());
      const OptionSpec* spec = nullptr;
      for (const Slot& slot : slots)
        if ("--" + slot.spec->name == flag) spec = slot.spec;
      const std::string short_flag =
          spec && !spec->short_name.empty() ? "-" + spec->short_name : "";
      int given = 0;  // spellings of the flag on the command line: --x, --x=v, -s, -sv
      for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        given += arg == flag || arg.rfind(flag + "=", 0) == 0 ||
                 (!short_flag.empty() && arg.rfind(short_flag, 0) == 0);
      }
      if (spec && spec->type == OptionType::list && given == 1)
        throw UsageError(str(flag, " takes one value but is given ", count, " (run '", name,
                             " --help' for its values)"));
      throw UsageError(str(flag, " is given ", count, " times; give it once (run '", name,
                           " --help' for the options)"));
    }
    const std::string advice = foreign_flag_advice(program, what, argc, argv);
    if (!advice.empty()) throw UsageError(advice);
    throw UsageError(str(what, "; run '", name, " --help' for the options"));
  }

  // CLI11 lets a switch repeat, the last one winning ("--int8 --int8=false" ran without int8).
  for (const Slot& s : slots)
    if (s.spec->type == OptionType::flag && s.option->count() > 1)
      throw UsageError(str("--", s.spec->name, " is given ", s.option->count(),
                           " times; give it once (run '", name, " --help' for the options)"));
  // CLI11 takes an option's first value whatever it looks like: "--vocabs --seed 30" gave the
  // vocabularies "--seed" and "30" and left the seed at its default.
  std::set<std::string> flags = {"--config", "--dump-config", "--help", "-h"};
  for (const Slot& s : slots) {
    flags.insert("--" + s.spec->name);
    if (!s.spec->short_name.empty()) flags.insert("-" + s.spec->short_name);
  }
  for (const Slot& s : slots)
    for (const std::string& value : s.option->results())
      if (flags.count(value.substr(0, value.find('='))))
        throw UsageError(str("--", s.spec->name, " takes '", value,
                             "' as its value, but that is a flag: give the value",
                             s.spec->type == OptionType::list ? "s" : "", " of --", s.spec->name,
                             " right after it (run '", name, " --help' for the options)"));
  json given = json::object();
  for (const Slot& s : slots)
    if (s.option->count() > 0) given[s.spec->name] = s.value();
  Options options = resolve_options(program, config_path, given, /*check_required=*/!dump);
  if (dump) return {true, options.values().dump(2) + "\n", options};
  return {false, "", options};
}

}  // namespace tx::app
