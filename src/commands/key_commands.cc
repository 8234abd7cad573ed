// Redis's generic key commands over the typed keyspace, with Redis 7.0.15's replies and errors:
// DEL, UNLINK, EXISTS, TYPE, the EXPIRE and TTL families, PERSIST, TOUCH, SCAN, KEYS, RANDOMKEY,
// OBJECT and MEMORY USAGE. They work on a key of any type; deletion and expiry go through the
// mutation path, so they are logged and survive a restart.
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commands/arg_reader.h"
#include "commands/families.h"
#include "common/ascii.h"
#include "common/clock.h"
#include "common/expiry_args.h"
#include "common/glob.h"
#include "common/numbers.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/keys.h"
#include "engine/memory_policy.h"
#include "engine/write_path.h"
#include "persist/key_records.h"

namespace prefixd::commands {
namespace {

using store::KeyInfo;

// Deletes every existing key among the arguments; the reply is how many there were.
void Del(Context& ctx) {
  int64_t removed = 0;
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    KeyLocks lock(ctx.engine, ctx.args[i]);  // one step against a string's read-modify-write
    auto info = LookupKey(ctx, ctx.args[i], /*touch=*/false);
    if (!info) continue;
    Deleted done = DeleteKey(ctx, ctx.args[i], info->type);
    if (!done.ok) return ctx.reply.Error(done.error);
    ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, done.lsn);
    if (done.applied) ++removed;
  }
  ctx.reply.Integer(removed);
}

void Exists(Context& ctx) {
  int64_t found = 0;
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    if (LookupKey(ctx, ctx.args[i], /*touch=*/false)) ++found;
  }
  ctx.reply.Integer(found);
}

void Touch(Context& ctx) {
  int64_t found = 0;
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    if (LookupKey(ctx, ctx.args[i], /*touch=*/true)) ++found;
  }
  ctx.reply.Integer(found);
}

void Type(Context& ctx) {
  auto info = LookupKey(ctx, ctx.args[1], /*touch=*/false);
  ctx.reply.Simple(info ? store::KeyTypeName(info->type) : "none");
}

std::vector<std::string_view> ArgsFrom(const Context& ctx, size_t first) {
  std::vector<std::string_view> out;
  for (size_t i = first; i < ctx.args.size(); ++i) out.push_back(ctx.args[i]);
  return out;
}

void ExpireGeneric(Context& ctx, expiry::TimeUnit unit, bool relative) {
  const int64_t now = NowMs();
  const auto rest = ArgsFrom(ctx, 2);
  auto request = expiry::ParseExpireArgs(rest, unit, relative, now, ctx.spec.full_name);
  if (!request.ok()) return ctx.reply.Error(request.error);
  KeyLocks lock(ctx.engine, ctx.args[1]);
  auto info = LookupKey(ctx, ctx.args[1], /*touch=*/true);
  if (!info) return ctx.reply.Integer(0);
  std::optional<int64_t> current;
  if (info->expire_at_ms != 0) current = info->expire_at_ms;
  switch (expiry::DecideExpire(request.value, current, now)) {
    case expiry::ExpireOutcome::kUnchanged:
      return ctx.reply.Integer(0);
    case expiry::ExpireOutcome::kDelete: {
      Deleted done = DeleteKey(ctx, ctx.args[1], info->type);
      if (!done.ok) return ctx.reply.Error(done.error);
      ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, done.lsn);
      ctx.propagate.Send({"DEL", ctx.args[1]});
      return ctx.reply.Integer(1);
    }
    case expiry::ExpireOutcome::kSet: {
      persist::KeyExpire record{std::string(ctx.args[1]),
                                static_cast<uint64_t>(request.value.at_ms)};
      auto done = Mutate(ctx, record);
      if (!done) return;
      // Replicas get the absolute time whatever the form (Redis 7.0): no drift with their lag.
      if (done->kind == persist::Outcome::Kind::kApplied) {
        ctx.propagate.Send({"PEXPIREAT", ctx.args[1], std::to_string(request.value.at_ms)});
      }
      return ctx.reply.Integer(done->kind == persist::Outcome::Kind::kApplied ? 1 : 0);
    }
  }
}

