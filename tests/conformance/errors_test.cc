// Conformance: invalid arguments raise tx::Error whose message names the operator and the
// offending shapes or dtypes, before any work is done.
#include "support/backends.h"
#include "support/reference.h"

namespace {

using Catch::Contains;
using tx::DType;
using tx::Shape;
using tx::Tensor;
using namespace tx::test;

}  // namespace

// The expression throws tx::Error and its message matches.
#define TX_REQUIRE_ERROR(expr, matcher) \
  do {                                  \
    REQUIRE_THROWS_AS(expr, tx::Error); \
    REQUIRE_THROWS_WITH(expr, matcher); \
  } while (0)

TEMPLATE_TEST_CASE("errors: gemm names the operator and the shapes", "[errors]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor a = be->zeros({4, 5}), b = be->zeros({6, 3}), c = be->zeros({4, 3});
  TX_REQUIRE_ERROR(be->gemm(a, false, b, false, c),
                   Contains("gemm") && Contains("[4, 5]") && Contains("[6, 3]"));
  // Transposes change which dimension is K: a^T [5, 4] @ b [6, 3] is still wrong.
  TX_REQUIRE_ERROR(be->gemm(a, true, b, false, c),
                   Contains("gemm") && Contains("[4, 5]") && Contains("[6, 3]"));
  Tensor b2 = be->zeros({5, 3}), c2 = be->zeros({4, 4});
  TX_REQUIRE_ERROR(be->gemm(a, false, b2, false, c2),
                   Contains("gemm") && Contains("[4, 4]") && Contains("[4, 5]"));
  Tensor a3 = be->zeros({2, 4, 5}), b3 = be->zeros({3, 5, 3}), c3 = be->zeros({2, 4, 3});
  TX_REQUIRE_ERROR(be->gemm(a3, false, b3, false, c3),
                   Contains("gemm") && Contains("[2, 4, 5]") && Contains("[3, 5, 3]"));
  TX_REQUIRE_ERROR(be->gemm(a3, false, b2, false, c),
                   Contains("gemm") && Contains("[2, 4, 5]") && Contains("[5, 3]"));
  Tensor ai = be->zeros({4, 5}, DType::i32);
  TX_REQUIRE_ERROR(be->gemm(ai, false, b2, false, c),
                   Contains("gemm") && Contains("i32") && Contains("f32"));
}

TEMPLATE_TEST_CASE("errors: elementwise operators name the operator and both shapes", "[errors]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor a = be->zeros({2, 3}), b = be->zeros({3, 2}), y = be->zeros({2, 3});
  TX_REQUIRE_ERROR(be->add(a, b, y), Contains("add") && Contains("[2, 3]") && Contains("[3, 2]"));
  TX_REQUIRE_ERROR(be->add(a, a, b), Contains("add") && Contains("[2, 3]") && Contains("[3, 2]"));
  TX_REQUIRE_ERROR(be->axpy(1.0f, a, b),
                   Contains("axpy") && Contains("[2, 3]") && Contains("[3, 2]"));
  TX_REQUIRE_ERROR(be->scale(a, 2.0f, b),
                   Contains("scale") && Contains("[2, 3]") && Contains("[3, 2]"));
  TX_REQUIRE_ERROR(be->relu(a, b), Contains("relu") && Contains("[2, 3]") && Contains("[3, 2]"));
  TX_REQUIRE_ERROR(be->relu_backward(a, a, b),
                   Contains("relu_backward") && Contains("[2, 3]") && Contains("[3, 2]"));
  TX_REQUIRE_ERROR(be->add_bias(a, be->zeros({2}), y),
                   Contains("add_bias") && Contains("[2]") && Contains("[2, 3]"));
  TX_REQUIRE_ERROR(be->dropout(a, 0.1f, 1, 0, b),
                   Contains("dropout") && Contains("[2, 3]") && Contains("[3, 2]"));
  TX_REQUIRE_ERROR(be->dropout(a, 1.0f, 1, 0, y), Contains("dropout") && Contains("1"));
  TX_REQUIRE_ERROR(be->dropout_backward(a, 0.1f, 1, 0, b),
                   Contains("dropout_backward") && Contains("[2, 3]") && Contains("[3, 2]"));
  TX_REQUIRE_ERROR(be->add_positions(a, 0, y), Contains("add_positions") && Contains("[2, 3]"));
  TX_REQUIRE_ERROR(be->cast(a, be->zeros({3, 2}, DType::f16)),
                   Contains("cast") && Contains("[2, 3]") && Contains("[3, 2]"));
  TX_REQUIRE_ERROR(be->copy(a, b), Contains("copy") && Contains("[2, 3]") && Contains("[3, 2]"));
  TX_REQUIRE_ERROR(be->copy(a, be->zeros({2, 3}, DType::i32)),
                   Contains("copy") && Contains("f32") && Contains("i32"));
}

