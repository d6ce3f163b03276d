// The writing half of safetensors.h: header construction, encoding, atomic writes.
#include <zlib.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace tx::io {
namespace {

// Checks one tensor before anything touches the disk, so a bad TensorFile fails cleanly.
void validate_tensor(const NamedTensor& t, const std::string& where) {
  TX_CHECK(!t.name.empty(), "cannot write '", where,
           "': a tensor has an empty name; give every tensor a name");
  TX_CHECK(t.name != "__metadata__", "cannot write '", where,
           "': '__metadata__' is reserved for metadata; rename the tensor");
  uint64_t numel = 1;
  for (int64_t d : t.shape.dims()) {
    TX_CHECK(d >= 0, "cannot write '", where, "': tensor '", t.name, "' has shape ", t.shape.str(),
             " with a negative dimension; fix the shape");
    TX_CHECK(!__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel), "cannot write '",
             where, "': tensor '", t.name, "' shape ", t.shape.str(), " is too large");
  }
  uint64_t bytes = 0;
  TX_CHECK(!__builtin_mul_overflow(numel, size_of(t.dtype), &bytes), "cannot write '", where,
           "': tensor '", t.name, "' shape ", t.shape.str(), " is too large");
  TX_CHECK(t.data.size() == bytes, "cannot write '", where, "': tensor '", t.name, "' (",
           name_of(t.dtype), t.shape.str(), ") needs ", bytes, " bytes but holds ", t.data.size(),
           "; fill its data to numel * dtype size");
}

}  // namespace

const char* safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "F32";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::i32:
      return "I32";
    case DType::i8:
      return "I8";
  }
  return "?";
}

std::string safetensors_header(const TensorFile& file, const std::string& where) {
  // ordered_json keeps insertion order, so the header lists tensors in file order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  nlohmann::ordered_json checksums = nlohmann::ordered_json::object();
  for (const NamedTensor& t : file.tensors) {
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08lx", crc32_z(0, t.data.data(), t.data.size()));
    checksums[t.name] = hex;
  }
  std::map<std::string, std::string> metadata = file.metadata;
  if (!file.tensors.empty()) metadata[kChecksumKey] = checksums.dump();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;  // std::map: sorted
    header["__metadata__"] = std::move(meta);
  }
  std::unordered_set<std::string> names;
  uint64_t offset = 0;
  for (const NamedTensor& t : file.tensors) {
    validate_tensor(t, where);
    TX_CHECK(names.insert(t.name).second, "cannot write '", where, "': tensor name '", t.name,
             "' is used twice; give each tensor a unique name");
    uint64_t end = offset + t.data.size();
    header[t.name] = nlohmann::ordered_json{{"dtype", safetensors_dtype(t.dtype)},
                                            {"shape", t.shape.dims()},
                                            {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception&) {
    throw Error(str("cannot write '", where,
                    "': a tensor name or metadata string is not valid UTF-8; use UTF-8 text"));
  }
  // Pad with spaces so the data buffer starts 8-byte aligned (8 + N is a multiple of 8).
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

namespace {

std::string length_prefix(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

}  // namespace

std::string encode_safetensors(const TensorFile& file, const std::string& where) {
  std::string header = safetensors_header(file, where);
  std::string out = length_prefix(header.size()) + header;
  for (const NamedTensor& t : file.tensors)
    out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  return out;
}

void write_safetensors(const std::string& path, const TensorFile& file) {
  std::string header = safetensors_header(file, path);  // validates before creating anything
  AtomicFile out(path);
  out.write(length_prefix(header.size()));
  out.write(header);
  for (const NamedTensor& t : file.tensors) out.write(t.data.data(), t.data.size());
  out.commit();
}

}  // namespace tx::io
