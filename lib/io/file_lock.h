// FileLock: an advisory lock on a file (flock), held while the object lives, so that two
// processes never work in one place at once; the kernel drops it when its process ends, however
// it ends. The file is made when missing and stays: removing it would let a third process lock
// a new file while a second holds the old one.
#pragma once

#include <string>

namespace tx::io {

class FileLock {
 public:
  // Takes the lock on `path` without waiting. busy(): another process holds it. Where the
  // file system takes no locks, nothing is held and why_not() says why: a best effort, not a
  // refusal. Throws tx::Error naming `path` when it cannot be made.
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  bool busy() const { return busy_; }
  const std::string& why_not() const { return why_not_; }

 private:
  int fd_ = -1;
  bool busy_ = false;
  std::string why_not_;
};

}  // namespace tx::io
