#include "formats/model_file.h"

#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tx::formats {

const char* name_of(Format format) {
  switch (format) {
    case Format::tx:
      return "tx";
    case Format::marian:
      return "marian";
    case Format::huggingface:
      return "huggingface";
  }
  return "?";
}

namespace {
const char* kind_name(VocabKind kind) {
  return kind == VocabKind::marian ? "marian" : kind == VocabKind::pieces ? "pieces" : "tx";
}
}  // namespace

std::string vocab_files_json(const VocabFiles& vocabs) {
  auto absolute = [](const std::vector<std::string>& paths) {
    std::vector<std::string> out;
    for (const std::string& p : paths) out.push_back(std::filesystem::absolute(p).string());
    return out;
  };
  return nlohmann::json{{"kind", kind_name(vocabs.kind)},
                        {"paths", absolute(vocabs.paths)},
                        {"tables", absolute(vocabs.tables)}}
      .dump();
}

VocabFiles vocab_files_from_json(const std::string& text, const std::string& where) {
  VocabFiles v;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    const std::string kind = j.at("kind").get<std::string>();
    TX_CHECK(kind == "marian" || kind == "pieces" || kind == "tx", where, ": '", kVocabsKey,
             "' names an unknown vocabulary kind '", kind, "'");
    v.kind = kind == "marian"   ? VocabKind::marian
             : kind == "pieces" ? VocabKind::pieces
                                : VocabKind::tx;
    v.paths = j.at("paths").get<std::vector<std::string>>();
    v.tables = j.at("tables").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(str(where, ": metadata '", kVocabsKey, "' is damaged (", e.what(), ")"));
  }
  TX_CHECK((v.paths.size() == 2 || (v.paths.empty() && v.kind == VocabKind::marian)) &&
               (v.kind != VocabKind::pieces || v.tables.size() == 2),
           where, ": metadata '", kVocabsKey, "' must name a source and a target vocabulary");
  return v;
}

Format format_of(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Format::huggingface;
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npz") == 0) return Format::marian;
  return Format::tx;
}

ModelFile read_model_file(const std::string& path) {
  switch (format_of(path)) {
    case Format::huggingface:
      return read_huggingface(path);
    case Format::marian:
      return read_marian(path);
    case Format::tx:
      break;
  }
  ModelFile m;
  m.path = path;
  return m;
}

}  // namespace tx::formats
