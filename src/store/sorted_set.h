// SortedSet: the value of a sorted-set key as the keyspace entry and its log record hold it —
// (score, member) pairs in Redis's order (score ascending, then member bytes), each pair framed
// as two store/members.h items: the score's 8 IEEE-754 bytes (little-endian), then the member —
// and the encoding rules Redis 7.0 applies (listpack up to zset-max-listpack-entries members of
// at most zset-max-listpack-value bytes, then skiplist, never back). Pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "store/key_entry.h"

namespace prefixd::store {

struct ScoredMember {
  double score = 0;
  std::string member;
};
// A pair read in place from an encoded value (valid while the value's bytes are).
struct ScoredView {
  double score = 0;
  std::string_view member;
};

// Redis's order: by score, then by member bytes (memcmp, shorter first on a tie).
bool ZsetLess(double score_a, std::string_view a, double score_b, std::string_view b);

// `members` must already be in ZsetLess order without repeats (DecodeZset's output is).
Bytes EncodeZset(const std::vector<ScoredView>& members);
// The pairs of `value` in order, or nullopt when it is not a well-formed encoding (a damaged
// record: an odd item count, a score that is not 8 bytes or is NaN, pairs out of order or
// repeated).
std::optional<std::vector<ScoredMember>> DecodeZset(std::string_view value);
bool ValidZset(std::string_view value);
// DecodeZset without copying a member: each view points into `value`.
std::optional<std::vector<ScoredView>> DecodeZsetViews(std::string_view value);
// The pairs of a value the keyspace holds (checked when its record was), read in place without
// the checks: O(members), no allocation per member.
std::vector<ScoredView> ZsetViews(std::string_view value);
// How many members `value` holds (a valid encoding), without copying one.
size_t CountZset(std::string_view value);

// The operations the sorted-set record carries, applied to an encoded value: `scored` (an
// encoding of pairs) gives each named member its score, added where missing; `removed`
// (store/members.h items) takes members out. Each returns the new value (empty: no member left).
// O(members + named · log named): the value stays sorted, the named pairs are merged in.
Bytes ZsetPutScores(std::string_view value, std::string_view scored);
Bytes ZsetRemoveMembers(std::string_view value, std::string_view removed);

// The encoding after `added_members` new members of at most `longest_added` bytes joined a
// sorted set of `size_before` members in `encoding` (Redis converts a listpack before an insert
// that would pass either limit).
ZsetEncoding ZsetEncodingAfterAdd(ZsetEncoding encoding, size_t size_before, size_t added_members,
                                  size_t longest_added, size_t max_entries, size_t max_value);

// A score argument as Redis's getDoubleFromObject reads it (strtod over the whole text, no
// leading space, no NaN, no overflow); nullopt when it is not one.
std::optional<double> ParseScore(std::string_view text);

// A score range bound as Redis's zslParseRange reads one ("(" makes it exclusive).
struct ScoreBound {
  double value = 0;
  bool exclusive = false;
};
std::optional<ScoreBound> ParseScoreBound(std::string_view text);
// A lex range bound ("-", "+", "[member", "(member").
struct LexBound {
  enum Kind : uint8_t { kMin, kMax, kInclusive, kExclusive } kind = kMin;
  std::string member;
};
std::optional<LexBound> ParseLexBound(std::string_view text);
bool AboveMin(double score, const ScoreBound& min);
bool BelowMax(double score, const ScoreBound& max);
bool AboveMin(std::string_view member, const LexBound& min);
bool BelowMax(std::string_view member, const LexBound& max);

}  // namespace prefixd::store
