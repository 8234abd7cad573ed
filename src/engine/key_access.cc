#include "engine/key_access.h"

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/client_memory.h"
#include "common/clock.h"
#include "common/scratch_array.h"
#include "engine/errors.h"
#include "engine/mutate.h"

namespace prefixd::commands {
namespace {

std::optional<store::KeyType> TypeOfGroup(std::string_view group) {
  if (group == "ssm") return store::KeyType::kSsmPrefix;
  if (group == "vstore") return store::KeyType::kVstore;
  if (group == "kvprefix") return store::KeyType::kKvPrefix;
  if (group == "prefixindex") return store::KeyType::kPrefixIndex;
  return std::nullopt;
}

// SSM state stored under a KV.PREFIX registration's name belongs to that prefix (Pion stores a
// hybrid model's recurrent state there): SSM and KV.PREFIX commands both work on it.
bool Compatible(store::KeyType have, store::KeyType wanted) {
  if (have == wanted) return true;
  const auto hybrid = [](store::KeyType t) {
    return t == store::KeyType::kSsmPrefix || t == store::KeyType::kKvPrefix;
  };
  return hybrid(have) && hybrid(wanted);
}

}  // namespace

Deleted DeleteKey(Engine& engine, size_t db, std::string_view key, store::KeyType type) {
  std::vector<persist::Mutation> records;
  switch (type) {
    case store::KeyType::kSsmPrefix:
      records.push_back(persist::SsmDropSession{std::string(key)});
      break;
    case store::KeyType::kVstore:
      records.push_back(persist::VDrop{std::string(key)});
      break;
    case store::KeyType::kKvPrefix:
      records.push_back(persist::KvDrop{std::string(key)});
      records.push_back(persist::SsmDropSession{std::string(key)});
      break;
    case store::KeyType::kString:
      records.push_back(persist::StringDel{std::string(key)});
      break;
    case store::KeyType::kSet:
      records.push_back(persist::SetValue{std::string(key), 0, persist::SetValue::kWhole, {}});
      break;
    case store::KeyType::kList:
      records.push_back(persist::ListValue{std::string(key), persist::ListValue::kWhole, 0, {}});
      break;
    case store::KeyType::kHash:
      records.push_back(persist::HashValue{std::string(key), 0, persist::HashValue::kWhole, {}});
      break;
    case store::KeyType::kZset:
      records.push_back(persist::ZsetValue{std::string(key), 0, persist::ZsetValue::kWhole, {}});
      break;
    case store::KeyType::kStream:
      records.push_back(
          persist::StreamValue{std::string(key), persist::StreamValue::kWhole, 0, {}});
      break;
    case store::KeyType::kPrefixIndex:
      records.push_back(persist::PrefixNamespaceDrop{std::string(key)});
      break;
  }
  Deleted out;
  for (const persist::Mutation& m : records) {
    MutationResult r = MutateEngine(engine, db, m);
    if (!r.outcome) {
      out.error = r.error;
      return out;
    }
    out.lsn = std::max(out.lsn, r.lsn);
    out.applied = out.applied || r.outcome->kind == persist::Outcome::Kind::kApplied;
  }
  out.ok = true;
  return out;
}

Deleted DeleteKey(Context& ctx, std::string_view key, store::KeyType type) {
  return DeleteKey(ctx.engine, static_cast<size_t>(ctx.client.db.load()), key, type);
}

namespace {
// The stripes held by KeyLocks objects on this thread.
thread_local std::vector<size_t> stripes_held_here;
}  // namespace

KeyLocks::KeyLocks(Engine& engine, std::span<const std::string_view> keys) {
  if (keys.size() == 1) {
    Take(engine, Engine::KeyLockStripe(keys[0]));
    return;
  }
  ScratchArray<size_t, 32> scratch(keys.size());
  const std::span<size_t> stripes = scratch.span();
  for (size_t i = 0; i < keys.size(); ++i) stripes[i] = Engine::KeyLockStripe(keys[i]);
  // One global order of stripes, so two multi-key commands never wait on each other in a cycle.
  std::sort(stripes.begin(), stripes.end());
  const auto end = std::unique(stripes.begin(), stripes.end());
  // The first stripe goes to first_held_, the rest to more_held_.
  if (end - stripes.begin() > 1) more_held_.reserve(static_cast<size_t>(end - stripes.begin() - 1));
  for (auto it = stripes.begin(); it != end; ++it) Take(engine, *it);
}

void KeyLocks::Take(Engine& engine, size_t stripe) {
  if (std::find(stripes_held_here.begin(), stripes_held_here.end(), stripe) !=
      stripes_held_here.end()) {
    return;
  }
  if (!first_held_.owns_lock()) {
    first_held_ = std::unique_lock(engine.key_lock(stripe));
    first_stripe_ = stripe;
  } else {
    more_held_.push_back(Held{std::unique_lock(engine.key_lock(stripe)), stripe});
  }
  stripes_held_here.push_back(stripe);
}

KeyLocks::~KeyLocks() {
  auto release = [](size_t stripe) {
    stripes_held_here.erase(std::find(stripes_held_here.begin(), stripes_held_here.end(), stripe));
  };
  if (first_held_.owns_lock()) release(first_stripe_);
  for (const Held& held : more_held_) release(held.stripe);
}

namespace {

// Redis counts keyspace_hits/misses in its read lookups (EXISTS, TYPE, TTL, OBJECT, ...); the
// typed families count per value read in their handlers, so only generic reads count here.
void CountGenericRead(Context& ctx, bool hit) {
  if (ctx.spec.group != "generic" || !(ctx.spec.flags & kReadonly)) return;
  if (ctx.spec.full_name == "randomkey") return;
  (hit ? ctx.engine.stats().keyspace_hits : ctx.engine.stats().keyspace_misses).Add();
}

// What a lookup brings back beside the entry's type and expiry.
enum class ValueWanted { kValue, kValueOrPlace, kNone };

std::optional<store::KeyInfo> FindLive(Context& ctx, std::string_view key, bool touch,
                                       ValueWanted wanted);

}  // namespace

void LoadColdString(Engine& engine, store::Database& database, std::string_view key,
                    store::KeyInfo& info) {
  if (info.type != store::KeyType::kString || !info.cold || info.place.file == nullptr) return;
  std::string error;
  if (!database.keys.ReadColdString(info.place, 0, info.place.length, info.value, error)) {
    throw std::runtime_error("reading a cold string from disk failed: " + error);
  }
  if (PromotesOnRead(engine, info.value.size())) {
    database.keys.PromoteString(key, info.place, info.value);
  }
}

bool PromotesOnRead(const Engine& engine, uint64_t bytes) {
  const int64_t limit = engine.settings().Int(Setting::kMaxMemory);
  return limit <= 0 || CountedMemory(engine) + bytes <= static_cast<uint64_t>(limit);
}

std::optional<store::KeyInfo> LookupKey(Context& ctx, std::string_view key, bool touch) {
  auto info = FindLive(ctx, key, touch, ValueWanted::kValue);
  CountGenericRead(ctx, info.has_value());
  return info;
}

std::optional<store::KeyInfo> LookupKeyPlace(Context& ctx, std::string_view key) {
  return FindLive(ctx, key, /*touch=*/true, ValueWanted::kValueOrPlace);
}

std::optional<store::KeyInfo> LookupKeyToReplace(Context& ctx, std::string_view key) {
  return FindLive(ctx, key, /*touch=*/true, ValueWanted::kNone);
}

namespace {

std::optional<store::KeyInfo> FindLive(Context& ctx, std::string_view key, bool touch,
                                       ValueWanted wanted) {
  store::Keyspace& keys = Db(ctx).keys;
  const int64_t now = CommandClock::WallMs();
  auto info = touch ? keys.FindAndTouch(key, now, wanted != ValueWanted::kNone) : keys.Find(key);
  if (!info) return std::nullopt;
  if (info->expire_at_ms != 0 && info->expire_at_ms <= now) {
    Deleted deleted = ExpireIfDue(ctx.engine, static_cast<size_t>(ctx.client.db.load()), key, now);
    ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, deleted.lsn);
    return std::nullopt;
  }
  // A string command reads a cold string's bytes from disk; the generic commands (EXISTS, TYPE,
  // TTL, ...) need only its entry.
  if (wanted == ValueWanted::kValue && info->type == store::KeyType::kString && info->cold &&
      ctx.spec.group == "string") {
    LoadColdString(ctx.engine, Db(ctx), key, *info);
  }
  return info;
}

}  // namespace

