// Redis's consumer-group commands on streams, with Redis 7.0.15's replies and errors: XGROUP
// (CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER), XREADGROUP, XACK, XPENDING, XCLAIM,
// XAUTOCLAIM, XINFO (STREAM, GROUPS, CONSUMERS). A change to a stream's groups is one StreamValue
// record of the groups whole; a read-modify-write holds its key's lock stripe (KeyLocks).
// Just over 900 lines by choice: every command here works through the same group lookup and
// pending-entry helpers, which a split would have to share through a private header.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commands/arg_reader.h"
#include "commands/families.h"
#include "commands/stream_shared.h"
#include "common/ascii.h"
#include "common/clock.h"
#include "common/numbers.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/keys.h"
#include "engine/write_path.h"
#include "store/stream.h"

namespace prefixd::commands::stream {
namespace {

// Lets go of the command's handle on the value first (`s`), so that the groups can be written
// into the buffer's room (Keyspace::EditValue); nothing may read `s` after.
bool LogGroups(Context& ctx, std::string_view key, const StreamGroups& groups, Loaded& s) {
  s = Loaded{};
  return Log(ctx, key, persist::StreamValue::kGroups, 0, store::EncodeStreamGroups(groups));
}
// The same for a command whose reply quotes the value's entries: the reply is written first,
// `release` lets go of the values, then each key's groups are logged; a refused record replaces
// the reply with its error.
bool ReplyThenLogGroups(
    Context& ctx, const std::vector<std::pair<std::string_view, const StreamGroups*>>& changes,
    const std::function<void()>& reply, const std::function<void()>& release) {
  const protocol::ReplyWriter::Mark mark = ctx.reply.GetMark();
  reply();
  release();
  for (const auto& [key, groups] : changes) {
    persist::Blob blob{{store::EncodeStreamGroups(*groups)}};
    MutationResult result =
        WritePath(ctx.engine)
            .Apply(static_cast<size_t>(ctx.client.db.load()),
                   persist::StreamValue{std::string(key), persist::StreamValue::kGroups, 0,
                                        std::move(blob)});
    if (!result.outcome) {
      ctx.reply.RewindTo(mark);
      ctx.reply.Error(result.error);
      return false;
    }
    ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, result.lsn);
  }
  return true;
}

// ---- lag and entries-read (Redis 7.0's estimates) -------------------------------------------

bool HasTombstones(const store::StreamMeta& m, StreamId from) {
  if (m.length == 0 || m.max_deleted == StreamId{}) return false;
  return from <= m.max_deleted;
}

int64_t DistanceFromFirstEver(const store::StreamMeta& m, StreamId id) {
  if (m.entries_added == 0) return 0;
  if (m.length == 0 && id <= m.last) return static_cast<int64_t>(m.entries_added);
  if (id == m.last) return static_cast<int64_t>(m.entries_added);
  if (id > m.last) return store::kEntriesReadUnknown;
  if (m.max_deleted == StreamId{} || m.max_deleted < m.first) {
    if (id < m.first) return static_cast<int64_t>(m.entries_added - m.length);
    if (id == m.first) return static_cast<int64_t>(m.entries_added - m.length + 1);
  }
  return store::kEntriesReadUnknown;
}

void ReplyLag(Context& ctx, const store::StreamMeta& m, const StreamGroup& g) {
  if (m.entries_added == 0) return ctx.reply.Integer(0);
  if (g.entries_read != store::kEntriesReadUnknown && !HasTombstones(m, g.last_delivered)) {
    return ctx.reply.Integer(static_cast<int64_t>(m.entries_added) - g.entries_read);
  }
  const int64_t read = DistanceFromFirstEver(m, g.last_delivered);
  if (read == store::kEntriesReadUnknown) return ctx.reply.Null();
  ctx.reply.Integer(static_cast<int64_t>(m.entries_added) - read);
}

void ReplyEntriesRead(Context& ctx, const StreamGroup& g) {
  if (g.entries_read == store::kEntriesReadUnknown) return ctx.reply.Null();
  ctx.reply.Integer(g.entries_read);
}

// ---- XGROUP ------------------------------------------------------------------------------------

// The group `name` among `key`'s `groups`, or nullptr with NOGROUP queued.
StreamGroup* FindGroup(Context& ctx, StreamGroups& groups, std::string_view key,
                       std::string_view name) {
  auto it = groups.find(std::string(name));
  if (it == groups.end()) {
    ctx.reply.Error(errors::NoGroup(key, name));
    return nullptr;
  }
  return &it->second;
}

// CREATE and SETID: `id` or `$`, then [MKSTREAM] (CREATE) [ENTRIESREAD n].
void GroupSet(Context& ctx, bool create) {
  const std::string_view key = ctx.args[2], name = ctx.args[3], id_text = ctx.args[4];
  bool mkstream = false;
  int64_t entries_read = store::kEntriesReadUnknown;
  for (ArgReader r(ctx, 5); r.more();) {
    if (create && r.Keyword("MKSTREAM")) {
      mkstream = true;
    } else if (r.Keyword("ENTRIESREAD", 1)) {
      auto n = r.Integer();
      if (!n) return;
      if (*n < 0 && *n != store::kEntriesReadUnknown) {
        return ctx.reply.Error(errors::kEntriesReadNegative);
      }
      entries_read = *n;
    } else {
      return ctx.reply.Error(errors::kSyntax);
    }
  }
  KeyLocks lock(ctx.engine, key);
  Loaded s;
  if (!Load(ctx, key, false, s)) return;
  if (!s.exists && !(create && mkstream)) return ctx.reply.Error(errors::kXGroupNeedsKey);
  const Bytes empty = store::EmptyStream();
  const StreamReader r = s.exists ? s.r() : *StreamReader::Open(empty.view());
  StreamId id;
  if (id_text == "$") {
    id = r.meta().last;
  } else {
    auto parsed = IdArgument(ctx, id_text, 0);  // "-" and "+" allowed, as Redis
    if (!parsed) return;
    id = *parsed;
  }
  StreamGroups groups = r.Groups();
  if (create) {
    if (groups.count(std::string(name)) > 0) {
      return ctx.reply.Error(errors::kBusyGroup);
    }
    StreamGroup& g = groups[std::string(name)];
    g.last_delivered = id, g.entries_read = entries_read;
  } else {
    StreamGroup* g = FindGroup(ctx, groups, key, name);
    if (g == nullptr) return;
    g->last_delivered = id, g->entries_read = entries_read;
  }
  if (!s.exists) {
    // MKSTREAM: the empty stream and its group in one record.
    const Bytes whole =
        store::StreamReplaceGroups(empty.view(), store::EncodeStreamGroups(groups).view());
    if (!Log(ctx, key, persist::StreamValue::kWhole, 0, whole)) return;
  } else if (!LogGroups(ctx, key, groups, s)) {
    return;
  }
  ctx.reply.Simple("OK");
}
void XGroupCreate(Context& ctx) { GroupSet(ctx, true); }
void XGroupSetId(Context& ctx) { GroupSet(ctx, false); }

// DESTROY, CREATECONSUMER, DELCONSUMER: the stream and its groups, or an error queued.
bool LoadGroups(Context& ctx, std::string_view key, Loaded& s, StreamGroups& groups) {
  if (!Load(ctx, key, false, s)) return false;
  if (!s.exists) {
    ctx.reply.Error(errors::kXGroupNeedsKey);
    return false;
  }
  groups = s.r().Groups();
  return true;
}

void XGroupDestroy(Context& ctx) {
  const std::string_view key = ctx.args[2];
  KeyLocks lock(ctx.engine, key);
  Loaded s;
  StreamGroups groups;
  if (!LoadGroups(ctx, key, s, groups)) return;
  if (groups.erase(std::string(ctx.args[3])) == 0) return ctx.reply.Integer(0);
  if (LogGroups(ctx, key, groups, s)) ctx.reply.Integer(1);
}

void XGroupCreateConsumer(Context& ctx) {
  const std::string_view key = ctx.args[2], group = ctx.args[3];
  KeyLocks lock(ctx.engine, key);
  Loaded s;
  StreamGroups groups;
  if (!LoadGroups(ctx, key, s, groups)) return;
  StreamGroup* g = FindGroup(ctx, groups, key, group);
  if (g == nullptr) return;
  auto [c, created] = g->consumers.try_emplace(std::string(ctx.args[4]));
  if (!created) return ctx.reply.Integer(0);
  c->second.seen_ms = static_cast<uint64_t>(CommandClock::WallMs());
  if (LogGroups(ctx, key, groups, s)) ctx.reply.Integer(1);
}

void XGroupDelConsumer(Context& ctx) {
  const std::string_view key = ctx.args[2], group = ctx.args[3];
  const std::string consumer(ctx.args[4]);
  KeyLocks lock(ctx.engine, key);
  Loaded s;
  StreamGroups groups;
  if (!LoadGroups(ctx, key, s, groups)) return;
  StreamGroup* g = FindGroup(ctx, groups, key, group);
  if (g == nullptr) return;
  if (g->consumers.erase(consumer) == 0) return ctx.reply.Integer(0);
  int64_t pending = 0;
  for (auto p = g->pending.begin(); p != g->pending.end();) {
    if (p->second.consumer == consumer) {
      p = g->pending.erase(p), ++pending;
    } else {
      ++p;
    }
  }
  if (LogGroups(ctx, key, groups, s)) ctx.reply.Integer(pending);
}

// ---- XREADGROUP --------------------------------------------------------------------------------

void XReadGroup(Context& ctx) {
  auto a = ParseRead(ctx, true);
  if (!a) return;
  for (std::string_view id : a->ids) {
    if (id == "$") {
      return ctx.reply.Error(errors::kXReadGroupDollarId);
    }
  }
  std::vector<std::optional<StreamId>> history(a->keys.size());  // nullopt: `>`
  for (size_t k = 0; k < a->keys.size(); ++k) {
    if (a->ids[k] == ">") continue;
    auto id = IdArgument(ctx, a->ids[k], 0);
    if (!id) return;
    history[k] = *id;
  }
  KeyLocks lock(ctx.engine, std::span<const std::string_view>(a->keys));
  // Every key and group is checked before anything changes, as Redis does.
  std::vector<Loaded> loaded(a->keys.size());
  std::vector<StreamGroups> groups(a->keys.size());
  for (size_t k = 0; k < a->keys.size(); ++k) {
    if (!Load(ctx, a->keys[k], false, loaded[k], /*index=*/false)) return;
    if (loaded[k].exists) groups[k] = loaded[k].Groups();
    if (!loaded[k].exists || groups[k].count(std::string(a->group)) == 0) {
      return ctx.reply.Error(errors::NoKeyOrGroupInXReadGroup(a->keys[k], a->group));
    }
  }
  const uint64_t now = static_cast<uint64_t>(CommandClock::WallMs());
  const std::string consumer(a->consumer);
  // What each key answers: entries (no entry: a pending id whose entry was deleted), found
  // through the values' seek indexes.
  struct Item {
    StreamId id;
    std::optional<store::StreamEntryView> entry;
  };
  std::vector<std::vector<Item>> items(a->keys.size());
  size_t answering = 0;
  for (size_t k = 0; k < a->keys.size(); ++k) {
    const std::string_view value = loaded[k].value.view();
    const store::StreamMeta& meta = loaded[k].meta;
    StreamGroup& g = groups[k][std::string(a->group)];
    g.consumers[consumer].seen_ms = now;
    const size_t limit = a->count > 0 ? static_cast<size_t>(a->count) : SIZE_MAX;
    if (history[k]) {
      ++answering;  // a history read answers even when empty
      // Each pending entry by its id: a seek each with the index, else one walk indexing every
      // entry (a small value).
      std::optional<StreamReader> small;
      if (!store::StreamHasSeekIndex(value)) small = StreamReader::Open(value);
      const auto entry_of = [&](StreamId id) -> std::optional<store::StreamEntryView> {
        if (!small) {
          auto found = store::StreamEntriesBetween(value, id, id, 1, false);
          return found.empty() ? std::nullopt : std::optional(found[0]);
        }
        const size_t at = small->LowerBound(id);
        if (at == small->entries().size() || small->entries()[at].id != id) return std::nullopt;
        return small->entries()[at];
      };
      auto from = Next(*history[k]);
      for (auto it = from ? g.pending.lower_bound(*from) : g.pending.end();
           it != g.pending.end() && items[k].size() < limit; ++it) {
        if (it->second.consumer != consumer) continue;
        items[k].push_back({it->first, entry_of(it->first)});
        it->second.delivery_ms = now, it->second.deliveries += 1;
      }
      continue;
    }
    auto from = Next(g.last_delivered);
    const auto entries = from ? store::StreamEntriesBetween(value, *from, StreamId::Max(),
                                                            limit == SIZE_MAX ? 0 : limit, false)
                              : std::vector<store::StreamEntryView>{};
    for (const store::StreamEntryView& e : entries) {
      const StreamId id = e.id;
      if (g.entries_read != store::kEntriesReadUnknown && !HasTombstones(meta, id)) {
        g.entries_read += 1;
      } else if (meta.entries_added != 0) {
        g.entries_read = DistanceFromFirstEver(meta, id);
      }
      g.last_delivered = id;
      items[k].push_back({id, e});
      if (!a->noack) {
        store::StreamPending& p = g.pending[id];
        p.consumer = consumer, p.delivery_ms = now, p.deliveries = 1;
      }
    }
    if (!items[k].empty()) ++answering;
  }
  std::vector<std::pair<std::string_view, const StreamGroups*>> changes;
  for (size_t k = 0; k < a->keys.size(); ++k) changes.emplace_back(a->keys[k], &groups[k]);
  const auto reply = [&] {
    if (answering == 0) {
      if (a->block) return ctx.reply.Error(errors::kBlockUnsupported);
      return ctx.reply.NullArray();
    }
    StreamsReplyLen(ctx, answering);
    for (size_t k = 0; k < a->keys.size(); ++k) {
      if (!history[k] && items[k].empty()) continue;
      if (ctx.reply.protocol() < 3) ctx.reply.ArrayLen(2);
      ctx.reply.Bulk(a->keys[k]);
      ctx.reply.ArrayLen(items[k].size());
      for (const Item& item : items[k]) {
        if (item.entry) {
          ReplyEntry(ctx, *item.entry);
        } else {
          ctx.reply.ArrayLen(2);
          ReplyId(ctx, item.id);
          ctx.reply.NullArray();
        }
      }
    }
  };
  ReplyThenLogGroups(ctx, changes, reply, [&] { items.clear(), loaded.clear(); });
}

// ---- XACK, XPENDING -----------------------------------------------------------------------------

void XAck(Context& ctx) {
  auto parsed = StrictIds(ctx, 3);
  if (!parsed) return;
  const std::vector<StreamId>& ids = *parsed;
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  Loaded s;
  if (!Load(ctx, key, false, s, /*index=*/false)) return;
  if (!s.exists) return ctx.reply.Integer(0);
  StreamGroups groups = s.Groups();
  auto it = groups.find(std::string(ctx.args[2]));
  if (it == groups.end()) return ctx.reply.Integer(0);
  int64_t acked = 0;
  for (StreamId id : ids) acked += static_cast<int64_t>(it->second.pending.erase(id));
  if (acked > 0 && !LogGroups(ctx, key, groups, s)) return;
  ctx.reply.Integer(acked);
}

void XPending(Context& ctx) {
  const std::string_view key = ctx.args[1], group = ctx.args[2];
  const auto& args = ctx.args;
  const bool extended = args.size() > 3;
  int64_t min_idle = 0;
  std::optional<StreamId> start, end;
  int64_t count = 0;
  std::optional<std::string_view> consumer;
  if (extended) {
    ArgReader r(ctx, 3);
    if (r.Keyword("IDLE", 2)) {
      auto n = r.Integer();
      if (!n) return;
      min_idle = *n;
    }
    if (r.remaining() != 3 && r.remaining() != 4) return ctx.reply.Error(errors::kSyntax);
    const std::string_view start_text = r.Next(), end_text = r.Next();
    const bool start_ex = start_text.starts_with('('), end_ex = end_text.starts_with('(');
    start = IdArgument(ctx, start_ex ? start_text.substr(1) : start_text, 0);
    if (!start) return;
    end = IdArgument(ctx, end_ex ? end_text.substr(1) : end_text, UINT64_MAX);
    if (!end) return;
    if (start_ex) {
      start = Next(*start);
      if (!start) return ctx.reply.Error(errors::kInvalidStartId);
    }
    if (end_ex) {
      end = Prev(*end);
      if (!end) return ctx.reply.Error(errors::kInvalidEndId);
    }
    auto n = r.Integer();
    if (!n) return;
    count = std::max<int64_t>(*n, 0);
    if (r.more()) consumer = r.Next();
  }
  Loaded s;
  if (!Load(ctx, key, true, s)) return;
  StreamGroups groups;
  if (s.exists) groups = s.r().Groups();
  auto it = groups.find(std::string(group));
  if (!s.exists || it == groups.end()) {
    return ctx.reply.Error(errors::NoKeyOrGroup(key, group));
  }
  const StreamGroup& g = it->second;
  if (!extended) {
    ctx.reply.ArrayLen(4);
    ctx.reply.Integer(static_cast<int64_t>(g.pending.size()));
    if (g.pending.empty()) {
      ctx.reply.Null();
      ctx.reply.Null();
      return ctx.reply.NullArray();
    }
    ReplyId(ctx, g.pending.begin()->first);
    ReplyId(ctx, g.pending.rbegin()->first);
    std::map<std::string, int64_t> per_consumer;
    for (const auto& [id, p] : g.pending) per_consumer[p.consumer] += 1;
    ctx.reply.ArrayLen(per_consumer.size());
    for (const auto& [name, n] : per_consumer) {
      ctx.reply.ArrayLen(2);
      ctx.reply.Bulk(name);
      ctx.reply.Bulk(std::to_string(n));
    }
    return;
  }
  const int64_t now = CommandClock::WallMs();
  std::vector<std::pair<StreamId, const store::StreamPending*>> rows;
  if (*start <= *end) {
    for (auto p = g.pending.lower_bound(*start);
         p != g.pending.end() && p->first <= *end && static_cast<int64_t>(rows.size()) < count;
         ++p) {
      if (consumer && p->second.consumer != *consumer) continue;
      const int64_t idle = now - static_cast<int64_t>(p->second.delivery_ms);
      if (min_idle > 0 && idle < min_idle) continue;
      rows.emplace_back(p->first, &p->second);
    }
  }
  ctx.reply.ArrayLen(rows.size());
  for (const auto& [id, p] : rows) {
    ctx.reply.ArrayLen(4);
    ReplyId(ctx, id);
    ctx.reply.Bulk(p->consumer);
    ctx.reply.Integer(std::max<int64_t>(0, now - static_cast<int64_t>(p->delivery_ms)));
    ctx.reply.Integer(static_cast<int64_t>(p->deliveries));
  }
}

// ---- XCLAIM, XAUTOCLAIM ----------------------------------------------------------------------

// The stream and group XCLAIM/XAUTOCLAIM name, or the error queued.
bool LoadClaim(Context& ctx, Loaded& s, StreamGroups& groups, StreamGroup*& group) {
  const std::string_view key = ctx.args[1], name = ctx.args[2];
  if (!Load(ctx, key, false, s)) return false;
  if (s.exists) groups = s.r().Groups();
  auto it = groups.find(std::string(name));
  if (!s.exists || it == groups.end()) {
    ctx.reply.Error(errors::NoKeyOrGroup(key, name));
    return false;
  }
  group = &it->second;
  return true;
}

std::optional<int64_t> MinIdle(Context& ctx, std::string_view command) {
  auto n = ArgReader(ctx, 4).Integer(INT64_MIN, INT64_MAX, errors::InvalidMinIdle(command));
  if (!n) return std::nullopt;
  return std::max<int64_t>(*n, 0);
}

const store::StreamEntryView* EntryAt(const StreamReader& r, StreamId id) {
  const size_t at = r.LowerBound(id);
  return at < r.entries().size() && r.entries()[at].id == id ? &r.entries()[at] : nullptr;
}

void XClaim(Context& ctx) {
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  Loaded s;
  StreamGroups groups;
  StreamGroup* g = nullptr;
  if (!LoadClaim(ctx, s, groups, g)) return;
  auto min_idle = MinIdle(ctx, "XCLAIM");
  if (!min_idle) return;
  std::vector<StreamId> ids;
  ArgReader args(ctx, 5);
  for (; args.more(); args.Next()) {
    if (args.Peek() == "-" || args.Peek() == "+") break;
    auto id = ParseId(args.Peek(), 0);
    if (!id) break;
    ids.push_back(*id);
  }
  const int64_t now = CommandClock::WallMs();
  int64_t delivery = now;
  int64_t retry = -1;
  bool force = false, justid = false;
  std::optional<StreamId> last_id;
  const auto number = [&](std::string_view what) {
    return args.Integer(INT64_MIN, INT64_MAX, errors::InvalidXClaimArgument(what));
  };
  while (args.more()) {
    if (args.Keyword("FORCE")) {
      force = true;
    } else if (args.Keyword("JUSTID")) {
      justid = true;
    } else if (args.Keyword("IDLE", 1)) {
      auto n = number("IDLE");
      if (!n) return;
      delivery = now - *n;
    } else if (args.Keyword("TIME", 1)) {
      auto n = number("TIME");
      if (!n) return;
      delivery = *n;
    } else if (args.Keyword("RETRYCOUNT", 1)) {
      auto n = number("RETRYCOUNT");
      if (!n) return;
      retry = *n;
    } else if (args.Keyword("LASTID", 1)) {
      last_id = StrictId(ctx, args.Next());
      if (!last_id) return;
    } else {
      return ctx.reply.Error(errors::UnrecognizedXClaimOption(args.Peek()));
    }
  }
  if (delivery < 0 || delivery > now) delivery = now;
  const StreamReader& r = s.r();
  const std::string consumer(ctx.args[3]);
  bool changed = false;
  if (last_id && *last_id > g->last_delivered) g->last_delivered = *last_id, changed = true;
  std::vector<std::pair<StreamId, const store::StreamEntryView*>> claimed;
  for (StreamId id : ids) {
    auto p = g->pending.find(id);
    const store::StreamEntryView* entry = EntryAt(r, id);
    if (p == g->pending.end()) {
      if (!force || entry == nullptr) continue;
      p = g->pending.emplace(id, store::StreamPending{consumer, 0, 0}).first;
      changed = true;
    }
    if (entry == nullptr) {  // deleted from the stream: it leaves the PEL
      g->pending.erase(p);
      changed = true;
      continue;
    }
    if (*min_idle > 0 && now - static_cast<int64_t>(p->second.delivery_ms) < *min_idle) continue;
    p->second.consumer = consumer;
    p->second.delivery_ms = static_cast<uint64_t>(delivery);
    if (retry >= 0) {
      p->second.deliveries = static_cast<uint64_t>(retry);
    } else if (!justid) {
      p->second.deliveries += 1;
    }
    g->consumers[consumer].seen_ms = static_cast<uint64_t>(now);
    claimed.emplace_back(id, entry);
    changed = true;
  }
  const auto reply = [&] {
    ctx.reply.ArrayLen(claimed.size());
    for (const auto& [id, entry] : claimed) {
      if (justid) {
        ReplyId(ctx, id);
      } else {
        ReplyEntry(ctx, *entry);
      }
    }
  };
  if (!changed) return reply();
  ReplyThenLogGroups(ctx, {{key, &groups}}, reply, [&] { claimed.clear(), s = Loaded{}; });
}

// Its arguments are read before the key, as Redis reports their errors first.
void XAutoClaim(Context& ctx) {
  const std::string_view key = ctx.args[1];
  auto min_idle = MinIdle(ctx, "XAUTOCLAIM");
  if (!min_idle) return;
  auto start = IdArgument(ctx, ctx.args[5], 0);
  if (!start) return;
  int64_t count = 100;
  bool justid = false;
  for (ArgReader r(ctx, 6); r.more();) {
    if (r.Keyword("JUSTID")) {
      justid = true;
    } else if (r.Keyword("COUNT", 1)) {
      // Redis's bound: ten attempts per claim must not overflow.
      auto n = r.Integer(1, INT64_MAX / 16, errors::kXAutoClaimCount);
      if (!n) return;
      count = *n;
    } else {
      return ctx.reply.Error(errors::kSyntax);
    }
  }
  KeyLocks lock(ctx.engine, key);
  Loaded s;
  StreamGroups groups;
  StreamGroup* g = nullptr;
  if (!LoadClaim(ctx, s, groups, g)) return;
  const StreamReader& r = s.r();
  const std::string consumer(ctx.args[3]);
  const int64_t now = CommandClock::WallMs();
  int64_t attempts = count * 10;
  std::vector<std::pair<StreamId, const store::StreamEntryView*>> claimed;
  std::vector<StreamId> deleted;
  auto p = g->pending.lower_bound(*start);
  while (attempts-- > 0 && count > 0 && p != g->pending.end()) {
    const store::StreamEntryView* entry = EntryAt(r, p->first);
    if (entry == nullptr) {
      deleted.push_back(p->first);
      p = g->pending.erase(p);
      --count;
      continue;
    }
    if (*min_idle > 0 && now - static_cast<int64_t>(p->second.delivery_ms) < *min_idle) {
      ++p;
      continue;
    }
    p->second.consumer = consumer;
    p->second.delivery_ms = static_cast<uint64_t>(now);
    if (!justid) p->second.deliveries += 1;
    g->consumers[consumer].seen_ms = static_cast<uint64_t>(now);
    claimed.emplace_back(p->first, entry);
    --count;
    ++p;
  }
  const StreamId next = p == g->pending.end() ? StreamId{} : p->first;
  const auto reply = [&] {
    ctx.reply.ArrayLen(3);
    ReplyId(ctx, next);
    ctx.reply.ArrayLen(claimed.size());
    for (const auto& [id, entry] : claimed) {
      if (justid) {
        ReplyId(ctx, id);
      } else {
        ReplyEntry(ctx, *entry);
      }
    }
    ctx.reply.ArrayLen(deleted.size());
    for (StreamId id : deleted) ReplyId(ctx, id);
  };
  if (claimed.empty() && deleted.empty()) return reply();
  ReplyThenLogGroups(ctx, {{key, &groups}}, reply, [&] { claimed.clear(), s = Loaded{}; });
}

// ---- XINFO --------------------------------------------------------------------------------------

// Redis's radix tree of listpacks, as far as it shows: one node per kNodeEntries entries.
int64_t RadixKeys(uint64_t length) {
  return static_cast<int64_t>((length + kNodeEntries - 1) / kNodeEntries);
}

bool LoadExisting(Context& ctx, std::string_view key, Loaded& s) {
  if (!Load(ctx, key, true, s)) return false;
  if (!s.exists) ctx.reply.Error(errors::kNoSuchKey);
  return s.exists;
}

void XInfoStream(Context& ctx) {
  const std::string_view key = ctx.args[2];
  bool full = false;
  int64_t count = 10;
  if (ctx.args.size() > 3) {
    ArgReader r(ctx, 3);
    if (!r.Keyword("FULL")) return ctx.reply.Error(errors::kSyntax);
    full = true;
    if (r.remaining() == 2 && r.Keyword("COUNT")) {
      auto n = r.Integer();
      if (!n) return;
      count = std::max<int64_t>(*n, 0);
    } else if (r.more()) {
      return ctx.reply.Error(errors::kSyntax);
    }
  }
  Loaded s;
  if (!LoadExisting(ctx, key, s)) return;
  const StreamReader& r = s.r();
  const store::StreamMeta& m = r.meta();
  const StreamGroups groups = r.Groups();
  ctx.reply.MapLen(full ? 9 : 10);
  ctx.reply.Bulk("length");
  ctx.reply.Integer(static_cast<int64_t>(m.length));
  ctx.reply.Bulk("radix-tree-keys");
  ctx.reply.Integer(RadixKeys(m.length));
  ctx.reply.Bulk("radix-tree-nodes");
  ctx.reply.Integer(RadixKeys(m.length) + 1);
  ctx.reply.Bulk("last-generated-id");
  ReplyId(ctx, m.last);
  ctx.reply.Bulk("max-deleted-entry-id");
  ReplyId(ctx, m.max_deleted);
  ctx.reply.Bulk("entries-added");
  ctx.reply.Integer(static_cast<int64_t>(m.entries_added));
  ctx.reply.Bulk("recorded-first-entry-id");
  ReplyId(ctx, m.first);
  const auto& entries = r.entries();
  if (!full) {
    ctx.reply.Bulk("groups");
    ctx.reply.Integer(static_cast<int64_t>(groups.size()));
    for (bool first : {true, false}) {
      ctx.reply.Bulk(first ? "first-entry" : "last-entry");
      if (entries.empty()) {
        ctx.reply.Null();
      } else {
        ReplyEntry(ctx, first ? entries.front() : entries.back());
      }
    }
    return;
  }
  const size_t limit = count == 0 ? SIZE_MAX : static_cast<size_t>(count);
  ctx.reply.Bulk("entries");
  const size_t shown = std::min(limit, entries.size());
  ctx.reply.ArrayLen(shown);
  for (size_t e = 0; e < shown; ++e) ReplyEntry(ctx, entries[e]);
  ctx.reply.Bulk("groups");
  ctx.reply.ArrayLen(groups.size());
  for (const auto& [name, g] : groups) {
    ctx.reply.MapLen(7);
    ctx.reply.Bulk("name");
    ctx.reply.Bulk(name);
    ctx.reply.Bulk("last-delivered-id");
    ReplyId(ctx, g.last_delivered);
    ctx.reply.Bulk("entries-read");
    ReplyEntriesRead(ctx, g);
    ctx.reply.Bulk("lag");
    ReplyLag(ctx, m, g);
    ctx.reply.Bulk("pel-count");
    ctx.reply.Integer(static_cast<int64_t>(g.pending.size()));
    ctx.reply.Bulk("pending");
    const size_t pel_shown = std::min(limit, g.pending.size());
    ctx.reply.ArrayLen(pel_shown);
    size_t n = 0;
    for (auto p = g.pending.begin(); n < pel_shown; ++p, ++n) {
      ctx.reply.ArrayLen(4);
      ReplyId(ctx, p->first);
      ctx.reply.Bulk(p->second.consumer);
      ctx.reply.Integer(static_cast<int64_t>(p->second.delivery_ms));
      ctx.reply.Integer(static_cast<int64_t>(p->second.deliveries));
    }
    ctx.reply.Bulk("consumers");
    ctx.reply.ArrayLen(g.consumers.size());
    for (const auto& [cname, c] : g.consumers) {
      std::vector<std::pair<StreamId, const store::StreamPending*>> own;
      for (const auto& [id, p] : g.pending) {
        if (p.consumer == cname) own.emplace_back(id, &p);
      }
      ctx.reply.MapLen(4);
      ctx.reply.Bulk("name");
      ctx.reply.Bulk(cname);
      ctx.reply.Bulk("seen-time");
      ctx.reply.Integer(static_cast<int64_t>(c.seen_ms));
      ctx.reply.Bulk("pel-count");
      ctx.reply.Integer(static_cast<int64_t>(own.size()));
      ctx.reply.Bulk("pending");
      const size_t own_shown = std::min(limit, own.size());
      ctx.reply.ArrayLen(own_shown);
      for (size_t k = 0; k < own_shown; ++k) {
        ctx.reply.ArrayLen(3);
        ReplyId(ctx, own[k].first);
        ctx.reply.Integer(static_cast<int64_t>(own[k].second->delivery_ms));
        ctx.reply.Integer(static_cast<int64_t>(own[k].second->deliveries));
      }
    }
  }
}

void XInfoGroups(Context& ctx) {
  Loaded s;
  if (!LoadExisting(ctx, ctx.args[2], s)) return;
  const StreamGroups groups = s.r().Groups();
  ctx.reply.ArrayLen(groups.size());
  for (const auto& [name, g] : groups) {
    ctx.reply.MapLen(6);
    ctx.reply.Bulk("name");
    ctx.reply.Bulk(name);
    ctx.reply.Bulk("consumers");
    ctx.reply.Integer(static_cast<int64_t>(g.consumers.size()));
    ctx.reply.Bulk("pending");
    ctx.reply.Integer(static_cast<int64_t>(g.pending.size()));
    ctx.reply.Bulk("last-delivered-id");
    ReplyId(ctx, g.last_delivered);
    ctx.reply.Bulk("entries-read");
    ReplyEntriesRead(ctx, g);
    ctx.reply.Bulk("lag");
    ReplyLag(ctx, s.r().meta(), g);
  }
}

void XInfoConsumers(Context& ctx) {
  const std::string_view key = ctx.args[2], group = ctx.args[3];
  Loaded s;
  if (!LoadExisting(ctx, key, s)) return;
  StreamGroups groups = s.r().Groups();
  const StreamGroup* g = FindGroup(ctx, groups, key, group);
  if (g == nullptr) return;
  const int64_t now = CommandClock::WallMs();
  ctx.reply.ArrayLen(g->consumers.size());
  for (const auto& [cname, c] : g->consumers) {
    int64_t pending = 0;
    for (const auto& [id, p] : g->pending) pending += p.consumer == cname ? 1 : 0;
    ctx.reply.MapLen(3);
    ctx.reply.Bulk("name");
    ctx.reply.Bulk(cname);
    ctx.reply.Bulk("pending");
    ctx.reply.Integer(pending);
    ctx.reply.Bulk("idle");
    ctx.reply.Integer(std::max<int64_t>(0, now - static_cast<int64_t>(c.seen_ms)));
  }
}

CommandSpec WithTips(CommandSpec s, std::vector<std::string> tips) {
  s.tips = std::move(tips);
  return s;
}

}  // namespace
}  // namespace prefixd::commands::stream

