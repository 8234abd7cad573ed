// Redis's sorted-set commands with Redis 7.0.15's replies and errors: ZADD (NX|XX, GT|LT, CH,
// INCR), ZINCRBY, ZSCORE, ZMSCORE, ZCARD, ZCOUNT, ZLEXCOUNT, ZRANK, ZREVRANK, ZREM, ZRANGE
// (BYSCORE, BYLEX, REV, LIMIT, WITHSCORES) and its older forms, ZPOPMIN, ZPOPMAX, ZMPOP,
// ZREMRANGEBYRANK, ZREMRANGEBYSCORE, ZREMRANGEBYLEX, ZSCAN (no blocking pops, no ...STORE or set
// algebra). A sorted set's pairs live in its keyspace entry in score order (store/sorted_set.h); a
// write logs one ZsetValue record naming only the members it changed (their final scores, or their
// removal), made under the key's lock stripe (KeyLocks).
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "commands/arg_reader.h"
#include "commands/families.h"
#include "common/glob.h"
#include "common/numbers.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/keys.h"
#include "engine/write_path.h"
#include "store/members.h"
#include "store/sorted_set.h"

namespace prefixd::commands {
namespace {

using store::KeyType;
using store::ScoredView;
using store::ZsetEncoding;

// A sorted-set key as a command reads it: `exists` false for a missing key (no members).
struct Zset {
  bool exists = false;
  ZsetEncoding encoding = ZsetEncoding::kListpack;
  Bytes value;                      // the encoded pairs, which `members` point into
  std::vector<ScoredView> members;  // Redis's order

  // The member's position, or nullopt (a linear search: the value is one flat run).
  std::optional<size_t> Find(std::string_view member) const {
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i].member == member) return i;
    }
    return std::nullopt;
  }
};

// Looks `key` up as Redis's lookupKeyRead/Write (lazy expiry, a touch; a read counts a hit or
// miss). False, with -WRONGTYPE queued, when it holds another type.
bool Load(Context& ctx, std::string_view key, bool read, Zset& out) {
  auto info = LookupKey(ctx, key, /*touch=*/true);
  if (read) (info ? ctx.engine.stats().keyspace_hits : ctx.engine.stats().keyspace_misses).Add();
  if (!info) return true;
  if (info->type != KeyType::kZset) {
    ctx.reply.Error(kWrongType);
    return false;
  }
  out.exists = true;
  out.encoding = static_cast<ZsetEncoding>(info->encoding);
  out.value = std::move(info->value);
  out.members = store::ZsetViews(out.value.view());
  return true;
}

// Logs the final scores of `changed` (added or updated members), leaving `encoding`.
bool StoreScores(Context& ctx, std::string_view key, ZsetEncoding encoding,
                 std::vector<ScoredView> changed) {
  std::sort(changed.begin(), changed.end(), [](const ScoredView& a, const ScoredView& b) {
    return store::ZsetLess(a.score, a.member, b.score, b.member);
  });
  return Mutate(ctx, persist::ZsetValue{std::string(key), static_cast<uint32_t>(encoding),
                                        persist::ZsetValue::kScores,
                                        persist::Blob{{store::EncodeZset(changed)}}})
      .has_value();
}

// Logs the removal of `removed` (every member: the key is deleted).
bool StoreRemoval(Context& ctx, std::string_view key, ZsetEncoding encoding,
                  const std::vector<std::string>& removed) {
  return Mutate(ctx, persist::ZsetValue{std::string(key), static_cast<uint32_t>(encoding),
                                        persist::ZsetValue::kRemove,
                                        persist::Blob{{store::EncodeMembers(removed)}}})
      .has_value();
}

size_t MaxListpackEntries(Context& ctx) {
  return static_cast<size_t>(ctx.engine.settings().Int(Setting::kZsetMaxListpackEntries));
}
size_t MaxListpackValue(Context& ctx) {
  return static_cast<size_t>(ctx.engine.settings().Int(Setting::kZsetMaxListpackValue));
}

// ---- ZADD and ZINCRBY ------------------------------------------------------------------------

struct AddFlags {
  bool nx = false, xx = false, gt = false, lt = false, ch = false, incr = false;
};

