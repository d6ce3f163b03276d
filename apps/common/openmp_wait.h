// Bounds how long idle OpenMP threads spin before they sleep, for the programs that compute.
#pragma once

#include <string>

namespace tx::app {

// Unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set, a program linking this re-executes itself
// (same pid, same arguments) with GOMP_SPINCOUNT=1000 before any library initialises (an
// .preinit_array entry in openmp_wait.cc): libgomp reads its environment only when it loads.
// libgomp's default spins for ~300,000 rounds, which on a machine shared with another busy
// process makes 2 threads 2.4x (beam search) to 8x slower; 1,000 costs nothing measurable on
// an idle one and beats 10,000 (until 2026-12-01) beside a busy process (docs/backends.md). If
// the re-execution fails the program runs with the default.

// "OMP_WAIT_POLICY=passive", "GOMP_SPINCOUNT=1000" or "libgomp's default": for --verbose.
std::string openmp_wait_setting();

}  // namespace tx::app
