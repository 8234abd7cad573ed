// Redis's string commands with Redis 7.0.15's replies and errors: GET, SET (EX PX EXAT PXAT NX XX
// KEEPTTL GET), SETNX, SETEX, PSETEX, GETSET, GETEX, GETDEL, MGET, MSET, MSETNX, STRLEN, GETRANGE
// (and SUBSTR), SETRANGE, APPEND and the INCR family. Values live in the keyspace
// (store/keyspace.h); every change is one StringSet/StringDel record through the mutation path,
// carrying the whole new value and its expiry (MSET and MSETNX: one StringMultiSet for all their
// keys). A read-modify-write holds its keys' lock stripes (KeyLocks). Just over 900 lines by
// choice: the SET options, expiry parsing and the read-modify-write helpers are shared by nearly
// every command here, and a split would pass them through a private header.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "commands/arg_reader.h"
#include "commands/cold_reply.h"
#include "commands/families.h"
#include "commands/string_set.h"
#include "common/ascii.h"
#include "common/clock.h"
#include "common/expiry_args.h"
#include "common/numbers.h"
#include "common/scratch_array.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/keys.h"
#include "engine/write_path.h"

namespace prefixd::commands {
namespace {

using store::KeepTtl;
using store::KeyInfo;
using store::KeyType;
using store::StringEncoding;

// Values from this size are kept as the request's own buffer (read straight from the socket, no
// copy) and replied by reference; smaller ones get one compact allocation.
constexpr size_t kSharedValueFrom = size_t{32} << 10;

// A value below persist::kCopiedBlobBelow is copied into its record and into its key's entry
// (store/key_entry.h) before the command returns, so it is lent from the request, not copied.
static_assert(persist::kCopiedBlobBelow <= store::KeyEntry::kInlineValueBelow);
Bytes ValueArg(Context& ctx, size_t i) {
  const std::string_view arg = ctx.args[i];
  if (arg.size() < persist::kCopiedBlobBelow) return Bytes::Borrow(arg);
  return arg.size() >= kSharedValueFrom ? ctx.args.TakeBytes(i) : Bytes::CopyCompact(arg);
}

// A value of `size` bytes filled by `fill` (APPEND, SETRANGE).
template <class Fill>
Bytes BuildValue(size_t size, Fill&& fill) {
  if (size >= kSharedValueFrom) {
    Bytes b = Bytes::Allocate(size);
    fill(b.mutable_data());
    return b;
  }
  std::string buffer(size, '\0');
  fill(reinterpret_cast<uint8_t*>(buffer.data()));
  return Bytes::CopyCompact(buffer);
}

void CountLookup(Context& ctx, bool hit) {
  (hit ? ctx.engine.stats().keyspace_hits : ctx.engine.stats().keyspace_misses).Add();
}

// Redis's lookupKeyRead: lazy expiry, an access stamp, keyspace_hits/misses.
std::optional<KeyInfo> ReadKey(Context& ctx, std::string_view key) {
  auto info = LookupKey(ctx, key, /*touch=*/true);
  CountLookup(ctx, info.has_value());
  return info;
}

// ReadKey for a command that reads a cold value itself (its `place`), or only part of it.
std::optional<KeyInfo> ReadKeyPlace(Context& ctx, std::string_view key) {
  auto info = LookupKeyPlace(ctx, key);
  CountLookup(ctx, info.has_value());
  return info;
}

// A string whose value is on disk only (a parked small string is cold but holds its value).
bool OnDisk(const KeyInfo& info) { return info.place.file != nullptr; }

// The length of a string's value, in memory or on disk (a value on disk is not read).
uint64_t ValueLength(const KeyInfo& info) {
  return OnDisk(info) ? info.place.length : info.value.size();
}

// Redis's lookupKeyWrite: lazy expiry and an access stamp, not counted as a hit or miss.
std::optional<KeyInfo> WriteKey(Context& ctx, std::string_view key) {
  return LookupKey(ctx, key, /*touch=*/true);
}

bool IsString(const std::optional<KeyInfo>& info) { return info && info->type == KeyType::kString; }

// False (with -WRONGTYPE queued) when the key exists with another type.
bool StringOrMissing(Context& ctx, const std::optional<KeyInfo>& info) {
  if (!info || info->type == KeyType::kString) return true;
  ctx.reply.Error(kWrongType);
  return false;
}

struct Write {
  StringEncoding encoding = StringEncoding::kRaw;
  KeepTtl keep_ttl = KeepTtl::kNo;
  int64_t at_ms = 0;  // when !keep_ttl: the new expiry, 0 for none
};

// Deletes each of `keys` that exists with another type than string, by its own record, before
// `record` makes them strings (Redis's SET replaces any value) — but only once the limits admit
// `record`, so a refused write deletes nothing. False when refused, with the error queued.
bool ClearOtherTypeIfAdmitted(Context& ctx, const persist::Mutation& record,
                              std::span<const std::string_view> keys,
                              std::span<const std::optional<KeyInfo>> existing) {
  // Nothing to clear (the common case): Mutate checks the record itself.
  if (std::none_of(existing.begin(), existing.end(), [](const std::optional<KeyInfo>& info) {
        return info && info->type != KeyType::kString;
      })) {
    return true;
  }
  if (std::string why = WritePath(ctx.engine).Refusal(record); !why.empty()) {
    ctx.reply.Error(why);
    return false;
  }
  for (size_t k = 0; k < keys.size(); ++k) {
    if (!existing[k] || existing[k]->type == KeyType::kString) continue;
    Deleted done = DeleteKey(ctx, keys[k], existing[k]->type);
    if (!done.ok) {
      ctx.reply.Error(done.error);
      return false;
    }
    ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, done.lsn);
  }
  return true;
}

persist::StringSet StringRecord(std::string_view key, Bytes value, const Write& how) {
  uint32_t flags = static_cast<uint32_t>(how.encoding) << persist::StringSet::kEncodingShift;
  if (how.keep_ttl == KeepTtl::kYes) flags |= persist::StringSet::kKeepTtl;
  // The record is encoded and applied before the command returns: the key is lent from the
  // request, as a small value is (ValueArg).
  return persist::StringSet{persist::RecordKey::Borrow(key), flags,
                            static_cast<uint64_t>(how.at_ms), persist::Blob{{std::move(value)}}};
}

// Makes `key` a string holding `value`, whatever it held. False when refused, with the error
// queued.
bool StoreString(Context& ctx, std::string_view key, const std::optional<KeyInfo>& existing,
                 Bytes value, const Write& how) {
  const persist::Mutation record = StringRecord(key, std::move(value), how);
  return ClearOtherTypeIfAdmitted(ctx, record, {&key, 1}, {&existing, 1}) &&
         Mutate(ctx, record).has_value();
}

bool DeleteString(Context& ctx, std::string_view key) {
  return Mutate(ctx, persist::StringDel{std::string(key)}).has_value();
}

bool WithinMaxSize(Context& ctx, uint64_t size) {
  if (size <= static_cast<uint64_t>(ctx.engine.settings().Int(Setting::kProtoMaxBulkLen))) {
    return true;
  }
  ctx.reply.Error(errors::kStringTooLong);
  return false;
}

std::vector<std::string_view> ArgsFrom(const Context& ctx, size_t first) {
  std::vector<std::string_view> out;
  for (size_t i = first; i < ctx.args.size(); ++i) out.push_back(ctx.args[i]);
  return out;
}

void Get(Context& ctx) {
  // The common case without a lookup's copy of the value: a small live string, framed straight
  // into the reply.
  const auto read = Db(ctx).keys.ReadInlineString(
      ctx.args[1], CommandClock::WallMs(), [&](std::string_view value) { ctx.reply.Bulk(value); });
  switch (read) {
    case store::Keyspace::InlineRead::kCopied:
      CountLookup(ctx, true);
      return;
    case store::Keyspace::InlineRead::kMissing:
      CountLookup(ctx, false);
      return ctx.reply.Null();
    case store::Keyspace::InlineRead::kOther:
      break;
  }
  auto info = ReadKeyPlace(ctx, ctx.args[1]);
  if (!info) return ctx.reply.Null();
  if (!StringOrMissing(ctx, info)) return;
  // A large value that stays on disk is read as it is sent; one that fits is read back whole.
  if (OnDisk(*info) && info->place.length >= kStreamColdFrom &&
      !PromotesOnRead(ctx.engine, info->place.length)) {
    const store::ColdExtent extent = Db(ctx).keys.StreamColdString(info->place);
    return BulkCold(ctx.reply, std::make_shared<ColdPlan>(std::vector{extent}), 0);
  }
  LoadColdString(ctx.engine, Db(ctx), ctx.args[1], *info);
  ctx.reply.Bulk(info->value);
}

// What SET, GETSET, SETEX and PSETEX send to replicas, as Redis 7.0: an expiry as `SET key value
// PXAT <ms>` (the options that decided whether to write are spent), GET left out, GETSET as SET.
void PropagateSet(Context& ctx, const expiry::StringOptions& options, const Write& how,
                  size_t value_index = 2) {
  if (!ctx.propagate.wanted()) return;
  const std::string_view key = ctx.args[1], value = ctx.args[value_index];
  if (options.expiry != expiry::ExpiryKind::kNone) {
    return ctx.propagate.Send({"SET", key, value, "PXAT", std::to_string(how.at_ms)});
  }
  if (ctx.spec.full_name == "getset") return ctx.propagate.Send({"SET", key, value});
  if (!options.get) return;
  std::vector<std::string_view> argv;
  for (size_t i = 0; i < ctx.args.size(); ++i) {
    if (i < 3 || !EqualsIgnoreCase(ctx.args[i], "get")) argv.push_back(ctx.args[i]);
  }
  ctx.propagate.Send(argv);
}

}  // namespace

