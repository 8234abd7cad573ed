// Redis's stream commands on a stream's entries, with Redis 7.0.15's replies and errors: XADD,
// XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XREAD, XSETID; the consumer groups' commands are in
// stream_group_commands.cc. No blocking: a BLOCK that would wait is refused
// (docs/compatibility.md). A stream lives in its keyspace entry (store/stream.h); every change is
// one StreamValue record naming only what it changes (an entry, a trim count, deleted ids, the
// groups, the header). A read-modify-write holds its key's lock stripe (KeyLocks).
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
  ArgReader r(ctx, from);
  bool limit_given = false;
  while (r.more()) {
    if (xadd && r.Keyword("NOMKSTREAM")) {
      nomkstream = true;
    } else if (auto strategy = r.OneOf({"MAXLEN", "MINID"}, 1)) {
      const bool maxlen = *strategy == 0;
      if (trim.kind != Trim::kNone && trim.kind != (maxlen ? Trim::kMaxLen : Trim::kMinId)) {
        return r.Fail(errors::kMaxLenAndMinId), std::nullopt;
      }
      trim.approx = false;
      if ((r.Peek() == "~" || r.Peek() == "=") && r.remaining() >= 2) trim.approx = r.Next() == "~";
      if (maxlen) {
        auto n = r.Integer();
        if (!n) return std::nullopt;
        if (*n < 0) return r.Fail(errors::kMaxLenNegative), std::nullopt;
        trim.kind = Trim::kMaxLen, trim.maxlen = static_cast<uint64_t>(*n);
      } else {
        auto id = StrictId(ctx, r.Next());
        if (!id) return std::nullopt;
        trim.kind = Trim::kMinId, trim.minid = *id;
      }
    } else if (r.Keyword("LIMIT", 1)) {
      auto n = r.Integer();
      if (!n) return std::nullopt;
      if (*n < 0) return r.Fail(errors::kLimitNegative), std::nullopt;
      trim.limit = *n, limit_given = true;
    } else if (xadd) {
      break;  // the id
    } else {
      return r.Fail(errors::kSyntax), std::nullopt;
    }
  }
  if (limit_given && !trim.approx) return r.Fail(errors::kLimitWithoutApprox), std::nullopt;
  return r.position();
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
      if (!ms) return ctx.reply.Error(errors::kInvalidStreamId);
      given = {*ms, 0}, auto_seq = true;
    } else {
      auto id = StrictId(ctx, t);
      if (!id) return;
      given = *id;
    }
    if (!auto_seq && given == StreamId{}) return ctx.reply.Error(errors::kXAddIdZero);
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
  if (last == StreamId::Max())
    return ctx.reply.Error(errors::kStreamIdExhausted);  // whatever the id
  StreamId id;
  if (auto_id) {
    const StreamId now{static_cast<uint64_t>(NowMs()), 0};
    if (now.ms > last.ms) {
      id = now;
    } else {
      id = *Next(last);
    }
  } else if (auto_seq) {
    if (given.ms < last.ms) return ctx.reply.Error(errors::kXAddIdTooSmall);
    if (given.ms == last.ms) {
      if (last.seq == UINT64_MAX) return ctx.reply.Error(errors::kXAddIdTooSmall);
      id = {given.ms, last.seq + 1};
    } else {
      id = given;
    }
  } else {
    if (given <= last) return ctx.reply.Error(errors::kXAddIdTooSmall);
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
    if (!n) return ctx.reply.Error(errors::kInvalidStartId);
    low = n;
  }
  if (high_ex) {
    auto p = Prev(*high);
    if (!p) return ctx.reply.Error(errors::kInvalidEndId);
    high = p;
  }
  int64_t count = -1;
  for (ArgReader r(ctx, 4); r.more();) {
    if (!r.Keyword("COUNT", 1)) return ctx.reply.Error(errors::kSyntax);
    auto n = r.Integer();
    if (!n) return;
    count = std::max<int64_t>(*n, 0);
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
  for (ArgReader r(ctx, 3); r.more();) {
    if (r.Keyword("ENTRIESADDED", 1)) {
      auto n = r.Integer();
      if (!n) return;
      if (*n < 0) return ctx.reply.Error(errors::kEntriesAddedNegative);
      entries_added = *n;
    } else if (r.Keyword("MAXDELETEDID", 1)) {
      auto m = StrictId(ctx, r.Next());
      if (!m) return;
      if (*id < *m) return ctx.reply.Error(errors::kXSetIdBelowMaxDeleted);
      max_deleted = *m;
    } else {
      return ctx.reply.Error(errors::kSyntax);
    }
  }
  KeyLocks lock(ctx.engine, key);
  Loaded s;
  if (!Load(ctx, key, false, s)) return;
  if (!s.exists) return ctx.reply.Error(errors::kNoSuchKey);
  const auto& meta = s.r().meta();
  if (entries_added && static_cast<uint64_t>(*entries_added) < meta.length) {
    return ctx.reply.Error(errors::kXSetIdBelowLength);
  }
  if (meta.length > 0 && *id < s.r().entries().back().id) {
    return ctx.reply.Error(errors::kXSetIdBelowTop);
  }
  if (!Log(ctx, key, persist::StreamValue::kMeta, 0,
           store::EncodeStreamMetaChange(
               *id, max_deleted.value_or(meta.max_deleted),
               entries_added ? static_cast<uint64_t>(*entries_added) : meta.entries_added))) {
    return;
  }
  ctx.reply.Simple("OK");
}

