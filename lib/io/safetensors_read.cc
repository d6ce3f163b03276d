// The reading half of safetensors.h: header parsing and validation, tensor reads.
//
// Every problem becomes one tx::Error line: "safetensors file '<path>': <problem>; <fix>".
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "io/safetensors.h"

namespace tx::io {
namespace {

using nlohmann::json;

const char* const kCorrupt = "the file is corrupt or truncated; use an intact copy";

[[noreturn]] void fail(const std::string& path, const std::string& problem,
                       const std::string& fix = kCorrupt) {
  throw Error(str("safetensors file '", path, "': ", problem, "; ", fix));
}

// The dtypes tx holds; other valid safetensors dtypes get their own message.
bool parse_dtype(const std::string& s, DType* out) {
  if (s == "F32")
    *out = DType::f32;
  else if (s == "F16")
    *out = DType::f16;
  else if (s == "BF16")
    *out = DType::bf16;
  else if (s == "I32")
    *out = DType::i32;
  else if (s == "I8")
    *out = DType::i8;
  else
    return false;
  return true;
}

bool is_foreign_dtype(const std::string& s) {
  static const std::set<std::string> known = {"BOOL", "U8",  "U16", "I16",     "U32",
                                              "I64",  "U64", "F64", "F8_E4M3", "F8_E5M2"};
  return known.count(s) != 0;
}

// Parses the header; duplicate keys (which nlohmann would silently collapse) are an error.
json parse_json(const std::string& path, const std::string& text) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string duplicate;
  auto callback = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start)
      keys.emplace_back();
    else if (event == json::parse_event_t::object_end)
      keys.pop_back();
    else if (event == json::parse_event_t::key &&
             !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(text, callback);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number that overflows
    std::string what = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " prefix: keep the message one readable
    // line.
    size_t bracket = what.find("] ");
    if (bracket != std::string::npos) what = what.substr(bracket + 2);
    fail(path, "the header is not valid JSON (" + what + ")",
         "the file is corrupt or not a safetensors file");
  }
  if (!duplicate.empty()) fail(path, "the header names '" + duplicate + "' twice");
  if (!header.is_object()) fail(path, "the header is JSON but not an object");
  return header;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const json& meta) {
  if (!meta.is_object()) fail(path, "'__metadata__' is not an object of strings");
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : meta.items()) {
    if (!value.is_string())
      fail(path, "'__metadata__' value for '" + key + "' is not a string",
           "metadata must map strings to strings; rewrite the file");
    out[key] = value.get<std::string>();
  }
  return out;
}

uint64_t checked_bytes(const std::string& path, const std::string& name, const json& shape,
                       DType dtype, Shape* out) {
  if (!shape.is_array()) fail(path, "tensor '" + name + "' has a 'shape' that is not an array");
  if (shape.size() > static_cast<size_t>(Shape::kMaxDims))
    fail(path, "tensor '" + name + "' has shape " + shape.dump() + ": tx tensors have at most " +
                   std::to_string(Shape::kMaxDims) + " dimensions");
  std::vector<int64_t> dims;
  uint64_t numel = 1;
  for (const json& d : shape) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX))
      fail(path, "tensor '" + name + "' has shape " + shape.dump() +
                     ", whose dimensions are not all non-negative integers");
    uint64_t v = d.get<uint64_t>();
    if (__builtin_mul_overflow(numel, v, &numel))
      fail(path, "tensor '" + name + "' has shape " + shape.dump() + ", too large to hold");
    dims.push_back(static_cast<int64_t>(v));
  }
  uint64_t bytes = 0;
  if (numel > uint64_t(INT64_MAX) || __builtin_mul_overflow(numel, size_of(dtype), &bytes))
    fail(path, "tensor '" + name + "' has shape " + shape.dump() + ", too large to hold");
  *out = Shape(std::move(dims));
  return bytes;
}

TensorEntry parse_entry(const std::string& path, const std::string& name, const json& info,
                        uint64_t buffer_size) {
  if (!info.is_object()) fail(path, "the header entry for tensor '" + name + "' is not an object");
  for (const auto& [key, value] : info.items()) {
    (void)value;
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      fail(path, "tensor '" + name + "' has an unknown header field '" + key + "'",
           "expected only dtype, shape and data_offsets; the file is corrupt");
  }
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!info.contains(key)) fail(path, "tensor '" + name + "' has no '" + key + "'");

  TensorEntry e;
  e.name = name;
  const json& dtype = info["dtype"];
  if (!dtype.is_string()) fail(path, "tensor '" + name + "' has a 'dtype' that is not a string");
  std::string dt = dtype.get<std::string>();
  if (!parse_dtype(dt, &e.dtype)) {
    if (is_foreign_dtype(dt))
      fail(path, "tensor '" + name + "' has dtype " + dt + ", which tx does not read",
           "convert it to F32, F16, BF16, I32 or I8 before loading (e.g. in Python: "
           "t.to(torch.float32) or t.astype(numpy.int32))");
    fail(path, "tensor '" + name + "' has unknown dtype '" + dt + "'",
         "tx reads F32, F16, BF16, I32 and I8; the file is corrupt or from an unsupported writer");
  }
  uint64_t bytes = checked_bytes(path, name, info["shape"], e.dtype, &e.shape);

  const json& offsets = info["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    fail(path, "tensor '" + name + "' has data_offsets " + offsets.dump() +
                   ", not two non-negative integers [begin, end]");
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  std::string range = "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
  if (e.end < e.begin)
    fail(path, "tensor '" + name + "' has data_offsets " + range + " that end before they begin");
  if (e.end > buffer_size)
    fail(path, "tensor '" + name + "' has data_offsets " + range +
                   " beyond the end of the data buffer (" + std::to_string(buffer_size) +
                   " bytes)");
  if (e.end - e.begin != bytes)
    fail(path, str("tensor '", name, "' is ", dt, e.shape.str(), ", which needs ", bytes,
                   " bytes, but its data_offsets ", range, " span ", e.end - e.begin));
  return e;
}