StringSetOutcome SetStringValue(Context& ctx, std::string_view key, Bytes value,
                                store::StringEncoding encoding,
                                const expiry::StringOptions& options, int64_t& at_ms,
                                std::optional<store::KeyInfo>* old) {
  Write how{encoding, options.keepttl ? KeepTtl::kYes : KeepTtl::kNo, 0};
  if (options.expiry != expiry::ExpiryKind::kNone) {
    auto at = expiry::StringExpiryAt(options, NowMs(), ctx.spec.full_name);
    if (!at.ok()) {
      ctx.reply.Error(at.error);
      return StringSetOutcome::kRefused;
    }
    how.at_ms = at.value;
  }
  at_ms = how.at_ms;
  KeyLocks lock(ctx.engine, key);
  if (!options.get && !options.nx && !options.xx) {
    // The common SET decides nothing from the old value: one lookup, under the put's own lock,
    // unless the key has expired or holds another type (then the path below deletes it first).
    const auto applied = Mutate(ctx, StringRecord(key, value, how), CommandClock::WallMs());
    if (!applied) return StringSetOutcome::kRefused;
    if (applied->kind == persist::Outcome::Kind::kApplied) return StringSetOutcome::kStored;
  }
  std::optional<KeyInfo> info;
  if (options.get) {
    info = ReadKey(ctx, key);
    if (!StringOrMissing(ctx, info)) return StringSetOutcome::kRefused;
  } else {
    info = LookupKeyToReplace(ctx, key);
  }
  if (old != nullptr) *old = info;
  if ((options.nx && info) || (options.xx && !info)) return StringSetOutcome::kSkipped;
  if (!StoreString(ctx, key, info, std::move(value), how)) return StringSetOutcome::kRefused;
  return StringSetOutcome::kStored;
}

