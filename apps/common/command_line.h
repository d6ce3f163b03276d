// The command line of a tx program: CLI11 flags from the option registry, --config,
// --dump-config, --help, and the main() wrapper that turns errors into one line and an exit
// code.
//
// Exit codes: 0 success (also --help and --dump-config); 2 a usage error (unknown flag, bad
// value, missing required option, unreadable or invalid --config file: the UsageError cases);
// 1 any other error while running (tx::Error: a missing or corrupt checkpoint, a mismatch).
#pragma once

#include <functional>
#include <string>

#include "common/options.h"

namespace tx::app {

struct ParseResult {
  // --help or --dump-config: print `text` on stdout and exit 0 without running the program.
  bool finished = false;
  std::string text;
  Options options;
};

// Parses argv (argv[0] is the program path) against the options `program` declares and
// resolves them (options.h). Throws UsageError with a one-line message naming the flag or key
// and the fix.
ParseResult parse_command_line(Program program, const std::string& description, int argc,
                               const char* const argv[]);

// main() for a tx program: parses, then runs `body` with the options and returns its exit
// code. Every error becomes "tx-<program>: error: <message>" on stderr and exit code 2
// (UsageError) or 1 (anything else); nothing is printed on stdout then.
int run_main(Program program, const std::string& description, int argc, char** argv,
             const std::function<int(const Options&)>& body);

}  // namespace tx::app
