// V.*: the attention-layer V-store in Pion's syntax (V.CREATE, V.STOREBATCH, V.FETCH by ids,
// RANGE or BATCH, V.INFO) plus V.DROP, which Pion lacks. Rows are encoded to the session's tier
// before any lock is taken; a fetch from a tier that stores the values themselves is sent from
// the stored chunks with a gather write, never joined or converted, and a large one of a cold
// layer is streamed from its file (cold_reply.h), reading from disk only the rows asked for.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "commands/arg_reader.h"
#include "commands/cold_reply.h"
#include "commands/families.h"
#include "commands/output_limit.h"
#include "commands/vstore_shared.h"
#include "common/ascii.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/memory_policy.h"
#include "engine/write_path.h"

namespace prefixd::commands {
namespace {

using store::Tier;
using store::VectorStore;

constexpr size_t kMaxFetchIds = 1024;  // Pion's bound on V.FETCH <id>...
// A V.FETCH RANGE answer up to this many bytes is copied into the reply while the rows are read
// (larger ones are sent from the stored buffers by reference).
constexpr size_t kInPlaceReplyBytes = 4096;
constexpr uint64_t kMaxLayerId = 0x7fffffff;

void Line(std::string& out, std::string_view key, std::string_view value) {
  out.append(key).append(":").append(value).append("\r\n");
}
void Line(std::string& out, std::string_view key, uint64_t value) {
  Line(out, key, std::to_string(value));
}

// V.CREATE <sid> <dim> [VQUANT <fmt>]
void Create(Context& ctx) {
  const auto& args = ctx.args;
  const std::string_view sid = args[1];
  if (!vstore::ValidSid(ctx, sid)) return;
  for (size_t i = 2; i < args.size(); ++i) {
    if (EqualsIgnoreCase(args[i], "SCHEMA")) {
      return ctx.reply.Error(errors::kVCreateSchema);
    }
  }
  const vstore::Limits limits = vstore::LimitsOf(ctx.engine);
  auto dim = vstore::ParseCount(args[2]);
  if (!dim || *dim < 1 || *dim > limits.max_dim) {
    return ctx.reply.Error(errors::InvalidValueDim(limits.max_dim));
  }
  auto tier = store::ParseTier(ctx.engine.settings().String(Setting::kVstoreDefaultVquant));
  ArgReader r(ctx, 3);  // [VQUANT <fmt>], alone
  if (r.remaining() == 2 && r.Keyword("VQUANT")) {
    const std::string_view name = r.Next();
    tier = store::ParseTier(name);
    if (!tier) return ctx.reply.Error(vstore::UnknownTierError("V.CREATE", "VQUANT format", name));
  } else if (r.more()) {
    return ctx.reply.Error(errors::kSyntax);
  }
  if (std::string why = store::CheckDim(*tier, static_cast<uint32_t>(*dim)); !why.empty()) {
    return ctx.reply.Error(errors::CommandFailed("V.CREATE", why));
  }
  const persist::VCreate record{std::string(sid), Db(ctx).vectors.ReserveIndex(),
                                static_cast<uint32_t>(*dim), static_cast<uint32_t>(*tier)};
  auto done = Mutate(ctx, record);
  if (!done) return;
  if (done->kind == persist::Outcome::Kind::kLimit) {
    return ctx.reply.Error(vstore::SessionLimitError("V.CREATE", limits.max_sessions));
  }
  const store::VectorSessionInfo& info = done->info;
  ctx.reply.Integer(static_cast<int64_t>(info.index));
}

// Parses layer_id, start_id or count; Pion words all three failures alike.
std::optional<uint64_t> ParseStoreField(Context& ctx, std::string_view name, std::string_view text,
                                        uint64_t min, uint64_t max) {
  auto v = vstore::ParseCount(text);
  if (!v || *v < min || *v > max) {
    ctx.reply.Error(errors::InvalidVInteger(name, text.substr(0, 64), min, max));
    return std::nullopt;
  }
  return v;
}

// V.STOREBATCH <sid> <layer> <start> <count> <blob> [FMT F16|BF16|F32]
void StoreBatch(Context& ctx) {
  const auto& args = ctx.args;
  const std::string_view sid = args[1];
  if (!vstore::ValidSid(ctx, sid)) return;
  const vstore::Limits limits = vstore::LimitsOf(ctx.engine);
  constexpr uint64_t kBig = uint64_t{1} << 62;
  auto layer = ParseStoreField(ctx, "layer_id", args[2], 0, kMaxLayerId);
  if (!layer) return;
  auto start = ParseStoreField(ctx, "start_id", args[3], 0, kBig);
  if (!start) return;
  auto count = ParseStoreField(ctx, "count", args[4], 1, kBig);
  if (!count) return;
  if (*layer >= limits.max_layers) {
    return ctx.reply.Error(errors::LayerOverMax(*layer, limits.max_layers));
  }
  const uint64_t end = *start + *count;
  if (end > limits.max_tokens) {
    return ctx.reply.Error(errors::EndOverMaxTokens(end, limits.max_tokens));
  }
  auto format = store::InputFormat::kF32;
  if (ArgReader r(ctx, 6); r.more()) {  // [FMT <format>], alone
    auto given =
        r.remaining() == 2 && r.Keyword("FMT") ? store::ParseInputFormat(r.Next()) : std::nullopt;
    if (!given) return ctx.reply.Error(errors::kVStoreBatchOption);
    format = *given;
  }
  VectorStore& vs = Db(ctx).vectors;
  auto info = vs.Describe(sid);
  if (!info) return ctx.reply.Error(errors::kSessionNotFound);
  // A write to a cold session reads it back whole first (outside the session lock; the store
  // still reads a layer that is cold when written, under it).
  PromoteVectorSession(ctx.engine, Db(ctx), sid, /*always=*/true);
  const size_t element = store::InputElementBytes(format);
  const uint64_t expected = *count * info->dim * element;
  if (args[5].size() != expected) {
    return ctx.reply.Error(errors::VBlobSize(args[5].size(), expected, *count, info->dim, element,
                                             store::InputFormatName(format)));
  }
  const Tier tier = info->tier;
  // Input already in the stored form is kept as it arrived from the socket.
  const bool as_is = (tier == Tier::kFp32 && format == store::InputFormat::kF32) ||
                     (tier == Tier::kFp16 && format == store::InputFormat::kF16) ||
                     (tier == Tier::kBf16 && format == store::InputFormat::kBf16);
  Bytes rows = args.TakeBytes(5);
  if (!as_is) {
    Bytes encoded = Bytes::Allocate(*count * info->row_bytes);
    std::string err =
        store::EncodeRows(tier, info->dim, format, rows.data(), *count, encoded.mutable_data());
    if (!err.empty()) return ctx.reply.Error(errors::CommandFailed("V.STOREBATCH", err));
    rows = std::move(encoded);
  }
  persist::VStore record{std::string(sid),
                         static_cast<uint32_t>(*layer),
                         *start,
                         *count,
                         info->dim,
                         static_cast<uint32_t>(tier),
                         {{std::move(rows)}}};
  auto done = Mutate(ctx, record);
  if (!done) return;
  if (done->kind == persist::Outcome::Kind::kNoSession) {
    return ctx.reply.Error(errors::kSessionNotFound);
  }
  if (done->kind == persist::Outcome::Kind::kChanged) {
    return ctx.reply.Error(errors::kVStoreBatchReshaped);
  }
  ctx.reply.Simple("OK");
}

// A fetch sends the rows as stored when they are the values (fp32 always, fp16 and bf16 with
// NATIVE); otherwise it decodes them to fp32.
bool SentAsStored(const store::VectorSessionInfo& info, bool native) {
  return store::StoresValues(info.tier) && (native || info.tier == Tier::kFp32);
}

// Bytes a fetched layer takes on the wire.
uint64_t ReplyBytes(const store::VectorSessionInfo& info, uint64_t rows, bool native) {
  return rows * (SentAsStored(info, native) ? info.row_bytes : size_t{info.dim} * 4);
}

// The cold rows a read may leave on disk: enough to be streamed, and only where they go out as
// stored (decoded rows are read whole and converted window by window).
uint64_t StreamColdFrom(const store::VectorSessionInfo& info, bool native) {
  return SentAsStored(info, native) ? kStreamColdFrom : VectorStore::kReadAll;
}

// The cold rows the reads left on disk that go out as stored, as one plan streamed in reply
// order; null when there are none.
// Reads the rest of what they left (a session created again with another tier since `native`
// was weighed): those rows are decoded. Throws, before anything is queued, when a place lies
// past the end of its file.
std::shared_ptr<ColdPlan> PlanCold(Context& ctx, const store::VectorSessionInfo& info,
                                   std::span<store::LayerRead> reads, bool native) {
  std::vector<store::ColdExtent> extents;
  for (store::LayerRead& read : reads) {
    if (read.unread.empty()) continue;
    if (!SentAsStored(info, native)) {
      read.rows = Db(ctx).vectors.ReadPieces(read.unread, info.row_bytes);
      read.unread.clear();
      continue;
    }
    for (const store::RowPiece& p : read.unread) {
      extents.push_back(store::ColdExtent{p.file, p.offset, p.rows * info.row_bytes});
    }
  }
  return extents.empty() ? nullptr : std::make_shared<ColdPlan>(std::move(extents));
}

bool FitsOutput(Context& ctx, uint64_t bytes) {
  return FitsOutputLimit(ctx, bytes, "V.FETCH", "fetch a smaller RANGE");
}

// Decodes stored rows to fp32 as the reply is written, window by window: a large decoded reply
// (4 GiB for a 4M-row RANGE) is never whole in memory, and the io thread decodes one window
// between socket writes, serving its other clients in between. Keeps the rows' pieces (one
// consistent state of the layer) referenced until it is done.
class DecodedRows : public protocol::ReplyProducer {
 public:
  DecodedRows(const store::VectorSessionInfo& info, std::vector<Bytes> pieces)
      : tier_(info.tier), dim_(info.dim), row_bytes_(info.row_bytes), pieces_(std::move(pieces)) {
    // Slices of one buffer side by side (a run of shared zero rows) pin it once.
    for (size_t i = 0; i < pieces_.size(); ++i) {
      if (i == 0 || !pieces_[i].SharesStorage(pieces_[i - 1])) pinned_ += pieces_[i].size();
    }
  }

