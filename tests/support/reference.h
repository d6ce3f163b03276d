// Test support for the conformance suite: seeded random inputs, closeness checks, a central
// finite-difference gradient checker and small helpers to move data through a Backend.
//
// Everything here is independent of the backends under test: random numbers come from the
// standard library's mt19937_64 (not tx::Rng), and the checks compare against plain loops that
// each test writes itself.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace tx::test {

// ---- random inputs ----------------------------------------------------------------------------

// n values uniform in [lo, hi), the same for the same seed on every platform.
std::vector<float> random_vector(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
// n integers uniform in [lo, hi).
std::vector<int32_t> random_ints(size_t n, uint64_t seed, int32_t lo, int32_t hi);
// n values with |v| in [min_abs, max_abs] and a random sign: keeps inputs away from a kink
// (ReLU at 0) or makes every element nonzero (dropout masks).
std::vector<float> random_away_from_zero(size_t n, uint64_t seed, float min_abs, float max_abs);

// ---- closeness ------------------------------------------------------------------------------

// Empty when |got[i] - want[i]| <= atol + rtol * |want[i]| for every i (and the sizes match);
// otherwise a description of the first mismatches and their count, for INFO().
std::string compare(const std::vector<float>& got, const std::vector<double>& want, double rtol,
                    double atol);
std::string compare(const std::vector<float>& got, const std::vector<float>& want, double rtol,
                    double atol);
// Per-element tolerance: |got[i] - want[i]| <= tol[i].
std::string compare_tol(const std::vector<float>& got, const std::vector<double>& want,
                        const std::vector<double>& tol);
// Empty when both hold the same bits.
std::string compare_exact(const std::vector<float>& got, const std::vector<float>& want);
std::string compare_exact(const std::vector<int32_t>& got, const std::vector<int32_t>& want);

std::vector<double> to_double(const std::vector<float>& v);
double dot(const std::vector<float>& a, const std::vector<float>& b);  // in double
// log-softmax of the row x[0..n), in double.
std::vector<double> log_softmax_row(const float* x, int64_t n);

// ---- finite differences ---------------------------------------------------------------------

// Central differences d loss / d x_i = (loss(x + h e_i) - loss(x - h e_i)) / (2h) for every
// element of x, the step taken in float (the divisor is the step that float really made).
std::vector<double> numeric_gradient(const std::function<double(const std::vector<float>&)>& loss,
                                     const std::vector<float>& x, float eps);

// Empty when an analytic gradient matches a numeric one: per element
// |a - n| <= atol + rtol * |n|, and overall ||a - n|| <= rtol * ||n|| + atol.
std::string compare_gradient(const std::vector<float>& analytic, const std::vector<double>& numeric,
                             double rtol, double atol);

// ---- backend helpers ------------------------------------------------------------------------

// Backend::download through a non-dependent call (inside TEMPLATE_TEST_CASE `be->download<T>`
// would need the `template` keyword).
std::vector<float> fetch(Backend& be, const Tensor& t);
std::vector<int32_t> fetch_i32(Backend& be, const Tensor& t);
// The raw 16-bit patterns of an f16 or bf16 tensor, and a tensor made from them.
std::vector<uint16_t> fetch_u16(Backend& be, const Tensor& t);
Tensor upload_u16(Backend& be, const std::vector<uint16_t>& bits, const Shape& shape, DType dtype);
// x of this shape rounded to dtype on the backend: the tensor, and its values widened back to
// f32 (what a reference multiplies).
std::pair<Tensor, std::vector<float>> rounded(Backend& be, const std::vector<float>& x,
                                              const Shape& shape, DType dtype);

// Runs `backward(dx)` twice: once into zeros, once into dx pre-filled with random nonzero values,
// checks that the second gives prefill + (the first) (every *_backward ADDS), and returns the
// gradient of the first run.
std::vector<float> check_accumulates(Backend& be, const Shape& shape,
                                     const std::function<void(const Tensor& dx)>& backward,
                                     uint64_t seed = 99);
// The same for an operator with an `accumulate` flag, `backward(dx, true)` as above; then
// `backward(dx, false)` into dx filled with NaN must give the first run's gradient exactly
// (overwritten, never read; -0 and +0 count as equal).
std::vector<float> check_accumulates(
    Backend& be, const Shape& shape,
    const std::function<void(const Tensor& dx, bool accumulate)>& backward, uint64_t seed = 99);

// Relative tolerance of an f32 GEMM against a double reference, as a fraction of
// sum_k |a_ik b_kj|: tight for full-precision GEMMs, looser for a GPU that uses TF32.
double gemm_tolerance(const Backend& be, int64_t k);

}  // namespace tx::test

// REQUIRE that a compare*() result is empty, printing the mismatches when it is not.
#define TX_REQUIRE_OK(expr)       \
  do {                            \
    std::string tx_msg_ = (expr); \
    INFO(tx_msg_);                \
    REQUIRE(tx_msg_.empty());     \
  } while (0)
#define TX_CHECK_OK(expr)         \
  do {                            \
    std::string tx_msg_ = (expr); \
    INFO(tx_msg_);                \
    CHECK(tx_msg_.empty());       \
  } while (0)
