// What the stream families (stream_commands.cc: entries; stream_group_commands.cc: consumer
// groups) share: a stream key as a command loads it, its records, ids as arguments and in
// replies, XREAD's and XREADGROUP's arguments, and the tables' spec helpers. Called on the
// handler's io thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "engine/command.h"
#include "engine/registry.h"
#include "store/stream.h"

namespace prefixd::commands::stream {

using store::KeyType;
using store::StreamGroup;
using store::StreamGroups;
using store::StreamId;
using store::StreamReader;

// Redis's stream-node-max-entries: the entries one of its nodes takes, which approximate (~)
// trimming removes whole (TrimCount) and XINFO STREAM counts as radix-tree keys.
inline constexpr uint64_t kNodeEntries = 100;

// A stream key as a command reads it: `exists` false for a missing key.
struct Loaded {
  bool exists = false;
  Bytes value;
  store::StreamMeta meta;
  std::optional<StreamReader> reader;  // absent when only the header was read
  const StreamReader& r() const { return *reader; }
  // The groups, decoded: whether the entries were read or not (none for a missing key).
  StreamGroups Groups() const;
};

// Looks `key` up as Redis's lookupKeyRead/Write. False, with -WRONGTYPE queued, when it holds
// another type. `index` false reads the header only.
bool Load(Context& ctx, std::string_view key, bool read, Loaded& out, bool index = true);
// Logs one StreamValue record of `op` for `key`; false with the refusal queued.
bool Log(Context& ctx, std::string_view key, uint32_t op, uint64_t count, Bytes value);

// An unsigned 64-bit decimal, digits only (Redis's string2ull).
std::optional<uint64_t> ParseUint64(std::string_view text);
// An id as Redis's streamGenericParseIDOrReply: "ms-seq", "ms" (seq `missing_seq`), "-" and "+".
std::optional<StreamId> ParseId(std::string_view text, uint64_t missing_seq,
                                bool* seq_given = nullptr);
// ParseId with Redis's error queued for a bad id.
std::optional<StreamId> IdArgument(Context& ctx, std::string_view text, uint64_t missing_seq);
// A strict id ("-" and "+" refused), as XDEL, XACK, XGROUP and XSETID read theirs.
std::optional<StreamId> StrictId(Context& ctx, std::string_view text, uint64_t missing_seq = 0);
// The strict ids from argument `first` on (XDEL's and XACK's lists); nullopt with the error
// queued at the first bad one.
std::optional<std::vector<StreamId>> StrictIds(Context& ctx, size_t first);

// The id just after / before `id`; nullopt past either end.
std::optional<StreamId> Next(StreamId id);
std::optional<StreamId> Prev(StreamId id);

void ReplyId(Context& ctx, StreamId id);
void ReplyEntry(Context& ctx, const store::StreamEntryView& e);
// XREAD's and XREADGROUP's reply: a map of key to entries under RESP3, an array of
// [key, entries] pairs under RESP2 (each pair opened by the caller).
void StreamsReplyLen(Context& ctx, size_t n);

// XREAD's and XREADGROUP's arguments.
struct ReadArgs {
  int64_t count = 0;  // 0: no limit
  bool block = false;
  bool noack = false;
  std::string_view group, consumer;
  std::vector<std::string_view> keys, ids;
};
std::optional<ReadArgs> ParseRead(Context& ctx, bool with_group);

// Adds a stream command of one key at argument 1: MakeSpec, then what Redis 7.0.15's COMMAND
// reports.
class OneKeyStream {
 public:
  explicit OneKeyStream(Registry& registry) : registry_(registry) {}
  void operator()(std::string name, int arity, uint32_t flags, std::string syntax,
                  std::string summary, Handler h, std::string complexity, std::string since,
                  uint32_t key_flags, std::vector<Arg> args, std::vector<std::string> tips = {},
                  std::string notes = {}) const;

 private:
  Registry& registry_;
};

// Adds XREAD or XREADGROUP: keys after STREAMS, flagged blocking as Redis's are (a BLOCK that
// would wait is refused here).
void AddStreamsCommand(Registry& r, std::string name, int arity, uint32_t flags, std::string syntax,
                       std::string summary, Handler h, uint32_t key_flags, std::vector<Arg> args);

}  // namespace prefixd::commands::stream
