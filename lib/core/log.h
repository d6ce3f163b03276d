// Logging to stderr (stdout carries data only), with a timestamp prefix, and a one-line
// progress display for terminals.
#pragma once

#include <iostream>
#include <string>

#include "core/error.h"

namespace tx {

void log_line(const std::string& line);

template <typename... Parts>
void log(const Parts&... parts) {
  log_line(str(parts...));
}

// Whether stderr is a terminal: only then is there a progress display.
bool stderr_is_terminal();

// Shows `text` as the progress line: redrawn in place at the bottom of a terminal at most a
// few times a second, erased before each log line and by progress_done(). Does nothing when
// stderr is not a terminal, so it never reaches a log file or a pipe.
void progress(const std::string& text);
void progress_done();

}  // namespace tx
