// Conformance: pack_weight and gemm_packed (a weight packed once for inference) against loops.
#include <algorithm>
#include <cmath>
#include <utility>

#include "support/backends.h"
#include "support/reference.h"

namespace {

using tx::Shape;
using tx::Tensor;
using namespace tx::test;
using Catch::Contains;

// c = a w^T in double for a [m, k], w [n, k], with per-element tolerances.
void reference(const std::vector<float>& a, const std::vector<float>& w, int64_t m, int64_t n,
               int64_t k, double rel, std::vector<double>& c, std::vector<double>& tol) {
  c.assign(static_cast<size_t>(m * n), 0.0);
  tol.assign(c.size(), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (int64_t q = 0; q < k; ++q) {
        const double p = double(a[i * k + q]) * w[j * k + q];
        s += p;
        mag += std::fabs(p);
      }
      c[i * n + j] = s;
      tol[i * n + j] = rel * mag + 1e-6;
    }
}

// Packs w [n, k] once and multiplies it with a of each row count in `rows` (c starts as
// garbage that must not leak into the result); rows > 8 also go in as [2, rows / 2, k].
void check_packed(tx::Backend& be, int64_t n, int64_t k, const std::vector<int64_t>& rows,
                  uint64_t seed) {
  const std::vector<float> w = random_vector(static_cast<size_t>(n * k), seed);
  const tx::Backend::PackedWeight packed = be.pack_weight(be.upload(w, {n, k}));
  REQUIRE(packed.defined());
  for (int64_t m : rows) {
    const std::vector<float> a = random_vector(static_cast<size_t>(m * k), seed + 1 + m);
    std::vector<double> want, tol;
    reference(a, w, m, n, k, gemm_tolerance(be, k), want, tol);
    const bool three_d = m > 8 && m % 2 == 0;
    const Shape a_shape = three_d ? Shape{2, m / 2, k} : Shape{m, k};
    const Shape c_shape = three_d ? Shape{2, m / 2, n} : Shape{m, n};
    Tensor c = be.upload(random_vector(static_cast<size_t>(m * n), seed + 2, -1e4f, 1e4f), c_shape);
    be.gemm_packed(be.upload(a, a_shape), packed, c);
    INFO("gemm_packed M=" << m << " N=" << n << " K=" << k << " a " << a_shape.str());
    TX_REQUIRE_OK(compare_tol(fetch(be, c), want, tol));
  }
}

// The CPU backend with this many OpenMP threads.
std::unique_ptr<tx::Backend> cpu_backend(int threads) {
  tx::register_builtin_backends();
  tx::BackendOptions options;
  options.threads = threads;
  return tx::create_backend("cpu", options);
}

// c = a w^T with every output one f32 FMA chain over k in order: what the fixed-order kernel
// must give bit for bit.
std::vector<float> fma_chain(const std::vector<float>& a, const std::vector<float>& w, int64_t rows,
                             int64_t n, int64_t k) {
  std::vector<float> c(static_cast<size_t>(rows * n));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float s = 0.0f;
      for (int64_t q = 0; q < k; ++q) s = std::fma(a[i * k + q], w[j * k + q], s);
      c[i * n + j] = s;
    }
  return c;
}

}  // namespace

TEMPLATE_TEST_CASE(
    "gemm_packed: bf16 and f16 weights times a of their dtype, the exact products of the rounded "
    "values summed in f32, for any row count from one packing",
    "[gemm][packed]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 700;
  for (tx::DType dtype : {tx::DType::bf16, tx::DType::f16})
    // Odd K (the CPU's bf16 panels hold pairs of k: left to the unpacked path), a partial last
    // panel, K past one pass of the CPU kernel (256 pairs), the model's shapes.
    for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {7, 33}, {65, 8}, {33, 66}, {300, 130}, {1000, 256}, {256, 1024}, {77, 600}}) {
      const auto [w_low, w] =
          rounded(*be, random_vector(static_cast<size_t>(n * k), ++seed), {n, k}, dtype);
      const tx::Backend::PackedWeight packed = be->pack_weight(w_low);
      REQUIRE(packed.defined());
      for (int64_t m : {1, 5, 37, 160}) {
        const auto [a_low, a] =
            rounded(*be, random_vector(static_cast<size_t>(m * k), ++seed), {m, k}, dtype);
        std::vector<double> want, tol;
        reference(a, w, m, n, k, gemm_tolerance(*be, k), want, tol);
        Tensor c =
            be->upload(random_vector(static_cast<size_t>(m * n), ++seed, -1e4f, 1e4f), {m, n});
        be->gemm_packed(a_low, packed, c);
        INFO(tx::name_of(dtype) << " gemm_packed M=" << m << " N=" << n << " K=" << k);
        TX_REQUIRE_OK(compare_tol(fetch(*be, c), want, tol));
      }
    }
  // a must come in the weight's dtype: the caller rounds it.
  const tx::Backend::PackedWeight w = be->pack_weight(be->zeros({6, 4}, tx::DType::bf16));
  CHECK_THROWS_WITH(be->gemm_packed(be->zeros({3, 4}), w, be->zeros({3, 6})),
                    Contains("must have one dtype"));
}

