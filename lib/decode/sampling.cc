#include "decode/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/rank_order.h"
#include "core/rng.h"

namespace tx::decode {

float sampling_uniform(uint64_t seed, int64_t index, int64_t t) {
  // A stream apart from dropout's and the initialisation's for the same --seed.
  return uniform01(seed ^ 0x5851f42d4c957f2dull, mix64(uint64_t(index)) + uint64_t(t));
}

int32_t draw_token(const float* lp, int64_t V, int top_k, float temperature, float u) {
  std::vector<int32_t> candidates;
  if (top_k > 0 && top_k < V) {
    candidates.resize(static_cast<size_t>(V));
    std::iota(candidates.begin(), candidates.end(), 0);
    std::partial_sort(candidates.begin(), candidates.begin() + top_k, candidates.end(),
                      [&](int32_t a, int32_t b) { return math::ranks_before(lp[a], a, lp[b], b); });
    candidates.resize(static_cast<size_t>(top_k));
  }
  const auto count = static_cast<int64_t>(candidates.empty() ? V : int64_t(candidates.size()));
  auto token = [&](int64_t i) { return candidates.empty() ? int32_t(i) : candidates[i]; };
  double best = -INFINITY;
  for (int64_t i = 0; i < count; ++i) best = std::max(best, double(lp[token(i)]));
  if (!std::isfinite(best)) return token(0);  // nothing to weigh: every candidate -inf or NaN
  const double inv_t = 1.0 / double(temperature);
  // Weights relative to the best, in double: exp underflows to 0 for masked tokens.
  std::vector<double> weight(static_cast<size_t>(count));
  double total = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double v = lp[token(i)];
    // (A masked token's -1e30 would weigh about e^-1 at a temperature of 1e30.)
    weight[i] = std::isnan(v) || v < kDeadBelow ? 0.0 : std::exp((v - best) * inv_t);
    total += weight[i];
  }
  const double target = double(u) * total;
  double sum = 0;
  int64_t last = 0;  // the last candidate of positive weight: rounding can leave sum < target
  for (int64_t i = 0; i < count; ++i) {
    if (weight[i] <= 0) continue;
    sum += weight[i];
    last = i;
    if (sum > target) return token(i);
  }
  return token(last);
}

int32_t draw_token_from_probs(const float* p, int64_t V, float u) {
  double total = 0;
  for (int64_t v = 0; v < V; ++v) total += p[v];
  const double target = double(u) * total;
  double sum = 0;
  int64_t last = 0;
  for (int64_t v = 0; v < V; ++v) {
    if (!(p[v] > 0)) continue;
    sum += p[v];
    last = v;
    if (sum > target) return static_cast<int32_t>(v);
  }
  return static_cast<int32_t>(last);
}

}  // namespace tx::decode
