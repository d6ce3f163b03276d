// main() for every tx program: one error line on stderr and a documented exit code, never a
// stack trace or a partial output on stdout.
#include <cstdio>

#include "common/app_log.h"
#include "common/command_line.h"
#include "common/openmp_wait.h"
#include "core/log.h"

namespace tx::app {

int run_main(Program program, const std::string& description, int argc, char** argv,
             const std::function<int(const Options&)>& body) {
  const char* name = program_name(program);
  try {
    ParseResult parsed = parse_command_line(program, description, argc, argv);
    if (parsed.finished) {
      std::fputs(parsed.text.c_str(), stdout);
      return 0;
    }
    if (program != kAverage) detail(parsed.options, "OpenMP idle threads: ", openmp_wait_setting());
    return body(parsed.options);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    return 2;
  } catch (const std::exception& e) {  // tx::Error, and std::bad_alloc and the like
    progress_done();  // an error line must not land after a half-drawn progress line
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace tx::app
