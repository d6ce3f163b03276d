// Conformance: gemm (2-D and strided batched 3-D, all transposes, alpha/beta).
#include <cmath>
#include <tuple>

#include "support/backends.h"
#include "support/reference.h"

namespace {

using tx::Shape;
using tx::Tensor;
using namespace tx::test;

struct GemmCase {
  int64_t m, n, k;
};

// The reference: c = alpha * op(a) @ op(b) + beta * c0 in double, and per-element tolerance
// scale sum_k |alpha a_ik b_kj| + |beta c0_ij|. beta == 0 ignores c0 entirely.
struct GemmRef {
  std::vector<double> c;
  std::vector<double> tol;
};

GemmRef reference_gemm(const std::vector<float>& a, bool ta, const std::vector<float>& b, bool tb,
                       const std::vector<float>& c0, int64_t batch, int64_t m, int64_t n, int64_t k,
                       float alpha, float beta, double rel_tol) {
  GemmRef r;
  r.c.resize(batch * m * n);
  r.tol.resize(batch * m * n);
  for (int64_t p = 0; p < batch; ++p) {
    const float* A = a.data() + p * m * k;
    const float* B = b.data() + p * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0, mag = 0;
        for (int64_t q = 0; q < k; ++q) {
          double av = ta ? A[q * m + i] : A[i * k + q];  // a is [K, M] when transposed
          double bv = tb ? B[j * k + q] : B[q * n + j];  // b is [N, K] when transposed
          s += av * bv;
          mag += std::fabs(av * bv);
        }
        int64_t o = p * m * n + i * n + j;
        double c = double(alpha) * s;
        double scale = std::fabs(alpha) * mag;
        if (beta != 0.0f) {
          c += double(beta) * c0[o];
          scale += std::fabs(beta * c0[o]);
        }
        r.c[o] = c;
        r.tol[o] = rel_tol * scale + 1e-6;
      }
  }
  return r;
}

// Runs one GEMM on the backend and checks it against the reference.
void check_gemm(tx::Backend& be, int64_t batch, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                float alpha, float beta, uint64_t seed) {
  bool batched = batch > 0;
  int64_t nb = batched ? batch : 1;
  auto shape = [&](int64_t r, int64_t c) { return batched ? Shape{batch, r, c} : Shape{r, c}; };
  std::vector<float> a = random_vector(nb * m * k, seed);
  std::vector<float> b = random_vector(nb * k * n, seed + 1);
  // beta == 0: c holds large finite garbage that must not leak into the result.
  std::vector<float> c0 = beta == 0.0f ? random_vector(nb * m * n, seed + 2, -1e4f, 1e4f)
                                       : random_vector(nb * m * n, seed + 2);
  Tensor ta_t = be.upload(a, ta ? shape(k, m) : shape(m, k));
  Tensor tb_t = be.upload(b, tb ? shape(n, k) : shape(k, n));
  Tensor tc_t = be.upload(c0, shape(m, n));
  be.gemm(ta_t, ta, tb_t, tb, tc_t, alpha, beta);
  std::vector<float> got = fetch(be, tc_t);

  GemmRef ref = reference_gemm(a, ta, b, tb, c0, nb, m, n, k, alpha, beta, gemm_tolerance(be, k));
  INFO("gemm batch=" << batch << " M=" << m << " N=" << n << " K=" << k << " trans_a=" << ta
                     << " trans_b=" << tb << " alpha=" << alpha << " beta=" << beta);
  TX_REQUIRE_OK(compare_tol(got, ref.c, ref.tol));
}

const std::vector<GemmCase> kOddShapes = {
    {1, 1, 1},   {1, 7, 33},   {7, 1, 65},   {33, 65, 1}, {7, 33, 65}, {33, 65, 7},
    {65, 7, 33}, {65, 65, 65}, {16, 16, 16}, {17, 9, 31}, {1, 65, 65}, {65, 1, 7},
};

}  // namespace

