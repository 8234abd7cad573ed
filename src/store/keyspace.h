// Keyspace: the directory of every stored key — its type, Redis Cluster slot, absolute expiry
// and access stamps — over the stores that hold the values (StateStore, VectorStore). The
// mutation path (persist::Apply) keeps it in step with the stores; the generic key commands
// (TYPE, EXISTS, SCAN, EXPIRE, OBJECT, ...) and the type check before every typed command read
// it. Sharded by slot (docs/cache-design.md), so a slot's keys live in one shard and are counted
// per slot. Thread-safe: any thread may call any method; each call takes one shard lock.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "store/chunked_slots.h"
#include "store/eviction_index.h"
#include "store/hash_ordered_map.h"
#include "store/key_entry.h"

namespace prefixd::store {

std::string_view StringEncodingName(StringEncoding encoding);
// Redis's tryObjectEncoding: `int` for a canonical integer of at most 20 bytes, `embstr` up to
// 44 bytes, `raw` above.
StringEncoding EncodingOf(std::string_view value);

// What a string write does to the key's expiry.
enum class KeepTtl : bool { kNo = false, kYes = true };

// TYPE's name for `type`; "none" for a number no KeyType has.
std::string_view KeyTypeName(KeyType type);
// Whether `t` (an index below kKeyTypeCount) is a KeyType this build has.
inline bool KnownKeyType(size_t t) { return KeyTypeName(static_cast<KeyType>(t)) != "none"; }
// The type named `name` (ASCII case-insensitive, as SCAN ... TYPE compares), or nullopt.
std::optional<KeyType> KeyTypeFromName(std::string_view name);

// A key's directory entry as the lookups return it (a copy: the entry itself is packed, see
// store/key_entry.h, and lives under its shard's lock).
struct KeyInfo {
  KeyType type = KeyType::kSsmPrefix;
  StringEncoding encoding = StringEncoding::kRaw;  // strings only
  bool cold = false;  // in the disk tier: `handle` names a node of the shard's cold index
  EvictionIndex::Handle handle = EvictionIndex::kNoHandle;  // the node in the shard's index
  int64_t expire_at_ms = 0;                                 // absolute Unix ms; 0: no expiry
  // Last access and the LFU counter live in the index node only (IdleMs, Frequency).
  // A string's, set's or list's value (Find, FindAndTouch, ForEach; Scan leaves it empty): a
  // value from KeyEntry::kInlineValueBelow on shares the entry's buffer, a smaller one is a copy.
  // Empty for the other types, whose values live in their stores. A set's `encoding` holds its
  // SetEncoding's bits.
  Bytes value;
  // A cold string's value is not read here: `value` is empty and this says where it sits.
  StringPlace place;
};

struct KeyspaceStats {
  uint64_t keys = 0;
  uint64_t cold_keys = 0;      // keys in the disk tier
  uint64_t volatile_keys = 0;  // keys with an expiry
  uint64_t ttl_sum_ms = 0;     // sum of remaining ms over volatile keys, for avg_ttl
  std::array<uint64_t, kKeyTypeCount> keys_by_type{};  // indexed by KeyType
  uint64_t string_bytes = 0;                           // string values held in memory
  uint64_t cold_string_bytes = 0;                      // string values in the disk tier
  uint64_t cold_string_reads = 0;                      // reads of cold string values
  uint64_t cold_string_bytes_read = 0;                 // bytes they read from disk
  uint64_t string_promotions = 0;                      // cold strings read back into memory
};

// What asking a string to leave memory for the disk tier found.
enum class StringCold : uint8_t {
  kCold,         // it left memory; its entry keeps the value's place
  kNotEligible,  // gone, not a string, already cold, or below KeyEntry::kInlineValueBelow
  kNotPlaced,    // the log has not reported where its record landed (yet)
  kNotDurable,   // placed, but its bytes are not fsynced yet
};

class Keyspace {
 public:
  static constexpr size_t kShardCount = 64;

  Keyspace();
  ~Keyspace();
  Keyspace(const Keyspace&) = delete;
  Keyspace& operator=(const Keyspace&) = delete;

