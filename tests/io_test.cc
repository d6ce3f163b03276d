// io: safetensors write/read (round trip, exact bytes, hand-built files, every corruption),
// atomic writes, TensorFile conversions and ModelConfig (presets, JSON, validation).
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "io/atomic_file.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "support/files.h"

using Catch::Contains;
using tx::DType;
using tx::Shape;
using tx::io::ModelConfig;
using tx::io::NamedTensor;
using tx::io::TensorFile;
namespace fs = std::filesystem;
using tx::test::slurp;
using tx::test::TempDir;

namespace {

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The 8-byte little-endian length, built byte by byte (independent of the writer's code).
std::string le64(uint64_t n) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return s;
}

std::string safetensors_bytes(const std::string& header, const std::string& buffer) {
  return le64(header.size()) + header + buffer;
}

std::string bytes_of(std::initializer_list<int> values) {
  std::string s;
  for (int v : values) s.push_back(static_cast<char>(v));
  return s;
}

// Writes a file built from `header` and `buffer` and returns read_safetensors' error message.
std::string read_error(const TempDir& dir, const std::string& header, const std::string& buffer) {
  std::string path = dir.file("bad.safetensors");
  spit(path, safetensors_bytes(header, buffer));
  try {
    tx::io::read_safetensors(path);
  } catch (const tx::Error& e) {
    return e.what();
  }
  return "(no error)";
}

NamedTensor raw_tensor(std::string name, DType dtype, Shape shape, uint8_t seed) {
  NamedTensor t{std::move(name), dtype, std::move(shape), {}};
  t.data.resize(t.nbytes());
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<uint8_t>(seed + 37 * i);
  return t;
}

TensorFile mixed_file() {
  TensorFile f;
  f.add(raw_tensor("encoder.layers.0.ffn.fc1.weight", DType::f32, Shape{3, 5, 7}, 1));
  f.add(raw_tensor("half", DType::f16, Shape{1, 3}, 2));  // 6 bytes: what follows is unaligned
  f.add(raw_tensor("brain", DType::bf16, Shape{7}, 3));
  f.add(raw_tensor("ids", DType::i32, Shape{2, 1, 3}, 4));
  f.add(raw_tensor("empty", DType::f32, Shape{0, 4}, 5));
  f.add(raw_tensor("scalar", DType::f32, Shape{}, 6));
  f.add(raw_tensor("a", DType::bf16, Shape{1}, 7));  // names not in alphabetical order
  f.metadata["tx.note"] = "grüße, 翻訳";
  f.metadata["format"] = "pt";
  return f;
}

}  // namespace

// ---- safetensors: round trip and exact bytes ----------------------------------------------------

TEST_CASE("io safetensors: round trip of every dtype, odd shapes, an empty tensor and a scalar",
          "[io]") {
  TempDir dir;
  TensorFile f = mixed_file();
  std::string path = dir.file("model.safetensors");
  tx::io::write_safetensors(path, f);
  TensorFile back = tx::io::read_safetensors(path);

  REQUIRE(back.tensors.size() == f.tensors.size());
  for (size_t i = 0; i < f.tensors.size(); ++i) {  // buffer order is the written order
    INFO(f.tensors[i].name);
    CHECK(back.tensors[i].name == f.tensors[i].name);
    CHECK(back.tensors[i].dtype == f.tensors[i].dtype);
    CHECK(back.tensors[i].shape == f.tensors[i].shape);
    CHECK(back.tensors[i].data == f.tensors[i].data);
  }
  CHECK(back.get("scalar").shape.ndim() == 0);
  CHECK(back.get("scalar").data.size() == 4);
  CHECK(back.get("empty").data.empty());
  CHECK(back.metadata == f.metadata);
  CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});

  // Deterministic: the same content gives the same bytes, and re-writing what was read too.
  std::string again = dir.file("again.safetensors");
  tx::io::write_safetensors(again, back);
  CHECK(slurp(again) == slurp(path));
  CHECK(slurp(path) == tx::io::encode_safetensors(f));
}

