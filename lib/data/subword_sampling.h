// Subword regularisation (tx-train --sentencepiece-alphas, Marian's): each epoch, every
// training pair segmented anew by SentencePiece sampling.
//
// The same pairs as the best segmentation's corpus, in its order, so the batcher, the
// checkpoint's data position and --guided-alignment's line numbers stay valid; only the ids
// change. A pair's sample is a pure function of (seed, epoch, its block of kBlock pairs), not of
// the thread count: SentencePiece draws from a thread-local generator seeded when a thread first
// samples, so each block runs in a fresh thread started under its own seed.
#pragma once

#include <cstdint>
#include <string>

#include "data/corpus.h"
#include "data/vocab.h"

namespace tx::data {

struct SubwordSampling {
  float src_alpha = 0;  // 0: the side keeps its best segmentation
  float tgt_alpha = 0;
  uint64_t seed = 1;
  // A sample longer than this (pieces, without eos/bos) is cropped: the positions the model
  // has, and one pair per batch at most.
  int64_t max_src_tokens = 0;
  int64_t max_tgt_tokens = 0;
  int32_t num_threads = 0;  // 0: the number of cores
};

constexpr int64_t kSamplingBlock = 1024;

// `best`'s pairs (read again from the files it was loaded from) segmented by sampling for
// `epoch`. Throws tx::Error when the files changed under it.
ParallelCorpus sample_corpus(const std::string& src_path, const std::string& tgt_path,
                             const Vocab& src_vocab, const Vocab& tgt_vocab,
                             const ParallelCorpus& best, int64_t epoch,
                             const SubwordSampling& options);

}  // namespace tx::data
