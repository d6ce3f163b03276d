#include "support/backends.h"

#include <filesystem>
#include <iostream>
#include <stdexcept>

namespace tx::test {

std::unique_ptr<Backend> backend_or_skip(const char* name) {
  register_builtin_backends();
  std::string why = backend_unavailable_reason(name);
  // A GPU this machine shows (the driver's device node) that the CUDA backend cannot use, e.g.
  // a driver older than the toolkit, would turn every CUDA case into a skip: a run that looks
  // green while testing nothing. That is a failure.
  if (!why.empty() && std::string(name) == "cuda" && std::filesystem::exists("/dev/nvidiactl"))
    throw std::runtime_error(
        "this machine has an NVIDIA GPU (/dev/nvidiactl) that the CUDA "
        "backend cannot use: " +
        why + "; fix the driver or toolkit rather than skip the CUDA tests");
  if (!why.empty()) {
    std::cout << "SKIPPED: " << name << ": " << why << std::endl;
    return nullptr;
  }
  return create_backend(name);
}

}  // namespace tx::test
