// The backend registry: backends register a factory by name; programs pick one at run time
// with a device spec ("cpu", "cuda", "cuda:1").
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace tx {

struct BackendEntry {
  std::string name;  // "cpu", "cuda"
  std::function<std::unique_ptr<Backend>(const BackendOptions&)> create;
  // Empty when the backend can run here; otherwise why not ("no CUDA device: ...").
  std::function<std::string()> unavailable_reason;
};

void register_backend(BackendEntry entry);
// Names of the backends compiled into this program, in registration order.
std::vector<std::string> registered_backends();
// Why `name` cannot run here, or "" when it can. Unknown names give a reason too.
std::string backend_unavailable_reason(const std::string& name);
// Creates the backend for a device spec; the ":N" suffix sets options.device_index.
// Throws tx::Error naming the spec and the backends that exist when it cannot.
std::unique_ptr<Backend> create_backend(const std::string& spec, BackendOptions options = {});

// Registers the backends this build was compiled with (defined in backends/, linked by apps).
void register_builtin_backends();

}  // namespace tx
