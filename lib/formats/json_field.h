// Reading the JSON option files of imported models (Hugging Face's config.json, the converted
// fairseq.json): the file's object, a field with a fallback, and whether a file beside it
// exists.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

#include "core/error.h"

namespace tx::formats {

inline bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// j[key] as T, or `fallback` when absent or null; a value of another type is an error naming
// `where` (the file) and the key.
template <typename T>
T field(const nlohmann::json& j, const char* key, T fallback, const std::string& where) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  const nlohmann::json& v = j.at(key);
  auto unexpected = [&] {
    return Error(
        str(where, ": '", key, "' has an unexpected value ", v.dump(), "; the file is damaged"));
  };
  // An integer field takes an integer it can hold: nlohmann's get would truncate 32.7 to 32
  // and wrap 4294967298 to 2.
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!v.is_number_integer()) throw unexpected();
    if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(std::numeric_limits<T>::max())
                               : v.get<int64_t>() < int64_t(std::numeric_limits<T>::min()) ||
                                     v.get<int64_t>() > int64_t(std::numeric_limits<T>::max()))
      throw unexpected();
  }
  try {
    return v.get<T>();
  } catch (const nlohmann::json::exception&) {
    throw unexpected();
  }
}

// The JSON object in file `path`; anything else is an error naming the file.
inline nlohmann::json read_json_object(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    TX_CHECK(j.is_object(), path, ": not a JSON object; the file is damaged");
    return j;
  } catch (const nlohmann::json::exception& e) {
    throw Error(str(path, ": not valid JSON (", e.what(), "); the file is damaged"));
  }
}

}  // namespace tx::formats
