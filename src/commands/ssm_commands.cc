// SSM.PREFIX.*: recurrent-state blobs per (session id, layer). Blobs are opaque bytes, stored and
// returned bit for bit; large ones travel from the socket buffer to the store and back to the
// socket without a copy.
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "commands/arg_reader.h"
#include "commands/cold_reply.h"
#include "commands/families.h"
#include "commands/output_limit.h"
#include "common/clock.h"
#include "common/numbers.h"
#include "common/scratch_array.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/keys.h"
#include "engine/memory_policy.h"
#include "engine/write_path.h"
#include "store/compact_session.h"

namespace prefixd::commands {
namespace {

using errors::Quoted;

constexpr int64_t kMaxLayer = std::numeric_limits<int32_t>::max();

// The argument checks, quiet (the compact read tries them without replying) and reporting.
bool SidQuietly(const Context& ctx, std::string_view sid) {
  return static_cast<int64_t>(sid.size()) <= ctx.engine.settings().Int(Setting::kMaxSidLen);
}

std::optional<uint32_t> LayerQuietly(std::string_view text) {
  auto v = ParseInt64(text);
  if (!v || *v < 0 || *v > kMaxLayer) return std::nullopt;
  return static_cast<uint32_t>(*v);
}

// Checks the session id; on failure queues the error and returns false.
bool ValidSid(Context& ctx, std::string_view sid) {
  if (SidQuietly(ctx, sid)) return true;
  ctx.reply.Error(errors::SidTooLong(sid.size(), ctx.engine.settings().Int(Setting::kMaxSidLen)));
  return false;
}

std::optional<uint32_t> ParseLayer(Context& ctx, std::string_view text) {
  auto layer = LayerQuietly(text);
  if (!layer) ctx.reply.Error(errors::NotInRange("layer", Quoted(text), 0, kMaxLayer));
  return layer;
}

std::optional<uint64_t> ParseOffset(Context& ctx, std::string_view what, std::string_view text) {
  auto v = ParseInt64(text);
  if (!v || *v < 0) {
    ctx.reply.Error(errors::NotNonNegative(what, Quoted(text)));
    return std::nullopt;
  }
  return static_cast<uint64_t>(*v);
}

void CountLookup(Context& ctx, bool hit) {
  (hit ? ctx.engine.stats().keyspace_hits : ctx.engine.stats().keyspace_misses).Add();
}

void Put(Context& ctx, std::string_view sid, persist::LayerBlobs layers) {
  if (Mutate(ctx, persist::SsmPut{std::string(sid), std::move(layers)})) ctx.reply.Simple("OK");
}

void Store(Context& ctx) {
  if (!ValidSid(ctx, ctx.args[1])) return;
  auto layer = ParseLayer(ctx, ctx.args[2]);
  if (!layer) return;
  std::vector<std::pair<uint32_t, Bytes>> layers;
  layers.emplace_back(*layer, ctx.args.TakeBytes(3));
  Put(ctx, ctx.args[1], std::move(layers));
}

void MStore(Context& ctx) {
  const auto& args = ctx.args;
  if ((args.size() - 2) % 2 != 0) return ctx.reply.Error(errors::WrongArity(ctx.spec.full_name));
  if (!ValidSid(ctx, args[1])) return;
  std::vector<std::pair<uint32_t, Bytes>> layers;
  layers.reserve((args.size() - 2) / 2);
  for (size_t i = 2; i < args.size(); i += 2) {
    auto layer = ParseLayer(ctx, args[i]);
    if (!layer) return;
    layers.emplace_back(*layer, args.TakeBytes(i + 1));
  }
  Put(ctx, args[1], std::move(layers));
}

// FETCH's and MFETCH's common case, as GET's: a small session in its keyspace entry, read and
// framed in one lock hold without a copy. Tried only when the arguments are well formed, and
// before the typed-key check (the spec leaves it to the handler): a compact entry is a live SSM
// session, so that check would pass. False: nothing was queued; the caller goes the general way,
// which answers any error in the order it always has.
bool FetchCompact(Context& ctx) {
  const auto& args = ctx.args;
  if (args.size() != 3 || !SidQuietly(ctx, args[1])) return false;
  const auto layer = LayerQuietly(args[2]);
  if (!layer) return false;
  const auto read = Db(ctx).keys.ReadCompactSessionLive(
      args[1], CommandClock::WallMs(), [&](std::string_view session) {
        const auto bytes = store::compact_session::FindLayer(session, *layer);
        CountLookup(ctx, bytes.has_value());
        bytes ? ctx.reply.Bulk(*bytes) : ctx.reply.Null();
        return true;
      });
  return read == store::Keyspace::InlineRead::kCopied;
}

// MFETCH's compact reply framed on the stack and queued with one append: the array's header and
// each layer's bulk (an append each cost more than the lookup). Declines (false) when the reply
// outgrows the buffer; the caller then frames it piece by piece.
class FramedOnStack {
 public:
  explicit FramedOnStack(int protocol) : null_(protocol >= 3 ? "_\r\n" : "$-1\r\n") {}
  bool Header(char type, size_t n) { return Number(type, n); }
  bool Bulk(std::optional<std::string_view> bytes) {
    if (!bytes) return Put(null_);
    if (!Number('$', bytes->size()) || bytes->size() + 2 > bytes_.size() - size_) return false;
    std::memcpy(bytes_.data() + size_, bytes->data(), bytes->size());
    size_ += bytes->size();
    bytes_[size_++] = '\r';
    bytes_[size_++] = '\n';
    return true;
  }
  std::string_view view() const { return std::string_view(bytes_.data(), size_); }

