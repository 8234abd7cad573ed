// Keyspace's methods. Over 900 lines by choice: each one takes its shard's lock and works through
// the same private entry helpers (an entry's cost, its tier, its place in the expiry heap and the
// string and compact-session counts); split by theme, those would move into a shared private
// header that every part could break the others' invariants through.
#include "store/keyspace.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <random>

#include "common/ascii.h"
#include "common/key_slot.h"
#include "common/keyed_hash.h"
#include "common/numbers.h"
#include "common/scratch_array.h"
#include "store/compact_session.h"

namespace prefixd::store {
namespace {

constexpr int kShardBits = 6;  // 64 shards
// One bit below 64 - kShardBits: KeyEntry keeps 57 (its type takes four).
constexpr int kHashBits = 57;
static_assert(kHashBits == KeyEntry::kHashBits && kHashBits + kShardBits < 64);
constexpr uint64_t kHashMask = (uint64_t{1} << kHashBits) - 1;
// What an entry costs: its chunk (header, key, a small value), a large value's buffer (shared
// with replies in flight), its bucket slot, its 24-byte index node and its handle's slot in
// entry_of_handle.
int64_t EntryCost(const KeyEntry& e) {
  constexpr int64_t kFixed = HashOrderedMap<KeyEntry>::kBucketBytesPerNode + 24 + 8;
  return kFixed + static_cast<int64_t>(e.ChunkBytes() + e.ExternalBytes());
}

// A parked string: a small string in the cold index, its value still in its entry.
bool Parked(const KeyEntry& entry) {
  return entry.type() == KeyType::kString && entry.cold() && entry.value_inline();
}

// A volatile key's slot in its eviction index's expiry heap (time and handle), with the heap's
// slack.
int64_t ExpiryBytes() { return 16; }

int64_t StringBytes(const KeyEntry& e) { return static_cast<int64_t>(e.ValueBytes()); }

// A cold string's value bytes, which sit on disk only.
int64_t ColdStringBytesOf(const KeyEntry& e) {
  const StringPlace* place = e.Place();
  return e.cold() && e.type() == KeyType::kString && place != nullptr
             ? static_cast<int64_t>(place->length)
             : 0;
}

}  // namespace

std::string_view StringEncodingName(StringEncoding encoding) {
  switch (encoding) {
    case StringEncoding::kInt:
      return "int";
    case StringEncoding::kEmbstr:
      return "embstr";
    case StringEncoding::kRaw:
      return "raw";
  }
  return "raw";
}

StringEncoding EncodingOf(std::string_view value) {
  if (value.size() <= 20 && ParseInt64(value)) return StringEncoding::kInt;
  return value.size() <= 44 ? StringEncoding::kEmbstr : StringEncoding::kRaw;
}

std::string_view KeyTypeName(KeyType type) {
  switch (type) {
    case KeyType::kSsmPrefix:
      return "ssm-prefix";
    case KeyType::kVstore:
      return "vstore";
    case KeyType::kKvPrefix:
      return "kvprefix";
    case KeyType::kString:
      return "string";
    case KeyType::kPrefixIndex:
      return "prefix-index";
    case KeyType::kSet:
      return "set";
    case KeyType::kList:
      return "list";
    case KeyType::kHash:
      return "hash";
    case KeyType::kZset:
      return "zset";
    case KeyType::kStream:
      return "stream";
  }
  return "none";
}

std::optional<KeyType> KeyTypeFromName(std::string_view name) {
  for (KeyType t : {KeyType::kSsmPrefix, KeyType::kVstore, KeyType::kKvPrefix, KeyType::kString,
                    KeyType::kPrefixIndex, KeyType::kSet, KeyType::kList, KeyType::kHash,
                    KeyType::kZset, KeyType::kStream}) {
    if (EqualsIgnoreCase(name, KeyTypeName(t))) return t;
  }
  return std::nullopt;
}

Keyspace::Keyspace() : shards_(std::make_unique<Shard[]>(kShardCount)) {}
Keyspace::~Keyspace() = default;

namespace {

// A key's slot and directory position, remembered for the last key this thread placed: a command
// finds its key and then stores it, and each search would hash it again (CRC16 for the shard,
// XXH3 for the position), which costs more than comparing a short key.
struct KeyPlace {
  uint16_t slot = 0;
  uint64_t hash = 0;
};
struct RememberedKey {
  static constexpr size_t kMaxBytes = 64;
  std::array<char, kMaxBytes> bytes{};
  size_t size = kMaxBytes + 1;  // nothing remembered yet
  KeyPlace place;
};
thread_local RememberedKey remembered_key;

KeyPlace PlaceOf(std::string_view key) {
  RememberedKey& last = remembered_key;
  if (key.size() == last.size && std::memcmp(key.data(), last.bytes.data(), key.size()) == 0) {
    return last.place;
  }
  // Keyed (common/keyed_hash.h): the directory's buckets are the hash's top bits. SCAN cursors
  // are positions, valid while the process lives, as in Redis.
  const KeyPlace place{KeySlot(key), KeyedHash(key)};
  if (key.size() <= RememberedKey::kMaxBytes) {
    std::memcpy(last.bytes.data(), key.data(), key.size());
    last.size = key.size();
    last.place = place;
  }
  return place;
}

}  // namespace

size_t Keyspace::ShardOf(std::string_view key) {
  return ShardOfSlot(PlaceOf(key).slot, kShardCount);
}

uint64_t Keyspace::HashOf(std::string_view key) { return PlaceOf(key).hash & kHashMask; }

void Keyspace::Set(std::string_view key, KeyType type) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  SetLocked(shard, key, type);
}

