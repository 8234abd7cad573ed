// Redis's hash commands with Redis 7.0.15's replies and errors: HSET, HSETNX, HMSET, HGET, HMGET,
// HDEL, HLEN, HEXISTS, HSTRLEN, HGETALL, HKEYS, HVALS, HINCRBY, HINCRBYFLOAT, HRANDFIELD, HSCAN.
// A hash's fields and values live in its keyspace entry, alternating (store/members.h); a write
// logs one HashValue record naming only the fields it sets or deletes, applied to the value under
// the key's shard lock (an emptied hash is deleted). A read-modify-write holds its key's lock
// stripe (KeyLocks).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "commands/arg_reader.h"
#include "commands/families.h"
#include "common/ascii.h"
#include "common/glob.h"
#include "common/numbers.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/keys.h"
#include "engine/write_path.h"
#include "store/members.h"

namespace prefixd::commands {
namespace {

using store::HashEncoding;
using store::KeyType;

// A hash key as a command finds it: `exists` false for a missing key; `value` still encoded.
struct Found {
  bool exists = false;
  Bytes value;
  HashEncoding encoding = HashEncoding::kListpack;
};

// Looks `key` up as Redis's lookupKeyRead/Write (lazy expiry, a touch; a read counts a hit or
// miss). False, with -WRONGTYPE queued, when it holds another type.
bool Find(Context& ctx, std::string_view key, bool read, Found& out) {
  auto info = LookupKey(ctx, key, /*touch=*/true);
  if (read) {
    (info ? ctx.engine.stats().keyspace_hits : ctx.engine.stats().keyspace_misses).Add();
  }
  if (!info) return true;
  if (info->type != KeyType::kHash) {
    ctx.reply.Error(errors::kWrongType);
    return false;
  }
  out.exists = true;
  out.value = std::move(info->value);
  out.encoding = static_cast<HashEncoding>(info->encoding);
  return true;
}

// The fields and values of `hash`, alternating.
std::vector<std::string> Pairs(const Found& hash) {
  return store::DecodeMembers(hash.value.view()).value_or(std::vector<std::string>{});
}

// Logs a HashValue record: `op` with `members` (pairs for kSet, names for kDelete), leaving
// `encoding`. False when refused (error queued).
bool Log(Context& ctx, std::string_view key, HashEncoding encoding, uint32_t op,
         const std::vector<std::string>& members) {
  return Mutate(ctx, persist::HashValue{std::string(key), static_cast<uint32_t>(encoding), op,
                                        persist::Blob{{store::EncodeMembers(members)}}})
      .has_value();
}

// Sets `pairs` (field, value, ...) in `hash`, converting its encoding as Redis 7.0 does (a field
// or value over hash-max-listpack-value, or more fields than hash-max-listpack-entries). The
// number of fields that were new, or nullopt when the write was refused (error queued).
std::optional<size_t> SetPairs(Context& ctx, std::string_view key, const Found& hash,
                               const std::vector<std::string>& pairs) {
  std::unordered_set<std::string_view> named;
  size_t longest = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    longest = std::max(longest, pairs[i].size());
    if (i % 2 == 0) named.insert(pairs[i]);
  }
  const size_t before = store::CountMembers(hash.value.view()) / 2;
  const size_t added = named.size() - store::CountPresent(hash.value.view(), named);
  const auto& settings = ctx.engine.settings();
  const HashEncoding encoding = store::HashEncodingAfterSet(
      hash.exists ? hash.encoding : HashEncoding::kListpack, before + added, longest,
      static_cast<size_t>(settings.Int(Setting::kHashMaxListpackEntries)),
      static_cast<size_t>(settings.Int(Setting::kHashMaxListpackValue)));
  if (!Log(ctx, key, encoding, persist::HashValue::kSet, pairs)) return std::nullopt;
  return added;
}

// HSET and HMSET: field-value pairs after the key.
std::optional<size_t> SetFromArgs(Context& ctx) {
  if (ctx.args.size() % 2 != 0) {
    ctx.reply.Error(errors::WrongArity(ctx.spec.full_name));
    return std::nullopt;
  }
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  Found hash;
  if (!Find(ctx, key, false, hash)) return std::nullopt;
  std::vector<std::string> pairs;
  pairs.reserve(ctx.args.size() - 2);
  for (size_t i = 2; i < ctx.args.size(); ++i) pairs.emplace_back(ctx.args[i]);
  return SetPairs(ctx, key, hash, pairs);
}

void HSet(Context& ctx) {
  if (auto added = SetFromArgs(ctx)) ctx.reply.Integer(static_cast<int64_t>(*added));
}

void HMSet(Context& ctx) {
  if (SetFromArgs(ctx)) ctx.reply.Simple("OK");
}

void HSetNx(Context& ctx) {
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  Found hash;
  if (!Find(ctx, key, false, hash)) return;
  if (store::FieldValue(hash.value.view(), ctx.args[2])) return ctx.reply.Integer(0);
  if (SetPairs(ctx, key, hash, {std::string(ctx.args[2]), std::string(ctx.args[3])})) {
    ctx.reply.Integer(1);
  }
}

void HGet(Context& ctx) {
  Found hash;
  if (!Find(ctx, ctx.args[1], true, hash)) return;
  auto value = store::FieldValue(hash.value.view(), ctx.args[2]);
  value ? ctx.reply.Bulk(*value) : ctx.reply.Null();
}

void HMGet(Context& ctx) {
  Found hash;
  if (!Find(ctx, ctx.args[1], true, hash)) return;
  ctx.reply.ArrayLen(ctx.args.size() - 2);
  for (size_t i = 2; i < ctx.args.size(); ++i) {
    auto value = store::FieldValue(hash.value.view(), ctx.args[i]);
    value ? ctx.reply.Bulk(*value) : ctx.reply.Null();
  }
}

void HDel(Context& ctx) {
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  Found hash;
  if (!Find(ctx, key, false, hash)) return;
  std::vector<std::string> named;
  std::unordered_set<std::string_view> distinct;
  for (size_t i = 2; i < ctx.args.size(); ++i) {
    if (distinct.insert(ctx.args[i]).second) named.emplace_back(ctx.args[i]);
  }
  // Fields the hash lacks are logged too: the record removes what is present when it applies.
  const size_t present = store::CountPresent(hash.value.view(), distinct);
  if (present > 0 && !Log(ctx, key, hash.encoding, persist::HashValue::kDelete, named)) return;
  ctx.reply.Integer(static_cast<int64_t>(present));
}

void HLen(Context& ctx) {
  Found hash;
  if (!Find(ctx, ctx.args[1], true, hash)) return;
  ctx.reply.Integer(static_cast<int64_t>(store::CountMembers(hash.value.view()) / 2));
}

void HExists(Context& ctx) {
  Found hash;
  if (!Find(ctx, ctx.args[1], true, hash)) return;
  ctx.reply.Integer(store::FieldValue(hash.value.view(), ctx.args[2]) ? 1 : 0);
}

void HStrLen(Context& ctx) {
  Found hash;
  if (!Find(ctx, ctx.args[1], true, hash)) return;
  auto value = store::FieldValue(hash.value.view(), ctx.args[2]);
  ctx.reply.Integer(value ? static_cast<int64_t>(value->size()) : 0);
}

// HGETALL, HKEYS, HVALS: every field and/or value, in the hash's order.
void ReplyAll(Context& ctx, bool fields, bool values) {
  Found hash;
  if (!Find(ctx, ctx.args[1], true, hash)) return;
  const std::vector<std::string> pairs = Pairs(hash);
  if (fields && values) {
    ctx.reply.MapLen(pairs.size() / 2);
  } else {
    ctx.reply.ArrayLen(pairs.size() / 2);
  }
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
    if (fields) ctx.reply.Bulk(pairs[i]);
    if (values) ctx.reply.Bulk(pairs[i + 1]);
  }
}

