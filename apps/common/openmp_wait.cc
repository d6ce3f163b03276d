#include "common/openmp_wait.h"

#include <unistd.h>

#include <cstdlib>

namespace tx::app {

void bound_openmp_spinning(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  if (::setenv("GOMP_SPINCOUNT", "10000", 0) != 0) return;
  // The binary's own path, not /proc/self/exe: the process name comes from the path executed,
  // and `pgrep tx-train` or `killall tx-train` must keep finding it.
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return;
  path[n] = '\0';
  ::execv(path, argv);  // returns only on failure: go on as we are
}

std::string openmp_wait_setting() {
  if (const char* policy = std::getenv("OMP_WAIT_POLICY"))
    return std::string("OMP_WAIT_POLICY=") + policy;
  if (const char* count = std::getenv("GOMP_SPINCOUNT"))
    return std::string("GOMP_SPINCOUNT=") + count;
  return "libgomp's default";
}

}  // namespace tx::app
