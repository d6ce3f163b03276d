#include "core/text_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/utf8.h"

namespace tx {

void check_readable_file(const std::string& path, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const std::string reason = std::strerror(errno);
    throw Error(str("cannot read ", what, " '", path, "': ", reason, "; check the path"));
  }
  if (S_ISDIR(st.st_mode))
    throw Error(
        str("cannot read ", what, " '", path, "': it is a directory; give the path of a file"));
  if (::access(path.c_str(), R_OK) != 0) {
    const std::string reason = std::strerror(errno);
    throw Error(str("cannot read ", what, " '", path, "': ", reason, "; check its permissions"));
  }
}

std::string describe_text_line_problem(std::string_view line) {
  const std::string invalid = describe_invalid_utf8(line);
  const size_t nul = line.find('\0');
  // A byte-order mark (UTF-16's FF FE or FE FF, UTF-32's) is invalid UTF-8 at byte 1 of the
  // first line, or a NUL.
  const Conversion convert = conversion_for(line);
  if (convert.marked)
    return str(invalid.empty() ? "a byte-order mark" : invalid, "; the file looks like ",
               convert.encoding, ": convert it with ", convert.command());
  if (!invalid.empty() && (nul == std::string_view::npos || find_invalid_utf8(line) < nul))
    return invalid +
           "; convert the file to UTF-8 (e.g. iconv -f LATIN1 -t UTF-8) or remove the line";
  if (nul != std::string_view::npos)
    return str("NUL byte at byte ", nul + 1,
               "; text files have none: if the file is UTF-16, convert it with iconv -f UTF-16 -t "
               "UTF-8, else remove the line");
  return {};
}

}  // namespace tx
