// Reading the JSON option files of imported models (Hugging Face's config.json, the converted
// fairseq.json): a field with a fallback, and whether a file beside it exists.
#pragma once

#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <string>

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
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(str(where, ": '", key, "' has an unexpected value ", j.at(key).dump(),
                    "; the file is damaged"));
  }
}

}  // namespace tx::formats
