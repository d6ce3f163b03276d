// Test support: a SentencePiece vocabulary trained on a small generated German corpus and a
// random model over it (d_model 8, one layer a side), for tests of the Translator's text path.
#pragma once

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "data/vocab.h"
#include "data/vocab_train.h"
#include "files.h"
#include "gradient_check.h"
#include "random_model.h"

namespace tx::test {

struct TinyTranslator {
  TinyTranslator() {
    const std::vector<std::string> words = {"das",   "Haus",    "ist", "klein", "der",  "Hund",
                                            "läuft", "schnell", "ein", "Baum",  "grün", "alt"};
    std::string text;
    Rng rng(3);
    for (int i = 0; i < 200; ++i) {
      const int n = 1 + static_cast<int>(rng.uniform() * 6);
      for (int w = 0; w < n; ++w)
        text += (w ? " " : "") + words[static_cast<size_t>(rng.uniform() * words.size())];
      text += "\n";
    }
    std::ofstream(dir.file("corpus.txt")) << text;
    data::VocabTrainOptions vo;
    vo.inputs = {dir.file("corpus.txt")};
    vo.prefix = dir.file("vocab");
    vo.vocab_size = 40;
    vo.hard_vocab_limit = false;
    vocab = std::make_unique<data::Vocab>(data::train_vocab(vo).model_path);
    be = cpu_backend();
    model = std::make_unique<RandomModel>(*be, small_config(vocab->size(), 1, 1), 7);
  }
  TempDir dir;
  std::unique_ptr<data::Vocab> vocab;
  std::unique_ptr<Backend> be;
  std::unique_ptr<RandomModel> model;
};

}  // namespace tx::test
