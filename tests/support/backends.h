// Test support: the backends every conformance case runs on, and the skip protocol.
#pragma once

#include <cmath>
#include <memory>
#include <vector>

#include "backend/registry.h"

namespace tx::test {

struct Cpu {
  static constexpr const char* name = "cpu";
};
struct Cuda {
  static constexpr const char* name = "cuda";
};

// Inference's attention (over each sentence's real keys, Backend::attend_memory) against the
// recorded graph's (batched GEMMs and softmax over the padding): the CPU's kernels sum in the
// same order, so the two agree bit for bit there; the CUDA kernels' orders differ, so there they
// agree within rounding (relative 1e-5).
inline bool inference_matches_recorded(const std::vector<float>& inference,
                                       const std::vector<float>& recorded, bool cpu) {
  if (cpu) return inference == recorded;
  if (inference.size() != recorded.size()) return false;
  for (size_t i = 0; i < inference.size(); ++i)
    if (std::fabs(inference[i] - recorded[i]) > 1e-5f * (1.0f + std::fabs(recorded[i])))
      return false;
  return true;
}

// Creates the named backend, or prints "SKIPPED: <name>: <reason>" (which ctest's
// SKIP_REGULAR_EXPRESSION turns into a skipped test) and returns null.
std::unique_ptr<Backend> backend_or_skip(const char* name);

}  // namespace tx::test

// Every conformance case is a TEMPLATE_TEST_CASE over these.
#define TX_BACKENDS tx::test::Cpu, tx::test::Cuda

// Declares `be` (a std::unique_ptr<tx::Backend>) for TestType, or returns from a skipped case.
// (The type is spelled out so that `be` is not a dependent name inside the template body.)
#define TX_BACKEND_OR_SKIP(be)                                                     \
  std::unique_ptr<::tx::Backend> be = ::tx::test::backend_or_skip(TestType::name); \
  if (!be) return
