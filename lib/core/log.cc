#include "core/log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace tx {

void log_line(const std::string& line) {
  static std::mutex mutex;
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "[%Y-%m-%d %H:%M:%S] ", std::localtime(&now));
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "%s%s\n", stamp, line.c_str());
}

}  // namespace tx
