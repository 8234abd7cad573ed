#include "store/keyspace.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <random>

#include "common/ascii.h"
#include "common/key_slot.h"
#include "common/keyed_hash.h"
#include "common/numbers.h"

namespace prefixd::store {
namespace {

constexpr int kShardBits = 6;  // 64 shards
constexpr int kHashBits = 64 - kShardBits;
constexpr uint64_t kHashMask = (uint64_t{1} << kHashBits) - 1;
// The directory's node (chain link, position, key and the KeyInfo with its value handle) and its
// bucket, the index's node and handle slot; keys longer than the short-string buffer add their
// own allocation.
int64_t EntryBytes(std::string_view key) {
  constexpr int64_t kFixed = HashOrderedMap<KeyInfo>::kBytesPerNode + 24 + 8;
  return kFixed + (key.size() > 15 ? static_cast<int64_t>(key.size()) + 1 : 0);
}
// A volatile key's slot in its eviction index's expiry heap (time and handle), with the heap's
// slack.
int64_t ExpiryBytes() { return 16; }

// What a string value adds to its entry: its buffer (a large one shared with replies in flight).
int64_t ValueBytes(const KeyInfo& info) { return static_cast<int64_t>(info.value.capacity()); }

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
  }
  return "none";
}

std::optional<KeyType> KeyTypeFromName(std::string_view name) {
  for (KeyType t : {KeyType::kSsmPrefix, KeyType::kVstore, KeyType::kKvPrefix, KeyType::kString,
                    KeyType::kPrefixIndex}) {
    if (EqualsIgnoreCase(name, KeyTypeName(t))) return t;
  }
  return std::nullopt;
}

Keyspace::Keyspace() : shards_(std::make_unique<Shard[]>(kShardCount)) {}

size_t Keyspace::ShardOf(std::string_view key) { return ShardOfSlot(KeySlot(key), kShardCount); }

uint64_t Keyspace::HashOf(std::string_view key) {
  // Keyed (common/keyed_hash.h): the directory's buckets are the hash's top bits. SCAN cursors
  // are positions, valid while the process lives, as in Redis.
  return KeyedHash(key) & kHashMask;
}

void Keyspace::Set(std::string_view key, KeyType type) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  SetLocked(shard, key, type);
}

void Keyspace::Sync(std::string_view key, const std::function<std::optional<KeyType>()>& probe) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  Entry* entry = FindIn(shard, key);
  // A string's value lives here, not in the stores the probe reads: only its own records
  // change it.
  if (entry != nullptr && entry->value.type == KeyType::kString) return;
  if (auto type = probe()) {
    SetLocked(shard, key, *type);
    return;
  }
  if (entry != nullptr) Erase(shard, entry);
}

void Keyspace::PutString(std::string_view key, Bytes value, StringEncoding encoding,
                         KeepTtl keep_ttl, int64_t at_ms, const std::function<void()>& under_lock) {
  Shard& shard = shards_[ShardOf(key)];
  StringPut put{key, std::move(value), encoding, keep_ttl, at_ms};
  Bytes released;  // the old value, freed after the lock
  std::lock_guard lock(shard.mu);
  if (under_lock) under_lock();
  released = PutStringLocked(shard, put);
}

void Keyspace::PutStrings(std::span<StringPut> puts, const std::function<void()>& under_lock) {
  struct Step {
    size_t shard;
    Bytes released;  // the old value, freed after the locks
  };
  std::vector<Step> steps(puts.size());
  std::array<bool, kShardCount> involved{};
  for (size_t i = 0; i < puts.size(); ++i) involved[steps[i].shard = ShardOf(puts[i].key)] = true;
  std::array<std::unique_lock<std::mutex>, kShardCount> locks;
  for (size_t s = 0; s < kShardCount; ++s) {
    if (involved[s]) locks[s] = std::unique_lock(shards_[s].mu);
  }
  if (under_lock) under_lock();
  for (size_t i = 0; i < puts.size(); ++i) {
    steps[i].released = PutStringLocked(shards_[steps[i].shard], puts[i]);
  }
}

