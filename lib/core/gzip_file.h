// gzip_file: reading text files that may be gzip-compressed (Marian reads corpus.en.gz as is).
//
// A file is gzip when its first two bytes are gzip's magic (1f 8b), whatever its name: no UTF-8
// text starts so (0x8b is a continuation byte), so a plain file is never taken for one.
#pragma once

#include <istream>
#include <memory>
#include <string>

namespace tx {

// Whether the file at `path` starts with gzip's magic (false when it cannot be read).
bool is_gzip(const std::string& path);

// An istream over the decompressed bytes of the gzip file at `path` (concatenated members too,
// as gzip -d reads them). A damaged or truncated file sets badbit at the point it fails and
// keeps the reason for error().
class GzipInput : public std::istream {
 public:
  explicit GzipInput(const std::string& path);
  ~GzipInput() override;
  // zlib's reason for the last failure ("" when none).
  std::string error() const;

 private:
  class Buffer;
  std::unique_ptr<Buffer> buffer_;
};

}  // namespace tx
