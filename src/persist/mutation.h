// Mutation: every kind of change to the stored state as one typed record: its payload fields in
// order (the codec, Describe and the golden tests follow them), the checks it must pass before it
// is logged or replayed, and how it is applied to the stores. The live path and replay apply a
// record through the same Apply. Adding a kind of change is adding a struct here (its fields'
// layout follows from it, record_layout.h) and its case in Check and Apply (mutation_apply.cc,
// whose static_asserts fail until both, and Apply's keyspace step, have one), and above this
// floor its line in engine/change_kinds.h (what it reaches; a static_assert there too). Pure
// data and functions; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "common/byte_pieces.h"
#include "common/bytes.h"
#include "persist/log_format.h"
#include "prefixd/status.h"
#include "store/keyspace.h"
#include "store/prefix_index.h"
#include "store/state_store.h"
#include "store/vector_store.h"

namespace prefixd::persist {

// Blobs below this size are copied into a record's encoding with its fields; larger ones are
// written from their own buffer, which the log holds until the record is written.
inline constexpr uint64_t kCopiedBlobBelow = 512;

// A string record's key, encoded as a `str` field. Owned (a compact copy, or a slice of the
// payload it was decoded from), or borrowed from a request's argument by a command whose record
// is encoded and applied before it returns, as a small value is (Bytes::Borrow): SET, INCR and
// MSET then copy their keys into the log and the keyspace only, not into the record first.
class RecordKey {
 public:
  RecordKey() = default;
  RecordKey(std::string_view key) : bytes_(Bytes::CopyCompact(key)) {}     // NOLINT: owned copy
  RecordKey(const std::string& key) : RecordKey(std::string_view(key)) {}  // NOLINT
  RecordKey(const char* key) : RecordKey(std::string_view(key)) {}         // NOLINT
  explicit RecordKey(Bytes bytes) : bytes_(std::move(bytes)) {}
  static RecordKey Borrow(std::string_view key) { return RecordKey(Bytes::Borrow(key)); }

  std::string_view view() const { return bytes_.view(); }
  operator std::string_view() const { return view(); }  // NOLINT: reads as the key's bytes
  size_t size() const { return bytes_.size(); }
  bool empty() const { return bytes_.empty(); }
  friend bool operator==(const RecordKey& a, std::string_view b) { return a.view() == b; }

 private:
  Bytes bytes_;
};

// A payload field: `u64 length`, then the bytes. Written as its pieces back to back (a snapshot
// sends a layer's chunks without joining them); decoding gives one piece, a slice of the payload.
struct Blob {
  BytePieces pieces;

