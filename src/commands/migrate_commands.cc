// Moving keys between servers, with Redis 7.0.15's replies and errors: DUMP (a key of any type as
// the records that recreate it, persist/dump_payload.h), RESTORE and RESTORE-ASKING (the same
// handler; cluster routing treats the latter as if ASKING was sent) and MIGRATE (DUMP to another
// prefixd, streamed from the stored buffers, then the source key deleted once the target has
// acknowledged). Every change goes through the mutation path: logged, durable, replayed.
#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "commands/arg_reader.h"
#include "commands/families.h"
#include "commands/migrate_link.h"
#include "commands/vstore_shared.h"
#include "common/ascii.h"
#include "common/clock.h"
#include "common/numbers.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/keys.h"
#include "engine/write_path.h"
#include "persist/dump_payload.h"
#include "persist/key_records.h"
#include "persist/rdb.h"
#include "protocol/command_encoding.h"

namespace prefixd::commands {
namespace {

// The DUMP payload of `key` (whose entry is `info`) as pieces; nullopt when it vanished.
std::optional<std::vector<Bytes>> DumpOf(store::Database& db, const std::string& key,
                                         const store::KeyInfo& info) {
  std::vector<persist::Mutation> records;
  if (!persist::KeyRecords(persist::KeyStores{db.state, db.vectors, db.prefixes}, key, info,
                           records)) {
    return std::nullopt;
  }
  return persist::EncodeDump(records);
}

void Dump(Context& ctx) {
  const std::string key(ctx.args[1]);
  auto info = LookupKey(ctx, key, /*touch=*/true);
  if (!info) return ctx.reply.Null();
  auto pieces = DumpOf(Db(ctx), key, *info);
  if (!pieces) return ctx.reply.Null();
  ctx.reply.BulkPieces(*pieces);
}

// ---- RESTORE -------------------------------------------------------------------------------

struct RestoreOptions {
  bool replace = false;
  bool absttl = false;
  int64_t idle = -1;  // accepted and checked; a restored key starts with fresh access stamps
  int64_t freq = -1;
};

// Redis's option loop: IDLETIME and FREQ exclude each other (the second one is a syntax error).
std::optional<RestoreOptions> ParseRestoreOptions(Context& ctx) {
  RestoreOptions o;
  for (ArgReader r(ctx, 4); r.more();) {
    if (r.Keyword("replace")) {
      o.replace = true;
    } else if (r.Keyword("absttl")) {
      o.absttl = true;
    } else if (o.freq == -1 && r.Keyword("idletime", 1)) {
      auto v = r.Integer();
      if (!v) return std::nullopt;
      if (*v < 0) return r.Fail(errors::kIdleTimeNegative), std::nullopt;
      o.idle = *v;
    } else if (o.idle == -1 && r.Keyword("freq", 1)) {
      auto v = r.Integer();
      if (!v) return std::nullopt;
      if (*v < 0 || *v > 255) return r.Fail(errors::kFreqOutOfRange), std::nullopt;
      o.freq = *v;
    } else {
      return r.Fail(errors::kSyntax), std::nullopt;
    }
  }
  return o;
}

// Logs `m`; false (the error queued) when refused.
bool Apply(Context& ctx, const persist::Mutation& m) {
  MutationResult result = WritePath(ctx.engine).Apply(static_cast<size_t>(ctx.client.db.load()), m);
  if (!result.outcome) return ctx.reply.Error(result.error), false;
  ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, result.lsn);
  if (result.outcome->kind == persist::Outcome::Kind::kLimit) {
    const auto limit =
        static_cast<uint64_t>(ctx.engine.settings().Int(Setting::kVstoreMaxSessions));
    return ctx.reply.Error(vstore::SessionLimitError("RESTORE", limit)), false;
  }
  return true;
}

// Deletes each of `keys` that exists (RESTORE ... REPLACE, or undoing a restore cut short).
bool DeleteAll(Context& ctx, const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    auto info = Db(ctx).keys.Find(key);
    if (!info) continue;
    Deleted done = DeleteKey(ctx, key, info->type);
    if (!done.ok) return ctx.reply.Error(done.error), false;
    ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, done.lsn);
  }
  return true;
}

