#include "backend/registry.h"

#include <mutex>

namespace tx {

namespace {
std::vector<BackendEntry>& entries() {
  static std::vector<BackendEntry> list;
  return list;
}
std::mutex& entries_mutex() {
  static std::mutex m;
  return m;
}
const BackendEntry* find(const std::string& name) {
  for (const BackendEntry& e : entries())
    if (e.name == name) return &e;
  return nullptr;
}
std::string known_names() {
  std::string s;
  for (const BackendEntry& e : entries()) s += (s.empty() ? "" : ", ") + e.name;
  return s.empty() ? "none" : s;
}
}  // namespace

void register_backend(BackendEntry entry) {
  std::lock_guard<std::mutex> lock(entries_mutex());
  for (BackendEntry& e : entries())
    if (e.name == entry.name) {
      e = std::move(entry);
      return;
    }
  entries().push_back(std::move(entry));
}

std::vector<std::string> registered_backends() {
  std::lock_guard<std::mutex> lock(entries_mutex());
  std::vector<std::string> names;
  for (const BackendEntry& e : entries()) names.push_back(e.name);
  return names;
}

std::string backend_unavailable_reason(const std::string& name) {
  std::lock_guard<std::mutex> lock(entries_mutex());
  const BackendEntry* e = find(name);
  if (!e)
    return "backend '" + name + "' is not compiled into this build (have: " + known_names() + ")";
  return e->unavailable_reason ? e->unavailable_reason() : std::string();
}

std::unique_ptr<Backend> create_backend(const std::string& spec, BackendOptions options) {
  std::string name = spec;
  size_t colon = spec.find(':');
  if (colon != std::string::npos) {
    name = spec.substr(0, colon);
    std::string index = spec.substr(colon + 1);
    TX_CHECK(!index.empty() && index.size() <= 6 &&
                 index.find_first_not_of("0123456789") == std::string::npos,
             "--device '", spec, "': the part after ':' must be a device number, e.g. cuda:0");
    options.device_index = std::stoi(index);
  }
  BackendEntry entry;
  {
    std::lock_guard<std::mutex> lock(entries_mutex());
    const BackendEntry* e = find(name);
    TX_CHECK(e, "--device '", spec,
             "': no such backend in this build; choose one of: ", known_names());
    entry = *e;
  }
  std::string why = entry.unavailable_reason ? entry.unavailable_reason() : std::string();
  TX_CHECK(why.empty(), "--device '", spec, "' cannot run here: ", why);
  return entry.create(options);
}

}  // namespace tx