TEST_CASE("io safetensors: a small file matches a hand-built byte string", "[io]") {
  TensorFile f;
  f.metadata["tx.model_config"] = "{\"d\":12}";
  f.add(NamedTensor::from_floats("w", DType::f32, Shape{2}, {1.0f, -2.0f}));
  f.add(NamedTensor::from_ints("n", Shape{}, {7}));
  f.add(NamedTensor::from_floats("e", DType::f16, Shape{0}, {}));
  f.add(NamedTensor::from_floats("h", DType::f16, Shape{1}, {1.0f}));

  // Counted by hand: 140 + 53 + 53 + 55 + 55 = 356 characters of compact JSON. The writer adds
  // each tensor's CRC-32 (these from Python's zlib.crc32 of the bytes below).
  std::string json =
      "{\"__metadata__\":{\"tx.crc32\":\"{\\\"w\\\":\\\"c3872656\\\",\\\"n\\\":\\\"bc93e7a5\\\","
      "\\\"e\\\":\\\"00000000\\\",\\\"h\\\":\\\"6eb66e78\\\"}\","
      "\"tx.model_config\":\"{\\\"d\\\":12}\"},"
      "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"n\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[8,12]},"
      "\"e\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[12,12]},"
      "\"h\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[12,14]}}";
  REQUIRE(json.size() == 356);
  std::string header = json + std::string(4, ' ');        // 356 + 4 = 360 = 45 * 8
  std::string buffer = bytes_of({0x00, 0x00, 0x80, 0x3f,  // 1.0f
                                 0x00, 0x00, 0x00, 0xc0,  // -2.0f
                                 0x07, 0x00, 0x00, 0x00,  // 7
                                 0x00, 0x3c});            // f16 1.0
  // 360 = 0x168, little-endian.
  std::string expected = bytes_of({0x68, 0x01, 0, 0, 0, 0, 0, 0}) + header + buffer;

  CHECK(tx::io::encode_safetensors(f) == expected);
  TempDir dir;
  std::string path = dir.file("small.safetensors");
  tx::io::write_safetensors(path, f);
  CHECK(slurp(path) == expected);
  // Read back: the checksums are checked, not metadata.
  const TensorFile back = tx::io::read_safetensors(path);
  CHECK(back.metadata == f.metadata);
  // Each byte of the data changed in turn is named as its tensor's damage.
  for (size_t at = expected.size() - buffer.size(); at < expected.size(); ++at) {
    std::string bad = expected;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    tx::test::write_file(path, bad);
    INFO("byte " << at);
    CHECK_THROWS_WITH(tx::io::read_safetensors(path),
                      Catch::Contains("does not match the checksum written with it") &&
                          Catch::Contains("the file was damaged after tx wrote it"));
  }
  // (A file from elsewhere, without them, reads as it is: the next test.)
}

TEST_CASE("io safetensors: reads a hand-built file with padding and its own key order", "[io]") {
  TempDir dir;
  // Written by "another tool": keys in another order, tensors not listed in offset order,
  // metadata last, and generous space padding after the JSON.
  std::string header =
      "{\"b\":{\"data_offsets\":[8,10],\"shape\":[1],\"dtype\":\"BF16\"},"
      "\"a\":{\"shape\":[2],\"dtype\":\"I32\",\"data_offsets\":[0,8]},"
      "\"__metadata__\":{\"format\":\"pt\"}}";
  header += std::string(16 - header.size() % 8, ' ');
  std::string buffer = bytes_of({0xff, 0xff, 0xff, 0xff, 0x05, 0x00, 0x00, 0x00, 0x80, 0x3f});
  std::string path = dir.file("other.safetensors");
  spit(path, safetensors_bytes(header, buffer));

  TensorFile f = tx::io::read_safetensors(path);
  REQUIRE(f.tensors.size() == 2);
  CHECK(f.tensors[0].name == "a");  // sorted by offset
  CHECK(f.tensors[1].name == "b");
  CHECK(f.tensors[0].to_ints() == std::vector<int32_t>{-1, 5});
  CHECK(f.tensors[1].dtype == DType::bf16);
  CHECK(f.tensors[1].to_floats() == std::vector<float>{1.0f});
  CHECK(f.metadata.at("format") == "pt");
}