void HGetAll(Context& ctx) { ReplyAll(ctx, true, true); }
void HKeys(Context& ctx) { ReplyAll(ctx, true, false); }
void HVals(Context& ctx) { ReplyAll(ctx, false, true); }

void HIncrBy(Context& ctx) {
  const auto increment = ArgReader(ctx, 3).Integer();
  if (!increment) return;
  int64_t result = 0;
  const std::string_view key = ctx.args[1], field = ctx.args[2];
  KeyLocks lock(ctx.engine, key);
  Found hash;
  if (!Find(ctx, key, false, hash)) return;
  int64_t value = 0;
  if (auto old = store::FieldValue(hash.value.view(), field)) {
    auto parsed = ParseInt64(*old);
    if (!parsed) return ctx.reply.Error(errors::kHashNotInteger);
    value = *parsed;
  }
  if (__builtin_add_overflow(value, *increment, &result)) {
    return ctx.reply.Error(errors::kIncrOverflow);
  }
  if (SetPairs(ctx, key, hash, {std::string(field), std::to_string(result)})) {
    ctx.reply.Integer(result);
  }
}

void HIncrByFloat(Context& ctx) {
  const auto increment = ParseLongDouble(ctx.args[3]);
  if (!increment) return ctx.reply.Error(errors::kNotFloat);
  if (std::isnan(*increment) || std::isinf(*increment)) {
    return ctx.reply.Error(errors::kNaNOrInfinity);
  }
  const std::string_view key = ctx.args[1], field = ctx.args[2];
  KeyLocks lock(ctx.engine, key);
  Found hash;
  if (!Find(ctx, key, false, hash)) return;
  long double value = 0;
  if (auto old = store::FieldValue(hash.value.view(), field)) {
    // Redis reads a stored value with its length (string2ld): a NUL inside is no float.
    auto parsed = ParseLongDouble(*old);
    if (!parsed) return ctx.reply.Error(errors::kHashNotFloat);
    value = *parsed;
  }
  value += *increment;
  if (std::isnan(value) || std::isinf(value)) {
    return ctx.reply.Error(errors::kIncrNaN);
  }
  const std::string text = HumanLongDouble(value);
  if (SetPairs(ctx, key, hash, {std::string(field), text})) ctx.reply.Bulk(text);
}