Bytes Keyspace::PutStringLocked(Shard& shard, StringPut& put) {
  Entry* entry = SetLocked(shard, put.key, KeyType::kString);
  KeyInfo& info = entry->value;
  const int64_t old_bytes = ValueBytes(info);
  Bytes released = std::move(info.value);
  info.value = std::move(put.value);
  info.encoding = put.encoding;
  bytes_ += ValueBytes(info) - old_bytes;
  string_bytes_ += ValueBytes(info) - old_bytes;
  if (put.keep_ttl == KeepTtl::kNo && info.expire_at_ms != put.at_ms) {
    SetExpiryLocked(shard, entry, put.at_ms);
  }
  return released;
}

bool Keyspace::RemoveString(std::string_view key, const std::function<void()>& under_lock) {
  Shard& shard = shards_[ShardOf(key)];
  Bytes released;
  std::lock_guard lock(shard.mu);
  Entry* entry = FindIn(shard, key);
  if (entry == nullptr || entry->value.type != KeyType::kString) return false;
  if (under_lock) under_lock();
  released = std::move(entry->value.value);
  Erase(shard, entry);
  return true;
}

Keyspace::Entry* Keyspace::SetLocked(Shard& shard, std::string_view key, KeyType type) {
  const uint64_t hash = HashOf(key);
  if (Entry* entry = shard.keys.Find(hash, key)) {
    if (entry->value.type != type) {
      keys_of_type_[static_cast<size_t>(entry->value.type)] -= 1;
      keys_of_type_[static_cast<size_t>(type)] += 1;
    }
    entry->value.type = type;
    if (entry->value.cold) SwitchTier(shard, entry->key, entry->value, false);
    return entry;
  }
  KeyInfo info;
  info.type = type;
  info.slot = KeySlot(key);
  info.handle = shard.index.Insert(EvictionClockMicros());
  Entry* placed = shard.keys.Emplace(hash, key, std::move(info)).first;
  const EvictionIndex::Handle handle = placed->value.handle;
  if (shard.key_of_handle.size() <= handle) shard.key_of_handle.resize(handle + 1);
  shard.key_of_handle[handle] = &placed->key;
  bytes_ += EntryBytes(key);
  keys_of_type_[static_cast<size_t>(type)] += 1;
  shard.keys_in_slot[placed->value.slot >> kShardBits] += 1;
  return placed;
}

void Keyspace::Erase(Shard& shard, Entry* entry) {
  const KeyInfo& info = entry->value;
  if (info.expire_at_ms != 0) bytes_ -= ExpiryBytes();
  bytes_ -= EntryBytes(entry->key) + ValueBytes(info);
  string_bytes_ -= ValueBytes(info);
  keys_of_type_[static_cast<size_t>(info.type)] -= 1;
  shard.keys_in_slot[info.slot >> kShardBits] -= 1;
  shard.IndexOf(info).Erase(info.handle);
  (info.cold ? shard.key_of_cold_handle : shard.key_of_handle)[info.handle] = nullptr;
  shard.keys.Erase(entry);
}

void Keyspace::SwitchTier(Shard& shard, const std::string& key, KeyInfo& info, bool cold) {
  EvictionIndex& from = shard.IndexOf(info);
  const uint64_t now = EvictionClockMicros();
  const uint64_t last_access = now - std::min(now, from.IdleMicros(info.handle, now));
  from.Erase(info.handle);
  (info.cold ? shard.key_of_cold_handle : shard.key_of_handle)[info.handle] = nullptr;
  info.cold = cold;
  EvictionIndex& to = shard.IndexOf(info);
  info.handle = to.Insert(last_access);
  if (info.expire_at_ms != 0) to.SetExpiry(info.handle, info.expire_at_ms);
  auto& keys = cold ? shard.key_of_cold_handle : shard.key_of_handle;
  if (keys.size() <= info.handle) keys.resize(info.handle + 1);
  keys[info.handle] = &key;
}

bool Keyspace::MoveTier(std::string_view key, bool cold, const std::function<bool()>& change) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  Entry* entry = FindIn(shard, key);
  if (entry == nullptr || entry->value.cold == cold || !change()) return false;
  SwitchTier(shard, entry->key, entry->value, cold);
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
    Directory released;  // freed after the lock
    std::lock_guard lock(shard.mu);
    released.swap(shard.keys);
    shard.keys_in_slot.fill(0);
    for (const Entry* entry = released.First(); entry != nullptr; entry = released.Next(entry)) {
      const KeyInfo& info = entry->value;
      shard.IndexOf(info).Erase(info.handle);
      bytes_ -=
          EntryBytes(entry->key) + ValueBytes(info) + (info.expire_at_ms != 0 ? ExpiryBytes() : 0);
      string_bytes_ -= ValueBytes(info);
      keys_of_type_[static_cast<size_t>(info.type)] -= 1;
    }
    shard.key_of_handle.clear();
    shard.key_of_cold_handle.clear();
  }
}