// Redis's zaddGenericCommand: options, then score/member pairs (all scores checked first), then
// each pair applied in order as zsetAdd would (a member named twice is added, then updated).
void AddGeneric(Context& ctx, bool incr_command) {
  AddFlags f;
  f.incr = incr_command;
  bool* const flags[] = {&f.nx, &f.xx, &f.ch, &f.incr, &f.gt, &f.lt};
  ArgReader r(ctx, 2);
  while (auto option = r.OneOf({"NX", "XX", "CH", "INCR", "GT", "LT"})) *flags[*option] = true;
  const size_t at = r.position();
  const size_t items = ctx.args.size() - at;
  if (items == 0 || items % 2 != 0) return ctx.reply.Error(errors::kSyntax);
  if (f.incr && items > 2) {
    return ctx.reply.Error(errors::kZaddIncrPairs);
  }
  if (f.nx && f.xx) {
    return ctx.reply.Error(errors::kXxAndNx);
  }
  if ((f.gt && f.nx) || (f.lt && f.nx) || (f.gt && f.lt)) {
    return ctx.reply.Error(errors::kGtLtNx);
  }
  std::vector<double> scores;
  for (size_t i = at; i < ctx.args.size(); i += 2) {
    auto score = store::ParseScore(ctx.args[i]);
    if (!score) return ctx.reply.Error(errors::kNotFloat);
    scores.push_back(*score);
  }
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  Zset zset;
  if (!Load(ctx, key, false, zset)) return;
  const auto nothing = [&] { return f.incr ? ctx.reply.Null() : ctx.reply.Integer(0); };
  const size_t max_entries = MaxListpackEntries(ctx), max_value = MaxListpackValue(ctx);
  if (!zset.exists) {
    if (f.xx) return nothing();
    // Created as the first member allows (Redis 7.0's zaddGenericCommand), converted later.
    zset.encoding = max_entries == 0 || max_value < ctx.args[at + 1].size()
                        ? ZsetEncoding::kSkiplist
                        : ZsetEncoding::kListpack;
  }
  // Members by name, pointing into the stored value or the arguments (both outlive the command);
  // filled from the value only when the command names more than a few members (a lookup of one
  // is a scan, cheaper than hashing every member).
  std::unordered_map<std::string_view, double> current, changed;
  const bool indexed = scores.size() > 4;
  if (indexed) {
    current.reserve(zset.members.size() + scores.size());
    for (const ScoredView& m : zset.members) current.emplace(m.member, m.score);
  }
  size_t size = zset.members.size();
  const auto find = [&](std::string_view member) -> std::optional<double> {
    if (auto it = changed.find(member); it != changed.end()) return it->second;
    if (indexed) {
      auto it = current.find(member);
      return it == current.end() ? std::nullopt : std::optional<double>(it->second);
    }
    auto at = zset.Find(member);
    return at ? std::optional<double>(zset.members[*at].score) : std::nullopt;
  };
  int64_t added = 0, updated = 0, processed = 0;
  double last_score = 0;
  for (size_t j = 0; j < scores.size(); ++j) {
    const std::string_view member = ctx.args[at + 2 * j + 1];
    double score = scores[j];
    const std::optional<double> now = find(member);
    if (now) {
      if (f.nx) continue;
      if (f.incr) {
        score += *now;
        if (std::isnan(score)) return ctx.reply.Error(errors::kNaNScore);
      }
      if ((f.lt && score >= *now) || (f.gt && score <= *now)) continue;
      ++processed, last_score = score;
      if (score == *now) continue;
      ++updated;
    } else {
      if (f.xx) continue;
      // A listpack becomes a skiplist before an insert that would pass either limit.
      if (zset.encoding == ZsetEncoding::kListpack &&
          (size + 1 > max_entries || member.size() > max_value)) {
        zset.encoding = ZsetEncoding::kSkiplist;
      }
      ++added, ++processed, ++size, last_score = score;
    }
    // A listpack holds a score as text, where -0 reads back as 0 (a skiplist keeps the sign).
    if (zset.encoding == ZsetEncoding::kListpack && score == 0) score = 0;
    changed[member] = score;
  }
  if (!changed.empty()) {
    std::vector<ScoredView> pairs;
    pairs.reserve(changed.size());
    for (auto& [member, score] : changed) pairs.push_back({score, member});
    if (!StoreScores(ctx, key, zset.encoding, std::move(pairs))) return;
  }
  if (!f.incr) return ctx.reply.Integer(f.ch ? added + updated : added);
  if (processed == 0) return ctx.reply.Null();
  ctx.reply.Double(last_score);
}

void ZAdd(Context& ctx) { AddGeneric(ctx, false); }
void ZIncrBy(Context& ctx) { AddGeneric(ctx, true); }

