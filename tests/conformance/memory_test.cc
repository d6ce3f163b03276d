// Conformance: empty/zeros, upload/download, copy_from_host/copy_to_host, copy, fill, and
// operators on slices and views.
#include <cmath>

#include "core/half.h"
#include "support/backends.h"
#include "support/reference.h"

namespace {

using tx::DType;
using tx::Shape;
using tx::Tensor;
using namespace tx::test;

}  // namespace

TEMPLATE_TEST_CASE("memory: upload/download round trip of f32 and i32, odd and empty shapes",
                   "[memory]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  uint64_t seed = 1;
  for (const Shape& s : {Shape{0}, Shape{1}, Shape{1, 1}, Shape{7, 33}, Shape{3, 0, 5},
                         Shape{33, 65}, Shape{1000003}}) {
    std::vector<float> f = random_vector(s.numel(), ++seed);
    std::vector<int32_t> i = random_ints(s.numel(), ++seed, -1000000, 1000000);
    Tensor tf = be->upload(f, s), ti = be->upload(i, s);
    INFO("shape " << s.str());
    CHECK(tf.shape() == s);
    CHECK(tf.dtype() == DType::f32);
    CHECK(ti.dtype() == DType::i32);
    CHECK(tf.device() == be->device());
    TX_CHECK_OK(compare_exact(fetch(*be, tf), f));
    TX_CHECK_OK(compare_exact(fetch_i32(*be, ti), i));
  }
}

TEMPLATE_TEST_CASE("memory: uploads queued back to back each land (more than a staging ring)",
                   "[memory]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // CUDA stages small uploads through 8 pinned buffers and does not wait for the device: 20 in
  // a row reuse each buffer, so a buffer overwritten before the device read it would show.
  std::vector<std::vector<float>> host;
  std::vector<Tensor> dev;
  for (int i = 0; i < 20; ++i) {
    host.push_back(random_vector(1000 + 37 * i, 500 + i));
    dev.push_back(be->upload(host.back(), {int64_t(host.back().size())}));
    be->scale(dev.back(), 2.0f, dev.back());  // queued work between the uploads
  }
  for (int i = 0; i < 20; ++i) {
    std::vector<float> want = host[i];
    for (float& x : want) x *= 2.0f;
    INFO("upload " << i);
    TX_CHECK_OK(compare_exact(fetch(*be, dev[i]), want));
  }
}

TEMPLATE_TEST_CASE("memory: zeros for every dtype", "[memory]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::i32}) {
    Tensor z = be->zeros({7, 33}, t);
    std::vector<uint8_t> bytes(z.nbytes(), 0xff);
    be->copy_to_host(z, bytes.data());
    INFO("dtype " << tx::name_of(t));
    for (uint8_t b : bytes) REQUIRE(b == 0);
  }
}

TEMPLATE_TEST_CASE("memory: fill f32, f16, bf16 and i32", "[memory]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  for (float value : {3.25f, -1.5f, 0.1f, 0.0f, 1e-6f}) {
    INFO("value " << value);
    Tensor f = be->empty({7, 33});
    be->fill(f, value);
    TX_CHECK_OK(compare_exact(fetch(*be, f), std::vector<float>(7 * 33, value)));
    Tensor h = be->empty({33}, DType::f16), b = be->empty({33}, DType::bf16);
    be->fill(h, value);
    be->fill(b, value);
    for (uint16_t bits : fetch_u16(*be, h)) CHECK(bits == tx::float_to_f16(value));
    for (uint16_t bits : fetch_u16(*be, b)) CHECK(bits == tx::float_to_bf16(value));
  }
  Tensor i = be->empty({65}, DType::i32);
  be->fill(i, 7.0f);
  TX_CHECK_OK(compare_exact(fetch_i32(*be, i), std::vector<int32_t>(65, 7)));
  be->fill(i, -3.0f);
  TX_CHECK_OK(compare_exact(fetch_i32(*be, i), std::vector<int32_t>(65, -3)));
}

TEMPLATE_TEST_CASE("memory: copy, copy_from_host, copy_to_host", "[memory]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  std::vector<float> x = random_vector(7 * 33, 5);
  Tensor a = be->upload(x, {7, 33}), b = be->empty({7, 33});
  be->copy(a, b);
  TX_CHECK_OK(compare_exact(fetch(*be, b), x));
  be->copy(a, a);  // same memory: a no-op
  TX_CHECK_OK(compare_exact(fetch(*be, a), x));

  // Large enough for the CPU to split the copy between threads (an odd size: the shares'
  // ends), into a slice at an offset.
  const int64_t n = 3 * 20011;
  std::vector<float> y = random_vector(n, 6);
  Tensor src = be->upload(y, {3, 20011}), dst = be->zeros({4, 20011});
  be->copy(src, dst.slice(1, 4));
  std::vector<float> want(20011, 0.0f);
  want.insert(want.end(), y.begin(), y.end());
  TX_CHECK_OK(compare_exact(fetch(*be, dst), want));

  // Raw bytes of a 16-bit tensor.
  std::vector<uint16_t> bits = {0x3c00, 0x8001, 0x7bff, 0xfc00, 0x1234};
  Tensor h = be->empty({5}, DType::f16), h2 = be->empty({5}, DType::f16);
  be->copy_from_host(bits.data(), h);
  be->copy(h, h2);
  std::vector<uint16_t> back(5);
  be->copy_to_host(h2, back.data());
  CHECK(back == bits);

  // copy_from_host into a slice writes only those rows.
  Tensor big = be->zeros({4, 3});
  std::vector<float> row = {1, 2, 3, 4, 5, 6};
  be->copy_from_host(row.data(), big.slice(1, 3));
  TX_CHECK_OK(compare_exact(fetch(*be, big), {0, 0, 0, 1, 2, 3, 4, 5, 6, 0, 0, 0}));
}