void Keyspace::Sync(std::string_view key, const std::function<std::optional<KeyType>()>& probe) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  Entry* entry = FindIn(shard, key);
  // A string's, set's or list's value lives here, not in the stores the probe reads: only its
  // own records change it.
  if (entry != nullptr && (HoldsValue(entry->type()) || IsCompact(*entry))) return;
  if (auto type = probe()) {
    SetLocked(shard, key, *type);
    return;
  }
  if (entry != nullptr) Erase(shard, entry);
}

bool Keyspace::PutString(std::string_view key, Bytes value, StringEncoding encoding,
                         KeepTtl keep_ttl, int64_t at_ms, const std::function<void()>& under_lock,
                         int64_t only_over_live_at_ms) {
  Shard& shard = shards_[ShardOf(key)];
  StringPut put{key, std::move(value), encoding, keep_ttl, at_ms};
  Bytes released;  // the old value, freed after the lock
  std::lock_guard lock(shard.mu);
  Entry* existing = nullptr;
  if (only_over_live_at_ms != 0) {
    if (!ReplaceableLocked(shard, key, only_over_live_at_ms, existing)) return false;
    if (existing != nullptr) TouchLocked(shard, *existing);
  }
  if (under_lock) under_lock();
  released = PutStringLocked(shard, put, existing);
  return true;
}

bool Keyspace::PutStrings(std::span<StringPut> puts, const std::function<void()>& under_lock,
                          int64_t only_over_live_at_ms) {
  struct Step {
    size_t shard;
    Entry* existing = nullptr;
    Bytes released;  // the old value, freed after the locks
  };
  ScratchArray<Step, 16> scratch(puts.size());
  const std::span<Step> steps = scratch.span();
  // The shards involved as one bit each, locked in ascending order (a word, where an array of
  // 64 locks cost an MSET more than its puts' locking).
  static_assert(kShardCount <= 64);
  uint64_t involved = 0;
  for (size_t i = 0; i < puts.size(); ++i) {
    steps[i].shard = ShardOf(puts[i].key);
    involved |= uint64_t{1} << steps[i].shard;
  }
  struct ShardLocks {
    Shard* shards;
    uint64_t held = 0;  // a bit is set once its lock is taken, so a throw releases just those
    void Take(uint64_t mask) {
      for (; mask != 0; mask &= mask - 1) {
        const int shard = std::countr_zero(mask);
        shards[shard].mu.lock();
        held |= uint64_t{1} << shard;
      }
    }
    ~ShardLocks() {
      for (uint64_t m = held; m != 0; m &= m - 1) shards[std::countr_zero(m)].mu.unlock();
    }
  } locks{shards_.get()};
  locks.Take(involved);
  if (only_over_live_at_ms != 0) {
    // Every key is checked before any is touched: a refused write leaves no trace.
    for (size_t i = 0; i < puts.size(); ++i) {
      if (!ReplaceableLocked(shards_[steps[i].shard], puts[i].key, only_over_live_at_ms,
                             steps[i].existing)) {
        return false;
      }
    }
    for (const Step& step : steps) {
      if (step.existing != nullptr) TouchLocked(shards_[step.shard], *step.existing);
    }
  }
  if (under_lock) under_lock();
  // An entry the checks found stands for its key until a put changes it. A key given twice
  // found the same entry, which its first put may move, so only the first put reuses it (found
  // by comparing pointers, pairwise in a short MSET; a long one looks every key up again).
  constexpr size_t kReusedUpTo = 64;
  for (size_t i = 0; i < puts.size(); ++i) {
    Entry* const found = puts.size() <= kReusedUpTo ? steps[i].existing : nullptr;
    bool first = found != nullptr;
    for (size_t j = 0; j < i && first; ++j) first = steps[j].existing != found;
    steps[i].released = PutStringLocked(shards_[steps[i].shard], puts[i], first ? found : nullptr);
  }
  return true;
}

bool Keyspace::ReplaceableLocked(const Shard& shard, std::string_view key, int64_t now_ms,
                                 Entry*& existing) {
  existing = FindIn(shard, key);
  if (existing == nullptr) return true;
  return existing->type() == KeyType::kString && !ExpiredAt(shard, *existing, now_ms);
}

bool Keyspace::ExpiredAt(const Shard& shard, const Entry& entry, int64_t now_ms) {
  const int64_t at = ExpiryOf(shard, entry);
  return at != 0 && at <= now_ms;
}

void Keyspace::TouchLocked(Shard& shard, const Entry& entry) {
  shard.IndexOf(entry).Touch(entry.handle, EvictionClockMicros());
}

Bytes Keyspace::PutStringLocked(Shard& shard, StringPut& put, Entry* found) {
  Bytes released;
  Entry* entry = found;
  bool made = false;
  if (entry == nullptr) {
    const uint64_t hash = HashOf(put.key);
    entry = shard.keys.Find(hash, put.key);
    // A new key's entry is made with its value: one chunk, where an empty entry given the value
    // would take two.
    if (entry == nullptr) {
      entry = InsertLocked(shard, hash, put.key, put.type, std::move(put.value));
      made = true;
    }
  }
  if (!made) {
    if (entry->type() != put.type || entry->cold()) entry = RetypeLocked(shard, entry, put.type);
    entry = SetValueLocked(shard, entry, std::move(put.value), released);
  }
  entry->set_encoding(put.encoding);
  if (put.keep_ttl == KeepTtl::kNo && ExpiryOf(shard, *entry) != put.at_ms) {
    SetExpiryLocked(shard, entry, put.at_ms);
  }
  return released;
}

