#include "formats/npz.h"

#include <zip.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <set>

#include "core/error.h"
#include "core/half.h"

namespace tx::formats {
namespace {

size_t item_size(const std::string& descr) {
  if (descr == "<f4") return 4;
  if (descr == "<f2") return 2;
  if (descr == "|i1" || descr == "|u1" || descr == "|S1" || descr == "|b1" || descr == "<i1")
    return 1;
  return 0;
}

// The value of 'key' in numpy's header dict ("{'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), }"): the text after "'key':" up to the next top-level comma or brace.
std::string dict_value(const std::string& header, const std::string& key,
                       const std::string& where) {
  const std::string quoted = "'" + key + "'";
  size_t at = header.find(quoted);
  TX_CHECK(at != std::string::npos, where, ": the .npy header has no ", quoted,
           "; the file is damaged or not written by numpy or Marian");
  at = header.find(':', at + quoted.size());
  TX_CHECK(at != std::string::npos, where, ": the .npy header is damaged");
  ++at;
  while (at < header.size() && header[at] == ' ') ++at;
  size_t end = at;
  if (end < header.size() && header[end] == '(') {
    end = header.find(')', end);
    TX_CHECK(end != std::string::npos, where, ": the .npy header's shape is not closed");
    return header.substr(at, end + 1 - at);
  }
  while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  return header.substr(at, end - at);
}

std::vector<int64_t> parse_shape(const std::string& text, const std::string& where) {
  std::vector<int64_t> shape;
  size_t i = 1;  // after '('
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
    if (i >= text.size() || text[i] == ')') break;
    int64_t v = 0;
    bool digits = false;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      TX_CHECK(v < (int64_t{1} << 40), where, ": a dimension of the .npy shape ", text,
               " is too large");
      v = v * 10 + (text[i] - '0');
      digits = true;
      ++i;
    }
    if (i < text.size() && text[i] == 'L') ++i;  // Python 2's long suffix
    TX_CHECK(digits, where, ": the .npy shape ", text, " is not a tuple of integers");
    shape.push_back(v);
    TX_CHECK(shape.size() <= 8, where, ": the .npy shape ", text, " has too many dimensions");
  }
  return shape;
}

}  // namespace

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<float> NpyArray::floats() const {
  const int64_t n = numel();
  std::vector<float> out(static_cast<size_t>(n));
  if (descr == "<f4") {
    std::memcpy(out.data(), data.data(), out.size() * 4);
  } else if (descr == "<f2") {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, data.data() + 2 * i, 2);
      out[i] = f16_to_float(h);
    }
  } else {
    throw Error(str("array '", name, "' has dtype ", descr,
                    ", not a float array; the model holds a tensor tx cannot read"));
  }
  return out;
}

std::string NpyArray::text() const {
  std::string s(data.begin(), data.end());
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

NpyArray parse_npy(const std::vector<uint8_t>& bytes, const std::string& where) {
  static const char kMagic[] = "\x93NUMPY";
  TX_CHECK(bytes.size() >= 10 && std::memcmp(bytes.data(), kMagic, 6) == 0, where,
           ": not a .npy array (no \\x93NUMPY magic); the file is damaged or not a model");
  const int major = bytes[6];
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = bytes[8] | (bytes[9] << 8);
    offset = 10;
  } else {
    TX_CHECK((major == 2 || major == 3) && bytes.size() >= 12, where, ": .npy version ", major,
             " is not supported (1, 2 and 3 are)");
    header_len = static_cast<size_t>(bytes[8]) | (static_cast<size_t>(bytes[9]) << 8) |
                 (static_cast<size_t>(bytes[10]) << 16) | (static_cast<size_t>(bytes[11]) << 24);
    offset = 12;
  }
  TX_CHECK(header_len <= bytes.size() - offset, where, ": the .npy header is cut short");
  const std::string header(bytes.begin() + offset, bytes.begin() + offset + header_len);
  NpyArray a;
  std::string descr = dict_value(header, "descr", where);
  TX_CHECK(descr.size() >= 2 && descr.front() == '\'' && descr.back() == '\'', where,
           ": the .npy dtype ", descr, " is not a simple type");
  a.descr = descr.substr(1, descr.size() - 2);
  TX_CHECK(item_size(a.descr) != 0, where, ": dtype '", a.descr,
           "' is not supported (float32, float16 and bytes are)");
  TX_CHECK(dict_value(header, "fortran_order", where) == "False", where,
           ": the array is in Fortran order; save it in C order");
  const std::string shape = dict_value(header, "shape", where);
  TX_CHECK(!shape.empty() && shape.front() == '(', where, ": the .npy shape ", shape,
           " is not a tuple");
  a.shape = parse_shape(shape, where);
  int64_t n = 1;
  for (int64_t d : a.shape) {
    // The data must fit the file: a product beyond it is damage, and must not overflow.
    TX_CHECK(d == 0 || n <= static_cast<int64_t>(bytes.size()) / d, where, ": the .npy shape ",
             shape, " holds more values than the file has bytes; the file is damaged");
    n *= d;
  }
  const size_t data_offset = offset + header_len;
  const auto size = static_cast<uint64_t>(n) * item_size(a.descr);
  TX_CHECK(n >= 0 && size == bytes.size() - data_offset, where, ": the array holds ",
           bytes.size() - data_offset, " bytes but its shape ", shape, " needs ", size,
           "; the file is damaged");
  a.data.assign(bytes.begin() + data_offset, bytes.end());
  return a;
}

