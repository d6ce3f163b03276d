// main() for every tx program: one error line on stderr and a documented exit code, never a
// stack trace or a partial output on stdout.
#include <chrono>
#include <cstdio>
#include <new>
#include <thread>

#include "common/app_log.h"
#include "common/command_line.h"
#include "common/openmp_wait.h"
#include "core/format.h"
#include "core/log.h"
#include "train/collective.h"

namespace tx::app {

int run_main(Program program, const std::string& description, int argc, char** argv,
             const std::function<int(const Options&)>& body) {
  const char* name = program_name(program);
  try {
    ParseResult parsed = parse_command_line(program, description, argc, argv);
    // --help, --dump-config and a body's printf output: a full disk or a closed pipe must not
    // pass for success (an empty run.json from --dump-config > run.json).
    auto stdout_written = [name] {
      if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return true;
      std::fprintf(stderr, "%s: error: cannot write to stdout; check the disk or the pipe\n", name);
      return false;
    };
    // Under mpirun every process would print it, interleaved (a --dump-config file that is no
    // JSON): rank 0 alone.
    if (parsed.finished) {
      if (train::launched_rank() != 0) return 0;
      std::fputs(parsed.text.c_str(), stdout);
      return stdout_written() ? 0 : 1;
    }
    // Only tx-train runs data-parallel: another program under mpirun does its whole work once
    // per process (every translation printed N times), which is what a script that gives each
    // process its own shard wants, and a mistake otherwise: said, not refused.
    if (program != kTrain && train::launched_processes() > 1 && train::launched_rank() == 0)
      std::fprintf(stderr,
                   "%s: note: started as one of %d processes (mpirun or srun); each does the "
                   "whole of what its own flags ask, as if run alone: %s is not data-parallel\n",
                   name, train::launched_processes(), name);
    if (program != kAverage) detail(parsed.options, "OpenMP idle threads: ", openmp_wait_setting());
    const int status = body(parsed.options);
    return status == 0 && !stdout_written() ? 1 : status;
  } catch (const UsageError& e) {
    // Under mpirun every process refuses the same flags: the others wait while process 0 says
    // it and exits, which makes mpirun end them (Open MPI ends a job at a process's non-zero
    // exit), so the line is said once; a process whose flags alone are wrong still says why
    // (when process 0 has no usage error of its own).
    if (train::launched_processes() > 1 && train::launched_rank() != 0)
      std::this_thread::sleep_for(std::chrono::seconds(2));
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    return 2;
  } catch (const std::bad_alloc&) {  // a host container beyond memory, e.g. a size too large
    progress_done();
    std::fprintf(stderr,
                 "%s: error: out of host memory (std::bad_alloc); the sizes asked for need "
                 "more than this machine has: check the model's (--d-model, --d-ff, "
                 "--dim-vocabs) and the batches' (--max-tokens, --mini-batch, --beam-size)\n",
                 name);
    return 1;
  } catch (const std::exception& e) {  // tx::Error and the like
    progress_done();  // an error line must not land after a half-drawn progress line
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace tx::app