// ---- point reads -----------------------------------------------------------------------------

void ZScore(Context& ctx) {
  Zset zset;
  if (!Load(ctx, ctx.args[1], true, zset)) return;
  auto at = zset.Find(ctx.args[2]);
  if (!at) return ctx.reply.Null();
  ctx.reply.Double(zset.members[*at].score);
}

void ZMScore(Context& ctx) {
  Zset zset;
  if (!Load(ctx, ctx.args[1], true, zset)) return;
  ctx.reply.ArrayLen(ctx.args.size() - 2);
  for (size_t i = 2; i < ctx.args.size(); ++i) {
    auto at = zset.Find(ctx.args[i]);
    if (at) {
      ctx.reply.Double(zset.members[*at].score);
    } else {
      ctx.reply.Null();
    }
  }
}

void ZCard(Context& ctx) {
  Zset zset;
  if (!Load(ctx, ctx.args[1], true, zset)) return;
  ctx.reply.Integer(static_cast<int64_t>(zset.members.size()));
}

void Rank(Context& ctx, bool reverse) {
  Zset zset;
  if (!Load(ctx, ctx.args[1], true, zset)) return;
  auto at = zset.Find(ctx.args[2]);
  if (!at) return ctx.reply.Null();
  ctx.reply.Integer(static_cast<int64_t>(reverse ? zset.members.size() - 1 - *at : *at));
}

void ZRank(Context& ctx) { Rank(ctx, false); }
void ZRevRank(Context& ctx) { Rank(ctx, true); }

// ---- ranges ----------------------------------------------------------------------------------

enum class RangeKind : uint8_t { kAuto, kRank, kScore, kLex };
enum class Direction : uint8_t { kAuto, kForward, kReverse };

// A parsed range of any kind: rank bounds, score bounds or lex bounds.
struct Range {
  RangeKind kind = RangeKind::kRank;
  int64_t start = 0, stop = 0;
  store::ScoreBound min_score, max_score;
  store::LexBound min_lex, max_lex;

  bool AboveMin(const ScoredView& m) const {
    return kind == RangeKind::kScore ? store::AboveMin(m.score, min_score)
                                     : store::AboveMin(m.member, min_lex);
  }
  bool BelowMax(const ScoredView& m) const {
    return kind == RangeKind::kScore ? store::BelowMax(m.score, max_score)
                                     : store::BelowMax(m.member, max_lex);
  }
};

bool Fail(Context& ctx, std::string_view error) {
  ctx.reply.Error(error);
  return false;
}

// Parses the two bounds of `kind` (`min_text` then `max_text`). False with the error queued.
bool ParseRange(Context& ctx, RangeKind kind, std::string_view min_text, std::string_view max_text,
                Range& range) {
  range.kind = kind;
  if (kind == RangeKind::kRank) {
    auto start = ParseInt64(min_text), stop = ParseInt64(max_text);
    if (!start || !stop) return Fail(ctx, errors::kNotInteger);
    range.start = *start, range.stop = *stop;
    return true;
  }
  if (kind == RangeKind::kScore) {
    auto min = store::ParseScoreBound(min_text), max = store::ParseScoreBound(max_text);
    if (!min || !max) return Fail(ctx, errors::kNotFloatRange);
    range.min_score = *min, range.max_score = *max;
    return true;
  }
  auto min = store::ParseLexBound(min_text), max = store::ParseLexBound(max_text);
  if (!min || !max) return Fail(ctx, errors::kNotLexRange);
  range.min_lex = std::move(*min), range.max_lex = std::move(*max);
  return true;
}

// Redis's start/stop clamping for ranks: the inclusive range within `size`, or nullopt.
std::optional<std::pair<size_t, size_t>> RankSpan(int64_t start, int64_t stop, size_t size) {
  const auto len = static_cast<int64_t>(size);
  if (start < 0) start += len;
  if (stop < 0) stop += len;
  if (start < 0) start = 0;
  if (start > stop || start >= len) return std::nullopt;
  if (stop >= len) stop = len - 1;
  return std::make_pair(static_cast<size_t>(start), static_cast<size_t>(stop));
}

