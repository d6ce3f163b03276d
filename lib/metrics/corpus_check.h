// check_corpus: the input checks shared by the corpus metrics (line counts, UTF-8).
#pragma once

#include <string>
#include <vector>

namespace tx::metrics {

// One hypothesis stream, and one or more reference streams each with one line per hypothesis.
using Lines = std::vector<std::string>;

// Throws tx::Error when there is no reference stream, when a reference stream's line count
// differs from the hypotheses' (naming both counts), or when a line is not valid UTF-8 (naming
// the stream and the line number).
void check_corpus(const Lines& hypotheses, const std::vector<Lines>& references);

}  // namespace tx::metrics
