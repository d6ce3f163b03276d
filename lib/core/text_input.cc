#include "core/text_input.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <streambuf>
#include <vector>

#include "core/error.h"
#include "core/format.h"

namespace tx {

// The bytes through zlib, 256 KiB at a time; a failed read throws, which istream turns into
// badbit.
class TextInput::Buffer : public std::streambuf {
 public:
  explicit Buffer(const std::string& path) : data_(1 << 18) {
    errno = 0;
    file_ = gzopen(path.c_str(), "rb");
    TX_CHECK(file_, "cannot open '", path, "': ", errno ? std::strerror(errno) : "out of memory",
             "; check the path and its permissions");
    gzbuffer(file_, 1 << 17);
  }
  ~Buffer() override { gzclose(file_); }
  bool gzip() const { return read_ && !gzdirect(file_); }
  const std::string& error() const { return error_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    const int n = gzread(file_, data_.data(), static_cast<unsigned>(data_.size()));
    read_ = true;
    if (n <= 0) {
      int code = Z_OK;
      const char* message = gzerror(file_, &code);
      // 0 with Z_OK is the end; a cut or damaged gzip stream is an error (Z_BUF_ERROR,
      // Z_DATA_ERROR), as is a failed read (Z_ERRNO).
      if (n < 0 || code != Z_OK) {
        error_ = message && *message ? message : "zlib error";
        throw std::ios_base::failure(error_);
      }
      return traits_type::eof();
    }
    setg(data_.data(), data_.data(), data_.data() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  std::vector<char> data_;  // first: its allocation cannot leave an open file behind
  gzFile file_ = nullptr;
  std::string error_;
  bool read_ = false;
};

TextInput::TextInput(const std::string& path)
    : std::istream(nullptr), buffer_(std::make_unique<Buffer>(path)) {
  rdbuf(buffer_.get());
}

TextInput::~TextInput() = default;

bool TextInput::gzip() const {
  return buffer_->gzip();
}

std::string TextInput::error() const {
  return buffer_->error();
}

std::string TextInput::failure() const {
  return gzip() ? str("its gzip data is damaged or cut short (", error(),
                      "); check the file with gzip -t")
                : str("read error (", error(), "); check the file and the disk");
}

}  // namespace tx