TEMPLATE_TEST_CASE("gemm_packed: a w^T for any row count from one packing, odd and model shapes",
                   "[gemm][packed]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 400;
  for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {7, 33}, {65, 7}, {33, 65}, {300, 129}, {1000, 256}, {256, 1024}, {768, 256}})
    check_packed(*be, n, k, {1, 5, 37, 160, 300}, seed += 10);
}

TEMPLATE_TEST_CASE("gemm_packed: the output layer's shape at beam-search row counts",
                   "[gemm][packed]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  check_packed(*be, 8000, 256, {160, 3, 480}, 500);
}

TEMPLATE_TEST_CASE(
    "gemm_packed with a bias, an activation or both: bit for bit gemm_packed then add_bias, relu, "
    "swish, add_bias_relu or add_bias_swish, for one row, partial panels, passes over k and an "
    "empty k",
    "[gemm][packed]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  using tx::Activation;
  uint64_t seed = 900;
  for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{
           {1000, 256}, {77, 600}, {512, 512}, {6, 5}, {130, 0}}) {
    const tx::Backend::PackedWeight packed =
        be->pack_weight(be->upload(random_vector(static_cast<size_t>(n * k), ++seed), {n, k}));
    const Tensor bias = be->upload(random_vector(static_cast<size_t>(n), ++seed, -3, 3), {n});
    for (Activation act : {Activation::none, Activation::relu, Activation::swish})
      for (bool with_bias : {false, true}) {
        if (act == Activation::none && !with_bias) continue;  // gemm_packed itself
        for (int64_t m : {1, 2, 5, 6, 7, 13, 160, 193}) {
          const Tensor a = be->upload(random_vector(static_cast<size_t>(m * k), ++seed), {m, k});
          Tensor want = be->empty({m, n}), got = be->empty({m, n});
          be->gemm_packed(a, packed, want);
          if (act == Activation::none) be->add_bias(want, bias, want);
          if (act == Activation::relu)
            with_bias ? be->add_bias_relu(want, bias, want) : be->relu(want, want);
          if (act == Activation::swish)
            with_bias ? be->add_bias_swish(want, bias, want) : be->swish(want, want);
          be->gemm_packed(a, packed, got, with_bias ? bias : Tensor(), act);
          const char* names[] = {"none", "relu", "swish"};
          INFO(names[static_cast<int>(act)] << (with_bias ? " with bias" : "") << " M=" << m
                                            << " N=" << n << " K=" << k);
          CHECK(fetch(*be, got) == fetch(*be, want));
        }
      }
  }
  const tx::Backend::PackedWeight w = be->pack_weight(be->zeros({6, 4}));
  CHECK_THROWS_WITH(be->gemm_packed(be->zeros({3, 4}), w, be->zeros({3, 6}), be->zeros({5})),
                    Contains("gemm_packed: bias has shape [5], expected [6]"));
}

TEMPLATE_TEST_CASE("gemm_packed: mismatched shapes and unpacked weights are errors naming them",
                   "[gemm][packed]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const tx::Backend::PackedWeight w = be->pack_weight(be->zeros({6, 4}));
  CHECK_THROWS_WITH(be->gemm_packed(be->zeros({3, 5}), w, be->zeros({3, 6})),
                    Contains("gemm_packed: a [3, 5] must have K = 4"));
  CHECK_THROWS_WITH(be->gemm_packed(be->zeros({3, 4}), w, be->zeros({3, 5})),
                    Contains("gemm_packed: c [3, 5] must be [3, 6]"));
  CHECK_THROWS_WITH(
      be->gemm_packed(be->zeros({3, 4}), tx::Backend::PackedWeight{}, be->zeros({3, 6})),
      Contains("not packed"));
  CHECK_THROWS_WITH(be->pack_weight(be->zeros({2, 3, 4})), Contains("must be 2-D"));
  // An empty product leaves nothing to do; K = 0 is a zero sum.
  be->gemm_packed(be->zeros({0, 4}), w, be->zeros({0, 6}));
  Tensor c = be->upload(std::vector<float>(6, 5.0f), {1, 6});
  be->gemm_packed(be->zeros({1, 0}), be->pack_weight(be->zeros({6, 0})), c);
  CHECK(fetch(*be, c) == std::vector<float>(6, 0.0f));
}