Keyspace::Entry* Keyspace::Replaced(Shard& shard, Entry* entry, Entry* placed) {
  if (placed != entry) {
    shard.keys.Replace(entry, placed);
    shard.EntriesOf(placed->cold())[placed->handle] = placed;
    KeyEntry::Destroy(entry);
  }
  return placed;
}

Keyspace::Entry* Keyspace::SetValueLocked(Shard& shard, Entry* entry, Bytes value,
                                          Bytes& released) {
  if (entry->FitsInPlace(value.size())) {
    // The chunk and its size class stay (a SET's common case): only the string figure moves.
    const auto grown =
        static_cast<int64_t>(value.size()) - static_cast<int64_t>(entry->ValueBytes());
    KeyEntry::WithValue(shard.chunks, entry, std::move(value), released);
    if (grown != 0) string_bytes_ += grown;  // StringBytes: the inline value's size
    return entry;
  }
  const int64_t old_cost = EntryCost(*entry);
  const StringCounts before = StringCountsOf(*entry);
  if (Parked(*entry)) parked_bytes_ -= old_cost;
  Entry* placed =
      Replaced(shard, entry, KeyEntry::WithValue(shard.chunks, entry, std::move(value), released));
  // A value replaced by one of the same size (a SET's common case) moves no shared counter.
  if (const int64_t grown = EntryCost(*placed) - old_cost; grown != 0) bytes_ += grown;
  if (Parked(*placed)) parked_bytes_ += EntryCost(*placed);
  MoveStringCounts(before, StringCountsOf(*placed));
  return placed;
}

bool Keyspace::RemoveString(std::string_view key, const std::function<void()>& under_lock) {
  return RemoveValue(key, KeyType::kString, under_lock);
}

bool Keyspace::RemoveValue(std::string_view key, KeyType type,
                           const std::function<void()>& under_lock) {
  Shard& shard = shards_[ShardOf(key)];
  Bytes released;
  std::lock_guard lock(shard.mu);
  Entry* entry = FindIn(shard, key);
  if (entry == nullptr || entry->type() != type) return false;
  if (under_lock) under_lock();
  if (!entry->value_inline()) released = entry->ValueCopy();  // the last reference goes after
  Erase(shard, entry);
  return true;
}

bool Keyspace::EditValue(std::string_view key, KeyType type,
                         const std::function<bool(uint8_t* data, size_t size)>& edit,
                         const std::function<void()>& under_lock) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  Entry* entry = FindIn(shard, key);
  if (entry == nullptr || entry->type() != type || entry->value_inline() || entry->cold()) {
    return false;
  }
  Bytes& value = entry->ExternalValue();
  if (!value.Unique() || !edit(value.mutable_data(), value.size())) return false;
  if (under_lock) under_lock();
  return true;
}

bool Keyspace::ChangeMembers(std::string_view key, KeyType type, StringEncoding encoding,
                             const std::function<Bytes(std::string_view)>& change,
                             const std::function<void()>& under_lock) {
  Shard& shard = shards_[ShardOf(key)];
  Bytes released;  // the old value, freed after the lock
  std::lock_guard lock(shard.mu);
  Entry* entry = FindIn(shard, key);
  const bool same = entry != nullptr && entry->type() == type;
  Bytes value = change(same ? entry->Value() : std::string_view());
  if (value.empty()) {
    if (!same) return false;
    if (under_lock) under_lock();
    if (!entry->value_inline()) released = entry->ValueCopy();
    Erase(shard, entry);
    return true;
  }
  if (under_lock) under_lock();
  StringPut put{key, std::move(value), encoding, KeepTtl::kYes, 0, type};
  released = PutStringLocked(shard, put);
  return true;
}

Keyspace::Entry* Keyspace::SetLocked(Shard& shard, std::string_view key, KeyType type) {
  const uint64_t hash = HashOf(key);
  if (Entry* entry = shard.keys.Find(hash, key)) return RetypeLocked(shard, entry, type);
  return InsertLocked(shard, hash, key, type, Bytes());
}

Keyspace::Entry* Keyspace::RetypeLocked(Shard& shard, Entry* entry, KeyType type) {
  if (entry->type() != type) {
    keys_of_type_[static_cast<size_t>(entry->type())] -= 1;
    keys_of_type_[static_cast<size_t>(type)] += 1;
    // Only a string, set or list holds a value here, and a compact SSM session.
    if (IsCompact(*entry)) {
      CountCompact(shard, *entry, -1);
      entry->set_encoding(static_cast<StringEncoding>(SsmEncoding::kInStore));
      Bytes released;
      entry = SetValueLocked(shard, entry, Bytes(), released);
    } else if (HoldsValue(entry->type())) {
      Bytes released;
      entry = SetValueLocked(shard, entry, Bytes(), released);
    }
  }
  if (entry->type() == type && !entry->cold()) return entry;  // nothing counted changes
  const StringCounts before = StringCountsOf(*entry);
  // Back to the hot index before the type changes, so a parked string leaves the parked count
  // as it entered it.
  if (entry->cold()) SwitchTier(shard, *entry, false);
  entry->set_type(type);
  MoveStringCounts(before, StringCountsOf(*entry));
  return entry;
}

