// Number formatting for logs and reports: digit grouping, fixed decimals, durations.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

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

}  // namespace tx
