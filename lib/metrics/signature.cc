// signature_version: the project version, passed in by lib/CMakeLists.txt as TX_VERSION.
#include "metrics/signature.h"

#ifndef TX_VERSION
#error "TX_VERSION is set for this file by lib/CMakeLists.txt (the version in project())"
#endif

namespace tx::metrics {

std::string signature_version() {
  return "tx-" TX_VERSION;
}

}  // namespace tx::metrics
