// Number formatting for logs and reports: digit grouping, fixed decimals, durations, the
// shortest text of a float.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <system_error>

namespace tx {

// 29000 -> "29,000", as in the training log.
inline std::string grouped(int64_t n) {
  const std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out = n < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// printf's %.Nf, which rounds the exact binary value like Python's f"{x:.Nf}" (sacreBLEU's
// scores).
inline std::string fixed(double value, int decimals) {
  std::string out(static_cast<size_t>(std::snprintf(nullptr, 0, "%.*f", decimals, value)), ' ');
  std::snprintf(out.data(), out.size() + 1, "%.*f", decimals, value);
  return out;
}

// "1h02m", "4m05s", "12s".
inline std::string duration_text(double seconds) {
  const auto s = static_cast<int64_t>(seconds > 0 ? seconds : 0);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(s / 3600), (long long)(s / 60 % 60));
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%llds", (long long)s);
  return buf;
}

// 16 hex digits: a 64-bit hash as text (fingerprints, batch plans).
inline std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// The shortest text that reads back as exactly `v` ("0.1" for 0.1f, every bit kept), so that two
// runs compare exactly and read as short as six digits allow.
inline std::string shortest(float v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, ec == std::errc() ? end : buf);
}

// The double nearest that text, for JSON: 0.1f is written 0.1 rather than 0.10000000149011612
// and still reads back as the same float.
inline double shortest_double(float v) {
  return std::isfinite(v) ? std::strtod(shortest(v).c_str(), nullptr) : static_cast<double>(v);
}

}  // namespace tx
