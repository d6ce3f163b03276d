// TextInput: a file's or stdin's bytes for reading, decompressed when they are gzip (Marian
// reads corpus.en.gz as is).
//
// The first two bytes decide (gzip's magic 1f 8b, never valid UTF-8), whatever the name; any
// other input passes through as it is. The input is opened once and read as it arrives, so a
// pipe (<(zcat ...)) reads as a file does and a line typed at a terminal is read when it ends.
#pragma once

#include <istream>
#include <memory>
#include <string>

namespace tx {

class TextInput : public std::istream {
 public:
  // Opens `path`; throws tx::Error naming it when it cannot be opened.
  explicit TextInput(const std::string& path);
  // Reads the open descriptor `fd` (0: stdin) from where it stands; the caller keeps it open.
  explicit TextInput(int fd);
  ~TextInput() override;
  // After a read: whether the input is gzip (false until then, and for plain text).
  bool gzip() const;
  // The reason for a failed read (damaged or cut gzip data, a read error), or "" when none. A
  // failed read sets badbit.
  std::string error() const;
  // What a failed read means and its fix, for a message that names the file: "its gzip data is
  // damaged or cut short (...); check the file with gzip -t", or a read error's.
  std::string failure() const;

 private:
  class Buffer;
  std::unique_ptr<Buffer> buffer_;
};

}  // namespace tx