  void Produce(std::span<uint8_t> out) override {
    const size_t out_row = size_t{dim_} * 4;
    while (!out.empty()) {
      if (staged_offset_ < staged_.size()) {  // the rest of a row split between windows
        const size_t n = std::min(out.size(), staged_.size() - staged_offset_);
        std::memcpy(out.data(), staged_.data() + staged_offset_, n);
        staged_offset_ += n;
        out = out.subspan(n);
        continue;
      }
      const Bytes& piece = pieces_[piece_];
      const size_t rows_left = (piece.size() - piece_offset_) / row_bytes_;
      const size_t whole = std::min(rows_left, out.size() / out_row);
      const uint8_t* in = piece.data() + piece_offset_;
      if (whole > 0) {
        store::DecodeRows(tier_, dim_, in, whole, reinterpret_cast<float*>(out.data()));
        Advance(whole);
        out = out.subspan(whole * out_row);
      } else {
        staged_.resize(out_row);
        store::DecodeRows(tier_, dim_, in, 1, reinterpret_cast<float*>(staged_.data()));
        staged_offset_ = 0;
        Advance(1);
      }
    }
  }

  size_t pinned_bytes() const override { return pinned_; }

 private:
  void Advance(size_t rows) {
    piece_offset_ += rows * row_bytes_;
    if (piece_offset_ == pieces_[piece_].size()) {
      pieces_[piece_] = Bytes();  // no longer needed by this reply
      ++piece_;
      piece_offset_ = 0;
    }
  }