 private:
  // The type, the number and CRLF, written in place: no piece of its own to copy.
  bool Number(char type, size_t n) {
    constexpr size_t kLongest = 1 + 20 + 2;
    if (bytes_.size() - size_ < kLongest) return false;
    char* at = bytes_.data() + size_;
    *at++ = type;
    at = std::to_chars(at, at + 20, n).ptr;
    *at++ = '\r';
    *at++ = '\n';
    size_ = static_cast<size_t>(at - bytes_.data());
    return true;
  }
  bool Put(std::string_view piece) {
    if (piece.size() > bytes_.size() - size_) return false;
    std::memcpy(bytes_.data() + size_, piece.data(), piece.size());
    size_ += piece.size();
    return true;
  }
  std::array<char, 256> bytes_;  // uninitialised: every byte viewed is written
  size_t size_ = 0;
  std::string_view null_;
};

bool MFetchCompact(Context& ctx) {
  const auto& args = ctx.args;
  if (!SidQuietly(ctx, args[1])) return false;
  ScratchArray<uint32_t, 16> scratch(args.size() - 2);
  const std::span<uint32_t> layers = scratch.span();
  for (size_t i = 2; i < args.size(); ++i) {
    const auto layer = LayerQuietly(args[i]);
    if (!layer) return false;
    layers[i - 2] = *layer;
  }
  const auto read = Db(ctx).keys.ReadCompactSessionLive(
      args[1], CommandClock::WallMs(), [&](std::string_view session) {
        // Each layer is found once; a reply past the output limit is declined here and refused
        // the general way. The hits are counted once the reply is queued.
        uint64_t total = 0, hits = 0;
        FramedOnStack framed(ctx.reply.protocol());
        bool on_stack = framed.Header('*', layers.size());
        for (const uint32_t layer : layers) {
          const auto bytes = store::compact_session::FindLayer(session, layer);
          total += bytes ? bytes->size() + 16 : 5;
          hits += bytes.has_value();
          on_stack = on_stack && framed.Bulk(bytes);
        }
        if (!FitsOutputLimitQuietly(ctx, total)) return false;
        if (on_stack) {
          ctx.reply.Raw(framed.view());
        } else {
          ctx.reply.ArrayLen(layers.size());
          for (const uint32_t layer : layers) {
            const auto bytes = store::compact_session::FindLayer(session, layer);
            bytes ? ctx.reply.Bulk(*bytes) : ctx.reply.Null();
          }
        }
        if (hits > 0) ctx.engine.stats().keyspace_hits.Add(hits);
        if (hits < layers.size()) ctx.engine.stats().keyspace_misses.Add(layers.size() - hits);
        return true;
      });
  return read == store::Keyspace::InlineRead::kCopied;
}

void Fetch(Context& ctx) {
  if (FetchCompact(ctx) || !PrepareTypedKeys(ctx)) return;
  const auto& args = ctx.args;
  if (args.size() != 3 && args.size() != 6) return ctx.reply.Error(errors::kSyntax);
  if (!ValidSid(ctx, args[1])) return;
  auto layer = ParseLayer(ctx, args[2]);
  if (!layer) return;
  uint64_t offset = 0, length = std::numeric_limits<uint64_t>::max();
  if (ArgReader r(ctx, 3); r.more()) {
    if (!r.Keyword("RANGE")) return ctx.reply.Error(errors::kSyntax);
    auto o = ParseOffset(ctx, "offset", r.Next());
    if (!o) return;
    auto l = ParseOffset(ctx, "length", r.Next());
    if (!l) return;
    offset = *o, length = *l;
  }
  store::Database& db = Db(ctx);
  if (args.size() == 3) PromoteOnRead(ctx.engine, db, args[1]);  // a ranged read stays on disk
  auto value = db.state.FetchRange(args[1], *layer, offset, length, kStreamColdFrom);
  CountLookup(ctx, value.has_value());
  if (!value) return ctx.reply.Null();
  if (!value->streamed()) return ctx.reply.Bulk(value->value);
  BulkCold(ctx.reply, std::make_shared<ColdPlan>(std::vector{value->extent}), 0);
}

void MFetch(Context& ctx) {
  if (MFetchCompact(ctx) || !PrepareTypedKeys(ctx)) return;
  const auto& args = ctx.args;
  if (!ValidSid(ctx, args[1])) return;
  std::vector<uint32_t> layers;
  layers.reserve(args.size() - 2);
  for (ArgReader r(ctx, 2); r.more();) {
    auto layer = ParseLayer(ctx, r.Next());
    if (!layer) return;
    layers.push_back(*layer);
  }
  store::Database& db = Db(ctx);
  PromoteOnRead(ctx.engine, db, args[1]);
  auto values = db.state.FetchMany(args[1], layers, kStreamColdFrom);
  // Repeated layers are queued once each: the sum, not the distinct bytes, is what is held.
  uint64_t total = 0;
  std::vector<store::ColdExtent> streamed;
  for (const auto& v : values) {
    total += v ? v->size() + 16 : 5;
    if (v && v->streamed()) streamed.push_back(v->extent);
  }
  if (!FitsOutputLimit(ctx, total, "SSM.PREFIX.MFETCH", "fetch fewer layers per call")) return;
  // Large cold layers are read from disk as they are sent.
  auto plan = streamed.empty() ? nullptr : std::make_shared<ColdPlan>(std::move(streamed));
  size_t next_streamed = 0;
  ctx.reply.ArrayLen(values.size());
  for (const auto& v : values) {
    CountLookup(ctx, v.has_value());
    if (!v) {
      ctx.reply.Null();
    } else if (v->streamed()) {
      BulkCold(ctx.reply, plan, next_streamed++);
    } else {
      ctx.reply.Bulk(v->value);
    }
  }
}

void Drop(Context& ctx) {
  const std::string_view sid = ctx.args[1];
  ArgReader r(ctx, 2);  // [layer]
  if (r.remaining() > 1) return ctx.reply.Error(errors::kSyntax);
  if (!ValidSid(ctx, sid)) return;
  std::optional<persist::Outcome> done;
  if (r.more()) {
    auto layer = ParseLayer(ctx, r.Next());
    if (!layer) return;
    done = Mutate(ctx, persist::SsmDropLayer{std::string(sid), *layer});
  } else {
    done = Mutate(ctx, persist::SsmDropSession{std::string(sid)});
  }
  if (!done) return;
  ctx.reply.Simple("OK");
}

void Layers(Context& ctx) {
  if (!ValidSid(ctx, ctx.args[1])) return;
  auto layers = Db(ctx).state.Layers(ctx.args[1]);
  ctx.reply.MapLen(layers.size());
  for (const auto& l : layers) {
    ctx.reply.Integer(l.layer);
    ctx.reply.Integer(static_cast<int64_t>(l.size));
  }
}

}  // namespace

void RegisterSsmCommands(Registry& r) {
  auto cmd = [](std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h, std::string complexity) {
    return MakeSpec("ssm", 1, std::move(name), arity, flags, std::move(syntax), std::move(summary),
                    h, std::move(complexity));
  };
  const Arg sid = KeyArg("sid"), layer = IntArg("layer"), blob = StrArg("blob");
  r.Add(WithArgs(cmd("ssm.prefix.store", 4, kWrite | kDenyOom, "<sid> <layer> <blob>",
                     "Stores a layer's state blob for a session, replacing any earlier one.", Store,
                     "O(1); the blob is not copied"),
                 {sid, layer, blob}));
  r.Add(WithArgs(
      cmd("ssm.prefix.mstore", -4, kWrite | kDenyOom, "<sid> <layer> <blob> [<layer> <blob> ...]",
          "Stores several layers at once: readers see all of them or none.", MStore,
          "O(N) in the number of layers"),
      {sid, BlockArg("data", kArgMultiple, {layer, blob})}));
  // FETCH and MFETCH check their key's type themselves, after the compact read.
  const auto own_type_check = [](CommandSpec spec) {
    spec.handler_checks_key_types = true;
    return spec;
  };
  r.Add(own_type_check(WithArgs(
      cmd("ssm.prefix.fetch", -3, kReadonly | kFast, "<sid> <layer> [RANGE <offset> <length>]",
          "Returns a layer's blob (or the slice asked for, clamped at its end), or nil.", Fetch,
          "O(1); the blob is not copied"),
      {sid, layer,
       BlockArg("range", kArgOptional, {IntArg("offset"), IntArg("length")}, "RANGE")})));
  r.Add(own_type_check(WithArgs(
      cmd("ssm.prefix.mfetch", -3, kReadonly | kFast, "<sid> <layer> [<layer> ...]",
          "Returns several layers' blobs from one consistent snapshot, nil for each absent one.",
          MFetch, "O(N) in the number of layers"),
      {sid, IntArg("layer", kArgMultiple)})));
  r.Add(WithArgs(cmd("ssm.prefix.drop", -2, kWrite, "<sid> [<layer>]",
                     "Removes one layer of a session, or every layer when none is given.", Drop,
                     "O(N) in the number of layers removed"),
                 {sid, IntArg("layer", kArgOptional)}));
  r.Add(WithArgs(cmd("ssm.prefix.layers", 2, kReadonly, "<sid>",
                     "Lists a session's layers with their sizes in bytes, in layer order.", Layers,
                     "O(N) in the number of layers"),
                 {sid}));
}

}  // namespace prefixd::commands
