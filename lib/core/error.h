// Error: the one exception type of tx; its message names the problem and the fix.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace tx {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& out, const T& first, const Rest&... rest) {
  out << first;
  append(out, rest...);
}
}  // namespace detail

// Concatenates its arguments with operator<< into one message.
template <typename... Parts>
std::string str(const Parts&... parts) {
  std::ostringstream out;
  detail::append(out, parts...);
  return out.str();
}

}  // namespace tx

// Throws tx::Error with the streamed message when `cond` is false.
#define TX_CHECK(cond, ...)                                 \
  do {                                                      \
    if (!(cond)) throw ::tx::Error(::tx::str(__VA_ARGS__)); \
  } while (0)