// What RESTORE sends to replicas: a relative TTL as an absolute one, then ABSTTL (Redis 7.0),
// and for a key Redis has a type for the value as Redis's own DUMP payload, so that a Redis
// replica restores it too (prefixd's payload is its own format).
void PropagateRestore(Context& ctx, const RestoreOptions& options, int64_t at) {
  if (!ctx.propagate.wanted()) return;
  const bool relative = at != 0 && !options.absttl;
  std::string redis_payload;
  if (auto info = Db(ctx).keys.Find(ctx.args[1]); info && !info->cold) {
    redis_payload = persist::RdbWriter::DumpPayload(*info);
  }
  if (!relative && redis_payload.empty()) return;  // as received
  const std::string at_text = std::to_string(at);
  std::vector<std::string_view> argv;
  for (size_t i = 0; i < ctx.args.size(); ++i) argv.push_back(ctx.args[i]);
  if (relative) argv[2] = at_text, argv.push_back("ABSTTL");
  if (!redis_payload.empty()) argv[3] = redis_payload;
  ctx.propagate.Send(argv);
}

void Restore(Context& ctx) {
  auto options = ParseRestoreOptions(ctx);
  if (!options) return;
  const std::string key(ctx.args[1]);
  KeyLocks lock(ctx.engine, key);
  if (!options->replace && LookupKey(ctx, key, /*touch=*/false)) {
    return ctx.reply.Error(errors::kBusyKey);
  }
  auto ttl = ArgReader(ctx, 2).Integer();
  if (!ttl) return;
  if (*ttl < 0) return ctx.reply.Error(errors::kTtlNegative);

  // Decoded and checked whole before anything changes: a bad payload changes nothing.
  persist::DecodedDump dump;
  switch (persist::DecodeDump(ctx.args.TakeBytes(3), key, dump)) {
    case persist::DumpStatus::kOk:
      break;
    case persist::DumpStatus::kBadFooter:
      return ctx.reply.Error(errors::kBadDumpPayload);
    case persist::DumpStatus::kBadFormat:
      return ctx.reply.Error(errors::kBadDataFormat);
  }
  for (size_t i = 1; i < dump.keys.size(); ++i) {  // a registration's sessions
    if (!options->replace && LookupKey(ctx, dump.keys[i], /*touch=*/false)) {
      return ctx.reply.Error(errors::kBusyKey);
    }
  }
  const persist::Limits limits = WritePath(ctx.engine).Limits();
  for (const persist::Mutation& m : dump.records) {
    const persist::Verdict verdict = persist::Check(m, limits);
    if (!verdict.ok) {
      return ctx.reply.Error(errors::Refused(verdict.out_of_memory, "RESTORE", verdict.why));
    }
  }

  const uint64_t changes_before = WritePath::ChangesAppliedHere();
  if (options->replace && !DeleteAll(ctx, dump.keys)) return;
  int64_t at = 0;
  if (*ttl != 0) {
    const int64_t now = NowMs();
    at = options->absttl ? *ttl
                         : (*ttl > std::numeric_limits<int64_t>::max() - now
                                ? std::numeric_limits<int64_t>::max()
                                : *ttl + now);
    if (at <= now) {  // already expired: nothing to create; a replaced key is deleted
      if (WritePath::ChangesAppliedHere() != changes_before) ctx.propagate.Send({"DEL", key});
      return ctx.reply.Simple("OK");
    }
  }
  store::Database& db = Db(ctx);
  bool ok = true;
  for (persist::Mutation& m : dump.records) {
    if (auto* create = std::get_if<persist::VCreate>(&m)) create->index = db.vectors.ReserveIndex();
    if (auto* set = std::get_if<persist::StringSet>(&m)) set->at_ms = static_cast<uint64_t>(at);
    if (!(ok = Apply(ctx, m))) break;
  }
  if (ok && at != 0 && dump.type != store::KeyType::kString) {
    ok = Apply(ctx, persist::KeyExpire{key, static_cast<uint64_t>(at)});
  }
  if (!ok) {
    // The error is queued; what was restored before it goes again. Its records are logged, so a
    // crash in between replays a part of the key, which this deletion, also logged, removes.
    for (const std::string& k : dump.keys) {
      if (auto info = db.keys.Find(k)) DeleteKey(ctx, k, info->type);
    }
    return;
  }
  PropagateRestore(ctx, *options, at);
  ctx.reply.Simple("OK");
}