  Tier tier_;
  uint32_t dim_;
  size_t row_bytes_;
  std::vector<Bytes> pieces_;
  size_t pinned_ = 0;
  size_t piece_ = 0, piece_offset_ = 0;
  std::vector<uint8_t> staged_;
  size_t staged_offset_ = 0;
};

// One layer's rows as a bulk: as stored when that is the values (fp32 always, fp16 and bf16 with
// NATIVE), else decoded to fp32 as it is written; nil for a layer with no tokens. Cold rows left
// on disk are streamed from `cold`, starting at its extent `next_cold` (advanced past them).
void ReplyRows(Context& ctx, const store::VectorSessionInfo& info, store::LayerRead& read,
               bool native, const std::shared_ptr<ColdPlan>& cold = nullptr,
               size_t* next_cold = nullptr) {
  if (read.length == 0) return ctx.reply.Null();
  PrefixReceipt& receipt = ctx.engine.receipt();
  receipt.fetches.Add();
  receipt.fetch_bytes.Add(ReplyBytes(info, read.rows.rows, native));
  if (!read.unread.empty()) {
    BulkCold(ctx.reply, cold, *next_cold, read.unread.size());
    *next_cold += read.unread.size();
    return;
  }
  if (SentAsStored(info, native)) return ctx.reply.BulkPieces(read.rows.pieces);
  ctx.reply.BulkProduced(read.rows.rows * info.dim * 4,
                         std::make_unique<DecodedRows>(info, std::move(read.rows.pieces)));
}

// `[FMT NATIVE]` from args[from] on; nullopt (error queued) for anything else.
std::optional<bool> ParseNative(Context& ctx, size_t from) {
  const auto& args = ctx.args;
  if (from == args.size()) return false;
  if (args.size() - from == 2 && EqualsIgnoreCase(args[from], "FMT") &&
      EqualsIgnoreCase(args[from + 1], "NATIVE")) {
    return true;
  }
  ctx.reply.Error(errors::VFetchUnknownOption(args[from].substr(0, 64)));
  return std::nullopt;
}

// A half-open [start, end) with 0 <= start < end <= vstore-max-tokens.
bool ParseRange(Context& ctx, std::string_view start_text, std::string_view end_text,
                uint64_t& start, uint64_t& end) {
  auto s = vstore::ParseCount(start_text);
  auto e = vstore::ParseCount(end_text);
  if (!s || !e || *e <= *s) {
    ctx.reply.Error(errors::kBadVRange);
    return false;
  }
  const uint64_t max_tokens = vstore::LimitsOf(ctx.engine).max_tokens;
  if (*e > max_tokens) {
    ctx.reply.Error(errors::RangeOverMaxTokens(*e, max_tokens));
    return false;
  }
  start = *s, end = *e;
  return true;
}

// The disk tier: a fetch of whole layers (`layer`, or every layer) from row 0 to `end` or past
// reads a cold session back into memory when it fits, as a full SSM fetch does; a fetch of part
// of a layer reads only its rows from disk.
void PromoteIfWhole(Context& ctx, std::string_view sid, uint64_t end,
                    std::optional<uint32_t> layer) {
  VectorStore& vs = Db(ctx).vectors;
  if (vs.ColdBytes(sid) == 0) return;
  auto detail = vs.Detail(sid);
  if (!detail) return;
  for (const auto& [id, length] : detail->layer_lengths) {
    if ((!layer || id == *layer) && length > end) return;
  }
  PromoteVectorSession(ctx.engine, Db(ctx), sid, /*always=*/false);
}

// V.FETCH <sid> BATCH <s> <e> [L] [FMT NATIVE]
void FetchBatch(Context& ctx) {
  const auto& args = ctx.args;
  if (args.size() < 5) return ctx.reply.Error(errors::WrongArity(ctx.spec.full_name));
  uint64_t start = 0, end = 0;
  if (!ParseRange(ctx, args[3], args[4], start, end)) return;
  ArgReader r(ctx, 5);  // [L] [FMT NATIVE]
  std::optional<uint32_t> layers;
  const uint64_t max_layers = vstore::LimitsOf(ctx.engine).max_layers;
  if (r.more() && !EqualsIgnoreCase(r.Peek(), "FMT")) {
    const std::string_view text = r.Next();
    auto n = vstore::ParseCount(text);
    if (!n || *n < 1 || *n > max_layers) {
      return ctx.reply.Error(errors::VFetchBatchLayerCount(text.substr(0, 64), max_layers));
    }
    layers = static_cast<uint32_t>(*n);
  }
  auto native = ParseNative(ctx, r.position());
  if (!native) return;
  VectorStore& vs = Db(ctx).vectors;
  auto described = vs.Describe(args[1]);
  if (!described) return ctx.reply.Error(errors::kSessionNotFound);
  if (start == 0) PromoteIfWhole(ctx, args[1], end, std::nullopt);
  auto read = vs.ReadBatch(args[1], start, end, layers, StreamColdFrom(*described, *native));
  if (!read) return ctx.reply.Error(errors::kSessionNotFound);
  auto& [info, per_layer] = *read;
  if (per_layer.empty()) return ctx.reply.Error(errors::kVFetchBatchEmpty);
  uint64_t total = 0;
  for (const auto& layer : per_layer) {
    if (layer.length > 0) total += ReplyBytes(info, layer.rows.rows, *native);
  }
  if (!FitsOutput(ctx, total)) return;
  const auto cold = PlanCold(ctx, info, per_layer, *native);
  size_t next_cold = 0;
  ctx.reply.ArrayLen(per_layer.size());
  for (auto& layer : per_layer) ReplyRows(ctx, info, layer, *native, cold, &next_cold);
}

// V.FETCH <sid> <layer> <id>... | <sid> <layer> RANGE <s> <e> [FMT NATIVE] | <sid> BATCH ...
void Fetch(Context& ctx) {
  const auto& args = ctx.args;
  const std::string_view sid = args[1];
  if (!vstore::ValidSid(ctx, sid)) return;
  if (EqualsIgnoreCase(args[2], "BATCH")) return FetchBatch(ctx);
  auto layer = vstore::ParseCount(args[2]);
  if (!layer || *layer > kMaxLayerId) {
    return ctx.reply.Error(errors::NotInRange("layer_id", errors::Quoted(args[2]), 0, kMaxLayerId));
  }
  const auto layer_id = static_cast<uint32_t>(*layer);
  VectorStore& vs = Db(ctx).vectors;
  if (EqualsIgnoreCase(args[3], "RANGE")) {
    if (args.size() < 6) return ctx.reply.Error(errors::WrongArity(ctx.spec.full_name));
    uint64_t start = 0, end = 0;
    if (!ParseRange(ctx, args[4], args[5], start, end)) return;
    auto native = ParseNative(ctx, 6);
    if (!native) return;
    if (!vs.HasColdLayers()) {
      // The common case in one lookup of the store: no disk tier to plan for or promote from.
      // Small rows sent as stored are copied into the reply under the session lock, as GET
      // copies a small string under its shard lock.
      const auto in_place = vs.ReadRowsInPlace(
          sid, layer_id, start, end,
          [&](const store::VectorSessionInfo& info, std::string_view rows) {
            if (rows.size() > kInPlaceReplyBytes || !SentAsStored(info, *native) ||
                !FitsOutputLimitQuietly(ctx, rows.size())) {
              return false;
            }
            PrefixReceipt& receipt = ctx.engine.receipt();
            receipt.fetches.Add();
            receipt.fetch_bytes.Add(rows.size());
            ctx.reply.Bulk(rows);
            return true;
          });
      if (in_place == VectorStore::InPlaceRead::kCopied) return;
      if (in_place == VectorStore::InPlaceRead::kMissing) {
        return ctx.reply.Error(errors::kSessionNotFound);
      }
      auto read = vs.ReadRange(sid, layer_id, start, end, VectorStore::kReadAll);
      if (!read) return ctx.reply.Error(errors::kSessionNotFound);
      if (!FitsOutput(ctx, ReplyBytes(read->first, end - start, *native))) return;
      return ReplyRows(ctx, read->first, read->second, *native);
    }
    auto info = vs.Describe(sid);
    if (!info) return ctx.reply.Error(errors::kSessionNotFound);
    if (!FitsOutput(ctx, ReplyBytes(*info, end - start, *native))) return;
    if (start == 0) PromoteIfWhole(ctx, sid, end, layer_id);
    auto read = vs.ReadRange(sid, layer_id, start, end, StreamColdFrom(*info, *native));
    if (!read) return ctx.reply.Error(errors::kSessionNotFound);
    const auto cold = PlanCold(ctx, read->first, std::span(&read->second, 1), *native);
    size_t next_cold = 0;
    return ReplyRows(ctx, read->first, read->second, *native, cold, &next_cold);
  }
  std::vector<uint64_t> ids;
  ids.reserve(args.size() - 3);
  for (ArgReader r(ctx, 3); r.more();) {
    if (r.Keyword("FMT")) return ctx.reply.Error(errors::kVFetchNativeById);
    const std::string_view text = r.Next();
    auto id = vstore::ParseCount(text);
    if (!id) return ctx.reply.Error(errors::VFetchInvalidTokenId(text.substr(0, 64)));
    ids.push_back(*id);
  }
  if (ids.size() > kMaxFetchIds) {
    return ctx.reply.Error(errors::VFetchTooManyIds(kMaxFetchIds, ids.size()));
  }
  auto read = vs.ReadIds(sid, layer_id, ids);
  if (!read) return ctx.reply.Error(errors::kSessionNotFound);
  ReplyRows(ctx, read->first, read->second, /*native=*/false);
}

// V.INFO [sid]: Pion's k:v text.
void Info(Context& ctx) {
  const auto& args = ctx.args;
  if (args.size() > 2) return ctx.reply.Error(errors::kSyntax);
  VectorStore& vs = Db(ctx).vectors;
  std::string out;
  if (args.size() == 1) {
    const store::VectorStoreStats s = vs.Stats();
    const vstore::Limits limits = vstore::LimitsOf(ctx.engine);
    Line(out, "enabled", uint64_t{1});
    Line(out, "sessions", s.sessions);
    Line(out, "total_tokens", s.tokens);
    Line(out, "total_fetches", ctx.engine.receipt().fetches.Sum());
    Line(out, "layers", s.layers);
    Line(out, "payload_bytes", s.payload_bytes);
    Line(out, "allocated_bytes", s.allocated_bytes);
    Line(out, "max_sessions", limits.max_sessions);
    Line(out, "max_layers", limits.max_layers);
    Line(out, "max_tokens", limits.max_tokens);
    Line(out, "max_dim", limits.max_dim);
    Line(out, "default_vquant", ctx.engine.settings().String(Setting::kVstoreDefaultVquant));
    return ctx.reply.Bulk(out);
  }
  if (!vstore::ValidSid(ctx, args[1])) return;
  auto detail = vs.Detail(args[1]);
  if (!detail) return ctx.reply.Error(errors::kSessionNotFound);
  uint64_t total = 0;
  for (const auto& [layer, length] : detail->layer_lengths) total += length;
  Line(out, "session_idx", detail->info.index);
  Line(out, "value_dim", detail->info.dim);
  Line(out, "v_format", store::TierName(detail->info.tier));
  Line(out, "num_layers",
       detail->layer_lengths.empty() ? 0 : uint64_t{detail->layer_lengths.back().first} + 1);
  Line(out, "schema", uint64_t{0});
  for (const auto& [layer, length] : detail->layer_lengths) {
    Line(out, "layer_" + std::to_string(layer) + "_tokens", length);
  }
  Line(out, "total_tokens", total);
  Line(out, "row_bytes", detail->info.row_bytes);
  Line(out, "payload_bytes", detail->payload_bytes);
  Line(out, "allocated_bytes", detail->allocated_bytes);
  ctx.reply.Bulk(out);
}

// V.DROP <sid>: :1 when it existed.
void Drop(Context& ctx) {
  const std::string_view sid = ctx.args[1];
  if (!vstore::ValidSid(ctx, sid)) return;
  auto done = Mutate(ctx, persist::VDrop{std::string(sid)});
  if (!done) return;
  const bool dropped = done->kind == persist::Outcome::Kind::kApplied;
  ctx.reply.Integer(dropped ? 1 : 0);
}

}  // namespace

void RegisterVstoreCommands(Registry& r) {
  auto cmd = [](std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h, std::string complexity) {
    return MakeSpec("vstore", 1, std::move(name), arity, flags, std::move(syntax),
                    std::move(summary), h, std::move(complexity));
  };
  r.Add(
      cmd("v.create", -3, kWrite | kDenyOom, "<sid> <dim> [VQUANT fp32|fp16|bf16|int8|fp8|mlx4g32]",
          "Creates a session of dim-value rows in a storage tier (default vstore-default-vquant); "
          "returns its index, the existing one's if the sid exists.",
          Create, "O(1)"));
  r.Add(cmd("v.storebatch", -6, kWrite | kDenyOom,
            "<sid> <layer> <start> <count> <blob> [FMT F16|BF16|F32]",
            "Writes count rows at [start, start+count) of a layer, encoded to the session's tier; "
            "the layer grows to the largest end, gaps read as zeros.",
            StoreBatch, "O(N) in the rows written"));
  r.Add(cmd("v.fetch", -4, kReadonly,
            "<sid> <layer> <id> [id ...] | <sid> <layer> RANGE <start> <end> [FMT NATIVE] | "
            "<sid> BATCH <start> <end> [layers] [FMT NATIVE]",
            "Returns rows as fp32 (NATIVE: fp16/bf16 tiers as stored), zero past the layer's end, "
            "nil for a layer with none; BATCH returns one per layer.",
            Fetch, "O(N) in the rows returned; stored fp32/NATIVE rows are not copied"));
  CommandSpec info = cmd("v.info", -1, kReadonly, "[sid]",
                         "Describes the V-store, or one session's shape and layer lengths, as "
                         "k:v lines.",
                         Info, "O(N) in the session's layers");
  info.first_key = info.last_key = info.key_step = 0;  // the sid is optional
  r.Add(std::move(info));
  r.Add(cmd("v.drop", 2, kWrite, "<sid>", "Removes a session and all its rows; 1 if it existed.",
            Drop, "O(1); memory is released after the reply"));
}

}  // namespace prefixd::commands
