// Bounds how long idle OpenMP threads spin before they sleep, for the programs that compute.
#pragma once

#include <string>

namespace tx::app {

// Unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set, re-executes this program (same pid, same
// arguments) with GOMP_SPINCOUNT=10000: libgomp reads its environment only when it loads, so
// setting it later has no effect. libgomp's default spins for ~300,000 rounds, which on a
// machine shared with another busy process makes 2 threads 2.4x (beam search) to 8x slower;
// 10,000 costs nothing measurable on an idle one (docs/backends.md). Returns when nothing was
// to be done or the re-execution failed (the program then runs with libgomp's default).
void bound_openmp_spinning(char** argv);

// "OMP_WAIT_POLICY=passive", "GOMP_SPINCOUNT=10000" or "libgomp's default": for --verbose.
std::string openmp_wait_setting();

}  // namespace tx::app
