#include "io/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace tx::io {

FileLock::FileLock(const std::string& path) {
  // Open for writing: NFS clients emulate flock with byte-range locks, which an exclusive lock
  // takes only through a writable descriptor.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    const std::string reason = std::strerror(errno);
    throw Error(str("cannot open the lock file '", path, "' (", reason,
                    "); check the directory's permissions"));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  busy_ = errno == EWOULDBLOCK;
  if (!busy_) why_not_ = std::strerror(errno);
  ::close(fd_);
  fd_ = -1;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace tx::io
