// The peak resident memory of a shell command, for tests that bound a program's memory.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tx::test {

// False, having said SKIPPED, under AddressSanitizer: it keeps freed memory in quarantine, so
// resident memory grows by design.
inline bool memory_measurable() {
#if defined(__SANITIZE_ADDRESS__)
  std::puts("SKIPPED: resident memory is not the program's under AddressSanitizer");
  return false;
#else
  return true;
#endif
}

// Peak resident memory in kB of what `cmd` runs (-1 when it fails), measured in a forked child
// so that the programs the test ran before do not count (RUSAGE_CHILDREN keeps the maximum
// over all).
inline long peak_rss_kb(const std::string& cmd) {
  int fd[2];
  REQUIRE(pipe(fd) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fd[0]);
    const int rc = std::system(cmd.c_str());
    rusage usage{};
    getrusage(RUSAGE_CHILDREN, &usage);
    const long kb = rc == 0 ? usage.ru_maxrss : -1;
    _exit(write(fd[1], &kb, sizeof kb) == sizeof kb ? 0 : 1);
  }
  close(fd[1]);
  long kb = -1;
  const bool got = read(fd[0], &kb, sizeof kb) == sizeof kb;
  close(fd[0]);
  waitpid(pid, nullptr, 0);
  REQUIRE(got);
  return kb;
}

}  // namespace tx::test
