// Test support: the backends every conformance case runs on, and the skip protocol.
#pragma once

#include <memory>

#include "backend/registry.h"

namespace tx::test {

struct Cpu {
  static constexpr const char* name = "cpu";
};
struct Cuda {
  static constexpr const char* name = "cuda";
};

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