namespace {

// SET and GETSET. `options` start at argument 3.
void SetWith(Context& ctx, const expiry::StringOptions& options) {
  std::optional<KeyInfo> old;
  int64_t at_ms = 0;
  const auto outcome = SetStringValue(ctx, ctx.args[1], ValueArg(ctx, 2),
                                      store::EncodingOf(ctx.args[2]), options, at_ms, &old);
  if (outcome == StringSetOutcome::kRefused) return;
  if (outcome == StringSetOutcome::kStored) {
    PropagateSet(ctx, options, Write{.at_ms = at_ms});
  }
  if (!options.get)
    return outcome == StringSetOutcome::kStored ? ctx.reply.Simple("OK") : ctx.reply.Null();
  IsString(old) ? ctx.reply.Bulk(old->value) : ctx.reply.Null();
}

void Set(Context& ctx) {
  const auto rest = ArgsFrom(ctx, 3);
  auto options = expiry::ParseStringOptions(rest, expiry::StringCommand::kSet);
  if (!options.ok()) return ctx.reply.Error(options.error);
  SetWith(ctx, options.value);
}

void GetSet(Context& ctx) {
  expiry::StringOptions options;
  options.get = true;
  SetWith(ctx, options);
}

void SetNx(Context& ctx) {
  KeyLocks lock(ctx.engine, ctx.args[1]);
  auto info = LookupKeyToReplace(ctx, ctx.args[1]);
  if (info) return ctx.reply.Integer(0);
  if (StoreString(ctx, ctx.args[1], info, ValueArg(ctx, 2), {store::EncodingOf(ctx.args[2])})) {
    ctx.reply.Integer(1);
  }
}

// SETEX and PSETEX: key, time, value.
void SetExpiring(Context& ctx, expiry::ExpiryKind kind) {
  expiry::StringOptions options;
  options.expiry = kind;
  options.expiry_arg = ctx.args[2];
  auto at = expiry::StringExpiryAt(options, NowMs(), ctx.spec.full_name);
  if (!at.ok()) return ctx.reply.Error(at.error);
  KeyLocks lock(ctx.engine, ctx.args[1]);
  auto info = LookupKeyToReplace(ctx, ctx.args[1]);
  const Write how{store::EncodingOf(ctx.args[3]), KeepTtl::kNo, at.value};
  if (!StoreString(ctx, ctx.args[1], info, ValueArg(ctx, 3), how)) return;
  PropagateSet(ctx, options, how, 3);
  ctx.reply.Simple("OK");
}

void SetEx(Context& ctx) { SetExpiring(ctx, expiry::ExpiryKind::kEx); }
void PSetEx(Context& ctx) { SetExpiring(ctx, expiry::ExpiryKind::kPx); }

void GetEx(Context& ctx) {
  const std::string_view key = ctx.args[1];
  const auto rest = ArgsFrom(ctx, 2);
  auto parsed = expiry::ParseStringOptions(rest, expiry::StringCommand::kGetEx);
  if (!parsed.ok()) return ctx.reply.Error(parsed.error);
  const expiry::StringOptions& options = parsed.value;
  KeyLocks lock(ctx.engine, key);
  auto info = ReadKey(ctx, key);
  if (!info) return ctx.reply.Null();
  if (!StringOrMissing(ctx, info)) return;
  const int64_t now = NowMs();
  if (options.expiry != expiry::ExpiryKind::kNone) {
    auto at = expiry::StringExpiryAt(options, now, "getex");
    if (!at.ok()) return ctx.reply.Error(at.error);
    const bool absolute =
        options.expiry == expiry::ExpiryKind::kExAt || options.expiry == expiry::ExpiryKind::kPxAt;
    // An absolute time already past deletes the key, as Redis's checkAlreadyExpired.
    // Replicas get the absolute time, or the DEL, as Redis 7.0 propagates GETEX.
    if (absolute && at.value <= now) {
      if (!DeleteString(ctx, key)) return;
      ctx.propagate.Send({"DEL", key});
    } else {
      if (!Mutate(ctx, persist::KeyExpire{std::string(key), static_cast<uint64_t>(at.value)})) {
        return;
      }
      ctx.propagate.Send({"PEXPIREAT", key, std::to_string(at.value)});
    }
  } else if (options.persist && info->expire_at_ms != 0) {
    if (!Mutate(ctx, persist::KeyExpire{std::string(key), 0})) return;
    ctx.propagate.Send({"PERSIST", key});
  }
  ctx.reply.Bulk(info->value);
}

void GetDel(Context& ctx) {
  KeyLocks lock(ctx.engine, ctx.args[1]);
  auto info = ReadKey(ctx, ctx.args[1]);
  if (!info) return ctx.reply.Null();
  if (!StringOrMissing(ctx, info)) return;
  if (!DeleteString(ctx, ctx.args[1])) return;
  ctx.propagate.Send({"DEL", ctx.args[1]});
  ctx.reply.Bulk(info->value);
}

void MGet(Context& ctx) {
  const size_t n = ctx.args.size() - 1;
  std::vector<std::optional<KeyInfo>> found(n);
  for (size_t i = 0; i < n; ++i) found[i] = ReadKey(ctx, ctx.args[i + 1]);
  ctx.reply.ArrayLen(n);
  for (const auto& info : found) IsString(info) ? ctx.reply.Bulk(info->value) : ctx.reply.Null();
}

// MSET and MSETNX: key value pairs; `only_new`: nothing is set unless every key is missing. All
// the values are one record (persist::StringMultiSet): a restart finds all of them or none. A key
// of another type is deleted first by its own record, as SET does.
void MSetWith(Context& ctx, bool only_new) {
  if (ctx.args.size() % 2 == 0) return ctx.reply.Error(errors::WrongArity(ctx.spec.full_name));
  ScratchArray<std::string_view, 32> key_array(ctx.args.size() / 2);
  const std::span<std::string_view> keys = key_array.span();
  for (size_t k = 0; k < keys.size(); ++k) keys[k] = ctx.args[2 * k + 1];
  KeyLocks lock(ctx.engine, keys);
  const auto record_of_args = [&] {
    persist::StringMultiSet multi;
    multi.entries.reserve(keys.size());
    for (size_t k = 0; k < keys.size(); ++k) {
      const size_t value = 2 * k + 2;
      const Write how{store::EncodingOf(ctx.args[value])};
      multi.entries.push_back(StringRecord(keys[k], ValueArg(ctx, value), how));
    }
    return persist::Mutation(std::move(multi));
  };
  if (!only_new) {
    // As SET: no lookups first unless a key has expired or holds another type.
    const auto applied = Mutate(ctx, record_of_args(), CommandClock::WallMs());
    if (!applied) return;
    if (applied->kind == persist::Outcome::Kind::kApplied) return ctx.reply.Simple("OK");
  }
  std::vector<std::optional<KeyInfo>> found(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    found[k] = LookupKeyToReplace(ctx, keys[k]);
    if (only_new && found[k]) return ctx.reply.Integer(0);
  }
  const persist::Mutation record = record_of_args();
  if (!ClearOtherTypeIfAdmitted(ctx, record, keys, found) || !Mutate(ctx, record)) return;
  only_new ? ctx.reply.Integer(1) : ctx.reply.Simple("OK");
}

void MSet(Context& ctx) { MSetWith(ctx, false); }
void MSetNx(Context& ctx) { MSetWith(ctx, true); }

void StrLen(Context& ctx) {
  auto info = ReadKeyPlace(ctx, ctx.args[1]);
  if (!info) return ctx.reply.Integer(0);
  if (!StringOrMissing(ctx, info)) return;
  ctx.reply.Integer(static_cast<int64_t>(ValueLength(*info)));
}

void GetRange(Context& ctx) {
  ArgReader r(ctx, 2);
  auto start = r.Integer();
  if (!start) return;
  auto end = r.Integer();
  if (!end) return;
  auto info = ReadKeyPlace(ctx, ctx.args[1]);
  if (!info) return ctx.reply.Bulk("");
  if (!StringOrMissing(ctx, info)) return;
  const auto length = static_cast<int64_t>(ValueLength(*info));
  int64_t from = *start, to = *end;
  if (from < 0 && to < 0 && from > to) return ctx.reply.Bulk("");
  if (from < 0) from += length;
  if (to < 0) to += length;
  from = std::max<int64_t>(from, 0);
  to = std::max<int64_t>(to, 0);
  if (to >= length) to = length - 1;
  if (from > to || length == 0) return ctx.reply.Bulk("");
  const auto count = static_cast<uint64_t>(to - from + 1);
  if (OnDisk(*info)) {  // only the asked bytes are read from disk; the key stays cold
    Bytes part;
    std::string error;
    if (!Db(ctx).keys.ReadColdString(info->place, static_cast<uint64_t>(from), count, part,
                                     error)) {
      throw std::runtime_error("reading a cold string from disk failed: " + error);
    }
    return ctx.reply.Bulk(part);
  }
  ctx.reply.Bulk(info->value.Slice(static_cast<size_t>(from), count));
}

void SetRange(Context& ctx) {
  auto offset = ArgReader(ctx, 2).Integer();
  if (!offset) return;
  if (*offset < 0) return ctx.reply.Error(errors::kOffsetOutOfRange);
  const std::string_view key = ctx.args[1];
  const std::string_view patch = ctx.args[3];
  KeyLocks lock(ctx.engine, key);
  auto info = WriteKey(ctx, key);
  if (!StringOrMissing(ctx, info)) return;
  const uint64_t old_length = info ? info->value.size() : 0;
  if (patch.empty()) return ctx.reply.Integer(static_cast<int64_t>(old_length));
  const auto at = static_cast<uint64_t>(*offset);
  if (!WithinMaxSize(ctx, at + patch.size())) return;
  const uint64_t length = std::max<uint64_t>(old_length, at + patch.size());
  Bytes value = BuildValue(length, [&](uint8_t* out) {
    if (old_length > 0) std::memcpy(out, info->value.data(), old_length);
    if (at > old_length) std::memset(out + old_length, 0, at - old_length);
    std::memcpy(out + at, patch.data(), patch.size());
  });
  const Write how{StringEncoding::kRaw, info ? KeepTtl::kYes : KeepTtl::kNo, 0};
  if (StoreString(ctx, key, info, std::move(value), how)) {
    ctx.reply.Integer(static_cast<int64_t>(length));
  }
}

void Append(Context& ctx) {
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  auto info = WriteKey(ctx, key);
  if (!StringOrMissing(ctx, info)) return;
  if (!info) {
    const Write how{store::EncodingOf(ctx.args[2])};
    if (StoreString(ctx, key, info, ValueArg(ctx, 2), how)) {
      ctx.reply.Integer(static_cast<int64_t>(ctx.args[2].size()));
    }
    return;
  }
  const std::string_view tail = ctx.args[2];
  const uint64_t length = info->value.size() + tail.size();
  if (!WithinMaxSize(ctx, length)) return;
  Bytes value = BuildValue(length, [&](uint8_t* out) {
    if (!info->value.empty()) std::memcpy(out, info->value.data(), info->value.size());
    if (!tail.empty()) std::memcpy(out + info->value.size(), tail.data(), tail.size());
  });
  if (StoreString(ctx, key, info, std::move(value), {StringEncoding::kRaw, KeepTtl::kYes})) {
    ctx.reply.Integer(static_cast<int64_t>(length));
  }
}

// INCR's sum of the key's integer and `increment`; nullopt, with the error queued, on overflow.
std::optional<int64_t> Sum(Context& ctx, int64_t value, int64_t increment) {
  if ((increment < 0 && value < 0 && increment < std::numeric_limits<int64_t>::min() - value) ||
      (increment > 0 && value > 0 && increment > std::numeric_limits<int64_t>::max() - value)) {
    ctx.reply.Error(errors::kIncrOverflow);
    return std::nullopt;
  }
  return value + increment;
}

void IncrBy(Context& ctx, int64_t increment) {
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  char digits[24];
  const auto digits_of = [&](int64_t value) {
    const auto printed = std::to_chars(std::begin(digits), std::end(digits), value);
    return std::string_view(digits, static_cast<size_t>(printed.ptr - digits));
  };
  // The common case, a live value in its entry or no key, is parsed where it sits (no copy) and
  // the sum put with one lookup; the stripe keeps the key's other writers out in between, and the
  // put touches the key. Anything else takes the general lookup below.
  const int64_t now = CommandClock::WallMs();
  std::optional<int64_t> current;
  const auto read = Db(ctx).keys.ReadInlineString(
      key, now, [&](std::string_view value) { current = ParseInt64(value); },
      store::Keyspace::Touching::kNo);
  if (read != store::Keyspace::InlineRead::kOther) {
    const bool existed = read == store::Keyspace::InlineRead::kCopied;
    std::optional<int64_t> sum;
    if (existed && !current) {
      ctx.reply.Error(errors::kNotInteger);
    } else {
      sum = Sum(ctx, existed ? *current : 0, increment);
    }
    if (!sum) {
      if (existed) Db(ctx).keys.Touch(key);  // a refused write's lookup counts, as in Redis
      return;
    }
    const Write how{StringEncoding::kInt, existed ? KeepTtl::kYes : KeepTtl::kNo, 0};
    const auto applied = Mutate(ctx, StringRecord(key, Bytes::Borrow(digits_of(*sum)), how), now);
    if (!applied) return;
    if (applied->kind == persist::Outcome::Kind::kApplied) return ctx.reply.Integer(*sum);
  }
  auto info = WriteKey(ctx, key);
  if (!StringOrMissing(ctx, info)) return;
  int64_t value = 0;
  if (info) {
    auto parsed = ParseInt64(info->value.view());
    if (!parsed) return ctx.reply.Error(errors::kNotInteger);
    value = *parsed;
  }
  const auto sum = Sum(ctx, value, increment);
  if (!sum) return;
  const Write how{StringEncoding::kInt, info ? KeepTtl::kYes : KeepTtl::kNo, 0};
  if (StoreString(ctx, key, info, Bytes::Borrow(digits_of(*sum)), how)) {
    ctx.reply.Integer(*sum);
  }
}

void Incr(Context& ctx) { IncrBy(ctx, 1); }
void Decr(Context& ctx) { IncrBy(ctx, -1); }

void IncrByArg(Context& ctx) {
  auto increment = ArgReader(ctx, 2).Integer();
  if (!increment) return;
  IncrBy(ctx, *increment);
}

void DecrByArg(Context& ctx) {
  auto decrement = ArgReader(ctx, 2).Integer();
  if (!decrement) return;
  // Negating LLONG_MIN overflows.
  if (*decrement == std::numeric_limits<int64_t>::min()) {
    return ctx.reply.Error(errors::kDecrOverflow);
  }
  IncrBy(ctx, -*decrement);
}

void IncrByFloat(Context& ctx) {
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  auto info = WriteKey(ctx, key);
  if (!StringOrMissing(ctx, info)) return;
  std::optional<long double> value = 0.0L;
  if (info) value = ParseLongDouble(info->value.view());
  const auto increment = ParseLongDouble(ctx.args[2]);
  if (!value || !increment) return ctx.reply.Error(errors::kNotFloat);
  const long double sum = *value + *increment;
  if (std::isnan(sum) || std::isinf(sum)) {
    return ctx.reply.Error(errors::kIncrNaN);
  }
  const std::string text = HumanLongDouble(sum);
  const Write how{text.size() <= 44 ? StringEncoding::kEmbstr : StringEncoding::kRaw,
                  info ? KeepTtl::kYes : KeepTtl::kNo, 0};
  if (!StoreString(ctx, key, info, Bytes::CopyCompact(text), how)) return;
  // Replicas get the result, not the increment (float formatting may differ between machines).
  ctx.propagate.Send({"SET", key, text, "KEEPTTL"});
  ctx.reply.Bulk(text);
}

// Redis's getBitOffsetFromArgument: a bit offset within proto-max-bulk-len bytes.
std::optional<uint64_t> BitOffset(Context& ctx, std::string_view text) {
  const auto offset = ParseInt64(text);
  const auto max_bytes =
      static_cast<uint64_t>(ctx.engine.settings().Int(Setting::kProtoMaxBulkLen));
  if (!offset || *offset < 0 || (static_cast<uint64_t>(*offset) >> 3) >= max_bytes) {
    ctx.reply.Error(errors::kBitOffset);
    return std::nullopt;
  }
  return static_cast<uint64_t>(*offset);
}

uint8_t BitMask(uint64_t offset) { return static_cast<uint8_t>(1u << (7 - (offset & 7))); }

void SetBit(Context& ctx) {
  const auto offset = BitOffset(ctx, ctx.args[2]);
  if (!offset) return;
  const auto on = ArgReader(ctx, 3).Integer(0, 1, errors::kBitValue);
  if (!on) return;
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  auto info = WriteKey(ctx, key);
  if (!StringOrMissing(ctx, info)) return;
  const size_t byte = static_cast<size_t>(*offset >> 3);
  const size_t old_length = info ? info->value.size() : 0;
  const bool was_set = byte < old_length && (info->value.data()[byte] & BitMask(*offset)) != 0;
  Bytes value = BuildValue(std::max(old_length, byte + 1), [&](uint8_t* out) {
    if (old_length > 0) std::memcpy(out, info->value.data(), old_length);
    if (byte >= old_length) std::memset(out + old_length, 0, byte + 1 - old_length);
    out[byte] = *on ? (out[byte] | BitMask(*offset)) : (out[byte] & ~BitMask(*offset));
  });
  const Write how{StringEncoding::kRaw, info ? KeepTtl::kYes : KeepTtl::kNo, 0};
  if (StoreString(ctx, key, info, std::move(value), how)) ctx.reply.Integer(was_set ? 1 : 0);
}

void GetBit(Context& ctx) {
  const auto offset = BitOffset(ctx, ctx.args[2]);
  if (!offset) return;
  auto info = ReadKey(ctx, ctx.args[1]);
  if (!info) return ctx.reply.Integer(0);
  if (!StringOrMissing(ctx, info)) return;
  const size_t byte = static_cast<size_t>(*offset >> 3);
  const bool set = byte < info->value.size() && (info->value.data()[byte] & BitMask(*offset)) != 0;
  ctx.reply.Integer(set ? 1 : 0);
}

// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN], as Redis 7.0.15's lcsCommand: the
// classic dynamic-programming table, walked back from the end; IDX lists the matching ranges
// from the last to the first.
void Lcs(Context& ctx) {
  auto first = ReadKey(ctx, ctx.args[1]);
  auto second = ReadKey(ctx, ctx.args[2]);
  if ((first && first->type != KeyType::kString) || (second && second->type != KeyType::kString)) {
    return ctx.reply.Error(errors::kLcsNotStrings);
  }
  const std::string_view a = first ? first->value.view() : std::string_view();
  const std::string_view b = second ? second->value.view() : std::string_view();
  bool want_len = false, want_idx = false, with_match_len = false;
  int64_t min_match_len = 0;
  for (ArgReader r(ctx, 3); r.more();) {
    if (r.Keyword("IDX")) {
      want_idx = true;
    } else if (r.Keyword("LEN")) {
      want_len = true;
    } else if (r.Keyword("WITHMATCHLEN")) {
      with_match_len = true;
    } else if (r.Keyword("MINMATCHLEN", 1)) {
      auto n = r.Integer();
      if (!n) return;
      min_match_len = std::max<int64_t>(*n, 0);
    } else {
      return ctx.reply.Error(errors::kSyntax);
    }
  }
  if (want_idx && want_len) {
    return ctx.reply.Error(errors::kLcsLenAndIdx);
  }
  if (a.size() >= UINT32_MAX - 1 || b.size() >= UINT32_MAX - 1) {
    return ctx.reply.Error(errors::kLcsTooLong);
  }
  const uint64_t cells = (uint64_t{a.size()} + 1) * (uint64_t{b.size()} + 1);
  if (cells * sizeof(uint32_t) >
      static_cast<uint64_t>(ctx.engine.settings().Int(Setting::kProtoMaxBulkLen))) {
    return ctx.reply.Error(errors::kLcsTooMuchMemory);
  }
  const size_t width = b.size() + 1;
  std::vector<uint32_t> table(cells, 0);
  const auto at = [&](size_t i, size_t j) -> uint32_t& { return table[j + i * width]; };
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      at(i, j) = a[i - 1] == b[j - 1] ? at(i - 1, j - 1) + 1 : std::max(at(i - 1, j), at(i, j - 1));
    }
  }
  const uint32_t total = at(a.size(), b.size());
  if (want_len) return ctx.reply.Integer(total);
  struct Match {
    size_t a_start, a_end, b_start, b_end;
  };
  std::vector<Match> matches;
  std::string common(total, '\0');
  size_t i = a.size(), j = b.size(), left = total;
  const size_t none = a.size();  // "no range open", as Redis marks it
  size_t a_start = none, a_end = 0, b_start = 0, b_end = 0;
  while (i > 0 && j > 0) {
    bool emit = false;
    if (a[i - 1] == b[j - 1]) {
      common[left - 1] = a[i - 1];
      if (a_start == none) {
        a_start = a_end = i - 1, b_start = b_end = j - 1;
      } else if (a_start == i && b_start == j) {
        --a_start, --b_start;
      } else {
        emit = true;
      }
      if (a_start == 0 || b_start == 0) emit = true;
      --left, --i, --j;
    } else {
      if (at(i - 1, j) > at(i, j - 1)) {
        --i;
      } else {
        --j;
      }
      if (a_start != none) emit = true;
    }
    if (emit) {
      const auto length = static_cast<int64_t>(a_end - a_start + 1);
      if (min_match_len == 0 || length >= min_match_len) {
        matches.push_back({a_start, a_end, b_start, b_end});
      }
      a_start = none;
    }
  }
  if (!want_idx) return ctx.reply.Bulk(common);
  ctx.reply.MapLen(2);
  ctx.reply.Bulk("matches");
  ctx.reply.ArrayLen(matches.size());
  for (const Match& m : matches) {
    ctx.reply.ArrayLen(with_match_len ? 3 : 2);
    ctx.reply.ArrayLen(2);
    ctx.reply.Integer(static_cast<int64_t>(m.a_start));
    ctx.reply.Integer(static_cast<int64_t>(m.a_end));
    ctx.reply.ArrayLen(2);
    ctx.reply.Integer(static_cast<int64_t>(m.b_start));
    ctx.reply.Integer(static_cast<int64_t>(m.b_end));
    if (with_match_len) ctx.reply.Integer(static_cast<int64_t>(m.a_end - m.a_start + 1));
  }
  ctx.reply.Bulk("len");
  ctx.reply.Integer(total);
}

}  // namespace