// ---- MIGRATE -------------------------------------------------------------------------------

struct MigrateArgs {
  bool copy = false, replace = false;
  std::optional<std::string> user, password;
  size_t first_key = 3, num_keys = 1;
  int64_t db = 0;
  int64_t timeout_ms = 1000;
};

std::optional<MigrateArgs> ParseMigrateArgs(Context& ctx) {
  MigrateArgs a;
  for (ArgReader r(ctx, 6); r.more();) {
    if (r.Keyword("copy")) {
      a.copy = true;
    } else if (r.Keyword("replace")) {
      a.replace = true;
    } else if (r.Keyword("auth")) {
      if (r.remaining() < 1) return r.Fail(errors::kSyntax), std::nullopt;
      a.password = std::string(r.Next());
    } else if (r.Keyword("auth2")) {
      if (r.remaining() < 2) return r.Fail(errors::kSyntax), std::nullopt;
      a.user = std::string(r.Next());
      a.password = std::string(r.Next());
    } else if (r.Keyword("keys")) {
      if (!ctx.args[3].empty()) return r.Fail(errors::kMigrateKeysNeedsEmptyKey), std::nullopt;
      a.first_key = r.position();
      a.num_keys = r.remaining();
      break;
    } else {
      return r.Fail(errors::kSyntax), std::nullopt;
    }
  }
  ArgReader numbers(ctx, 4);
  auto db = numbers.Integer();
  if (!db) return std::nullopt;
  auto timeout = numbers.Integer();
  if (!timeout) return std::nullopt;
  a.timeout_ms =
      *timeout <= 0 ? 1000 : std::min<int64_t>(*timeout, std::numeric_limits<int>::max());
  a.db = *db;
  return a;
}

// A small command, framed as a client sends it.
Bytes Command(std::initializer_list<std::string_view> args) {
  return Bytes::CopyOf(
      protocol::EncodeCommand(std::span<const std::string_view>(args.begin(), args.size())));
}

struct Migrating {
  std::string key;
  store::KeyType type;
};

