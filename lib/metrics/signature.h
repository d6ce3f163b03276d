// The version that tx's sacreBLEU-style signatures name.
#pragma once

#include <string>

namespace tx::metrics {

// "tx-<project version>", e.g. "tx-0.1.0": the "version" field of bleu_signature and
// chrf_signature. sacreBLEU puts its own version there; tx computes the same scores with its own
// code, so a cited signature names the program that computed it.
std::string signature_version();

}  // namespace tx::metrics