TEST_CASE(
    "gemm_packed on the CPU: every output is one FMA chain over k in order, the same bits for a "
    "row whatever the row count, its position and the thread count",
    "[gemm][packed]") {
  std::unique_ptr<tx::Backend> be = cpu_backend(2);
  // k > 256 crosses the kernel's passes over k; n = 1000 leaves a partial panel. n = 32 is two
  // panels and k = 2048 eight passes: the threads take turns on each panel's passes, which
  // must still run in order.
  for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{1000, 256}, {77, 600}, {32, 2048}}) {
    const int64_t rows = 200;
    const std::vector<float> w = random_vector(n * k, 600 + n), a = random_vector(rows * k, 601);
    const std::vector<float> chain = fma_chain(a, w, rows, n, k);
    const tx::Backend::PackedWeight packed = be->pack_weight(be->upload(w, {n, k}));
    CHECK(packed.packed.defined());
    // Row counts of every remainder of the kernel's row blocks, the thread split and the pass
    // of 192 rows; each run starts at another row of a.
    for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 11, 13, 37, 160, 193, 200}) {
      const int64_t first = (m * 7) % (rows - m + 1);
      Tensor c = be->empty({m, n});
      be->gemm_packed(
          be->upload(std::vector<float>(a.begin() + first * k, a.begin() + (first + m) * k),
                     {m, k}),
          packed, c);
      const std::vector<float> got = fetch(*be, c);
      INFO("n " << n << " k " << k << " rows " << first << ".." << first + m);
      CHECK(std::equal(got.begin(), got.end(), chain.begin() + first * n));
    }
    // More threads than cores: a thread is often stopped inside a pass, and another continues
    // the panel's next pass only once it is done.
    std::unique_ptr<tx::Backend> many = cpu_backend(5);
    for (int round = 0; round < 8; ++round) {
      Tensor c = many->empty({rows, n});
      many->gemm_packed(many->upload(a, {rows, k}), packed, c);
      INFO("n " << n << " k " << k << ", 5 threads, round " << round);
      CHECK(fetch(*many, c) == chain);
    }
    // A backend of one thread reads the same layout to the same bits.
    std::unique_ptr<tx::Backend> single = cpu_backend(1);
    Tensor c1 = single->empty({rows, n});
    single->gemm_packed(single->upload(a, {rows, k}), packed, c1);
    CHECK(fetch(*single, c1) == chain);
  }
  be = tx::create_backend("cpu");  // back to the default count the other cases run with
}

namespace {

// Every run of `a`'s rows (each remainder of the kernel's row blocks, the thread split and the
// pass of 192 rows, each starting at another row), and all of them on a one-thread backend,
// give `want`'s rows bit for bit.
void check_rows_anywhere(tx::Backend& be, tx::Backend& single, const Tensor& a,
                         const tx::Backend::PackedWeight& packed, int64_t n,
                         const std::vector<float>& want) {
  const int64_t rows = a.dim(0);
  for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 11, 13, 37, 160, 193, 200}) {
    const int64_t first = (m * 7) % (rows - m + 1);
    Tensor c = be.empty({m, n});
    be.gemm_packed(a.slice(first, first + m), packed, c);
    const std::vector<float> got = fetch(be, c);
    INFO("n " << n << " k " << a.dim(1) << " rows " << first << ".." << first + m);
    CHECK(std::equal(got.begin(), got.end(), want.begin() + first * n));
  }
  Tensor c1 = single.empty({rows, n});
  single.gemm_packed(a, packed, c1);
  CHECK(fetch(single, c1) == want);
}

}  // namespace

