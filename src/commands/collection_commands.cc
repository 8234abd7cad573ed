// Redis's set and list commands with Redis 7.0.15's replies and errors: SADD, SREM, SCARD,
// SISMEMBER, SMISMEMBER, SMEMBERS, SRANDMEMBER, SPOP; LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP,
// LLEN, LRANGE, LINDEX, LSET, LREM, LTRIM (no blocking pops). A set's or list's members live in
// its keyspace entry (store/members.h); every change is one SetValue/ListValue record through the
// mutation path carrying the whole new value (an emptied key: no members, deleted). A
// read-modify-write holds its key's lock stripe (KeyLocks).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "commands/arg_reader.h"
#include "commands/families.h"
#include "common/numbers.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/keys.h"
#include "engine/write_path.h"
#include "store/members.h"

namespace prefixd::commands {
namespace {

using store::KeyType;
using store::SetEncoding;

// A set or list key as a command reads it: `exists` false for a missing key (no members).
struct Loaded {
  bool exists = false;
  std::vector<std::string> members;
  SetEncoding encoding = SetEncoding::kIntset;
};

// Looks `key` up as Redis's lookupKeyRead/Write (lazy expiry, a touch; a read counts a hit or
// miss). False, with -WRONGTYPE queued, when it holds another type.
bool Load(Context& ctx, std::string_view key, KeyType type, bool read, Loaded& out) {
  auto info = LookupKey(ctx, key, /*touch=*/true);
  if (read) {
    (info ? ctx.engine.stats().keyspace_hits : ctx.engine.stats().keyspace_misses).Add();
  }
  if (!info) return true;
  if (info->type != type) {
    ctx.reply.Error(kWrongType);
    return false;
  }
  out.exists = true;
  out.encoding = static_cast<SetEncoding>(info->encoding);
  out.members = store::DecodeMembers(info->value.view()).value_or(std::vector<std::string>{});
  return true;
}

// Logs `key`'s whole new value (no members: the key is deleted). False when refused (error
// queued).
bool Store(Context& ctx, std::string_view key, KeyType type, const Loaded& value) {
  persist::Blob blob{{store::EncodeMembers(value.members)}};
  if (type == KeyType::kSet) {
    return Mutate(ctx, persist::SetValue{std::string(key), static_cast<uint32_t>(value.encoding),
                                         persist::SetValue::kWhole, std::move(blob)})
        .has_value();
  }
  return Mutate(ctx, persist::ListValue{std::string(key), persist::ListValue::kWhole, 0,
                                        std::move(blob)})
      .has_value();
}

// Logs a set operation (SetValue::kAdd or kRemove) of `members`, leaving `encoding`.
bool StoreSetChange(Context& ctx, std::string_view key, SetEncoding encoding, uint32_t op,
                    const std::vector<std::string>& members) {
  return Mutate(ctx, persist::SetValue{std::string(key), static_cast<uint32_t>(encoding), op,
                                       persist::Blob{{store::EncodeMembers(members)}}})
      .has_value();
}

// Logs a list operation: a push of `elements` or a pop of `count`.
bool StoreListChange(Context& ctx, std::string_view key, uint32_t op, uint64_t count,
                     const std::vector<std::string>& elements) {
  persist::Blob blob;
  if (!elements.empty()) blob.pieces.push_back(store::EncodeMembers(elements));
  return Mutate(ctx, persist::ListValue{std::string(key), op, count, std::move(blob)}).has_value();
}

std::mt19937_64& Rng() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}

// An integer argument as Redis's getLongFromObjectOrReply; nullopt with the error queued.
std::optional<int64_t> IntArgument(Context& ctx, size_t index) {
  return ArgReader(ctx, index).Integer();
}

// A count as Redis's getPositiveLongFromObjectOrReply (SPOP, LPOP, RPOP): one error for a
// negative count and for one that is no integer.
std::optional<int64_t> PositiveCount(Context& ctx, size_t index) {
  return ArgReader(ctx, index).Integer(0, INT64_MAX, errors::kNotPositive);
}

// SPOP and LPOP/RPOP: the optional count after the key (Redis's third argument). False when the
// error reply was queued; `count` stays empty without one.
bool OptionalCount(Context& ctx, std::optional<int64_t>& count) {
  if (ctx.args.size() < 3) return true;
  count = PositiveCount(ctx, 2);
  return count.has_value();
}

// ---- sets ------------------------------------------------------------------------------------

void SAdd(Context& ctx) {
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  Loaded set;
  if (!Load(ctx, key, KeyType::kSet, false, set)) return;
  // Redis 7.0 creates the set as its first member's kind (setTypeCreate), then converts.
  if (!set.exists) {
    set.encoding =
        store::IntsetMember(ctx.args[2]) ? SetEncoding::kIntset : SetEncoding::kHashtable;
  }
  std::unordered_set<std::string> present(set.members.begin(), set.members.end());
  std::vector<std::string> added;
  for (size_t i = 2; i < ctx.args.size(); ++i) {
    if (!present.emplace(ctx.args[i]).second) continue;
    set.members.emplace_back(ctx.args[i]);
    added.emplace_back(ctx.args[i]);
  }
  if (!added.empty()) {
    const auto max_intset =
        static_cast<size_t>(ctx.engine.settings().Int(Setting::kSetMaxIntsetEntries));
    set.encoding = store::SetEncodingAfterAdd(set.encoding, set.members, max_intset);
    if (!StoreSetChange(ctx, key, set.encoding, persist::SetValue::kAdd, added)) return;
  }
  ctx.reply.Integer(static_cast<int64_t>(added.size()));
}

void SRem(Context& ctx) {
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  Loaded set;
  if (!Load(ctx, key, KeyType::kSet, false, set)) return;
  std::unordered_set<std::string_view> named;
  for (size_t i = 2; i < ctx.args.size(); ++i) named.insert(ctx.args[i]);
  std::vector<std::string> removed;
  for (const std::string& m : set.members) {
    if (named.count(m) > 0) removed.push_back(m);
  }
  if (!removed.empty() &&
      !StoreSetChange(ctx, key, set.encoding, persist::SetValue::kRemove, removed)) {
    return;
  }
  ctx.reply.Integer(static_cast<int64_t>(removed.size()));
}

void SCard(Context& ctx) {
  Loaded set;
  if (!Load(ctx, ctx.args[1], KeyType::kSet, true, set)) return;
  ctx.reply.Integer(static_cast<int64_t>(set.members.size()));
}

bool Contains(const Loaded& set, std::string_view member) {
  return std::find(set.members.begin(), set.members.end(), member) != set.members.end();
}

void SIsMember(Context& ctx) {
  Loaded set;
  if (!Load(ctx, ctx.args[1], KeyType::kSet, true, set)) return;
  ctx.reply.Integer(Contains(set, ctx.args[2]) ? 1 : 0);
}

void SMIsMember(Context& ctx) {
  Loaded set;
  if (!Load(ctx, ctx.args[1], KeyType::kSet, true, set)) return;
  ctx.reply.ArrayLen(ctx.args.size() - 2);
  for (size_t i = 2; i < ctx.args.size(); ++i) ctx.reply.Integer(Contains(set, ctx.args[i]));
}

void ReplySet(Context& ctx, const std::vector<std::string>& members) {
  ctx.reply.SetLen(members.size());
  for (const std::string& m : members) ctx.reply.Bulk(m);
}

void SMembers(Context& ctx) {
  Loaded set;
  if (!Load(ctx, ctx.args[1], KeyType::kSet, true, set)) return;
  ReplySet(ctx, set.members);
}

// `count` distinct members of `members` picked at random (count < size), in set order.
std::vector<std::string> Sample(std::vector<std::string>& members, size_t count) {
  std::vector<size_t> order(members.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (size_t i = 0; i < count; ++i) {
    std::swap(order[i], order[i + Rng()() % (order.size() - i)]);
  }
  order.resize(count);
  std::sort(order.begin(), order.end());
  std::vector<std::string> out;
  out.reserve(count);
  for (size_t i : order) out.push_back(std::move(members[i]));
  return out;
}

void SRandMember(Context& ctx) {
  if (ctx.args.size() > 3) return ctx.reply.Error(errors::kSyntax);
  std::optional<int64_t> count;
  if (ctx.args.size() == 3) {
    count = IntArgument(ctx, 2);
    if (!count) return;
    if (*count == INT64_MIN) return ctx.reply.Error(errors::kCountOutOfRange);
  }
  Loaded set;
  if (!Load(ctx, ctx.args[1], KeyType::kSet, true, set)) return;
  if (!count) {
    if (!set.exists) return ctx.reply.Null();
    return ctx.reply.Bulk(set.members[Rng()() % set.members.size()]);
  }
  if (!set.exists || *count == 0) return ctx.reply.ArrayLen(0);
  if (*count < 0) {  // repeats allowed
    const uint64_t n = static_cast<uint64_t>(-*count);
    // Redis would try to build the reply whatever its size; here a count whose reply could not
    // fit client-output-buffer-limit (6 bytes an element at least) is refused up front.
    const auto most =
        static_cast<uint64_t>(ctx.engine.settings().Int(Setting::kClientOutputBufferLimit) / 6);
    if (n > most) return ctx.reply.Error(errors::kOutOfRange);
    ctx.reply.ArrayLen(n);
    for (uint64_t i = 0; i < n; ++i) ctx.reply.Bulk(set.members[Rng()() % set.members.size()]);
    return;
  }
  // An array, not a RESP3 set, even for distinct members (Redis 7.0).
  const std::vector<std::string> picked = static_cast<uint64_t>(*count) >= set.members.size()
                                              ? std::move(set.members)
                                              : Sample(set.members, static_cast<size_t>(*count));
  ctx.reply.ArrayLen(picked.size());
  for (const std::string& m : picked) ctx.reply.Bulk(m);
}

// SPOP reaches replicas as what it did, as Redis 7.0: SREM of the members popped (1024 to a
// command), or DEL when it took the whole set — never as a random choice made again there.
void PropagatePopped(Context& ctx, std::string_view key, const std::vector<std::string>& popped,
                     bool whole) {
  if (!ctx.propagate.wanted()) return;
  if (whole) return ctx.propagate.Send({"DEL", key});
  constexpr size_t kBatch = 1024;
  for (size_t i = 0; i < popped.size(); i += kBatch) {
    std::vector<std::string_view> argv = {"SREM", key};
    const size_t end = std::min(popped.size(), i + kBatch);
    argv.insert(argv.end(), popped.begin() + static_cast<ptrdiff_t>(i),
                popped.begin() + static_cast<ptrdiff_t>(end));
    ctx.propagate.Send(argv);
  }
}

void SPop(Context& ctx) {
  if (ctx.args.size() > 3) return ctx.reply.Error(errors::kSyntax);
  std::optional<int64_t> count;
  if (!OptionalCount(ctx, count)) return;
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  Loaded set;
  if (!Load(ctx, key, KeyType::kSet, false, set)) return;
  if (!count) {
    if (!set.exists) return ctx.reply.Null();
    const std::vector<std::string> popped = {set.members[Rng()() % set.members.size()]};
    if (!StoreSetChange(ctx, key, set.encoding, persist::SetValue::kRemove, popped)) return;
    PropagatePopped(ctx, key, popped, false);
    return ctx.reply.Bulk(popped[0]);
  }
  if (!set.exists || *count == 0) return ctx.reply.SetLen(0);
  std::vector<std::string> popped;
  if (static_cast<uint64_t>(*count) >= set.members.size()) {
    popped = std::move(set.members);
    set.members.clear();
    if (!Store(ctx, key, KeyType::kSet, set)) return;  // the whole set: one delete
    PropagatePopped(ctx, key, popped, true);
  } else {
    popped = Sample(set.members, static_cast<size_t>(*count));
    if (!StoreSetChange(ctx, key, set.encoding, persist::SetValue::kRemove, popped)) return;
    PropagatePopped(ctx, key, popped, false);
  }
  ReplySet(ctx, popped);
}

// ---- lists -----------------------------------------------------------------------------------

// The key's entry for a push or pop, its value left encoded (a push or pop reads no more than
// it needs): nullopt when missing. False, with -WRONGTYPE queued, when it is no list.
bool FindList(Context& ctx, std::string_view key, std::optional<store::KeyInfo>& out) {
  out = LookupKey(ctx, key, /*touch=*/true);
  if (!out || out->type == KeyType::kList) return true;
  ctx.reply.Error(kWrongType);
  return false;
}

void Push(Context& ctx, bool head, bool only_existing) {
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  std::optional<store::KeyInfo> list;
  if (!FindList(ctx, key, list)) return;
  if (only_existing && !list) return ctx.reply.Integer(0);
  // LPUSH a b c puts c at the head: the record holds the new head in its final order.
  std::vector<std::string> elements;
  elements.reserve(ctx.args.size() - 2);
  for (size_t i = 2; i < ctx.args.size(); ++i) {
    elements.emplace_back(ctx.args[head ? ctx.args.size() + 1 - i : i]);
  }
  const size_t length = (list ? store::CountMembers(list->value.view()) : 0) + elements.size();
  const uint32_t op = head ? persist::ListValue::kPushHead : persist::ListValue::kPushTail;
  if (!StoreListChange(ctx, key, op, 0, elements)) return;
  ctx.reply.Integer(static_cast<int64_t>(length));
}

void LPush(Context& ctx) { Push(ctx, true, false); }
void RPush(Context& ctx) { Push(ctx, false, false); }
void LPushX(Context& ctx) { Push(ctx, true, true); }
void RPushX(Context& ctx) { Push(ctx, false, true); }

void Pop(Context& ctx, bool head) {
  if (ctx.args.size() > 3) return ctx.reply.Error(errors::WrongArity(ctx.spec.full_name));
  std::optional<int64_t> count;
  if (!OptionalCount(ctx, count)) return;
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  std::optional<store::KeyInfo> list;
  if (!FindList(ctx, key, list)) return;
  if (!list) return count ? ctx.reply.NullArray() : ctx.reply.Null();
  if (count && *count == 0) return ctx.reply.ArrayLen(0);
  const std::vector<std::string> popped =
      store::EdgeMembers(list->value.view(), static_cast<uint64_t>(count.value_or(1)), head);
  const uint32_t op = head ? persist::ListValue::kPopHead : persist::ListValue::kPopTail;
  if (!StoreListChange(ctx, key, op, popped.size(), {})) return;
  if (!count) return ctx.reply.Bulk(popped[0]);
  ctx.reply.ArrayLen(popped.size());
  for (const std::string& m : popped) ctx.reply.Bulk(m);
}

void LPop(Context& ctx) { Pop(ctx, true); }
void RPop(Context& ctx) { Pop(ctx, false); }

void LLen(Context& ctx) {
  Loaded list;
  if (!Load(ctx, ctx.args[1], KeyType::kList, true, list)) return;
  ctx.reply.Integer(static_cast<int64_t>(list.members.size()));
}

// Redis's start/stop clamping (LRANGE, LTRIM): the inclusive range [start, stop] within a list of
// `size`, or nullopt when it is empty.
std::optional<std::pair<size_t, size_t>> Range(int64_t start, int64_t stop, size_t size) {
  const auto len = static_cast<int64_t>(size);
  if (start < 0) start = std::max<int64_t>(len + start, 0);
  if (stop < 0) stop = len + stop;
  if (start > stop || start >= len) return std::nullopt;
  stop = std::min(stop, len - 1);
  return std::make_pair(static_cast<size_t>(start), static_cast<size_t>(stop));
}

void LRange(Context& ctx) {
  auto start = IntArgument(ctx, 2);
  if (!start) return;
  auto stop = IntArgument(ctx, 3);
  if (!stop) return;
  Loaded list;
  if (!Load(ctx, ctx.args[1], KeyType::kList, true, list)) return;
  auto range = Range(*start, *stop, list.members.size());
  if (!range) return ctx.reply.ArrayLen(0);
  ctx.reply.ArrayLen(range->second - range->first + 1);
  for (size_t i = range->first; i <= range->second; ++i) ctx.reply.Bulk(list.members[i]);
}

// An index from the head (negative: from the tail), or nullopt when it is outside the list.
std::optional<size_t> Position(int64_t index, size_t size) {
  const int64_t at = index < 0 ? static_cast<int64_t>(size) + index : index;
  if (at < 0 || at >= static_cast<int64_t>(size)) return std::nullopt;
  return static_cast<size_t>(at);
}

void LIndex(Context& ctx) {
  // Redis looks the key up before it parses the index: a missing key answers nil either way.
  Loaded list;
  if (!Load(ctx, ctx.args[1], KeyType::kList, true, list)) return;
  if (!list.exists) return ctx.reply.Null();
  auto index = IntArgument(ctx, 2);
  if (!index) return;
  auto at = Position(*index, list.members.size());
  if (!at) return ctx.reply.Null();
  ctx.reply.Bulk(list.members[*at]);
}

void LSet(Context& ctx) {
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  Loaded list;
  if (!Load(ctx, key, KeyType::kList, false, list)) return;
  if (!list.exists) return ctx.reply.Error(errors::kNoSuchKey);  // before the index, as Redis
  auto index = IntArgument(ctx, 2);
  if (!index) return;
  auto at = Position(*index, list.members.size());
  if (!at) return ctx.reply.Error(errors::kIndexOutOfRange);
  list.members[*at] = std::string(ctx.args[3]);
  if (Store(ctx, key, KeyType::kList, list)) ctx.reply.Simple("OK");
}

void LRem(Context& ctx) {
  auto count = IntArgument(ctx, 2);
  if (!count) return;
  const std::string_view key = ctx.args[1], element = ctx.args[3];
  KeyLocks lock(ctx.engine, key);
  Loaded list;
  if (!Load(ctx, key, KeyType::kList, false, list)) return;
  // count > 0: the first `count` matches from the head; < 0: from the tail; 0: all of them.
  const uint64_t limit = *count == 0  ? UINT64_MAX
                         : *count > 0 ? static_cast<uint64_t>(*count)
                                      : static_cast<uint64_t>(-(*count + 1)) + 1;
  std::vector<bool> drop(list.members.size(), false);
  uint64_t removed = 0;
  for (size_t k = 0; k < list.members.size() && removed < limit; ++k) {
    const size_t i = *count < 0 ? list.members.size() - 1 - k : k;
    if (list.members[i] == element) drop[i] = true, removed += 1;
  }
  if (removed > 0) {
    std::vector<std::string> kept;
    kept.reserve(list.members.size() - removed);
    for (size_t i = 0; i < list.members.size(); ++i) {
      if (!drop[i]) kept.push_back(std::move(list.members[i]));
    }
    list.members = std::move(kept);
    if (!Store(ctx, key, KeyType::kList, list)) return;
  }
  ctx.reply.Integer(static_cast<int64_t>(removed));
}

void LTrim(Context& ctx) {
  auto start = IntArgument(ctx, 2);
  if (!start) return;
  auto stop = IntArgument(ctx, 3);
  if (!stop) return;
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  Loaded list;
  if (!Load(ctx, key, KeyType::kList, false, list)) return;
  if (list.exists) {
    auto range = Range(*start, *stop, list.members.size());
    std::vector<std::string> kept;
    if (range) {
      kept.assign(
          std::make_move_iterator(list.members.begin() + static_cast<ptrdiff_t>(range->first)),
          std::make_move_iterator(list.members.begin() +
                                  static_cast<ptrdiff_t>(range->second + 1)));
    }
    if (kept.size() != list.members.size()) {
      list.members = std::move(kept);
      if (!Store(ctx, key, KeyType::kList, list)) return;
    }
  }
  ctx.reply.Simple("OK");
}

}  // namespace

void RegisterCollectionCommands(Registry& r) {
  const OneKeyFamily set(r, "set", kAclSet);
  const OneKeyFamily list(r, "list", kAclList);
  const uint32_t write = kWrite | kDenyOom | kFast;
  const uint32_t read = kReadonly | kFast;
  const Arg key = KeyArg("key"), member = StrArg("member"), element = StrArg("element");
  const Arg count = IntArg("count", kArgOptional);
  const std::string n = "O(N) in the set's size";

  set("sadd", -3, write, "<key> <member> [member ...]", "Adds members to a set; how many were new.",
      SAdd, n, "1.0.0", kKeyRW | kKeyInsert, {key, Many(member)});
  set("srem", -3, kWrite | kFast, "<key> <member> [member ...]",
      "Removes members from a set; how many were there.", SRem, n, "1.0.0", kKeyRW | kKeyDelete,
      {key, Many(member)});
  set("scard", 2, read, "<key>", "The number of members of a set.", SCard, n, "1.0.0", kKeyRO,
      {key});
  set("sismember", 3, read, "<key> <member>", "1 if the member is in the set, else 0.", SIsMember,
      n, "1.0.0", kKeyRO, {key, member});
  set("smismember", -3, read, "<key> <member> [member ...]",
      "For each member, 1 if it is in the set, else 0.", SMIsMember, n, "6.2.0",
      kKeyRO | kKeyAccess, {key, Many(member)});
  set("smembers", 2, kReadonly, "<key>", "Every member of a set.", SMembers, n, "1.0.0",
      kKeyRO | kKeyAccess, {key}, {"nondeterministic_output_order"});
  set("srandmember", -2, kReadonly, "<key> [count]",
      "Random members of a set: distinct for a positive count, repeated for a negative one.",
      SRandMember, n, "1.0.0", kKeyRO | kKeyAccess, {key, Tokened(count, {}, "2.6.0")},
      {"nondeterministic_output"});
  set("spop", -2, kWrite | kFast, "<key> [count]", "Removes and returns random members of a set.",
      SPop, n, "1.0.0", kKeyRW | kKeyAccess | kKeyDelete, {key, Tokened(count, {}, "3.2.0")},
      {"nondeterministic_output"});

  const std::string m = "O(N) in the list's length";
  list("lpush", -3, write, "<key> <element> [element ...]",
       "Prepends elements to a list (the last given ends first); its new length.", LPush, m,
       "1.0.0", kKeyRW | kKeyInsert, {key, Many(element)});
  list("rpush", -3, write, "<key> <element> [element ...]",
       "Appends elements to a list; its new length.", RPush, m, "1.0.0", kKeyRW | kKeyInsert,
       {key, Many(element)});
  list("lpushx", -3, write, "<key> <element> [element ...]",
       "LPUSH only when the list exists; 0 otherwise.", LPushX, m, "2.2.0", kKeyRW | kKeyInsert,
       {key, Many(element)});
  list("rpushx", -3, write, "<key> <element> [element ...]",
       "RPUSH only when the list exists; 0 otherwise.", RPushX, m, "2.2.0", kKeyRW | kKeyInsert,
       {key, Many(element)});
  list("lpop", -2, kWrite | kFast, "<key> [count]",
       "Removes and returns the first elements of a list.", LPop, m, "1.0.0",
       kKeyRW | kKeyAccess | kKeyDelete, {key, Tokened(count, {}, "6.2.0")});
  list("rpop", -2, kWrite | kFast, "<key> [count]",
       "Removes and returns the last elements of a list.", RPop, m, "1.0.0",
       kKeyRW | kKeyAccess | kKeyDelete, {key, Tokened(count, {}, "6.2.0")});
  list("llen", 2, read, "<key>", "The length of a list.", LLen, m, "1.0.0", kKeyRO, {key});
  list("lrange", 4, kReadonly, "<key> <start> <stop>",
       "The elements from start to stop (inclusive; negative counts from the tail).", LRange, m,
       "1.0.0", kKeyRO | kKeyAccess, {key, IntArg("start"), IntArg("stop")});
  list("lindex", 3, kReadonly, "<key> <index>", "The element at an index, or nil.", LIndex, m,
       "1.0.0", kKeyRO | kKeyAccess, {key, IntArg("index")});
  list("lset", 4, kWrite | kDenyOom, "<key> <index> <element>", "Replaces the element at an index.",
       LSet, m, "1.0.0", kKeyRW | kKeyUpdate, {key, IntArg("index"), element});
  list("lrem", 4, kWrite, "<key> <count> <element>",
       "Removes count occurrences of an element (from the tail if negative, all if 0).", LRem, m,
       "1.0.0", kKeyRW | kKeyDelete, {key, IntArg("count"), element});
  list("ltrim", 4, kWrite, "<key> <start> <stop>", "Keeps only the elements from start to stop.",
       LTrim, m, "1.0.0", kKeyRW | kKeyDelete, {key, IntArg("start"), IntArg("stop")});
}

}  // namespace prefixd::commands