  uint64_t size() const {
    uint64_t total = 0;
    for (const Bytes& piece : pieces) total += piece.size();
    return total;
  }
  // One buffer: the piece itself when there is one, else a joined copy.
  Bytes Joined() const;
};

// A payload field: `u32 count`, then count × (`u32 layer`, `u64 length`, the bytes).
using LayerBlobs = std::vector<std::pair<uint32_t, Bytes>>;

// Each record: kType, kName (for messages), Tie (its fields in payload order) and kFields (their
// names). `str` fields are std::string, `u32`/`u64` the integers.

struct SsmPut {  // all layers are applied together (MSTORE is one record)
  static constexpr RecordType kType = RecordType::kSsmPut;
  static constexpr std::string_view kName = "SSM put";
  static constexpr std::array<std::string_view, 2> kFields = {"sid", "layers"};
  std::string sid;
  LayerBlobs layers;
  static auto Tie(auto& r) { return std::tie(r.sid, r.layers); }
};

struct SsmDropLayer {
  static constexpr RecordType kType = RecordType::kSsmDropLayer;
  static constexpr std::string_view kName = "SSM drop layer";
  static constexpr std::array<std::string_view, 2> kFields = {"sid", "layer"};
  std::string sid;
  uint32_t layer = 0;
  static auto Tie(auto& r) { return std::tie(r.sid, r.layer); }
};

struct SsmDropSession {
  static constexpr RecordType kType = RecordType::kSsmDropSession;
  static constexpr std::string_view kName = "SSM drop session";
  static constexpr std::array<std::string_view, 1> kFields = {"sid"};
  std::string sid;
  static auto Tie(auto& r) { return std::tie(r.sid); }
};

struct FlushAll {  // every entry of every store
  static constexpr RecordType kType = RecordType::kFlushAll;
  static constexpr std::string_view kName = "flush all";
  static constexpr std::array<std::string_view, 0> kFields = {};
  static auto Tie(auto&) { return std::tie(); }
};

struct FlushDb {  // every entry of the record's database (the header says which)
  static constexpr RecordType kType = RecordType::kFlushDb;
  static constexpr std::string_view kName = "flush db";
  static constexpr std::array<std::string_view, 0> kFields = {};
  static auto Tie(auto&) { return std::tie(); }
};

struct SwapDb {  // databases `a` and `b` exchange everything they hold
  static constexpr RecordType kType = RecordType::kSwapDb;
  static constexpr std::string_view kName = "swap db";
  static constexpr std::array<std::string_view, 2> kFields = {"a", "b"};
  uint32_t a = 0;
  uint32_t b = 0;
  static auto Tie(auto& r) { return std::tie(r.a, r.b); }
};

struct KeyExpire {  // any key: EXPIRE and friends logged as the absolute time, PERSIST as 0
  static constexpr RecordType kType = RecordType::kKeyExpire;
  static constexpr std::string_view kName = "key expire";
  static constexpr std::array<std::string_view, 2> kFields = {"key", "at_ms"};
  std::string key;
  uint64_t at_ms = 0;  // Unix ms; 0: no expiry
  static auto Tie(auto& r) { return std::tie(r.key, r.at_ms); }
};

// A string key's whole new value (SET, INCR, APPEND, ... all log the result, as Redis
// propagates INCRBYFLOAT as SET), with its expiry in the same record: SET ... EX is one change.
struct StringSet {
  static constexpr RecordType kType = RecordType::kStringSet;
  static constexpr std::string_view kName = "string set";
  static constexpr std::array<std::string_view, 4> kFields = {"key", "flags", "at_ms", "value"};
  static constexpr uint32_t kKeepTtl = 1;        // the key keeps its expiry; at_ms is unused
  static constexpr uint32_t kEncodingShift = 1;  // bits 1-2: store::StringEncoding
  RecordKey key;
  uint32_t flags = 0;
  uint64_t at_ms = 0;  // Unix ms; 0: no expiry
  Blob value;
  static auto Tie(auto& r) { return std::tie(r.key, r.flags, r.at_ms, r.value); }
};

// Several string keys set as one change (MSET, MSETNX): each entry is a StringSet's fields, and
// all of them are applied together under every shard lock of their keys, so the log holds the
// change whole or not at all and no other write to one of the keys falls between the record and
// its effect. Entries apply in order (a key given twice keeps its last value).
struct StringMultiSet {
  static constexpr RecordType kType = RecordType::kStringMultiSet;
  static constexpr std::string_view kName = "string multi set";
  static constexpr std::array<std::string_view, 1> kFields = {"entries"};
  std::vector<StringSet> entries;
  static auto Tie(auto& r) { return std::tie(r.entries); }
};

struct StringDel {
  static constexpr RecordType kType = RecordType::kStringDel;
  static constexpr std::string_view kName = "string delete";
  static constexpr std::array<std::string_view, 1> kFields = {"key"};
  std::string key;
  static auto Tie(auto& r) { return std::tie(r.key); }
};

// A change to a set or list key (store/members.h encodes members), the key's expiry kept: its
// whole new value (op kWhole: no members deletes the key, as Redis deletes an emptied set or
// list), or an operation applied to the value it has when the record applies (SADD, SREM, SPOP,
// pushes and pops log only the members they name, so a write costs O(its members) in the log).
struct SetValue {
  static constexpr RecordType kType = RecordType::kSetValue;
  static constexpr std::string_view kName = "set value";
  static constexpr std::array<std::string_view, 4> kFields = {"key", "encoding", "op", "members"};
  static constexpr uint32_t kWhole = 0;   // `members` is the whole value
  static constexpr uint32_t kAdd = 1;     // add `members` (an intset stays sorted)
  static constexpr uint32_t kRemove = 2;  // remove `members`
  std::string key;
  uint32_t encoding = 0;  // store::SetEncoding after the change
  uint32_t op = kWhole;
  Blob members;
  static auto Tie(auto& r) { return std::tie(r.key, r.encoding, r.op, r.members); }
};

struct ListValue {
  static constexpr RecordType kType = RecordType::kListValue;
  static constexpr std::string_view kName = "list value";
  static constexpr std::array<std::string_view, 4> kFields = {"key", "op", "count", "elements"};
  static constexpr uint32_t kWhole = 0;     // `elements` is the whole value, head first
  static constexpr uint32_t kPushHead = 1;  // `elements` go before the head, in this order
  static constexpr uint32_t kPushTail = 2;  // `elements` go after the tail
  static constexpr uint32_t kPopHead = 3;   // `count` elements leave the head
  static constexpr uint32_t kPopTail = 4;   // `count` elements leave the tail
  std::string key;
  uint32_t op = kWhole;
  uint64_t count = 0;  // pops only
  Blob elements;
  static auto Tie(auto& r) { return std::tie(r.key, r.op, r.count, r.elements); }
};

// A change to a hash key, the key's expiry kept, as SetValue's: `fields` holds fields and values
// alternating (store/members.h encodes each), or field names alone for kDelete.
struct HashValue {
  static constexpr RecordType kType = RecordType::kHashValue;
  static constexpr std::string_view kName = "hash value";
  static constexpr std::array<std::string_view, 4> kFields = {"key", "encoding", "op", "fields"};
  static constexpr uint32_t kWhole = 0;   // `fields` is the whole value (none: the key deleted)
  static constexpr uint32_t kSet = 1;     // each pair's field takes its value (new: appended)
  static constexpr uint32_t kDelete = 2;  // the named fields go
  std::string key;
  uint32_t encoding = 0;  // store::HashEncoding after the change
  uint32_t op = kWhole;
  Blob fields;
  static auto Tie(auto& r) { return std::tie(r.key, r.encoding, r.op, r.fields); }
};

// A change to a sorted-set key (store/sorted_set.h encodes pairs), the key's expiry kept: its
// whole new value (kWhole: no pairs deletes the key), the final scores of the members a write
// named (kScores: ZADD, ZINCRBY, computed under the key's lock, so replay needs no arithmetic), or
// members taken out (kRemove: `members` holds store/members.h items).
struct ZsetValue {
  static constexpr RecordType kType = RecordType::kZsetValue;
  static constexpr std::string_view kName = "zset value";
  static constexpr std::array<std::string_view, 4> kFields = {"key", "encoding", "op", "members"};
  static constexpr uint32_t kWhole = 0;
  static constexpr uint32_t kScores = 1;
  static constexpr uint32_t kRemove = 2;
  std::string key;
  uint32_t encoding = 0;  // store::ZsetEncoding after the change
  uint32_t op = kWhole;
  Blob members;
  static auto Tie(auto& r) { return std::tie(r.key, r.encoding, r.op, r.members); }
};

// A change to a stream key (store/stream.h encodes its value), the key's expiry kept: its whole
// value (no value deletes the key), or one operation on the value it has when the record applies,
// so an XADD logs only its entry and a group change only the groups.
struct StreamValue {
  static constexpr RecordType kType = RecordType::kStreamValue;
  static constexpr std::string_view kName = "stream value";
  static constexpr std::array<std::string_view, 4> kFields = {"key", "op", "count", "value"};
  static constexpr uint32_t kWhole = 0;   // `value` is the whole stream
  static constexpr uint32_t kAppend = 1;  // `value` is one entry (id, body); then `count` trimmed
  static constexpr uint32_t kTrim = 2;    // `count` entries leave the front
  static constexpr uint32_t kDelete = 3;  // `value` lists the ids deleted (16 bytes each)
  static constexpr uint32_t kGroups = 4;  // `value` is every consumer group
  static constexpr uint32_t kMeta = 5;    // `value` is the last id, max deleted id, entries added
  std::string key;
  uint32_t op = kWhole;
  uint64_t count = 0;
  Blob value;
  static auto Tie(auto& r) { return std::tie(r.key, r.op, r.count, r.value); }
};

struct SnapshotEnd {  // the number of records before it in its snapshot
  static constexpr RecordType kType = RecordType::kSnapshotEnd;
  static constexpr std::string_view kName = "snapshot end";
  static constexpr std::array<std::string_view, 1> kFields = {"count"};
  uint64_t count = 0;
  static auto Tie(auto& r) { return std::tie(r.count); }
};

struct VCreate {  // creates the session unless the sid exists
  static constexpr RecordType kType = RecordType::kVCreate;
  static constexpr std::string_view kName = "V-store create";
  static constexpr std::array<std::string_view, 4> kFields = {"sid", "index", "dim", "tier"};
  std::string sid;
  uint64_t index = 0;
  uint32_t dim = 0;
  uint32_t tier = 0;  // store::Tier code
  static auto Tie(auto& r) { return std::tie(r.sid, r.index, r.dim, r.tier); }
};

struct VStore {  // encoded rows [start, start + rows) of one layer, as stored
  static constexpr RecordType kType = RecordType::kVStore;
  static constexpr std::string_view kName = "V-store rows";
  static constexpr std::array<std::string_view, 7> kFields = {"sid", "layer", "start", "rows",
                                                              "dim", "tier",  "data"};
  std::string sid;
  uint32_t layer = 0;
  uint64_t start = 0;
  uint64_t rows = 0;
  uint32_t dim = 0;
  uint32_t tier = 0;
  Blob data;
  static auto Tie(auto& r) {
    return std::tie(r.sid, r.layer, r.start, r.rows, r.dim, r.tier, r.data);
  }
};

struct VDrop {
  static constexpr RecordType kType = RecordType::kVDrop;
  static constexpr std::string_view kName = "V-store drop";
  static constexpr std::array<std::string_view, 1> kFields = {"sid"};
  std::string sid;
  static auto Tie(auto& r) { return std::tie(r.sid); }
};

// The fields of a KV.PREFIX registration (types 35 and 37 share the layout).
struct PrefixFields {
  static constexpr uint64_t kNoPrefill = ~uint64_t{0};
  static constexpr std::array<std::string_view, 8> kFields = {
      "ns", "key_index", "value_index", "kv_dim", "tier", "block_size", "prefill_us", "hashes"};
  std::string ns;
  uint64_t key_index = 0;
  uint64_t value_index = 0;
  uint32_t kv_dim = 0;
  uint32_t tier = 0;
  uint32_t block_size = 0;  // 0: no BLOCKS
  uint64_t prefill_us = kNoPrefill;
  Blob block_hashes;  // n × u64 little-endian
  static auto Tie(auto& r) {
    return std::tie(r.ns, r.key_index, r.value_index, r.kv_dim, r.tier, r.block_size, r.prefill_us,
                    r.block_hashes);
  }
};

struct KvRegister : PrefixFields {  // registers and creates `<ns>_pk` / `<ns>_pv` where missing
  static constexpr RecordType kType = RecordType::kKvRegister;
  static constexpr std::string_view kName = "KV.PREFIX register";
};

struct KvPrefix : PrefixFields {  // snapshots: the registration alone, creating no session
  static constexpr RecordType kType = RecordType::kKvPrefix;
  static constexpr std::string_view kName = "KV.PREFIX registration";
};

struct KvDrop {  // the registration and both sessions
  static constexpr RecordType kType = RecordType::kKvDrop;
  static constexpr std::string_view kName = "KV.PREFIX drop";
  static constexpr std::array<std::string_view, 1> kFields = {"ns"};
  std::string ns;
  static auto Tie(auto& r) { return std::tie(r.ns); }
};

// The prefix index (docs/prefix-index.md): a namespace, blocks, checkpoints and drops.
struct PrefixNamespace {  // creates the namespace, or sets the budget of one with the same shape
  static constexpr RecordType kType = RecordType::kPrefixNamespace;
  static constexpr std::string_view kName = "prefix namespace";
  static constexpr std::array<std::string_view, 7> kFields = {
      "ns", "block", "attn", "kv_dim", "recurrent", "tier", "max_bytes"};
  std::string ns;
  uint32_t block = 0;
  uint32_t attn = 0;
  uint32_t kv_dim = 0;
  uint32_t recurrent = 0;
  uint32_t tier = 0;
  uint64_t max_bytes = 0;
  static auto Tie(auto& r) {
    return std::tie(r.ns, r.block, r.attn, r.kv_dim, r.recurrent, r.tier, r.max_bytes);
  }
};

struct PrefixBlocks {  // consecutive full blocks after `parent`; per layer K rows then V rows
  static constexpr RecordType kType = RecordType::kPrefixBlocks;
  static constexpr std::string_view kName = "prefix blocks";
  static constexpr std::array<std::string_view, 4> kFields = {"ns", "parent", "hashes", "layers"};
  std::string ns;
  std::string parent;  // 16 bytes
  Blob hashes;         // n × 16 bytes
  LayerBlobs layers;   // every attention layer, encoded rows as stored
  static auto Tie(auto& r) { return std::tie(r.ns, r.parent, r.hashes, r.layers); }
};

struct PrefixCheckpoints {  // checkpoints at first_length .. + k − 1, one anchor
  static constexpr RecordType kType = RecordType::kPrefixCheckpoints;
  static constexpr std::string_view kName = "prefix checkpoints";
  static constexpr std::array<std::string_view, 6> kFields = {"ns",        "anchor", "first_length",
                                                              "positions", "states", "tails"};
  std::string ns;
  std::string anchor;  // 16 bytes
  uint64_t first_length = 0;
  Blob positions;     // k × 16 bytes
  LayerBlobs states;  // every recurrent layer: k blobs back to back
  LayerBlobs tails;   // every attention layer (or none): the longest tail's K rows then V rows
  static auto Tie(auto& r) {
    return std::tie(r.ns, r.anchor, r.first_length, r.positions, r.states, r.tails);
  }
};

struct PrefixDrop {  // blocks (with their subtrees and checkpoints) and checkpoints
  static constexpr RecordType kType = RecordType::kPrefixDrop;
  static constexpr std::string_view kName = "prefix drop";
  static constexpr std::array<std::string_view, 4> kFields = {"ns", "blocks", "checkpoints",
                                                              "evicted"};
  std::string ns;
  Blob blocks;           // n × 16 bytes
  Blob checkpoints;      // k × 16 bytes
  uint32_t evicted = 0;  // 1: chosen by the namespace's budget (counted as evictions)
  static auto Tie(auto& r) { return std::tie(r.ns, r.blocks, r.checkpoints, r.evicted); }
};

struct PrefixNamespaceDrop {  // the whole namespace
  static constexpr RecordType kType = RecordType::kPrefixNamespaceDrop;
  static constexpr std::string_view kName = "prefix namespace drop";
  static constexpr std::array<std::string_view, 1> kFields = {"ns"};
  std::string ns;
  static auto Tie(auto& r) { return std::tie(r.ns); }
};

using Mutation = std::variant<SsmPut, SsmDropLayer, SsmDropSession, FlushAll, SnapshotEnd, VCreate,
                              VStore, VDrop, KvRegister, KvDrop, KvPrefix, KeyExpire, StringSet,
                              StringDel, FlushDb, SwapDb, PrefixNamespace, PrefixBlocks,
                              PrefixCheckpoints, PrefixDrop, PrefixNamespaceDrop, StringMultiSet,
                              SetValue, ListValue, HashValue, ZsetValue, StreamValue>;

RecordType TypeOf(const Mutation& m);

// The record for the log (log_format.h, EncodedRecord): the fields and small blobs encoded
// into this thread's staging buffer behind room for the header, large blobs by reference, so a
// large value reaches the file without being copied and a small record costs no allocation. A
// string set or multi set whose values are all below kCopiedBlobBelow takes its compact type
// (kStringSetCompact, kStringMultiSetCompact: varints); every other record, TypeOf(m).
EncodedRecord EncodeRecord(const Mutation& m);

// The payload of record type TypeOf(m), as pieces to be written in order: the fieldwise layout
// snapshots and DUMP payloads use.
std::vector<Bytes> EncodePayload(const Mutation& m);

// Where each layer's value starts within the encoded payload of `put`, in layer order: the disk
// tier finds a value in a file from its record's offset.
std::vector<uint64_t> SsmPutValueOffsets(const SsmPut& put);
// Where the rows of a V-store rows record with this sid start within its payload.
uint64_t VStoreRowsOffset(std::string_view sid);

// The values of a string set or multi set of at least `from_size` bytes held in one buffer:
// each key, its buffer and where the value starts within the record's payload (empty for any
// other record). The disk tier places a large string with it.
struct StringValueAt {
  std::string key;
  const uint8_t* data;
  uint64_t offset;
};
std::vector<StringValueAt> StringValueOffsets(const Mutation& m, uint64_t from_size);

// Decodes a record payload. Blobs are slices of `payload` (no copy). The payload must be
// consumed exactly; a Corruption status says what is wrong with it.
Status DecodePayload(RecordType type, const Bytes& payload, Mutation& out);

// What a record holds, for messages: its name and fields, strings cut at 64 bytes and blobs by
// size, e.g. `V-store rows (sid 't', layer 0, start 5, rows 1, dim 8, tier 8, data 32 bytes)`.
std::string Describe(const Mutation& m);

// The bounds a record is checked against. Live: the settings at the time of the request.
// Replay: Hard(), at least the largest value each setting may take (and vstore-max-tokens up to
// 2^40, what earlier builds allowed), so a record accepted under raised limits still replays
// after a restart with the defaults.
struct Limits {
  uint64_t max_sid_len = 0;
  uint64_t max_layers = 0;  // V-store layer ids 0 .. max_layers - 1
  uint64_t max_tokens = 0;  // the end of a V-store row range
  uint64_t max_dim = 0;
  // Bytes one change may make the stores take (an estimate): the machine's memory, or less.
  uint64_t memory_budget = 0;

