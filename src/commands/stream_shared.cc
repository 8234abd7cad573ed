#include "commands/stream_shared.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "commands/arg_reader.h"
#include "common/ascii.h"
#include "common/numbers.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/keys.h"
#include "engine/write_path.h"

namespace prefixd::commands::stream {

bool Load(Context& ctx, std::string_view key, bool read, Loaded& out, bool index) {
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

StreamGroups Loaded::Groups() const {
  return store::DecodeStreamGroups(store::StreamGroupsBytes(value.view())).value_or(StreamGroups{});
}

bool Log(Context& ctx, std::string_view key, uint32_t op, uint64_t count, Bytes value) {
  persist::Blob blob;
  if (!value.empty()) blob.pieces.push_back(std::move(value));
  return Mutate(ctx, persist::StreamValue{std::string(key), op, count, std::move(blob)})
      .has_value();
}

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

std::optional<StreamId> ParseId(std::string_view text, uint64_t missing_seq, bool* seq_given) {
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
  if (!id) ctx.reply.Error(errors::kInvalidStreamId);
  return id;
}
std::optional<StreamId> StrictId(Context& ctx, std::string_view text, uint64_t missing_seq) {
  if (text == "-" || text == "+") {
    ctx.reply.Error(errors::kInvalidStreamId);
    return std::nullopt;
  }
  return IdArgument(ctx, text, missing_seq);
}
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

void StreamsReplyLen(Context& ctx, size_t n) {
  if (ctx.reply.protocol() >= 3) {
    ctx.reply.MapLen(n);
  } else {
    ctx.reply.ArrayLen(n);
  }
}

std::optional<ReadArgs> ParseRead(Context& ctx, bool with_group) {
  ReadArgs a;
  const auto& args = ctx.args;
  ArgReader r(ctx, 1);
  while (r.more()) {
    if (r.Keyword("BLOCK", 1)) {
      auto n = r.Integer(INT64_MIN, INT64_MAX, errors::kTimeoutNotInteger);
      if (!n) return std::nullopt;
      if (*n < 0) return r.Fail(errors::kTimeoutNegative), std::nullopt;
      a.block = true;
    } else if (r.Keyword("COUNT", 1)) {
      auto n = r.Integer();
      if (!n) return std::nullopt;
      a.count = std::max<int64_t>(*n, 0);
    } else if (r.Keyword("STREAMS", 1)) {
      break;
    } else if (with_group && r.Keyword("GROUP", 2)) {
      a.group = r.Next(), a.consumer = r.Next();
    } else if (with_group && r.Keyword("NOACK")) {
      a.noack = true;
    } else {
      return r.Fail(errors::kSyntax), std::nullopt;
    }
  }
  const size_t i = r.position();
  const size_t rest = args.size() - i;
  if (i >= args.size() || rest % 2 != 0) {
    ctx.reply.Error(errors::UnbalancedStreams(with_group ? "xreadgroup" : "xread"));
    return std::nullopt;
  }
  if (with_group && a.group.empty()) {
    ctx.reply.Error(errors::kMissingGroup);
    return std::nullopt;
  }
  for (size_t k = 0; k < rest / 2; ++k) {
    a.keys.push_back(args[i + k]);
    a.ids.push_back(args[i + rest / 2 + k]);
  }
  return a;
}

void OneKeyStream::operator()(std::string name, int arity, uint32_t flags, std::string syntax,
                              std::string summary, Handler h, std::string complexity,
                              std::string since, uint32_t key_flags, std::vector<Arg> args,
                              std::vector<std::string> tips, std::string notes) const {
  CommandSpec s = AsRedis(MakeSpec("stream", 1, std::move(name), arity, flags, std::move(syntax),
                                   std::move(summary), h, std::move(complexity)),
                          std::move(since), kAclStream, std::move(tips), std::move(args));
  s.key_specs = {RangeKeySpec(key_flags, 1)};
  s.key_specs[0].notes = std::move(notes);
  registry_.Add(std::move(s));
}

void AddStreamsCommand(Registry& r, std::string name, int arity, uint32_t flags, std::string syntax,
                       std::string summary, Handler h, uint32_t key_flags, std::vector<Arg> args) {
  CommandSpec s =
      AsRedis(MakeSpec("stream", 0, std::move(name), arity, flags | kMovableKeys | kBlocking,
                       std::move(syntax), std::move(summary), h, "O(N) in the entries returned"),
              "5.0.0", kAclStream | kAclBlocking, {}, std::move(args));
  // Keys after STREAMS, half of what follows (Redis's key spec); XREADGROUP's keyword search
  // starts after GROUP <group> <consumer>, as Redis's.
  KeySpec k;
  k.flags = key_flags, k.by_keyword = true, k.keyword = "STREAMS";
  k.keyword_start_from = s.name == "xreadgroup" ? 4 : 1;
  k.last_key = -1, k.key_step = 1, k.limit = 2;
  s.key_specs = {k};
  r.Add(std::move(s));
}

}  // namespace prefixd::commands::stream