namespace {

// A Redis string command as Redis 7.0.15's command JSON declares it: @string, its key spec (flags,
// the keys from argument 1, `last_key`/`step` for MSET's pairs) and its arguments.
CommandSpec AsRedisString(CommandSpec s, std::string since, uint32_t key_flags,
                          std::vector<Arg> arguments, std::vector<std::string> tips = {},
                          std::string notes = {}, int last_key = 0, int step = 1) {
  s = AsRedis(std::move(s), std::move(since), kAclString, std::move(tips), std::move(arguments));
  KeySpec key = RangeKeySpec(key_flags, 1, last_key);
  key.key_step = step, key.notes = std::move(notes);
  s.key_specs = {key};
  return s;
}

// SET's and GETEX's expiry choices.
std::vector<Arg> ExpiryChoices(bool with_since) {
  auto since = [&](const char* v) { return with_since ? std::string(v) : std::string(); };
  return {Tokened(IntArg("seconds"), "EX", since("2.6.12")),
          Tokened(IntArg("milliseconds"), "PX", since("2.6.12")),
          Tokened(TypedArg("unix-time-seconds", ArgType::kUnixTime), "EXAT", since("6.2.0")),
          Tokened(TypedArg("unix-time-milliseconds", ArgType::kUnixTime), "PXAT", since("6.2.0"))};
}

}  // namespace