TEMPLATE_TEST_CASE("memory: slices and views share memory, fill and copy respect the offset",
                   "[memory]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  std::vector<float> x = random_vector(5 * 3, 7);
  Tensor t = be->upload(x, {5, 3});
  Tensor s = t.slice(1, 4);
  CHECK(s.shape() == Shape{3, 3});
  TX_CHECK_OK(compare_exact(fetch(*be, s), std::vector<float>(x.begin() + 3, x.begin() + 12)));
  TX_CHECK_OK(compare_exact(fetch(*be, t.view({15})), x));
  TX_CHECK_OK(compare_exact(fetch(*be, t.view({3, 5}).slice(2, 3)),
                            std::vector<float>(x.begin() + 10, x.end())));

  be->fill(t.slice(2, 3), 9.0f);  // row 2 only
  std::vector<float> want = x;
  for (int j = 0; j < 3; ++j) want[6 + j] = 9.0f;
  TX_CHECK_OK(compare_exact(fetch(*be, t), want));

  Tensor src = be->upload(std::vector<float>{-1, -2, -3, -4, -5, -6}, {2, 3});
  be->copy(src, t.slice(3, 5));  // rows 3 and 4
  for (int j = 0; j < 6; ++j) want[9 + j] = -1.0f - j;
  TX_CHECK_OK(compare_exact(fetch(*be, t), want));
}

TEMPLATE_TEST_CASE("memory: operators read and write through slices at an offset", "[memory]",
                   TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  // relu, add, softmax and layer_norm on rows 1..3 of a [5, 7] buffer leave rows 0 and 4 alone.
  std::vector<float> x = random_vector(35, 9);
  std::vector<float> garbage = random_vector(35, 10);
  Tensor in = be->upload(x, {5, 7});
  Tensor rows = in.slice(1, 4);
  std::vector<float> mid(x.begin() + 7, x.begin() + 28);

  auto check_rows_only = [&](const Tensor& out, const std::vector<float>& want_mid) {
    std::vector<float> got = fetch(*be, out);
    std::vector<float> head(got.begin(), got.begin() + 7), tail(got.begin() + 28, got.end());
    CHECK(compare_exact(head, std::vector<float>(garbage.begin(), garbage.begin() + 7)).empty());
    CHECK(compare_exact(tail, std::vector<float>(garbage.begin() + 28, garbage.end())).empty());
    return compare(std::vector<float>(got.begin() + 7, got.begin() + 28), want_mid, 1e-5, 1e-6);
  };

  {
    Tensor out = be->upload(garbage, {5, 7});
    be->relu(rows, out.slice(1, 4));
    std::vector<float> want(21);
    for (int i = 0; i < 21; ++i) want[i] = mid[i] > 0 ? mid[i] : 0.0f;
    INFO("relu");
    TX_CHECK_OK(check_rows_only(out, want));
  }
  {
    Tensor out = be->upload(garbage, {5, 7});
    be->add(rows, rows, out.slice(1, 4));
    std::vector<float> want(21);
    for (int i = 0; i < 21; ++i) want[i] = 2 * mid[i];
    INFO("add");
    TX_CHECK_OK(check_rows_only(out, want));
  }
  {
    Tensor out = be->upload(garbage, {5, 7});
    be->softmax(rows, 1.0f, Tensor(), false, out.slice(1, 4));
    std::vector<float> want(21);
    for (int r = 0; r < 3; ++r) {
      double z = 0;
      for (int j = 0; j < 7; ++j) z += std::exp(double(mid[r * 7 + j]));
      for (int j = 0; j < 7; ++j) want[r * 7 + j] = float(std::exp(double(mid[r * 7 + j])) / z);
    }
    INFO("softmax");
    TX_CHECK_OK(check_rows_only(out, want));
  }
}

TEMPLATE_TEST_CASE("memory: upload size mismatch and wrong download dtype raise tx::Error",
                   "[memory][errors]", TX_BACKENDS) {
  TX_BACKEND_OR_SKIP(be);
  CHECK_THROWS_AS(be->upload(std::vector<float>(5), {2, 3}), tx::Error);
  CHECK_THROWS_WITH(be->upload(std::vector<float>(5), {2, 3}),
                    Catch::Contains("upload") && Catch::Contains("[2, 3]"));
  Tensor i = be->zeros({3}, DType::i32);
  CHECK_THROWS_AS(fetch(*be, i), tx::Error);
  CHECK_THROWS_AS(fetch_i32(*be, be->zeros({3})), tx::Error);
  CHECK_THROWS_AS(be->copy(be->zeros({3}), i), tx::Error);
}