TEMPLATE_TEST_CASE("gemm forward: 2-D, all four transpose combinations, odd shapes", "[gemm]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 100;
  for (const GemmCase& s : kOddShapes)
    for (int t = 0; t < 4; ++t) check_gemm(*be, 0, s.m, s.n, s.k, t & 1, t & 2, 1.0f, 0.0f, ++seed);
}

TEMPLATE_TEST_CASE("gemm forward: weight-gradient shapes (transposed a, m >= 1024 > n, long k)",
                   "[gemm]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // The CPU backend computes these as the transpose of b^T a (backends/cpu/gemm.cc).
  uint64_t seed = 150;
  for (auto [alpha, beta] :
       std::vector<std::pair<float, float>>{{1.0f, 0.0f}, {1.0f, 1.0f}, {-0.5f, 0.25f}})
    for (const GemmCase& s : {GemmCase{1024, 40, 1100}, GemmCase{1030, 257, 1024}})
      check_gemm(*be, 0, s.m, s.n, s.k, true, false, alpha, beta, ++seed);
}

TEMPLATE_TEST_CASE("gemm forward: weight-gradient shapes with rows of 4 KiB (transposed a)",
                   "[gemm]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // The CPU backend copies the 1,024-wide operand into rows 16 floats longer first
  // (backends/cpu/gemm.cc): a's side wide ([1024, 256], [2048, 40]) or b's ([256, 1024]).
  uint64_t seed = 170;
  for (auto [alpha, beta] :
       std::vector<std::pair<float, float>>{{1.0f, 0.0f}, {1.0f, 1.0f}, {-0.5f, 0.25f}})
    for (const GemmCase& s : {GemmCase{256, 1024, 300}, GemmCase{1024, 256, 301},
                              GemmCase{2048, 40, 67}, GemmCase{3, 1024, 5}, GemmCase{257, 1024, 9}})
      check_gemm(*be, 0, s.m, s.n, s.k, true, false, alpha, beta, ++seed);
}

TEMPLATE_TEST_CASE("gemm forward: alpha and beta (beta=1 accumulates, beta=0 ignores c)", "[gemm]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 200;
  const std::vector<std::pair<float, float>> ab = {{1.0f, 1.0f},    {0.5f, 0.0f},  {-2.0f, 1.0f},
                                                   {0.125f, 0.25f}, {1.0f, -1.0f}, {0.0f, 1.0f}};
  for (auto [alpha, beta] : ab)
    for (const GemmCase& s : {GemmCase{7, 33, 65}, GemmCase{33, 1, 7}, GemmCase{1, 1, 1}})
      for (int t = 0; t < 4; ++t)
        check_gemm(*be, 0, s.m, s.n, s.k, t & 1, t & 2, alpha, beta, ++seed);
}

TEMPLATE_TEST_CASE("gemm forward: beta=1 accumulates two products into c", "[gemm]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // Two GEMMs into the same c with beta = 1 equal the sum of both products.
  const int64_t m = 7, n = 33, k = 65;
  std::vector<float> a1 = random_vector(m * k, 1), b1 = random_vector(k * n, 2);
  std::vector<float> a2 = random_vector(m * k, 3), b2 = random_vector(k * n, 4);
  Tensor c = be->zeros({m, n});
  be->gemm(be->upload(a1, {m, k}), false, be->upload(b1, {k, n}), false, c, 1.0f, 1.0f);
  be->gemm(be->upload(a2, {m, k}), false, be->upload(b2, {k, n}), false, c, 1.0f, 1.0f);
  std::vector<float> got = fetch(*be, c);
  std::vector<double> want(m * n), tol(m * n);
  double rel = gemm_tolerance(*be, k);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (int64_t q = 0; q < k; ++q) {
        double p1 = double(a1[i * k + q]) * b1[q * n + j];
        double p2 = double(a2[i * k + q]) * b2[q * n + j];
        s += p1 + p2;
        mag += std::fabs(p1) + std::fabs(p2);
      }
      want[i * n + j] = s;
      tol[i * n + j] = 2 * rel * mag + 1e-6;
    }
  TX_REQUIRE_OK(compare_tol(got, want, tol));
}

