// Stream: the value of a stream key as the keyspace entry and its log records hold it, and the
// operations the stream records carry (docs/storage-format.md, type 19). Pure functions over
// encoded values; any thread.
//
// Layout (little-endian): an 80-byte header — last id 16 | max deleted id 16 | first id 16 |
// entries added 8 | length 8 | groups offset 8 | end 8 — then the entries in id order, each
// `ms 8 | seq 8 | body length 4 | body` (the body is the field/value strings as
// store/members.h encodes them), then the consumer groups, then (from 16 KiB on) the seek index
// and unused room up to the buffer's end. Entries come before the groups so an append writes its
// entry into the room and moves only the groups' (and the index's) bytes; the groups are
// re-encoded whole when they change (their size is the pending entries and consumers, not the
// stream's).
//
// The seek index sits at `end`, past the bytes in use, so records, DUMP, snapshots and digests
// never carry it: `magic 4 | stride 4 | slots 8`, then for every 64th entry (the 0th, 64th, ...)
// its byte offset, 8 bytes: 16 bytes and 1/8 byte per entry (0.3% of entries of 40 bytes). Every
// value with room has one: built whole where a value is assembled (an append that copies, a trim,
// XDEL, new groups that do not fit, a whole value loaded from a snapshot, RESTORE or COPY), and
// moved and extended by the edits in place. A read by id finds its place by a binary search over
// the slots, then steps over fewer than 64 entries; newest first it reads a stride at a time
// backwards. A value without room (below 16 KiB, a few hundred entries) is read from its oldest
// entry.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"

namespace prefixd::store {

struct StreamId {
  uint64_t ms = 0;
  uint64_t seq = 0;
  auto operator<=>(const StreamId&) const = default;
  std::string ToString() const;
  static constexpr StreamId Max() { return {UINT64_MAX, UINT64_MAX}; }
};

struct StreamMeta {
  StreamId last;         // last-generated-id
  StreamId max_deleted;  // max-deleted-entry-id
  StreamId first;        // recorded-first-entry-id
  uint64_t entries_added = 0;
  uint64_t length = 0;
};

// One entry as read from a value: its id and its encoded field/value strings.
struct StreamEntryView {
  StreamId id;
  std::string_view body;
  std::vector<std::string> Fields() const;
};

// A consumer group's pending entry (PEL) and consumer, as Redis 7.0 keeps them.
struct StreamPending {
  std::string consumer;
  uint64_t delivery_ms = 0;
  uint64_t deliveries = 0;
};
struct StreamConsumer {
  uint64_t seen_ms = 0;
};
inline constexpr int64_t kEntriesReadUnknown = -1;  // Redis's SCG_INVALID_ENTRIES_READ
struct StreamGroup {
  StreamId last_delivered;
  int64_t entries_read = kEntriesReadUnknown;
  std::map<StreamId, StreamPending> pending;
  std::map<std::string, StreamConsumer> consumers;  // by name, as Redis's rax orders them
};
using StreamGroups = std::map<std::string, StreamGroup>;  // by name

// A read-only view of an encoded stream (the value must outlive it).
class StreamReader {
 public:
  // nullopt when `value` is not a well-formed stream (a damaged record).
  static std::optional<StreamReader> Open(std::string_view value);
  const StreamMeta& meta() const { return meta_; }
  const std::vector<StreamEntryView>& entries() const { return entries_; }
  std::string_view groups_bytes() const { return groups_; }
  StreamGroups Groups() const;
  // The index of the first entry with an id >= `id` (entries().size() when none).
  size_t LowerBound(StreamId id) const;

 private:
  StreamMeta meta_;
  std::vector<StreamEntryView> entries_;
  std::string_view groups_;
};

// The header alone (O(1)): nullopt when `value` is too short to hold one.
std::optional<StreamMeta> ReadStreamMeta(std::string_view value);

// The entries of `value` with ids from `low` to `high`, at most `count` of them (0: no limit),
// oldest first, or newest first with `reverse`, read without a StreamReader (whose Open reads
// every entry into a vector: O(length) for each command). With the seek index: O(log(length) +
// 64 + count) either way. Without it (a small value), oldest first steps over the entries before
// `low` by their 20-byte heads and stops after the `count`th; newest first walks to `high`,
// keeping the last `count`. A malformed value gives the entries read before the damage.
std::vector<StreamEntryView> StreamEntriesBetween(std::string_view value, StreamId low,
                                                  StreamId high, size_t count, bool reverse);
// Whether `value` carries a seek index for its entries (a value with room does).
bool StreamHasSeekIndex(std::string_view value);
// The encoded groups of `value` (O(1); empty when the header is damaged).
std::string_view StreamGroupsBytes(std::string_view value);

// An empty stream (a key that exists with no entries).
Bytes EmptyStream();
// The body of an entry: `fields` alternating field and value.
Bytes EncodeStreamBody(const std::vector<std::string_view>& fields);
// An appended entry as its record carries it: `id` then the body.
Bytes EncodeStreamEntry(StreamId id, std::string_view body);
Bytes EncodeStreamGroups(const StreamGroups& groups);
std::optional<StreamGroups> DecodeStreamGroups(std::string_view bytes);
// The header as its record carries it for XSETID: last id, max deleted id, entries added.
Bytes EncodeStreamMetaChange(StreamId last, StreamId max_deleted, uint64_t entries_added);

// Whether each kind of record blob is well formed (a record's check).
bool ValidStream(std::string_view value);
bool ValidStreamEntry(std::string_view entry);
bool ValidStreamGroups(std::string_view groups);
bool ValidStreamIds(std::string_view ids);
bool ValidStreamMetaChange(std::string_view meta);

// The operations of the stream records, each applied to an encoded value (empty: a missing key,
// taken as an empty stream) and returning the new value.
// Appends `entry` (EncodeStreamEntry), then removes `trimmed` entries from the front.
Bytes StreamAppend(std::string_view value, std::string_view entry, uint64_t trimmed);
// Removes `count` entries from the front (XTRIM).
Bytes StreamTrim(std::string_view value, uint64_t count);
// Removes the entries whose ids `ids` lists (16 bytes each; absent ones are skipped) (XDEL).
Bytes StreamDelete(std::string_view value, std::string_view ids);
Bytes StreamReplaceGroups(std::string_view value, std::string_view groups);
// A whole value (a snapshot's, RESTORE's, COPY's) as memory holds it: from 16 KiB on its bytes in
// use with room and the seek index; below, the bytes as they are.
Bytes StreamWhole(std::string_view value);
Bytes StreamSetMeta(std::string_view value, std::string_view meta);
Bytes EncodeStreamIds(const std::vector<StreamId>& ids);

// The bytes of `value` in use (the header's end): what records, DUMP and digests carry.
size_t StreamUsedBytes(std::string_view value);
// StreamAppend without a trim, written into the room of the buffer at `data` (its owner's alone):
// false, with nothing written, when the room is too small.
bool StreamAppendInPlace(uint8_t* data, size_t size, std::string_view entry);
// StreamReplaceGroups the same way: false, nothing written, when the groups do not fit.
bool StreamReplaceGroupsInPlace(uint8_t* data, size_t size, std::string_view groups);

}  // namespace prefixd::store
