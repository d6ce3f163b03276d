#include "support/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

namespace tx::test {

namespace {

// Uniform double in [0, 1) from 53 random bits; std::uniform_real_distribution is
// implementation-defined, this is not.
double unit(std::mt19937_64& gen) {
  return static_cast<double>(gen() >> 11) * 0x1.0p-53;
}

constexpr int kShown = 8;  // mismatches listed in a message

}  // namespace

std::vector<float> random_vector(size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 gen(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(lo + (hi - lo) * unit(gen));
  return v;
}

std::vector<int32_t> random_ints(size_t n, uint64_t seed, int32_t lo, int32_t hi) {
  std::mt19937_64 gen(seed ^ 0x5bd1e995u);
  std::vector<int32_t> v(n);
  uint64_t range = static_cast<uint64_t>(static_cast<int64_t>(hi) - lo);
  for (int32_t& x : v) x = static_cast<int32_t>(lo + static_cast<int64_t>(gen() % range));
  return v;
}

std::vector<float> random_away_from_zero(size_t n, uint64_t seed, float min_abs, float max_abs) {
  std::mt19937_64 gen(seed ^ 0x27d4eb2fu);
  std::vector<float> v(n);
  for (float& x : v) {
    float mag = static_cast<float>(min_abs + (max_abs - min_abs) * unit(gen));
    x = (gen() & 1) ? mag : -mag;
  }
  return v;
}

std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

std::vector<double> log_softmax_row(const float* x, int64_t n) {
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, double(x[j]));
  double z = 0;
  for (int64_t j = 0; j < n; ++j) z += std::exp(double(x[j]) - mx);
  std::vector<double> lp(n);
  for (int64_t j = 0; j < n; ++j) lp[j] = double(x[j]) - mx - std::log(z);
  return lp;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) s += double(a[i]) * double(b[i]);
  return s;
}

std::string compare_tol(const std::vector<float>& got, const std::vector<double>& want,
                        const std::vector<double>& tol) {
  std::ostringstream out;
  if (got.size() != want.size()) {
    out << "size mismatch: got " << got.size() << " values, want " << want.size();
    return out.str();
  }
  out.precision(9);
  size_t bad = 0;
  double worst = 0;
  size_t worst_i = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(double(got[i]) - want[i]);
    bool ok = err <= tol[i];  // false for NaN
    if (!ok) {
      if (bad < kShown)
        out << "  [" << i << "] got " << got[i] << " want " << want[i] << " (err " << err
            << " > tol " << tol[i] << ")\n";
      if (!(err <= worst)) {
        worst = err;
        worst_i = i;
      }
      ++bad;
    }
  }
  if (!bad) return std::string();
  std::ostringstream head;
  head.precision(9);
  head << bad << " of " << got.size() << " values mismatch; worst at [" << worst_i << "] got "
       << got[worst_i] << " want " << want[worst_i] << ":\n";
  return head.str() + out.str();
}

std::string compare(const std::vector<float>& got, const std::vector<double>& want, double rtol,
                    double atol) {
  std::vector<double> tol(want.size());
  for (size_t i = 0; i < want.size(); ++i) tol[i] = atol + rtol * std::fabs(want[i]);
  return compare_tol(got, want, tol);
}

std::string compare(const std::vector<float>& got, const std::vector<float>& want, double rtol,
                    double atol) {
  return compare(got, to_double(want), rtol, atol);
}

std::string compare_exact(const std::vector<float>& got, const std::vector<float>& want) {
  std::ostringstream out;
  if (got.size() != want.size()) {
    out << "size mismatch: got " << got.size() << " values, want " << want.size();
    return out.str();
  }
  out.precision(9);
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      if (bad < kShown) out << "  [" << i << "] got " << got[i] << " want " << want[i] << "\n";
      ++bad;
    }
  }
  if (!bad) return std::string();
  return std::to_string(bad) + " of " + std::to_string(got.size()) + " values differ bitwise:\n" +
         out.str();
}

std::string compare_exact(const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  std::ostringstream out;
  if (got.size() != want.size()) {
    out << "size mismatch: got " << got.size() << " values, want " << want.size();
    return out.str();
  }
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      if (bad < kShown) out << "  [" << i << "] got " << got[i] << " want " << want[i] << "\n";
      ++bad;
    }
  }
  if (!bad) return std::string();
  return std::to_string(bad) + " of " + std::to_string(got.size()) + " values differ:\n" +
         out.str();
}