  // `key` now exists with `type`; an existing key keeps its expiry and stamps. A write to a
  // cold key moves it back to the hot index (it may hold bytes in memory again).
  void Set(std::string_view key, KeyType type);
  // Moves `key` to the cold (`cold`) or hot index when `change`, run under the key's shard lock
  // (it may take store locks), says the stores made the move. False when the key does not
  // exist, is already there, or `change` refused.
  bool MoveTier(std::string_view key, bool cold, const std::function<bool()>& change);
  // Set or Remove by what `probe` says the stores hold now (nullopt: nothing), read under the
  // key's shard lock, so of two racing syncs of one key the later read also lands last.
  // `probe` may take store locks (the order is always keyspace shard, then store shard).
  void Sync(std::string_view key, const std::function<std::optional<KeyType>()>& probe);
  void Remove(std::string_view key);
  void Clear();

  // The string type, whose values the keyspace holds itself. PutString makes `key` a string
  // with `value` (whatever it held before) and, unless `keep_ttl`, the expiry `at_ms` (0: none),
  // all under one shard lock with `under_lock` (the log append): a reader never sees the value
  // without its expiry. RemoveString deletes a string key; false (and no hook) when `key` is not
  // a string.
  // A write that looked nothing up first (SET or MSET without conditions) passes
  // `only_over_live_at_ms`, the Unix ms time it runs at: then PutString and PutStrings change
  // nothing, run no hook and return false when a key holds another type or has expired by then
  // (the caller takes the path that deletes it first, by its own record); a key they replace is
  // touched, as that write's lookup would have touched it. 0: no such check (true).
  bool PutString(std::string_view key, Bytes value, StringEncoding encoding, KeepTtl keep_ttl,
                 int64_t at_ms, const std::function<void()>& under_lock,
                 int64_t only_over_live_at_ms = 0);
  bool RemoveString(std::string_view key, const std::function<void()>& under_lock);
  // RemoveString for a key of `type` (a set or list whose last member went).
  bool RemoveValue(std::string_view key, KeyType type, const std::function<void()>& under_lock);
  // A set's or list's change made from its current value under the key's shard lock (the
  // operation records, docs/storage-format.md types 12 and 13): `change` gets the value (empty
  // when the key is missing or holds another type, which is then replaced) and returns the new
  // one, which gets `encoding`; an empty result deletes the key. The key keeps its expiry.
  // `under_lock` runs only when something changes; false when nothing did.
  bool ChangeMembers(std::string_view key, KeyType type, StringEncoding encoding,
                     const std::function<Bytes(std::string_view)>& change,
                     const std::function<void()>& under_lock);
  // A change written into the value's own buffer, under the key's shard lock (a stream's
  // append, store/stream.h): `edit` gets the buffer when `key` holds `type` in a buffer of its own
  // (KeyEntry::kInlineValueBelow and up) that nothing else refers to (no reader holds a copy), and
  // returns whether it wrote; then `under_lock` runs. False, nothing changed, otherwise. The
  // buffer keeps its size, so the memory figures do not move.
  bool EditValue(std::string_view key, KeyType type,
                 const std::function<bool(uint8_t* data, size_t size)>& edit,
                 const std::function<void()>& under_lock);
  // Small SSM sessions live in their entry's value (store/compact_session.h, SsmEncoding::
  // kCompact); the others in StateStore, which calls these (docs/cache-design.md, "Small SSM
  // sessions in their keyspace entry"). What `key` holds, as an edit finds it:
  enum class SessionHome : uint8_t {
    kMissing,    // no key
    kCompact,    // a compact session: the edit gets its value
    kElsewhere,  // a session in StateStore, or a key of another type
  };
  // What the edit made of it: kKeep (nothing here changes), kWrite (the key becomes an
  // ssm-prefix key holding the compact session the edit wrote; its expiry stays), kDelete (the
  // compact session goes, with its key), kUncompact (the session moved to StateStore: the key
  // stays, without a value).
  enum class SessionChange : uint8_t { kKeep, kWrite, kDelete, kUncompact };
  using SessionEdit =
      std::function<SessionChange(SessionHome home, std::string_view value, std::string& written)>;
  // Runs `edit` under `key`'s shard lock and applies what it returns. The edit runs the log
  // append itself and may take StateStore locks (the order is always keyspace shard, then store
  // shard), so a session never has two homes, nor none, to anyone who looks.
  void EditSession(std::string_view key, const SessionEdit& edit);
  // Calls `read` with the compact session `key` holds, under its shard lock (`read` copies what
  // it needs); false, without calling it, when the key holds none.
  bool ReadCompactSession(std::string_view key,
                          const std::function<void(std::string_view value)>& read) const;
  bool IsCompactSession(std::string_view key) const;
  // Every compact session, copied one shard at a time and visited after that shard's lock.
  void ForEachCompactSession(
      const std::function<void(const std::string& key, std::string_view value)>& visit) const;
  struct CompactSessionStats {
    uint64_t sessions = 0;
    uint64_t layers = 0;
    uint64_t bytes = 0;  // the layers' bytes
  };
  CompactSessionStats CompactSessions() const;

