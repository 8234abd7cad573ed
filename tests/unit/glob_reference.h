// A direct reading of Redis's recursive stringmatchlen (case-sensitive, without its
// skipLongerMatches shortcut, so exponential: short inputs only), the model GlobMatch is
// checked against in glob_test and the glob fuzz target. Bytes past the pattern's end read as
// NUL, as they do in Redis's NUL-terminated argument strings.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

namespace prefixd::testing {

inline bool ReferenceGlob(std::string_view pattern, std::string_view text, int nesting = 0) {
  if (nesting > 1000) return false;
  auto at = [&](size_t i) { return i < pattern.size() ? pattern[i] : '\0'; };
  size_t p = 0, t = 0;
  while (p < pattern.size() && t < text.size()) {
    const char c = pattern[p];
    if (c == '*') {
      while (at(p + 1) == '*') ++p;
      if (p + 1 == pattern.size()) return true;
      for (size_t from = t; from < text.size(); ++from) {
        if (ReferenceGlob(pattern.substr(p + 1), text.substr(from), nesting + 1)) return true;
      }
      return false;
    } else if (c == '?') {
    } else if (c == '[') {
      ++p;
      const bool negate = at(p) == '^';
      if (negate) ++p;
      bool match = false;
      for (;; ++p) {
        const size_t left = pattern.size() - p;
        if (at(p) == '\\' && left >= 2) {
          ++p;
          if (pattern[p] == text[t]) match = true;
        } else if (at(p) == ']') {
          break;
        } else if (left == 0) {
          --p;
          break;
        } else if (left >= 3 && pattern[p + 1] == '-') {
          int lo = int8_t(pattern[p]), hi = int8_t(pattern[p + 2]), v = int8_t(text[t]);
          if (lo > hi) std::swap(lo, hi);
          if (v >= lo && v <= hi) match = true;
          p += 2;
        } else if (pattern[p] == text[t]) {
          match = true;
        }
      }
      if (negate) match = !match;
      if (!match) return false;
    } else {
      if (c == '\\' && pattern.size() - p >= 2) ++p;
      if (pattern[p] != text[t]) return false;
    }
    ++p;
    ++t;
    if (t == text.size()) {
      while (at(p) == '*') ++p;
      break;
    }
  }
  return p == pattern.size() && t == text.size();
}

}  // namespace prefixd::testing
