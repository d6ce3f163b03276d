// npz: numpy's archive of arrays (a zip of .npy files), the format of Marian's models.
//
// Only what models hold is read: little-endian float32/float16 arrays and byte arrays (Marian's
// "special:model.yml"), C order. Anything else is refused with one line naming the array.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tx::formats {

struct NpyArray {
  std::string name;            // the zip entry's name without ".npy"
  std::string descr;           // numpy's dtype string: "<f4", "<f2", "|i1", "|S1", ...
  std::vector<int64_t> shape;  // () is a scalar
  std::vector<uint8_t> data;   // numel * item size bytes, row-major

  int64_t numel() const;
  std::vector<float> floats() const;  // "<f4" or "<f2" widened; throws otherwise
  std::string text() const;           // a byte array as a string, trailing NULs dropped
};

// Parses one .npy file held in memory; `where` names it in errors.
NpyArray parse_npy(const std::vector<uint8_t>& bytes, const std::string& where);

// Reads every array of an .npz file (stored or deflated entries). Throws tx::Error naming the
// file and the fix when it is not a zip of .npy files.
std::vector<NpyArray> read_npz(const std::string& path);
// The same from the bytes of a whole .npz (for the fuzz target and tests).
std::vector<NpyArray> read_npz_bytes(const std::vector<uint8_t>& bytes, const std::string& where);

}  // namespace tx::formats