// No CPU GEMM takes f16, and oneDNN's sgemm on the widened values rounds by row count: the
// weight is widened into the f32 panels instead, so --precision fp16's translations do not
// depend on the batch either.
TEST_CASE(
    "gemm_packed on the CPU, f16: the f32 FMA chain over the f16 values, the same bits for a row "
    "whatever the row count, its position and the thread count",
    "[gemm][packed]") {
  std::unique_ptr<tx::Backend> be = cpu_backend(2);
  std::unique_ptr<tx::Backend> single = cpu_backend(1);
  for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{1000, 256}, {77, 600}}) {
    const int64_t rows = 200;
    const auto [w_low, w] =
        rounded(*be, random_vector(static_cast<size_t>(n * k), 900 + n), {n, k}, tx::DType::f16);
    const auto [a_low, a] =
        rounded(*be, random_vector(static_cast<size_t>(rows * k), 901), {rows, k}, tx::DType::f16);
    const std::vector<float> chain = fma_chain(a, w, rows, n, k);
    const tx::Backend::PackedWeight packed = be->pack_weight(w_low);
    REQUIRE(packed.packed.defined());
    check_rows_anywhere(*be, *single, a_low, packed, n, chain);
  }
}

TEST_CASE(
    "gemm_packed on the CPU, bf16: where the CPU has AVX512-BF16, the same bits for a row whatever "
    "the row count, its position and the thread count",
    "[gemm][packed]") {
  std::unique_ptr<tx::Backend> be = cpu_backend(2);
  std::unique_ptr<tx::Backend> single = cpu_backend(1);
  // k = 600 is 300 pairs: past one pass of 256; n = 1000 leaves a partial panel.
  for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{1000, 256}, {77, 600}}) {
    const int64_t rows = 200;
    const auto [w_low, w] =
        rounded(*be, random_vector(static_cast<size_t>(n * k), 800 + n), {n, k}, tx::DType::bf16);
    const auto [a_low, a] =
        rounded(*be, random_vector(static_cast<size_t>(rows * k), 801), {rows, k}, tx::DType::bf16);
    const tx::Backend::PackedWeight packed = be->pack_weight(w_low);
    if (!packed.packed.defined()) {
      WARN("this build has no AVX512-BF16 kernel: bf16 weights take oneDNN's GEMM unpacked");
      return;
    }
    Tensor all = be->empty({rows, n});
    be->gemm_packed(a_low, packed, all);
    const std::vector<float> full = fetch(*be, all);
    std::vector<double> want, tol;
    reference(a, w, rows, n, k, gemm_tolerance(*be, k), want, tol);
    TX_REQUIRE_OK(compare_tol(full, want, tol));
    check_rows_anywhere(*be, *single, a_low, packed, n, full);
  }
}

TEST_CASE("gemm_i8 on the CPU: oneDNN's packed layout is used, another thread count still works",
          "[gemm][packed]") {
  std::unique_ptr<tx::Backend> be = cpu_backend(2);
  // An i8 weight packs too (gemm_i8), and reads as it is under another thread count.
  const int64_t n8 = 300, k8 = 256, m8 = 5;
  std::vector<int8_t> w8(static_cast<size_t>(n8 * k8)), a8(static_cast<size_t>(m8 * k8));
  for (size_t i = 0; i < w8.size(); ++i) w8[i] = static_cast<int8_t>(int(i * 7 % 127) - 63);
  for (size_t i = 0; i < a8.size(); ++i) a8[i] = static_cast<int8_t>(int(i * 13 % 255) - 127);
  Tensor w8t = be->empty({n8, k8}, tx::DType::i8), a8t = be->empty({m8, k8}, tx::DType::i8);
  be->copy_from_host(w8.data(), w8t);
  be->copy_from_host(a8.data(), a8t);
  const tx::Backend::PackedWeight packed8 = be->pack_weight(w8t);
  CHECK(packed8.packed.defined());
  const Tensor ones_m = be->upload(std::vector<float>(m8, 1.0f), {m8});
  const Tensor ones_n = be->upload(std::vector<float>(n8, 1.0f), {n8});
  std::vector<float> want8(static_cast<size_t>(m8 * n8));
  for (int64_t i = 0; i < m8; ++i)
    for (int64_t j = 0; j < n8; ++j) {
      int64_t sum = 0;
      for (int64_t q = 0; q < k8; ++q) sum += int64_t(a8[i * k8 + q]) * w8[j * k8 + q];
      want8[i * n8 + j] = static_cast<float>(sum);  // |sum| < 2^24: exact in f32
    }
  Tensor c8 = be->empty({m8, n8});
  be->gemm_i8(a8t, ones_m, packed8, ones_n, Tensor(), c8);
  CHECK(fetch(*be, c8) == want8);
  {
    std::unique_ptr<tx::Backend> single = cpu_backend(1);
    Tensor c1 = be->empty({m8, n8});
    be->gemm_i8(a8t, ones_m, packed8, ones_n, Tensor(), c1);
    CHECK(fetch(*be, c1) == want8);
  }
  be = tx::create_backend("cpu");  // back to the default count the other cases run with
}
