#include "core/rng.h"

#include <cmath>

namespace tx {

float Rng::normal() {
  // 1 - u keeps the log argument in (0, 1].
  float u1 = 1.0f - uniform();
  float u2 = uniform();
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853071795864f * u2);
}

}  // namespace tx