TEMPLATE_TEST_CASE("gemm forward: 3-D strided batched, all transposes, alpha/beta", "[gemm]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 300;
  // (The CPU backend builds one oneDNN primitive per distinct call: kept to ~100 calls.)
  for (int64_t batch : {1, 5})
    for (const GemmCase& s :
         {GemmCase{1, 1, 1}, GemmCase{7, 33, 65}, GemmCase{33, 7, 1}, GemmCase{30, 64, 30}})
      for (int t = 0; t < 4; ++t) {
        check_gemm(*be, batch, s.m, s.n, s.k, t & 1, t & 2, 1.0f, 0.0f, ++seed);
        check_gemm(*be, batch, s.m, s.n, s.k, t & 1, t & 2, 0.5f, 1.0f, ++seed);
        if (batch > 1) check_gemm(*be, batch, s.m, s.n, s.k, t & 1, t & 2, -1.0f, 0.25f, ++seed);
      }
  // The attention shapes: [batch * heads, T, d_head] @ [.., d_head, T] and back.
  check_gemm(*be, 16, 30, 30, 64, false, true, 0.125f, 0.0f, ++seed);
  check_gemm(*be, 16, 30, 64, 30, false, false, 1.0f, 0.0f, ++seed);
}

TEMPLATE_TEST_CASE("gemm forward: 3-D with a few rows, a decoding step's attention", "[gemm]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // The CPU backend runs 3-D GEMMs of up to 8 rows without a transposed a as its own loops
  // (backends/cpu/few_rows_gemm.cc): four dot products at a time with a tail, and 32-column
  // chunks with a tail; 9 rows go back to oneDNN. Batches of 40 run in parallel.
  uint64_t seed = 350;
  for (int64_t m : {1, 3, 5, 8, 9})
    for (const GemmCase& s : {GemmCase{m, 17, 64}, GemmCase{m, 70, 19}, GemmCase{m, 32, 37}})
      for (bool tb : {true, false}) {
        check_gemm(*be, 40, s.m, s.n, s.k, false, tb, 0.125f, 0.0f, ++seed);
        check_gemm(*be, 3, s.m, s.n, s.k, false, tb, -0.5f, 1.0f, ++seed);
        check_gemm(*be, 2, s.m, s.n, s.k, false, tb, 1.0f, 0.25f, ++seed);
      }
}

TEMPLATE_TEST_CASE("gemm forward: larger shapes [M, N, K] = [129, 257, 96] and [64, 512, 300]",
                   "[gemm]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  check_gemm(*be, 0, 129, 257, 96, false, false, 1.0f, 0.0f, 401);
  check_gemm(*be, 0, 129, 257, 96, false, true, 1.0f, 1.0f, 402);
  check_gemm(*be, 0, 64, 512, 300, true, false, 1.0f, 0.0f, 403);
  check_gemm(*be, 0, 64, 512, 300, true, true, 2.0f, 0.5f, 404);
}

TEMPLATE_TEST_CASE("gemm forward: operands that are slices of larger tensors", "[gemm]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // Rows 2..9 of a [12, 33] buffer times a [33, 5] slice, into rows 1..8 of a [10, 5] buffer.
  const int64_t k = 33, n = 5;
  std::vector<float> abuf = random_vector(12 * k, 11);
  std::vector<float> bbuf = random_vector(40 * n, 12);
  std::vector<float> cbuf = random_vector(10 * n, 13);
  Tensor a = be->upload(abuf, {12, k}).slice(2, 9);  // [7, 33]
  Tensor bt = be->upload(bbuf, {40, n});
  Tensor b = bt.slice(3, 3 + k);  // [33, 5]
  Tensor cfull = be->upload(cbuf, {10, n});
  be->gemm(a, false, b, false, cfull.slice(1, 8), 1.0f, 0.0f);
  std::vector<float> got = fetch(*be, cfull);
  std::vector<double> want = to_double(cbuf);
  for (int64_t i = 0; i < 7; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t q = 0; q < k; ++q) s += double(abuf[(2 + i) * k + q]) * bbuf[(3 + q) * n + j];
      want[(1 + i) * n + j] = s;
    }
  // Rows 0 and 8, 9 of c are untouched.
  TX_REQUIRE_OK(compare(got, want, 1e-4, 1e-5));
}

