// tx-average: the mean of the parameters of several checkpoints, written as a model file.
// The work is train::average_checkpoints; this file is the command line around it.
#include <string>
#include <vector>

#include "common/app_log.h"
#include "common/command_line.h"
#include "train/average.h"

namespace {

// "60,522,496": parameter counts read better grouped.
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

int average(const tx::app::Options& options) {
  const std::vector<std::string> inputs = options.list("inputs");
  const std::string output = options.text("output");
  for (const std::string& in : inputs) tx::app::detail(options, "input: ", in);
  const tx::train::AverageSummary s = tx::train::average_checkpoints(inputs, output);
  tx::app::info(options, "averaged ", s.inputs, " checkpoint", s.inputs == 1 ? "" : "s", ": ",
                s.tensors, " tensors, ", grouped(s.parameters), " parameters -> ", output,
                s.skipped_tensors
                    ? tx::str(" (left out ", s.skipped_tensors, " optimizer-state tensors)")
                    : std::string());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tx::app::run_main(tx::app::kAverage,
                           "tx-average: average the parameters of checkpoints of one model into "
                           "a model file.\nExample: tx-average -o avg.safetensors "
                           "ckpt.10000.safetensors ckpt.11000.safetensors",
                           argc, argv, average);
}
