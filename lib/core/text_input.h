// TextInput: a file's bytes for reading, decompressed when it is gzip (Marian reads
// corpus.en.gz as is).
//
// zlib decides from the first bytes, whatever the name, and passes any other file through as
// it is; the file is opened once, so a pipe (<(zcat ...)) reads as a file does.
#pragma once

#include <istream>
#include <memory>
#include <string>

namespace tx {

class TextInput : public std::istream {
 public:
  // Opens `path`; throws tx::Error naming it when it cannot be opened.
  explicit TextInput(const std::string& path);
  ~TextInput() override;
  // After a read: whether the file is gzip (false until then, and for plain text).
  bool gzip() const;
  // zlib's reason for a failed read (damaged or cut gzip data), or "" when none. A failed read
  // sets badbit.
  std::string error() const;
  // What a failed read means and its fix, for a message that names the file: "its gzip data is
  // damaged or cut short (...); check the file with gzip -t", or a read error's.
  std::string failure() const;

 private:
  class Buffer;
  std::unique_ptr<Buffer> buffer_;
};

}  // namespace tx
