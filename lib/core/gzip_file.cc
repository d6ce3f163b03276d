#include "core/gzip_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <streambuf>
#include <vector>

#include "core/error.h"

namespace tx {

bool is_gzip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[2] = {0, 0};
  return in.read(magic, 2) && static_cast<unsigned char>(magic[0]) == 0x1f &&
         static_cast<unsigned char>(magic[1]) == 0x8b;
}

// The decompressed bytes, 256 KiB at a time; underflow fails (badbit via istream) on zlib's error.
class GzipInput::Buffer : public std::streambuf {
 public:
  explicit Buffer(const std::string& path) : file_(gzopen(path.c_str(), "rb")), data_(1 << 18) {
    TX_CHECK(file_, "cannot open '", path, "': ", errno ? std::strerror(errno) : "out of memory",
             "; check the path and its permissions");
    gzbuffer(file_, 1 << 17);
  }
  ~Buffer() override { gzclose(file_); }
  std::string error() const { return error_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    const int n = gzread(file_, data_.data(), static_cast<unsigned>(data_.size()));
    if (n <= 0) {
      int code = Z_OK;
      const char* message = gzerror(file_, &code);
      // A clean end, or a truncated or damaged stream (which gzread reports as an error).
      if (n < 0 || (code != Z_OK && code != Z_STREAM_END)) {
        error_ = message ? message : "unknown zlib error";
        throw std::ios_base::failure(error_);
      }
      return traits_type::eof();
    }
    setg(data_.data(), data_.data(), data_.data() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  gzFile file_;
  std::vector<char> data_;
  std::string error_;
};

GzipInput::GzipInput(const std::string& path)
    : std::istream(nullptr), buffer_(std::make_unique<Buffer>(path)) {
  rdbuf(buffer_.get());
}

GzipInput::~GzipInput() = default;

std::string GzipInput::error() const {
  return buffer_->error();
}

}  // namespace tx
