// Redis's generic key commands over the typed keyspace, with Redis 7.0.15's replies and errors:
// DEL, UNLINK, EXISTS, TYPE, the EXPIRE and TTL families, PERSIST, TOUCH, SCAN, KEYS, RANDOMKEY,
// OBJECT and MEMORY USAGE. They work on a key of any type; deletion and expiry go through the
// mutation path, so they are logged and survive a restart.
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commands/engine.h"
#include "commands/errors.h"
#include "commands/key_access.h"
#include "commands/mutate.h"
#include "commands/registry.h"
#include "common/ascii.h"
#include "common/clock.h"
#include "common/expiry_args.h"
#include "common/glob.h"
#include "common/numbers.h"

namespace prefixd::commands {

void HelpReply(Context& ctx, const CommandSpec& container);

namespace {

using store::KeyInfo;

// Deletes every existing key among the arguments; the reply is how many there were.
void Del(Context& ctx) {
  int64_t removed = 0;
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    auto info = LookupKey(ctx, ctx.args[i], /*touch=*/false);
    if (!info) continue;
    Deleted done = DeleteKey(ctx.engine, ctx.args[i], info->type);
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
  const int64_t now = CoarseNowMs();
  const auto rest = ArgsFrom(ctx, 2);
  auto request = expiry::ParseExpireArgs(rest, unit, relative, now, ctx.spec.full_name);
  if (!request.ok()) return ctx.reply.Error(request.error);
  auto info = LookupKey(ctx, ctx.args[1], /*touch=*/true);
  if (!info) return ctx.reply.Integer(0);
  std::optional<int64_t> current;
  if (info->expire_at_ms != 0) current = info->expire_at_ms;
  switch (expiry::DecideExpire(request.value, current, now)) {
    case expiry::ExpireOutcome::kUnchanged:
      return ctx.reply.Integer(0);
    case expiry::ExpireOutcome::kDelete: {
      Deleted done = DeleteKey(ctx.engine, ctx.args[1], info->type);
      if (!done.ok) return ctx.reply.Error(done.error);
      ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, done.lsn);
      return ctx.reply.Integer(1);
    }
    case expiry::ExpireOutcome::kSet: {
      persist::KeyExpire record{std::string(ctx.args[1]),
                                static_cast<uint64_t>(request.value.at_ms)};
      auto done = Mutate(ctx, record);
      if (!done) return;
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
  ctx.reply.Integer(expiry::TtlReply(at, CoarseNowMs(), unit, absolute));
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
  KeyFilter filter{ctx.args[1], std::nullopt, CoarseNowMs()};
  std::vector<std::string> found;
  ctx.engine.keyspace().ForEach([&](const std::string& key, const KeyInfo& info) {
    if (filter(key, info)) found.push_back(key);
  });
  ctx.reply.ArrayLen(found.size());
  for (const auto& key : found) ctx.reply.Bulk(key);
}

// A SCAN cursor as Redis's parseScanCursorOrReply reads it with strtoul: an optional sign
// ("-1" wraps to 2^64 - 1), decimal digits, nothing after them, no overflow.
std::optional<uint64_t> ParseCursor(std::string_view text) {
  bool negative = false;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return negative ? uint64_t{0} - value : value;
}

void Scan(Context& ctx) {
  const auto& args = ctx.args;
  auto cursor = ParseCursor(args[1]);
  if (!cursor) return ctx.reply.Error("ERR invalid cursor");
  KeyFilter filter{"*", std::nullopt, CoarseNowMs()};
  int64_t count = 10;
  for (size_t i = 2; i < args.size(); i += 2) {
    if (i + 1 >= args.size()) return ctx.reply.Error(errors::kSyntax);
    if (EqualsIgnoreCase(args[i], "COUNT")) {
      auto n = ParseInt64(args[i + 1]);
      if (!n) return ctx.reply.Error(errors::kNotInteger);
      if (*n < 1) return ctx.reply.Error(errors::kSyntax);
      count = *n;
    } else if (EqualsIgnoreCase(args[i], "MATCH")) {
      filter.pattern = args[i + 1];
    } else if (EqualsIgnoreCase(args[i], "TYPE")) {
      filter.type_name = args[i + 1];
    } else {
      return ctx.reply.Error(errors::kSyntax);
    }
  }
  std::vector<std::string> found;
  const uint64_t next = ctx.engine.keyspace().Scan(
      *cursor, static_cast<size_t>(count), [&](const std::string& key, const KeyInfo& info) {
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
    auto key = ctx.engine.keyspace().Random();
    if (!key) return ctx.reply.Null();
    if (LookupKey(ctx, *key, /*touch=*/false)) return ctx.reply.Bulk(*key);
  }
  ctx.reply.Null();
}

void DbSize(Context& ctx) { ctx.reply.Integer(static_cast<int64_t>(ctx.engine.keyspace().size())); }

constexpr std::string_view kLfuNotSelected =
    "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note "
    "that when switching between policies at runtime LRU and LFU data will take some time to "
    "adjust.";

constexpr std::string_view kLfuSelected =
    "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when "
    "switching between policies at runtime LRU and LFU data will take some time to adjust.";

void ObjectEncoding(Context& ctx) {
  auto info = LookupKey(ctx, ctx.args[2], /*touch=*/false);
  if (!info) return ctx.reply.Null();
  // Redis reports module-type values as "raw".
  ctx.reply.Bulk("raw");
}

void ObjectRefcount(Context& ctx) {
  auto info = LookupKey(ctx, ctx.args[2], /*touch=*/false);
  if (!info) return ctx.reply.Null();
  ctx.reply.Integer(1);
}

void ObjectIdletime(Context& ctx) {
  auto info = LookupKey(ctx, ctx.args[2], /*touch=*/false);
  if (!info) return ctx.reply.Null();
  if (store::TracksFrequency(CurrentPolicy(ctx.engine))) return ctx.reply.Error(kLfuSelected);
  ctx.reply.Integer(
      static_cast<int64_t>(ctx.engine.keyspace().IdleMs(ctx.args[2]).value_or(0) / 1000));
}

void ObjectFreq(Context& ctx) {
  auto info = LookupKey(ctx, ctx.args[2], /*touch=*/false);
  if (!info) return ctx.reply.Null();
  if (!store::TracksFrequency(CurrentPolicy(ctx.engine))) return ctx.reply.Error(kLfuNotSelected);
  ctx.reply.Integer(ctx.engine.keyspace().Frequency(ctx.args[2]).value_or(0));
}

uint64_t KeyBytes(Engine& engine, std::string_view key, store::KeyType type) {
  switch (type) {
    case store::KeyType::kSsmPrefix:
      return engine.state_store().SessionBytes(key);
    case store::KeyType::kVstore: {
      auto detail = engine.vector_store().Detail(key);
      return detail ? detail->allocated_bytes + key.size() : 0;
    }
    case store::KeyType::kKvPrefix: {
      auto spec = engine.vector_store().Prefix(key);
      return spec ? spec->block_hashes.size() + key.size() + sizeof(store::PrefixSpec) : 0;
    }
    case store::KeyType::kPrefixIndex: {
      uint64_t bytes = 0;
      engine.prefix_store().With(key, [&](const store::PrefixIndex& index) {
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
  if (args.size() != 3 && args.size() != 5) return ctx.reply.Error(errors::kSyntax);
  if (args.size() == 5) {
    if (!EqualsIgnoreCase(args[3], "SAMPLES")) return ctx.reply.Error(errors::kSyntax);
    if (!ParseInt64(args[4])) return ctx.reply.Error(errors::kNotInteger);
  }
  auto info = LookupKey(ctx, args[2], /*touch=*/false);
  if (!info) return ctx.reply.Null();
  // The keyspace entry (key, type, slot, stamps) plus what the value's store holds for it.
  const uint64_t entry = sizeof(KeyInfo) + args[2].size() + 48;
  ctx.reply.Integer(static_cast<int64_t>(entry + KeyBytes(ctx.engine, args[2], info->type)));
}

}  // namespace

void RegisterKeyCommands(Registry& r) {
  auto cmd = [](std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h, std::string complexity, int keys = 1) {
    return MakeSpec("generic", keys, std::move(name), arity, flags, std::move(syntax),
                    std::move(summary), h, std::move(complexity));
  };
  auto many = [&](std::string name, uint32_t flags, std::string summary, Handler h) {
    CommandSpec s = cmd(std::move(name), -2, flags, "<key> [key ...]", std::move(summary), h,
                        "O(N) in the number of keys");
    s.last_key = -1;
    return s;
  };
  r.Add(many("del", kWrite, "Deletes keys of any type whole; replies how many existed.", Del));
  r.Add(many("unlink", kWrite | kFast,
             "Deletes keys of any type whole, as DEL; replies how many existed.", Del));
  r.Add(many("exists", kReadonly | kFast,
             "Counts the given keys that exist (a key named twice counts twice).", Exists));
  r.Add(many("touch", kReadonly | kFast,
             "Records an access to each key (idle time, LFU counter); replies how many exist.",
             Touch));
  r.Add(cmd("type", 2, kReadonly | kFast, "<key>",
            "Names the key's type (ssm-prefix, vstore, kvprefix), or none.", Type, "O(1)"));
  const std::string when = "<key> <time> [NX|XX|GT|LT]";
  r.Add(cmd("expire", -3, kWrite | kFast, when,
            "Sets a key's time to live in seconds; logged as the absolute time.", Expire, "O(1)"));
  r.Add(cmd("pexpire", -3, kWrite | kFast, when,
            "Sets a key's time to live in milliseconds; logged as the absolute time.", PExpire,
            "O(1)"));
  r.Add(cmd("expireat", -3, kWrite | kFast, when, "Sets a key's expiry as a Unix time in seconds.",
            ExpireAt, "O(1)"));
  r.Add(cmd("pexpireat", -3, kWrite | kFast, when,
            "Sets a key's expiry as a Unix time in milliseconds.", PExpireAt, "O(1)"));
  r.Add(cmd("ttl", 2, kReadonly | kFast, "<key>",
            "Seconds a key has left to live: -1 without an expiry, -2 without the key.", Ttl,
            "O(1)"));
  r.Add(cmd("pttl", 2, kReadonly | kFast, "<key>",
            "Milliseconds a key has left to live: -1 without an expiry, -2 without the key.", PTtl,
            "O(1)"));
  r.Add(cmd("expiretime", 2, kReadonly | kFast, "<key>",
            "A key's expiry as a Unix time in seconds: -1 without one, -2 without the key.",
            ExpireTime, "O(1)"));
  r.Add(cmd("pexpiretime", 2, kReadonly | kFast, "<key>",
            "A key's expiry as a Unix time in milliseconds: -1 without one, -2 without the key.",
            PExpireTime, "O(1)"));
  r.Add(cmd("persist", 2, kWrite | kFast, "<key>", "Removes a key's expiry; 1 if it had one.",
            Persist, "O(1)"));
  r.Add(cmd("scan", -2, kReadonly, "<cursor> [MATCH pattern] [COUNT count] [TYPE type]",
            "Walks the keyspace a step at a time; a key present throughout is returned.", Scan,
            "O(1) per call, O(N) for a whole walk", 0));
  r.Add(cmd("keys", 2, kReadonly, "<pattern>", "Lists every key matching a glob pattern.", Keys,
            "O(N) in the number of keys", 0));
  r.Add(cmd("randomkey", 1, kReadonly, "", "Returns a random key, or nil when there is none.",
            RandomKey, "O(1)", 0));
  r.Add(
      cmd("dbsize", 1, kReadonly | kFast, "", "Counts the keys of every type.", DbSize, "O(1)", 0));

  CommandSpec object =
      cmd("object", -2, 0, "<subcommand> [arguments]",
          "Reports how a key is held: encoding, idle time, access frequency.", nullptr, "O(1)", 0);
  auto sub = [&](std::string name, Handler h, std::string summary) {
    CommandSpec s = cmd(std::move(name), 3, kReadonly, "<key>", std::move(summary), h, "O(1)");
    s.first_key = s.last_key = 2;
    return s;
  };
  object.subcommands = {
      sub("encoding", ObjectEncoding, "The key's internal representation (raw)."),
      sub("freq", ObjectFreq, "The key's LFU access counter (an LFU maxmemory-policy only)."),
      sub("idletime", ObjectIdletime, "Seconds since the key was last accessed."),
      sub("refcount", ObjectRefcount, "The number of references to the key's value (1)."),
      cmd(
          "help", 2, kLoading | kStale, "", "Lists the OBJECT subcommands.",
          [](Context& ctx) { HelpReply(ctx, *ctx.engine.registry->Find("object")); }, "O(1)", 0),
  };
  r.Add(std::move(object));

  CommandSpec memory = cmd("memory", -2, 0, "<subcommand> [arguments]",
                           "Reports memory figures of keys.", nullptr, "O(1)", 0);
  CommandSpec usage = cmd("usage", -3, kReadonly, "<key> [SAMPLES count]",
                          "Bytes a key and its value take in memory.", MemoryUsage, "O(1)");
  usage.first_key = usage.last_key = 2;
  memory.subcommands = {
      std::move(usage),
      cmd(
          "help", 2, kLoading | kStale, "", "Lists the MEMORY subcommands.",
          [](Context& ctx) { HelpReply(ctx, *ctx.engine.registry->Find("memory")); }, "O(1)", 0),
  };
  r.Add(std::move(memory));
}

}  // namespace prefixd::commands
