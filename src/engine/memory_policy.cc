#include "engine/memory_policy.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "engine/change_kinds.h"
#include "engine/keys.h"
#include "engine/shm_leases.h"
#include "engine/write_path.h"

namespace prefixd::commands {

store::EvictionPolicy CurrentPolicy(const Engine& engine) {
  return store::ParseEvictionPolicy(engine.settings().String(Setting::kMaxMemoryPolicy))
      .value_or(store::EvictionPolicy::kNoEviction);
}

namespace {

// One eviction pass at a time, so two writers never evict the same budget twice.
std::mutex eviction_pass;

// Deletes an eviction's victim, fed to replicas as DEL (Redis 7.0 propagates evictions so).
bool EvictKey(Engine& engine, size_t db, std::string_view key, store::KeyType type) {
  ServerDeletion deletion(engine);
  const Deleted done = DeleteKey(engine, db, key, type);
  if (done.applied) deletion.Feed(db, key);
  return done.ok;
}

// The disk tier's cold bytes over every database.
uint64_t ColdBytes(Engine& engine) {
  uint64_t strings = 0;
  engine.databases().ForEach(
      [&](size_t, store::Database& database) { strings += database.keys.ColdStringBytes(); });
  return engine.StateStats().cold_bytes + engine.VectorStats().cold_bytes + strings;
}

bool OverDiskBudget(Engine& engine) {
  const int64_t limit = engine.settings().Int(Setting::kMaxDisk);
  return limit > 0 && engine.durability() != nullptr &&
         ColdBytes(engine) > static_cast<uint64_t>(limit);
}

// The databases in use, the one holding the most by `size` first (with one database in use, no
// figure is taken): eviction is in exact order within a database, and across databases takes
// from the largest.
std::vector<size_t> LargestFirst(Engine& engine,
                                 uint64_t (*size)(const store::Database& database)) {
  std::vector<std::pair<uint64_t, size_t>> by_size;
  engine.databases().ForEach(
      [&](size_t index, store::Database&) { by_size.emplace_back(0, index); });
  if (by_size.size() > 1) {
    for (auto& [bytes, index] : by_size) bytes = size(engine.database(index));
    std::sort(by_size.rbegin(), by_size.rend());
  }
  std::vector<size_t> order;
  order.reserve(by_size.size());
  for (const auto& [bytes, index] : by_size) order.push_back(index);
  return order;
}

uint64_t DatabaseColdBytes(const store::Database& database) {
  return database.state.Stats().cold_bytes + database.vectors.Stats().cold_bytes +
         database.keys.ColdStringBytes();
}

// The types the disk tier holds: SSM sessions, V-store sessions, KV.PREFIX registrations and
// strings (from KeyEntry::kInlineValueBelow on; a smaller one is deleted).
bool DiskTierType(store::KeyType type) {
  return type == store::KeyType::kSsmPrefix || type == store::KeyType::kVstore ||
         type == store::KeyType::kKvPrefix || type == store::KeyType::kString;
}

// A compact SSM session (its keyspace entry holds it) is below what the disk tier keeps, as a
// small string is: it is deleted, not moved.
bool CompactSession(const store::Database& database, std::string_view key, store::KeyType type) {
  return type == store::KeyType::kSsmPrefix && database.keys.IsCompactSession(key);
}

// maxdisk: while the disk tier's cold values exceed it, cold keys go by the policy (from the
// database holding the most cold bytes), each a logged delete (as a memory eviction without
// persistence), so they stay gone after a restart. Caller holds eviction_pass.
void TrimDiskTier(Engine& engine) {
  const store::EvictionPolicy policy = CurrentPolicy(engine);
  while (OverDiskBudget(engine)) {
    bool deleted = false;
    for (size_t index : LargestFirst(engine, DatabaseColdBytes)) {
      auto victim = engine.database(index).keys.PickColdVictim(policy);
      if (!victim) continue;
      if (!EvictKey(engine, index, victim->first, victim->second)) return;
      engine.stats().disk_evicted_keys += 1;
      deleted = true;
      break;
    }
    if (!deleted) return;
  }
}

}  // namespace

namespace {

// Parked small strings hold at most this much of the memory budget: they are kept for the cold
// chunks they describe (LMCache's metadata), not in place of the hot set.
uint64_t MaxParkedBytes(int64_t maxmemory) { return static_cast<uint64_t>(maxmemory) / 8; }

// Deletes one key of the cold index by `policy` (from the database holding the most memory); a
// memory eviction (evicted_keys). False when there is none.
bool DeleteColdVictim(Engine& engine, store::EvictionPolicy policy) {
  for (size_t index : LargestFirst(engine, Engine::DatabaseMemory)) {
    auto victim = engine.database(index).keys.PickColdVictim(policy);
    if (!victim) continue;
    if (!EvictKey(engine, index, victim->first, victim->second)) return false;
    engine.stats().evicted_keys += 1;
    return true;
  }
  return false;
}

}  // namespace

namespace {

// Whether evicting `key` of database `db` would free nothing now: a lease taken through it
// still shares bytes the key holds (docs/shm-transport.md, "Leases"). A KV.PREFIX registration's
// halves may be leased under their own names (V.SHMFETCH ns_pk).
bool LeaseHolds(size_t db, std::string_view key, store::KeyType type) {
  if (ShmLeaseHoldsKey(ShmLeaseTag(db, key))) return true;
  return type == store::KeyType::kKvPrefix &&
         (ShmLeaseHoldsKey(ShmLeaseTag(db, store::VectorStore::KeySid(key))) ||
          ShmLeaseHoldsKey(ShmLeaseTag(db, store::VectorStore::ValueSid(key))));
}

// The keys one eviction pass passed over for their leases, let back into the order when it
// ends: a lease may end at any time, and the next pass asks again.
class PassedOver {
 public:
  explicit PassedOver(Engine& engine) : engine_(engine) {}
  PassedOver(const PassedOver&) = delete;
  PassedOver& operator=(const PassedOver&) = delete;
  ~PassedOver() {
    for (const auto& [db, key] : keys_) engine_.database(db).keys.PassOver(key, false);
  }
  // False when the key went meanwhile (nothing to pass over).
  bool Add(size_t db, std::string_view key) {
    if (!engine_.database(db).keys.PassOver(key, true)) return false;
    keys_.emplace_back(db, std::string(key));
    engine_.stats().shm_eviction_skips += 1;
    return true;
  }