TEMPLATE_TEST_CASE("errors: i32 where f32 is expected names the dtypes", "[errors]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor f = be->zeros({2, 3}), i = be->zeros({2, 3}, DType::i32);
  TX_REQUIRE_ERROR(be->add(i, f, f), Contains("add") && Contains("i32") && Contains("f32"));
  TX_REQUIRE_ERROR(be->relu(f, i), Contains("relu") && Contains("i32") && Contains("f32"));
  TX_REQUIRE_ERROR(be->softmax(i, 1.0f, Tensor(), false, f),
                   Contains("softmax") && Contains("i32") && Contains("f32"));
  TX_REQUIRE_ERROR(
      be->layer_norm(i, be->zeros({3}), be->zeros({3}), 1e-5f, f, be->zeros({2}), be->zeros({2})),
      Contains("layer_norm") && Contains("i32") && Contains("f32"));
  TX_REQUIRE_ERROR(be->sum(i, be->zeros({1})), Contains("sum") && Contains("i32"));
  Tensor f16 = be->zeros({2, 3}, DType::f16);
  TX_REQUIRE_ERROR(be->add(f16, f, f), Contains("add") && Contains("f16") && Contains("f32"));
}

TEMPLATE_TEST_CASE("errors: undefined tensors are named", "[errors]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor a = be->zeros({2, 3});
  TX_REQUIRE_ERROR(be->add(a, Tensor(), a), Contains("add") && Contains("undefined"));
  TX_REQUIRE_ERROR(be->fill(Tensor(), 1.0f), Contains("fill") && Contains("undefined"));
}

TEMPLATE_TEST_CASE("errors: softmax names the operator and the shapes", "[errors]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor x = be->zeros({2, 3, 4}), y = be->zeros({2, 3, 5});
  TX_REQUIRE_ERROR(be->softmax(x, 1.0f, Tensor(), false, y),
                   Contains("softmax") && Contains("[2, 3, 4]") && Contains("[2, 3, 5]"));
  Tensor y2 = be->zeros({2, 3, 4});
  Tensor kl3 = be->upload(std::vector<int32_t>{1, 2, 3}, {3});
  TX_REQUIRE_ERROR(be->softmax(x, 1.0f, kl3, false, y2),
                   Contains("softmax") && Contains("[3]") && Contains("[2, 3, 4]"));
  Tensor klf = be->zeros({2});
  TX_REQUIRE_ERROR(be->softmax(x, 1.0f, klf, false, y2),
                   Contains("softmax") && Contains("key_lengths") && Contains("i32"));
  Tensor x1 = be->zeros({4}), y1 = be->zeros({4});
  TX_REQUIRE_ERROR(be->softmax(x1, 1.0f, Tensor(), false, y1),
                   Contains("softmax") && Contains("[4]"));
  TX_REQUIRE_ERROR(be->softmax_backward(x, y2, 1.0f, y),
                   Contains("softmax_backward") && Contains("[2, 3, 4]") && Contains("[2, 3, 5]"));
  TX_REQUIRE_ERROR(be->log_softmax(x, y),
                   Contains("log_softmax") && Contains("[2, 3, 4]") && Contains("[2, 3, 5]"));
  TX_REQUIRE_ERROR(be->log_softmax_backward(x, x, y), Contains("log_softmax_backward") &&
                                                          Contains("[2, 3, 4]") &&
                                                          Contains("[2, 3, 5]"));
}

TEMPLATE_TEST_CASE("errors: split_heads and merge_heads name the shapes", "[errors]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor x = be->zeros({2, 5, 10});
  TX_REQUIRE_ERROR(be->split_heads(x, 3, be->zeros({2, 3, 5, 3})),
                   Contains("split_heads") && Contains("10") && Contains("heads=3"));
  TX_REQUIRE_ERROR(be->split_heads(x, 2, be->zeros({2, 5, 2, 5})),
                   Contains("split_heads") && Contains("[2, 5, 2, 5]") && Contains("[2, 2, 5, 5]"));
  TX_REQUIRE_ERROR(be->merge_heads(be->zeros({2, 2, 5, 5}), be->zeros({2, 5, 11})),
                   Contains("merge_heads") && Contains("[2, 5, 11]") && Contains("[2, 5, 10]"));
}

