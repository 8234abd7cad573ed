// Redis's stream commands with Redis 7.0.15's replies and errors: XADD, XLEN, XRANGE, XREVRANGE,
// XDEL, XTRIM, XREAD, XGROUP (CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER), XREADGROUP,
// XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO (STREAM, GROUPS, CONSUMERS), XSETID. No blocking: a
// BLOCK that would wait is refused (docs/compatibility.md). A stream lives in its keyspace entry
// (store/stream.h); every change is one StreamValue record naming only what it changes (an
// entry, a trim count, deleted ids, the groups, the header). A read-modify-write holds its key's
// lock stripe (KeyLocks).
#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commands/families.h"
#include "common/ascii.h"
#include "common/clock.h"
#include "common/numbers.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/keys.h"
#include "engine/write_path.h"
#include "store/stream.h"

namespace prefixd::commands {
namespace {

using store::KeyType;
using store::StreamGroup;
using store::StreamGroups;
using store::StreamId;
using store::StreamReader;

constexpr std::string_view kInvalidId =
    "ERR Invalid stream ID specified as stream command argument";
constexpr std::string_view kIdTooSmall =
    "ERR The ID specified in XADD is equal or smaller than the target stream top item";
constexpr std::string_view kIdZero = "ERR The ID specified in XADD must be greater than 0-0";
constexpr std::string_view kIdExhausted =
    "ERR The stream has exhausted the last possible ID, unable to add more items";
constexpr std::string_view kNeedsKey =
    "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to "
    "use the MKSTREAM option to create an empty stream automatically.";
constexpr std::string_view kBlockUnsupported =
    "ERR BLOCK is not supported by this server: it answers at once when data is there and "
    "refuses to wait for new entries";
// Redis's stream-node-max-entries: the entries one of its nodes takes, which approximate (~)
// trimming removes whole (TrimCount).
constexpr uint64_t kNodeEntries = 100;

// A stream key as a command reads it: `exists` false for a missing key.
struct Loaded {
  bool exists = false;
  Bytes value;
  store::StreamMeta meta;
  std::optional<StreamReader> reader;  // absent when only the header was read
  const StreamReader& r() const { return *reader; }
};

// Looks `key` up as Redis's lookupKeyRead/Write. False, with -WRONGTYPE queued, when it holds
// another type.
bool Load(Context& ctx, std::string_view key, bool read, Loaded& out, bool index = true) {
  auto info = LookupKey(ctx, key, /*touch=*/true);
  if (read) (info ? ctx.engine.stats().keyspace_hits : ctx.engine.stats().keyspace_misses).Add();
  if (!info) return true;
  if (info->type != KeyType::kStream) {
    ctx.reply.Error(errors::kWrongType);
    return false;
  }
  out.value = std::move(info->value);
  info.reset();
  out.exists = true;
  if (!index) {
    out.meta = store::ReadStreamMeta(out.value.view()).value_or(store::StreamMeta{});
    return true;
  }
  out.reader = StreamReader::Open(out.value.view());
  if (!out.reader) {
    out.value = store::EmptyStream();
    out.reader = StreamReader::Open(out.value.view());
  }
  out.meta = out.reader->meta();
  return true;
}

bool Log(Context& ctx, std::string_view key, uint32_t op, uint64_t count, Bytes value) {
  persist::Blob blob;
  if (!value.empty()) blob.pieces.push_back(std::move(value));
  return Mutate(ctx, persist::StreamValue{std::string(key), op, count, std::move(blob)})
      .has_value();
}
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

// An unsigned 64-bit decimal, digits only (Redis's string2ull).
std::optional<uint64_t> ParseUint64(std::string_view text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

// An id as Redis's streamGenericParseIDOrReply: "ms-seq", "ms" (seq `missing_seq`), "-" and "+".
std::optional<StreamId> ParseId(std::string_view text, uint64_t missing_seq,
                                bool* seq_given = nullptr) {
  if (text.size() > 127) return std::nullopt;
  if (text == "-") return StreamId{};
  if (text == "+") return StreamId::Max();
  const size_t dash = text.find('-');
  auto ms = ParseUint64(text.substr(0, dash));
  if (!ms) return std::nullopt;
  if (seq_given) *seq_given = dash != std::string_view::npos;
  if (dash == std::string_view::npos) return StreamId{*ms, missing_seq};
  auto seq = ParseUint64(text.substr(dash + 1));
  if (!seq) return std::nullopt;
  return StreamId{*ms, *seq};
}
std::optional<StreamId> IdArgument(Context& ctx, std::string_view text, uint64_t missing_seq) {
  auto id = ParseId(text, missing_seq);
  if (!id) ctx.reply.Error(kInvalidId);
  return id;
}
// A strict id ("-" and "+" refused), as XDEL, XACK, XGROUP and XSETID read theirs.
std::optional<StreamId> StrictId(Context& ctx, std::string_view text, uint64_t missing_seq = 0) {
  if (text == "-" || text == "+") {
    ctx.reply.Error(kInvalidId);
    return std::nullopt;
  }
  return IdArgument(ctx, text, missing_seq);
}
// The strict ids from argument `first` on (XDEL's and XACK's lists); nullopt with the error
// queued at the first bad one.
std::optional<std::vector<StreamId>> StrictIds(Context& ctx, size_t first) {
  std::vector<StreamId> ids;
  for (size_t i = first; i < ctx.args.size(); ++i) {
    auto id = StrictId(ctx, ctx.args[i]);
    if (!id) return std::nullopt;
    ids.push_back(*id);
  }
  return ids;
}

std::optional<StreamId> Next(StreamId id) {
  if (id.seq != UINT64_MAX) return StreamId{id.ms, id.seq + 1};
  if (id.ms != UINT64_MAX) return StreamId{id.ms + 1, 0};
  return std::nullopt;
}
std::optional<StreamId> Prev(StreamId id) {
  if (id.seq != 0) return StreamId{id.ms, id.seq - 1};
  if (id.ms != 0) return StreamId{id.ms - 1, UINT64_MAX};
  return std::nullopt;
}

void ReplyId(Context& ctx, StreamId id) { ctx.reply.Bulk(id.ToString()); }
void ReplyEntry(Context& ctx, const store::StreamEntryView& e) {
  ctx.reply.ArrayLen(2);
  ReplyId(ctx, e.id);
  const std::vector<std::string> fields = e.Fields();
  ctx.reply.ArrayLen(fields.size());
  for (const std::string& f : fields) ctx.reply.Bulk(f);
}

// XREAD's and XREADGROUP's reply: a map of key to entries under RESP3, an array of
// [key, entries] pairs under RESP2 (each pair opened by the caller).
void StreamsReplyLen(Context& ctx, size_t n) {
  if (ctx.reply.protocol() >= 3) {
    ctx.reply.MapLen(n);
  } else {
    ctx.reply.ArrayLen(n);
  }
}

// ---- trimming (XADD's options and XTRIM) ----------------------------------------------------

struct Trim {
  enum Kind { kNone, kMaxLen, kMinId } kind = kNone;
  bool approx = false;
  uint64_t maxlen = 0;
  StreamId minid;
  int64_t limit = -1;  // -1: not given
};

// How many entries `trim` removes from the front of `r` (after an append of one more, `added`,
// when `adding`), as Redis's streamTrim. Exact trimming removes them all. Approximate trimming
// walks the nodes from the front and drops each one wholly past the threshold, full or not,
// stopping at the first that is not or that would take the count past LIMIT (default 100 nodes'
// worth; 0: none). prefixd keeps no nodes. Redis fills each with kNodeEntries entries in the
// order they come and trims from the front, so the n-th entry ever added sits in node
// n / kNodeEntries, the entries gone (entries-added less the length) having been the first.
// A stream emptied and refilled, XDEL, and entries that fill a node's bytes first move Redis's
// boundaries: the counts can then differ by less than a node (docs/compatibility.md).
// MAXLEN needs only the header's length; MINID the entries (`r`).
uint64_t TrimCount(const store::StreamMeta& m, const StreamReader* r, const Trim& trim, bool adding,
                   StreamId added) {
  const uint64_t length = m.length + (adding ? 1 : 0);
  if (trim.kind == Trim::kNone) return 0;
  if (!trim.approx) {
    if (trim.kind == Trim::kMaxLen) return length > trim.maxlen ? length - trim.maxlen : 0;
    uint64_t count = r->LowerBound(trim.minid);
    if (adding && count == r->entries().size() && added < trim.minid) count += 1;
    return count;
  }
  const uint64_t limit = trim.limit < 0 ? 100 * kNodeEntries : static_cast<uint64_t>(trim.limit);
  const uint64_t gone = m.entries_added > m.length ? m.entries_added - m.length : 0;
  const auto id_at = [&](uint64_t i) {
    return i < r->entries().size() ? r->entries()[i].id : added;
  };
  uint64_t count = 0;
  while (count < length) {
    const uint64_t node = std::min(kNodeEntries - (gone + count) % kNodeEntries, length - count);
    if (limit != 0 && count + node > limit) break;
    const bool past = trim.kind == Trim::kMaxLen ? length - count - node >= trim.maxlen
                                                 : id_at(count + node - 1) < trim.minid;
    if (!past) break;
    count += node;
  }
  return count;
}

// Parses [MAXLEN|MINID [=|~] threshold [LIMIT count]] (and NOMKSTREAM for XADD) from args[from],
// stopping at the first argument that is no option (XADD's id). Returns that index, or nullopt
// with the error queued.
std::optional<size_t> ParseTrim(Context& ctx, size_t from, bool xadd, Trim& trim,
                                bool& nomkstream) {
  const auto& args = ctx.args;
  size_t i = from;
  bool limit_given = false;
  for (; i < args.size(); ++i) {
    const std::string_view a = args[i];
    const bool more = i + 1 < args.size();
    if (xadd && EqualsIgnoreCase(a, "NOMKSTREAM")) {
      nomkstream = true;
    } else if ((EqualsIgnoreCase(a, "MAXLEN") || EqualsIgnoreCase(a, "MINID")) && more) {
      const bool maxlen = EqualsIgnoreCase(a, "MAXLEN");
      if (trim.kind != Trim::kNone && trim.kind != (maxlen ? Trim::kMaxLen : Trim::kMinId)) {
        ctx.reply.Error(
            "ERR syntax error, MAXLEN and MINID options at the same time are not "
            "compatible");
        return std::nullopt;
      }
      std::string_view next = args[i + 1];
      trim.approx = false;
      if ((next == "~" || next == "=") && i + 2 < args.size()) {
        trim.approx = next == "~";
        ++i;
        next = args[i + 1];
      }
      ++i;
      if (maxlen) {
        auto n = ParseInt64(next);
        if (!n) return ctx.reply.Error(errors::kNotInteger), std::nullopt;
        if (*n < 0) return ctx.reply.Error("ERR The MAXLEN argument must be >= 0."), std::nullopt;
        trim.kind = Trim::kMaxLen, trim.maxlen = static_cast<uint64_t>(*n);
      } else {
        auto id = StrictId(ctx, next);
        if (!id) return std::nullopt;
        trim.kind = Trim::kMinId, trim.minid = *id;
      }
    } else if (EqualsIgnoreCase(a, "LIMIT") && more) {
      auto n = ParseInt64(args[i + 1]);
      if (!n) return ctx.reply.Error(errors::kNotInteger), std::nullopt;
      if (*n < 0) return ctx.reply.Error("ERR The LIMIT argument must be >= 0."), std::nullopt;
      trim.limit = *n, limit_given = true;
      ++i;
    } else if (xadd) {
      break;  // the id
    } else {
      return ctx.reply.Error(errors::kSyntax), std::nullopt;
    }
  }
  if (limit_given && !trim.approx) {
    ctx.reply.Error("ERR syntax error, LIMIT cannot be used without the special ~ option");
    return std::nullopt;
  }
  return i;
}

// ---- XADD, XLEN, XRANGE, XDEL, XTRIM, XSETID -------------------------------------------------

// XADD reaches replicas as Redis 7.0 sends it: a generated id (`*`, `ms-*`) replaced by the id
// made here, and an approximate trim (`~`) as an exact one (`=`) to the length or first id it
// left, so a replica whose node layout differs trims the same entries (LIMIT, which needs `~`,
// is left out; Redis keeps it).
void PropagateXAdd(Context& ctx, size_t id_at, bool id_made, StreamId id, const Trim& trim,
                   uint64_t length_after, StreamId first_after) {
  if (!ctx.propagate.wanted() || (!id_made && !trim.approx)) return;
  // The words made here (the id, the exact threshold) live in `made`; a deque never moves them.
  std::deque<std::string> made;
  std::vector<std::string_view> argv;
  const auto exact_threshold = [&] {
    argv.emplace_back("=");
    argv.emplace_back(made.emplace_back(trim.kind == Trim::kMaxLen ? std::to_string(length_after)
                                                                   : first_after.ToString()));
  };
  for (size_t i = 0; i < ctx.args.size(); ++i) {
    const std::string_view a = ctx.args[i];
    if (i < 2 || i >= id_at || !trim.approx) {
      argv.push_back(i == id_at ? std::string_view(made.emplace_back(id.ToString())) : a);
    } else if (EqualsIgnoreCase(a, "LIMIT")) {
      ++i;  // and its count
    } else if (a == "~" || a == "=") {
      exact_threshold();
      ++i;  // the threshold given
    } else if (EqualsIgnoreCase(a, "MAXLEN") || EqualsIgnoreCase(a, "MINID")) {
      argv.push_back(a);
      if (i + 1 < id_at && ctx.args[i + 1] != "~" && ctx.args[i + 1] != "=") {
        exact_threshold();
        ++i;
      }
    } else {
      argv.push_back(a);
    }
  }
  ctx.propagate.Send(argv);
}

void XAdd(Context& ctx) {
  const std::string_view key = ctx.args[1];
  Trim trim;
  bool nomkstream = false;
  auto at = ParseTrim(ctx, 2, true, trim, nomkstream);
  if (!at) return;
  const size_t id_at = *at;
  // The id and at least one field/value pair, in pairs.
  if (id_at >= ctx.args.size() || (ctx.args.size() - id_at - 1) < 2 ||
      (ctx.args.size() - id_at - 1) % 2 != 0) {
    return ctx.reply.Error(errors::WrongArity("xadd"));
  }
  const std::string_view id_text = ctx.args[id_at];
  bool auto_id = id_text == "*", auto_seq = false;
  StreamId given;
  if (!auto_id) {
    std::string_view t = id_text;
    if (t.size() > 2 && t.substr(t.size() - 2) == "-*") {
      auto ms = ParseUint64(t.substr(0, t.size() - 2));
      if (!ms) return ctx.reply.Error(kInvalidId);
      given = {*ms, 0}, auto_seq = true;
    } else {
      auto id = StrictId(ctx, t);
      if (!id) return;
      given = *id;
    }
    if (!auto_seq && given == StreamId{}) return ctx.reply.Error(kIdZero);
  }
  KeyLocks lock(ctx.engine, key);
  // Only the header is read (and the entries for MINID), and the value's handle is let go before
  // the record applies, so the append can go into the buffer's room (Keyspace::EditValue).
  Loaded s;
  if (!Load(ctx, key, false, s, /*index=*/trim.kind == Trim::kMinId)) return;
  if (!s.exists && nomkstream) return ctx.reply.Null();
  const Bytes empty = store::EmptyStream();
  if (!s.exists) s.meta = store::StreamReader::Open(empty.view())->meta();
  const StreamId last = s.meta.last;
  if (last == StreamId::Max()) return ctx.reply.Error(kIdExhausted);  // whatever the id
  StreamId id;
  if (auto_id) {
    const StreamId now{static_cast<uint64_t>(NowMs()), 0};
    if (now.ms > last.ms) {
      id = now;
    } else {
      id = *Next(last);
    }
  } else if (auto_seq) {
    if (given.ms < last.ms) return ctx.reply.Error(kIdTooSmall);
    if (given.ms == last.ms) {
      if (last.seq == UINT64_MAX) return ctx.reply.Error(kIdTooSmall);
      id = {given.ms, last.seq + 1};
    } else {
      id = given;
    }
  } else {
    if (given <= last) return ctx.reply.Error(kIdTooSmall);
    id = given;
  }
  std::vector<std::string_view> fields;
  for (size_t i = id_at + 1; i < ctx.args.size(); ++i) fields.push_back(ctx.args[i]);
  const Bytes body = store::EncodeStreamBody(fields);
  if (!s.exists && trim.kind == Trim::kMinId) s.reader = StreamReader::Open(empty.view());
  const StreamReader* r = s.reader ? &*s.reader : nullptr;
  const uint64_t trimmed =
      trim.kind == Trim::kMinId && !r ? 0 : TrimCount(s.meta, r, trim, true, id);
  const uint64_t length_after = s.meta.length + 1 - trimmed;
  const StreamId first_after = r && trimmed < r->entries().size() ? r->entries()[trimmed].id : id;
  s = Loaded{};
  if (!Log(ctx, key, persist::StreamValue::kAppend, trimmed,
           store::EncodeStreamEntry(id, body.view()))) {
    return;
  }
  PropagateXAdd(ctx, id_at, auto_id || auto_seq, id, trim, length_after, first_after);
  ReplyId(ctx, id);
}

void XLen(Context& ctx) {
  Loaded s;
  if (!Load(ctx, ctx.args[1], true, s, /*index=*/false)) return;
  ctx.reply.Integer(s.exists ? static_cast<int64_t>(s.meta.length) : 0);
}

// XRANGE and XREVRANGE: `first` and `second` are the arguments in the order given.
void Range(Context& ctx, bool reverse) {
  const std::string_view low_text = ctx.args[reverse ? 3 : 2];
  const std::string_view high_text = ctx.args[reverse ? 2 : 3];
  const bool low_ex = !low_text.empty() && low_text[0] == '(';
  const bool high_ex = !high_text.empty() && high_text[0] == '(';
  // An exclusive bound is a plain id: "(-" and "(+" are refused.
  auto low = low_ex ? StrictId(ctx, low_text.substr(1)) : IdArgument(ctx, low_text, 0);
  if (!low) return;
  auto high = high_ex ? StrictId(ctx, high_text.substr(1), UINT64_MAX)
                      : IdArgument(ctx, high_text, UINT64_MAX);
  if (!high) return;
  if (low_ex) {
    auto n = Next(*low);
    if (!n) return ctx.reply.Error("ERR invalid start ID for the interval");
    low = n;
  }
  if (high_ex) {
    auto p = Prev(*high);
    if (!p) return ctx.reply.Error("ERR invalid end ID for the interval");
    high = p;
  }
  int64_t count = -1;
  for (size_t i = 4; i < ctx.args.size(); ++i) {
    if (EqualsIgnoreCase(ctx.args[i], "COUNT") && i + 1 < ctx.args.size()) {
      auto n = ParseInt64(ctx.args[++i]);
      if (!n) return ctx.reply.Error(errors::kNotInteger);
      count = std::max<int64_t>(*n, 0);
    } else {
      return ctx.reply.Error(errors::kSyntax);
    }
  }
  Loaded s;
  if (!Load(ctx, ctx.args[1], true, s, /*index=*/false)) return;
  if (!s.exists) return ctx.reply.ArrayLen(0);
  if (count == 0) return ctx.reply.NullArray();  // Redis's answer to COUNT 0 (or below)
  if (*low > *high) return ctx.reply.ArrayLen(0);
  const auto found = store::StreamEntriesBetween(
      s.value.view(), *low, *high, count < 0 ? 0 : static_cast<size_t>(count), reverse);
  ctx.reply.ArrayLen(found.size());
  for (const auto& e : found) ReplyEntry(ctx, e);
}
void XRange(Context& ctx) { Range(ctx, false); }
void XRevRange(Context& ctx) { Range(ctx, true); }

void XDel(Context& ctx) {
  auto parsed = StrictIds(ctx, 2);
  if (!parsed) return;
  std::vector<StreamId>& ids = *parsed;
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  Loaded s;
  if (!Load(ctx, key, false, s)) return;
  if (!s.exists) return ctx.reply.Integer(0);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::vector<StreamId> present;
  for (StreamId id : ids) {
    const size_t at = s.r().LowerBound(id);
    if (at < s.r().entries().size() && s.r().entries()[at].id == id) present.push_back(id);
  }
  if (!present.empty() &&
      !Log(ctx, key, persist::StreamValue::kDelete, 0, store::EncodeStreamIds(present))) {
    return;
  }
  ctx.reply.Integer(static_cast<int64_t>(present.size()));
}

void XTrim(Context& ctx) {
  Trim trim;
  bool unused = false;
  if (!ParseTrim(ctx, 2, false, trim, unused)) return;
  if (trim.kind == Trim::kNone) return ctx.reply.Error(errors::kSyntax);
  const std::string_view key = ctx.args[1];
  KeyLocks lock(ctx.engine, key);
  Loaded s;
  if (!Load(ctx, key, false, s)) return;
  if (!s.exists) return ctx.reply.Integer(0);
  const uint64_t count = TrimCount(s.r().meta(), &s.r(), trim, false, {});
  s = Loaded{};
  if (count > 0 && !Log(ctx, key, persist::StreamValue::kTrim, count, Bytes())) return;
  ctx.reply.Integer(static_cast<int64_t>(count));
}

void XSetId(Context& ctx) {
  const std::string_view key = ctx.args[1];
  auto id = StrictId(ctx, ctx.args[2]);
  if (!id) return;
  std::optional<int64_t> entries_added;
  std::optional<StreamId> max_deleted;
  for (size_t i = 3; i < ctx.args.size(); ++i) {
    const bool more = i + 1 < ctx.args.size();
    if (EqualsIgnoreCase(ctx.args[i], "ENTRIESADDED") && more) {
      auto n = ParseInt64(ctx.args[++i]);
      if (!n) return ctx.reply.Error(errors::kNotInteger);
      if (*n < 0) return ctx.reply.Error("ERR entries_added must be positive");
      entries_added = *n;
    } else if (EqualsIgnoreCase(ctx.args[i], "MAXDELETEDID") && more) {
      auto m = StrictId(ctx, ctx.args[++i]);
      if (!m) return;
      if (*id < *m) {
        return ctx.reply.Error(
            "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id");
      }
      max_deleted = *m;
    } else {
      return ctx.reply.Error(errors::kSyntax);
    }
  }
  KeyLocks lock(ctx.engine, key);
  Loaded s;
  if (!Load(ctx, key, false, s)) return;
  if (!s.exists) return ctx.reply.Error("ERR no such key");
  const auto& meta = s.r().meta();
  if (entries_added && static_cast<uint64_t>(*entries_added) < meta.length) {
    return ctx.reply.Error(
        "ERR The entries_added specified in XSETID is smaller than the target stream length");
  }
  if (meta.length > 0 && *id < s.r().entries().back().id) {
    return ctx.reply.Error(
        "ERR The ID specified in XSETID is smaller than the target stream top item");
  }
  if (!Log(ctx, key, persist::StreamValue::kMeta, 0,
           store::EncodeStreamMetaChange(
               *id, max_deleted.value_or(meta.max_deleted),
               entries_added ? static_cast<uint64_t>(*entries_added) : meta.entries_added))) {
    return;
  }
  ctx.reply.Simple("OK");
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

std::string NoGroup(std::string_view key, std::string_view group) {
  return "NOGROUP No such consumer group '" + std::string(group) + "' for key name '" +
         std::string(key) + "'";
}

// CREATE and SETID: `id` or `$`, then [MKSTREAM] (CREATE) [ENTRIESREAD n].
void GroupSet(Context& ctx, bool create) {
  const std::string_view key = ctx.args[2], name = ctx.args[3], id_text = ctx.args[4];
  bool mkstream = false;
  int64_t entries_read = store::kEntriesReadUnknown;
  for (size_t i = 5; i < ctx.args.size(); ++i) {
    if (create && EqualsIgnoreCase(ctx.args[i], "MKSTREAM")) {
      mkstream = true;
    } else if (EqualsIgnoreCase(ctx.args[i], "ENTRIESREAD") && i + 1 < ctx.args.size()) {
      auto n = ParseInt64(ctx.args[++i]);
      if (!n) return ctx.reply.Error(errors::kNotInteger);
      if (*n < 0 && *n != store::kEntriesReadUnknown) {
        return ctx.reply.Error("ERR value for ENTRIESREAD must be positive or -1");
      }
      entries_read = *n;
    } else {
      return ctx.reply.Error(errors::kSyntax);
    }
  }
  KeyLocks lock(ctx.engine, key);
  Loaded s;
  if (!Load(ctx, key, false, s)) return;
  if (!s.exists && !(create && mkstream)) return ctx.reply.Error(kNeedsKey);
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
      return ctx.reply.Error("BUSYGROUP Consumer Group name already exists");
    }
    StreamGroup& g = groups[std::string(name)];
    g.last_delivered = id, g.entries_read = entries_read;
  } else {
    auto it = groups.find(std::string(name));
    if (it == groups.end()) return ctx.reply.Error(NoGroup(key, name));
    it->second.last_delivered = id, it->second.entries_read = entries_read;
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
    ctx.reply.Error(kNeedsKey);
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
  auto it = groups.find(std::string(group));
  if (it == groups.end()) return ctx.reply.Error(NoGroup(key, group));
  auto [c, created] = it->second.consumers.try_emplace(std::string(ctx.args[4]));
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
  auto it = groups.find(std::string(group));
  if (it == groups.end()) return ctx.reply.Error(NoGroup(key, group));
  StreamGroup& g = it->second;
  if (g.consumers.erase(consumer) == 0) return ctx.reply.Integer(0);
  int64_t pending = 0;
  for (auto p = g.pending.begin(); p != g.pending.end();) {
    if (p->second.consumer == consumer) {
      p = g.pending.erase(p), ++pending;
    } else {
      ++p;
    }
  }
  if (LogGroups(ctx, key, groups, s)) ctx.reply.Integer(pending);
}

// ---- XREAD, XREADGROUP --------------------------------------------------------------------

struct ReadArgs {
  int64_t count = 0;  // 0: no limit
  bool block = false;
  bool noack = false;
  std::string_view group, consumer;
  std::vector<std::string_view> keys, ids;
};

std::optional<ReadArgs> ParseRead(Context& ctx, bool with_group) {
  ReadArgs a;
  const auto& args = ctx.args;
  size_t i = 1;
  for (; i < args.size(); ++i) {
    const std::string_view t = args[i];
    const size_t left = args.size() - i - 1;
    if (EqualsIgnoreCase(t, "BLOCK") && left >= 1) {
      auto n = ParseInt64(args[++i]);
      if (!n) return ctx.reply.Error("ERR timeout is not an integer or out of range"), std::nullopt;
      if (*n < 0) return ctx.reply.Error("ERR timeout is negative"), std::nullopt;
      a.block = true;
    } else if (EqualsIgnoreCase(t, "COUNT") && left >= 1) {
      auto n = ParseInt64(args[++i]);
      if (!n) return ctx.reply.Error(errors::kNotInteger), std::nullopt;
      a.count = std::max<int64_t>(*n, 0);
    } else if (EqualsIgnoreCase(t, "STREAMS") && left >= 1) {
      ++i;
      break;
    } else if (EqualsIgnoreCase(t, "GROUP") && left >= 2 && with_group) {
      a.group = args[i + 1], a.consumer = args[i + 2];
      i += 2;
    } else if (EqualsIgnoreCase(t, "NOACK") && with_group) {
      a.noack = true;
    } else {
      return ctx.reply.Error(errors::kSyntax), std::nullopt;
    }
  }
  const size_t rest = args.size() - i;
  if (i >= args.size() || rest % 2 != 0) {
    const std::string name = with_group ? "xreadgroup" : "xread";
    ctx.reply.Error("ERR Unbalanced '" + name +
                    "' list of streams: for each stream key an ID or '$' must be specified.");
    return std::nullopt;
  }
  if (with_group && a.group.empty()) {
    ctx.reply.Error("ERR Missing GROUP option for XREADGROUP");
    return std::nullopt;
  }
  for (size_t k = 0; k < rest / 2; ++k) {
    a.keys.push_back(args[i + k]);
    a.ids.push_back(args[i + rest / 2 + k]);
  }
  return a;
}

void XRead(Context& ctx) {
  auto a = ParseRead(ctx, false);
  if (!a) return;
  std::vector<StreamId> after(a->keys.size());
  std::vector<bool> last(a->keys.size(), false);
  for (size_t k = 0; k < a->keys.size(); ++k) {
    if (a->ids[k] == ">") {
      return ctx.reply.Error(
          "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> "
          "<consumer> option.");
    }
    if (a->ids[k] == "$") {
      last[k] = true;
      continue;
    }
    auto id = IdArgument(ctx, a->ids[k], 0);
    if (!id) return;
    after[k] = *id;
  }
  std::vector<Loaded> loaded(a->keys.size());
  size_t with_data = 0;
  std::vector<std::pair<size_t, size_t>> ranges(a->keys.size(), {0, 0});
  for (size_t k = 0; k < a->keys.size(); ++k) {
    if (!Load(ctx, a->keys[k], true, loaded[k])) return;
    if (!loaded[k].exists || last[k]) continue;  // `$`: only entries added while blocked
    const auto& entries = loaded[k].r().entries();
    auto from = Next(after[k]);
    if (!from) continue;
    size_t begin = loaded[k].r().LowerBound(*from), end = entries.size();
    if (a->count > 0) end = std::min(end, begin + static_cast<size_t>(a->count));
    ranges[k] = {begin, end};
    if (end > begin) ++with_data;
  }
  if (with_data == 0) {
    if (a->block) return ctx.reply.Error(kBlockUnsupported);
    return ctx.reply.NullArray();
  }
  StreamsReplyLen(ctx, with_data);
  for (size_t k = 0; k < a->keys.size(); ++k) {
    auto [begin, end] = ranges[k];
    if (end <= begin) continue;
    if (ctx.reply.protocol() < 3) ctx.reply.ArrayLen(2);
    ctx.reply.Bulk(a->keys[k]);
    ctx.reply.ArrayLen(end - begin);
    for (size_t e = begin; e < end; ++e) ReplyEntry(ctx, loaded[k].r().entries()[e]);
  }
}

void XReadGroup(Context& ctx) {
  auto a = ParseRead(ctx, true);
  if (!a) return;
  for (std::string_view id : a->ids) {
    if (id == "$") {
      return ctx.reply.Error(
          "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history "
          "of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ "
          "ID would just return an empty result set.");
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
    if (!Load(ctx, a->keys[k], false, loaded[k])) return;
    if (loaded[k].exists) groups[k] = loaded[k].r().Groups();
    if (!loaded[k].exists || groups[k].count(std::string(a->group)) == 0) {
      return ctx.reply.Error("NOGROUP No such key '" + std::string(a->keys[k]) +
                             "' or consumer group '" + std::string(a->group) +
                             "' in XREADGROUP with GROUP option");
    }
  }
  const uint64_t now = static_cast<uint64_t>(CommandClock::WallMs());
  const std::string consumer(a->consumer);
  // What each key answers: entries (nullptr body: a pending id whose entry was deleted).
  struct Item {
    StreamId id;
    const store::StreamEntryView* entry;
  };
  std::vector<std::vector<Item>> items(a->keys.size());
  size_t answering = 0;
  for (size_t k = 0; k < a->keys.size(); ++k) {
    const StreamReader& r = loaded[k].r();
    StreamGroup& g = groups[k][std::string(a->group)];
    g.consumers[consumer].seen_ms = now;
    const size_t limit = a->count > 0 ? static_cast<size_t>(a->count) : SIZE_MAX;
    if (history[k]) {
      ++answering;  // a history read answers even when empty
      auto from = Next(*history[k]);
      for (auto it = from ? g.pending.lower_bound(*from) : g.pending.end();
           it != g.pending.end() && items[k].size() < limit; ++it) {
        if (it->second.consumer != consumer) continue;
        const size_t at = r.LowerBound(it->first);
        const bool present = at < r.entries().size() && r.entries()[at].id == it->first;
        items[k].push_back({it->first, present ? &r.entries()[at] : nullptr});
        it->second.delivery_ms = now, it->second.deliveries += 1;
      }
      continue;
    }
    const auto& entries = r.entries();
    auto from = Next(g.last_delivered);
    for (size_t e = from ? r.LowerBound(*from) : entries.size();
         e < entries.size() && items[k].size() < limit; ++e) {
      const StreamId id = entries[e].id;
      if (g.entries_read != store::kEntriesReadUnknown && !HasTombstones(r.meta(), id)) {
        g.entries_read += 1;
      } else if (r.meta().entries_added != 0) {
        g.entries_read = DistanceFromFirstEver(r.meta(), id);
      }
      g.last_delivered = id;
      items[k].push_back({id, &entries[e]});
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
      if (a->block) return ctx.reply.Error(kBlockUnsupported);
      return ctx.reply.NullArray();
    }
    StreamsReplyLen(ctx, answering);
    for (size_t k = 0; k < a->keys.size(); ++k) {
      if (!history[k] && items[k].empty()) continue;
      if (ctx.reply.protocol() < 3) ctx.reply.ArrayLen(2);
      ctx.reply.Bulk(a->keys[k]);
      ctx.reply.ArrayLen(items[k].size());
      for (const Item& item : items[k]) {
        if (item.entry != nullptr) {
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
  if (!Load(ctx, key, false, s)) return;
  if (!s.exists) return ctx.reply.Integer(0);
  StreamGroups groups = s.r().Groups();
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
  size_t i = 3;
  std::optional<StreamId> start, end;
  int64_t count = 0;
  std::optional<std::string_view> consumer;
  if (extended) {
    if (args.size() >= 6 && EqualsIgnoreCase(args[3], "IDLE")) {
      auto n = ParseInt64(args[4]);
      if (!n) return ctx.reply.Error(errors::kNotInteger);
      min_idle = *n, i = 5;
    }
    if (args.size() - i != 3 && args.size() - i != 4) return ctx.reply.Error(errors::kSyntax);
    const bool start_ex = args[i].starts_with('('), end_ex = args[i + 1].starts_with('(');
    start = IdArgument(ctx, start_ex ? args[i].substr(1) : args[i], 0);
    if (!start) return;
    end = IdArgument(ctx, end_ex ? args[i + 1].substr(1) : args[i + 1], UINT64_MAX);
    if (!end) return;
    if (start_ex) {
      start = Next(*start);
      if (!start) return ctx.reply.Error("ERR invalid start ID for the interval");
    }
    if (end_ex) {
      end = Prev(*end);
      if (!end) return ctx.reply.Error("ERR invalid end ID for the interval");
    }
    auto n = ParseInt64(args[i + 2]);
    if (!n) return ctx.reply.Error(errors::kNotInteger);
    count = std::max<int64_t>(*n, 0);
    if (args.size() - i == 4) consumer = args[i + 3];
  }
  Loaded s;
  if (!Load(ctx, key, true, s)) return;
  StreamGroups groups;
  if (s.exists) groups = s.r().Groups();
  auto it = groups.find(std::string(group));
  if (!s.exists || it == groups.end()) {
    return ctx.reply.Error("NOGROUP No such key '" + std::string(key) + "' or consumer group '" +
                           std::string(group) + "'");
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
    ctx.reply.Error("NOGROUP No such key '" + std::string(key) + "' or consumer group '" +
                    std::string(name) + "'");
    return false;
  }
  group = &it->second;
  return true;
}

std::optional<int64_t> MinIdle(Context& ctx, std::string_view command) {
  auto n = ParseInt64(ctx.args[4]);
  if (!n) {
    ctx.reply.Error("ERR Invalid min-idle-time argument for " + std::string(command));
    return std::nullopt;
  }
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
  size_t i = 5;
  for (; i < ctx.args.size(); ++i) {
    const std::string_view t = ctx.args[i];
    if (t == "-" || t == "+") break;
    auto id = ParseId(t, 0);
    if (!id) break;
    ids.push_back(*id);
  }
  const int64_t now = CommandClock::WallMs();
  int64_t delivery = now;
  int64_t retry = -1;
  bool force = false, justid = false;
  std::optional<StreamId> last_id;
  for (; i < ctx.args.size(); ++i) {
    const std::string_view t = ctx.args[i];
    const bool more = i + 1 < ctx.args.size();
    const auto number = [&](std::string_view what) -> std::optional<int64_t> {
      auto n = ParseInt64(ctx.args[++i]);
      if (!n) ctx.reply.Error("ERR Invalid " + std::string(what) + " option argument for XCLAIM");
      return n;
    };
    if (EqualsIgnoreCase(t, "FORCE")) {
      force = true;
    } else if (EqualsIgnoreCase(t, "JUSTID")) {
      justid = true;
    } else if (EqualsIgnoreCase(t, "IDLE") && more) {
      auto n = number("IDLE");
      if (!n) return;
      delivery = now - *n;
    } else if (EqualsIgnoreCase(t, "TIME") && more) {
      auto n = number("TIME");
      if (!n) return;
      delivery = *n;
    } else if (EqualsIgnoreCase(t, "RETRYCOUNT") && more) {
      auto n = number("RETRYCOUNT");
      if (!n) return;
      retry = *n;
    } else if (EqualsIgnoreCase(t, "LASTID") && more) {
      last_id = StrictId(ctx, ctx.args[++i]);
      if (!last_id) return;
    } else {
      return ctx.reply.Error("ERR Unrecognized XCLAIM option '" + std::string(t) + "'");
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
  for (size_t i = 6; i < ctx.args.size(); ++i) {
    if (EqualsIgnoreCase(ctx.args[i], "JUSTID")) {
      justid = true;
    } else if (EqualsIgnoreCase(ctx.args[i], "COUNT") && i + 1 < ctx.args.size()) {
      auto n = ParseInt64(ctx.args[++i]);
      // Redis's bound: ten attempts per claim must not overflow.
      if (!n || *n < 1 || *n > INT64_MAX / 16) return ctx.reply.Error("ERR COUNT must be > 0");
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
  if (!s.exists) ctx.reply.Error("ERR no such key");
  return s.exists;
}

void XInfoStream(Context& ctx) {
  const std::string_view key = ctx.args[2];
  bool full = false;
  int64_t count = 10;
  if (ctx.args.size() > 3) {
    if (!EqualsIgnoreCase(ctx.args[3], "FULL")) return ctx.reply.Error(errors::kSyntax);
    full = true;
    if (ctx.args.size() == 6 && EqualsIgnoreCase(ctx.args[4], "COUNT")) {
      auto n = ParseInt64(ctx.args[5]);
      if (!n) return ctx.reply.Error(errors::kNotInteger);
      count = std::max<int64_t>(*n, 0);
    } else if (ctx.args.size() != 4) {
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
  const StreamGroups groups = s.r().Groups();
  auto it = groups.find(std::string(group));
  if (it == groups.end()) return ctx.reply.Error(NoGroup(key, group));
  const int64_t now = CommandClock::WallMs();
  ctx.reply.ArrayLen(it->second.consumers.size());
  for (const auto& [cname, c] : it->second.consumers) {
    int64_t pending = 0;
    for (const auto& [id, p] : it->second.pending) pending += p.consumer == cname ? 1 : 0;
    ctx.reply.MapLen(3);
    ctx.reply.Bulk("name");
    ctx.reply.Bulk(cname);
    ctx.reply.Bulk("pending");
    ctx.reply.Integer(pending);
    ctx.reply.Bulk("idle");
    ctx.reply.Integer(std::max<int64_t>(0, now - static_cast<int64_t>(c.seen_ms)));
  }
}

// ---- the table ----------------------------------------------------------------------------------

CommandSpec WithTips(CommandSpec s, std::vector<std::string> tips) {
  s.tips = std::move(tips);
  return s;
}

// XREAD and XREADGROUP: keys after STREAMS, half of what follows (Redis's key spec).
KeySpec StreamsKeySpec(uint32_t flags, int start_from) {
  KeySpec k;
  k.flags = flags, k.by_keyword = true, k.keyword = "STREAMS", k.keyword_start_from = start_from;
  k.last_key = -1, k.key_step = 1, k.limit = 2;
  return k;
}

}  // namespace

void RegisterStreamCommands(Registry& r) {
  const uint32_t acl = kAclStream;
  const Arg key = KeyArg("key"), id = StrArg("id");
  const auto one_key = [&](std::string name, int arity, uint32_t flags, std::string syntax,
                           std::string summary, Handler h, std::string complexity,
                           std::string since, uint32_t key_flags, std::vector<Arg> args,
                           std::vector<std::string> tips = {}, std::string notes = {}) {
    CommandSpec s = AsRedis(MakeSpec("stream", 1, std::move(name), arity, flags, std::move(syntax),
                                     std::move(summary), h, std::move(complexity)),
                            std::move(since), acl, std::move(tips), std::move(args));
    s.key_specs = {RangeKeySpec(key_flags, 1)};
    s.key_specs[0].notes = std::move(notes);
    r.Add(std::move(s));
  };
  const Arg trim = BlockArg(
      "trim", kArgOptional,
      {OneOfArg("strategy", 0, {TokenArg("maxlen", "MAXLEN"), TokenArg("minid", "MINID", "6.2.0")}),
       OneOfArg("operator", kArgOptional, {TokenArg("equal", "="), TokenArg("approximately", "~")}),
       StrArg("threshold"), Tokened(IntArg("count", kArgOptional), "LIMIT", "6.2.0")});
  const std::string log_n = "O(1) per entry added, O(N) in the entries removed";
  one_key("xadd", -5, kWrite | kDenyOom | kFast,
          "<key> [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] <*|id> <field> "
          "<value> [field value ...]",
          "Appends an entry to a stream; its id.", XAdd, log_n, "5.0.0", kKeyRW | kKeyUpdate,
          {key, TokenArg("nomkstream", "NOMKSTREAM", "6.2.0"), trim,
           OneOfArg("id_or_auto", 0, {TokenArg("auto_id", "*"), id}),
           Many(BlockArg("data", 0, {StrArg("field"), StrArg("value")}))},
          {"nondeterministic_output"},
          "UPDATE instead of INSERT because of the optional trimming feature");
  one_key("xlen", 2, kReadonly | kFast, "<key>", "The number of entries of a stream.", XLen, "O(1)",
          "5.0.0", kKeyRO, {key});
  const std::vector<Arg> range = {key, StrArg("start"), StrArg("end"),
                                  Tokened(IntArg("count", kArgOptional), "COUNT")};
  one_key("xrange", -4, kReadonly, "<key> <start> <end> [COUNT count]",
          "The entries between two ids, oldest first.", XRange,
          "O(log(N)+M), M the entries returned", "5.0.0", kKeyRO | kKeyAccess, range);
  one_key("xrevrange", -4, kReadonly, "<key> <end> <start> [COUNT count]",
          "The entries between two ids, newest first.", XRevRange,
          "O(log(N)+M), M the entries returned", "5.0.0", kKeyRO | kKeyAccess,
          {key, StrArg("end"), StrArg("start"), Tokened(IntArg("count", kArgOptional), "COUNT")});
  one_key("xdel", -3, kWrite | kFast, "<key> <id> [id ...]",
          "Deletes entries by id; how many were there.", XDel, "O(N) in the stream's size", "5.0.0",
          kKeyRW | kKeyDelete, {key, Many(id)});
  one_key("xtrim", -4, kWrite, "<key> MAXLEN|MINID [=|~] <threshold> [LIMIT count]",
          "Removes the oldest entries past a length or below an id; how many.", XTrim, log_n,
          "5.0.0", kKeyRW | kKeyDelete,
          {key,
           BlockArg(
               "trim", 0,
               {OneOfArg("strategy", 0, {TokenArg("maxlen", "MAXLEN"), TokenArg("minid", "MINID")}),
                OneOfArg("operator", kArgOptional,
                         {TokenArg("equal", "="), TokenArg("approximately", "~")}),
                StrArg("threshold"), Tokened(IntArg("count", kArgOptional), "LIMIT", "6.2.0")})},
          {"nondeterministic_output"});
  one_key("xsetid", -3, kWrite | kDenyOom | kFast,
          "<key> <last-id> [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]",
          "Sets a stream's last id and counters.", XSetId, "O(1)", "5.0.0", kKeyRW | kKeyUpdate,
          {key, StrArg("last-id"), Tokened(IntArg("entries_added", kArgOptional), "ENTRIESADDED"),
           Tokened(StrArg("max_deleted_entry_id", kArgOptional), "MAXDELETEDID")});
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

  const auto streams_command = [&](std::string name, int arity, uint32_t flags, std::string syntax,
                                   std::string summary, Handler h, uint32_t key_flags,
                                   std::vector<Arg> args) {
    CommandSpec s =
        // Flagged blocking as Redis's are (a BLOCK that would wait is refused here).
        AsRedis(MakeSpec("stream", 0, std::move(name), arity, flags | kMovableKeys | kBlocking,
                         std::move(syntax), std::move(summary), h, "O(N) in the entries returned"),
                "5.0.0", acl | kAclBlocking, {}, std::move(args));
    // XREADGROUP's keyword search starts after GROUP <group> <consumer>, as Redis's.
    s.key_specs = {StreamsKeySpec(key_flags, s.name == "xreadgroup" ? 4 : 1)};
    r.Add(std::move(s));
  };
  const Arg streams = BlockArg("streams", 0, {Many(KeyArg("key")), Many(id)}, "STREAMS");
  streams_command("xread", -4, kReadonly,
                  "[COUNT count] [BLOCK milliseconds] STREAMS <key> [key ...] <id> [id ...]",
                  "New entries of one or more streams after the given ids (no blocking wait).",
                  XRead, kKeyRO | kKeyAccess,
                  {Tokened(IntArg("count", kArgOptional), "COUNT"),
                   Tokened(IntArg("milliseconds", kArgOptional), "BLOCK"), streams});
  streams_command(
      "xreadgroup", -7, kWrite,
      "GROUP <group> <consumer> [COUNT count] [BLOCK milliseconds] [NOACK] STREAMS <key> "
      "[key ...] <id> [id ...]",
      "Reads entries for a consumer of a group: new ones (>) or its pending history.", XReadGroup,
      kKeyRO | kKeyAccess,
      {BlockArg("group_block", 0, {StrArg("group"), StrArg("consumer")}, "GROUP"),
       Tokened(IntArg("count", kArgOptional), "COUNT"),
       Tokened(IntArg("milliseconds", kArgOptional), "BLOCK"), TokenArg("noack", "NOACK"),
       streams});

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
      AsRedis(
          MakeSpec(
              "stream", 0, "help", 2, kLoading | kStale, "", "Lists the XGROUP subcommands.",
              [](Context& ctx) { HelpReply(ctx, *ctx.engine.registry->Find("xgroup")); }, "O(1)"),
          "5.0.0", acl),
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
      AsRedis(
          MakeSpec(
              "stream", 0, "help", 2, kLoading | kStale, "", "Lists the XINFO subcommands.",
              [](Context& ctx) { HelpReply(ctx, *ctx.engine.registry->Find("xinfo")); }, "O(1)"),
          "5.0.0", acl),
  };
  r.Add(std::move(xinfo));
}

}  // namespace prefixd::commands
