#include "engine/keys.h"

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/scratch_array.h"
#include "engine/errors.h"
#include "engine/write_path.h"

namespace prefixd::commands {
namespace {

// SSM state stored under a KV.PREFIX registration's name belongs to that prefix (Pion stores a
// hybrid model's recurrent state there): SSM and KV.PREFIX commands both work on it.
// KV.PREFIX.DROP also removes a prefix-index namespace (docs/prefix-index.md).
bool Compatible(store::KeyType have, store::KeyType wanted, std::string_view command) {
  if (have == wanted) return true;
  if (have == store::KeyType::kPrefixIndex && command == "kv.prefix.drop") return true;
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
    MutationResult r = WritePath(engine).Apply(db, m);
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

// A lookup's lazy expiry: true when the entry found is due at `now` (it is then deleted, and the
// reply waits for the deletion's record); false when it is live.
bool ExpiredOnLookup(Context& ctx, std::string_view key, int64_t expire_at_ms, int64_t now) {
  if (expire_at_ms == 0 || expire_at_ms > now) return false;
  Deleted deleted = ExpireIfDue(ctx.engine, static_cast<size_t>(ctx.client.db.load()), key, now);
  ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, deleted.lsn);
  return true;
}

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
  if (!info || ExpiredOnLookup(ctx, key, info->expire_at_ms, now)) return std::nullopt;
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

std::optional<store::KeyType> KeyTypeOfFamily(std::string_view group) {
  if (group == "ssm") return store::KeyType::kSsmPrefix;
  if (group == "vstore") return store::KeyType::kVstore;
  if (group == "kvprefix") return store::KeyType::kKvPrefix;
  if (group == "prefixindex") return store::KeyType::kPrefixIndex;
  return std::nullopt;
}

bool PrepareTypedKeys(Context& ctx) {
  const auto wanted = ctx.spec.key_type;
  if (!wanted || ctx.spec.first_key <= 0) return true;
  const size_t last = static_cast<size_t>(ctx.spec.last_key);
  for (size_t i = static_cast<size_t>(ctx.spec.first_key); i <= last && i < ctx.args.size();
       i += static_cast<size_t>(ctx.spec.key_step)) {
    // The entry's type and expiry are all the check needs (FindLive's, without a KeyInfo).
    const std::string_view key = ctx.args[i];
    const int64_t now = CommandClock::WallMs();
    const auto found = Db(ctx).keys.FindTypeAndTouch(key, now);
    if (!found || ExpiredOnLookup(ctx, key, found->expire_at_ms, now)) continue;
    if (!Compatible(found->type, *wanted, ctx.spec.name)) {
      ctx.reply.Error(errors::kWrongType);
      return false;
    }
  }
  return true;
}

}  // namespace prefixd::commands