void Expire(Context& ctx) { ExpireGeneric(ctx, expiry::TimeUnit::kSeconds, true); }
void PExpire(Context& ctx) { ExpireGeneric(ctx, expiry::TimeUnit::kMilliseconds, true); }
void ExpireAt(Context& ctx) { ExpireGeneric(ctx, expiry::TimeUnit::kSeconds, false); }
void PExpireAt(Context& ctx) { ExpireGeneric(ctx, expiry::TimeUnit::kMilliseconds, false); }

void TtlGeneric(Context& ctx, expiry::TimeUnit unit, bool absolute) {
  auto info = LookupKey(ctx, ctx.args[1], /*touch=*/false);
  if (!info) return ctx.reply.Integer(expiry::kTtlNoKey);
  std::optional<int64_t> at;
  if (info->expire_at_ms != 0) at = info->expire_at_ms;
  ctx.reply.Integer(expiry::TtlReply(at, NowMs(), unit, absolute));
}

void Ttl(Context& ctx) { TtlGeneric(ctx, expiry::TimeUnit::kSeconds, false); }
void PTtl(Context& ctx) { TtlGeneric(ctx, expiry::TimeUnit::kMilliseconds, false); }
void ExpireTime(Context& ctx) { TtlGeneric(ctx, expiry::TimeUnit::kSeconds, true); }
void PExpireTime(Context& ctx) { TtlGeneric(ctx, expiry::TimeUnit::kMilliseconds, true); }

void Persist(Context& ctx) {
  auto info = LookupKey(ctx, ctx.args[1], /*touch=*/true);
  if (!info || info->expire_at_ms == 0) return ctx.reply.Integer(0);
  auto done = Mutate(ctx, persist::KeyExpire{std::string(ctx.args[1]), 0});
  if (!done) return;
  ctx.reply.Integer(done->kind == persist::Outcome::Kind::kApplied ? 1 : 0);
}

// Whether a listed key is shown: not expired (listing deletes nothing, as Redis's KEYS skips
// expired keys without a lookup), matching the pattern and the type filter.
struct KeyFilter {
  std::string_view pattern = "*";
  std::optional<std::string_view> type_name;
  int64_t now_ms = 0;

  bool operator()(const std::string& key, const KeyInfo& info) const {
    if (info.expire_at_ms != 0 && info.expire_at_ms <= now_ms) return false;
    if (type_name && !EqualsIgnoreCase(*type_name, store::KeyTypeName(info.type))) return false;
    return MatchesEverything(pattern) || GlobMatch(pattern, key);
  }
};

void Keys(Context& ctx) {
  KeyFilter filter{ctx.args[1], std::nullopt, NowMs()};
  std::vector<std::string> found;
  Db(ctx).keys.ForEach([&](const std::string& key, const KeyInfo& info) {
    if (filter(key, info)) found.push_back(key);
  });
  ctx.reply.ArrayLen(found.size());
  for (const auto& key : found) ctx.reply.Bulk(key);
}

void Scan(Context& ctx) {
  auto cursor = ParseScanCursor(ctx.args[1]);
  if (!cursor) return ctx.reply.Error(errors::kInvalidCursor);
  auto options = ReadScanOptions(ctx, 2, /*with_type=*/true);
  if (!options) return;
  const KeyFilter filter{options->pattern, options->type_name, NowMs()};
  const int64_t count = options->count;
  std::vector<std::string> found;
  const uint64_t next = Db(ctx).keys.Scan(*cursor, static_cast<size_t>(count),
                                          [&](const std::string& key, const KeyInfo& info) {
                                            if (filter(key, info)) found.push_back(key);
                                          });
  ctx.reply.ArrayLen(2);
  ctx.reply.Bulk(std::to_string(next));
  ctx.reply.ArrayLen(found.size());
  for (const auto& key : found) ctx.reply.Bulk(key);
}

void RandomKey(Context& ctx) {
  // An expired pick is deleted and another drawn, as Redis's dbRandomKey; bounded tries.
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto key = Db(ctx).keys.Random();
    if (!key) return ctx.reply.Null();
    if (LookupKey(ctx, *key, /*touch=*/false)) return ctx.reply.Bulk(*key);
  }
  ctx.reply.Null();
}

