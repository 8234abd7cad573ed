// ASCII case helpers for command names and keywords (the protocol is case-insensitive ASCII).
// Pure functions; any thread.
#pragma once

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace prefixd {

// The server never sets a locale, so this is what std::tolower does in "C", inline (every
// request's command name is compared with it).
inline char FoldAscii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c | 0x20) : c; }

inline bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return FoldAscii(x) == FoldAscii(y);
         });
}

inline std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

inline std::string AsciiUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace prefixd
