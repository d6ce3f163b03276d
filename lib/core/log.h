// Logging to stderr (stdout carries data only), with a timestamp prefix.
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

}  // namespace tx