// Tensors must tile the buffer exactly: no overlap, no hole, nothing after the last one.
void check_layout(const std::string& path, const std::vector<TensorEntry>& sorted,
                  uint64_t buffer_size) {
  uint64_t expected = 0;
  const TensorEntry* previous = nullptr;
  for (const TensorEntry& e : sorted) {
    if (e.begin < expected)
      fail(path, str("tensors '", previous->name, "' [", previous->begin, ", ", previous->end,
                     "] and '", e.name, "' [", e.begin, ", ", e.end, "] overlap"));
    if (e.begin > expected)
      fail(path, str(e.begin - expected, " unused bytes lie before tensor '", e.name, "' (offset ",
                     expected, " to ", e.begin, ")"));
    expected = e.end;
    previous = &e;
  }
  if (expected != buffer_size)
    fail(path, str(buffer_size - expected, " bytes of trailing garbage follow the last tensor",
                   " (data ends at ", expected, " of ", buffer_size, ")"));
}

}  // namespace

SafetensorsReader::SafetensorsReader(const std::string& path) : path_(path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    std::string reason = std::strerror(errno);
    throw Error(str("cannot open safetensors file '", path, "': ", reason,
                    "; check the path and permissions"));
  }
  if (S_ISDIR(st.st_mode))
    throw Error(str("cannot open safetensors file '", path,
                    "': it is a directory; give the path of a .safetensors file"));
  in_.open(path, std::ios::binary);
  if (!in_)
    throw Error(str("cannot open safetensors file '", path,
                    "': permission denied or unreadable; check the permissions"));
  uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8)
    fail(path, str("it is ", file_size, " bytes long, shorter than the 8-byte header length"),
         "the file is truncated or not a safetensors file");

  unsigned char prefix[8];
  in_.read(reinterpret_cast<char*>(prefix), 8);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | prefix[i];
  if (header_size > file_size - 8)
    fail(path,
         str("the header length ", header_size, " is larger than the ", file_size - 8,
             " bytes that follow it"),
         "the file is truncated or not a safetensors file");

  std::string text(header_size, '\0');
  in_.read(&text[0], static_cast<std::streamsize>(header_size));
  if (!in_) fail(path, "reading the header failed");
  data_start_ = 8 + header_size;
  uint64_t buffer_size = file_size - data_start_;

  json header = parse_json(path, text);
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      metadata_ = parse_metadata(path, info);
      continue;
    }
    entries_.push_back(parse_entry(path, name, info, buffer_size));
  }
  // Empty tensors sort before a non-empty one at the same offset.
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const TensorEntry& a, const TensorEntry& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  check_layout(path, entries_, buffer_size);
  for (size_t i = 0; i < entries_.size(); ++i) index_[entries_[i].name] = i;
  if (const auto it = metadata_.find(kChecksumKey); it != metadata_.end()) {
    const json sums = json::parse(it->second, nullptr, false);
    if (!sums.is_object()) fail(path, str("its '", kChecksumKey, "' metadata is not an object"));
    for (const auto& [name, hex] : sums.items()) {
      const std::string text = hex.is_string() ? hex.get<std::string>() : std::string();
      if (text.size() != 8 || text.find_first_not_of("0123456789abcdef") != std::string::npos)
        fail(path, str("its '", kChecksumKey, "' metadata holds '", hex.dump(), "' for tensor '",
                       name, "', not 8 hex digits"));
      checksums_[name] = static_cast<uint32_t>(std::stoul(text, nullptr, 16));
    }
    metadata_.erase(it);
  }
}

const TensorEntry* SafetensorsReader::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

NamedTensor SafetensorsReader::read(const TensorEntry& entry) {
  NamedTensor t{entry.name, entry.dtype, entry.shape, {}};
  t.data.resize(entry.end - entry.begin);
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(data_start_ + entry.begin));
  in_.read(reinterpret_cast<char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
  if (!in_)
    fail(path_, "reading tensor '" + entry.name + "' failed",
         "the file changed or was truncated while being read; read it again");
  if (const auto it = checksums_.find(entry.name); it != checksums_.end())
    if (crc32_z(0, t.data.data(), t.data.size()) != it->second)
      fail(path_,
           str("tensor '", entry.name, "' does not match the checksum written with it (",
               kChecksumKey, ")"),
           "the file was damaged after tx wrote it (on disk, in a copy or a download): use an "
           "intact copy; a tool that rewrote its tensors on purpose must drop the tx.crc32 "
           "metadata entry");
  return t;
}

NamedTensor SafetensorsReader::read(const std::string& name) {
  const TensorEntry* entry = find(name);
  if (!entry)
    fail(path_, str("there is no tensor named '", name, "' (", entries_.size(), " tensors)"),
         "check the name or that the checkpoint belongs to this model");
  return read(*entry);
}

TensorFile SafetensorsReader::read_all() {
  TensorFile file;
  file.metadata = metadata_;
  file.tensors.reserve(entries_.size());
  for (const TensorEntry& e : entries_) file.tensors.push_back(read(e));
  return file;
}

TensorFile read_safetensors(const std::string& path) {
  return SafetensorsReader(path).read_all();
}

}  // namespace tx::io
