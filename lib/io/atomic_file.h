// AtomicFile: writes a file under a temporary name and renames it into place on commit().
//
// A crash or an error never leaves a partial file at the destination: until commit() the bytes
// live in a hidden temporary beside it (same directory, so the rename cannot cross file
// systems), and an AtomicFile destroyed without commit() removes its temporary. An existing
// destination stays untouched until the rename replaces it in one step. A symbolic link is
// written through (the file it names is replaced, the link kept); a device, pipe or directory
// at the destination is refused, since a rename would replace it.
#pragma once

#include <cstddef>
#include <string>

namespace tx::io {

class AtomicFile {
 public:
  // Creates the temporary; throws tx::Error naming `path` when its directory is missing or
  // not writable.
  explicit AtomicFile(const std::string& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  void write(const std::string& bytes) { write(bytes.data(), bytes.size()); }

  // Flushes to disk (fsync), renames over the destination and syncs the directory, so the new
  // file survives a power loss once commit() returns.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  void discard() noexcept;

  std::string path_;
  std::string target_;  // path_, or the file its symbolic links name
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// Throws what an AtomicFile at `path` would (a missing or read-only directory, a device in the
// way) without writing anything: a temporary made and dropped, for a program that would
// otherwise find out only at its first save, after the work before it.
void check_writable(const std::string& path);

// What is at `path` when it is not a regular file ("a directory", "a pipe (FIFO)", "a
// device"), through its symbolic links; "" when it is one or nothing is there.
std::string not_a_regular_file(const std::string& path);

// The file a write to `path` replaces: the end of its chain of symbolic links (a link is
// written through, as `cp` and a plain open() do, not replaced by a file), or `path` itself.
// Throws tx::Error for a loop of links.
std::string link_target(const std::string& path);

// Removes the temporaries that AtomicFiles of processes no longer running left in `dir` (a
// kill -9 or a power loss gives no chance to clean up); returns how many. Temporaries of live
// processes are kept: they may be writing now. Errors are ignored: cleaning is best effort.
int remove_stale_temporaries(const std::string& dir);

// Writes `bytes` to `path` through an AtomicFile.
void write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace tx::io
