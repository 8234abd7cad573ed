// Redis's glob patterns for KEYS and SCAN MATCH, with the results of Redis 7.0.15's
// stringmatchlen (case-sensitive): '*', '?', '[...]', '[^...]', ranges, '\' escapes, its quirks
// at the pattern's end and its nesting limit. Binary-safe. Pure functions; any thread.
#pragma once

#include <string_view>

namespace prefixd {

// Redis gives up (no match) on a pattern whose matching reaches its 1001st '*' run that is not
// the pattern's last character: GlobMatch does the same, with no recursion.
inline constexpr int kGlobMaxStarRuns = 1000;

// Whether `text` matches `pattern` exactly as Redis's stringmatchlen(pattern, text, nocase=0):
// - '*' matches any run of bytes, '?' any one byte; '\x' matches x (a '\' at the end, itself).
// - '[abc]', '[^abc]', '[a-z]' (bounds in either order, compared as signed chars, as Redis on
//   x86), '\' escapes inside; ']' right after '[' or '[^' closes an empty class. An unclosed
//   class runs to the pattern's end.
// - Redis's edge cases: an empty text matches only the empty pattern (not even "*"; KEYS and
//   SCAN special-case the pattern "*" before matching, see MatchesEverything).
// Runs in O(|pattern| * |text|) time and O(1) space.
bool GlobMatch(std::string_view pattern, std::string_view text);

// The pattern KEYS and SCAN treat as "every key" without calling the matcher.
inline bool MatchesEverything(std::string_view pattern) { return pattern == "*"; }

}  // namespace prefixd
