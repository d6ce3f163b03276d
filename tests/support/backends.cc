#include "support/backends.h"

#include <iostream>

namespace tx::test {

std::unique_ptr<Backend> backend_or_skip(const char* name) {
  register_builtin_backends();
  std::string why = backend_unavailable_reason(name);
  if (!why.empty()) {
    std::cout << "SKIPPED: " << name << ": " << why << std::endl;
    return nullptr;
  }
  return create_backend(name);
}

}  // namespace tx::test