void DbSize(Context& ctx) { ctx.reply.Integer(static_cast<int64_t>(Db(ctx).keys.size())); }

void ObjectEncoding(Context& ctx) {
  auto info = LookupKey(ctx, ctx.args[2], /*touch=*/false);
  if (!info) return ctx.reply.Null();
  // Redis reports module-type values as "raw"; strings as Redis would hold them.
  switch (info->type) {
    case store::KeyType::kString:
      return ctx.reply.Bulk(store::StringEncodingName(info->encoding));
    case store::KeyType::kSet:  // Redis 7.0: an intset or a hashtable (listpack sets came in 7.2)
      return ctx.reply.Bulk(static_cast<store::SetEncoding>(info->encoding) ==
                                    store::SetEncoding::kIntset
                                ? "intset"
                                : "hashtable");
    case store::KeyType::kList:  // Redis 7.0 holds every list as a quicklist
      return ctx.reply.Bulk("quicklist");
    case store::KeyType::kHash:
      return ctx.reply.Bulk(static_cast<store::HashEncoding>(info->encoding) ==
                                    store::HashEncoding::kListpack
                                ? "listpack"
                                : "hashtable");
    case store::KeyType::kZset:
      return ctx.reply.Bulk(static_cast<store::ZsetEncoding>(info->encoding) ==
                                    store::ZsetEncoding::kListpack
                                ? "listpack"
                                : "skiplist");
    case store::KeyType::kStream:
      return ctx.reply.Bulk("stream");
    default:
      return ctx.reply.Bulk("raw");
  }
}

void ObjectRefcount(Context& ctx) {
  auto info = LookupKey(ctx, ctx.args[2], /*touch=*/false);
  if (!info) return ctx.reply.Null();
  ctx.reply.Integer(1);
}

void ObjectIdletime(Context& ctx) {
  auto info = LookupKey(ctx, ctx.args[2], /*touch=*/false);
  if (!info) return ctx.reply.Null();
  if (store::TracksFrequency(CurrentPolicy(ctx.engine)))
    return ctx.reply.Error(errors::kLfuSelected);
  ctx.reply.Integer(static_cast<int64_t>(Db(ctx).keys.IdleMs(ctx.args[2]).value_or(0) / 1000));
}

void ObjectFreq(Context& ctx) {
  auto info = LookupKey(ctx, ctx.args[2], /*touch=*/false);
  if (!info) return ctx.reply.Null();
  if (!store::TracksFrequency(CurrentPolicy(ctx.engine)))
    return ctx.reply.Error(errors::kLfuNotSelected);
  ctx.reply.Integer(Db(ctx).keys.Frequency(ctx.args[2]).value_or(0));
}

uint64_t KeyBytes(store::Database& db, std::string_view key, const KeyInfo& info) {
  switch (info.type) {
    case store::KeyType::kString:
    case store::KeyType::kSet:
    case store::KeyType::kList:
    case store::KeyType::kHash:
    case store::KeyType::kZset:
    case store::KeyType::kStream:
      return 0;  // the keyspace entry holds the value (Keyspace::EntryMemory)
    case store::KeyType::kSsmPrefix:
      return db.state.SessionBytes(key);
    case store::KeyType::kVstore: {
      auto detail = db.vectors.Detail(key);
      return detail ? detail->allocated_bytes + key.size() : 0;
    }
    case store::KeyType::kKvPrefix: {
      auto spec = db.vectors.Prefix(key);
      return spec ? spec->block_hashes.size() + key.size() + sizeof(store::PrefixSpec) : 0;
    }
    case store::KeyType::kPrefixIndex: {
      uint64_t bytes = 0;
      db.prefixes.With(key, [&](const store::PrefixIndex& index) {
        const store::PrefixStats s = index.Stats();
        bytes = s.kv_bytes + s.state_bytes + s.index_bytes + key.size();
      });
      return bytes;
    }
  }
  return 0;
}

