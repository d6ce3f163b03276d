// Conformance: operators are deterministic: the same inputs give bit-identical outputs on
// repeated calls and on a second backend object (reductions included: no order that depends
// on thread timing).
#include <functional>

#include "support/backends.h"
#include "support/reference.h"

namespace {

using tx::Shape;
using tx::Tensor;
using namespace tx::test;

// Runs `op` on two backend objects, twice on the first, and requires identical bits.
void check_deterministic(tx::Backend& be1, tx::Backend& be2, const char* what,
                         const std::function<std::vector<float>(tx::Backend&)>& op) {
  std::vector<float> a = op(be1);
  std::vector<float> b = op(be1);
  std::vector<float> c = op(be2);
  INFO(what);
  TX_CHECK_OK(compare_exact(b, a));
  TX_CHECK_OK(compare_exact(c, a));
}

}  // namespace

TEMPLATE_TEST_CASE("determinism: repeated calls give bit-identical outputs", "[determinism]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  auto be2 = backend_or_skip(TestType::name);
  REQUIRE(be2);

  check_deterministic(*be, *be2, "gemm [129, 257, 96]", [](tx::Backend& b) {
    Tensor c = b.zeros({129, 257});
    b.gemm(b.upload(random_vector(129 * 96, 1), {129, 96}), false,
           b.upload(random_vector(257 * 96, 2), {257, 96}), true, c);
    return fetch(b, c);
  });
  check_deterministic(*be, *be2, "dropout [33, 65]", [](tx::Backend& b) {
    Tensor y = b.empty({33, 65});
    b.dropout(b.upload(random_vector(33 * 65, 3), {33, 65}), 0.3f, 77, 1000, y);
    return fetch(b, y);
  });
  check_deterministic(*be, *be2, "softmax [4, 4, 33, 65] causal + key_lengths", [](tx::Backend& b) {
    Shape s{4, 4, 33, 65};
    Tensor y = b.empty(s);
    b.softmax(b.upload(random_vector(s.numel(), 4), s), 0.125f,
              b.upload(std::vector<int32_t>{65, 40, 1, 0}, {4}), true, y);
    return fetch(b, y);
  });
  check_deterministic(*be, *be2, "layer_norm + backward [300, 129]", [](tx::Backend& b) {
    Shape s{300, 129};
    Tensor x = b.upload(random_vector(s.numel(), 5), s), g = b.upload(random_vector(129, 6), {129});
    Tensor y = b.empty(s), m = b.empty({300}), r = b.empty({300});
    b.layer_norm(x, g, b.upload(random_vector(129, 7), {129}), 1e-5f, y, m, r);
    Tensor dx = b.zeros(s), dg = b.zeros({129}), db = b.zeros({129});
    b.layer_norm_backward(b.upload(random_vector(s.numel(), 8), s), x, g, m, r, dx, dg, db);
    std::vector<float> out = fetch(b, y);
    for (const Tensor& t : {m, r, dx, dg, db}) {
      std::vector<float> v = fetch(b, t);
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  });
  check_deterministic(*be, *be2, "cross_entropy + backward [65, 1000]", [](tx::Backend& b) {
    Shape s{65, 1000};
    Tensor x = b.upload(random_vector(s.numel(), 9, -5.0f, 5.0f), s);
    Tensor t = b.upload(random_ints(65, 10, 0, 1000), {65});
    Tensor l = b.empty({65}), dx = b.zeros(s);
    b.cross_entropy(x, t, 0.1f, -1, l, Tensor());
    b.cross_entropy_backward(x, t, 0.1f, -1, b.upload(random_vector(65, 11), {65}), dx);
    std::vector<float> out = fetch(b, l), g = fetch(b, dx);
    out.insert(out.end(), g.begin(), g.end());
    return out;
  });
  check_deterministic(*be, *be2, "sum, squared_norm, sum_rows of 100k+ elements",
                      [](tx::Backend& b) {
                        Shape s{1031, 129};
                        Tensor x = b.upload(random_vector(s.numel(), 12), s);
                        Tensor o1 = b.empty({1}), o2 = b.empty({1}), o3 = b.empty({129});
                        b.sum(x, o1);
                        b.squared_norm(x, o2);
                        b.sum_rows(x, o3);
                        std::vector<float> out = fetch(b, o1);
                        out.push_back(fetch(b, o2)[0]);
                        std::vector<float> c = fetch(b, o3);
                        out.insert(out.end(), c.begin(), c.end());
                        return out;
                      });
  check_deterministic(*be, *be2, "adam_update [100003]", [](tx::Backend& b) {
    Shape s{100003};
    Tensor p = b.upload(random_vector(s.numel(), 13), s), m = b.zeros(s), v = b.zeros(s);
    tx::Backend::AdamParams ap;
    for (int step = 1; step <= 3; ++step) {
      ap.step = step;
      b.adam_update(p, b.upload(random_vector(s.numel(), 14 + step), s), m, v, ap);
    }
    return fetch(b, p);
  });
}
