#include "formats/model_file.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
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
    case Format::fairseq:
      return "fairseq";
  }
  return "?";
}

namespace {
const char* kind_name(VocabKind kind) {
  switch (kind) {
    case VocabKind::marian:
      return "marian";
    case VocabKind::pieces:
      return "pieces";
    case VocabKind::fairseq:
      return "fairseq";
    case VocabKind::tx:
      break;
  }
  return "tx";
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
    TX_CHECK(kind == "marian" || kind == "pieces" || kind == "fairseq" || kind == "tx", where,
             ": '", kVocabsKey, "' names an unknown vocabulary kind '", kind, "'");
    v.kind = kind == "marian"    ? VocabKind::marian
             : kind == "pieces"  ? VocabKind::pieces
             : kind == "fairseq" ? VocabKind::fairseq
                                 : VocabKind::tx;
    v.paths = j.at("paths").get<std::vector<std::string>>();
    v.tables = j.at("tables").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(str(where, ": metadata '", kVocabsKey, "' is damaged (", e.what(), ")"));
  }
  TX_CHECK((v.paths.size() == 2 || (v.paths.empty() && v.kind == VocabKind::marian)) &&
               (v.kind != VocabKind::pieces || v.tables.size() == 2) &&
               (v.kind != VocabKind::fairseq || v.tables.empty() || v.tables.size() == 2),
           where, ": metadata '", kVocabsKey, "' must name a source and a target vocabulary");
  return v;
}

data::Vocab open_vocab(const VocabFiles& vocabs, size_t side) {
  switch (vocabs.kind) {
    case VocabKind::pieces:
      return data::Vocab::pieces(vocabs.paths.at(side), vocabs.tables.at(side));
    case VocabKind::fairseq:
      return data::Vocab::fairseq(vocabs.paths.at(side),
                                  vocabs.tables.empty() ? "" : vocabs.tables.at(side));
    case VocabKind::marian:
      return data::Vocab::marian(vocabs.paths.at(side));
    case VocabKind::tx:
      break;
  }
  return data::Vocab(vocabs.paths.at(side));
}

void adopt_marian_ids(io::ModelConfig& config, const data::Vocab& src, const data::Vocab& tgt,
                      const std::string& where) {
  TX_CHECK(src.eos_id() == tgt.eos_id() && src.unk_id() == tgt.unk_id(), where,
           ": its source vocabulary '", src.path(), "' has eos ", src.eos_id(), " and unk ",
           src.unk_id(), ", its target vocabulary '", tgt.path(), "' eos ", tgt.eos_id(),
           " and unk ", tgt.unk_id(), "; tx reads Marian models whose vocabularies agree on them");
  config.eos_id = tgt.eos_id();
  config.unk_id = tgt.unk_id();
}

Format format_of(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    struct stat options;
    return ::stat((path + "/fairseq.json").c_str(), &options) == 0 ? Format::fairseq
                                                                   : Format::huggingface;
  }
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".npz") == 0) return Format::marian;
  // An .npz under another name is still a zip archive (a safetensors file starts with its
  // header's length, whose high bytes are 0).
  char magic[10] = {};
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    const size_t got = std::fread(magic, 1, sizeof magic, f);
    std::fclose(f);
    if (got >= 4 && std::memcmp(magic, "PK\x03\x04", 4) == 0) return Format::marian;
    // marian's binary models (common/binary.cpp) start with their format's version, 1 (2 when
    // encrypted); a safetensors header of 1 byte cannot be, and one of 2 is "{}".
    const bool encrypted = got == sizeof magic &&
                           std::memcmp(magic, "\x02\0\0\0\0\0\0\0", 8) == 0 &&
                           std::memcmp(magic + 8, "{}", 2) != 0;
    TX_CHECK(!encrypted, "model '", path,
             "' is an encrypted Marian binary model, which tx cannot read; translate it with "
             "marian-decoder and its key");
    TX_CHECK(got < 8 || std::memcmp(magic, "\x01\0\0\0\0\0\0\0", 8) != 0, "model '", path,
             "' is a Marian binary model, which tx does not read; convert a float32 one with "
             "`marian-conv --from ",
             path, " --to model.npz` and give the .npz (an int8-packed one cannot be)");
  }
  return Format::tx;
}

ModelFile read_model_file(const std::string& path) {
  switch (format_of(path)) {
    case Format::huggingface:
      return read_huggingface(path);
    case Format::marian:
      return read_marian(path);
    case Format::fairseq:
      return read_fairseq(path);
    case Format::tx:
      break;
  }
  ModelFile m;
  m.path = path;
  return m;
}

}  // namespace tx::formats