namespace prefixd::commands {

void RegisterStreamGroupCommands(Registry& r) {
  using namespace stream;
  const uint32_t acl = kAclStream;
  const OneKeyStream one_key(r);
  const Arg key = KeyArg("key"), id = StrArg("id");
  one_key("xack", -4, kWrite | kFast, "<key> <group> <id> [id ...]",
          "Acknowledges pending entries of a group; how many were pending.", XAck, "O(1) per id",
          "5.0.0", kKeyRW | kKeyUpdate, {key, StrArg("group"), Many(id)});
  one_key(
      "xpending", -3, kReadonly,
      "<key> <group> [[IDLE min-idle-time] <start> <end> <count> [consumer]]",
      "A group's pending entries: a summary, or the entries in a range.", XPending,
      "O(N) in the entries returned", "5.0.0", kKeyRO | kKeyAccess,
      {key, StrArg("group"),
       BlockArg("filters", kArgOptional,
                {Tokened(IntArg("min-idle-time", kArgOptional), "IDLE", "6.2.0"), StrArg("start"),
                 StrArg("end"), IntArg("count"), StrArg("consumer", kArgOptional)})},
      {"nondeterministic_output"});

  one_key("xclaim", -6, kWrite | kFast,
          "<key> <group> <consumer> <min-idle-time> <id> [id ...] [IDLE ms] [TIME unix-time-ms] "
          "[RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]",
          "Gives pending entries idle long enough to another consumer.", XClaim, "O(log N) per id",
          "5.0.0", kKeyRW | kKeyUpdate,
          {key, StrArg("group"), StrArg("consumer"), StrArg("min-idle-time"), Many(id),
           Tokened(IntArg("ms", kArgOptional), "IDLE"),
           Tokened(TypedArg("unix-time-milliseconds", ArgType::kUnixTime, kArgOptional), "TIME"),
           Tokened(IntArg("count", kArgOptional), "RETRYCOUNT"), TokenArg("force", "FORCE"),
           TokenArg("justid", "JUSTID"), Tokened(StrArg("lastid", kArgOptional), "LASTID")},
          {"nondeterministic_output"});
  one_key("xautoclaim", -6, kWrite | kFast,
          "<key> <group> <consumer> <min-idle-time> <start> [COUNT count] [JUSTID]",
          "XCLAIM of the pending entries from an id on, scanning; the next id to scan from.",
          XAutoClaim, "O(1) per entry scanned", "6.2.0", kKeyRW | kKeyDelete,
          {key, StrArg("group"), StrArg("consumer"), StrArg("min-idle-time"), StrArg("start"),
           Tokened(IntArg("count", kArgOptional), "COUNT"), TokenArg("justid", "JUSTID")},
          {"nondeterministic_output"});
  AddStreamsCommand(
      r, "xreadgroup", -7, kWrite,
      "GROUP <group> <consumer> [COUNT count] [BLOCK milliseconds] [NOACK] STREAMS <key> "
      "[key ...] <id> [id ...]",
      "Reads entries for a consumer of a group: new ones (>) or its pending history.", XReadGroup,
      kKeyRO | kKeyAccess,
      {BlockArg("group_block", 0, {StrArg("group"), StrArg("consumer")}, "GROUP"),
       Tokened(IntArg("count", kArgOptional), "COUNT"),
       Tokened(IntArg("milliseconds", kArgOptional), "BLOCK"), TokenArg("noack", "NOACK"),
       BlockArg("streams", 0, {Many(KeyArg("key")), Many(id)}, "STREAMS")});

  // XGROUP and XINFO: containers of subcommands whose key is the second argument.
  const auto container = [&](std::string name, std::string summary) {
    return AsRedis(MakeSpec("stream", 0, std::move(name), -2, 0, "<subcommand> [arguments]",
                            std::move(summary), nullptr, "O(1)"),
                   "5.0.0");
  };
  const auto sub = [&](std::string name, int arity, uint32_t flags, std::string syntax,
                       std::string summary, Handler h, std::string since, uint32_t key_flags,
                       std::vector<Arg> args) {
    CommandSpec s = AsRedis(MakeSpec("stream", 0, std::move(name), arity, flags, std::move(syntax),
                                     std::move(summary), h, "O(1)"),
                            std::move(since), acl, {}, std::move(args));
    s.first_key = s.last_key = 2, s.key_step = 1;
    s.key_specs = {RangeKeySpec(key_flags, 2)};
    return s;
  };
  const Arg group = StrArg("group"), consumer = StrArg("consumer");
  const Arg id_or_last = OneOfArg("id_or_last", 0, {id, TokenArg("new_id", "$")});
  const Arg entries_read = Tokened(IntArg("entries_read", kArgOptional), "ENTRIESREAD", "7.0.0");
  CommandSpec xgroup = container("xgroup", "Manages consumer groups.");
  // A container's HELP (Handler is a plain function, so each container passes its own).
  const auto help = [&](std::string_view container, Handler handler) {
    return AsRedis(
        MakeSpec("stream", 0, "help", 2, kLoading | kStale, "",
                 "Lists the " + std::string(container) + " subcommands.", handler, "O(1)"),
        "5.0.0", acl);
  };
  xgroup.subcommands = {
      sub("create", -5, kWrite | kDenyOom, "<key> <group> <id|$> [MKSTREAM] [ENTRIESREAD n]",
          "Creates a consumer group.", XGroupCreate, "5.0.0", kKeyRW | kKeyInsert,
          {key, group, id_or_last, TokenArg("mkstream", "MKSTREAM"), entries_read}),
      sub("setid", -5, kWrite, "<key> <group> <id|$> [ENTRIESREAD n]",
          "Sets a group's last delivered id.", XGroupSetId, "5.0.0", kKeyRW | kKeyUpdate,
          {key, group, id_or_last, entries_read}),
      sub("destroy", 4, kWrite, "<key> <group>", "Deletes a consumer group; 1 if it existed.",
          XGroupDestroy, "5.0.0", kKeyRW | kKeyDelete, {key, group}),
      sub("createconsumer", 5, kWrite | kDenyOom, "<key> <group> <consumer>",
          "Creates a consumer in a group; 1 if it is new.", XGroupCreateConsumer, "6.2.0",
          kKeyRW | kKeyInsert, {key, group, consumer}),
      sub("delconsumer", 5, kWrite, "<key> <group> <consumer>",
          "Deletes a consumer; the number of its pending entries.", XGroupDelConsumer, "5.0.0",
          kKeyRW | kKeyDelete, {key, group, consumer}),
      help("XGROUP", [](Context& ctx) { HelpReply(ctx, *ctx.engine.registry->Find("xgroup")); }),
  };
  r.Add(std::move(xgroup));
  CommandSpec xinfo = container("xinfo", "Reports on streams, their groups and consumers.");
  xinfo.subcommands = {
      sub("stream", -3, kReadonly, "<key> [FULL [COUNT count]]",
          "A stream's figures, first and last entries, or everything (FULL).", XInfoStream, "5.0.0",
          kKeyRO | kKeyAccess,
          {key,
           BlockArg("full_block", kArgOptional,
                    {TokenArg("full", "FULL"), Tokened(IntArg("count", kArgOptional), "COUNT")})}),
      sub("groups", 3, kReadonly, "<key>", "A stream's consumer groups.", XInfoGroups, "5.0.0",
          kKeyRO | kKeyAccess, {key}),
      WithTips(sub("consumers", 4, kReadonly, "<key> <group>", "A group's consumers.",
                   XInfoConsumers, "5.0.0", kKeyRO | kKeyAccess, {key, group}),
               {"nondeterministic_output"}),
      help("XINFO", [](Context& ctx) { HelpReply(ctx, *ctx.engine.registry->Find("xinfo")); }),
  };
  r.Add(std::move(xinfo));
}

}  // namespace prefixd::commands