TEST_CASE("io safetensors: the lazy reader lists the header and reads one tensor at a time",
          "[io]") {
  TempDir dir;
  std::string path = dir.file("lazy.safetensors");
  TensorFile f = mixed_file();
  tx::io::write_safetensors(path, f);

  tx::io::SafetensorsReader reader(path);
  REQUIRE(reader.entries().size() == f.tensors.size());
  CHECK(reader.metadata() == f.metadata);
  const tx::io::TensorEntry* ids = reader.find("ids");
  REQUIRE(ids != nullptr);
  CHECK(ids->dtype == DType::i32);
  CHECK(ids->shape == Shape{2, 1, 3});
  CHECK(ids->end - ids->begin == 24);
  CHECK(reader.find("nope") == nullptr);
  CHECK(reader.read("brain").data == f.get("brain").data);
  CHECK(reader.read("ids").data == f.get("ids").data);  // out of order reads work
  CHECK_THROWS_WITH(reader.read("nope"), Contains("no tensor named 'nope'"));
}

TEST_CASE("io safetensors: a file with no tensors", "[io]") {
  TempDir dir;
  std::string path = dir.file("none.safetensors");
  tx::io::write_safetensors(path, TensorFile{});
  CHECK(slurp(path) == le64(8) + "{}      ");
  TensorFile back = tx::io::read_safetensors(path);
  CHECK(back.tensors.empty());
  CHECK(back.metadata.empty());
}

// ---- safetensors: every corruption is one clear error ------------------------------------------

TEST_CASE("io safetensors: missing, short and truncated files", "[io]") {
  TempDir dir;
  std::string missing = dir.file("missing.safetensors");
  CHECK_THROWS_WITH(tx::io::read_safetensors(missing), Contains("cannot open safetensors file") &&
                                                           Contains(missing) &&
                                                           Contains("No such file"));
  CHECK_THROWS_WITH(tx::io::read_safetensors(dir.file("")), Contains("is a directory"));

  std::string shorty = dir.file("short.safetensors");
  spit(shorty, std::string("\x05\x00\x00", 3));
  CHECK_THROWS_WITH(tx::io::read_safetensors(shorty),
                    Contains(shorty) && Contains("3 bytes long") && Contains("8-byte"));

  std::string header = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  std::string path = dir.file("cut.safetensors");
  spit(path, safetensors_bytes(header, "").substr(0, 30));  // cut inside the header
  CHECK_THROWS_WITH(tx::io::read_safetensors(path),
                    Contains("header length 54 is larger than the 22 bytes"));
  spit(path, le64(uint64_t(1) << 62) + "{}");
  CHECK_THROWS_WITH(tx::io::read_safetensors(path), Contains("is larger than the 2 bytes"));
}

