// In-place calls (y is x): the layers rely on them for bias, residual and softmax, so every
// backend must give the same result as with separate buffers.
#include <catch2/catch.hpp>

#include "support/backends.h"
#include "support/reference.h"

using namespace tx;
using tx::test::compare_exact;
using tx::test::fetch;
using tx::test::random_vector;

namespace {

// Runs `op(x, y)` once into a fresh y and once in place, and requires the same bits.
void same_in_place(Backend& be, const Shape& shape,
                   const std::function<void(const Tensor& x, const Tensor& y)>& op) {
  std::vector<float> host = random_vector(shape.numel(), 4242);
  Tensor x = be.upload(host, shape);
  Tensor y = be.empty(shape);
  op(x, y);
  Tensor z = be.upload(host, shape);
  op(z, z);
  std::string diff = compare_exact(fetch(be, z), fetch(be, y));
  INFO(diff);
  CHECK(diff.empty());
  // The out-of-place call must have left its input alone.
  CHECK(compare_exact(fetch(be, x), host).empty());
}

}  // namespace

TEMPLATE_TEST_CASE("in-place: elementwise operators give the same bits as out-of-place",
                   "[inplace]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const Shape shape{3, 7, 33};
  Tensor bias = be->upload(random_vector(33, 7), {33});
  Tensor other = be->upload(random_vector(shape.numel(), 8), shape);
  SECTION("add_bias") {
    same_in_place(*be, shape, [&](const Tensor& x, const Tensor& y) { be->add_bias(x, bias, y); });
  }
  SECTION("add") {
    same_in_place(*be, shape, [&](const Tensor& x, const Tensor& y) { be->add(x, other, y); });
  }
  SECTION("scale") {
    same_in_place(*be, shape, [&](const Tensor& x, const Tensor& y) { be->scale(x, 0.3f, y); });
  }
  SECTION("relu") {
    same_in_place(*be, shape, [&](const Tensor& x, const Tensor& y) { be->relu(x, y); });
  }
  SECTION("dropout") {
    same_in_place(*be, shape,
                  [&](const Tensor& x, const Tensor& y) { be->dropout(x, 0.25f, 11, 100, y); });
  }
  SECTION("add_positions") {
    same_in_place(*be, shape,
                  [&](const Tensor& x, const Tensor& y) { be->add_positions(x, 3, y); });
  }
}

TEMPLATE_TEST_CASE("in-place: softmax and log_softmax rows give the same bits as out-of-place",
                   "[inplace]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  const Shape shape{2, 3, 5, 7};
  Tensor lengths = be->upload(std::vector<int32_t>{7, 4}, {2});
  SECTION("softmax with padding and causal masks") {
    same_in_place(*be, shape, [&](const Tensor& x, const Tensor& y) {
      be->softmax(x, 0.5f, lengths, true, y);
    });
  }
  SECTION("log_softmax") {
    same_in_place(*be, shape, [&](const Tensor& x, const Tensor& y) { be->log_softmax(x, y); });
  }
}
