// Sampling a translation instead of searching for one (tx-translate --output-sampling, Marian's
// flag): at each step a sentence's next token is drawn from the model's distribution, scaled
// by a temperature, over the whole vocabulary or its top-k tokens.
#pragma once

#include <cstdint>

namespace tx::decode {

// The log-prob beam search gives a token it must not produce (pad, bos, unk unless allowed, eos
// before --min-length, a dead row's candidates). Finite rather than -inf: the rank-1 GEMM that
// adds running scores multiplies it, and a kernel that pads K with zeros would turn -inf * 0
// into NaN.
inline constexpr float kDead = -1e30f;
// Below this a log-prob is a masked token's: no real model's score comes near.
inline constexpr float kDeadBelow = -1e29f;

struct SamplingOptions {
  bool on = false;
  int top_k = 0;             // 0: the whole vocabulary
  float temperature = 1.0f;  // p^(1/T), renormalised: below 1 sharper, above 1 flatter
  uint64_t seed = 1;
};

// The uniform number in [0, 1) that step t of sentence `index` draws with: each sentence has its
// own stream, so its sample does not depend on the other sentences or on how they are batched.
float sampling_uniform(uint64_t seed, int64_t index, int64_t t);

// The token that u in [0, 1) picks from log-probabilities lp[0..V): the inverse of the
// cumulative distribution of exp(lp / temperature), renormalised over the candidates: every
// token in index order, or (top_k > 0) the top_k best in top-k order (value descending, ties
// to the lower index, NaN last). A masked token (log-prob below kDeadBelow, or -inf) has
// weight 0 and is never picked unless every candidate is masked, at any temperature.
int32_t draw_token(const float* lp, int64_t V, int top_k, float temperature, float u);

// The same draw over the whole vocabulary from probabilities already at the temperature
// (softmax(lp / temperature), which the backend computes faster than the host's exp): the
// first token whose cumulative probability exceeds u times their sum.
int32_t draw_token_from_probs(const float* p, int64_t V, float u);

}  // namespace tx::decode