TEMPLATE_TEST_CASE("errors: layer_norm names the operator and the shapes", "[errors]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor x = be->zeros({3, 4}), y = be->zeros({3, 4}), g = be->zeros({4}), b = be->zeros({4});
  Tensor m = be->zeros({3}), r = be->zeros({3});
  TX_REQUIRE_ERROR(
      be->layer_norm(x, be->zeros({5}), b, 1e-5f, y, m, r),
      Contains("layer_norm") && Contains("gamma") && Contains("[5]") && Contains("[4]"));
  TX_REQUIRE_ERROR(
      be->layer_norm(x, g, be->zeros({5}), 1e-5f, y, m, r),
      Contains("layer_norm") && Contains("beta") && Contains("[5]") && Contains("[4]"));
  TX_REQUIRE_ERROR(be->layer_norm(x, g, b, 1e-5f, be->zeros({4, 3}), m, r),
                   Contains("layer_norm") && Contains("[3, 4]") && Contains("[4, 3]"));
  TX_REQUIRE_ERROR(
      be->layer_norm(x, g, b, 1e-5f, y, be->zeros({4}), r),
      Contains("layer_norm") && Contains("mean") && Contains("[4]") && Contains("[3]"));
  TX_REQUIRE_ERROR(be->layer_norm(x, g, b, 0.0f, y, m, r),
                   Contains("layer_norm") && Contains("eps"));
  TX_REQUIRE_ERROR(be->layer_norm_backward(be->zeros({3, 5}), x, g, m, r, be->zeros({3, 4}),
                                           be->zeros({4}), be->zeros({4})),
                   Contains("layer_norm_backward") && Contains("[3, 4]") && Contains("[3, 5]"));
  TX_REQUIRE_ERROR(
      be->layer_norm_backward(x, x, g, m, r, be->zeros({3, 4}), be->zeros({5}), be->zeros({4})),
      Contains("layer_norm_backward") && Contains("[4]") && Contains("[5]"));
}

TEMPLATE_TEST_CASE("errors: cross_entropy names the operator and the shapes", "[errors]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor logits = be->zeros({4, 10}), losses = be->zeros({4});
  Tensor t3 = be->upload(std::vector<int32_t>{1, 2, 3}, {3});
  Tensor t4 = be->upload(std::vector<int32_t>{1, 2, 3, 4}, {4});
  TX_REQUIRE_ERROR(be->cross_entropy(logits, t3, 0.1f, -1, losses, Tensor()),
                   Contains("cross_entropy") && Contains("[3]") && Contains("[4, 10]"));
  TX_REQUIRE_ERROR(be->cross_entropy(logits, t4, 0.1f, -1, be->zeros({5}), Tensor()),
                   Contains("cross_entropy") && Contains("[5]") && Contains("[4, 10]"));
  TX_REQUIRE_ERROR(
      be->cross_entropy(logits, t4, 0.1f, -1, losses, be->zeros({3})),
      Contains("cross_entropy") && Contains("nll") && Contains("[3]") && Contains("[4]"));
  TX_REQUIRE_ERROR(be->cross_entropy(logits, be->zeros({4}), 0.1f, -1, losses, Tensor()),
                   Contains("cross_entropy") && Contains("targets") && Contains("i32"));
  TX_REQUIRE_ERROR(be->cross_entropy(logits, t4, 1.0f, -1, losses, Tensor()),
                   Contains("cross_entropy") && Contains("smoothing"));
  TX_REQUIRE_ERROR(be->cross_entropy_backward(logits, t4, 0.0f, -1, losses, be->zeros({4, 9})),
                   Contains("cross_entropy_backward") && Contains("[4, 10]") && Contains("[4, 9]"));
  // Rows over no classes: no distribution, and the losses would be left unwritten.
  TX_REQUIRE_ERROR(be->cross_entropy(be->zeros({4, 0}), t4, 0.0f, -1, losses, Tensor()),
                   Contains("cross_entropy") && Contains("[4, 0]") && Contains("no classes"));
}

