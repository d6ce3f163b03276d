// Test support: running the real programs (tx-train, tx-translate, tx-score, tx-average) and
// the tiny reversal corpus their end-to-end tests train on.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "support/files.h"

namespace tx::test {

struct Run {
  int status = -1;
  std::string out, err;
};

// Runs `program` with `args` (shell words, redirections allowed), capturing its exit code,
// stdout and stderr through files in `dir`.
inline Run run_program(const TempDir& dir, const std::string& program, const std::string& args) {
  const std::string cmd =
      program + " " + args + " >" + dir.file("stdout") + " 2>" + dir.file("stderr");
  Run r;
  const int raw = std::system(cmd.c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(dir.file("stdout"));
  r.err = slurp(dir.file("stderr"));
  return r;
}

// Whether `text` is exactly one line, with its '\n'.
inline bool one_line(const std::string& text) {
  return !text.empty() && text.find('\n') == text.size() - 1;
}

// `lines` sentences of 2..5 words from 8 and, on the target side, the same words reversed.
inline void write_reversal_corpus(const std::string& src, const std::string& tgt, int lines,
                                  uint64_t seed) {
  static const char* words[] = {"ab", "cd", "ef", "gh", "ba", "dc", "fe", "hg"};
  std::mt19937_64 gen(seed);
  std::ofstream s(src), t(tgt);
  for (int i = 0; i < lines; ++i) {
    std::vector<std::string> w(2 + gen() % 4);
    for (std::string& x : w) x = words[gen() % 8];
    for (size_t k = 0; k < w.size(); ++k) s << (k ? " " : "") << w[k];
    for (size_t k = 0; k < w.size(); ++k) t << (k ? " " : "") << w[w.size() - 1 - k];
    s << '\n';
    t << '\n';
  }
}

// Trains dir/m (model.safetensors, vocab.spm) on 400 reversal pairs for `updates` updates: a
// d_model 64, 2 + 2 layer model that tx-translate can run in the program tests.
inline Run train_reversal_model(const TempDir& dir, int updates) {
  write_reversal_corpus(dir.file("train.src"), dir.file("train.tgt"), 400, 3);
  return run_program(
      dir, TX_TRAIN_BIN,
      "--train-sets " + dir.file("train.src") + " " + dir.file("train.tgt") + " --model " +
          dir.file("m") +
          " --d-model 64 --d-ff 128 --heads 4 --enc-layers 2 --dec-layers 2 --dim-vocabs 30"
          " --max-tokens 512 --learn-rate 0.003 --lr-schedule constant --after-updates " +
          std::to_string(updates) + " --cpu-threads 1 --quiet");
}

}  // namespace tx::test