// The positions `range` selects, in reply order: ranks counted from the end when `reverse`;
// score and lex ranges walked from the first member in range (from the last when `reverse`),
// `offset` members skipped (a negative offset skips them all) and at most `limit` kept (negative:
// no limit), as Redis's genericZrangeby*Command.
std::vector<size_t> Select(const Zset& zset, const Range& range, bool reverse, int64_t offset,
                           int64_t limit) {
  std::vector<size_t> out;
  const size_t n = zset.members.size();
  if (range.kind == RangeKind::kRank) {
    auto span = RankSpan(range.start, range.stop, n);
    if (!span) return out;
    for (size_t i = span->first; i <= span->second; ++i) out.push_back(reverse ? n - 1 - i : i);
    return out;
  }
  if (offset < 0 || (offset > 0 && static_cast<uint64_t>(offset) >= n)) return out;
  // Forward: from the first member above the minimum until one passes the maximum; reverse: from
  // the last member below the maximum until one falls under the minimum.
  const auto at = [&](size_t k) -> const ScoredView& {
    return zset.members[reverse ? n - 1 - k : k];
  };
  size_t k = 0;
  while (k < n && !(reverse ? range.BelowMax(at(k)) : range.AboveMin(at(k)))) ++k;
  k += std::min(static_cast<size_t>(offset), n - k);  // skipped without a look, as Redis
  for (; k < n && limit != 0; ++k) {
    if (!(reverse ? range.AboveMin(at(k)) : range.BelowMax(at(k)))) break;
    out.push_back(reverse ? n - 1 - k : k);
    if (limit > 0) --limit;
  }
  return out;
}

void ReplyRange(Context& ctx, const Zset& zset, const std::vector<size_t>& picked,
                bool withscores) {
  const bool pairs = withscores && ctx.reply.protocol() >= 3;
  ctx.reply.ArrayLen(withscores && !pairs ? 2 * picked.size() : picked.size());
  for (size_t i : picked) {
    if (pairs) ctx.reply.ArrayLen(2);
    ctx.reply.Bulk(zset.members[i].member);
    if (withscores) ctx.reply.Double(zset.members[i].score);
  }
}

// Redis's zrangeGenericCommand: the key, two bounds, then options; a preset kind or direction
// (the older commands) refuses the option that would set it again.
void RangeGeneric(Context& ctx, RangeKind kind, Direction direction) {
  bool withscores = false;
  int64_t offset = 0, limit = -1;
  for (ArgReader r(ctx, 4); r.more();) {
    if (r.Keyword("WITHSCORES")) {
      withscores = true;
    } else if (r.Keyword("LIMIT", 2)) {
      auto o = r.Integer();
      if (!o) return;
      auto l = r.Integer();
      if (!l) return;
      offset = *o, limit = *l;
    } else if (direction == Direction::kAuto && r.Keyword("REV")) {
      direction = Direction::kReverse;
    } else if (kind == RangeKind::kAuto && r.Keyword("BYLEX")) {
      kind = RangeKind::kLex;
    } else if (kind == RangeKind::kAuto && r.Keyword("BYSCORE")) {
      kind = RangeKind::kScore;
    } else {
      return ctx.reply.Error(errors::kSyntax);
    }
  }
  if (direction == Direction::kAuto) direction = Direction::kForward;
  if (kind == RangeKind::kAuto) kind = RangeKind::kRank;
  // Redis tells an explicit LIMIT by its count: "LIMIT 0 -1" passes as no limit at all.
  if (limit != -1 && kind == RangeKind::kRank) {
    return ctx.reply.Error(errors::kLimitNeedsByScoreOrLex);
  }
  if (withscores && kind == RangeKind::kLex) {
    return ctx.reply.Error(errors::kWithScoresByLex);
  }
  const bool reverse = direction == Direction::kReverse;
  // Score and lex ranges are given as max, min when reversed.
  const bool swap = reverse && kind != RangeKind::kRank;
  Range range;
  if (!ParseRange(ctx, kind, ctx.args[swap ? 3 : 2], ctx.args[swap ? 2 : 3], range)) return;
  Zset zset;
  if (!Load(ctx, ctx.args[1], true, zset)) return;
  ReplyRange(ctx, zset, Select(zset, range, reverse, offset, limit), withscores);
}

void ZRange(Context& ctx) { RangeGeneric(ctx, RangeKind::kAuto, Direction::kAuto); }
void ZRevRange(Context& ctx) { RangeGeneric(ctx, RangeKind::kRank, Direction::kReverse); }
void ZRangeByScore(Context& ctx) { RangeGeneric(ctx, RangeKind::kScore, Direction::kForward); }
void ZRevRangeByScore(Context& ctx) { RangeGeneric(ctx, RangeKind::kScore, Direction::kReverse); }
void ZRangeByLex(Context& ctx) { RangeGeneric(ctx, RangeKind::kLex, Direction::kForward); }
void ZRevRangeByLex(Context& ctx) { RangeGeneric(ctx, RangeKind::kLex, Direction::kReverse); }

