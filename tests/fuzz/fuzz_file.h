// Fuzz support: the fuzzer's bytes as a file the readers can open by path (a memfd, so nothing
// touches the disk and every run starts clean).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tx::fuzz {

class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) {
    fd_ = ::memfd_create("tx-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) std::abort();
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// The fuzzer's bytes as a real file whose name ends in `suffix` (for readers that choose their
// format by the file name), in a directory of its own; removed at scope exit.
class NamedFile {
 public:
  NamedFile(const uint8_t* data, size_t size, const std::string& dir, const std::string& name) {
    path_ = dir + "/" + name;
    FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f) std::abort();
    if (size && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
  }
  ~NamedFile() { std::remove(path_.c_str()); }
  NamedFile(const NamedFile&) = delete;
  NamedFile& operator=(const NamedFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A scratch directory for one fuzzing process.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    char pattern[] = "/tmp/tx_fuzz_XXXXXX";
    if (!::mkdtemp(pattern)) std::abort();
    return std::string(pattern);
  }();
  return dir;
}

}  // namespace tx::fuzz