TEST_CASE("io safetensors: a header that is not valid JSON or not the expected shape", "[io]") {
  TempDir dir;
  CHECK_THAT(read_error(dir, "{\"a\":{\"dtype\":", ""), Contains("the header is not valid JSON"));
  CHECK_THAT(read_error(dir, "not json", ""), Contains("the header is not valid JSON"));
  CHECK_THAT(read_error(dir, "[1,2]   ", ""), Contains("not an object"));
  CHECK_THAT(read_error(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", "abcd"),
             Contains("tensor 'a' has no 'data_offsets'"));
  CHECK_THAT(
      read_error(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}",
                 "abcd"),
      Contains("unknown header field 'x'"));
  CHECK_THAT(
      read_error(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", "abcd"),
      Contains("not all non-negative integers"));
  CHECK_THAT(
      read_error(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", "abcd"),
      Contains("not all non-negative integers"));
  CHECK_THAT(read_error(dir,
                        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1],"
                        "\"data_offsets\":[0,4]}}",
                        "abcd"),
             Contains("tensor 'a' has shape [1,1,1,1,1,1,1]") && Contains("at most 6 dimensions"));
  CHECK_THAT(read_error(dir, "{\"__metadata__\":{\"k\":1}}", ""),
             Contains("'__metadata__' value for 'k' is not a string"));
  CHECK_THAT(read_error(dir,
                        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                        "abcdefgh"),
             Contains("names 'a' twice"));
}

TEST_CASE("io safetensors: unknown and unsupported dtypes", "[io]") {
  TempDir dir;
  CHECK_THAT(
      read_error(dir, "{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", "abcd"),
      Contains("tensor 'a' has unknown dtype 'F33'") && Contains("F32, F16, BF16, I32 and I8"));
  CHECK_THAT(read_error(dir, "{\"a\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}",
                        "abcdefgh"),
             Contains("dtype I64, which tx does not read") && Contains("convert it"));
  CHECK_THAT(
      read_error(dir, "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "a"),
      Contains("dtype U8, which tx does not read"));
}

TEST_CASE("io safetensors: offsets that disagree with the shape, overlap, or leave bytes over",
          "[io]") {
  TempDir dir;
  std::string buffer(16, 'x');
  auto entry = [](const std::string& name, const std::string& dtype, const std::string& shape,
                  int begin, int end) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
           ",\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
  };
  // Shape / offset mismatch: F32 [3] needs 12 bytes, the offsets span 16.
  CHECK_THAT(read_error(dir, "{" + entry("a", "F32", "[3]", 0, 16) + "}", buffer),
             Contains("tensor 'a' is F32[3], which needs 12 bytes") && Contains("span 16"));
  // Overlap.
  CHECK_THAT(
      read_error(dir,
                 "{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("b", "F32", "[3]", 4, 16) + "}",
                 buffer),
      Contains("tensors 'a' [0, 8] and 'b' [4, 16] overlap"));
  // Out of range.
  CHECK_THAT(read_error(dir, "{" + entry("a", "F32", "[5]", 0, 20) + "}", buffer),
             Contains("beyond the end of the data buffer (16 bytes)"));
  // End before begin.
  CHECK_THAT(read_error(dir, "{" + entry("a", "F32", "[0]", 8, 4) + "}", buffer),
             Contains("end before they begin"));
  // A hole between tensors.
  CHECK_THAT(
      read_error(dir,
                 "{" + entry("a", "F32", "[1]", 0, 4) + "," + entry("b", "F32", "[2]", 8, 16) + "}",
                 buffer),
      Contains("4 unused bytes lie before tensor 'b'"));
  // Trailing garbage after the last tensor.
  CHECK_THAT(read_error(dir, "{" + entry("a", "F32", "[2]", 0, 8) + "}", buffer),
             Contains("8 bytes of trailing garbage"));
  // And the message names the file.
  CHECK_THAT(read_error(dir, "{" + entry("a", "F32", "[2]", 0, 8) + "}", buffer),
             Contains("bad.safetensors"));
}

// ---- writing: validation and atomicity ----------------------------------------------------------

TEST_CASE("io safetensors: invalid tensor files are refused before anything is written", "[io]") {
  TempDir dir;
  std::string path = dir.file("model.safetensors");
  TensorFile good = mixed_file();
  tx::io::write_safetensors(path, good);
  std::string before = slurp(path);

  TensorFile wrong_size = good;
  wrong_size.tensors[1].data.pop_back();
  CHECK_THROWS_WITH(tx::io::write_safetensors(path, wrong_size),
                    Contains(path) && Contains("tensor 'half' (f16[1, 3]) needs 6 bytes"));

  TensorFile duplicate = good;
  duplicate.tensors.push_back(duplicate.tensors[0]);
  CHECK_THROWS_WITH(tx::io::write_safetensors(path, duplicate), Contains("used twice"));

  TensorFile reserved;
  reserved.tensors.push_back(raw_tensor("__metadata__", DType::f32, Shape{1}, 0));
  CHECK_THROWS_WITH(tx::io::write_safetensors(path, reserved), Contains("reserved"));

  TensorFile bad_utf8;
  bad_utf8.metadata["k"] = "\xff\xfe";
  CHECK_THROWS_WITH(tx::io::write_safetensors(path, bad_utf8), Contains("not valid UTF-8"));

  CHECK(slurp(path) == before);  // the old file is untouched
  CHECK(dir.entries() == std::vector<std::string>{"model.safetensors"});  // and no temp left
  CHECK_THROWS_WITH(good.add(raw_tensor("ids", DType::f32, Shape{1}, 0)), Contains("used twice"));
}