  static Limits Hard();
};

// The memory this process may use: physical memory, lowered by RLIMIT_AS / RLIMIT_DATA.
uint64_t MemoryBudget();

struct Verdict {
  bool ok = true;
  bool out_of_memory = false;  // the change would need more memory than the budget
  std::string why;
};

// Checks a record's fields against `limits` and its own consistency (sizes that match, known
// tiers, ranges that do not overflow). The live path checks before anything is logged; replay
// checks every record again, so a bad one is reported, never applied.
Verdict Check(const Mutation& m, const Limits& limits);

// What applying a record did, for the live path's reply.
struct Outcome {
  enum class Kind {
    kApplied,    // the change happened
    kUnchanged,  // nothing to do: the session exists (create), or nothing was there (drop)
    kLimit,      // vstore-max-sessions reached
    kNoSession,  // V-store rows for a session that does not exist
    kChanged,    // ... or that was created again with another dim or tier
  };
  Kind kind = Kind::kApplied;
  store::VectorSessionInfo info;  // V-store create: the session's (the existing one's)
  uint64_t count = 0;             // prefix index: entries stored or dropped
  std::string why;                // prefix index: why the change did not happen
};

struct Stores {
  store::StateStore& state;
  store::VectorStore* vectors = nullptr;   // V-store and KV.PREFIX records are ignored without
  uint64_t max_sessions = 0;               // 0: no limit (replay)
  store::Keyspace* keys = nullptr;         // kept in step with the stores when given
  store::PrefixStore* prefixes = nullptr;  // prefix-index records are ignored without
  // A live string write that looked nothing up first (SET, MSET) sets this to the Unix ms time
  // it runs at: a StringSet or StringMultiSet then applies only where each key is missing or a
  // string live at that time, and is kUnchanged (nothing logged) elsewhere. Replay leaves it 0.
  int64_t strings_only_over_live_at_ms = 0;
};

// Applies a checked record. `under_lock` runs while the change is applied under the locks that
// order it against every other change it conflicts with (the log append), and only when the
// change happens. Shared by the live path and replay.
Outcome Apply(const Mutation& m, const Stores& stores, const std::function<void()>& under_lock);

}  // namespace prefixd::persist