  // PutString of several keys as one change (MSET): every shard they live in is locked, in
  // ascending order, while `under_lock` runs and every value is put, so no other change to one of
  // them falls between the log record and its effect. Puts apply in order.
  struct StringPut {
    std::string_view key;
    Bytes value;
    StringEncoding encoding = StringEncoding::kRaw;
    KeepTtl keep_ttl = KeepTtl::kNo;
    int64_t at_ms = 0;
    // A set or list (store/members.h) is put the same way: its value and encoding bits.
    KeyType type = KeyType::kString;
  };
  bool PutStrings(std::span<StringPut> puts, const std::function<void()>& under_lock,
                  int64_t only_over_live_at_ms = 0);

  // The disk tier for strings (docs/cache-design.md). PlaceString records where a large value's
  // bytes landed in a log or snapshot file, if `key` still holds the buffer at `data` (nullptr:
  // whatever value it holds, for recovery, which runs alone).
  // MakeStringCold moves a placed, durable value out of memory (the key to the cold index).
  // PromoteString puts `value`, read from `place`, back in when the key is still cold at that
  // place. PutColdString makes `key` a cold string outright (recovery from a snapshot).
  // RepointString moves a value's place from (`old_file`, `old_offset`) to a new one
  // (a snapshot's copy).
  void PlaceString(std::string_view key, const uint8_t* data, std::shared_ptr<const ColdFile> file,
                   uint64_t offset);
  StringCold MakeStringCold(std::string_view key);
  bool PromoteString(std::string_view key, const StringPlace& place, Bytes value);
  void PutColdString(std::string_view key, StringEncoding encoding, int64_t at_ms,
                     StringPlace place);
  void RepointString(std::string_view key, const ColdFile* old_file, uint64_t old_offset,
                     std::shared_ptr<const ColdFile> file, uint64_t offset);
  // Reads `length` bytes from `offset` of a cold value at `place` (pread, into its own buffer);
  // counted as a disk tier hit. False with `error` set when it cannot.
  bool ReadColdString(const StringPlace& place, uint64_t offset, uint64_t length, Bytes& out,
                      std::string& error) const;
  // The extent of a cold value at `place` for a reply that reads it as it is sent; counted as
  // a disk tier hit that reads all of it.
  ColdExtent StreamColdString(const StringPlace& place) const;
  // A small string (below KeyEntry::kInlineValueBelow) moved to the cold index with its value
  // kept in its entry, so memory eviction passes it by (docs/cache-design.md, "Small strings
  // beside cold chunks"). False when `key` is not a hot small string, or when parking it would
  // take the memory parked strings hold past `max_parked_bytes`.
  bool ParkString(std::string_view key, uint64_t max_parked_bytes);
  // Memory held by parked strings (their entries' cost).
  uint64_t ParkedBytes() const {
    return static_cast<uint64_t>(std::max<int64_t>(0, parked_bytes_.load()));
  }
  // Bytes of large string values held in memory (the disk tier can take them).
  uint64_t LargeStringBytes() const {
    return static_cast<uint64_t>(std::max<int64_t>(0, large_string_bytes_.load()));
  }
  // Bytes of cold string values (maxdisk counts them).
  uint64_t ColdStringBytes() const {
    return static_cast<uint64_t>(std::max<int64_t>(0, cold_string_bytes_.load()));
  }