void MemoryUsage(Context& ctx) {
  const auto& args = ctx.args;
  ArgReader r(ctx, 3);
  if (r.remaining() == 2 && r.Keyword("SAMPLES")) {
    if (!r.Integer()) return;
  }
  if (r.more()) return ctx.reply.Error(errors::kSyntax);
  auto info = LookupKey(ctx, args[2], /*touch=*/false);
  if (!info) return ctx.reply.Null();
  // The keyspace entry (key, type, stamps; a string's value) plus what the value's store holds.
  const uint64_t entry = Db(ctx).keys.EntryMemory(args[2]).value_or(0);
  ctx.reply.Integer(static_cast<int64_t>(entry + KeyBytes(Db(ctx), args[2], *info)));
}

}  // namespace

namespace {

// Fills what Redis 7.0.15's COMMAND reports for one of its key commands: `key_flags` is the
// key spec of its first key (index `key_index`, range `last_key`), 0 for a keyless command.
CommandSpec AsRedisKeyed(CommandSpec s, std::string since, uint32_t acl,
                         std::vector<std::string> tips, std::vector<Arg> args, uint32_t key_flags,
                         int key_index = 1, int last_key = 0) {
  s = AsRedis(std::move(s), std::move(since), acl, std::move(tips), std::move(args));
  if (key_flags != 0) s.key_specs = {RangeKeySpec(key_flags, key_index, last_key)};
  return s;
}

// ---- RENAME, RENAMENX, COPY, MOVE ----------------------------------------------------------

size_t SelectedDb(const Context& ctx) { return static_cast<size_t>(ctx.client.db.load()); }

// The live entry of `key` in database `db` (an expired one is deleted and reads as missing).
std::optional<KeyInfo> FindIn(Context& ctx, size_t db, std::string_view key) {
  auto info = ctx.engine.database(db).keys.Find(key);
  const int64_t now = NowMs();
  if (!info || info->expire_at_ms == 0 || info->expire_at_ms > now) return info;
  Deleted done = ExpireIfDue(ctx.engine, db, key, now);
  ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, done.lsn);
  return std::nullopt;
}

// Logs `m` for database `db`; false (the error queued) when refused.
bool MutateIn(Context& ctx, size_t db, const persist::Mutation& m) {
  MutationResult result = WritePath(ctx.engine).Apply(db, m);
  if (!result.outcome) {
    ctx.reply.Error(result.error);
    return false;
  }
  ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, result.lsn);
  return true;
}

bool DeleteIn(Context& ctx, size_t db, std::string_view key, store::KeyType type) {
  Deleted done = DeleteKey(ctx.engine, db, key, type);
  if (!done.ok) {
    ctx.reply.Error(done.error);
    return false;
  }
  ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, done.lsn);
  return true;
}

// Writes a copy of `from` (in `from_db`, described by `info`) as `to` in `to_db`, expiry
// included: a string's value or an SSM session's layers, by handle (no byte is copied). The other
// types are refused (`to` is left alone). False when an error was queued.
bool CopyValue(Context& ctx, size_t from_db, std::string_view from, const KeyInfo& info,
               size_t to_db, std::string_view to) {
  const auto at = static_cast<uint64_t>(info.expire_at_ms);
  if (info.type == store::KeyType::kString) {
    const uint32_t flags = static_cast<uint32_t>(info.encoding)
                           << persist::StringSet::kEncodingShift;
    KeyInfo source = info;  // a cold value is read from disk
    LoadColdString(ctx.engine, ctx.engine.database(from_db), from, source);
    return MutateIn(ctx, to_db,
                    persist::StringSet{std::string(to), flags, at, persist::Blob{{source.value}}});
  }
  if (store::HoldsValue(info.type)) {  // a string was copied above
    if (!MutateIn(ctx, to_db, persist::MembersRecord(std::string(to), info))) return false;
    return at == 0 || MutateIn(ctx, to_db, persist::KeyExpire{std::string(to), at});
  }
  if (info.type == store::KeyType::kSsmPrefix) {
    store::StateStore& state = ctx.engine.database(from_db).state;
    std::vector<uint32_t> ids;
    for (const store::LayerSize& layer : state.Layers(from)) ids.push_back(layer.layer);
    const auto values = state.GetMany(from, ids);
    persist::LayerBlobs layers;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (values[i]) layers.emplace_back(ids[i], *values[i]);
    }
    if (layers.empty()) return ctx.reply.Error(errors::kNoSuchKey), false;
    if (!MutateIn(ctx, to_db, persist::SsmPut{std::string(to), std::move(layers)})) return false;
    return at == 0 || MutateIn(ctx, to_db, persist::KeyExpire{std::string(to), at});
  }
  ctx.reply.Error(errors::MigrateUnsupportedType(AsciiUpper(ctx.spec.full_name),
                                                 store::KeyTypeName(info.type)));
  return false;
}