TEMPLATE_TEST_CASE("gemm backward: finite differences of loss = sum(C * R)", "[gemm]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // C = A @ B; dA = R @ B^T and dB = A^T @ R, each a GEMM with beta = 1 (accumulating).
  const int64_t m = 3, n = 5, k = 4;
  std::vector<float> a = random_vector(m * k, 21), b = random_vector(k * n, 22);
  std::vector<float> r = random_vector(m * n, 23);
  auto forward = [&](const std::vector<float>& av, const std::vector<float>& bv) {
    Tensor c = be->zeros({m, n});
    be->gemm(be->upload(av, {m, k}), false, be->upload(bv, {k, n}), false, c);
    return dot(fetch(*be, c), r);
  };
  Tensor R = be->upload(r, {m, n});
  Tensor A = be->upload(a, {m, k}), B = be->upload(b, {k, n});
  std::vector<float> da = check_accumulates(
      *be, {m, k}, [&](const Tensor& dx) { be->gemm(R, false, B, true, dx, 1.0f, 1.0f); });
  std::vector<float> db = check_accumulates(
      *be, {k, n}, [&](const Tensor& dx) { be->gemm(A, true, R, false, dx, 1.0f, 1.0f); });
  auto fa = numeric_gradient([&](const std::vector<float>& x) -> double { return forward(x, b); },
                             a, 1e-2f);
  auto fb = numeric_gradient([&](const std::vector<float>& x) -> double { return forward(a, x); },
                             b, 1e-2f);
  double tol = gemm_tolerance(*be, k) * 100;
  TX_CHECK_OK(compare_gradient(da, fa, std::max(tol, 1e-3), 1e-3));
  TX_CHECK_OK(compare_gradient(db, fb, std::max(tol, 1e-3), 1e-3));
}

TEMPLATE_TEST_CASE("gemm forward: K = 0 gives c = beta * c (and zeros for beta = 0)", "[gemm]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    Tensor a = be->empty(ta ? Shape{0, 3} : Shape{3, 0});
    Tensor b = be->empty(tb ? Shape{2, 0} : Shape{0, 2});
    Tensor c = be->upload(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
    be->gemm(a, ta, b, tb, c, 1.0f, 0.5f);
    TX_CHECK_OK(compare_exact(fetch(*be, c), {0.5f, 1.0f, 1.5f, 2.0f, 2.5f, 3.0f}));
    be->gemm(a, ta, b, tb, c, 1.0f, 0.0f);
    TX_CHECK_OK(compare_exact(fetch(*be, c), {0, 0, 0, 0, 0, 0}));
  }
}

TEMPLATE_TEST_CASE("gemm profiling: the tally counts 2 M N K per batch entry, only while on",
                   "[gemm]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor a = be->upload(random_vector(3 * 5 * 7, 1), {3, 5, 7});
  Tensor b = be->upload(random_vector(3 * 7 * 4, 2), {3, 7, 4});
  Tensor c = be->zeros({3, 5, 4});
  be->gemm(a, false, b, false, c);
  CHECK(be->take_gemm_tally().calls == 0);  // off by default
  be->set_profiling(true);
  be->gemm(a, false, b, false, c);
  be->gemm(a.slice(0, 1).view({5, 7}), false, b.slice(0, 1).view({7, 4}), false,
           c.slice(0, 1).view({5, 4}));
  tx::Backend::GemmTally t = be->take_gemm_tally();
  be->set_profiling(false);
  CHECK(t.calls == 2);
  CHECK(t.flop == 2.0 * (3 + 1) * 5 * 4 * 7);
  CHECK(t.seconds >= 0.0);
  CHECK(be->take_gemm_tally().calls == 0);  // taken: reset
}