 private:
  Engine& engine_;
  std::vector<std::pair<size_t, std::string>> keys_;
};

}  // namespace

bool MakeRoom(Engine& engine) {
  if (OverDiskBudget(engine)) {
    std::lock_guard lock(eviction_pass);
    TrimDiskTier(engine);
  }
  const int64_t limit = engine.settings().Int(Setting::kMaxMemory);
  if (limit <= 0 || CountedMemory(engine) <= static_cast<uint64_t>(limit)) return true;
  const store::EvictionPolicy policy = CurrentPolicy(engine);
  if (policy == store::EvictionPolicy::kNoEviction) return false;
  std::lock_guard lock(eviction_pass);
  // Bytes only leases hold count against the budget: counted now, not as last kept.
  ShmLeasedOrphanBytesNow();
  // Declared after the lock: the keys passed over are let back before the next pass.
  PassedOver passed_over(engine);
  while (CountedMemory(engine) > static_cast<uint64_t>(limit)) {
    bool evicted = false;
    for (size_t index : LargestFirst(engine, Engine::DatabaseMemory)) {
      store::Database& database = engine.database(index);
      auto victim = database.keys.PickVictim(policy);
      if (!victim) continue;
      // A leased key's eviction would free nothing until its leases end: the next candidate
      // goes instead. Each key is passed over once a pass, so a pass where everything left is
      // leased ends, and the write gets -OOM as under noeviction.
      if (LeaseHolds(index, victim->first, victim->second)) {
        passed_over.Add(index, victim->first);
        evicted = true;  // progress: the order moved on (or the key is gone)
        break;
      }
      const bool disk_tier = engine.durability() != nullptr && DiskTierType(victim->second) &&
                             !CompactSession(database, victim->first, victim->second);
      const bool is_string = victim->second == store::KeyType::kString;
      // The disk tier: the entry's bytes are in the log or a snapshot; once they are durable it
      // leaves memory and stays a key of its database, served from disk. A V-store entry whose
      // rows have no known place (the log could not report one) is deleted as without it, and so
      // is a small string (no place is kept for it) — unless large strings are still in memory:
      // then it is parked in the cold index, kept, so that LMCache's 28-byte metadata outlives
      // its chunk's eviction (docs/cache-design.md, "Small strings beside cold chunks").
      const store::StringCold string_cold = disk_tier && is_string
                                                ? MakeStringCold(engine, database, victim->first)
                                                : store::StringCold::kNotEligible;
      if (disk_tier && (is_string ? string_cold == store::StringCold::kCold
                                  : MakeCold(engine, database, victim->first, victim->second))) {
        TrimDiskTier(engine);
      } else if (disk_tier && string_cold == store::StringCold::kNotEligible &&
                 database.keys.LargeStringBytes() > 0 &&
                 database.keys.ParkString(victim->first, MaxParkedBytes(limit))) {
        // Nothing freed: the next victim is taken.
      } else if (disk_tier && (victim->second == store::KeyType::kSsmPrefix ||
                               string_cold == store::StringCold::kNotDurable)) {
        return false;
      } else {
        if (!EvictKey(engine, index, victim->first, victim->second)) return false;
        engine.stats().evicted_keys += 1;
      }
      evicted = true;
      break;
    }
    // Nothing left in memory to evict, yet over the budget: what holds the memory is in the
    // cold index (parked small strings, the places of cold entries). A cache must not answer
    // -OOM under an eviction policy while it holds deletable keys, so they go by the policy.
    if (!evicted) evicted = DeleteColdVictim(engine, policy);
    if (!evicted) return false;
  }
  return true;
}

store::StringCold MakeStringCold(Engine& engine, store::Database& database, std::string_view key) {
  store::StringCold out = database.keys.MakeStringCold(key);
  // During recovery there is no log yet: what was read is durable and placed, or never will be.
  if ((out == store::StringCold::kNotDurable || out == store::StringCold::kNotPlaced) &&
      engine.durability() != nullptr) {
    // One fsync makes every record so far durable and placed, shared by the pass's victims.
    engine.durability()->Sync();
    out = database.keys.MakeStringCold(key);
  }
  if (out == store::StringCold::kCold) engine.stats().cold_evictions += 1;
  return out;
}

bool MakeCold(Engine& engine, store::Database& database, std::string_view key,
              store::KeyType type) {
  // A registration is one entry: its `_pk` / `_pv` sessions, then the SSM state under its name
  // with its own key. Each part turns cold under its key's shard lock, so a concurrent write
  // either lands first and is checked, or lands after and moves that key back to the hot index.
  std::vector<std::pair<std::string, store::KeyType>> parts;
  if (type == store::KeyType::kKvPrefix) {
    parts.emplace_back(store::VectorStore::KeySid(key), store::KeyType::kVstore);
    parts.emplace_back(store::VectorStore::ValueSid(key), store::KeyType::kVstore);
  }
  parts.emplace_back(std::string(key), type);
  int attempt = 0;
  const auto turn_cold = [&](const std::string& part, store::KeyType part_type) {
    return database.keys.MoveTier(part, /*cold=*/true, [&] {
      if (part_type == store::KeyType::kVstore) return database.vectors.MakeCold(part).ok;
      // The second try, after a sync, leaves in memory the small layers no record placed.
      const store::ColdOutcome out = database.state.MakeCold(part, attempt > 0);
      return out.ok || (part_type == store::KeyType::kKvPrefix && !out.existed);
    });
  };
  for (; attempt < 2; ++attempt) {
    bool all = true;
    for (const auto& [part, part_type] : parts) {
      if (turn_cold(part, part_type)) continue;
      auto info = database.keys.Find(part);
      if (!info || info->cold) continue;  // gone or moved meanwhile: nothing held here
      all = false;
    }
    if (all) {
      engine.stats().cold_evictions += 1;
      return true;
    }
    // Not durable (or not yet placed by the log thread): one fsync makes every record so far
    // durable, shared by all the victims of this pass. During recovery there is no log yet.
    if (engine.durability() == nullptr) return false;
    engine.durability()->Sync();
  }
  return false;
}

uint64_t ColdAfterRecovery(Engine& engine) {
  const int64_t limit = engine.settings().Int(Setting::kMaxMemory);
  const store::EvictionPolicy policy = CurrentPolicy(engine);
  if (engine.durability() == nullptr) return 0;
  uint64_t moved = 0;
  // A database whose next victim is not a session gives no more: nothing is deleted at start,
  // only sessions and strings the disk tier can hold leave memory. A string too small for it is
  // stepped over (an access stamp puts it behind the others; the order of what recovery loaded
  // is the log's, not its clients'), at most once per key.
  std::vector<bool> done(engine.databases().count(), false);
  std::vector<uint64_t> stepped_over(engine.databases().count(), 0);
  while (limit > 0 && policy != store::EvictionPolicy::kNoEviction &&
         CountedMemory(engine) > static_cast<uint64_t>(limit)) {
    bool progressed = false;
    for (size_t index : LargestFirst(engine, Engine::DatabaseMemory)) {
      if (done[index]) continue;
      store::Database& database = engine.database(index);
      auto victim = database.keys.PickVictim(policy);
      const bool is_string = victim && victim->second == store::KeyType::kString;
      const store::StringCold string_cold = is_string
                                                ? MakeStringCold(engine, database, victim->first)
                                                : store::StringCold::kNotEligible;
      const bool too_small = (is_string && string_cold == store::StringCold::kNotEligible) ||
                             (victim && CompactSession(database, victim->first, victim->second));
      if (too_small && stepped_over[index] < database.keys.size()) {
        database.keys.Touch(victim->first);
        stepped_over[index] += 1;
        progressed = true;
        break;
      }
      if (!victim || !DiskTierType(victim->second) ||
          !(is_string ? string_cold == store::StringCold::kCold
                      : MakeCold(engine, database, victim->first, victim->second))) {
        done[index] = true;
        continue;
      }
      ++moved;
      progressed = true;
      break;
    }
    if (!progressed) break;
  }
  std::lock_guard lock(eviction_pass);
  TrimDiskTier(engine);
  return moved;
}

void ColdWhileRecovering(Engine& engine, size_t db, const persist::Mutation& m) {
  const int64_t limit = engine.settings().Int(Setting::kMaxMemory);
  if (limit <= 0 || CurrentPolicy(engine) == store::EvictionPolicy::kNoEviction) return;
  const uint64_t used = CountedMemory(engine);
  engine.NotePeakMemory(used);
  if (used <= static_cast<uint64_t>(limit)) return;
  store::Database& database = engine.database(db);
  for (const std::string& key : KeysPlacedBy(m)) {
    auto info = database.keys.Find(key);
    // A V-store half of a KV.PREFIX registration has no key of its own: ColdAfterRecovery
    // takes the registration whole at the end.
    if (!info || info->cold || !DiskTierType(info->type) ||
        CompactSession(database, key, info->type)) {
      continue;
    }
    if (info->type == store::KeyType::kString) {
      MakeStringCold(engine, database, key);
    } else {
      MakeCold(engine, database, key, info->type);
    }
  }
}

namespace {

// Reads a cold entry back whole when it fits in the budget without evicting anything for it
// (always, with `always`); otherwise the read is served from disk and the entry stays cold.
template <typename Store>
void PromoteIn(Engine& engine, store::Database& database, Store& store, std::string_view key,
               bool always) {
  const uint64_t cold = store.ColdBytes(key);
  if (cold == 0) return;
  const int64_t limit = engine.settings().Int(Setting::kMaxMemory);
  if (!always && limit > 0 && CountedMemory(engine) + cold > static_cast<uint64_t>(limit)) return;
  if (!store.Promote(key)) return;
  database.keys.MoveTier(key, /*cold=*/false, [&] { return store.ColdBytes(key) == 0; });
}

}  // namespace

void PromoteOnRead(Engine& engine, store::Database& database, std::string_view key) {
  PromoteIn(engine, database, database.state, key, /*always=*/false);
}

void PromoteVectorSession(Engine& engine, store::Database& database, std::string_view sid,
                          bool always) {
  store::VectorStore& vectors = database.vectors;
  if (vectors.ColdBytes(sid) == 0) return;
  PromoteIn(engine, database, vectors, sid, always);
  // A half of a cold registration read back makes the registration hot again: maxdisk, which
  // drops a cold registration whole, must not take a half that is in memory.
  for (const std::string_view suffix : {std::string_view("_pk"), std::string_view("_pv")}) {
    if (!sid.ends_with(suffix)) continue;
    const std::string_view ns = sid.substr(0, sid.size() - suffix.size());
    if (vectors.ColdBytes(sid) == 0 && vectors.Prefix(ns)) {
      database.keys.MoveTier(ns, /*cold=*/false, [] { return true; });
    }
  }
}

uint64_t ExpireCycle(Engine& engine, int64_t now_ms, size_t per_shard) {
  uint64_t deleted = 0;
  engine.databases().ForEach([&](size_t db, store::Database& database) {
    for (size_t shard = 0; shard < store::Keyspace::kShardCount; ++shard) {
      for (const auto& [key, type] : database.keys.Expired(shard, now_ms, per_shard)) {
        deleted += ExpireIfDue(engine, db, key, now_ms).applied ? 1 : 0;
      }
    }
  });
  return deleted;
}

// The engine's background thread runs the expiry cycle: defined here, beside it, so that the
// engine itself needs no memory policy.
void Engine::StartActiveExpiry() {
  active_expiry_ = std::jthread([this](std::stop_token stop) {
    // Redis's hz 10: a pass every 100 ms; at most 200 keys per shard per pass, so one pass
    // never holds the io threads' writes back for long.
    constexpr auto kPeriod = std::chrono::milliseconds(100);
    constexpr size_t kPerShard = 200;
    std::mutex mu;
    std::condition_variable_any wake;
    while (!stop.stop_requested()) {
      {
        // A pass deletes keys: never in the middle of an EXEC.
        ExecGate::Hold gate(exec_gate_, /*exclusive=*/false);
        ExpireCycle(*this, CoarseNowMs(), kPerShard);
        replication_.Tick(settings_.Int(Setting::kReplPingReplicaPeriod));
      }
      SweepShmLeases(CoarseNowMs());
      std::unique_lock lock(mu);
      wake.wait_for(lock, stop, kPeriod, [] { return false; });
    }
  });
}

void Engine::StopActiveExpiry() {
  if (!active_expiry_.joinable()) return;
  active_expiry_.request_stop();
  active_expiry_.join();
}

}  // namespace prefixd::commands
