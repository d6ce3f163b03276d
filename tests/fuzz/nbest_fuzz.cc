// Fuzz target: the Marian n-best line parser of tx-score --n-best-list.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/error.h"
#include "data/line_reader.h"
#include "io/nbest_line.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  tx::data::LineReader reader(in, "fuzz");
  try {
    for (std::string line; reader.next(line);) {
      const tx::io::NBestLine n = tx::io::parse_nbest_line(line, "line");
      // A parsed line is written back from its fields as it came.
      std::string back = n.fields[0];
      for (size_t i = 1; i < n.fields.size(); ++i) back += "|||" + n.fields[i];
      if (back != line || n.index < 0) __builtin_trap();
      n.text();
    }
  } catch (const tx::Error&) {
  }
  return 0;
}
