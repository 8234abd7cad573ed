// Members: the value of a set, list or hash key as the keyspace entry and its log record hold
// it — the members back to back, each as `u32 length` (little-endian) then its bytes; a hash's
// fields and values alternate — and the encoding rules Redis 7.0 applies to sets and hashes.
// Pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/bytes.h"
#include "store/key_entry.h"

namespace prefixd::store {

Bytes EncodeMembers(const std::vector<std::string>& members);

// An item's `u32 length` prefix.
inline uint32_t MemberLength(const uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
// Calls `visit` with each member of `value` in order; false when the encoding is cut or overlong.
template <class Visit>
bool ForEachMember(std::string_view value, Visit&& visit) {
  const auto* p = reinterpret_cast<const uint8_t*>(value.data());
  size_t at = 0;
  while (at < value.size()) {
    if (value.size() - at < 4) return false;
    const uint32_t length = MemberLength(p + at);
    at += 4;
    if (value.size() - at < length) return false;
    visit(value.substr(at, length));
    at += length;
  }
  return true;
}

// The members of `value`, or nullopt when it is not a well-formed encoding (a damaged record).
std::optional<std::vector<std::string>> DecodeMembers(std::string_view value);
// Whether DecodeMembers would succeed, without copying a member (a record's check).
bool ValidMembers(std::string_view value);

// How many members `value` holds (a valid encoding), without copying one.
size_t CountMembers(std::string_view value);
// The operations the set and list records carry, applied to an encoded value (`added`,
// `removed` and `elements` are encoded the same way). Each returns the new value; empty when no
// member is left.
// A set: `added` appended where not present yet (an intset then sorted), `removed` taken out.
Bytes AddMembers(std::string_view value, std::string_view added, bool intset);
Bytes RemoveMembers(std::string_view value, std::string_view removed);
// A list: `elements` before the head (in their final order) or after the tail; `count` elements
// off the head or the tail.
Bytes PushElements(std::string_view value, std::string_view elements, bool head);
Bytes PopElements(std::string_view value, uint64_t count, bool head);
// The first (`head`) or last `count` members of `value`, head side first.
std::vector<std::string> EdgeMembers(std::string_view value, uint64_t count, bool head);

// Whether Redis would hold `member` in an intset: a canonical 64-bit integer (string2ll's rule).
bool IntsetMember(std::string_view member);
// The encoding a set has after members were added to one of `encoding` (Redis converts an
// intset to a hashtable on a non-integer member or past `max_intset` members, never back;
// set-max-intset-entries).
SetEncoding SetEncodingAfterAdd(SetEncoding encoding, const std::vector<std::string>& members,
                                size_t max_intset);
// An intset keeps its members in ascending numeric order (SMEMBERS replies them so).
void SortIntset(std::vector<std::string>& members);

// A hash: `pairs` (field, value, ...) set in `value` — a field it has keeps its place and takes
// the new value, a new one is appended — or the fields named in `fields` taken out. Empty when
// no field is left.
Bytes SetFields(std::string_view value, std::string_view pairs);
Bytes RemoveFields(std::string_view value, std::string_view fields);
// How many of `fields` the hash `value` has (one walk).
size_t CountPresent(std::string_view value, const std::unordered_set<std::string_view>& fields);
// The value `field` has in the hash `value` (a view into it), or nullopt.
std::optional<std::string_view> FieldValue(std::string_view value, std::string_view field);
// Whether `value` is a valid encoding with as many values as fields.
bool ValidPairs(std::string_view value);

// The encoding a hash of `encoding` has after a write leaves it `entries` fields long, the longest
// field or value it wrote being `longest` bytes: Redis converts a listpack to a hashtable past
// hash-max-listpack-entries fields or on a field or value longer than hash-max-listpack-value,
// never back.
HashEncoding HashEncodingAfterSet(HashEncoding encoding, size_t entries, size_t longest,
                                  size_t max_entries, size_t max_value);

}  // namespace prefixd::store