std::vector<double> numeric_gradient(const std::function<double(const std::vector<float>&)>& loss,
                                     const std::vector<float>& x, float eps) {
  std::vector<double> g(x.size());
  std::vector<float> xp = x;
  for (size_t i = 0; i < x.size(); ++i) {
    float plus = x[i] + eps;
    float minus = x[i] - eps;
    xp[i] = plus;
    double lp = loss(xp);
    xp[i] = minus;
    double lm = loss(xp);
    xp[i] = x[i];
    g[i] = (lp - lm) / (double(plus) - double(minus));
  }
  return g;
}

std::string compare_gradient(const std::vector<float>& analytic, const std::vector<double>& numeric,
                             double rtol, double atol) {
  std::string per_element = compare(analytic, numeric, rtol, atol);
  if (!per_element.empty()) return "gradient vs finite differences: " + per_element;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < numeric.size(); ++i) {
    double d = double(analytic[i]) - numeric[i];
    diff += d * d;
    norm += numeric[i] * numeric[i];
  }
  diff = std::sqrt(diff);
  norm = std::sqrt(norm);
  if (diff <= rtol * norm + atol) return std::string();
  std::ostringstream out;
  out << "gradient vs finite differences: ||analytic - numeric|| = " << diff << " > " << rtol
      << " * ||numeric|| (" << norm << ") + " << atol;
  return out.str();
}

std::vector<float> fetch(Backend& be, const Tensor& t) {
  return be.download<float>(t);
}

std::pair<Tensor, std::vector<float>> rounded(Backend& be, const std::vector<float>& x,
                                              const Shape& shape, DType dtype) {
  Tensor low = be.empty(shape, dtype), wide = be.empty(shape);
  be.cast(be.upload(x, shape), low);
  be.cast(low, wide);
  return {low, fetch(be, wide)};
}

std::vector<int32_t> fetch_i32(Backend& be, const Tensor& t) {
  return be.download<int32_t>(t);
}

std::vector<uint16_t> fetch_u16(Backend& be, const Tensor& t) {
  REQUIRE(size_of(t.dtype()) == 2);
  std::vector<uint16_t> out(static_cast<size_t>(t.numel()));
  be.copy_to_host(t, out.data());
  return out;
}

Tensor upload_u16(Backend& be, const std::vector<uint16_t>& bits, const Shape& shape, DType dtype) {
  REQUIRE(static_cast<int64_t>(bits.size()) == shape.numel());
  Tensor t = be.empty(shape, dtype);
  be.copy_from_host(bits.data(), t);
  return t;
}

std::vector<float> check_accumulates(Backend& be, const Shape& shape,
                                     const std::function<void(const Tensor& dx)>& backward,
                                     uint64_t seed) {
  Tensor dx0 = be.zeros(shape);
  backward(dx0);
  std::vector<float> grad = be.download<float>(dx0);

  std::vector<float> before =
      random_away_from_zero(static_cast<size_t>(shape.numel()), seed, 0.5f, 2.0f);
  Tensor dx1 = be.upload(before, shape);
  backward(dx1);
  std::vector<float> after = be.download<float>(dx1);

  std::vector<double> want(before.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = double(before[i]) + double(grad[i]);
  std::string msg = compare(after, want, 1e-5, 1e-6);
  INFO("backward must ADD into its gradient output: dx_after = dx_before + grad\n" << msg);
  CHECK(msg.empty());
  return grad;
}

std::vector<float> check_accumulates(
    Backend& be, const Shape& shape,
    const std::function<void(const Tensor& dx, bool accumulate)>& backward, uint64_t seed) {
  std::vector<float> grad = check_accumulates(
      be, shape, [&](const Tensor& dx) { backward(dx, true); }, seed);
  Tensor dx = be.upload(std::vector<float>(static_cast<size_t>(shape.numel()),
                                           std::numeric_limits<float>::quiet_NaN()),
                        shape);
  backward(dx, false);
  // Equal as floats: 0 + (-0) is +0, so writing may give -0 where adding into zeros gave +0.
  const std::vector<float> got = be.download<float>(dx);
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == grad[i]) && differ++ == 0) first = i;
  INFO("accumulate off must overwrite dx (it held NaN) with the gradient of dx += grad: "
       << differ << " of " << got.size() << " differ, first [" << first << "] got "
       << (differ ? got[first] : 0.0f) << " want " << (differ ? grad[first] : 0.0f));
  CHECK(differ == 0);
  return grad;
}

double gemm_tolerance(const Backend& be, int64_t k) {
  // A float dot product of length k errs by at most about k * 2^-24 of sum |a b|, far less
  // for blocked or pairwise sums; TF32 rounds the inputs to 10 mantissa bits.
  bool tf32 = be.name().rfind("cuda", 0) == 0;
  double f32 = std::max(1e-5, double(k) * 6e-8);
  return tf32 ? std::max(f32, 2e-3) : f32;
}

}  // namespace tx::test