Keyspace::Entry* Keyspace::InsertLocked(Shard& shard, uint64_t hash, std::string_view key,
                                        KeyType type, Bytes value) {
  const EvictionIndex::Handle handle = shard.index.Insert(EvictionClockMicros());
  Entry* placed =
      shard.keys.Insert(KeyEntry::Make(shard.chunks, hash, key, type, handle, std::move(value)));
  shard.entry_of_handle.MakeRoomFor(handle);
  shard.entry_of_handle[handle] = placed;
  bytes_ += EntryCost(*placed);
  CountString(*placed, 1);
  keys_of_type_[static_cast<size_t>(type)] += 1;
  shard.keys_in_slot[KeySlot(key) >> kShardBits] += 1;
  return placed;
}

void Keyspace::Erase(Shard& shard, Entry* entry) {
  if (Parked(*entry)) parked_bytes_ -= EntryCost(*entry);
  EvictionIndex& index = shard.IndexOf(*entry);
  if (index.ExpiryMs(entry->handle)) bytes_ -= ExpiryBytes();
  bytes_ -= EntryCost(*entry);
  CountString(*entry, -1);
  CountCompact(shard, *entry, -1);
  keys_of_type_[static_cast<size_t>(entry->type())] -= 1;
  shard.keys_in_slot[KeySlot(entry->Key()) >> kShardBits] -= 1;
  index.Erase(entry->handle);
  shard.EntriesOf(entry->cold())[entry->handle] = nullptr;
  shard.keys.Erase(entry);
}

void Keyspace::SwitchTier(Shard& shard, Entry& entry, bool cold) {
  if (Parked(entry)) parked_bytes_ -= EntryCost(entry);
  EvictionIndex& from = shard.IndexOf(entry);
  const uint64_t now = EvictionClockMicros();
  const uint64_t last_access = now - std::min(now, from.IdleMicros(entry.handle, now));
  const std::optional<int64_t> expiry = from.ExpiryMs(entry.handle);
  from.Erase(entry.handle);
  shard.EntriesOf(entry.cold())[entry.handle] = nullptr;
  entry.set_cold(cold);
  EvictionIndex& to = shard.IndexOf(entry);
  entry.handle = to.Insert(last_access);
  if (expiry) to.SetExpiry(entry.handle, *expiry);
  auto& entries = shard.EntriesOf(cold);
  entries.MakeRoomFor(entry.handle);
  entries[entry.handle] = &entry;
  if (Parked(entry)) parked_bytes_ += EntryCost(entry);
}

bool Keyspace::MoveTier(std::string_view key, bool cold, const std::function<bool()>& change) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  Entry* entry = FindIn(shard, key);
  if (entry == nullptr || entry->cold() == cold || !change()) return false;
  SwitchTier(shard, *entry, cold);
  return true;
}

void Keyspace::Remove(std::string_view key) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  if (Entry* entry = FindIn(shard, key)) Erase(shard, entry);
}

void Keyspace::Clear() {
  for (size_t i = 0; i < kShardCount; ++i) {
    Shard& shard = shards_[i];
    std::vector<Bytes> released;  // large values, freed after the lock
    std::lock_guard lock(shard.mu);
    shard.keys_in_slot.fill(0);
    for (Entry* entry = shard.keys.First(); entry != nullptr; entry = shard.keys.Next(entry)) {
      EvictionIndex& index = shard.IndexOf(*entry);
      bytes_ -= EntryCost(*entry) + (index.ExpiryMs(entry->handle) ? ExpiryBytes() : 0);
      CountString(*entry, -1);
      CountCompact(shard, *entry, -1);
      keys_of_type_[static_cast<size_t>(entry->type())] -= 1;
      index.Erase(entry->handle);
      if (!entry->value_inline() && !entry->ExternalValue().empty()) {
        released.push_back(entry->TakeValue());
      }
    }
    // The chunks go back to the shard's SmallChunks, which only its lock guards.
    shard.keys.Clear();
    shard.chunks.Trim();
    shard.entry_of_handle.Clear();
    shard.entry_of_cold_handle.Clear();
  }
}

int64_t Keyspace::ExpiryOf(const Shard& shard, const Entry& entry) {
  return shard.IndexOf(entry).ExpiryMs(entry.handle).value_or(0);
}

KeyInfo Keyspace::InfoOf(const Shard& shard, const Entry& entry, bool with_value) {
  KeyInfo info;
  info.type = entry.type();
  info.encoding = entry.encoding();
  info.cold = entry.cold();
  info.handle = entry.handle;
  info.expire_at_ms = ExpiryOf(shard, entry);
  if (with_value && HoldsValue(entry.type())) {
    if (entry.type() == KeyType::kString && entry.cold() && entry.Place() != nullptr) {
      info.place = *entry.Place();
    } else {
      info.value = entry.ValueCopy();
    }
  }
  return info;
}

Keyspace::StringCounts Keyspace::StringCountsOf(const Entry& entry) {
  return {StringBytes(entry), ColdStringBytesOf(entry),
          entry.type() == KeyType::kString ? static_cast<int64_t>(entry.ExternalBytes()) : 0};
}

void Keyspace::MoveStringCounts(const StringCounts& before, const StringCounts& after) {
  // Each counter is an atomic every io thread writes: one that did not move is not touched.
  const auto add = [](std::atomic<int64_t>& counter, int64_t delta) {
    if (delta != 0) counter += delta;
  };
  add(string_bytes_, after.bytes - before.bytes);
  add(cold_string_bytes_, after.cold - before.cold);
  add(large_string_bytes_, after.large - before.large);
}

