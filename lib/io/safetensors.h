// Safetensors: reads and writes TensorFiles in the safetensors format (the checkpoint format).
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON header, then the data
// buffer. The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets relative to the buffer) and may hold "__metadata__" (string -> string). Tensors
// tile the buffer exactly: contiguous, non-overlapping, nothing after the last one.
// Host byte order is assumed little-endian (x86-64, aarch64).
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/tensor_file.h"

namespace tx::io {

// One tensor as the header describes it; offsets are relative to the data buffer.
struct TensorEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// The metadata entry in which tx's writer keeps each tensor's CRC-32 (a JSON object: name ->
// 8 hex digits), so that a byte changed on disk after the write is an error when the tensor is
// read, not a silently different model. The reader checks it and leaves it out of metadata();
// files from elsewhere have none and are read as they are.
constexpr const char* kChecksumKey = "tx.crc32";

// "F32", "F16", "BF16", "I32": the format's spelling of a dtype.
const char* safetensors_dtype(DType dtype);

// The padded JSON header (without the length prefix) for `file`: "__metadata__" first (with
// kChecksumKey added), then the tensors in file order with contiguous offsets. The same content
// always gives the same bytes. Throws tx::Error, naming `where`, for an invalid TensorFile
// (empty, reserved or repeated name, negative dimension, data size not numel * dtype size).
std::string safetensors_header(const TensorFile& file, const std::string& where = "<memory>");

// The whole file as bytes: length prefix, header, data.
std::string encode_safetensors(const TensorFile& file, const std::string& where = "<memory>");

// Writes atomically: validates, writes a temporary beside `path`, fsyncs and renames it into
// place. On error `path` is untouched and no temporary is left behind.
void write_safetensors(const std::string& path, const TensorFile& file);

// Reads and validates a whole file; tensors come in buffer order.
TensorFile read_safetensors(const std::string& path);

// Reads the header at construction (and validates all of it) and tensor data on demand, so
// listing a checkpoint or averaging many holds one tensor at a time.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<TensorEntry>& entries() const { return entries_; }  // by offset
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorEntry* find(const std::string& name) const;

  NamedTensor read(const TensorEntry& entry);
  // Throws tx::Error naming the file when there is no tensor `name`.
  NamedTensor read(const std::string& name);
  TensorFile read_all();

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t data_start_ = 0;  // 8 + header length
  std::vector<TensorEntry> entries_;
  std::unordered_map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
  std::unordered_map<std::string, uint32_t> checksums_;  // kChecksumKey's, by tensor name
};

}  // namespace tx::io