TEMPLATE_TEST_CASE("errors: gather_rows, scatter_add_rows and top_k name the shapes", "[errors]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor src = be->zeros({5, 4}), dst = be->zeros({3, 4});
  Tensor idx2 = be->upload(std::vector<int32_t>{0, 1}, {2});
  Tensor idx3 = be->upload(std::vector<int32_t>{0, 1, 2}, {3});
  TX_REQUIRE_ERROR(be->gather_rows(src, idx2, dst),
                   Contains("gather_rows") && Contains("[2]") && Contains("[3, 4]"));
  TX_REQUIRE_ERROR(be->gather_rows(src, idx3, be->zeros({3, 5})),
                   Contains("gather_rows") && Contains("[5, 4]") && Contains("[3, 5]"));
  TX_REQUIRE_ERROR(be->gather_rows(src, be->zeros({3}), dst),
                   Contains("gather_rows") && Contains("index") && Contains("i32"));
  TX_REQUIRE_ERROR(be->scatter_add_rows(be->zeros({3, 5}), idx3, src),
                   Contains("scatter_add_rows") && Contains("[3, 5]") && Contains("[5, 4]"));
  // A table of no rows still has rows of 4 (once "row sizes differ"): -1 gives a zero row.
  Tensor zero_row = be->upload(std::vector<float>{1, 2, 3, 4}, {1, 4});
  be->gather_rows(be->zeros({0, 4}), be->upload(std::vector<int32_t>{-1}, {1}), zero_row);
  CHECK(be->download<float>(zero_row) == std::vector<float>{0, 0, 0, 0});
  Tensor x = be->zeros({2, 4});
  TX_REQUIRE_ERROR(be->top_k(x, 5, be->zeros({2, 5}), be->zeros({2, 5}, DType::i32)),
                   Contains("top_k") && Contains("k=5") && Contains("[2, 4]"));
  TX_REQUIRE_ERROR(be->top_k(x, 2, be->zeros({2, 3}), be->zeros({2, 2}, DType::i32)),
                   Contains("top_k") && Contains("[2, 3]") && Contains("[2, 2]"));
  TX_REQUIRE_ERROR(be->top_k(x, 2, be->zeros({2, 2}), be->zeros({2, 2})),
                   Contains("top_k") && Contains("indices") && Contains("i32"));
}

TEMPLATE_TEST_CASE("errors: reductions and adam_update name the shapes", "[errors]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor x = be->zeros({3, 4});
  TX_REQUIRE_ERROR(be->sum(x, be->zeros({2})), Contains("sum") && Contains("[2]"));
  TX_REQUIRE_ERROR(be->squared_norm(x, be->zeros({2})),
                   Contains("squared_norm") && Contains("[2]"));
  TX_REQUIRE_ERROR(be->sum_rows(x, be->zeros({3})),
                   Contains("sum_rows") && Contains("[3]") && Contains("[4]"));
  tx::Backend::AdamParams p;
  TX_REQUIRE_ERROR(be->adam_update(x, be->zeros({4, 3}), be->zeros({3, 4}), be->zeros({3, 4}), p),
                   Contains("adam_update") && Contains("[3, 4]") && Contains("[4, 3]"));
  p.step = 0;
  TX_REQUIRE_ERROR(be->adam_update(x, x, be->zeros({3, 4}), be->zeros({3, 4}), p),
                   Contains("adam_update") && Contains("step"));
}

TEMPLATE_TEST_CASE("errors: a rejected call leaves its output untouched", "[errors]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  std::vector<float> y0 = random_vector(6, 1);
  Tensor y = be->upload(y0, {2, 3});
  REQUIRE_THROWS_AS(be->add(be->zeros({2, 3}), be->zeros({3, 2}), y), tx::Error);
  REQUIRE_THROWS_AS(be->gemm(be->zeros({2, 4}), false, be->zeros({5, 3}), false, y), tx::Error);
  TX_REQUIRE_OK(compare_exact(fetch(*be, y), y0));
}

TEMPLATE_TEST_CASE("errors: quantize_rows and gemm_i8 name the dtypes and shapes", "[errors]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  Tensor x = be->zeros({2, 4}), q = be->empty({2, 4}, DType::i8), s = be->zeros({2});
  TX_REQUIRE_ERROR(be->quantize_rows(x, 127, be->zeros({2, 4}), s),
                   Contains("quantize_rows") && Contains("q") && Contains("i8"));
  TX_REQUIRE_ERROR(be->quantize_rows(x, 128, q, s), Contains("max_level 128"));
  TX_REQUIRE_ERROR(be->quantize_rows(x, 127, q, be->zeros({3})),
                   Contains("scales") && Contains("[3]"));
  Tensor w = be->empty({3, 4}, DType::i8), ws = be->zeros({3});
  TX_REQUIRE_ERROR(be->gemm_i8(q, s, be->empty({3, 5}, DType::i8), ws, Tensor(), be->zeros({2, 3})),
                   Contains("gemm_i8") && Contains("K = 5"));
  TX_REQUIRE_ERROR(be->gemm_i8(q, s, w, ws, Tensor(), be->zeros({2, 4})),
                   Contains("gemm_i8: c") && Contains("[2, 3]"));
  TX_REQUIRE_ERROR(be->gemm_i8(q, s, w, ws, be->zeros({4}), be->zeros({2, 3})),
                   Contains("bias") && Contains("[4]"));
  TX_REQUIRE_ERROR(be->gemm_i8(x, s, w, ws, Tensor(), be->zeros({2, 3})),
                   Contains("gemm_i8: a") && Contains("i8"));
}