std::mt19937_64& Rng() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}

// HRANDFIELD's reply of `picked` pair indexes: fields, or fields and values (RESP2: flat;
// RESP3: a pair per field), as Redis 7.0.15.
void ReplyPicked(Context& ctx, const std::vector<std::string>& pairs,
                 const std::vector<size_t>& picked, bool with_values) {
  const bool nested = with_values && ctx.reply.protocol() > 2;
  ctx.reply.ArrayLen(with_values && !nested ? picked.size() * 2 : picked.size());
  for (size_t i : picked) {
    if (nested) ctx.reply.ArrayLen(2);
    ctx.reply.Bulk(pairs[2 * i]);
    if (with_values) ctx.reply.Bulk(pairs[2 * i + 1]);
  }
}

void HRandField(Context& ctx) {
  if (ctx.args.size() == 2) {
    Found hash;
    if (!Find(ctx, ctx.args[1], true, hash)) return;
    if (!hash.exists) return ctx.reply.Null();
    const std::vector<std::string> pairs = Pairs(hash);
    return ctx.reply.Bulk(pairs[2 * (Rng()() % (pairs.size() / 2))]);
  }
  ArgReader r(ctx, 2);
  const auto count = r.Integer();
  if (!count) return;
  if (*count == INT64_MIN) {
    return ctx.reply.Error(errors::kCountOutOfRange);
  }
  const bool with_values = ctx.args.size() == 4;
  if (ctx.args.size() > 4 || (with_values && !r.Keyword("WITHVALUES"))) {
    return ctx.reply.Error(errors::kSyntax);
  }
  if (with_values && (*count < -INT64_MAX / 2 || *count > INT64_MAX / 2)) {
    return ctx.reply.Error(errors::kOutOfRange);
  }
  Found hash;
  if (!Find(ctx, ctx.args[1], true, hash)) return;
  if (!hash.exists || *count == 0) return ctx.reply.ArrayLen(0);
  const std::vector<std::string> pairs = Pairs(hash);
  const size_t size = pairs.size() / 2;
  std::vector<size_t> picked;
  if (*count < 0) {  // repeats allowed
    const uint64_t n = static_cast<uint64_t>(-*count);
    // As SRANDMEMBER: a reply that could not fit client-output-buffer-limit (6 bytes an
    // element at least) is refused up front instead of built.
    const auto most =
        static_cast<uint64_t>(ctx.engine.settings().Int(Setting::kClientOutputBufferLimit) / 6);
    if (n > most) return ctx.reply.Error(errors::kOutOfRange);
    picked.reserve(n);
    for (uint64_t i = 0; i < n; ++i) picked.push_back(Rng()() % size);
    return ReplyPicked(ctx, pairs, picked, with_values);
  }
  picked.resize(size);
  for (size_t i = 0; i < size; ++i) picked[i] = i;
  if (static_cast<uint64_t>(*count) < size) {  // distinct: a partial shuffle, kept in hash order
    const auto n = static_cast<size_t>(*count);
    for (size_t i = 0; i < n; ++i) std::swap(picked[i], picked[i + Rng()() % (size - i)]);
    picked.resize(n);
    std::sort(picked.begin(), picked.end());
  }
  ReplyPicked(ctx, pairs, picked, with_values);
}

void HScan(Context& ctx) {
  if (!ParseScanCursor(ctx.args[2])) return ctx.reply.Error(errors::kInvalidCursor);
  Found hash;
  if (!Find(ctx, ctx.args[1], true, hash)) return;
  // A missing key answers an empty scan before the options are read, as Redis's.
  if (!hash.exists) return ReplyEmptyScan(ctx);
  // HSCAN has no TYPE; COUNT is checked and then, as Redis's for a listpack hash, a hint only.
  auto options = ReadScanOptions(ctx, 3, /*with_type=*/false);
  if (!options) return;
  const std::string_view pattern = options->pattern;
  // The whole hash in one reply, cursor 0, as Redis answers a listpack hash: every field
  // present throughout is returned once, whatever COUNT says (a hint in Redis too).
  const std::vector<std::string> pairs = Pairs(hash);
  std::vector<size_t> matched;
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
    if (pattern == "*" || GlobMatch(pattern, pairs[i])) matched.push_back(i);
  }
  ctx.reply.ArrayLen(2);
  ctx.reply.Bulk("0");
  ctx.reply.ArrayLen(matched.size() * 2);
  for (size_t i : matched) ctx.reply.Bulk(pairs[i]), ctx.reply.Bulk(pairs[i + 1]);
}

}  // namespace

