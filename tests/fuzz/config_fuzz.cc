// Fuzz target: the --config JSON options reader of every program, and resolving the options.
#include <cstddef>
#include <cstdint>

#include "common/options.h"
#include "core/error.h"
#include "fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tx::fuzz::MemFile file(data, size);
  for (const tx::app::Program p :
       {tx::app::kTrain, tx::app::kTranslate, tx::app::kScore, tx::app::kAverage}) {
    try {
      tx::app::read_config_file(file.path(), p);
      tx::app::resolve_options(p, file.path(), {}, false);
    } catch (const tx::Error&) {
    }
  }
  return 0;
}