void Keyspace::CountString(const Entry& entry, int sign) {
  const StringCounts counts = StringCountsOf(entry);
  sign > 0 ? MoveStringCounts({}, counts) : MoveStringCounts(counts, {});
}

void Keyspace::CountCompact(Shard& shard, const Entry& entry, int sign) {
  if (IsCompact(entry)) CountCompactValue(shard, entry.Value(), sign);
}

void Keyspace::CountCompactValue(Shard& shard, std::string_view value, int sign) {
  shard.compact_sessions += sign;
  compact_sessions_ += sign;
  compact_layers_ += sign * static_cast<int64_t>(compact_session::LayerCount(value));
  compact_bytes_ += sign * static_cast<int64_t>(compact_session::PayloadBytes(value));
}

void Keyspace::EditSession(std::string_view key, const SessionEdit& edit) {
  Shard& shard = shards_[ShardOf(key)];
  std::string written;
  Bytes released;  // a replaced value; compact ones are inline, so this stays empty
  std::lock_guard lock(shard.mu);
  Entry* entry = FindIn(shard, key);
  const SessionHome home = entry == nullptr    ? SessionHome::kMissing
                           : IsCompact(*entry) ? SessionHome::kCompact
                                               : SessionHome::kElsewhere;
  const SessionChange change =
      edit(home, home == SessionHome::kCompact ? entry->Value() : std::string_view(), written);
  if (change == SessionChange::kKeep || home == SessionHome::kElsewhere) return;
  if (change == SessionChange::kDelete) {
    if (entry != nullptr) Erase(shard, entry);
    return;
  }
  if (entry != nullptr) CountCompact(shard, *entry, -1);
  if (change == SessionChange::kUncompact) {
    if (entry == nullptr) return;
    entry->set_encoding(static_cast<StringEncoding>(SsmEncoding::kInStore));
    SetValueLocked(shard, entry, Bytes(), released);
    return;
  }
  // The entry copies a value this small (below KeyEntry::kInlineValueBelow) into its chunk.
  StringPut put{key,
                Bytes::Borrow(written),
                static_cast<StringEncoding>(SsmEncoding::kCompact),
                KeepTtl::kYes,
                0,
                KeyType::kSsmPrefix};
  released = PutStringLocked(shard, put, entry);
  CountCompactValue(shard, written, 1);
}

bool Keyspace::ReadCompactSession(std::string_view key,
                                  const std::function<void(std::string_view)>& read) const {
  const Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  const Entry* entry = FindIn(shard, key);
  if (entry == nullptr || !IsCompact(*entry)) return false;
  read(entry->Value());
  return true;
}

bool Keyspace::IsCompactSession(std::string_view key) const {
  const Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  const Entry* entry = FindIn(shard, key);
  return entry != nullptr && IsCompact(*entry);
}

void Keyspace::ForEachCompactSession(
    const std::function<void(const std::string&, std::string_view)>& visit) const {
  std::vector<std::pair<std::string, std::string>> copied;
  for (size_t i = 0; i < kShardCount; ++i) {
    copied.clear();
    {
      // The shard's own count, read under its lock: a write that was logged before the caller
      // began (a snapshot's cut) has been applied by the time the lock is had.
      const Shard& shard = shards_[i];
      std::lock_guard lock(shard.mu);
      if (shard.compact_sessions == 0) continue;
      for (const Entry* e = shard.keys.First(); e != nullptr; e = shard.keys.Next(e)) {
        if (IsCompact(*e)) copied.emplace_back(std::string(e->Key()), std::string(e->Value()));
      }
    }
    for (const auto& [key, value] : copied) visit(key, value);
  }
}

Keyspace::CompactSessionStats Keyspace::CompactSessions() const {
  const auto of = [](const std::atomic<int64_t>& counter) {
    return static_cast<uint64_t>(std::max<int64_t>(0, counter.load(std::memory_order_relaxed)));
  };
  return {of(compact_sessions_), of(compact_layers_), of(compact_bytes_)};
}

bool Keyspace::ParkString(std::string_view key, uint64_t max_parked_bytes) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  Entry* entry = FindIn(shard, key);
  if (entry == nullptr || entry->type() != KeyType::kString || entry->cold() ||
      !entry->value_inline() ||
      ParkedBytes() + static_cast<uint64_t>(EntryCost(*entry)) > max_parked_bytes) {
    return false;
  }
  SwitchTier(shard, *entry, /*cold=*/true);
  return true;
}

void Keyspace::PlaceString(std::string_view key, const uint8_t* data,
                           std::shared_ptr<const ColdFile> file, uint64_t offset) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  Entry* entry = FindIn(shard, key);
  if (entry != nullptr && entry->type() == KeyType::kString) {
    entry->SetPlace(data, std::move(file), offset);
  }
}

StringCold Keyspace::MakeStringCold(std::string_view key) {
  Shard& shard = shards_[ShardOf(key)];
  Bytes released;  // the value's buffer, freed after the lock (a reply may still hold it)
  std::lock_guard lock(shard.mu);
  Entry* entry = FindIn(shard, key);
  if (entry == nullptr || entry->type() != KeyType::kString || entry->cold() ||
      entry->Place() == nullptr) {
    return StringCold::kNotEligible;
  }
  if (entry->Place()->file == nullptr) return StringCold::kNotPlaced;
  if (!entry->Place()->durable()) return StringCold::kNotDurable;
  const int64_t old_cost = EntryCost(*entry);
  CountString(*entry, -1);
  released = entry->TakeValue();
  SwitchTier(shard, *entry, /*cold=*/true);
  bytes_ += EntryCost(*entry) - old_cost;
  CountString(*entry, +1);
  return StringCold::kCold;
}