TEMPLATE_TEST_CASE(
    "gemm with tf32: within TF32's rounding of the exact product, not fp32's bits, "
    "the cpu refuses it",
    "[gemm]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(exact);
  tx::BackendOptions options;
  options.tf32 = true;
  if (std::string(TestType::name) == "cpu") {
    CHECK_THROWS_WITH(tx::create_backend("cpu", options), Catch::Contains("--tf32"));
    return;
  }
  std::unique_ptr<tx::Backend> be = tx::create_backend(TestType::name, options);
  const int64_t m = 256, n = 192, k = 320;
  const std::vector<float> a = random_vector(m * k, 91), b = random_vector(k * n, 92);
  const std::vector<float> c0(m * n, 0.0f);
  std::vector<float> got, fp32;
  for (tx::Backend* backend : {be.get(), exact.get()}) {
    Tensor c = backend->zeros({m, n});
    backend->gemm(backend->upload(a, {m, k}), false, backend->upload(b, {k, n}), false, c, 1.0f,
                  0.0f);
    (backend == be.get() ? got : fp32) = fetch(*backend, c);
  }
  // Each operand rounded to 10 mantissa bits: a product within about 2^-10 of its value.
  const GemmRef ref = reference_gemm(a, false, b, false, c0, 1, m, n, k, 1.0f, 0.0f, 1.2e-3);
  TX_CHECK_OK(compare_tol(got, ref.c, ref.tol));
  int64_t same = 0;
  for (size_t i = 0; i < got.size(); ++i) same += got[i] == fp32[i] ? 1 : 0;
  INFO(same << " of " << got.size() << " elements equal the fp32 GEMM's");
  CHECK(same < int64_t(got.size()) / 2);
}

TEMPLATE_TEST_CASE(
    "gemm with bf16 and f16 operands: the exact products of the rounded values "
    "summed in f32, 2-D and batched, every transpose",
    "[gemm]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 300;
  for (tx::DType dtype : {tx::DType::bf16, tx::DType::f16})
    for (const auto& [batch, m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
             {0, 1, 1, 1}, {0, 7, 33, 65}, {0, 64, 48, 130}, {3, 5, 17, 9}, {2, 33, 8, 64}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          const bool batched = batch > 0;
          const int64_t nb = batched ? batch : 1;
          auto shape = [&](int64_t r, int64_t c) {
            return batched ? Shape{batch, r, c} : Shape{r, c};
          };
          // The operands as the reduced type holds them: the reference multiplies those.
          std::vector<float> a = random_vector(nb * m * k, ++seed, -2.0f, 2.0f);
          std::vector<float> b = random_vector(nb * k * n, ++seed, -2.0f, 2.0f);
          Tensor a_low, b_low;
          std::tie(a_low, a) = rounded(*be, a, ta ? shape(k, m) : shape(m, k), dtype);
          std::tie(b_low, b) = rounded(*be, b, tb ? shape(n, k) : shape(k, n), dtype);
          const std::vector<float> c0 = random_vector(nb * m * n, ++seed);
          Tensor c = be->upload(c0, shape(m, n));
          be->gemm(a_low, ta, b_low, tb, c, 0.5f, 1.0f);
          const GemmRef ref =
              reference_gemm(a, ta, b, tb, c0, nb, m, n, k, 0.5f, 1.0f, gemm_tolerance(*be, k));
          INFO(tx::name_of(dtype) << " batch=" << batch << " M=" << m << " N=" << n << " K=" << k
                                  << " trans_a=" << ta << " trans_b=" << tb);
          TX_REQUIRE_OK(compare_tol(fetch(*be, c), ref.c, ref.tol));
        }
  // Mixed operands are refused, naming both.
  const Tensor a = be->zeros({2, 3}, tx::DType::bf16), b = be->zeros({3, 4}, tx::DType::f16);
  REQUIRE_THROWS_WITH(be->gemm(a, false, b, false, be->zeros({2, 4})),
                      Catch::Contains("gemm") && Catch::Contains("bf16") &&
                          Catch::Contains("f16") && Catch::Contains("cast"));
}
