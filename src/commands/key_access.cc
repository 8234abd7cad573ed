#include "commands/key_access.h"

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
  return std::nullopt;
}

}  // namespace

persist::Mutation DeleteRecord(std::string_view key, store::KeyType type) {
  switch (type) {
    case store::KeyType::kSsmPrefix:
      return persist::SsmDropSession{std::string(key)};
    case store::KeyType::kVstore:
      return persist::VDrop{std::string(key)};
    case store::KeyType::kKvPrefix:
      return persist::KvDrop{std::string(key)};
  }
  return persist::SsmDropSession{std::string(key)};
}

std::optional<store::KeyInfo> LookupKey(Context& ctx, std::string_view key, bool touch) {
  auto info = ctx.engine.keyspace().Find(key);
  if (!info) return std::nullopt;
  const int64_t now = CoarseNowMs();
  if (info->expire_at_ms != 0 && info->expire_at_ms <= now) {
    MutationResult deleted = MutateEngine(ctx.engine, DeleteRecord(key, info->type));
    ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, deleted.lsn);
    ctx.engine.stats().expired_keys += 1;
    return std::nullopt;
  }
  if (touch) ctx.engine.keyspace().Touch(key);
  return info;
}

bool PrepareTypedKeys(Context& ctx) {
  const auto wanted = TypeOfGroup(ctx.spec.group);
  if (!wanted || ctx.spec.first_key <= 0) return true;
  const size_t last = static_cast<size_t>(ctx.spec.last_key);
  for (size_t i = static_cast<size_t>(ctx.spec.first_key); i <= last && i < ctx.args.size();
       i += static_cast<size_t>(ctx.spec.key_step)) {
    auto info = LookupKey(ctx, ctx.args[i], /*touch=*/true);
    if (info && info->type != *wanted) {
      ctx.reply.Error(kWrongType);
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
    if (!MutateEngine(engine, DeleteRecord(victim->first, victim->second)).outcome) return false;
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
      if (MutateEngine(engine, DeleteRecord(key, info->type)).outcome) {
        engine.stats().expired_keys += 1;
        deleted += 1;
      }
    }
  }
  return deleted;
}

}  // namespace prefixd::commands