void Migrate(Context& ctx) {
  auto args = ParseMigrateArgs(ctx);
  if (!args) return;
  std::vector<std::string_view> names;
  for (size_t i = 0; i < args->num_keys; ++i) names.push_back(ctx.args[args->first_key + i]);
  // Held until the source keys are deleted: a read-modify-write of one of them waits.
  KeyLocks lock(ctx.engine, names);
  store::Database& db = Db(ctx);

  // The request: AUTH, SELECT, then RESTORE-ASKING per key whose payload is streamed from the
  // stored buffers (its bulk length first, the records straight after).
  std::vector<Bytes> request;
  if (args->password) {
    request.push_back(args->user ? Command({"AUTH", *args->user, *args->password})
                                 : Command({"AUTH", *args->password}));
  }
  const std::string db_text = std::to_string(args->db);
  request.push_back(Command({"SELECT", db_text}));
  std::vector<Migrating> sent;
  const int64_t now = NowMs();
  for (std::string_view name : names) {
    const std::string key(name);
    auto info = LookupKey(ctx, key, /*touch=*/true);
    if (!info) continue;
    // A registration's sessions travel inside its payload when it is in the same request.
    if (info->type == store::KeyType::kVstore && key.size() > 3 &&
        (key.ends_with("_pk") || key.ends_with("_pv"))) {
      const std::string owner = key.substr(0, key.size() - 3);
      if (std::find(names.begin(), names.end(), owner) != names.end()) {
        auto owner_info = db.keys.Find(owner);
        if (owner_info && owner_info->type == store::KeyType::kKvPrefix) continue;
      }
    }
    int64_t ttl = 0;
    if (info->expire_at_ms != 0) {
      ttl = info->expire_at_ms - now;
      if (ttl < 0) continue;
      ttl = std::max<int64_t>(ttl, 1);
    }
    auto payload = DumpOf(db, key, *info);
    if (!payload) continue;
    uint64_t length = 0;
    for (const Bytes& piece : *payload) length += piece.size();
    // The payload goes by reference: only its header is framed here.
    std::string head(protocol::FrameHeader::Array(args->replace ? 5 : 4).view());
    protocol::AppendBulk(head, "RESTORE-ASKING");
    protocol::AppendBulk(head, key);
    protocol::AppendBulk(head, std::to_string(ttl));
    head.append(protocol::FrameHeader::Bulk(length).view());
    request.push_back(Bytes::CopyOf(head));
    for (Bytes& piece : *payload) request.push_back(std::move(piece));
    std::string tail = "\r\n";
    if (args->replace) protocol::AppendBulk(tail, "REPLACE");
    request.push_back(Bytes::CopyOf(tail));
    sent.push_back(Migrating{key, info->type});
  }
  if (sent.empty()) return ctx.reply.Simple("NOKEY");

  // A new connection per MIGRATE (Redis caches one per target for 10 s): SELECT every time.
  std::string why;
  auto link = MigrateLink::Connect(std::string(ctx.args[1]), std::string(ctx.args[2]),
                                   std::chrono::milliseconds(args->timeout_ms), why);
  if (!link) return ctx.reply.Error(errors::kMigrateConnecting);
  if (!link->Send(request)) {
    return ctx.reply.Error(errors::kMigrateWriting);
  }
  std::optional<std::string> target_error;  // the first error the target replied
  const auto take = [&](const protocol::RespValue& reply) {
    if (reply.type == protocol::RespType::kError && !target_error) target_error = reply.str;
    return reply.type != protocol::RespType::kError;
  };
  for (int preamble = args->password ? 2 : 1; preamble > 0; --preamble) {
    auto reply = link->Read();
    if (!reply) return ctx.reply.Error(errors::kMigrateReading);
    take(*reply);
  }
  const bool preamble_failed = target_error.has_value();
  bool socket_error = false;
  // Replicas get the keys that left as one DEL (Redis 7.0), never the MIGRATE itself: a replica
  // must not move keys to the target a second time.
  std::vector<std::string> moved = {"DEL"};
  ctx.propagate.Nothing();
  const uint64_t errors_before = ctx.reply.error_count();
  for (const Migrating& m : sent) {
    auto reply = link->Read();
    if (!reply) {
      socket_error = true;
      break;
    }
    if (!take(*reply) || preamble_failed || args->copy) continue;
    // Acknowledged: the source key goes (with a registration, its sessions and state).
    Deleted done = DeleteKey(ctx, m.key, m.type);
    if (!done.ok) {
      ctx.reply.Error(done.error);
      break;
    }
    ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, done.lsn);
    moved.push_back(m.key);
  }
  if (moved.size() > 1)
    ctx.propagate.Send(std::vector<std::string_view>(moved.begin(), moved.end()));
  if (ctx.reply.error_count() > errors_before) return;
  if (target_error) return ctx.reply.Error(errors::TargetReplied(*target_error));
  if (socket_error) return ctx.reply.Error(errors::kMigrateReading);
  ctx.reply.Simple("OK");
}

// Redis's migrateGetKeys: the key argument, or with an empty one, every key after KEYS.
std::vector<KeyPosition> MigrateKeys(const protocol::Request& args) {
  constexpr uint32_t kMoved = kKeyRW | kKeyAccess | kKeyDelete;
  size_t first = 3, count = 1;
  for (size_t i = 6; i < args.size(); ++i) {
    if (EqualsIgnoreCase(args[i], "keys") && args[3].empty()) {
      first = i + 1, count = args.size() - first;
      break;
    }
  }
  std::vector<KeyPosition> out;
  if (args.size() <= 3) return out;
  for (size_t i = first; i < first + count && i < args.size(); ++i) {
    out.push_back(KeyPosition{i, kMoved});
  }
  return out;
}

}  // namespace