void Count(Context& ctx, RangeKind kind) {
  Range range;
  if (!ParseRange(ctx, kind, ctx.args[2], ctx.args[3], range)) return;
  Zset zset;
  if (!Load(ctx, ctx.args[1], true, zset)) return;
  ctx.reply.Integer(static_cast<int64_t>(Select(zset, range, false, 0, -1).size()));
}

void ZCount(Context& ctx) { Count(ctx, RangeKind::kScore); }
void ZLexCount(Context& ctx) { Count(ctx, RangeKind::kLex); }

// ---- removals --------------------------------------------------------------------------------

// Removes the members at `picked` and replies how many went.
void RemoveAt(Context& ctx, std::string_view key, const Zset& zset,
              const std::vector<size_t>& picked) {
  std::vector<std::string> removed;
  removed.reserve(picked.size());
  for (size_t i : picked) removed.emplace_back(zset.members[i].member);
  if (!removed.empty() && !StoreRemoval(ctx, key, zset.encoding, removed)) return;
  ctx.reply.Integer(static_cast<int64_t>(removed.size()));
}

void ZRem(Context& ctx) {
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  Zset zset;
  if (!Load(ctx, key, false, zset)) return;
  std::vector<size_t> picked;
  for (size_t i = 2; i < ctx.args.size(); ++i) {
    auto at = zset.Find(ctx.args[i]);
    if (at && std::find(picked.begin(), picked.end(), *at) == picked.end()) picked.push_back(*at);
  }
  RemoveAt(ctx, key, zset, picked);
}

void RemoveRange(Context& ctx, RangeKind kind) {
  Range range;
  if (!ParseRange(ctx, kind, ctx.args[2], ctx.args[3], range)) return;
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  Zset zset;
  if (!Load(ctx, key, false, zset)) return;
  RemoveAt(ctx, key, zset, Select(zset, range, false, 0, -1));
}

void ZRemRangeByRank(Context& ctx) { RemoveRange(ctx, RangeKind::kRank); }
void ZRemRangeByScore(Context& ctx) { RemoveRange(ctx, RangeKind::kScore); }
void ZRemRangeByLex(Context& ctx) { RemoveRange(ctx, RangeKind::kLex); }

// ZPOPMIN and ZPOPMAX: `count` members off the low or high end, each with its score; a flat array
// in RESP2 or without a count, pairs in RESP3 with one (Redis 7.0).
// Takes up to `count` members off the low (or `max`: high) end of `zset`, logged as one removal;
// the positions taken, in reply order, or nullopt when the write was refused (error queued).
std::optional<std::vector<size_t>> PopEnd(Context& ctx, std::string_view key, const Zset& zset,
                                          bool max, uint64_t count) {
  const size_t n = zset.members.size();
  const size_t take = static_cast<size_t>(std::min<uint64_t>(count, n));
  std::vector<size_t> picked;
  std::vector<std::string> removed;
  for (size_t k = 0; k < take; ++k) {
    picked.push_back(max ? n - 1 - k : k);
    removed.emplace_back(zset.members[picked.back()].member);
  }
  if (!StoreRemoval(ctx, key, zset.encoding, removed)) return std::nullopt;
  return picked;
}

void Pop(Context& ctx, bool max) {
  if (ctx.args.size() > 3) return ctx.reply.Error(errors::kSyntax);
  int64_t count = 1;
  if (ctx.args.size() == 3) {
    auto n = ArgReader(ctx, 2).Integer(0, INT64_MAX, errors::kNotPositive);
    if (!n) return;
    count = *n;
  }
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  Zset zset;
  if (!Load(ctx, key, false, zset)) return;  // a count of 0 still checks the type (7.0.15)
  if (!zset.exists || count == 0) return ctx.reply.ArrayLen(0);
  auto picked = PopEnd(ctx, key, zset, max, static_cast<uint64_t>(count));
  if (!picked) return;
  const bool pairs = ctx.args.size() == 3 && ctx.reply.protocol() >= 3;
  ctx.reply.ArrayLen(pairs ? picked->size() : 2 * picked->size());
  for (size_t i : *picked) {
    if (pairs) ctx.reply.ArrayLen(2);
    ctx.reply.Bulk(zset.members[i].member);
    ctx.reply.Double(zset.members[i].score);
  }
}

// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]: pops from the first of the keys that holds
// members; [key, [[member, score], ...]], or a null array when none does (Redis 7.0).
void ZMPop(Context& ctx) {
  const auto numkeys = ArgReader(ctx, 1).Integer(1, INT64_MAX, errors::kNumKeysNotPositive);
  if (!numkeys) return;
  const uint64_t where_at = 2 + static_cast<uint64_t>(*numkeys);
  if (where_at >= ctx.args.size()) return ctx.reply.Error(errors::kSyntax);
  ArgReader r(ctx, where_at);
  const auto where = r.OneOf({"MIN", "MAX"});
  if (!where) return ctx.reply.Error(errors::kSyntax);
  std::optional<int64_t> count;
  while (r.more()) {
    if (count || r.remaining() < 2 || !r.Keyword("COUNT")) return ctx.reply.Error(errors::kSyntax);
    count = r.Integer(1, std::numeric_limits<int64_t>::max(), errors::kCountNotPositive);
    if (!count) return;
  }
  std::vector<std::string_view> keys;
  for (uint64_t i = 2; i < where_at; ++i) keys.push_back(ctx.args[i]);
  KeyLocks lock(ctx.engine, keys);
  for (std::string_view key : keys) {
    Zset zset;
    if (!Load(ctx, key, false, zset)) return;
    if (!zset.exists) continue;
    auto picked = PopEnd(ctx, key, zset, *where == 1, static_cast<uint64_t>(count.value_or(1)));
    if (!picked) return;
    // Replicas get the pop of the key it took from, as Redis 7.0 sends it: with the count taken.
    const std::string taken = std::to_string(picked->size());
    ctx.propagate.Send({*where == 1 ? std::string_view("ZPOPMAX") : "ZPOPMIN", key, taken});
    ctx.reply.ArrayLen(2);
    ctx.reply.Bulk(key);
    ctx.reply.ArrayLen(picked->size());
    for (size_t i : *picked) {
      ctx.reply.ArrayLen(2);
      ctx.reply.Bulk(zset.members[i].member);
      ctx.reply.Double(zset.members[i].score);
    }
    return;
  }
  ctx.reply.NullArray();
}

void ZPopMin(Context& ctx) { Pop(ctx, false); }
void ZPopMax(Context& ctx) { Pop(ctx, true); }

// ---- ZSCAN -----------------------------------------------------------------------------------

// A score as a listpack holds it and ZSCAN replies it (Redis's d2string): integral values within
// 2^52 as integers, the rest as %.17g, inf and -inf by name.
std::string ScanScore(double score) {
  if (score == 0) return std::signbit(score) ? "-0" : "0";
  if (score > -4503599627370495.0 && score < 4503599627370496.0 &&
      score == static_cast<double>(static_cast<int64_t>(score))) {
    return std::to_string(static_cast<int64_t>(score));
  }
  return FormatDouble(score);
}

// A listpack is replied whole (cursor 0), as Redis does. A skiplist is walked in the order of
// its members' hashes: the cursor is the next hash to visit, so a member present throughout is
// returned whatever changes between calls (members sharing a hash go out together).
void ZScan(Context& ctx) {
  auto cursor = ParseScanCursor(ctx.args[2]);
  if (!cursor) return ctx.reply.Error(errors::kInvalidCursor);
  Zset zset;
  if (!Load(ctx, ctx.args[1], true, zset)) return;
  if (!zset.exists) return ReplyEmptyScan(ctx);
  auto options = ReadScanOptions(ctx, 3, /*with_type=*/false);
  if (!options) return;
  const std::string_view pattern = options->pattern;
  const int64_t count = options->count;
  std::vector<std::pair<uint64_t, size_t>> order;  // (hash, position)
  uint64_t next = 0;
  if (zset.encoding == ZsetEncoding::kListpack) {
    for (size_t i = 0; i < zset.members.size(); ++i) order.emplace_back(0, i);
  } else {
    for (size_t i = 0; i < zset.members.size(); ++i) {
      const std::string_view m = zset.members[i].member;
      const uint64_t h = XXH3_64bits(m.data(), m.size());
      if (h >= *cursor) order.emplace_back(h, i);
    }
    std::sort(order.begin(), order.end());
    size_t end = std::min(order.size(), static_cast<size_t>(count));
    while (end > 0 && end < order.size() && order[end].first == order[end - 1].first) ++end;
    if (end < order.size()) next = order[end].first;
    order.resize(end);
  }
  std::vector<size_t> kept;
  for (const auto& [hash, i] : order) {
    if (MatchesEverything(pattern) || GlobMatch(pattern, zset.members[i].member)) kept.push_back(i);
  }
  ctx.reply.ArrayLen(2);
  ctx.reply.Bulk(std::to_string(next));
  ctx.reply.ArrayLen(2 * kept.size());
  for (size_t i : kept) {
    ctx.reply.Bulk(zset.members[i].member);
    ctx.reply.Bulk(ScanScore(zset.members[i].score));
  }
}

}  // namespace

