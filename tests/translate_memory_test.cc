// tx-translate's memory on a long stream: once the read window is full, resident memory stays
// flat however many lines follow (bench/soak has the 2-million-line run on a real model).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <string>

#include "support/programs.h"

namespace {

using tx::test::Run;
using tx::test::TempDir;

// Peak resident memory in kB of what `cmd` runs, measured in a forked child so that the
// programs this test ran before do not count (RUSAGE_CHILDREN keeps the maximum over all).
long peak_rss_kb(const std::string& cmd) {
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

// `lines` lines of 1 to 40 words drawn from the reversal task's eight: every batch has a new
// mix of lengths, so the stream keeps asking for memory blocks of sizes it has not used.
void write_stream(const std::string& path, int lines, uint64_t seed) {
  static const char* words[] = {"ab", "cd", "ef", "gh", "ba", "dc", "fe", "hg"};
  std::mt19937_64 gen(seed);
  std::ofstream out(path);
  for (int i = 0; i < lines; ++i) {
    const int n = 1 + static_cast<int>(gen() % 40);
    for (int k = 0; k < n; ++k) out << (k ? " " : "") << words[gen() % 8];
    out << '\n';
  }
}

}  // namespace

TEST_CASE("tx-translate: resident memory after 60,000 lines is within 4 MB of that after 15,000",
          "[apps][memory]") {
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer keeps freed memory in quarantine: resident memory grows by design.
  std::puts("SKIPPED: resident memory is not the program's under AddressSanitizer");
  return;
#endif
  TempDir dir;
  const Run train = tx::test::train_reversal_model(dir, 10);
  REQUIRE(train.status == 0);
  write_stream(dir.file("short.txt"), 15000, 5);
  write_stream(dir.file("long.txt"), 60000, 5);  // the same first 15,000 lines, then more
  // A small read window (about 2,000 tokens), so both runs are many windows long.
  auto translate = [&](const std::string& input) {
    return peak_rss_kb(std::string(TX_TRANSLATE_BIN) + " -m " + dir.file("m/model.safetensors") +
                       " -v " + dir.file("m/vocab.spm") +
                       " --quiet --cpu-threads 2 --beam-size 2 --max-tokens 512 --maxi-batch 4"
                       " --max-length-factor 1.5 < " +
                       input + " > " + dir.file("out.txt"));
  };
  const long short_kb = translate(dir.file("short.txt"));
  const long long_kb = translate(dir.file("long.txt"));
  INFO("peak RSS: 15,000 lines " << short_kb << " kB, 60,000 lines " << long_kb << " kB");
  REQUIRE(short_kb > 0);
  REQUIRE(long_kb > 0);
  CHECK(long_kb - short_kb <
        4096);  // 1.5-1.9 MB measured on 2026-11-26: allocator and thread noise
}