// ---- XREAD -------------------------------------------------------------------------------------

void XRead(Context& ctx) {
  auto a = ParseRead(ctx, false);
  if (!a) return;
  std::vector<StreamId> after(a->keys.size());
  std::vector<bool> last(a->keys.size(), false);
  for (size_t k = 0; k < a->keys.size(); ++k) {
    if (a->ids[k] == ">") {
      return ctx.reply.Error(errors::kXReadGreaterId);
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
  std::vector<std::vector<store::StreamEntryView>> found(a->keys.size());
  size_t with_data = 0;
  for (size_t k = 0; k < a->keys.size(); ++k) {
    if (!Load(ctx, a->keys[k], true, loaded[k], /*index=*/false)) return;
    if (!loaded[k].exists || last[k]) continue;  // `$`: only entries added while blocked
    auto from = Next(after[k]);
    if (!from) continue;
    found[k] = store::StreamEntriesBetween(loaded[k].value.view(), *from, StreamId::Max(),
                                           static_cast<size_t>(a->count), false);
    if (!found[k].empty()) ++with_data;
  }
  if (with_data == 0) {
    if (a->block) return ctx.reply.Error(errors::kBlockUnsupported);
    return ctx.reply.NullArray();
  }
  StreamsReplyLen(ctx, with_data);
  for (size_t k = 0; k < a->keys.size(); ++k) {
    if (found[k].empty()) continue;
    if (ctx.reply.protocol() < 3) ctx.reply.ArrayLen(2);
    ctx.reply.Bulk(a->keys[k]);
    ctx.reply.ArrayLen(found[k].size());
    for (const store::StreamEntryView& e : found[k]) ReplyEntry(ctx, e);
  }
}

}  // namespace
}  // namespace prefixd::commands::stream

namespace prefixd::commands {

void RegisterStreamCommands(Registry& r) {
  using namespace stream;
  const OneKeyStream one_key(r);
  const Arg key = KeyArg("key"), id = StrArg("id");
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
  AddStreamsCommand(r, "xread", -4, kReadonly,
                    "[COUNT count] [BLOCK milliseconds] STREAMS <key> [key ...] <id> [id ...]",
                    "New entries of one or more streams after the given ids (no blocking wait).",
                    XRead, kKeyRO | kKeyAccess,
                    {Tokened(IntArg("count", kArgOptional), "COUNT"),
                     Tokened(IntArg("milliseconds", kArgOptional), "BLOCK"),
                     BlockArg("streams", 0, {Many(KeyArg("key")), Many(id)}, "STREAMS")});
}

}  // namespace prefixd::commands
