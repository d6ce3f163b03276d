// Program logging that honours --quiet and --verbose (lib/core/log.h itself has no levels).
#pragma once

#include "common/options.h"
#include "core/log.h"

namespace tx::app {

// What a program did, unless --quiet.
template <typename... Parts>
void info(const Options& options, const Parts&... parts) {
  if (options.log_level() != LogLevel::quiet) log(parts...);
}

// Detail that only --verbose shows.
template <typename... Parts>
void detail(const Options& options, const Parts&... parts) {
  if (options.log_level() == LogLevel::verbose) log(parts...);
}

}  // namespace tx::app
