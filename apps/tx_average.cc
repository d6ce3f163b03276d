// tx-average: the mean of the parameters of several checkpoints, written as a model file.
// The work is train::average_checkpoints; this file is the command line around it.
#include <string>
#include <vector>

#include "common/app_log.h"
#include "common/command_line.h"
#include "core/format.h"
#include "train/average.h"
#include "train/trainer.h"

namespace {

using tx::grouped;

using tx::app::UsageError;

// The files to average: --inputs, or the newest --last snapshots of the model directory.
std::vector<std::string> inputs_of(const tx::app::Options& options) {
  const bool listed = options.has("inputs") && !options.list("inputs").empty();
  const int64_t last = options.integer("last");
  if (last == 0) {
    if (!listed)
      throw UsageError(
          "give the checkpoints to average (as arguments or --inputs), or --last N "
          "-m DIR for the newest N snapshots tx-train --keep-last wrote");
    if (options.has("model"))
      throw UsageError(
          "-m/--model names the model directory for --last N; give --last N too, "
          "or leave out -m and list the checkpoints to average");
    return options.list("inputs");
  }
  if (listed) throw UsageError("give either checkpoints or --last N -m DIR, not both");
  if (!options.has("model"))
    throw UsageError("--last needs the model directory tx-train wrote: -m DIR");
  const std::string dir = options.text("model");
  const auto snapshots = tx::train::Trainer::snapshots(dir);
  if (static_cast<int64_t>(snapshots.size()) < last)
    throw tx::Error(tx::str("'", dir, "' holds ", snapshots.size(),
                            " model.u<update>.safetensors snapshots but --last asks for ", last,
                            "; ask for fewer, or train with --keep-last ", last, " or more"));
  std::vector<std::string> inputs;
  for (size_t i = snapshots.size() - static_cast<size_t>(last); i < snapshots.size(); ++i)
    inputs.push_back(snapshots[i].second);
  return inputs;
}

int average(const tx::app::Options& options) {
  const std::vector<std::string> inputs = inputs_of(options);
  const std::string output = options.text("output");
  for (const std::string& in : inputs) tx::app::detail(options, "input: ", in);
  const tx::train::AverageSummary s = tx::train::average_checkpoints(inputs, output);
  tx::app::info(
      options, "averaged ", s.inputs, " checkpoint", s.inputs == 1 ? "" : "s", ": ", s.tensors,
      " tensors, ", grouped(s.parameters), " parameters -> ", output,
      s.smoothed_inputs ? tx::str(" (the smoothed weights of ", s.smoothed_inputs,
                                  " training checkpoint", s.smoothed_inputs == 1 ? ")" : "s)")
                        : std::string(),
      s.skipped_tensors ? tx::str(" (left out ", s.skipped_tensors, " optimizer-state tensors)")
                        : std::string());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return tx::app::run_main(tx::app::kAverage,
                           "tx-average: average the parameters of checkpoints of one model into "
                           "a model file.\nExample: tx-average -o avg.safetensors "
                           "model.u10000.safetensors model.u11000.safetensors\n"
                           "         tx-average -o avg.safetensors --last 5 -m model.de-en",
                           argc, argv, average);
}