void RenameWith(Context& ctx, bool only_new) {
  const std::string_view from = ctx.args[1], to = ctx.args[2];
  const std::string_view keys[] = {from, to};
  KeyLocks lock(ctx.engine, keys);
  auto info = LookupKey(ctx, from, /*touch=*/true);
  if (!info) return ctx.reply.Error(errors::kNoSuchKey);
  if (from == to) return only_new ? ctx.reply.Integer(0) : ctx.reply.Simple("OK");
  const size_t db = SelectedDb(ctx);
  auto existing = LookupKey(ctx, to, /*touch=*/false);
  if (existing && only_new) return ctx.reply.Integer(0);
  if (existing && !DeleteIn(ctx, db, to, existing->type)) return;
  // The copy is logged before the source's delete: a crash between them loses nothing.
  if (!CopyValue(ctx, db, from, *info, db, to) || !DeleteIn(ctx, db, from, info->type)) return;
  only_new ? ctx.reply.Integer(1) : ctx.reply.Simple("OK");
}

void Rename(Context& ctx) { RenameWith(ctx, false); }
void RenameNx(Context& ctx) { RenameWith(ctx, true); }

// A database index argument, as Redis's getIntFromObjectOrReply then selectDb.
std::optional<size_t> DbArg(Context& ctx, std::string_view text) {
  auto db = ParseInt64(text);
  if (!db || *db < INT32_MIN || *db > INT32_MAX) {
    ctx.reply.Error(errors::kNotInteger);
    return std::nullopt;
  }
  if (*db < 0 || static_cast<uint64_t>(*db) >= ctx.engine.databases().count()) {
    ctx.reply.Error(errors::kDbIndexOutOfRange);
    return std::nullopt;
  }
  return static_cast<size_t>(*db);
}

void Copy(Context& ctx) {
  const std::string_view from = ctx.args[1], to = ctx.args[2];
  const size_t db = SelectedDb(ctx);
  size_t to_db = db;
  bool replace = false;
  for (ArgReader r(ctx, 3); r.more();) {
    if (r.Keyword("REPLACE")) {
      replace = true;
    } else if (r.Keyword("DB", 1)) {
      auto chosen = DbArg(ctx, r.Next());
      if (!chosen) return;
      to_db = *chosen;
    } else {
      return ctx.reply.Error(errors::kSyntax);
    }
  }
  if (from == to && db == to_db) {
    return ctx.reply.Error(errors::kSameObject);
  }
  const std::string_view keys[] = {from, to};
  KeyLocks lock(ctx.engine, keys);
  auto info = LookupKey(ctx, from, /*touch=*/true);
  if (!info) return ctx.reply.Integer(0);
  auto existing = FindIn(ctx, to_db, to);
  if (existing && !replace) return ctx.reply.Integer(0);
  if (existing && !DeleteIn(ctx, to_db, to, existing->type)) return;
  if (CopyValue(ctx, db, from, *info, to_db, to)) ctx.reply.Integer(1);
}

void Move(Context& ctx) {
  const std::string_view key = ctx.args[1];
  auto to_db = DbArg(ctx, ctx.args[2]);
  if (!to_db) return;
  const size_t db = SelectedDb(ctx);
  if (*to_db == db) return ctx.reply.Error(errors::kSameObject);
  KeyLocks lock(ctx.engine, key);
  auto info = LookupKey(ctx, key, /*touch=*/true);
  if (!info) return ctx.reply.Integer(0);
  if (FindIn(ctx, *to_db, key)) return ctx.reply.Integer(0);
  if (CopyValue(ctx, db, key, *info, *to_db, key) && DeleteIn(ctx, db, key, info->type)) {
    ctx.reply.Integer(1);
  }
}

