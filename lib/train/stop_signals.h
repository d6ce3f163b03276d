// StopSignals: SIGINT and SIGTERM ask a training run to stop after its update, for its scope.
//
// The signals are blocked on every thread that runs the backend's operators and taken by one
// idle thread of this class. A signal handled on a computing thread can corrupt the heap:
// oneDNN's JIT sgemm kernels (jit_avx512_common_gemm_f32 and the AVX2 one) point rsp into their
// heap workspace while they run, and the kernel writes the signal frame there (oneDNN issue
// #4845, fixed after 3.11; Debian 12 ships 2.6). glibc then aborts at a later free().
#pragma once

#include <condition_variable>
#include <csignal>
#include <mutex>
#include <thread>

#include "backend/backend.h"

namespace tx::train {

class StopSignals {
 public:
  // Off: nothing is installed and stop_requested() stays false.
  StopSignals(Backend& be, bool on);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  bool stop_requested() const;
  int signal() const;  // the signal that asked, 0 before one did

 private:
  Backend& be_;
  bool on_;
  sigset_t old_mask_{};
  sigset_t taken_{};  // SIGINT and SIGTERM less those the caller had blocked: the catcher's
  struct sigaction old_int_ = {}, old_term_ = {};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread catcher_;
};

}  // namespace tx::train