// ---- the table -------------------------------------------------------------------------------

void RegisterZsetCommands(Registry& r) {
  const OneKeyFamily zset(r, "sorted-set", kAclSortedSet);
  const uint32_t write = kWrite | kDenyOom | kFast;
  const uint32_t read = kReadonly | kFast;
  const Arg key = KeyArg("key"), member = StrArg("member");
  const Arg min = TypedArg("min", ArgType::kDouble), max = TypedArg("max", ArgType::kDouble);
  const Arg lex_min = StrArg("min"), lex_max = StrArg("max");
  const Arg withscores = Optional(TokenArg("withscores", "WITHSCORES"));
  const Arg limit =
      BlockArg("offset_count", kArgOptional, {IntArg("offset"), IntArg("count")}, "LIMIT");
  const std::string n = "O(N) in the sorted set's size (one flat value)";

  zset("zadd", -4, write, "<key> [NX|XX] [GT|LT] [CH] [INCR] <score> <member> [score member ...]",
       "Adds members with scores, or updates their scores; how many were added (or changed).", ZAdd,
       n, "1.2.0", kKeyRW | kKeyUpdate,
       {key,
        OneOfArg("condition", kArgOptional, {TokenArg("nx", "NX"), TokenArg("xx", "XX")}, "3.0.2"),
        OneOfArg("comparison", kArgOptional, {TokenArg("gt", "GT"), TokenArg("lt", "LT")}, "6.2.0"),
        Optional(TokenArg("change", "CH", "3.0.2")),
        Optional(TokenArg("increment", "INCR", "3.0.2")),
        BlockArg("score_member", kArgMultiple,
                 {TypedArg("score", ArgType::kDouble), StrArg("member")})});
  zset("zincrby", 4, write, "<key> <increment> <member>",
       "Adds to a member's score (a missing member starts at 0); the new score.", ZIncrBy, n,
       "1.2.0", kKeyRW | kKeyAccess | kKeyUpdate, {key, IntArg("increment"), member});
  zset("zscore", 3, read, "<key> <member>", "A member's score, or nil.", ZScore, n, "1.2.0",
       kKeyRO | kKeyAccess, {key, member});
  zset("zmscore", -3, read, "<key> <member> [member ...]", "Each member's score, or nil.", ZMScore,
       n, "6.2.0", kKeyRO | kKeyAccess, {key, Many(member)});
  zset("zcard", 2, read, "<key>", "The number of members of a sorted set.", ZCard, n, "1.2.0",
       kKeyRO, {key});
  zset("zcount", 4, read, "<key> <min> <max>", "How many members score within min and max.", ZCount,
       n, "2.0.0", kKeyRO | kKeyAccess, {key, min, max});
  zset("zlexcount", 4, read, "<key> <min> <max>",
       "How many members lie between two members (- and + for the ends).", ZLexCount, n, "2.8.9",
       kKeyRO | kKeyAccess, {key, lex_min, lex_max});
  zset("zrank", 3, read, "<key> <member>", "A member's rank by ascending score, or nil.", ZRank, n,
       "2.0.0", kKeyRO | kKeyAccess, {key, member});
  zset("zrevrank", 3, read, "<key> <member>", "A member's rank by descending score, or nil.",
       ZRevRank, n, "2.0.0", kKeyRO | kKeyAccess, {key, member});
  zset("zrem", -3, kWrite | kFast, "<key> <member> [member ...]",
       "Removes members; how many were there.", ZRem, n, "1.2.0", kKeyRW | kKeyDelete,
       {key, Many(member)});
  zset("zrange", -4, kReadonly,
       "<key> <start> <stop> [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]",
       "Members by rank, score or lex range, in either direction.", ZRange, n, "1.2.0",
       kKeyRO | kKeyAccess,
       {key, StrArg("start"), StrArg("stop"),
        OneOfArg("sortby", kArgOptional,
                 {TokenArg("byscore", "BYSCORE"), TokenArg("bylex", "BYLEX")}, "6.2.0"),
        Optional(TokenArg("rev", "REV", "6.2.0")), Tokened(limit, "LIMIT", "6.2.0"), withscores});
  zset("zrevrange", -4, kReadonly, "<key> <start> <stop> [WITHSCORES]",
       "Members by rank, highest score first.", ZRevRange, n, "1.2.0", kKeyRO | kKeyAccess,
       {key, IntArg("start"), IntArg("stop"), withscores});
  zset("zrangebyscore", -4, kReadonly, "<key> <min> <max> [WITHSCORES] [LIMIT offset count]",
       "Members scoring within min and max, lowest first.", ZRangeByScore, n, "1.0.5",
       kKeyRO | kKeyAccess, {key, min, max, Tokened(withscores, "WITHSCORES", "2.0.0"), limit});
  zset("zrevrangebyscore", -4, kReadonly, "<key> <max> <min> [WITHSCORES] [LIMIT offset count]",
       "Members scoring within max and min, highest first.", ZRevRangeByScore, n, "2.2.0",
       kKeyRO | kKeyAccess, {key, max, min, withscores, limit});
  zset("zrangebylex", -4, kReadonly, "<key> <min> <max> [LIMIT offset count]",
       "Members between two members, in order.", ZRangeByLex, n, "2.8.9", kKeyRO | kKeyAccess,
       {key, lex_min, lex_max, limit});
  zset("zrevrangebylex", -4, kReadonly, "<key> <max> <min> [LIMIT offset count]",
       "Members between two members, in reverse order.", ZRevRangeByLex, n, "2.8.9",
       kKeyRO | kKeyAccess, {key, lex_max, lex_min, limit});
  zset("zpopmin", -2, kWrite | kFast, "<key> [count]",
       "Removes and returns the lowest-scoring members with their scores.", ZPopMin, n, "5.0.0",
       kKeyRW | kKeyAccess | kKeyDelete, {key, IntArg("count", kArgOptional)});
  zset("zpopmax", -2, kWrite | kFast, "<key> [count]",
       "Removes and returns the highest-scoring members with their scores.", ZPopMax, n, "5.0.0",
       kKeyRW | kKeyAccess | kKeyDelete, {key, IntArg("count", kArgOptional)});
  {
    CommandSpec s = AsRedis(
        MakeSpec("sorted-set", 0, "zmpop", -4, kWrite | kMovableKeys,
                 "<numkeys> <key> [key ...] MIN|MAX [COUNT count]",
                 "Removes and returns members with their scores from the first non-empty key.",
                 ZMPop, n),
        "7.0.0", kAclSortedSet, {},
        {IntArg("numkeys"), Many(KeyArg("key")),
         OneOfArg("where", 0, {TokenArg("min", "MIN"), TokenArg("max", "MAX")}),
         Tokened(IntArg("count", kArgOptional), "COUNT")});
    KeySpec keys;
    keys.flags = kKeyRW | kKeyAccess | kKeyDelete, keys.index = 1, keys.by_keynum = true;
    s.key_specs = {keys};
    r.Add(std::move(s));
  }
  zset("zremrangebyrank", 4, kWrite, "<key> <start> <stop>",
       "Removes the members ranked start to stop; how many went.", ZRemRangeByRank, n, "2.0.0",
       kKeyRW | kKeyDelete, {key, IntArg("start"), IntArg("stop")});
  zset("zremrangebyscore", 4, kWrite, "<key> <min> <max>",
       "Removes the members scoring within min and max; how many went.", ZRemRangeByScore, n,
       "1.2.0", kKeyRW | kKeyDelete, {key, min, max});
  zset("zremrangebylex", 4, kWrite, "<key> <min> <max>",
       "Removes the members between two members; how many went.", ZRemRangeByLex, n, "2.8.9",
       kKeyRW | kKeyDelete, {key, lex_min, lex_max});
  zset("zscan", -3, kReadonly, "<key> <cursor> [MATCH pattern] [COUNT count]",
       "Walks a sorted set's members and scores a step at a time.", ZScan, n, "2.8.0",
       kKeyRO | kKeyAccess,
       {key, IntArg("cursor"),
        Tokened(TypedArg("pattern", ArgType::kPattern, kArgOptional), "MATCH"),
        Tokened(IntArg("count", kArgOptional), "COUNT")},
       {"nondeterministic_output"});
}

}  // namespace prefixd::commands
