#include "train/stop_signals.h"

#include <pthread.h>

#include <atomic>

namespace tx::train {
namespace {

// Written by the handler on the catcher thread, read by the training loop's: a lock-free atomic
// (volatile sig_atomic_t is safe only within one thread).
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free,
              "a signal handler may only use lock-free atomics");
extern "C" void on_stop_signal(int signal) {
  g_stop_signal.store(signal, std::memory_order_relaxed);
}

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

StopSignals::StopSignals(Backend& be, bool on) : be_(be), on_(on) {
  if (!on_) return;
  g_stop_signal.store(0, std::memory_order_relaxed);
  const sigset_t set = stop_set();
  // The calling thread first: threads it creates from now on inherit the mask.
  pthread_sigmask(SIG_BLOCK, &set, &old_mask_);
  be_.on_every_thread([&set] { pthread_sigmask(SIG_BLOCK, &set, nullptr); });
  // A signal the caller had blocked stays blocked: it meant not to be interrupted by it.
  taken_ = set;
  if (sigismember(&old_mask_, SIGINT)) sigdelset(&taken_, SIGINT);
  if (sigismember(&old_mask_, SIGTERM)) sigdelset(&taken_, SIGTERM);
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
  // The one thread that takes them: it runs no kernel, so the handler's frame lands on a stack.
  catcher_ = std::thread([this] {
    pthread_sigmask(SIG_UNBLOCK, &taken_, nullptr);
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [this] { return done_; });
  });
}

StopSignals::~StopSignals() {
  if (!on_) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  wake_.notify_one();
  catcher_.join();
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  // Unblock on the team what the caller had unblocked; a signal that came after the catcher
  // left is delivered now, to the handlers the caller had.
  be_.on_every_thread([this] { pthread_sigmask(SIG_UNBLOCK, &taken_, nullptr); });
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

bool StopSignals::stop_requested() const {
  return on_ && g_stop_signal.load(std::memory_order_relaxed) != 0;
}

int StopSignals::signal() const {
  return on_ ? g_stop_signal.load(std::memory_order_relaxed) : 0;
}

}  // namespace tx::train