  std::optional<KeyInfo> Find(std::string_view key) const;
  // Find, and when the key is found and not expired at `now_ms`, Touch in the same lock hold
  // (a command's lookup: one shard lock and one search instead of two).
  // `with_value` false: the KeyInfo without its value or place (a write that replaces the value
  // whole needs only the entry's type and expiry; a copy of the old value would be wasted).
  std::optional<KeyInfo> FindAndTouch(std::string_view key, int64_t now_ms, bool with_value = true);
  // FindAndTouch for a check of the key's type alone (a typed command before it reads its own
  // store): no KeyInfo is built.
  struct TypeAndExpiry {
    KeyType type;
    int64_t expire_at_ms;  // 0: none
  };
  std::optional<TypeAndExpiry> FindTypeAndTouch(std::string_view key, int64_t now_ms);
  // GET's common case in one lock hold and no allocation: a live, hot string whose value sits in
  // its entry is given to `use` (under the shard lock: `use` only copies it, e.g. into a reply)
  // and touched (unless `touch` is kNo: a read-modify-write whose put touches it). kMissing: no
  // such key. kOther: anything else (another type, an expiry due, a large or cold value), which
  // the caller looks up the general way.
  enum class InlineRead { kCopied, kMissing, kOther };
  enum class Touching : bool { kNo, kYes };
  template <class Use>
  InlineRead ReadInlineString(std::string_view key, int64_t now_ms, Use&& use,
                              Touching touch = Touching::kYes);
  // ReadInlineString for a compact SSM session (its layers encoded in its entry): `use` reads
  // the encoding under the shard lock and returns false to decline (the caller then takes the
  // general way); the entry is touched when it was used. kOther: a session the state store
  // holds, another type, an expiry due, or declined.
  template <class Use>
  InlineRead ReadCompactSessionLive(std::string_view key, int64_t now_ms, Use&& use);
  // Records an access: last access time and the LFU counter (Redis's lookupKey).
  void Touch(std::string_view key);
  // Sets (at_ms > 0) or clears (0) the key's expiry; false when the key does not exist.
  // `under_lock` runs under the shard lock when the key exists (the log append).
  bool SetExpiry(std::string_view key, int64_t at_ms, const std::function<void()>& under_lock);

  // Keys of shard `shard` whose expiry is at or before `now_ms`, earliest first, at most `limit`.
  std::vector<std::pair<std::string, KeyType>> Expired(size_t shard, int64_t now_ms,
                                                       size_t limit) const;

  // One SCAN step (the KeyInfo without its value): calls `visit` for keys from `cursor` on, in
  // cursor order, until at least `count` keys were offered (keys sharing a position are offered
  // together, so none is skipped when the next call resumes). Returns the cursor to resume from, 0
  // when the walk is done.
  uint64_t Scan(uint64_t cursor, size_t count,
                const std::function<void(const std::string&, const KeyInfo&)>& visit) const;
  // Every key, shard by shard (KEYS).
  void ForEach(const std::function<void(const std::string&, const KeyInfo&)>& visit) const;
  // A key picked uniformly enough (shard weighted by size, then a random position), or nullopt.
  std::optional<std::string> Random() const;

  // The key the policy evicts next across every shard (docs/cache-design.md, "Across shards"),
  // or nullopt when nothing is in the policy's scope. The index is rebuilt first when `policy`
  // differs from the one it was ordered for. The caller deletes the key (a logged DEL).
  std::optional<std::pair<std::string, KeyType>> PickVictim(EvictionPolicy policy);
  // The same over the cold keys only (maxdisk evicts from the disk tier).
  std::optional<std::pair<std::string, KeyType>> PickColdVictim(EvictionPolicy policy);
  // Keeps `key` out of PickVictim's and PickColdVictim's choices until PassOver(key, false):
  // an eviction pass passes over a key whose eviction would free nothing now (its bytes are
  // leased). A pin of the key's index node, so deleting the key drops it. Only the one eviction
  // pass running pins keys, so a node holds at most that one pin. False when `key` is gone.
  bool PassOver(std::string_view key, bool pass_over);
  // OBJECT FREQ under an LFU policy: the shard index's decayed counter.
  std::optional<uint8_t> Frequency(std::string_view key) const;
  // OBJECT IDLETIME: milliseconds since the last access.
  std::optional<uint64_t> IdleMs(std::string_view key) const;

  // What `key`'s entry costs, as MemoryBytes counts it (a string's value included; the other
  // types' values are their stores'), or nullopt (MEMORY USAGE).
  std::optional<uint64_t> EntryMemory(std::string_view key) const;