Deleted ExpireIfDue(Engine& engine, size_t db, std::string_view key, int64_t now_ms) {
  ServerDeletion deletion(engine);
  KeyLocks lock(engine, key);
  // Looked up again under the lock: the entry seen expired may since have been deleted by the
  // racing pass or lookup, or written again by a command.
  auto info = engine.database(db).keys.Find(key);
  if (!info || info->expire_at_ms == 0 || info->expire_at_ms > now_ms) {
    Deleted nothing;
    nothing.ok = true;
    return nothing;
  }
  Deleted deleted = DeleteKey(engine, db, key, info->type);
  if (deleted.applied) {
    engine.stats().expired_keys += 1;
    deletion.Feed(db, key);
  }
  return deleted;
}

bool PrepareTypedKeys(Context& ctx) {
  const auto wanted = TypeOfGroup(ctx.spec.group);
  if (!wanted || ctx.spec.first_key <= 0) return true;
  const size_t last = static_cast<size_t>(ctx.spec.last_key);
  for (size_t i = static_cast<size_t>(ctx.spec.first_key); i <= last && i < ctx.args.size();
       i += static_cast<size_t>(ctx.spec.key_step)) {
    auto info = LookupKey(ctx, ctx.args[i], /*touch=*/true);
    if (info && !Compatible(info->type, *wanted)) {
      ctx.reply.Error(errors::kWrongType);
      return false;
    }
  }
  return true;
}

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

uint64_t CountedMemory(const Engine& engine) { return engine.UsedMemory() + memory::ClientBytes(); }

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
  while (CountedMemory(engine) > static_cast<uint64_t>(limit)) {
    bool evicted = false;
    for (size_t index : LargestFirst(engine, Engine::DatabaseMemory)) {
      store::Database& database = engine.database(index);
      auto victim = database.keys.PickVictim(policy);
      if (!victim) continue;
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
  std::vector<std::string> keys;
  if (const auto* put = std::get_if<persist::SsmPut>(&m)) keys.push_back(put->sid);
  if (const auto* rows = std::get_if<persist::VStore>(&m)) keys.push_back(rows->sid);
  for (const persist::StringValueAt& w :
       persist::StringValueOffsets(m, store::KeyEntry::kInlineValueBelow)) {
    keys.emplace_back(w.key);
  }
  for (const std::string& key : keys) {
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

}  // namespace prefixd::commands