bool Keyspace::PromoteString(std::string_view key, const StringPlace& place, Bytes value) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  Entry* entry = FindIn(shard, key);
  if (entry == nullptr || entry->type() != KeyType::kString || !entry->cold()) return false;
  const StringPlace* now = entry->Place();
  if (now == nullptr || now->file != place.file || now->offset != place.offset ||
      value.size() != now->length) {
    return false;
  }
  const int64_t old_cost = EntryCost(*entry);
  CountString(*entry, -1);
  entry->RestoreValue(std::move(value));
  SwitchTier(shard, *entry, /*cold=*/false);
  bytes_ += EntryCost(*entry) - old_cost;
  CountString(*entry, +1);
  string_promotions_ += 1;
  return true;
}

bool Keyspace::ReadColdString(const StringPlace& place, uint64_t offset, uint64_t length,
                              Bytes& out, std::string& error) const {
  if (place.file == nullptr || offset > place.length || length > place.length - offset) {
    error = "no such range of the cold value";
    return false;
  }
  if (length == 0) {
    out = Bytes();
  } else if (!place.file->Read(place.offset + offset, length, out, error)) {
    return false;
  }
  cold_string_reads_ += 1;
  cold_string_bytes_read_ += length;
  return true;
}

ColdExtent Keyspace::StreamColdString(const StringPlace& place) const {
  cold_string_reads_ += 1;
  cold_string_bytes_read_ += place.length;
  return ColdExtent{place.file, place.offset, place.length};
}

void Keyspace::PutColdString(std::string_view key, StringEncoding encoding, int64_t at_ms,
                             StringPlace place) {
  Shard& shard = shards_[ShardOf(key)];
  Bytes released;
  std::lock_guard lock(shard.mu);
  Entry* entry = SetLocked(shard, key, KeyType::kString);
  const int64_t old_cost = EntryCost(*entry);
  CountString(*entry, -1);
  entry = Replaced(shard, entry,
                   KeyEntry::WithColdPlace(shard.chunks, entry, std::move(place), released));
  entry->set_encoding(encoding);
  SwitchTier(shard, *entry, /*cold=*/true);
  bytes_ += EntryCost(*entry) - old_cost;
  CountString(*entry, +1);
  if (ExpiryOf(shard, *entry) != at_ms) SetExpiryLocked(shard, entry, at_ms);
}

void Keyspace::RepointString(std::string_view key, const ColdFile* old_file, uint64_t old_offset,
                             std::shared_ptr<const ColdFile> file, uint64_t offset) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  Entry* entry = FindIn(shard, key);
  if (entry == nullptr || entry->type() != KeyType::kString) return;
  const StringPlace* now = entry->Place();
  if (now == nullptr || now->file.get() != old_file || now->offset != old_offset) return;
  entry->Repoint(std::move(file), offset);
}

std::optional<KeyInfo> Keyspace::Find(std::string_view key) const {
  const Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  const Entry* entry = FindIn(shard, key);
  if (entry == nullptr) return std::nullopt;
  return InfoOf(shard, *entry, true);
}

std::optional<KeyInfo> Keyspace::FindAndTouch(std::string_view key, int64_t now_ms,
                                              bool with_value) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  const Entry* entry = FindIn(shard, key);
  if (entry == nullptr) return std::nullopt;
  KeyInfo info = InfoOf(shard, *entry, with_value);
  if (info.expire_at_ms == 0 || info.expire_at_ms > now_ms) {
    shard.IndexOf(*entry).Touch(entry->handle, EvictionClockMicros());
  }
  return info;
}

std::optional<Keyspace::TypeAndExpiry> Keyspace::FindTypeAndTouch(std::string_view key,
                                                                  int64_t now_ms) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  const Entry* entry = FindIn(shard, key);
  if (entry == nullptr) return std::nullopt;
  const TypeAndExpiry found{entry->type(), ExpiryOf(shard, *entry)};
  if (found.expire_at_ms == 0 || found.expire_at_ms > now_ms) TouchLocked(shard, *entry);
  return found;
}

const Keyspace::Entry* Keyspace::InlineStringLocked(Shard& shard, std::string_view key,
                                                    int64_t now_ms, InlineRead& result,
                                                    Touching touch) {
  const Entry* entry = FindIn(shard, key);
  result = InlineRead::kOther;
  if (entry == nullptr) {
    result = InlineRead::kMissing;
    return nullptr;
  }
  if (entry->type() != KeyType::kString || entry->cold() || !entry->value_inline()) return nullptr;
  if (ExpiredAt(shard, *entry, now_ms)) return nullptr;
  if (touch == Touching::kYes) TouchLocked(shard, *entry);
  result = InlineRead::kCopied;
  return entry;
}

void Keyspace::Touch(std::string_view key) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  if (const Entry* entry = FindIn(shard, key)) {
    shard.IndexOf(*entry).Touch(entry->handle, EvictionClockMicros());
  }
}