  uint64_t CountInSlot(uint16_t slot) const;
  // Up to `limit` keys of `slot` (CLUSTER GETKEYSINSLOT): a walk of the slot's shard, 1/64th of
  // the keys, skipped when the slot's counter says it is empty.
  std::vector<std::string> KeysInSlot(uint16_t slot, size_t limit) const;
  KeyspaceStats Stats(int64_t now_ms) const;
  uint64_t size() const;
  // Bytes the directory holds: entry chunks (keys and small values inline), large values'
  // buffers, bucket slots, index nodes, expiry entries (EntryCost and ExpiryCost).
  uint64_t MemoryBytes() const {
    return static_cast<uint64_t>(std::max<int64_t>(0, bytes_.load()));
  }

  static size_t ShardOf(std::string_view key);

 private:
  // Keys by (57-bit hash, key), walked in that order: the SCAN cursor is a position in it.
  using Directory = HashOrderedMap<KeyEntry>;
  using Entry = KeyEntry;
  // The entry each handle of an index names, in chunks as the index's nodes are: 8 bytes a
  // handle with at most one partly used chunk (docs/cache-design.md, "Memory per entry"). An
  // index hands out a chunk's handles before the next chunk's.
  using EntryOfHandle = ChunkedSlots<const Entry*, EvictionIndex::kChunkBits>;
  struct Shard {
    mutable std::mutex mu;
    SmallChunks chunks;  // the entries' chunks up to its kLargest; outlives `keys`
    Directory keys;
    std::array<uint32_t, 256> keys_in_slot{};  // slot >> 6 within this shard
    // One index per tier; a key's node is in the one its entry's cold bit names.
    EvictionIndex index;
    EvictionIndex cold_index;
    // The entry of each index handle (kept up to date when a value change moves the entry).
    EntryOfHandle entry_of_handle;
    EntryOfHandle entry_of_cold_handle;
    int64_t compact_sessions = 0;  // entries holding a compact SSM session
    EvictionIndex& IndexOf(const Entry& e) { return e.cold() ? cold_index : index; }
    const EvictionIndex& IndexOf(const Entry& e) const { return e.cold() ? cold_index : index; }
    EntryOfHandle& EntriesOf(bool cold) { return cold ? entry_of_cold_handle : entry_of_handle; }
  };

  // The key's position: its XXH3 hash's low 57 bits.
  static uint64_t HashOf(std::string_view key);
  static Entry* FindIn(const Shard& shard, std::string_view key) {
    return shard.keys.Find(HashOf(key), key);
  }
  // The public copy of `entry`; with its value when `with_value` and it is a string.
  static KeyInfo InfoOf(const Shard& shard, const Entry& entry, bool with_value);
  static int64_t ExpiryOf(const Shard& shard, const Entry& entry);
  // Whether `entry` has an expiry due by `now_ms` (it is not served, though still in the table).
  static bool ExpiredAt(const Shard& shard, const Entry& entry, int64_t now_ms);
  // Makes `key` an entry of `type`; returns it.
  Entry* SetLocked(Shard& shard, std::string_view key, KeyType type);
  // SetLocked's two halves: an existing entry made one of `type` (its value dropped when the
  // type changes; back to the hot index when cold), and a new entry with `value` (its hash is
  // `hash`; the key must be missing).
  Entry* RetypeLocked(Shard& shard, Entry* entry, KeyType type);
  Entry* InsertLocked(Shard& shard, uint64_t hash, std::string_view key, KeyType type, Bytes value);
  // Gives `entry` `value`; returns the entry, which may have moved (the old one is freed). A
  // replaced large buffer goes to `released`, to be freed after the lock.
  Entry* SetValueLocked(Shard& shard, Entry* entry, Bytes value, Bytes& released);
  // `placed` (a chunk KeyEntry::WithValue returned for `entry`) in `entry`'s stead; returns it.
  static Entry* Replaced(Shard& shard, Entry* entry, Entry* placed);
  void Erase(Shard& shard, Entry* entry);
  void SetExpiryLocked(Shard& shard, Entry* entry, int64_t at_ms);
  // PutString's change under the shard's lock; returns the old value, to be freed after it.
  // `found`: the key's entry as a check found it under this lock, not changed since (the lookup
  // the check made is not made again); nullptr: looked up here.
  Bytes PutStringLocked(Shard& shard, StringPut& put, Entry* found = nullptr);
  // Under the shard's lock: whether `key` is missing or a string live at `now_ms`, so a write
  // that looked nothing up may replace it; `existing` gets its entry (nullptr when missing).
  static bool ReplaceableLocked(const Shard& shard, std::string_view key, int64_t now_ms,
                                Entry*& existing);
  static void TouchLocked(Shard& shard, const Entry& entry);
  // An entry's share of the string figures: value bytes, cold value bytes, large value bytes.
  struct StringCounts {
    int64_t bytes = 0;
    int64_t cold = 0;
    int64_t large = 0;
  };
  static StringCounts StringCountsOf(const Entry& entry);
  // Adds `after` - `before` to the string figures, around a change of one entry.
  void MoveStringCounts(const StringCounts& before, const StringCounts& after);
  // Adds (`sign` 1) or takes away (-1) `entry`'s share of the string figures.
  void CountString(const Entry& entry, int sign);
  static bool IsCompact(const Entry& entry) {
    return entry.type() == KeyType::kSsmPrefix &&
           entry.encoding() == static_cast<StringEncoding>(SsmEncoding::kCompact);
  }
  // Adds (1) or takes away (-1) a compact session's share of CompactSessions (none for others).
  void CountCompact(Shard& shard, const Entry& entry, int sign);
  // The same for a compact session's value (`entry`'s, or the one a write puts in it).
  void CountCompactValue(Shard& shard, std::string_view value, int sign);
  // Moves a key's node to the other tier's index, keeping its last access and expiry.
  void SwitchTier(Shard& shard, Entry& entry, bool cold);
  std::optional<std::pair<std::string, KeyType>> Pick(EvictionPolicy policy, bool cold);

