#include "commands/key_access.h"

#include "commands/errors.h"

#include <mutex>
#include <string>

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

Deleted DeleteKey(Engine& engine, std::string_view key, store::KeyType type) {
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
    case store::KeyType::kPrefixIndex:
      records.push_back(persist::PrefixNamespaceDrop{std::string(key)});
      break;
  }
  Deleted out;
  for (const persist::Mutation& m : records) {
    MutationResult r = MutateEngine(engine, m);
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
  auto info = ctx.engine.keyspace().Find(key);
  if (!info) return std::nullopt;
  const int64_t now = CoarseNowMs();
  if (info->expire_at_ms != 0 && info->expire_at_ms <= now) {
    Deleted deleted = DeleteKey(ctx.engine, key, info->type);
    ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, deleted.lsn);
    ctx.engine.stats().expired_keys += 1;
    return std::nullopt;
  }
  if (touch) ctx.engine.keyspace().Touch(key);
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
    auto victim = engine.keyspace().PickVictim(policy);
    if (!victim) return false;
    if (!DeleteKey(engine, victim->first, victim->second).ok) return false;
    engine.stats().evicted_keys += 1;
  }
  return true;
}

uint64_t ExpireCycle(Engine& engine, int64_t now_ms, size_t per_shard) {
  uint64_t deleted = 0;
  for (size_t shard = 0; shard < store::Keyspace::kShardCount; ++shard) {
    for (const auto& [key, type] : engine.keyspace().Expired(shard, now_ms, per_shard)) {
      // Looked up again: a write may have cleared or moved the expiry since the list was made.
      auto info = engine.keyspace().Find(key);
      if (!info || info->expire_at_ms == 0 || info->expire_at_ms > now_ms) continue;
      if (DeleteKey(engine, key, info->type).ok) {
        engine.stats().expired_keys += 1;
        deleted += 1;
      }
    }
  }
  return deleted;
}

}  // namespace prefixd::commands
