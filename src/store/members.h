// Members: the value of a set or list key as the keyspace entry and its log record hold it —
// the members back to back, each as `u32 length` (little-endian) then its bytes — and the
// encoding rules Redis 7.0 applies to sets. Pure functions; any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "store/key_entry.h"

namespace prefixd::store {

Bytes EncodeMembers(const std::vector<std::string>& members);
// The members of `value`, or nullopt when it is not a well-formed encoding (a damaged record).
std::optional<std::vector<std::string>> DecodeMembers(std::string_view value);
// Whether DecodeMembers would succeed, without copying a member (a record's check).
bool ValidMembers(std::string_view value);

// Whether Redis would hold `member` in an intset: a canonical 64-bit integer (string2ll's rule).
bool IntsetMember(std::string_view member);
// The encoding a set has after members were added to one of `encoding` (Redis converts an
// intset to a hashtable on a non-integer member or past `max_intset` members, never back;
// set-max-intset-entries).
SetEncoding SetEncodingAfterAdd(SetEncoding encoding, const std::vector<std::string>& members,
                                size_t max_intset);
// An intset keeps its members in ascending numeric order (SMEMBERS replies them so).
void SortIntset(std::vector<std::string>& members);

}  // namespace prefixd::store
