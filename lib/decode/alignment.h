// Word alignments (tx-translate --alignment): the cross-attention of one decoder layer read as
// a soft alignment of target to source tokens, and Marian's hard, thresholded and soft text.
//
// Which attention (io::ModelConfig::alignment_layer, alignment_head): the head a model was
// trained to align with (tx-train --guided-alignment, or a Marian model's
// transformer-guided-alignment-layer, whose head 0 marian-decoder always reads; a Hugging
// Face Marian directory's head 0 of the last layer), else the average over the heads of the
// last decoder layer (fairseq's rule). The probabilities are
// those of incremental decoding, computed once per finished hypothesis by a teacher-forced
// pass (nn::Transformer::cross_attention) rather than kept at every step of the search.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "nn/transformer.h"

namespace tx::decode {

// Row t: target token t's (eos last when the hypothesis ended with it) probabilities over the
// source tokens, eos last: Marian's (target tokens + 1) x (source tokens + 1).
using SoftAlignment = std::vector<std::vector<float>>;

enum class AlignmentKind { none, hard, threshold, soft };

struct AlignmentOptions {
  AlignmentKind kind = AlignmentKind::none;
  float threshold = 1.0f;  // threshold: every pair with probability > it
  // Source and target words instead of tokens: the whitespace-separated words of the source
  // line (pieces joined at those that begin with U+2581) and of the printed translation, eos
  // left out (translator.cc's words_of and printed_words_of; see format_alignment).
  bool words = false;
};

// --alignment's value as Marian reads it: empty or "hard" (each target token's most probable
// source token), "soft", or a threshold in (0, 1] (1 is hard). Throws tx::Error otherwise.
AlignmentOptions parse_alignment(const std::vector<std::string>& values);

// One hypothesis to align: its source ids (ending in eos) and target ids (no bos, no eos), and
// whether it ended in eos (a row for eos then).
struct AlignmentRequest {
  const std::vector<int32_t>* source = nullptr;
  const std::vector<int32_t>* target = nullptr;
  bool eos = true;
};

// The soft alignment of each request, from `model`'s alignment layer and head, in one
// encoder and decoder pass over all of them (each distinct source encoded once).
std::vector<SoftAlignment> soft_alignments(Graph& g, const nn::Transformer& model,
                                           const std::vector<AlignmentRequest>& requests);

// Groups of tokens into words: word[i] is token i's word, -1 for a token in none (eos).
using WordMap = std::vector<int32_t>;

// Marian's text of an alignment: hard and threshold "s-t s-t ..." sorted by source then
// target position (hard: each row's largest, the first of equals; threshold: every p >
// threshold), soft "p,p,... p,p,..." one group per target row with 6 significant digits.
// With word maps (options.words), rows and columns are summed into words first (rows
// averaged over a word's tokens), tokens in no word dropped; hard and threshold pairs are
// found on the tokens and then mapped to words (a word pair is aligned if any of their tokens
// are), duplicates removed.
std::string format_alignment(const SoftAlignment& alignment, const AlignmentOptions& options,
                             const WordMap* source_words = nullptr,
                             const WordMap* target_words = nullptr);

}  // namespace tx::decode
