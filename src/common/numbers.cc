#include "common/numbers.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

namespace prefixd {

std::optional<int64_t> ParseInt64(std::string_view s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  if (s == "0") return 0;
  size_t i = 0;
  bool negative = false;
  if (s[0] == '-') {
    negative = true;
    i = 1;
    if (s.size() == 1) return std::nullopt;
  }
  if (s[i] < '1' || s[i] > '9') return std::nullopt;
  // 19 digits at most (20 overflow any int64): below 10^19, so the sum cannot wrap a uint64 and
  // one range check at the end replaces one per digit.
  if (s.size() - i > 19) return std::nullopt;
  uint64_t v = 0;
  for (; i < s.size(); ++i) {
    const auto digit = static_cast<uint64_t>(static_cast<unsigned char>(s[i]) - '0');
    if (digit > 9) return std::nullopt;
    v = v * 10 + digit;
  }
  if (negative) {
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + 1) return std::nullopt;
    return static_cast<int64_t>(0 - v);
  }
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::string FormatDouble(double value) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (std::isnan(value)) return "nan";
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "%.17g", value);
  return std::string(buf, static_cast<size_t>(n));
}

std::string HumanBytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "K", "M", "G", "T", "P"};
  double d = static_cast<double>(bytes);
  int unit = 0;
  while (d >= 1024 && unit < 5) {
    d /= 1024;
    ++unit;
  }
  char buf[32];
  if (unit == 0) {
    std::snprintf(buf, sizeof buf, "%lluB", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f%s", d, kUnits[unit]);
  }
  return buf;
}

// Redis's string2ld: the whole text is a long double (strtold), no leading space, no NaN, no
// overflow or underflow to zero.
std::optional<long double> ParseLongDouble(std::string_view text) {
  constexpr size_t kMaxChars = 5 * 1024;
  if (text.empty() || text.size() >= kMaxChars) return std::nullopt;
  const std::string buffer(text);
  errno = 0;
  char* end = nullptr;
  const long double value = std::strtold(buffer.c_str(), &end);
  // strtold stops at an embedded NUL: the text is then not a number, as in Redis 7.0's string2ld.
  if (std::isspace(static_cast<unsigned char>(buffer[0])) ||
      end != buffer.c_str() + buffer.size() || std::isnan(value) || errno == EINVAL ||
      (errno == ERANGE && (value == HUGE_VALL || value == -HUGE_VALL || value == 0))) {
    return std::nullopt;
  }
  return value;
}

// Redis's ld2string in LD_STR_HUMAN mode: %.17Lf without trailing zeros, "-0" as "0".
std::string HumanLongDouble(long double value) {
  std::vector<char> buffer(5 * 1024);
  int n = std::snprintf(buffer.data(), buffer.size(), "%.17Lf", value);
  if (n < 0 || static_cast<size_t>(n) >= buffer.size()) return "0";
  std::string out(buffer.data(), static_cast<size_t>(n));
  if (out.find('.') != std::string::npos) {
    while (!out.empty() && out.back() == '0') out.pop_back();
    if (!out.empty() && out.back() == '.') out.pop_back();
  }
  if (out == "-0") out = "0";
  return out;
}

// A SCAN cursor as Redis's parseScanCursorOrReply reads it with strtoul: an optional sign
// ("-1" wraps to 2^64 - 1), decimal digits, nothing after them, no overflow.
std::optional<uint64_t> ParseScanCursor(std::string_view text) {
  bool negative = false;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return negative ? uint64_t{0} - value : value;
}

}  // namespace prefixd