  // ReadInlineString's lookup: the live inline string value of `key`, or null with `result` set
  // to why not. The caller holds the shard lock; a found entry is touched if `touch`.
  const Entry* InlineStringLocked(Shard& shard, std::string_view key, int64_t now_ms,
                                  InlineRead& result, Touching touch);

  std::unique_ptr<Shard[]> shards_;
  std::atomic<int64_t> bytes_{0};
  // For INFO-style counts without a walk: keys of each type, and the bytes of string values.
  std::array<std::atomic<int64_t>, kKeyTypeCount> keys_of_type_{};
  std::atomic<int64_t> string_bytes_{0};
  std::atomic<int64_t> cold_string_bytes_{0};
  std::atomic<int64_t> large_string_bytes_{0};
  std::atomic<int64_t> parked_bytes_{0};  // entries of parked strings (cold, value inline)
  std::atomic<int64_t> compact_sessions_{0};
  std::atomic<int64_t> compact_layers_{0};
  std::atomic<int64_t> compact_bytes_{0};
  mutable std::atomic<uint64_t> cold_string_reads_{0};
  mutable std::atomic<uint64_t> cold_string_bytes_read_{0};
  std::atomic<uint64_t> string_promotions_{0};
  std::mutex policy_mu_;  // one pick at a time; guards the policy the indexes are ordered for
  EvictionPolicy ordered_for_ = EvictionPolicy::kNoEviction;
};

template <class Use>
Keyspace::InlineRead Keyspace::ReadInlineString(std::string_view key, int64_t now_ms, Use&& use,
                                                Touching touch) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  InlineRead result = InlineRead::kCopied;
  if (const Entry* entry = InlineStringLocked(shard, key, now_ms, result, touch);
      entry != nullptr) {
    use(entry->Value());
  }
  return result;
}

template <class Use>
Keyspace::InlineRead Keyspace::ReadCompactSessionLive(std::string_view key, int64_t now_ms,
                                                      Use&& use) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  const Entry* entry = FindIn(shard, key);
  if (entry == nullptr) return InlineRead::kMissing;
  if (!IsCompact(*entry) || entry->cold() || ExpiredAt(shard, *entry, now_ms)) {
    return InlineRead::kOther;
  }
  if (!use(entry->Value())) return InlineRead::kOther;
  TouchLocked(shard, *entry);
  return InlineRead::kCopied;
}

}  // namespace prefixd::store