TEST_CASE("io safetensors: writing into a missing directory fails cleanly", "[io]") {
  TempDir dir;
  std::string path = dir.file("no/such/dir/model.safetensors");
  CHECK_THROWS_WITH(tx::io::write_safetensors(path, mixed_file()),
                    Contains(path) && Contains("create the directory"));
  CHECK(dir.entries().empty());
}

TEST_CASE("io AtomicFile: an uncommitted write leaves the old file and no temp behind", "[io]") {
  TempDir dir;
  std::string path = dir.file("state.json");
  spit(path, "old");
  {
    tx::io::AtomicFile out(path);
    out.write("new content that never lands");
    CHECK(fs::exists(out.temp_path()));
    CHECK(dir.entries().size() == 2);
    // Destroyed without commit(): as if an error was thrown halfway through writing.
  }
  CHECK(slurp(path) == "old");
  CHECK(dir.entries() == std::vector<std::string>{"state.json"});

  tx::io::write_file_atomic(path, "new");
  CHECK(slurp(path) == "new");
  CHECK(dir.entries() == std::vector<std::string>{"state.json"});

  tx::io::AtomicFile twice(path);
  twice.commit();
  CHECK_THROWS_WITH(twice.commit(), Contains("already committed"));
  CHECK(slurp(path).empty());
}

TEST_CASE("io AtomicFile: a link is written through, a pipe or a directory is refused", "[io]") {
  TempDir dir;
  fs::create_directory(dir.file("real"));
  spit(dir.file("real/model"), "old");
  // A relative link to a relative link: both are kept, the file at the end is replaced.
  fs::create_symlink("real/model", dir.file("hop"));
  fs::create_symlink("hop", dir.file("model"));
  tx::io::write_file_atomic(dir.file("model"), "new");
  CHECK(fs::is_symlink(dir.file("model")));
  CHECK(fs::is_symlink(dir.file("hop")));
  CHECK(slurp(dir.file("real/model")) == "new");
  CHECK(dir.entries() == std::vector<std::string>{"hop", "model", "real"});
  // A link to a file not there yet: the file is made where the link points.
  fs::create_symlink("real/fresh", dir.file("fresh"));
  tx::io::write_file_atomic(dir.file("fresh"), "made");
  CHECK(fs::is_symlink(dir.file("fresh")));
  CHECK(slurp(dir.file("real/fresh")) == "made");
  fs::create_symlink("loop", dir.file("loop"));
  CHECK_THROWS_WITH(tx::io::AtomicFile(dir.file("loop")), Contains("symbolic links"));
  // A rename would replace these with a file (as root, /dev/full itself).
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);
  CHECK_THROWS_WITH(tx::io::AtomicFile(dir.file("fifo")),
                    Contains("it is a pipe") && Contains("regular file"));
  CHECK(fs::is_fifo(dir.file("fifo")));
  CHECK_THROWS_WITH(tx::io::AtomicFile(dir.file("real")), Contains("it is a directory"));
  CHECK_THROWS_WITH(tx::io::AtomicFile("/dev/null"), Contains("it is a device"));
  // /dev/stdout on a pipe: /proc's link names "pipe:[N]", no path; stat() says what it is.
  int ends[2];
  REQUIRE(::pipe(ends) == 0);
  CHECK_THROWS_WITH(tx::io::AtomicFile("/proc/self/fd/" + std::to_string(ends[1])),
                    Contains("it is a pipe"));
  ::close(ends[0]);
  ::close(ends[1]);
  CHECK(dir.entries() == std::vector<std::string>{"fifo", "fresh", "hop", "loop", "model", "real"});
}

// ---- TensorFile conversions ---------------------------------------------------------------------

