#include "common/openmp_wait.h"

#include <unistd.h>

#include <cstdlib>

namespace tx::app {

void bound_openmp_spinning(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  if (::setenv("GOMP_SPINCOUNT", "10000", 0) != 0) return;
  ::execv("/proc/self/exe", argv);  // returns only on failure: go on as we are
}

std::string openmp_wait_setting() {
  if (const char* policy = std::getenv("OMP_WAIT_POLICY"))
    return std::string("OMP_WAIT_POLICY=") + policy;
  if (const char* count = std::getenv("GOMP_SPINCOUNT"))
    return std::string("GOMP_SPINCOUNT=") + count;
  return "libgomp's default";
}

}  // namespace tx::app