void RegisterMigrateCommands(Registry& r) {
  const Arg replace =
      Tokened(TypedArg("replace", ArgType::kPureToken, kArgOptional), "REPLACE", "3.0.0");
  auto restore_args = [&] {
    return std::vector<Arg>{
        KeyArg("key"),
        IntArg("ttl"),
        StrArg("serialized-value"),
        replace,
        Tokened(TypedArg("absttl", ArgType::kPureToken, kArgOptional), "ABSTTL", "5.0.0"),
        Tokened(IntArg("seconds", kArgOptional), "IDLETIME", "5.0.0"),
        Tokened(IntArg("frequency", kArgOptional), "FREQ", "5.0.0"),
    };
  };
  CommandSpec dump =
      AsRedis(MakeSpec("generic", 1, "dump", 2, kReadonly, "<key>",
                       "Serialises a key of any type (records + version and checksum) for RESTORE.",
                       Dump, "O(1) to reach the key, O(N) in its size to serialise it"),
              "2.6.0", kAclKeyspace, {"nondeterministic_output"}, {KeyArg("key")});
  dump.key_specs = {RangeKeySpec(kKeyRO | kKeyAccess, 1)};
  r.Add(std::move(dump));

  auto restore = [&](std::string name, std::string group, uint32_t flags, std::string since,
                     std::string summary) {
    CommandSpec s =
        AsRedis(MakeSpec(std::move(group), 1, std::move(name), -4, kWrite | kDenyOom | flags,
                         "<key> <ttl> <serialized-value> [REPLACE] [ABSTTL] [IDLETIME seconds] "
                         "[FREQ frequency]",
                         std::move(summary), Restore,
                         "O(1) to create the key, O(N) in the payload's size to decode it"),
                std::move(since), kAclKeyspace | kAclDangerous, {}, restore_args());
    s.key_specs = {RangeKeySpec(kKeyOW | kKeyUpdate, 1)};
    return s;
  };
  r.Add(restore("restore", "generic", 0, "2.6.0",
                "Creates a key from a DUMP payload, with a TTL in ms (0: none); logged and "
                "durable; a bad payload changes nothing."));
  r.Add(restore("restore-asking", "server", kAsking, "3.0.0",
                "RESTORE as MIGRATE sends it: the same command, routed as if ASKING was sent."));

  CommandSpec migrate =
      MakeSpec("generic", 0, "migrate", -6, kWrite | kMovableKeys,
               "<host> <port> <key|\"\"> <destination-db> <timeout> [COPY] [REPLACE] "
               "[AUTH password | AUTH2 username password] [KEYS key [key ...]]",
               "Moves keys to another prefixd: RESTORE-ASKING there, streamed from the stored "
               "buffers, then deleted here once acknowledged (kept with COPY).",
               Migrate, "O(N) in the bytes moved");
  migrate.first_key = migrate.last_key = 3;
  migrate.key_step = 1;
  Arg key = KeyArg("key");
  Arg empty = TokenArg("empty_string", "");
  Arg keys = Tokened(KeyArg("key"), "KEYS", "3.0.6");
  keys.key_spec_index = 1;
  keys.flags = kArgOptional | kArgMultiple;
  Arg auth = Tokened(StrArg("password", kArgOptional), "AUTH", "4.0.7");
  Arg auth2 = BlockArg("username_password", kArgOptional, {StrArg("username"), StrArg("password")},
                       "AUTH2");
  auth2.since = "6.0.0";
  migrate = AsRedis(
      std::move(migrate), "2.6.0", kAclKeyspace | kAclDangerous, {"nondeterministic_output"},
      {StrArg("host"), IntArg("port"), OneOfArg("key_or_empty_string", 0, {key, empty}),
       IntArg("destination-db"), IntArg("timeout"),
       Tokened(TypedArg("copy", ArgType::kPureToken, kArgOptional), "COPY", "3.0.0"),
       Tokened(TypedArg("replace", ArgType::kPureToken, kArgOptional), "REPLACE", "3.0.0"),
       OneOfArg("authentication", kArgOptional, {auth, auth2}), keys});
  // The first key, then those after KEYS (incomplete: KEYS may also be a key's name).
  KeySpec listed;
  listed.flags = kKeyRW | kKeyAccess | kKeyDelete | kKeyIncomplete;
  listed.by_keyword = true;
  listed.keyword = "KEYS";
  listed.keyword_start_from = -2;
  listed.last_key = -1;
  migrate.key_specs = {RangeKeySpec(kKeyRW | kKeyAccess | kKeyDelete, 3), listed};
  migrate.find_keys = MigrateKeys;
  r.Add(std::move(migrate));
}

}  // namespace prefixd::commands