bool Keyspace::SetExpiry(std::string_view key, int64_t at_ms,
                         const std::function<void()>& under_lock) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  Entry* entry = FindIn(shard, key);
  if (entry == nullptr) return false;
  if (under_lock) under_lock();
  SetExpiryLocked(shard, entry, at_ms);
  return true;
}

void Keyspace::SetExpiryLocked(Shard& shard, Entry* entry, int64_t at_ms) {
  EvictionIndex& index = shard.IndexOf(*entry);
  const bool had = index.ExpiryMs(entry->handle).has_value();
  bytes_ += (at_ms != 0 ? ExpiryBytes() : 0) - (had ? ExpiryBytes() : 0);
  if (at_ms != 0) {
    index.SetExpiry(entry->handle, at_ms);
  } else if (had) {
    index.ClearExpiry(entry->handle);
  }
}

std::vector<std::pair<std::string, KeyType>> Keyspace::Expired(size_t shard_index, int64_t now_ms,
                                                               size_t limit) const {
  const Shard& shard = shards_[shard_index];
  std::lock_guard lock(shard.mu);
  // The earliest of both tiers' expiry heaps; each holds its own keys' deadlines.
  struct Due {
    int64_t at;
    const Entry* entry;
  };
  std::vector<Due> due;
  for (const bool cold : {false, true}) {
    const EvictionIndex& index = cold ? shard.cold_index : shard.index;
    const auto& entries = cold ? shard.entry_of_cold_handle : shard.entry_of_handle;
    for (const auto& [at, handle] : index.Expired(now_ms, limit)) {
      due.push_back({at, entries[handle]});
    }
  }
  std::sort(due.begin(), due.end(), [](const Due& a, const Due& b) { return a.at < b.at; });
  if (due.size() > limit) due.resize(limit);
  std::vector<std::pair<std::string, KeyType>> out;
  out.reserve(due.size());
  for (const Due& d : due) out.emplace_back(d.entry->Key(), d.entry->type());
  return out;
}

uint64_t Keyspace::Scan(
    uint64_t cursor, size_t count,
    const std::function<void(const std::string&, const KeyInfo&)>& visit) const {
  size_t shard_index = cursor >> kHashBits;
  uint64_t from = cursor & kHashMask;
  size_t offered = 0;
  std::vector<std::pair<std::string, KeyInfo>> batch;
  for (; shard_index < kShardCount; ++shard_index, from = 0) {
    batch.clear();
    uint64_t resume = 0;
    bool more = false;
    {
      const Shard& shard = shards_[shard_index];
      std::lock_guard lock(shard.mu);
      for (const Entry* entry = shard.keys.LowerBound(from); entry != nullptr;
           entry = shard.keys.Next(entry)) {
        // Stop only between positions, so keys sharing a hash are never split across calls.
        if (offered + batch.size() >= count && !(batch.size() > 0 && entry->Hash() == resume)) {
          more = true;
          resume = entry->Hash();
          break;
        }
        resume = entry->Hash();
        batch.emplace_back(entry->Key(), InfoOf(shard, *entry, false));
      }
    }
    // Visit outside the lock: the caller may match patterns over long keys.
    for (const auto& [key, info] : batch) visit(key, info);
    offered += batch.size();
    if (more) return (static_cast<uint64_t>(shard_index) << kHashBits) | resume;
  }
  return 0;
}

void Keyspace::ForEach(const std::function<void(const std::string&, const KeyInfo&)>& visit) const {
  std::vector<std::pair<std::string, KeyInfo>> batch;
  for (size_t i = 0; i < kShardCount; ++i) {
    batch.clear();
    {
      const Shard& shard = shards_[i];
      std::lock_guard lock(shard.mu);
      for (const Entry* e = shard.keys.First(); e != nullptr; e = shard.keys.Next(e)) {
        batch.emplace_back(e->Key(), InfoOf(shard, *e, true));
      }
    }
    for (const auto& [key, info] : batch) visit(key, info);
  }
}

std::optional<std::string> Keyspace::Random() const {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::array<size_t, kShardCount> sizes{};
  size_t total = 0;
  for (size_t i = 0; i < kShardCount; ++i) {
    std::lock_guard lock(shards_[i].mu);
    sizes[i] = shards_[i].keys.size();
    total += sizes[i];
  }
  if (total == 0) return std::nullopt;
  size_t pick = rng() % total;
  size_t start = 0;
  while (start + 1 < kShardCount && pick >= sizes[start]) pick -= sizes[start++];
  // The shard may have changed since it was counted: try it, then the others in turn.
  for (size_t k = 0; k < kShardCount; ++k) {
    const Shard& shard = shards_[(start + k) % kShardCount];
    std::lock_guard lock(shard.mu);
    if (shard.keys.empty()) continue;
    const Entry* entry = shard.keys.LowerBound(rng() & kHashMask);
    if (entry == nullptr) entry = shard.keys.First();
    return std::string(entry->Key());
  }
  return std::nullopt;
}

std::optional<std::pair<std::string, KeyType>> Keyspace::PickVictim(EvictionPolicy policy) {
  return Pick(policy, false);
}

std::optional<std::pair<std::string, KeyType>> Keyspace::PickColdVictim(EvictionPolicy policy) {
  return Pick(policy, true);
}

bool Keyspace::PassOver(std::string_view key, bool pass_over) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  const Entry* entry = FindIn(shard, key);
  if (entry == nullptr) return false;
  EvictionIndex& index = shard.IndexOf(*entry);
  if (pass_over) return index.IsPinned(entry->handle) || index.Pin(entry->handle);
  // Deleted and made again since: the new node was never pinned.
  if (index.IsPinned(entry->handle)) index.Unpin(entry->handle);
  return true;
}

