#include "io/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace tx::io {
namespace {

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace

std::string not_a_regular_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return "";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISFIFO(st.st_mode)) return "a pipe (FIFO)";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
  return "not a regular file";
}

std::string link_target(const std::string& path) {
  std::string at = path;
  for (int hop = 0; hop < 40; ++hop) {  // Linux's own limit on links followed
    struct stat st;
    if (::lstat(at.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return at;
    std::string to(static_cast<size_t>(st.st_size > 0 ? st.st_size : 4096) + 1, '\0');
    const ssize_t n = ::readlink(at.c_str(), to.data(), to.size());
    if (n < 0 || static_cast<size_t>(n) >= to.size()) return at;  // let open() say why
    to.resize(static_cast<size_t>(n));
    // /proc's links to what has no path ("pipe:[2304041]", "anon_inode:..."): stat() on the
    // link itself says what it is.
    if (at.rfind("/proc/", 0) == 0 && !to.empty() && to[0] != '/' &&
        (to.find(":[") != std::string::npos || to.rfind("anon_inode:", 0) == 0))
      return at;
    at = !to.empty() && to[0] == '/' ? to : dir_of(at) + "/" + to;
  }
  throw Error(str("cannot write '", path,
                  "': too many levels of symbolic links; give the file's "
                  "own path"));
}

AtomicFile::AtomicFile(const std::string& path) : path_(path) {
  TX_CHECK(!path.empty() && path.back() != '/', "cannot write '", path,
           "': the path names a directory, not a file; give a file name");
  // The rename would put a file where a device, a pipe or a directory was (as root, in /dev).
  // The path first: stat() follows /dev/stdout's /proc link to the pipe the shell made.
  std::string kind = not_a_regular_file(path);
  target_ = link_target(path);
  if (kind.empty()) kind = not_a_regular_file(target_);
  TX_CHECK(kind.empty(), "cannot write '", path, "': it is ", kind,
           ", and tx writes a new file beside the destination then renames it into place; give "
           "the path of a regular file");
  // Hidden name, unique per process and per call, so concurrent writers never share a temp.
  // O_EXCL guards against a stale file of the same name; mode 0666 lets the umask decide, as
  // for any newly created file.
  static std::atomic<unsigned> counter{0};
  std::string dir = dir_of(target_);
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp_path_ = dir + "/." + base_of(target_) + ".tmp." + std::to_string(::getpid()) + "." +
                 std::to_string(counter++);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0 || errno != EEXIST) break;
  }
  if (fd_ < 0) {
    std::string reason = errno_text();
    temp_path_.clear();
    throw Error(str("cannot write '", path, "': cannot create a file in directory '", dir, "' (",
                    reason, "); create the directory or choose a writable path"));
  }
}

AtomicFile::~AtomicFile() {
  discard();
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
}

void AtomicFile::write(const void* data, size_t bytes) {
  TX_CHECK(fd_ >= 0, "cannot write '", path_, "': the file was already committed or failed");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string reason = n < 0 ? errno_text() : "no progress";
      discard();
      throw Error(str("cannot write '", path_, "': ", reason,
                      "; free disk space or choose another path (nothing was written there)"));
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  TX_CHECK(fd_ >= 0, "cannot write '", path_, "': the file was already committed or failed");
  auto fail = [&](const char* step) {
    std::string reason = errno_text();
    discard();
    throw Error(str("cannot write '", path_, "': ", step, " failed (", reason,
                    "); check the disk and permissions (the previous file, if any, is intact)"));
  };
  if (::fsync(fd_) != 0) fail("fsync");
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail("close");
  if (::rename(temp_path_.c_str(), target_.c_str()) != 0) fail("rename");
  committed_ = true;
  temp_path_.clear();
  // The rename lives in the directory entry: sync the directory too. Best effort: some file
  // systems refuse to open or fsync a directory, and the file itself is already complete.
  int dir_fd = ::open(dir_of(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

int remove_stale_temporaries(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    // ".<name>.tmp.<pid>.<counter>", as the constructor names them.
    const std::string name = e->d_name;
    const size_t tmp = name.rfind(".tmp.");
    if (name.empty() || name[0] != '.' || tmp == std::string::npos || tmp == 0) continue;
    const std::string rest = name.substr(tmp + 5);
    const size_t dot = rest.find('.');
    const std::string pid_text = rest.substr(0, dot);
    if (dot == std::string::npos || pid_text.empty() || pid_text.size() > 9 ||
        pid_text.find_first_not_of("0123456789") != std::string::npos ||
        rest.find_first_not_of("0123456789", dot + 1) != std::string::npos)
      continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (::unlink((dir + "/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

void check_writable(const std::string& path) {
  AtomicFile probe(path);
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  AtomicFile file(path);
  file.write(bytes);
  file.commit();
}

}  // namespace tx::io
