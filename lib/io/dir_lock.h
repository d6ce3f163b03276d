// DirLock: an advisory lock on a directory (flock), held while the object lives, so that two
// processes never write one directory's files at once; the kernel drops it when its process
// ends, however it ends.
#pragma once

#include <string>

namespace tx::io {

class DirLock {
 public:
  // Takes the lock on `dir` without waiting; busy() says whether another process holds it.
  // Where the file system has no locks (some network file systems) nothing is held: a best
  // effort, not a refusal.
  explicit DirLock(const std::string& dir);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  bool busy() const { return busy_; }

 private:
  int fd_ = -1;
  bool busy_ = false;
};

}  // namespace tx::io