TEST_CASE("io NamedTensor: float and int conversions for every dtype", "[io]") {
  std::vector<float> values = {0.0f, 1.0f, -2.5f, 65504.0f, 1e-7f, 3.14159f};
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    INFO(tx::name_of(dt));
    NamedTensor t = NamedTensor::from_floats("x", dt, Shape{2, 3}, values);
    CHECK(t.data.size() == 6 * tx::size_of(dt));
    std::vector<float> back = t.to_floats();
    for (size_t i = 0; i < values.size(); ++i) {
      float expected = dt == DType::f32   ? values[i]
                       : dt == DType::f16 ? tx::f16_to_float(tx::float_to_f16(values[i]))
                                          : tx::bf16_to_float(tx::float_to_bf16(values[i]));
      CHECK(back[i] == expected);
    }
  }
  NamedTensor ints = NamedTensor::from_ints("i", Shape{3}, {-1, 0, 2147483647});
  CHECK(ints.to_ints() == std::vector<int32_t>{-1, 0, 2147483647});
  CHECK(ints.to_floats() == std::vector<float>{-1.0f, 0.0f, 2147483648.0f});
  CHECK_THROWS_WITH(NamedTensor::from_floats("x", DType::f32, Shape{2, 2}, {1.0f}),
                    Contains("1 values for shape [2, 2]"));
  CHECK_THROWS_WITH(NamedTensor::from_floats("x", DType::f32, Shape{1}, {1.0f}).to_ints(),
                    Contains("not i32"));
  TensorFile f;
  CHECK_THROWS_WITH(f.get("missing"), Contains("no tensor named 'missing'"));
}

// ---- ModelConfig --------------------------------------------------------------------------------

TEST_CASE("io ModelConfig: presets follow the paper's Table 3", "[io][config]") {
  ModelConfig base = ModelConfig::preset("transformer-base");
  CHECK(base.d_model == 512);
  CHECK(base.d_ff == 2048);
  CHECK(base.heads == 8);
  CHECK(base.encoder_layers == 6);
  CHECK(base.decoder_layers == 6);
  CHECK(base.dropout == 0.1f);
  CHECK(base.label_smoothing == 0.1f);
  CHECK(base.tied_embeddings == tx::io::TiedEmbeddings::all);
  CHECK_FALSE(base.pre_norm);
  CHECK(base == ModelConfig{});

  ModelConfig big = ModelConfig::preset("transformer-big");
  CHECK(big.d_model == 1024);
  CHECK(big.d_ff == 4096);
  CHECK(big.heads == 16);
  CHECK(big.encoder_layers == 6);
  CHECK(big.decoder_layers == 6);
  CHECK(big.dropout == 0.3f);
  CHECK(big.label_smoothing == 0.1f);

  // Presets leave the vocabulary to tx-train: valid but incomplete.
  CHECK_NOTHROW(big.validate(false));
  CHECK_THROWS_WITH(big.validate(), Contains("src_vocab_size = 0"));
  CHECK_THROWS_WITH(ModelConfig::preset("transformer-huge"),
                    Contains("unknown model preset 'transformer-huge'") &&
                        Contains("transformer-base or transformer-big"));
  CHECK(ModelConfig::preset_names().size() == 2);
}

TEST_CASE("io ModelConfig: JSON round trip, also through safetensors metadata", "[io][config]") {
  ModelConfig c = ModelConfig::preset("transformer-big");
  c.src_vocab_size = 32000;
  c.tgt_vocab_size = 32000;
  c.tied_embeddings = tx::io::TiedEmbeddings::decoder;
  c.pre_norm = true;
  c.attention_dropout = 0.1f;
  c.dropout_src = 0.15f;
  c.norm_eps = 1e-6f;
  c.max_length = 256;
  std::string text = c.to_json_string();
  CHECK_THAT(text, Contains("\"dropout\":0.3") && Contains("\"tied_embeddings\":\"decoder\"") &&
                       Contains("\"norm_eps\":1e-06"));
  CHECK(ModelConfig::from_json_string(text) == c);
  CHECK(ModelConfig::from_json(c.to_json()) == c);
  CHECK(c.to_json().size() == 32);
  // The imported models' variants travel too.
  ModelConfig v = c;
  v.embed_scale = false;
  v.positions = tx::io::Positions::halves_hf;
  v.position_offset = 2;
  v.embed_norm = true;
  v.final_norm = false;
  v.activation = tx::io::Activation::swish;
  v.output_bias = true;
  v.pad_id = -1;
  v.decoder_start_id = -1;
  v.marian_prenorm_cache = true;
  CHECK(ModelConfig::from_json_string(v.to_json_string()) == v);
  CHECK_THROWS_WITH(ModelConfig::from_json_string(R"({"positions": "sideways"})"),
                    Contains("'positions' must be one of"));

  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  TensorFile f;
  f.metadata[tx::io::kModelConfigKey] = text;
  f.add(NamedTensor::from_floats("w", DType::f32, Shape{1}, {1.0f}));
  tx::io::write_safetensors(path, f);
  tx::io::SafetensorsReader reader(path);
  CHECK(ModelConfig::from_json_string(reader.metadata().at("tx.model_config"), path) == c);

  // Keys absent from the JSON keep transformer-base defaults.
  ModelConfig partial = ModelConfig::from_json(
      nlohmann::json{{"src_vocab_size", 100}, {"tgt_vocab_size", 100}, {"heads", 4}});
  CHECK(partial.heads == 4);
  CHECK(partial.d_model == 512);
}

