#include "commands/key_access.h"

#include <algorithm>
#include <mutex>
#include <string>

#include "commands/errors.h"
#include "commands/mutate.h"
#include "common/clock.h"

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

KeyLocks::KeyLocks(Engine& engine, std::span<const std::string_view> keys) {
  std::vector<size_t> stripes;
  stripes.reserve(keys.size());
  for (std::string_view key : keys) stripes.push_back(Engine::KeyLockStripe(key));
  std::sort(stripes.begin(), stripes.end());
  stripes.erase(std::unique(stripes.begin(), stripes.end()), stripes.end());
  held_.reserve(stripes.size());
  for (size_t stripe : stripes) held_.emplace_back(engine.key_lock(stripe));
}

namespace {

// Redis counts keyspace_hits/misses in its read lookups (EXISTS, TYPE, TTL, OBJECT, ...); the
// typed families count per value read in their handlers, so only generic reads count here.
void CountGenericRead(Context& ctx, bool hit) {
  if (ctx.spec.group != "generic" || !(ctx.spec.flags & kReadonly)) return;
  if (ctx.spec.full_name == "randomkey") return;
  (hit ? ctx.engine.stats().keyspace_hits : ctx.engine.stats().keyspace_misses).Add();
}

std::optional<store::KeyInfo> FindLive(Context& ctx, std::string_view key, bool touch);

}  // namespace

std::optional<store::KeyInfo> LookupKey(Context& ctx, std::string_view key, bool touch) {
  auto info = FindLive(ctx, key, touch);
  CountGenericRead(ctx, info.has_value());
  return info;
}

namespace {

std::optional<store::KeyInfo> FindLive(Context& ctx, std::string_view key, bool touch) {
  store::Keyspace& keys = Db(ctx).keys;
  auto info = keys.Find(key);
  if (!info) return std::nullopt;
  const int64_t now = NowMs();
  if (info->expire_at_ms != 0 && info->expire_at_ms <= now) {
    Deleted deleted = DeleteKey(ctx, key, info->type);
    ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, deleted.lsn);
    ctx.engine.stats().expired_keys += 1;
    return std::nullopt;
  }
  if (touch) keys.Touch(key);
  return info;
}

}  // namespace

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

bool MakeRoom(Engine& engine) {
  const int64_t limit = engine.settings().Int(Setting::kMaxMemory);
  if (limit <= 0 || engine.UsedMemory() <= static_cast<uint64_t>(limit)) return true;
  const store::EvictionPolicy policy = CurrentPolicy(engine);
  if (policy == store::EvictionPolicy::kNoEviction) return false;
  // One eviction pass at a time, so two writers never evict the same budget twice.
  static std::mutex pass;
  std::lock_guard lock(pass);
  while (engine.UsedMemory() > static_cast<uint64_t>(limit)) {
    // The database holding the most memory gives its next victim (with one database in use,
    // no figures are needed).
    std::vector<std::pair<uint64_t, size_t>> by_size;
    engine.databases().ForEach(
        [&](size_t index, store::Database&) { by_size.emplace_back(0, index); });
    if (by_size.size() > 1) {
      for (auto& [bytes, index] : by_size) bytes = Engine::DatabaseMemory(engine.database(index));
      std::sort(by_size.rbegin(), by_size.rend());
    }
    bool evicted = false;
    for (const auto& [bytes, index] : by_size) {
      auto victim = engine.database(index).keys.PickVictim(policy);
      if (!victim) continue;
      if (!DeleteKey(engine, index, victim->first, victim->second).ok) return false;
      engine.stats().evicted_keys += 1;
      evicted = true;
      break;
    }
    if (!evicted) return false;
  }
  return true;
}

uint64_t ExpireCycle(Engine& engine, int64_t now_ms, size_t per_shard) {
  uint64_t deleted = 0;
  engine.databases().ForEach([&](size_t db, store::Database& database) {
    for (size_t shard = 0; shard < store::Keyspace::kShardCount; ++shard) {
      for (const auto& [key, type] : database.keys.Expired(shard, now_ms, per_shard)) {
        // Looked up again: a write may have cleared or moved the expiry since the list was made.
        auto info = database.keys.Find(key);
        if (!info || info->expire_at_ms == 0 || info->expire_at_ms > now_ms) continue;
        if (DeleteKey(engine, db, key, info->type).ok) {
          engine.stats().expired_keys += 1;
          deleted += 1;
        }
      }
    }
  });
  return deleted;
}

}  // namespace prefixd::commands
