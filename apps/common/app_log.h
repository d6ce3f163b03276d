// Program logging that honours --quiet and --verbose (lib/core/log.h itself has no levels).
#pragma once

#include "common/options.h"
#include "core/log.h"
#include "train/collective.h"

namespace tx::app {

// Under mpirun, rank 0 alone logs (as the trainer does): the other processes' lines would
// repeat its own.
// What a program did, unless --quiet.
template <typename... Parts>
void info(const Options& options, const Parts&... parts) {
  if (options.log_level() != LogLevel::quiet && train::launched_rank() == 0) log(parts...);
}

// Detail that only --verbose shows.
template <typename... Parts>
void detail(const Options& options, const Parts&... parts) {
  if (options.log_level() == LogLevel::verbose && train::launched_rank() == 0) log(parts...);
}

}  // namespace tx::app