void SwapDb(Context& ctx) {
  std::optional<size_t> index[2];
  const std::string_view names[2] = {errors::kInvalidFirstDb, errors::kInvalidSecondDb};
  for (size_t i = 0; i < 2; ++i) {
    auto n = ArgReader(ctx, i + 1).Integer(INT32_MIN, INT32_MAX, names[i]);
    if (!n) return;
    if (*n < 0 || static_cast<uint64_t>(*n) >= ctx.engine.databases().count()) {
      return ctx.reply.Error(errors::kDbIndexOutOfRange);
    }
    index[i] = static_cast<size_t>(*n);
  }
  if (*index[0] != *index[1] && !MutateIn(ctx, SelectedDb(ctx),
                                          persist::SwapDb{static_cast<uint32_t>(*index[0]),
                                                          static_cast<uint32_t>(*index[1])})) {
    return;
  }
  ctx.reply.Simple("OK");
}

}  // namespace

void RegisterKeyCommands(Registry& r) {
  auto cmd = [](std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h, std::string complexity, int keys = 1) {
    return MakeSpec("generic", keys, std::move(name), arity, flags, std::move(syntax),
                    std::move(summary), h, std::move(complexity));
  };
  const std::vector<std::string> multi_shard = {"request_policy:multi_shard",
                                                "response_policy:agg_sum"};
  const std::vector<std::string> nondeterministic = {"nondeterministic_output"};
  auto many = [&](std::string name, uint32_t flags, std::string summary, Handler h,
                  std::string since, uint32_t key_flags) {
    CommandSpec s = cmd(std::move(name), -2, flags, "<key> [key ...]", std::move(summary), h,
                        "O(N) in the number of keys");
    s.last_key = -1;
    Arg keys = KeyArg("key");
    keys.flags = kArgMultiple;
    return AsRedisKeyed(std::move(s), std::move(since), kAclKeyspace, multi_shard, {keys},
                        key_flags, 1, -1);
  };
  r.Add(many("del", kWrite, "Deletes keys of any type whole; replies how many existed.", Del,
             "1.0.0", kKeyRM | kKeyDelete));
  r.Add(many("unlink", kWrite | kFast,
             "Deletes keys of any type whole, as DEL; replies how many existed.", Del, "4.0.0",
             kKeyRM | kKeyDelete));
  r.Add(many("exists", kReadonly | kFast,
             "Counts the given keys that exist (a key named twice counts twice).", Exists, "1.0.0",
             kKeyRO));
  r.Add(many("touch", kReadonly | kFast,
             "Records an access to each key (idle time, LFU counter); replies how many exist.",
             Touch, "3.2.1", kKeyRO));
  r.Add(AsRedisKeyed(
      cmd("type", 2, kReadonly | kFast, "<key>",
          "Names the key's type (string, ssm-prefix, vstore, kvprefix), or none.", Type, "O(1)"),
      "1.0.0", kAclKeyspace, {}, {KeyArg("key")}, kKeyRO));

  const std::string when = "<key> <time> [NX|XX|GT|LT]";
  auto expire = [&](std::string name, std::string summary, Handler h, std::string since, Arg time) {
    std::vector<Arg> conditions = {TokenArg("nx", "NX"), TokenArg("xx", "XX"), TokenArg("gt", "GT"),
                                   TokenArg("lt", "LT")};
    return AsRedisKeyed(
        cmd(std::move(name), -3, kWrite | kFast, when, std::move(summary), h, "O(1)"),
        std::move(since), kAclKeyspace, {},
        {KeyArg("key"), std::move(time),
         OneOfArg("condition", kArgOptional, std::move(conditions), "7.0.0")},
        kKeyRW | kKeyUpdate);
  };
  r.Add(expire("expire", "Sets a key's time to live in seconds; logged as the absolute time.",
               Expire, "1.0.0", IntArg("seconds")));
  r.Add(expire("pexpire", "Sets a key's time to live in milliseconds; logged as the absolute time.",
               PExpire, "2.6.0", IntArg("milliseconds")));
  r.Add(expire("expireat", "Sets a key's expiry as a Unix time in seconds.", ExpireAt, "1.2.0",
               TypedArg("unix-time-seconds", ArgType::kUnixTime)));
  r.Add(expire("pexpireat", "Sets a key's expiry as a Unix time in milliseconds.", PExpireAt,
               "2.6.0", TypedArg("unix-time-milliseconds", ArgType::kUnixTime)));

  auto ttl = [&](std::string name, std::string summary, Handler h, std::string since,
                 std::vector<std::string> tips) {
    return AsRedisKeyed(
        cmd(std::move(name), 2, kReadonly | kFast, "<key>", std::move(summary), h, "O(1)"),
        std::move(since), kAclKeyspace, std::move(tips), {KeyArg("key")}, kKeyRO | kKeyAccess);
  };
  r.Add(ttl("ttl", "Seconds a key has left to live: -1 without an expiry, -2 without the key.", Ttl,
            "1.0.0", nondeterministic));
  r.Add(ttl("pttl",
            "Milliseconds a key has left to live: -1 without an expiry, -2 without the key.", PTtl,
            "2.6.0", nondeterministic));
  r.Add(ttl("expiretime",
            "A key's expiry as a Unix time in seconds: -1 without one, -2 without the key.",
            ExpireTime, "7.0.0", {}));
  r.Add(ttl("pexpiretime",
            "A key's expiry as a Unix time in milliseconds: -1 without one, -2 without the key.",
            PExpireTime, "7.0.0", {}));
  r.Add(AsRedisKeyed(cmd("persist", 2, kWrite | kFast, "<key>",
                         "Removes a key's expiry; 1 if it had one.", Persist, "O(1)"),
                     "2.2.0", kAclKeyspace, {}, {KeyArg("key")}, kKeyRW | kKeyUpdate));

  r.Add(AsRedis(
      cmd("scan", -2, kReadonly, "<cursor> [MATCH pattern] [COUNT count] [TYPE type]",
          "Walks the keyspace a step at a time; a key present throughout is returned.", Scan,
          "O(1) per call, O(N) for a whole walk", 0),
      "2.8.0", kAclKeyspace, {"nondeterministic_output", "request_policy:special"},
      {IntArg("cursor"), Tokened(TypedArg("pattern", ArgType::kPattern, kArgOptional), "MATCH"),
       Tokened(IntArg("count", kArgOptional), "COUNT"),
       Tokened(StrArg("type", kArgOptional), "TYPE", "6.0.0")}));
  r.Add(AsRedis(cmd("keys", 2, kReadonly, "<pattern>", "Lists every key matching a glob pattern.",
                    Keys, "O(N) in the number of keys", 0),
                "1.0.0", kAclKeyspace | kAclDangerous,
                {"request_policy:all_shards", "nondeterministic_output_order"},
                {TypedArg("pattern", ArgType::kPattern)}));
  r.Add(AsRedis(cmd("randomkey", 1, kReadonly, "",
                    "Returns a random key, or nil when there is none.", RandomKey, "O(1)", 0),
                "1.0.0", kAclKeyspace, {"request_policy:all_shards", "nondeterministic_output"}));
  r.Add(AsRedis(cmd("dbsize", 1, kReadonly | kFast, "",
                    "Counts the keys of every type in the selected database.", DbSize, "O(1)", 0),
                "1.0.0", kAclKeyspace, {"request_policy:all_shards", "response_policy:agg_sum"}));

  CommandSpec object = AsRedis(
      cmd("object", -2, 0, "<subcommand> [arguments]",
          "Reports how a key is held: encoding, idle time, access frequency.", nullptr, "O(1)", 0),
      "2.2.3");
  auto sub = [&](std::string name, Handler h, std::string summary, std::string since) {
    CommandSpec s = cmd(std::move(name), 3, kReadonly, "<key>", std::move(summary), h, "O(1)");
    s.first_key = s.last_key = 2;
    return AsRedisKeyed(std::move(s), std::move(since), kAclKeyspace, nondeterministic,
                        {KeyArg("key")}, kKeyRO, 2);
  };
  object.subcommands = {
      sub("encoding", ObjectEncoding, "The key's internal representation (raw).", "2.2.3"),
      sub("freq", ObjectFreq, "The key's LFU access counter (an LFU maxmemory-policy only).",
          "4.0.0"),
      sub("idletime", ObjectIdletime, "Seconds since the key was last accessed.", "2.2.3"),
      sub("refcount", ObjectRefcount, "The number of references to the key's value (1).", "2.2.3"),
      AsRedis(cmd(
                  "help", 2, kLoading | kStale, "", "Lists the OBJECT subcommands.",
                  [](Context& ctx) { HelpReply(ctx, *ctx.engine.registry->Find("object")); },
                  "O(1)", 0),
              "6.2.0", kAclKeyspace),
  };
  r.Add(std::move(object));

  CommandSpec memory = AsRedis(cmd("memory", -2, 0, "<subcommand> [arguments]",
                                   "Reports memory figures of keys.", nullptr, "O(1)", 0),
                               "4.0.0");
  memory.group = "server";
  CommandSpec usage = cmd("usage", -3, kReadonly, "<key> [SAMPLES count]",
                          "Bytes a key and its value take in memory.", MemoryUsage, "O(1)");
  usage.first_key = usage.last_key = 2;
  usage.group = "server";
  CommandSpec memory_help = cmd(
      "help", 2, kLoading | kStale, "", "Lists the MEMORY subcommands.",
      [](Context& ctx) { HelpReply(ctx, *ctx.engine.registry->Find("memory")); }, "O(1)", 0);
  memory_help.group = "server";
  memory.subcommands = {
      AsRedisKeyed(std::move(usage), "4.0.0", 0, {},
                   {KeyArg("key"), Tokened(IntArg("count", kArgOptional), "SAMPLES")}, kKeyRO, 2),
      AsRedis(std::move(memory_help), "4.0.0"),
  };
  r.Add(std::move(memory));
  // RENAME, RENAMENX, COPY and MOVE: two key specs (source, destination) where Redis has them.
  auto two_keys = [&](CommandSpec s, std::string since, uint32_t from_flags, uint32_t to_flags,
                      std::vector<Arg> args) {
    s = AsRedisKeyed(std::move(s), std::move(since), kAclKeyspace, {}, std::move(args), from_flags);
    s.key_specs.push_back(RangeKeySpec(to_flags, 2));
    s.last_key = 2;
    return s;
  };
  Arg new_key = KeyArg("newkey");
  new_key.key_spec_index = 1;
  r.Add(two_keys(cmd("rename", 3, kWrite, "<key> <newkey>",
                     "Renames a string or SSM key, replacing newkey; its expiry goes with it.",
                     Rename, "O(1)"),
                 "1.0.0", kKeyRW | kKeyAccess | kKeyDelete, kKeyOW | kKeyUpdate,
                 {KeyArg("key"), new_key}));
  r.Add(two_keys(
      cmd("renamenx", 3, kWrite | kFast, "<key> <newkey>",
          "Renames a string or SSM key unless newkey exists; 1 if renamed.", RenameNx, "O(1)"),
      "1.0.0", kKeyRW | kKeyAccess | kKeyDelete, kKeyOW | kKeyInsert, {KeyArg("key"), new_key}));
  Arg destination = KeyArg("destination");
  destination.key_spec_index = 1;
  Arg destination_db = Tokened(IntArg("destination-db", kArgOptional), "DB");
  Arg replace = TokenArg("replace", "REPLACE");
  replace.flags = kArgOptional;
  r.Add(two_keys(cmd("copy", -3, kWrite | kDenyOom, "<source> <destination> [DB db] [REPLACE]",
                     "Copies a string or SSM key (by reference), optionally to another database.",
                     Copy, "O(1) for strings, O(layers) for SSM sessions"),
                 "6.2.0", kKeyRO | kKeyAccess, kKeyOW | kKeyUpdate,
                 {KeyArg("source"), destination, destination_db, replace}));
  r.Add(AsRedisKeyed(cmd("move", 3, kWrite | kFast, "<key> <db>",
                         "Moves a string or SSM key to another database.", Move, "O(1)"),
                     "1.0.0", kAclKeyspace, {}, {KeyArg("key"), IntArg("db")},
                     kKeyRW | kKeyAccess | kKeyUpdate));
  r.Add(AsRedis(
      cmd("swapdb", 3, kWrite | kFast, "<index1> <index2>",
          "Exchanges the contents of two databases; logged as one record.", SwapDb, "O(1)", 0),
      "4.0.0", kAclKeyspace | kAclDangerous, {}, {IntArg("index1"), IntArg("index2")}));
}

}  // namespace prefixd::commands
