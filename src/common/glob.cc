#include "common/glob.h"

#include <cstddef>
#include <cstdint>
#include <utility>

namespace prefixd {
namespace {

// Matches one byte against the class opening at pattern[pos] ('['). Returns whether it matched
// and leaves `pos` on the class's last character: its ']', or the pattern's last character
// when the class is never closed (Redis's reading, kept byte for byte).
bool MatchClass(std::string_view pattern, size_t& pos, char byte) {
  const size_t end = pattern.size();
  ++pos;
  const bool negate = pos < end && pattern[pos] == '^';
  if (negate) ++pos;
  bool matched = false;
  for (;; ++pos) {
    if (end - pos >= 2 && pattern[pos] == '\\') {
      ++pos;
      matched |= pattern[pos] == byte;
    } else if (pos == end) {
      --pos;
      break;
    } else if (pattern[pos] == ']') {
      break;
    } else if (end - pos >= 3 && pattern[pos + 1] == '-') {
      // Redis compares plain chars, signed on x86: "[a-\xff]" spans \xff..a.
      int low = static_cast<int8_t>(pattern[pos]), high = static_cast<int8_t>(pattern[pos + 2]);
      if (low > high) std::swap(low, high);
      const int value = static_cast<int8_t>(byte);
      matched |= value >= low && value <= high;
      pos += 2;
    } else {
      matched |= pattern[pos] == byte;
    }
  }
  return matched != negate;
}

}  // namespace

bool GlobMatch(std::string_view pattern, std::string_view text) {
  constexpr size_t kNone = static_cast<size_t>(-1);
  const size_t plen = pattern.size(), tlen = text.size();
  size_t p = 0, t = 0;
  // The latest '*' run: where the pattern resumes after it, where in the text the run's
  // current attempt ends, and its ordinal. Redis's recursion tries every shorter remainder
  // for this run and gives up as soon as that fails (skipLongerMatches): an earlier run
  // matching more cannot help. So backtracking to the latest run alone gives Redis's answer.
  size_t star_p = kNone, star_t = 0;
  int star_runs = 0, star_run_at_backtrack = 0;
  for (;;) {
    bool failed = false;
    while (p < plen && t < tlen) {
      if (pattern[p] == '*') {
        while (p + 1 < plen && pattern[p + 1] == '*') ++p;
        if (p + 1 == plen) return true;
        if (++star_runs > kGlobMaxStarRuns) return false;
        star_p = ++p;
        star_t = t;
        star_run_at_backtrack = star_runs;
        continue;
      }
      bool ok;
      switch (pattern[p]) {
        case '?':
          ok = true;
          break;
        case '[':
          ok = MatchClass(pattern, p, text[t]);
          break;
        case '\\':
          if (plen - p >= 2) ++p;
          ok = pattern[p] == text[t];
          break;
        default:
          ok = pattern[p] == text[t];
          break;
      }
      if (!ok) {
        failed = true;
        break;
      }
      ++p;
      ++t;
      if (t == tlen) {
        while (p < plen && pattern[p] == '*') ++p;
        break;
      }
    }
    if (!failed && p == plen && t == tlen) return true;
    // Let the latest '*' run take one more byte; it never takes the text's last byte, as
    // Redis's loop only recurses while text remains.
    if (star_p == kNone || ++star_t == tlen) return false;
    p = star_p;
    t = star_t;
    star_runs = star_run_at_backtrack;
  }
}

}  // namespace prefixd
