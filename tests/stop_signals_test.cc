// StopSignals: SIGINT/SIGTERM are blocked on every thread that runs the backend's kernels (a
// signal frame written while oneDNN's JIT sgemm has rsp in its heap workspace corrupts the
// heap), yet still stop the run, and the caller's masks and handlers come back afterwards.
#include "train/stop_signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "support/backends.h"

namespace {

// Whether SIGINT and SIGTERM are blocked, one entry per thread of the backend's team.
std::vector<bool> blocked_on_team(tx::Backend& be) {
  std::mutex m;
  std::vector<bool> blocked;
  be.on_every_thread([&] {
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, nullptr, &now);
    const bool both = sigismember(&now, SIGINT) == 1 && sigismember(&now, SIGTERM) == 1;
    std::lock_guard<std::mutex> lock(m);
    blocked.push_back(both);
  });
  return blocked;
}

bool any_of(const std::vector<bool>& v) {
  for (bool b : v)
    if (b) return true;
  return false;
}

}  // namespace

TEST_CASE("StopSignals: blocked on the CPU team, taken by its own thread, then put back",
          "[trainer][signals]") {
  std::unique_ptr<tx::Backend> be = tx::test::backend_or_skip("cpu");
  REQUIRE(be);
  const std::vector<bool> before = blocked_on_team(*be);
  REQUIRE(!before.empty());
  REQUIRE(!any_of(before));
  struct sigaction caller = {};
  sigaction(SIGTERM, nullptr, &caller);
  {
    tx::train::StopSignals signals(*be, true);
    const std::vector<bool> during = blocked_on_team(*be);
    CHECK(during.size() == before.size());
    for (bool b : during) CHECK(b);
    // A thread the calling thread starts now inherits the block.
    bool child_blocked = false;
    std::thread([&] {
      sigset_t now;
      pthread_sigmask(SIG_BLOCK, nullptr, &now);
      child_blocked = sigismember(&now, SIGTERM) == 1;
    }).join();
    CHECK(child_blocked);
    CHECK(!signals.stop_requested());
    REQUIRE(kill(getpid(), SIGTERM) == 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!signals.stop_requested() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(signals.stop_requested());
    CHECK(signals.signal() == SIGTERM);
  }
  CHECK(!any_of(blocked_on_team(*be)));
  struct sigaction after = {};
  sigaction(SIGTERM, nullptr, &after);
  CHECK(after.sa_handler == caller.sa_handler);
}

TEST_CASE("StopSignals off: nothing blocked, nothing installed", "[trainer][signals]") {
  std::unique_ptr<tx::Backend> be = tx::test::backend_or_skip("cpu");
  REQUIRE(be);
  struct sigaction caller = {};
  sigaction(SIGTERM, nullptr, &caller);
  tx::train::StopSignals signals(*be, false);
  CHECK(!any_of(blocked_on_team(*be)));
  struct sigaction during = {};
  sigaction(SIGTERM, nullptr, &during);
  CHECK(during.sa_handler == caller.sa_handler);
  CHECK(!signals.stop_requested());
}

TEST_CASE("StopSignals: a signal the caller had blocked stays blocked, the other still stops",
          "[trainer][signals]") {
  std::unique_ptr<tx::Backend> be = tx::test::backend_or_skip("cpu");
  REQUIRE(be);
  // A library caller that keeps SIGINT to itself: blocked on its thread and the team.
  sigset_t sigint;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  sigset_t caller_mask;
  pthread_sigmask(SIG_BLOCK, &sigint, &caller_mask);
  be->on_every_thread([&sigint] { pthread_sigmask(SIG_BLOCK, &sigint, nullptr); });
  {
    tx::train::StopSignals signals(*be, true);
    REQUIRE(kill(getpid(), SIGINT) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    CHECK(!signals.stop_requested());  // pending, as the caller wanted
    REQUIRE(kill(getpid(), SIGTERM) == 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!signals.stop_requested() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(signals.signal() == SIGTERM);
  }
  // Still blocked on the team, and still pending: taken here, then the caller's mask restored.
  std::vector<bool> sigint_blocked;
  std::mutex m;
  be->on_every_thread([&] {
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, nullptr, &now);
    std::lock_guard<std::mutex> lock(m);
    sigint_blocked.push_back(sigismember(&now, SIGINT) == 1);
  });
  for (bool b : sigint_blocked) CHECK(b);
  const timespec wait = {5, 0};
  CHECK(sigtimedwait(&sigint, nullptr, &wait) == SIGINT);
  be->on_every_thread([&sigint] { pthread_sigmask(SIG_UNBLOCK, &sigint, nullptr); });
  pthread_sigmask(SIG_SETMASK, &caller_mask, nullptr);
}
