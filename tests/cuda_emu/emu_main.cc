// tx_cuda_emu_tests: the conformance suite (and the CPU-as-oracle tests) with backends/cuda's
// kernels running in the host emulation of cuda_runtime.h here, registered as "cuda"
// (Catch2's own main runs the cases).
#include <mutex>

#include "backend/registry.h"

namespace tx {

void register_cpu_backend();
void register_cuda_backend();  // backends/cuda compiled against the emulation

// Replaces backends/builtin.cc: cpu, and the emulated cuda.
void register_builtin_backends() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_cpu_backend();
    register_cuda_backend();
  });
}

}  // namespace tx
