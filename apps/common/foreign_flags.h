// Marian's, fairseq's and sacreBLEU's names for what tx spells otherwise: a usage error that
// meets one names tx's flag instead of CLI11's "not expected".
#pragma once

#include <string>

#include "common/options.h"

namespace tx::app {

// The advice for the first of argv[1..argc) that is another engine's flag `program` lacks
// ("--models is Marian's name: give the model files to -m/--model ..."), or, for CLI11's
// `error` about a flag that another engine lets stand alone ("--normalize: 1 required FLOAT
// missing"), that engine's meaning of it alone; "" when neither applies.
std::string foreign_flag_advice(Program program, const std::string& error, int argc,
                                const char* const argv[]);

}  // namespace tx::app