void RegisterStringCommands(Registry& r) {
  auto cmd = [](std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h, std::string complexity = "O(1)") {
    return MakeSpec("string", 1, std::move(name), arity, flags, std::move(syntax),
                    std::move(summary), h, std::move(complexity));
  };
  const uint32_t write = kWrite | kDenyOom;
  const Arg key = KeyArg("key"), value = StrArg("value");
  const uint32_t rw_update = kKeyRW | kKeyAccess | kKeyUpdate;
  r.Add(AsRedisString(
      cmd("get", 2, kReadonly | kFast, "<key>", "Returns a string key's value, or nil.", Get),
      "1.0.0", kKeyRO | kKeyAccess, {key}));
  std::vector<Arg> set_expiry = ExpiryChoices(true);
  set_expiry.push_back(TokenArg("keepttl", "KEEPTTL", "6.0.0"));
  r.Add(AsRedisString(
      cmd("set", -3, write,
          "<key> <value> [NX|XX] [GET] [EX seconds|PX ms|EXAT unix-s|PXAT unix-ms|KEEPTTL]",
          "Sets a string value, replacing a key of any type; the expiry is logged with it.", Set),
      "1.0.0", rw_update | kKeyVariableFlags,
      {key, value,
       OneOfArg("condition", kArgOptional, {TokenArg("nx", "NX"), TokenArg("xx", "XX")}, "2.6.12"),
       Optional(TokenArg("get", "GET", "6.2.0")),
       OneOfArg("expiration", kArgOptional, std::move(set_expiry))},
      {}, "RW and ACCESS due to the optional `GET` argument"));
  r.Add(AsRedisString(
      cmd("setnx", 3, write | kFast, "<key> <value>",
          "Sets a string value only if the key does not exist; 1 if it was set.", SetNx),
      "1.0.0", kKeyOW | kKeyInsert, {key, value}));
  r.Add(AsRedisString(cmd("setex", 4, write, "<key> <seconds> <value>",
                          "Sets a string value with a time to live in seconds.", SetEx),
                      "2.0.0", kKeyOW | kKeyUpdate, {key, IntArg("seconds"), value}));
  r.Add(AsRedisString(cmd("psetex", 4, write, "<key> <milliseconds> <value>",
                          "Sets a string value with a time to live in milliseconds.", PSetEx),
                      "2.6.0", kKeyOW | kKeyUpdate, {key, IntArg("milliseconds"), value}));
  r.Add(AsRedisString(cmd("getset", 3, write | kFast, "<key> <value>",
                          "Sets a string value and returns the old one (as SET ... GET).", GetSet),
                      "1.0.0", rw_update, {key, value}));
  std::vector<Arg> getex_expiry = ExpiryChoices(false);
  getex_expiry.push_back(TokenArg("persist", "PERSIST"));
  r.Add(AsRedisString(
      cmd("getex", -2, kWrite | kFast, "<key> [EX seconds|PX ms|EXAT unix-s|PXAT unix-ms|PERSIST]",
          "Returns a string value and sets or removes its expiry.", GetEx),
      "6.2.0", rw_update, {key, OneOfArg("expiration", kArgOptional, std::move(getex_expiry))}, {},
      "RW and UPDATE because it changes the TTL"));
  r.Add(AsRedisString(cmd("getdel", 2, kWrite | kFast, "<key>",
                          "Returns a string value and deletes the key.", GetDel),
                      "6.2.0", kKeyRW | kKeyAccess | kKeyDelete, {key}));
  Arg keys = key;
  keys.flags |= kArgMultiple;
  CommandSpec mget = cmd("mget", -2, kReadonly | kFast, "<key> [key ...]",
                         "Returns the values of several keys; nil for a missing or non-string key.",
                         MGet, "O(N) in the number of keys");
  mget.last_key = -1;
  r.Add(AsRedisString(std::move(mget), "1.0.0", kKeyRO | kKeyAccess, {keys},
                      {"request_policy:multi_shard"}, {}, -1));
  auto pairs = [&](std::string name, Handler h, std::string summary, uint32_t key_flags,
                   std::string response_policy) {
    CommandSpec s = cmd(std::move(name), -3, write, "<key> <value> [key value ...]",
                        std::move(summary), h, "O(N) in the number of keys");
    s.last_key = -1, s.key_step = 2;
    return AsRedisString(std::move(s), "1.0.1", key_flags,
                         {BlockArg("key_value", kArgMultiple, {key, value})},
                         {"request_policy:multi_shard", std::move(response_policy)}, {}, -1, 2);
  };
  r.Add(pairs("mset", MSet, "Sets several string values.", kKeyOW | kKeyUpdate,
              "response_policy:all_succeeded"));
  r.Add(pairs("msetnx", MSetNx, "Sets several string values only if none of the keys exists.",
              kKeyOW | kKeyInsert, "response_policy:agg_min"));
  r.Add(AsRedisString(cmd("strlen", 2, kReadonly | kFast, "<key>",
                          "The length of a string value; 0 if absent.", StrLen),
                      "2.2.0", kKeyRO, {key}));
  r.Add(
      AsRedisString(cmd("getrange", 4, kReadonly, "<key> <start> <end>",
                        "A substring of a string value (inclusive, negative counts from the end).",
                        GetRange, "O(N) in the length returned"),
                    "2.4.0", kKeyRO | kKeyAccess, {key, IntArg("start"), IntArg("end")}));
  // GETRANGE's old name (Redis 1.0), which Redis 7 still answers to.
  r.Add(AsRedisString(cmd("substr", 4, kReadonly, "<key> <start> <end>",
                          "GETRANGE under its old name.", GetRange, "O(N) in the length returned"),
                      "1.0.0", kKeyRO | kKeyAccess, {key, IntArg("start"), IntArg("end")}));
  r.Add(AsRedisString(
      cmd("setrange", 4, write, "<key> <offset> <value>",
          "Overwrites part of a string value, padding with zero bytes; replies the length.",
          SetRange, "O(N) in the length of the value"),
      "2.2.0", kKeyRW | kKeyUpdate, {key, IntArg("offset"), value}));
  r.Add(AsRedisString(cmd("append", 3, write | kFast, "<key> <value>",
                          "Appends to a string value (creating it); replies the new length.",
                          Append, "O(N) in the length of the value"),
                      "2.0.0", kKeyRW | kKeyInsert, {key, value}));
  r.Add(AsRedisString(
      cmd("incr", 2, write | kFast, "<key>", "Adds 1 to the integer a string holds.", Incr),
      "1.0.0", rw_update, {key}));
  r.Add(AsRedisString(
      cmd("decr", 2, write | kFast, "<key>", "Subtracts 1 from the integer a string holds.", Decr),
      "1.0.0", rw_update, {key}));
  r.Add(AsRedisString(cmd("incrby", 3, write | kFast, "<key> <increment>",
                          "Adds an integer to the integer a string holds.", IncrByArg),
                      "1.0.0", rw_update, {key, IntArg("increment")}));
  r.Add(AsRedisString(cmd("decrby", 3, write | kFast, "<key> <decrement>",
                          "Subtracts an integer from the integer a string holds.", DecrByArg),
                      "1.0.0", rw_update, {key, IntArg("decrement")}));
  r.Add(
      AsRedisString(cmd("incrbyfloat", 3, write | kFast, "<key> <increment>",
                        "Adds a floating point number to the number a string holds.", IncrByFloat),
                    "2.6.0", rw_update, {key, TypedArg("increment", ArgType::kDouble)}));
  CommandSpec lcs = AsRedisString(
      cmd("lcs", -3, kReadonly, "<key1> <key2> [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]",
          "The longest common subsequence of two string values, its length or its ranges.", Lcs,
          "O(N*M) in the lengths of the two values"),
      "7.0.0", kKeyRO | kKeyAccess,
      {KeyArg("key1"), KeyArg("key2"), Optional(TokenArg("len", "LEN")),
       Optional(TokenArg("idx", "IDX")), Tokened(IntArg("len", kArgOptional), "MINMATCHLEN"),
       Optional(TokenArg("withmatchlen", "WITHMATCHLEN"))},
      {}, {}, 1);
  lcs.last_key = 2;
  r.Add(std::move(lcs));
  // The two bitmap commands Redis's string tests use.
  CommandSpec setbit = AsRedisString(
      cmd("setbit", 4, write, "<key> <offset> <value>",
          "Sets or clears one bit of a string value (growing it with zero bytes); replies the old "
          "bit.",
          SetBit),
      "2.2.0", rw_update, {key, IntArg("offset"), IntArg("value")});
  setbit.acl_categories = kAclBitmap, setbit.group = "bitmap";
  r.Add(std::move(setbit));
  CommandSpec getbit =
      AsRedisString(cmd("getbit", 3, kReadonly | kFast, "<key> <offset>",
                        "Returns one bit of a string value (0 past its end).", GetBit),
                    "2.2.0", kKeyRO | kKeyAccess, {key, IntArg("offset")});
  getbit.acl_categories = kAclBitmap, getbit.group = "bitmap";
  r.Add(std::move(getbit));
}

}  // namespace prefixd::commands
