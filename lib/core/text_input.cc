#include "core/text_input.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <streambuf>
#include <vector>

#include "core/error.h"
#include "core/format.h"

namespace tx {

// One read() at a time, taking what has arrived (gzread and ifstream-less stdio would wait for
// a full block, which keeps an interactive pipe's line from being read); gzip members through
// zlib's inflate. A failed read throws, which istream turns into badbit.
class TextInput::Buffer : public std::streambuf {
 public:
  Buffer(int fd, bool owned)
      : in_(size_t(1) << 17), out_(size_t(1) << 18), fd_(fd), owned_(owned) {}
  ~Buffer() override {
    if (inflating_) inflateEnd(&z_);
    if (owned_) close(fd_);
  }
  bool gzip() const { return gzip_; }
  const std::string& error() const { return error_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (!started_) start();
    const size_t n = gzip_ ? inflate_some() : pass_some();
    if (n == 0) return traits_type::eof();
    return traits_type::to_int_type(*gptr());
  }

 private:
  size_t pending() const { return end_ - begin_; }

  // Appends what one read() gives to the unread input; false at the end of the input, and
  // from then on (a terminal's Ctrl-D is read once, not waited past).
  bool read_more() {
    if (ended_) return false;
    if (begin_ == end_) begin_ = end_ = 0;
    if (end_ == in_.size()) {
      std::memmove(in_.data(), in_.data() + begin_, pending());
      end_ -= begin_;
      begin_ = 0;
      // Full of unread bytes (zlib always takes some, so never seen): room, not a read of 0
      // bytes that would pass for the end.
      if (end_ == in_.size()) in_.resize(2 * in_.size());
    }
    for (;;) {
      const ssize_t n = ::read(fd_, in_.data() + end_, in_.size() - end_);
      if (n > 0) {
        end_ += size_t(n);
        return true;
      }
      if (n == 0) {
        ended_ = true;
        return false;
      }
      if (errno != EINTR) fail(std::strerror(errno));
    }
  }

  // Reads until the first two bytes can tell gzip from text.
  void start() {
    started_ = true;
    while (pending() < 2 && (pending() == 0 || uint8_t(in_[begin_]) == 0x1f) && read_more()) {
    }
    gzip_ = pending() >= 2 && uint8_t(in_[begin_]) == 0x1f && uint8_t(in_[begin_ + 1]) == 0x8b;
    if (!gzip_) return;
    z_ = {};
    // 16 + 15: a gzip header and trailer around the largest window.
    if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) fail("out of memory");
    inflating_ = true;
  }

  // Plain text: the unread input as it is, else one read's worth.
  size_t pass_some() {
    if (pending() == 0 && !read_more()) return 0;
    setg(in_.data() + begin_, in_.data() + begin_, in_.data() + end_);
    const size_t n = pending();
    begin_ = end_;
    return n;
  }

  // Gzip: inflates until some text comes out or the input ends. After a member's end, another
  // member may follow (`cat a.gz b.gz`, as gzip -d reads); other bytes there are ignored, as
  // zlib's gzread and gzip -d do (tape padding).
  size_t inflate_some() {
    for (;;) {
      if (member_done_) {
        while (pending() < 2 && read_more()) {
        }
        if (pending() < 2 || uint8_t(in_[begin_]) != 0x1f || uint8_t(in_[begin_ + 1]) != 0x8b)
          return 0;
        inflateReset(&z_);
        member_done_ = false;
      }
      // Inflated first with what is here, none included: zlib may hold output that the last
      // call had no room for, and a read() now could wait on a pipe for nothing.
      z_.next_in = reinterpret_cast<Bytef*>(in_.data() + begin_);
      z_.avail_in = static_cast<uInt>(pending());
      z_.next_out = reinterpret_cast<Bytef*>(out_.data());
      z_.avail_out = static_cast<uInt>(out_.size());
      const int code = inflate(&z_, Z_NO_FLUSH);
      begin_ = end_ - z_.avail_in;
      if (code == Z_STREAM_END) {
        member_done_ = true;
      } else if (code != Z_OK && code != Z_BUF_ERROR) {  // Z_BUF_ERROR: no progress, needs input
        fail(z_.msg ? z_.msg : code == Z_MEM_ERROR ? "out of memory" : "invalid data");
      }
      const size_t n = out_.size() - z_.avail_out;
      if (n > 0) {
        setg(out_.data(), out_.data(), out_.data() + n);
        return n;
      }
      if (!member_done_ && !read_more()) fail("unexpected end of file");
    }
  }

  [[noreturn]] void fail(const std::string& why) {
    error_ = why;
    throw std::ios_base::failure(why);
  }

  std::vector<char> in_, out_;  // read bytes [begin_, end_) not yet used; inflated text
  size_t begin_ = 0, end_ = 0;
  int fd_;
  bool owned_;
  z_stream z_{};
  bool started_ = false, gzip_ = false, inflating_ = false, member_done_ = false, ended_ = false;
  std::string error_;
};

TextInput::TextInput(const std::string& path) : std::istream(nullptr) {
  errno = 0;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TX_CHECK(fd >= 0, "cannot open '", path, "': ", std::strerror(errno),
           "; check the path and its permissions");
  try {
    buffer_ = std::make_unique<Buffer>(fd, true);
  } catch (...) {
    close(fd);
    throw;
  }
  rdbuf(buffer_.get());
}

TextInput::TextInput(int fd) : std::istream(nullptr), buffer_(std::make_unique<Buffer>(fd, false)) {
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