std::optional<KeyInfo> Keyspace::Find(std::string_view key) const {
  const Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  const Entry* entry = FindIn(shard, key);
  if (entry == nullptr) return std::nullopt;
  return entry->value;
}

std::optional<KeyInfo> Keyspace::FindAndTouch(std::string_view key, int64_t now_ms) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  const Entry* entry = FindIn(shard, key);
  if (entry == nullptr) return std::nullopt;
  const KeyInfo& info = entry->value;
  if (info.expire_at_ms == 0 || info.expire_at_ms > now_ms) {
    shard.IndexOf(info).Touch(info.handle, EvictionClockMicros());
  }
  return info;
}

void Keyspace::Touch(std::string_view key) {
  Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  if (const Entry* entry = FindIn(shard, key)) {
    shard.IndexOf(entry->value).Touch(entry->value.handle, EvictionClockMicros());
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
  KeyInfo& info = entry->value;
  bytes_ += (at_ms != 0 ? ExpiryBytes() : 0) - (info.expire_at_ms != 0 ? ExpiryBytes() : 0);
  info.expire_at_ms = at_ms;
  if (at_ms != 0) {
    shard.IndexOf(info).SetExpiry(info.handle, at_ms);
  } else {
    shard.IndexOf(info).ClearExpiry(info.handle);
  }
}

std::vector<std::pair<std::string, KeyType>> Keyspace::Expired(size_t shard_index, int64_t now_ms,
                                                               size_t limit) const {
  const Shard& shard = shards_[shard_index];
  std::lock_guard lock(shard.mu);
  // The earliest of both tiers' expiry heaps; each holds its own keys' deadlines.
  struct Due {
    int64_t at;
    const std::string* key;
  };
  std::vector<Due> due;
  for (const bool cold : {false, true}) {
    const EvictionIndex& index = cold ? shard.cold_index : shard.index;
    const auto& keys = cold ? shard.key_of_cold_handle : shard.key_of_handle;
    for (const auto& [at, handle] : index.Expired(now_ms, limit)) due.push_back({at, keys[handle]});
  }
  std::sort(due.begin(), due.end(), [](const Due& a, const Due& b) { return a.at < b.at; });
  if (due.size() > limit) due.resize(limit);
  std::vector<std::pair<std::string, KeyType>> out;
  out.reserve(due.size());
  for (const Due& d : due) {
    if (const Entry* entry = FindIn(shard, *d.key)) out.emplace_back(*d.key, entry->value.type);
  }
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
        if (offered + batch.size() >= count && !(batch.size() > 0 && entry->hash == resume)) {
          more = true;
          resume = entry->hash;
          break;
        }
        resume = entry->hash;
        batch.emplace_back(entry->key, entry->value);
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
      const Directory& keys = shards_[i].keys;
      std::lock_guard lock(shards_[i].mu);
      for (const Entry* entry = keys.First(); entry != nullptr; entry = keys.Next(entry)) {
        batch.emplace_back(entry->key, entry->value);
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
    return entry->key;
  }
  return std::nullopt;
}

std::optional<std::pair<std::string, KeyType>> Keyspace::PickVictim(EvictionPolicy policy) {
  return Pick(policy, false);
}

std::optional<std::pair<std::string, KeyType>> Keyspace::PickColdVictim(EvictionPolicy policy) {
  return Pick(policy, true);
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
      const std::string* key =
          (cold ? shard.key_of_cold_handle : shard.key_of_handle)[victim->handle];
      return std::make_pair(*key, FindIn(shard, *key)->value.type);
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
  return shard.IndexOf(entry->value).Frequency(entry->value.handle, EvictionClockMicros());
}

std::optional<uint64_t> Keyspace::IdleMs(std::string_view key) const {
  const Shard& shard = shards_[ShardOf(key)];
  std::lock_guard lock(shard.mu);
  const Entry* entry = FindIn(shard, key);
  if (entry == nullptr) return std::nullopt;
  return shard.IndexOf(entry->value).IdleMicros(entry->value.handle, EvictionClockMicros()) / 1000;
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
    if (entry->value.slot == slot) out.push_back(entry->key);
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