TEST_CASE("io ModelConfig: validation names the key and the fix", "[io][config]") {
  nlohmann::json ok = ModelConfig{}.to_json();
  ok["src_vocab_size"] = 1000;
  ok["tgt_vocab_size"] = 1000;
  REQUIRE_NOTHROW(ModelConfig::from_json(ok));

  auto with = [&](const std::string& key, const nlohmann::json& value) {
    nlohmann::json j = ok;
    j[key] = value;
    return j;
  };
  CHECK_THROWS_WITH(ModelConfig::from_json(with("dmodel", 512), "cfg.json"),
                    Contains("cfg.json") && Contains("unknown key 'dmodel'"));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("heads", 7)),
                    Contains("d_model = 512 is not divisible by heads = 7"));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("d_ff", 0)), Contains("d_ff = 0 must be positive"));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("heads", -8)), Contains("heads = -8"));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("decoder_layers", 0)),
                    Contains("decoder_layers = 0 must be positive"));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("d_model", "512")),
                    Contains("'d_model' must be an integer"));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("d_model", 512.5)),
                    Contains("'d_model' must be an integer"));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("heads", 1LL << 40)),
                    Contains("'heads' = 1099511627776 is out of range"));
  // Sizes past any model, refused before a product of them can overflow (a file's d_model of
  // 2^62 made the loader spin in the allocator; a position_offset near 2^63 read wild memory).
  CHECK_THROWS_WITH(ModelConfig::from_json(with("d_model", int64_t(1) << 62)),
                    Contains("d_model = 4611686018427387904 must be positive and at most 131072"));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("d_ff", (int64_t(1) << 17) + 1)),
                    Contains("d_ff = 131073"));
  CHECK_NOTHROW(ModelConfig::from_json(with("d_ff", int64_t(1) << 17)));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("encoder_layers", 1025)),
                    Contains("encoder_layers = 1025 must be positive and at most 1024"));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("max_length", (int64_t(1) << 20) + 1)),
                    Contains("max_length"));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("position_offset", INT64_MAX - 1)),
                    Contains("position_offset = 9223372036854775806 must be between 0 and"));
  nlohmann::json huge_vocab = with("src_vocab_size", int64_t(1) << 25);
  huge_vocab["tgt_vocab_size"] = int64_t(1) << 25;
  CHECK_THROWS_WITH(ModelConfig::from_json(huge_vocab), Contains("must be at most 16777216"));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("dropout", 1.0)),
                    Contains("dropout = 1 must lie in [0, 1)"));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("label_smoothing", -0.1)),
                    Contains("label_smoothing"));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("norm_eps", 0)), Contains("norm_eps"));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("pre_norm", 1)), Contains("true or false"));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("tied_embeddings", "encoder")),
                    Contains("\"none\", \"decoder\" or \"all\""));
  CHECK_THROWS_WITH(ModelConfig::from_json(with("tgt_vocab_size", 999)),
                    Contains("tied_embeddings = all needs one shared vocabulary"));
  nlohmann::json untied = with("tgt_vocab_size", 999);
  untied["tied_embeddings"] = "decoder";
  CHECK_NOTHROW(ModelConfig::from_json(untied));
  CHECK_THROWS_WITH(ModelConfig::from_json(nlohmann::json::array()), Contains("JSON object"));
  CHECK_THROWS_WITH(ModelConfig::from_json_string("{oops", "ckpt.safetensors"),
                    Contains("ckpt.safetensors: not valid JSON"));
}
