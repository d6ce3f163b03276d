#include "core/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace tx {
namespace {

using Clock = std::chrono::steady_clock;

std::mutex g_mutex;
bool g_progress_shown = false;  // a progress line is on screen (guarded by g_mutex)
Clock::time_point g_progress_drawn;

// Erases the progress line, if one is shown; g_mutex held.
void erase_progress() {
  if (!g_progress_shown) return;
  std::fputs("\r\033[K", stderr);
  g_progress_shown = false;
}

}  // namespace

void log_line(const std::string& line) {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "[%Y-%m-%d %H:%M:%S] ", std::localtime(&now));
  std::lock_guard<std::mutex> lock(g_mutex);
  erase_progress();
  std::fprintf(stderr, "%s%s\n", stamp, line.c_str());
}

bool stderr_is_terminal() {
  static const bool terminal = isatty(STDERR_FILENO) == 1;
  return terminal;
}

void progress(const std::string& text) {
  if (!stderr_is_terminal()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  const Clock::time_point now = Clock::now();
  if (g_progress_shown && now - g_progress_drawn < std::chrono::milliseconds(200)) return;
  std::fprintf(stderr, "\r\033[K%s", text.c_str());
  std::fflush(stderr);
  g_progress_shown = true;
  g_progress_drawn = now;
}

void progress_done() {
  if (!stderr_is_terminal()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  erase_progress();
  std::fflush(stderr);
}

}  // namespace tx