std::optional<std::pair<std::string, KeyType>> Keyspace::Pick(EvictionPolicy policy, bool cold) {
  std::lock_guard pick(policy_mu_);
  if (policy != ordered_for_) {
    // One shard at a time: a client waits at most one shard's rebuild.
    for (size_t i = 0; i < kShardCount; ++i) {
      std::lock_guard lock(shards_[i].mu);
      shards_[i].index.SetPolicy(policy);
      shards_[i].cold_index.SetPolicy(policy);
    }
    ordered_for_ = policy;
  }
  if (policy == EvictionPolicy::kNoEviction) return std::nullopt;
  const bool random =
      policy == EvictionPolicy::kAllKeysRandom || policy == EvictionPolicy::kVolatileRandom;
  EvictionRound round(kShardCount);
  for (size_t i = 0; i < kShardCount; ++i) {
    std::lock_guard lock(shards_[i].mu);
    EvictionIndex& index = cold ? shards_[i].cold_index : shards_[i].index;
    round.Offer(i, index.PickVictim(), index.RandomCandidates());
  }
  thread_local std::mt19937_64 rng{std::random_device{}()};
  // Scores only grow, so a shard whose fresh pick is still the best holds the global victim;
  // otherwise its new score is recorded and the next best is tried.
  for (size_t attempt = 0; attempt < 4 * kShardCount; ++attempt) {
    auto best = random ? round.RandomShard(rng()) : round.Best();
    if (!best) return std::nullopt;
    Shard& shard = shards_[*best];
    std::lock_guard lock(shard.mu);
    EvictionIndex& index = cold ? shard.cold_index : shard.index;
    auto victim = index.PickVictim();
    if (victim && (random || round.Accepts(*best, victim->score))) {
      const Entry* entry = shard.EntriesOf(cold)[victim->handle];
      return std::make_pair(std::string(entry->Key()), entry->type());
    }
    round.Offer(*best, victim, index.RandomCandidates());
  }
  return std::nullopt;
}

std::optional<uint8_t> Keyspace::Frequency(std::string_view key) const {
  const Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  const Entry* entry = FindIn(shard, key);
  if (entry == nullptr) return std::nullopt;
  return shard.IndexOf(*entry).Frequency(entry->handle, EvictionClockMicros());
}

std::optional<uint64_t> Keyspace::IdleMs(std::string_view key) const {
  const Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  const Entry* entry = FindIn(shard, key);
  if (entry == nullptr) return std::nullopt;
  return shard.IndexOf(*entry).IdleMicros(entry->handle, EvictionClockMicros()) / 1000;
}

std::optional<uint64_t> Keyspace::EntryMemory(std::string_view key) const {
  const Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  const Entry* entry = FindIn(shard, key);
  if (entry == nullptr) return std::nullopt;
  const bool volatile_key = shard.IndexOf(*entry).ExpiryMs(entry->handle).has_value();
  return static_cast<uint64_t>(EntryCost(*entry) + (volatile_key ? ExpiryBytes() : 0));
}

uint64_t Keyspace::CountInSlot(uint16_t slot) const {
  const Shard& shard = shards_[ShardOfSlot(slot, kShardCount)];
  std::lock_guard lock(shard.mu);
  return shard.keys_in_slot[slot >> kShardBits];
}

std::vector<std::string> Keyspace::KeysInSlot(uint16_t slot, size_t limit) const {
  std::vector<std::string> out;
  const Shard& shard = shards_[ShardOfSlot(slot, kShardCount)];
  std::lock_guard lock(shard.mu);
  if (shard.keys_in_slot[slot >> kShardBits] == 0) return out;
  for (const Entry* entry = shard.keys.First(); entry != nullptr && out.size() < limit;
       entry = shard.keys.Next(entry)) {
    if (KeySlot(entry->Key()) == slot) out.emplace_back(entry->Key());
  }
  return out;
}

KeyspaceStats Keyspace::Stats(int64_t now_ms) const {
  KeyspaceStats s;
  for (size_t i = 0; i < kShardCount; ++i) {
    std::lock_guard lock(shards_[i].mu);
    s.keys += shards_[i].keys.size();
    s.cold_keys += shards_[i].cold_index.size();
    for (const EvictionIndex* index : {&shards_[i].index, &shards_[i].cold_index}) {
      s.volatile_keys += index->volatile_size();
      s.ttl_sum_ms += index->RemainingTtlSumMs(now_ms);
    }
  }
  for (size_t t = 0; t < kKeyTypeCount; ++t) {
    s.keys_by_type[t] = static_cast<uint64_t>(std::max<int64_t>(0, keys_of_type_[t].load()));
  }
  s.string_bytes = static_cast<uint64_t>(std::max<int64_t>(0, string_bytes_.load()));
  s.cold_string_bytes = ColdStringBytes();
  s.cold_string_reads = cold_string_reads_.load();
  s.cold_string_bytes_read = cold_string_bytes_read_.load();
  s.string_promotions = string_promotions_.load();
  return s;
}

uint64_t Keyspace::size() const {
  uint64_t n = 0;
  for (size_t i = 0; i < kShardCount; ++i) {
    std::lock_guard lock(shards_[i].mu);
    n += shards_[i].keys.size();
  }
  return n;
}

}  // namespace prefixd::store