void RegisterHashCommands(Registry& r) {
  const OneKeyFamily hash(r, "hash", kAclHash);
  const uint32_t write = kWrite | kDenyOom | kFast;
  const uint32_t read = kReadonly | kFast;
  const Arg key = KeyArg("key"), field = StrArg("field"), value = StrArg("value");
  const Arg pairs = BlockArg("field_value", kArgMultiple, {field, value});
  const std::string n = "O(N) in the hash's size";
  const std::string order = "nondeterministic_output_order";

  hash("hset", -4, write, "<key> <field> <value> [field value ...]",
       "Sets fields of a hash; how many were new.", HSet, n, "2.0.0", kKeyRW | kKeyUpdate,
       {key, pairs});
  hash("hsetnx", 4, write, "<key> <field> <value>",
       "Sets a field of a hash only when it is missing; 1 if it was set.", HSetNx, n, "2.0.0",
       kKeyRW | kKeyInsert, {key, field, value});
  hash("hmset", -4, write, "<key> <field> <value> [field value ...]",
       "Sets fields of a hash (HSET replying OK).", HMSet, n, "2.0.0", kKeyRW | kKeyUpdate,
       {key, pairs});
  hash("hget", 3, read, "<key> <field>", "The value of a field, or nil.", HGet, n, "2.0.0",
       kKeyRO | kKeyAccess, {key, field});
  hash("hmget", -3, read, "<key> <field> [field ...]", "The values of fields (nil where missing).",
       HMGet, n, "2.0.0", kKeyRO | kKeyAccess, {key, Many(field)});
  hash("hdel", -3, kWrite | kFast, "<key> <field> [field ...]",
       "Removes fields from a hash; how many were there.", HDel, n, "2.0.0", kKeyRW | kKeyDelete,
       {key, Many(field)});
  hash("hlen", 2, read, "<key>", "The number of fields of a hash.", HLen, n, "2.0.0", kKeyRO,
       {key});
  hash("hexists", 3, read, "<key> <field>", "1 if the field is in the hash, else 0.", HExists, n,
       "2.0.0", kKeyRO, {key, field});
  hash("hstrlen", 3, read, "<key> <field>", "The length of a field's value (0 if missing).",
       HStrLen, n, "3.2.0", kKeyRO, {key, field});
  hash("hgetall", 2, kReadonly, "<key>", "Every field and value of a hash.", HGetAll, n, "2.0.0",
       kKeyRO | kKeyAccess, {key}, {order});
  hash("hkeys", 2, kReadonly, "<key>", "Every field of a hash.", HKeys, n, "2.0.0",
       kKeyRO | kKeyAccess, {key}, {order});
  hash("hvals", 2, kReadonly, "<key>", "Every value of a hash.", HVals, n, "2.0.0",
       kKeyRO | kKeyAccess, {key}, {order});
  hash("hincrby", 4, write, "<key> <field> <increment>",
       "Adds an integer to a field's integer value (a missing field counts 0); the new value.",
       HIncrBy, n, "2.0.0", kKeyRW | kKeyAccess | kKeyUpdate, {key, field, IntArg("increment")});
  hash("hincrbyfloat", 4, write, "<key> <field> <increment>",
       "Adds a floating point number to a field's value; the new value.", HIncrByFloat, n, "2.6.0",
       kKeyRW | kKeyAccess | kKeyUpdate, {key, field, TypedArg("increment", ArgType::kDouble)});
  hash("hrandfield", -2, kReadonly, "<key> [count [WITHVALUES]]",
       "Random fields of a hash: distinct for a positive count, repeated for a negative one.",
       HRandField, n, "6.2.0", kKeyRO | kKeyAccess,
       {key, BlockArg("options", kArgOptional,
                      {IntArg("count"), Optional(TokenArg("withvalues", "WITHVALUES"))})},
       {"nondeterministic_output"});
  hash("hscan", -3, kReadonly, "<key> <cursor> [MATCH pattern] [COUNT count]",
       "The fields and values of a hash matching a pattern, in one reply (cursor 0).", HScan, n,
       "2.8.0", kKeyRO | kKeyAccess,
       {key, IntArg("cursor"),
        Tokened(TypedArg("pattern", ArgType::kPattern, kArgOptional), "MATCH"),
        Tokened(IntArg("count", kArgOptional), "COUNT")},
       {"nondeterministic_output"});
}

}  // namespace prefixd::commands