namespace {

// `archive_bytes`: the size of the whole file, which bounds what an entry can hold.
std::vector<NpyArray> read_archive(zip_t* archive, size_t archive_bytes, const std::string& where) {
  std::unique_ptr<zip_t, decltype(&zip_discard)> owner(archive, &zip_discard);
  const zip_int64_t entries = zip_get_num_entries(archive, 0);
  std::vector<NpyArray> arrays;
  std::set<std::string> names;
  for (zip_int64_t i = 0; i < entries; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    TX_CHECK(zip_stat_index(archive, i, 0, &st) == 0 && (st.valid & ZIP_STAT_SIZE) &&
                 (st.valid & ZIP_STAT_NAME),
             where, ": cannot read entry ", i, " of the archive; the file is damaged");
    std::string name = st.name;
    TX_CHECK(name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0, where, ": entry '",
             name, "' is not a .npy array; not a numpy .npz model");
    // A zip appended to holds a name twice; numpy and marian take the last, which may not be
    // the one meant.
    TX_CHECK(names.insert(name).second, where, " holds two arrays named '",
             name.substr(0, name.size() - 4),
             "' (an archive written to twice); save the model again with one of each");
    // Deflate expands at most ~1032 times: an entry claiming more than that of the file's size
    // is damaged, and must not make us allocate what it claims.
    TX_CHECK((st.valid & ZIP_STAT_COMP_SIZE) && st.comp_size <= archive_bytes &&
                 st.size <= 1100 * static_cast<uint64_t>(st.comp_size) + 4096,
             where, ": entry '", name, "' claims ", st.size,
             " bytes, more than the archive can hold; the file is damaged");
    std::vector<uint8_t> bytes(static_cast<size_t>(st.size));
    std::unique_ptr<zip_file_t, decltype(&zip_fclose)> file(zip_fopen_index(archive, i, 0),
                                                            &zip_fclose);
    TX_CHECK(file, where, ": cannot open entry '", name, "' (", zip_strerror(archive),
             "); the file is damaged");
    const zip_int64_t got = bytes.empty() ? 0 : zip_fread(file.get(), bytes.data(), bytes.size());
    TX_CHECK(got == static_cast<zip_int64_t>(bytes.size()), where, ": entry '", name,
             "' is cut short or damaged");
    // libzip checks an entry's CRC only when a read finds its end: a read of exactly its size
    // never did, and a model with damaged weights loaded as if whole.
    uint8_t past = 0;
    const zip_int64_t more = zip_fread(file.get(), &past, 1);
    TX_CHECK(more <= 0, where, ": entry '", name,
             "' holds more data than its recorded size; the file is damaged; copy or download the "
             "model again");
    if (more < 0) {
      const bool crc = zip_error_code_zip(zip_file_get_error(file.get())) == ZIP_ER_CRC;
      TX_CHECK(false, where, ": entry '", name, "' is damaged (", zip_file_strerror(file.get()),
               crc ? ": its data does not match its checksum" : "",
               "); copy or download the model again");
    }
    NpyArray a = parse_npy(bytes, str(where, " entry '", name, "'"));
    a.name = name.substr(0, name.size() - 4);
    arrays.push_back(std::move(a));
  }
  TX_CHECK(!arrays.empty(), where, " holds no arrays; give a Marian model.npz");
  return arrays;
}

// `head`: the file's first bytes. A zip's directory is at its end, so a file cut short (a copy
// or a download that stopped) starts as a zip and is not one to libzip.
[[noreturn]] void not_a_zip(const std::string& where, const std::string& why,
                            const std::string& head) {
  if (head.compare(0, 4, std::string("PK\x03\x04", 4)) == 0)
    throw Error(str(where,
                    " is damaged or cut short: it starts as a zip archive but its "
                    "directory at the end is missing or broken (",
                    why, "); copy or download the model again"));
  throw Error(str(where, " is not a zip archive (", why,
                  "); a Marian model is a .npz file as marian writes it"));
}

}  // namespace

std::vector<NpyArray> read_npz(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  TX_CHECK(in, "cannot open model '", path, "': no such file; give the path of a model.npz");
  const std::streamoff size = in.tellg();
  TX_CHECK(size >= 0, "cannot read model '", path, "'; give the path of a model.npz file");
  std::string head(4, '\0');
  in.seekg(0);
  in.read(head.data(), 4);
  head.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  in.close();
  // libzip reads each entry from the file: holding the whole file as well would be one more copy
  // of the model at the peak of loading.
  const std::string where = str("model '", path, "'");
  int code = 0;
  zip_t* archive = zip_open(path.c_str(), ZIP_RDONLY, &code);
  if (!archive) {
    zip_error_t error;
    zip_error_init_with_code(&error, code);
    const std::string why = zip_error_strerror(&error);
    zip_error_fini(&error);
    not_a_zip(where, why, head);
  }
  return read_archive(archive, static_cast<size_t>(size), where);
}

std::vector<NpyArray> read_npz_bytes(const std::vector<uint8_t>& bytes, const std::string& where) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* source = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
  TX_CHECK(source, where, ": cannot read it (", zip_error_strerror(&error), ")");
  zip_t* archive = zip_open_from_source(source, ZIP_RDONLY, &error);
  if (!archive) {
    zip_source_free(source);
    const std::string why = zip_error_strerror(&error);
    zip_error_fini(&error);
    not_a_zip(where, why,
              std::string(bytes.begin(), bytes.begin() + std::min<size_t>(bytes.size(), 4)));
  }
  zip_error_fini(&error);
  return read_archive(archive, bytes.size(), where);
}

}  // namespace tx::formats
