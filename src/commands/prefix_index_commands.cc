// The prefix index (docs/prefix-index.md): KV.PREFIX.NAMESPACE / NSINFO / BSTORE / BDROP /
// BFETCH / MATCH / LFETCH / RELEASE and SSM.PREFIX.CKPT.STORE / MSTORE / DROP / FETCH. Writes go
// through Mutate as prefix-index records; the match and its lease are not logged (a lease does
// not survive a restart, and a client matches again). The shared-memory forms SHMBFETCH,
// SHMLFETCH and CKPT.SHMFETCH (docs/shm-transport.md) are here too. Over 900 lines by choice: each
// fetch's socket and shared form share the namespace's shape, the lease and argument parsing and
// the row gathering; split, they would share them through a private header.
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>

#include "commands/arg_reader.h"
#include "commands/families.h"
#include "commands/output_limit.h"
#include "commands/shm_lending.h"
#include "common/ascii.h"
#include "common/clock.h"
#include "common/numbers.h"
#include "common/scratch_array.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/write_path.h"
#include "persist/prefix_records.h"

namespace prefixd::commands {
namespace {

using errors::Quoted;
using store::Hash128;
using store::kHashBytes;
using store::PrefixIndex;
using store::PrefixShape;

constexpr uint64_t kMaxLeaseMs = 600000;  // prefix-lease-ms's maximum too
constexpr uint64_t kMaxMatchBlocks = uint64_t{1} << 20;
constexpr uint64_t kMaxCandidates = 1024;
constexpr uint64_t kMaxStoreBlocks = 65536;
// A fetch's answer up to this many bytes is built on the stack (KV.PREFIX.BFETCH).
constexpr size_t kSmallRowsBytes = 2048;

// An integer in [min, max]; on failure queues errors::NotInRange and returns nullopt.
std::optional<uint64_t> ParseBounded(Context& ctx, std::string_view what, std::string_view text,
                                     uint64_t min, uint64_t max) {
  auto v = ParseInt64(text);
  if (!v || *v < 0 || static_cast<uint64_t>(*v) < min || static_cast<uint64_t>(*v) > max) {
    ctx.reply.Error(errors::NotInRange(what, Quoted(text), min, max));
    return std::nullopt;
  }
  return static_cast<uint64_t>(*v);
}

// A layer of a namespace that has `count` of that kind (attention or recurrent).
std::optional<uint64_t> ParseLayer(Context& ctx, std::string_view what, std::string_view text,
                                   uint32_t count) {
  if (count == 0) {
    ctx.reply.Error(errors::NoSuchLayers(what, Quoted(text)));
    return std::nullopt;
  }
  return ParseBounded(ctx, what, text, 0, count - 1);
}

// Whether `raw` holds `n` 16-byte hashes; queues the error otherwise.
bool HashesSized(Context& ctx, std::string_view what, std::string_view raw, uint64_t n) {
  if (raw.size() == n * kHashBytes) return true;
  ctx.reply.Error(errors::ListSize(what, n, kHashBytes, raw.size()));
  return false;
}

// `n` raw 16-byte hashes; queues the error otherwise.
std::optional<std::vector<Hash128>> ParseHashes(Context& ctx, std::string_view what,
                                                std::string_view raw, uint64_t n) {
  if (!HashesSized(ctx, what, raw, n)) return std::nullopt;
  return store::ReadHashes(raw);
}

std::optional<Hash128> ParseHash(Context& ctx, std::string_view what, std::string_view raw) {
  auto h = ParseHashes(ctx, what, raw, 1);
  if (!h) return std::nullopt;
  return h->front();
}

// The namespace's shape, or nullopt with errors::NoSuchNamespace queued.
std::optional<PrefixShape> ShapeOf(Context& ctx, std::string_view ns) {
  auto shape = Db(ctx).prefixes.Shape(ns);
  if (!shape) ctx.reply.Error(errors::NoSuchNamespace(Quoted(ns)));
  return shape;
}

// Replies to an applied prefix record: the count, or the refusal's reason.
bool Refused(Context& ctx, const persist::Outcome& out) {
  if (out.kind == persist::Outcome::Kind::kChanged ||
      out.kind == persist::Outcome::Kind::kNoSession) {
    ctx.reply.Error(errors::Because(out.why));
    return true;
  }
  return false;
}

// --- Namespace ---

void Namespace(Context& ctx) {
  const auto& args = ctx.args;
  if ((args.size() - 2) % 2 != 0) return ctx.reply.Error(errors::kSyntax);
  std::optional<uint64_t> block, attn, kv_dim, recurrent;
  uint64_t max_bytes = 0;
  auto tier = store::ParseTier(ctx.engine.settings().String(Setting::kVstoreDefaultVquant));
  ArgReader r(ctx, 2);
  while (r.more()) {
    auto key = r.OneOf({"BLOCK", "ATTN", "KVDIM", "RECURRENT", "VQUANT", "MAXMEMORY"});
    if (!key) return ctx.reply.Error(errors::kSyntax);
    const std::string_view value = r.Next();
    switch (*key) {
      case 0:
        if (!(block = ParseBounded(ctx, "BLOCK", value, 1, 4096))) return;
        break;
      case 1:
        if (!(attn = ParseBounded(ctx, "ATTN", value, 0, 4096))) return;
        break;
      case 2:
        if (!(kv_dim = ParseBounded(ctx, "KVDIM", value, 1, 65536))) return;
        break;
      case 3:
        if (!(recurrent = ParseBounded(ctx, "RECURRENT", value, 0, 4096))) return;
        break;
      case 4:
        if (!(tier = store::ParseTier(value))) {
          return ctx.reply.Error(errors::InvalidVquant(Quoted(value), store::kTierNames));
        }
        break;
      default: {
        auto v = ParseBounded(ctx, "MAXMEMORY", value, 0, std::numeric_limits<int64_t>::max());
        if (!v) return;
        max_bytes = *v;
      }
    }
  }
  if (!block || !attn || !kv_dim || !recurrent) {
    return ctx.reply.Error(errors::kNamespaceNeedsShape);
  }
  if (*attn == 0 && *recurrent == 0) return ctx.reply.Error(errors::kNoLayers);
  if (!tier) tier = store::Tier::kFp32;
  if (std::string why = store::CheckDim(*tier, static_cast<uint32_t>(*kv_dim)); !why.empty()) {
    return ctx.reply.Error(errors::Because(why));
  }
  persist::PrefixNamespace record{std::string(args[1]),
                                  static_cast<uint32_t>(*block),
                                  static_cast<uint32_t>(*attn),
                                  static_cast<uint32_t>(*kv_dim),
                                  static_cast<uint32_t>(*recurrent),
                                  static_cast<uint32_t>(*tier),
                                  max_bytes};
  auto out = Mutate(ctx, record);
  if (!out || Refused(ctx, *out)) return;
  ctx.reply.Simple("OK");
}

void NsInfo(Context& ctx) {
  std::string text;
  auto line = [&](std::string_view k, auto v) {
    text.append(k).append(":");
    if constexpr (std::is_convertible_v<decltype(v), std::string_view>) {
      text.append(v);
    } else {
      text.append(std::to_string(v));
    }
    text.append("\r\n");
  };
  const bool found = Db(ctx).prefixes.With(ctx.args[1], [&](const PrefixIndex& index) {
    const PrefixShape& s = index.shape();
    const store::PrefixStats st = index.Stats();
    line("block", s.block);
    line("attn", s.attn);
    line("kv_dim", s.kv_dim);
    line("recurrent", s.recurrent);
    line("vquant", store::TierName(s.tier));
    line("maxmemory", s.max_bytes);
    line("blocks", st.blocks);
    line("checkpoints", st.checkpoints);
    line("kv_bytes", st.kv_bytes);
    line("state_bytes", st.state_bytes);
    line("index_bytes", st.index_bytes);
    line("index_bytes_per_block",
         st.blocks + st.checkpoints == 0 ? 0 : st.index_bytes / (st.blocks + st.checkpoints));
    line("leases", st.leases);
    line("evicted_blocks", st.evicted_blocks);
    line("evicted_checkpoints", st.evicted_checkpoints);
    line("dropped_blocks", st.dropped_blocks);
    line("dropped_checkpoints", st.dropped_checkpoints);
  });
  if (!found) return ctx.reply.Null();
  ctx.reply.Bulk(text);
}

// --- Rows in and out ---

// The FMT option of a store (F32 default), from the last two arguments when present. `end`
// becomes the index past the layer arguments.
std::optional<store::InputFormat> TrailingFormat(Context& ctx, size_t& end) {
  const auto& args = ctx.args;
  end = args.size();
  if (args.size() >= 2 && EqualsIgnoreCase(args[args.size() - 2], "FMT")) {
    auto format = store::ParseInputFormat(args[args.size() - 1]);
    if (!format) {
      ctx.reply.Error(errors::InvalidFmt(Quoted(args[args.size() - 1])));
      return std::nullopt;
    }
    end -= 2;
    return format;
  }
  return store::InputFormat::kF32;
}

// Encodes `rows` rows of input in `format` to the namespace's tier; nullopt (error queued) when
// the size is wrong or a value cannot be encoded.
std::optional<Bytes> EncodeLayerRows(Context& ctx, const PrefixShape& shape,
                                     store::InputFormat format, uint64_t layer, size_t arg,
                                     uint64_t rows) {
  const std::string_view input = ctx.args[arg];
  const uint64_t want = rows * shape.kv_dim * store::InputElementBytes(format);
  if (input.size() != want) {
    ctx.reply.Error(errors::LayerRowsSize(layer, want, rows, shape.kv_dim,
                                          store::InputFormatName(format), input.size()));
    return std::nullopt;
  }
  // Rows already in the stored form are kept as they arrived from the socket (as V.STOREBATCH
  // keeps them): no copy, and no buffer of the batch's size allocated and freed per store.
  const bool as_is = (shape.tier == store::Tier::kFp32 && format == store::InputFormat::kF32) ||
                     (shape.tier == store::Tier::kFp16 && format == store::InputFormat::kF16) ||
                     (shape.tier == store::Tier::kBf16 && format == store::InputFormat::kBf16);
  if (as_is) return ctx.args.TakeBytes(arg);
  Bytes out = Bytes::Allocate(rows * shape.row_bytes());
  std::string why =
      store::EncodeRows(shape.tier, shape.kv_dim, format,
                        reinterpret_cast<const uint8_t*>(input.data()), rows, out.mutable_data());
  if (!why.empty()) {
    ctx.reply.Error(errors::LayerFailed(layer, why));
    return std::nullopt;
  }
  return out;
}

// `FMT NATIVE` from args[from] (or nothing); true for NATIVE.
std::optional<bool> NativeFormat(Context& ctx, size_t from, size_t to) {
  if (from == to) return false;
  if (to - from == 2 && EqualsIgnoreCase(ctx.args[from], "FMT") &&
      EqualsIgnoreCase(ctx.args[from + 1], "NATIVE")) {
    return true;
  }
  ctx.reply.Error(errors::kSyntax);
  return std::nullopt;
}

// Rows as stored are sent as they are (by reference when `stored` owns them, copied from a
// caller's buffer otherwise); other tiers are decoded to fp32, through the stack when the result
// is small.
void ReplyRows(Context& ctx, const PrefixShape& shape, std::span<const uint8_t> rows,
               const Bytes* stored, bool native, std::string_view command) {
  if (shape.tier == store::Tier::kFp32 || (native && store::StoresValues(shape.tier))) {
    if (!FitsOutputLimit(ctx, rows.size(), command, "fetch a RANGE at a time")) return;
    if (stored != nullptr) return ctx.reply.Bulk(*stored);
    return ctx.reply.Bulk(
        std::string_view(reinterpret_cast<const char*>(rows.data()), rows.size()));
  }
  const uint64_t n = rows.size() / shape.row_bytes();
  const uint64_t decoded = n * shape.kv_dim * 4;
  if (!FitsOutputLimit(ctx, decoded, command, "fetch a RANGE at a time")) return;
  // Room for 4x the stored bytes (an 8-bit tier decoded); uninitialised: every value used is
  // written.
  std::array<float, kSmallRowsBytes> small;
  if (decoded <= sizeof(small)) {
    store::DecodeRows(shape.tier, shape.kv_dim, rows.data(), n, small.data());
    return ctx.reply.Bulk(std::string_view(reinterpret_cast<const char*>(small.data()), decoded));
  }
  Bytes out = Bytes::Allocate(decoded);
  store::DecodeRows(shape.tier, shape.kv_dim, rows.data(), n,
                    reinterpret_cast<float*>(out.mutable_data()));
  ctx.reply.Bulk(out);
}

void ReplyRows(Context& ctx, const PrefixShape& shape, const Bytes& rows, bool native,
               std::string_view command) {
  ReplyRows(ctx, shape, std::span(rows.data(), rows.size()), &rows, native, command);
}

// Before a store of `incoming` bytes into a namespace with a budget: evicts least recently used
// leaves through the mutation path (one logged drop). False (error queued) when it cannot fit.
bool MakeNamespaceRoom(Context& ctx, std::string_view ns, const PrefixShape& shape,
                       uint64_t incoming, const Hash128& keep) {
  if (shape.max_bytes == 0) return true;
  if (incoming > shape.max_bytes) {
    ctx.reply.Error(errors::NamespaceMaxMemory(incoming, shape.max_bytes));
    return false;
  }
  persist::PrefixDrop drop{std::string(ns), {}, {}, 1};
  std::vector<Hash128> blocks, ckpts;
  Db(ctx).prefixes.With(ns, [&](const PrefixIndex& index) {
    index.PlanEviction(shape.max_bytes - incoming, keep, &blocks, &ckpts);
  });
  if (blocks.empty() && ckpts.empty()) return true;
  auto raw = [](const std::vector<Hash128>& hashes) {
    Bytes out = Bytes::Allocate(hashes.size() * kHashBytes);
    for (size_t i = 0; i < hashes.size(); ++i) hashes[i].Write(out.mutable_data() + i * kHashBytes);
    return out;
  };
  drop.blocks.pieces.push_back(raw(blocks));
  drop.checkpoints.pieces.push_back(raw(ckpts));
  return Mutate(ctx, drop).has_value();
}

// --- Blocks ---

// KV.PREFIX.BSTORE <ns> <parent> <n> <hashes> <layer> <rows> [...] [FMT F16|BF16|F32]
void BStore(Context& ctx) {
  const auto& args = ctx.args;
  auto shape = ShapeOf(ctx, args[1]);
  if (!shape) return;
  size_t end = 0;
  auto format = TrailingFormat(ctx, end);
  if (!format) return;
  if ((end - 5) % 2 != 0) return ctx.reply.Error(errors::kSyntax);
  auto parent = ParseHash(ctx, "parent", args[2]);
  if (!parent) return;
  auto n = ParseBounded(ctx, "block count", args[3], 1, kMaxStoreBlocks);
  if (!n) return;
  auto block_hashes = ParseHashes(ctx, "hashes", args[4], *n);
  if (!block_hashes) return;
  for (const Hash128& h : *block_hashes) {
    if (h.IsRoot()) return ctx.reply.Error(errors::kRootHash);
  }
  persist::PrefixBlocks record{std::string(args[1]), parent->Raw(), {}, {}};
  record.hashes.pieces.push_back(args.TakeBytes(4));
  uint64_t incoming = 0;
  for (size_t i = 5; i < end; i += 2) {
    auto layer = ParseLayer(ctx, "layer", args[i], shape->attn);
    if (!layer) return;
    auto rows = EncodeLayerRows(ctx, *shape, *format, *layer, i + 1, 2 * *n * shape->block);
    if (!rows) return;
    incoming += rows->size();
    record.layers.emplace_back(static_cast<uint32_t>(*layer), std::move(*rows));
  }
  if (record.layers.size() != shape->attn) {
    return ctx.reply.Error(
        errors::LayersMissing("blocks need", shape->attn, "attention", record.layers.size()));
  }
  if (!MakeNamespaceRoom(ctx, args[1], *shape, incoming, *parent)) return;
  auto out = Mutate(ctx, record);
  if (!out || Refused(ctx, *out)) return;
  ctx.reply.Integer(static_cast<int64_t>(out->count));
}

void DropEntries(Context& ctx, bool blocks) {
  const auto& args = ctx.args;
  if (!ShapeOf(ctx, args[1])) return;
  auto n = ParseBounded(ctx, "count", args[2], 0, kMaxMatchBlocks);
  if (!n) return;
  if (!ParseHashes(ctx, blocks ? "hashes" : "positions", args[3], *n)) return;
  persist::PrefixDrop drop{std::string(args[1]), {}, {}, 0};
  (blocks ? drop.blocks : drop.checkpoints).pieces.push_back(args.TakeBytes(3));
  auto out = Mutate(ctx, drop);
  if (!out || Refused(ctx, *out)) return;
  ctx.reply.Integer(static_cast<int64_t>(out->count));
}

void BDrop(Context& ctx) { DropEntries(ctx, true); }

// BFETCH's and SHMBFETCH's arguments after the namespace, checked against its shape with their
// errors queued in the order they have always come (count, hashes, layer, format).
struct BlockFetch {
  uint64_t blocks = 0;
  uint32_t layer = 0;
  bool native = false;
};
// `end`: where the options end (before SHMBFETCH's CHECKSUM).
std::optional<BlockFetch> ParseBlockFetch(Context& ctx, const PrefixShape& shape, size_t end) {
  const auto& args = ctx.args;
  auto n = ParseBounded(ctx, "count", args[2], 1, kMaxMatchBlocks);
  if (!n) return std::nullopt;
  if (!HashesSized(ctx, "hashes", args[3], *n)) return std::nullopt;
  auto layer = ParseLayer(ctx, "layer", args[4], shape.attn);
  if (!layer) return std::nullopt;
  auto format = NativeFormat(ctx, 5, end);
  if (!format) return std::nullopt;
  return BlockFetch{*n, static_cast<uint32_t>(*layer), *format};
}

// The hashes of args[3] (sized by ParseBlockFetch) into `out`, without an allocation for a few.
void ReadBlockHashes(std::string_view raw, std::span<Hash128> out) {
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = Hash128::Read(reinterpret_cast<const uint8_t*>(raw.data()) + i * kHashBytes);
  }
}

// KV.PREFIX.BFETCH <ns> <n> <hashes> <layer> [FMT NATIVE]
void BFetch(Context& ctx) {
  const auto& args = ctx.args;
  // The namespace is found once: the arguments are checked against its shape under its lock
  // (the namespace's error first, as always), and a small answer is copied out of the index into
  // the stack and framed from there, with no allocation. A large one is built once and sent by
  // reference.
  std::optional<PrefixShape> shape;
  bool native = false;
  std::array<uint8_t, kSmallRowsBytes> small;  // uninitialised: every byte used is written
  std::optional<Bytes> rows;
  bool found = false;
  size_t size = 0;
  const bool known = Db(ctx).prefixes.Read(args[1], [&](const PrefixIndex& index) {
    const auto fetch = ParseBlockFetch(ctx, index.shape(), args.size());
    if (!fetch) return;
    shape = index.shape();
    native = fetch->native;
    ScratchArray<Hash128, 8> hashes(fetch->blocks);
    ReadBlockHashes(args[3], hashes.span());
    size = index.BlockRowsSize(fetch->blocks);
    if (size <= small.size()) {
      found = index.CopyBlockRows(hashes.span(), fetch->layer, small.data());
    } else {
      rows = index.BlockRows(hashes.span(), fetch->layer);
      found = rows.has_value();
    }
  });
  if (!known) return ctx.reply.Error(errors::NoSuchNamespace(Quoted(args[1])));
  if (!shape) return;  // an argument's error is queued
  if (!found) return ctx.reply.Null();
  if (rows) return ReplyRows(ctx, *shape, *rows, native, "KV.PREFIX.BFETCH");
  ReplyRows(ctx, *shape, std::span(small.data(), size), nullptr, native, "KV.PREFIX.BFETCH");
}

// KV.PREFIX.SHMBFETCH <ns> <n> <hashes> <layer> [FMT NATIVE] [CHECKSUM]: BFETCH's rows over the
// shared path (docs/shm-transport.md): 2n pieces, every block's K rows then every block's V rows,
// each a place in an arena under the call's one lease (a page of pool size) or its bytes (a small
// namespace's pages are on the heap). Nil when a block is missing. Rows as stored only.
void ShmBFetch(Context& ctx) {
  if (!ShmGreeted(ctx)) return;
  const auto& args = ctx.args;
  size_t end = args.size();
  const bool checksum = TakeChecksumOption(ctx, 5, end);  // the layer stays args[4]
  std::optional<PrefixShape> shape;
  bool native = false;
  std::optional<std::vector<Bytes>> pieces;
  const auto as_stored = [&] {
    return shape->tier == store::Tier::kFp32 || (native && store::StoresValues(shape->tier));
  };
  const bool known = Db(ctx).prefixes.Read(args[1], [&](const PrefixIndex& index) {
    const auto fetch = ParseBlockFetch(ctx, index.shape(), end);
    if (!fetch) return;
    shape = index.shape();
    native = fetch->native;
    if (!as_stored()) return;
    ScratchArray<Hash128, 8> hashes(fetch->blocks);
    ReadBlockHashes(args[3], hashes.span());
    pieces = index.SharedBlockRows(hashes.span(), fetch->layer);
  });
  if (!known) return ctx.reply.Error(errors::NoSuchNamespace(Quoted(args[1])));
  if (!shape) return;  // an argument's error is queued
  if (!as_stored()) {
    return ctx.reply.Error(errors::ShmRowsDecoded(
        "KV.PREFIX.SHMBFETCH", "namespace", store::TierName(shape->tier), "KV.PREFIX.BFETCH"));
  }
  if (!pieces) return ctx.reply.Null();
  std::vector<const Bytes*> lendable(pieces->size());
  for (size_t i = 0; i < pieces->size(); ++i) lendable[i] = &(*pieces)[i];
  std::vector<ShmLent> lent;
  if (!ShmLendAll(ctx, args[1], lendable, lent)) return;
  ctx.reply.ArrayLen(pieces->size());
  for (size_t i = 0; i < pieces->size(); ++i) {
    ReplyShmLent(ctx, (*pieces)[i], lent[i], checksum);
  }
}

// --- Checkpoints ---

// SSM.PREFIX.CKPT.STORE / MSTORE from args[first_layer]: recurrent (layer, blob) pairs, then
// TAIL (layer, rows) pairs, then FMT.
void StoreCheckpoints(Context& ctx, const PrefixShape& shape, persist::PrefixCheckpoints record,
                      size_t first_layer, uint64_t k) {
  const auto& args = ctx.args;
  size_t end = 0;
  auto format = TrailingFormat(ctx, end);
  if (!format) return;
  size_t i = first_layer;
  uint64_t incoming = 0;
  for (; i < end && !EqualsIgnoreCase(args[i], "TAIL"); i += 2) {
    if (i + 1 >= end) return ctx.reply.Error(errors::kSyntax);
    auto layer = ParseBounded(ctx, "layer", args[i], 0, 0x7fffffff);
    if (!layer) return;
    incoming += args[i + 1].size();
    record.states.emplace_back(static_cast<uint32_t>(*layer), args.TakeBytes(i + 1));
  }
  if (record.states.size() != shape.recurrent) {
    return ctx.reply.Error(errors::LayersMissing("a checkpoint needs", shape.recurrent, "recurrent",
                                                 record.states.size()));
  }
  const uint64_t depth = record.first_length / shape.block;
  if ((record.first_length + k - 1) / shape.block != depth) {
    return ctx.reply.Error(errors::kWindowCrossesBlock);
  }
  const uint64_t tail_rows = record.first_length + k - 1 - depth * shape.block;
  if (i < end) {
    if (tail_rows == 0) {
      return ctx.reply.Error(errors::kTailAtBoundary);
    }
    for (++i; i < end; i += 2) {
      if (i + 1 >= end) return ctx.reply.Error(errors::kSyntax);
      auto layer = ParseLayer(ctx, "TAIL layer", args[i], shape.attn);
      if (!layer) return;
      auto rows = EncodeLayerRows(ctx, shape, *format, *layer, i + 1, 2 * tail_rows);
      if (!rows) return;
      incoming += rows->size();
      record.tails.emplace_back(static_cast<uint32_t>(*layer), std::move(*rows));
    }
  }
  if (tail_rows > 0 && record.tails.size() != shape.attn) {
    return ctx.reply.Error(
        errors::LayersMissing("the tail needs", shape.attn, "attention", record.tails.size()));
  }
  store::CheckpointBatch batch;
  if (Status fits = persist::ToBatch(shape, record, &batch); !fits.ok()) {
    return ctx.reply.Error(errors::Because(fits.message()));
  }
  if (!MakeNamespaceRoom(ctx, args[1], shape, incoming, batch.anchor)) return;
  auto out = Mutate(ctx, record);
  if (!out || Refused(ctx, *out)) return;
  if (ctx.spec.name == "ssm.prefix.ckpt.store") return ctx.reply.Simple("OK");
  ctx.reply.Integer(static_cast<int64_t>(k));
}

// SSM.PREFIX.CKPT.STORE <ns> <anchor> <L> <pos> <layer> <blob> ... [TAIL ...] [FMT ...]
void CkptStore(Context& ctx) {
  const auto& args = ctx.args;
  auto shape = ShapeOf(ctx, args[1]);
  if (!shape) return;
  auto anchor = ParseHash(ctx, "anchor", args[2]);
  if (!anchor) return;
  auto length = ParseBounded(ctx, "length", args[3], 1, uint64_t{1} << 40);
  if (!length) return;
  auto pos = ParseHash(ctx, "position", args[4]);
  if (!pos) return;
  if (*length % shape->block == 0 && !(*pos == *anchor)) {
    return ctx.reply.Error(errors::kBoundaryIsAnchor);
  }
  persist::PrefixCheckpoints record{std::string(args[1]), anchor->Raw(), *length, {}, {}, {}};
  record.positions.pieces.push_back(args.TakeBytes(4));
  StoreCheckpoints(ctx, *shape, std::move(record), 5, 1);
}

// SSM.PREFIX.CKPT.MSTORE <ns> <anchor> <L0> <k> <positions> <layer> <blob> ... [TAIL ...]
void CkptMStore(Context& ctx) {
  const auto& args = ctx.args;
  auto shape = ShapeOf(ctx, args[1]);
  if (!shape) return;
  auto anchor = ParseHash(ctx, "anchor", args[2]);
  if (!anchor) return;
  auto first = ParseBounded(ctx, "L0", args[3], 1, uint64_t{1} << 40);
  if (!first) return;
  auto k = ParseBounded(ctx, "k", args[4], 1, kMaxStoreBlocks);
  if (!k) return;
  if (!ParseHashes(ctx, "positions", args[5], *k)) return;
  persist::PrefixCheckpoints record{std::string(args[1]), anchor->Raw(), *first, {}, {}, {}};
  record.positions.pieces.push_back(args.TakeBytes(5));
  StoreCheckpoints(ctx, *shape, std::move(record), 6, *k);
}

void CkptDrop(Context& ctx) { DropEntries(ctx, false); }

// CKPT.FETCH's and CKPT.SHMFETCH's reading of their request: the namespace's shape, the position
// (args[2]), the layers args[3, end) lists (`LAYERS <layer> ...`; none: every layer), and the
// checkpoint's blobs. Nullopt once it queued the reply: an error, or the nil array of a position
// that holds no checkpoint.
struct CheckpointRead {
  std::vector<Bytes> states;
  std::vector<uint32_t> layers;
};

std::optional<CheckpointRead> ReadCheckpoint(Context& ctx, size_t end) {
  const auto& args = ctx.args;
  auto shape = ShapeOf(ctx, args[1]);
  if (!shape) return std::nullopt;
  auto pos = ParseHash(ctx, "position", args[2]);
  if (!pos) return std::nullopt;
  CheckpointRead read;
  if (end > 3) {
    if (!EqualsIgnoreCase(args[3], "LAYERS") || end == 4) {
      ctx.reply.Error(errors::kSyntax);
      return std::nullopt;
    }
    for (size_t i = 4; i < end; ++i) {
      auto layer = ParseLayer(ctx, "layer", args[i], shape->recurrent);
      if (!layer) return std::nullopt;
      read.layers.push_back(static_cast<uint32_t>(*layer));
    }
  }
  std::optional<std::vector<Bytes>> states;
  Db(ctx).prefixes.With(args[1],
                        [&](PrefixIndex& index) { states = index.CheckpointStates(*pos); });
  if (!states) {
    ctx.reply.NullArray();
    return std::nullopt;
  }
  read.states = std::move(*states);
  if (read.layers.empty()) {
    for (uint32_t l = 0; l < read.states.size(); ++l) read.layers.push_back(l);
  }
  return read;
}

// SSM.PREFIX.CKPT.FETCH <ns> <pos> [LAYERS <layer> ...]
void CkptFetch(Context& ctx) {
  const auto read = ReadCheckpoint(ctx, ctx.args.size());
  if (!read) return;
  ctx.reply.ArrayLen(read->layers.size());
  for (uint32_t l : read->layers) ctx.reply.Bulk(read->states[l]);
}

// SSM.PREFIX.CKPT.SHMFETCH <ns> <pos> [LAYERS <layer> ...] [CHECKSUM]: CKPT.FETCH's blobs over
// the shared path (docs/shm-transport.md), one per layer as SSM.PREFIX.SHMFETCH answers a layer:
// its place under the call's one lease (a blob is a value of its own, not packed into slab
// pages: a large one lies in an arena), or its bytes. Nil when no checkpoint is at `pos`. The
// namespace is the lease's key: it stays while the lease holds its bytes.
void CkptShmFetch(Context& ctx) {
  if (!ShmGreeted(ctx)) return;
  size_t end = ctx.args.size();
  const bool checksum = TakeChecksumOption(ctx, 3, end);  // the position stays args[2]
  const auto read = ReadCheckpoint(ctx, end);
  if (!read) return;
  std::vector<const Bytes*> lendable;
  for (uint32_t l : read->layers) lendable.push_back(&read->states[l]);
  std::vector<ShmLent> lent;
  if (!ShmLendAll(ctx, ctx.args[1], lendable, lent)) return;
  ctx.reply.ArrayLen(lendable.size());
  for (size_t i = 0; i < lendable.size(); ++i) {
    ReplyShmLent(ctx, *lendable[i], lent[i], checksum);
  }
}

// --- The match and its lease ---

// KV.PREFIX.MATCH <ns> <n> <hashes> [AT <k> <positions> <pos-hashes>] [LEASE <ms>] [NOLEASE]
void Match(Context& ctx) {
  const auto& args = ctx.args;
  auto shape = ShapeOf(ctx, args[1]);
  if (!shape) return;
  auto n = ParseBounded(ctx, "block count", args[2], 0, kMaxMatchBlocks);
  if (!n) return;
  auto chain = ParseHashes(ctx, "hashes", args[3], *n);
  if (!chain) return;
  std::vector<std::pair<uint64_t, Hash128>> candidates;
  uint64_t lease_ms = static_cast<uint64_t>(ctx.engine.settings().Int(Setting::kPrefixLeaseMs));
  ArgReader r(ctx, 4);
  while (r.more()) {
    if (r.remaining() >= 4 && r.Keyword("AT")) {
      auto k = ParseBounded(ctx, "AT count", r.Next(), 0, kMaxCandidates);
      if (!k) return;
      const std::string_view lengths = r.Next();
      if (lengths.size() != *k * 8) {
        return ctx.reply.Error(errors::ListSize("AT positions", *k, 8, lengths.size()));
      }
      auto hashes = ParseHashes(ctx, "AT position hashes", r.Next(), *k);
      if (!hashes) return;
      for (uint64_t j = 0; j < *k; ++j) {
        uint64_t length = 0;
        std::memcpy(&length, lengths.data() + j * 8, 8);
        candidates.emplace_back(length, (*hashes)[j]);
      }
    } else if (r.remaining() >= 2 && r.Keyword("LEASE")) {
      auto ms = ParseBounded(ctx, "LEASE", r.Next(), 1, kMaxLeaseMs);
      if (!ms) return;
      lease_ms = *ms;
    } else if (r.Keyword("NOLEASE")) {
      lease_ms = 0;
    } else {
      return ctx.reply.Error(errors::kSyntax);
    }
  }
  const auto max_leases = static_cast<size_t>(ctx.engine.settings().Int(Setting::kPrefixMaxLeases));
  std::optional<store::MatchResult> result;
  const bool found = Db(ctx).prefixes.With(args[1], [&](PrefixIndex& index) {
    result = index.Match(*chain, candidates, lease_ms, CoarseNowMs(), max_leases);
  });
  if (!found) return ctx.reply.Error(errors::NoSuchNamespace(Quoted(args[1])));
  if (!result) return ctx.reply.Error(errors::kTooManyLeases);
  (result->length > 0 ? ctx.engine.stats().keyspace_hits : ctx.engine.stats().keyspace_misses)
      .Add();
  // RESP2: the six values in order; RESP3: a map naming them, in the same order.
  auto& w = ctx.reply;
  const bool named = w.protocol() == 3;
  if (named) {
    w.MapLen(6);
  } else {
    w.ArrayLen(6);
  }
  auto field = [&](std::string_view name, uint64_t value) {
    if (named) w.Bulk(name);
    w.Integer(static_cast<int64_t>(value));
  };
  field("length", result->length);
  field("lease", result->lease);
  field("matched_blocks", result->matched_blocks);
  if (named) w.Bulk("checkpoint_pos");
  w.Bulk(result->position.Raw());
  field("kv_bytes", result->kv_bytes);
  field("state_bytes", result->state_bytes);
}

// LFETCH's and SHMLFETCH's arguments after the namespace, checked against its shape:
//   <lease> ATTN <layer> [RANGE <s> <e>] [FMT NATIVE] [RELEASE]
//   <lease> STATE [LAYERS <layer> ...] [RELEASE]
// SHMLFETCH (`shared`) also takes CHECKSUM; the trailing words (RELEASE, CHECKSUM) come last, each
// at most once, in either order.
struct LeaseFetch {
  uint64_t lease = 0;
  bool attn = false;
  uint32_t layer = 0;
  uint64_t start = 0, stop = std::numeric_limits<uint64_t>::max();  // stop max: to L
  bool native = false;
  std::vector<uint32_t> layers;  // STATE: empty for all
  bool release = false;
  bool checksum = false;
};
std::optional<LeaseFetch> ParseLeaseFetch(Context& ctx, const PrefixShape& shape, bool shared) {
  const auto& args = ctx.args;
  LeaseFetch f;
  auto lease = ParseBounded(ctx, "lease", args[2], 1, std::numeric_limits<int64_t>::max());
  if (!lease) return std::nullopt;
  f.lease = *lease;
  size_t end = args.size();
  // args[3] (ATTN or STATE) is never taken for a trailing word.
  while (end > 4) {
    if (!f.release && EqualsIgnoreCase(args[end - 1], "RELEASE")) {
      f.release = true;
    } else if (shared && !f.checksum && EqualsIgnoreCase(args[end - 1], "CHECKSUM")) {
      f.checksum = true;
    } else {
      break;
    }
    --end;
  }
  f.attn = EqualsIgnoreCase(args[3], "ATTN");
  if (!f.attn && !EqualsIgnoreCase(args[3], "STATE")) {
    ctx.reply.Error(errors::kSyntax);
    return std::nullopt;
  }
  if (f.attn) {
    if (end < 5) {
      ctx.reply.Error(errors::kSyntax);
      return std::nullopt;
    }
    auto l = ParseLayer(ctx, "layer", args[4], shape.attn);
    if (!l) return std::nullopt;
    f.layer = static_cast<uint32_t>(*l);
    size_t i = 5;
    if (i < end && EqualsIgnoreCase(args[i], "RANGE")) {
      if (i + 2 >= end) {
        ctx.reply.Error(errors::kSyntax);
        return std::nullopt;
      }
      auto s = ParseBounded(ctx, "start", args[i + 1], 0, std::numeric_limits<int64_t>::max());
      if (!s) return std::nullopt;
      auto e = ParseBounded(ctx, "end", args[i + 2], 0, std::numeric_limits<int64_t>::max());
      if (!e) return std::nullopt;
      f.start = *s, f.stop = *e;
      i += 3;
    }
    auto nat = NativeFormat(ctx, i, end);
    if (!nat) return std::nullopt;
    f.native = *nat;
  } else if (end > 4) {
    if (!EqualsIgnoreCase(args[4], "LAYERS") || end == 5) {
      ctx.reply.Error(errors::kSyntax);
      return std::nullopt;
    }
    for (size_t i = 5; i < end; ++i) {
      auto l = ParseLayer(ctx, "layer", args[i], shape.recurrent);
      if (!l) return std::nullopt;
      f.layers.push_back(static_cast<uint32_t>(*l));
    }
  }
  return f;
}

// The lease's view for `f` under the namespace's lock: `f.stop` resolved to L, and the range
// checked; the error text when the lease is gone or the range is outside [0, L).
const store::LeaseView* LeasedView(PrefixIndex& index, LeaseFetch& f, std::string& error) {
  const store::LeaseView* view = index.Lease(f.lease, CoarseNowMs());
  if (view == nullptr) {
    error = errors::kNoLease;
    return nullptr;
  }
  if (f.attn) {
    if (f.stop == std::numeric_limits<uint64_t>::max()) f.stop = view->length;
    if (f.start > f.stop || f.stop > view->length) {
      error = errors::LeaseRange(f.start, f.stop, view->length);
      return nullptr;
    }
  }
  return view;
}

// The recurrent layers a STATE fetch answers, in order.
std::vector<uint32_t> StateLayers(const LeaseFetch& f, size_t count) {
  if (!f.layers.empty()) return f.layers;
  std::vector<uint32_t> all(count);
  for (uint32_t l = 0; l < count; ++l) all[l] = l;
  return all;
}

// KV.PREFIX.LFETCH <ns> <lease> ATTN <layer> [RANGE <s> <e>] [FMT NATIVE] [RELEASE]
// KV.PREFIX.LFETCH <ns> <lease> STATE [LAYERS <layer> ...] [RELEASE]
void LFetch(Context& ctx) {
  const auto& args = ctx.args;
  auto shape = ShapeOf(ctx, args[1]);
  if (!shape) return;
  auto fetch = ParseLeaseFetch(ctx, *shape, /*shared=*/false);
  if (!fetch) return;
  std::string error;
  std::optional<Bytes> rows;
  std::vector<Bytes> states;
  Db(ctx).prefixes.With(args[1], [&](PrefixIndex& index) {
    const store::LeaseView* view = LeasedView(index, *fetch, error);
    if (view == nullptr) return;
    if (fetch->attn) {
      rows = index.GatherRows(*view, fetch->layer, fetch->start, fetch->stop);
    } else {
      states = view->states;
    }
    if (fetch->release) index.Release(fetch->lease);
  });
  if (!error.empty()) return ctx.reply.Error(error);
  if (fetch->attn) return ReplyRows(ctx, *shape, *rows, fetch->native, "KV.PREFIX.LFETCH");
  const std::vector<uint32_t> layers = StateLayers(*fetch, states.size());
  ctx.reply.ArrayLen(layers.size());
  for (uint32_t l : layers) ctx.reply.Bulk(states[l]);
}

// KV.PREFIX.SHMLFETCH <ns> <lease> ATTN <layer> [RANGE <s> <e>] [FMT NATIVE] [CHECKSUM] [RELEASE]
// KV.PREFIX.SHMLFETCH <ns> <lease> STATE [LAYERS <layer> ...] [CHECKSUM] [RELEASE]
// LFETCH's answer over the shared path (docs/shm-transport.md): ATTN as the pieces its rows are
// stored in (every block's K rows touched, the tail's, then the same for V), STATE one piece per
// recurrent layer; each a place under the call's one SHM lease, or its bytes. Past the cap
// nothing is leased and the prefix lease is kept (RELEASE too), so the client can fetch over the
// socket instead. Rows as stored only.
void ShmLFetch(Context& ctx) {
  if (!ShmGreeted(ctx)) return;
  const auto& args = ctx.args;
  auto shape = ShapeOf(ctx, args[1]);
  if (!shape) return;
  auto fetch = ParseLeaseFetch(ctx, *shape, /*shared=*/true);
  if (!fetch) return;
  if (fetch->attn && shape->tier != store::Tier::kFp32 &&
      !(fetch->native && store::StoresValues(shape->tier))) {
    return ctx.reply.Error(errors::ShmRowsDecoded(
        "KV.PREFIX.SHMLFETCH", "namespace", store::TierName(shape->tier), "KV.PREFIX.LFETCH"));
  }
  std::string error;
  std::vector<Bytes> pieces;
  Db(ctx).prefixes.With(args[1], [&](PrefixIndex& index) {
    const store::LeaseView* view = LeasedView(index, *fetch, error);
    if (view == nullptr) return;
    if (fetch->attn) {
      pieces = index.SharedLeaseRows(*view, fetch->layer, fetch->start, fetch->stop);
    } else {
      for (uint32_t l : StateLayers(*fetch, view->states.size())) {
        pieces.push_back(view->states[l]);
      }
    }
  });
  if (!error.empty()) return ctx.reply.Error(error);
  std::vector<const Bytes*> lendable(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) lendable[i] = &pieces[i];
  std::vector<ShmLent> lent;
  if (!ShmLendAll(ctx, args[1], lendable, lent)) return;
  // The pieces hold what they share: the prefix lease may end now.
  if (fetch->release) {
    Db(ctx).prefixes.With(args[1], [&](PrefixIndex& index) { index.Release(fetch->lease); });
  }
  ctx.reply.ArrayLen(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    ReplyShmLent(ctx, pieces[i], lent[i], fetch->checksum);
  }
}

// KV.PREFIX.RELEASE <ns> <lease> -> 1 when the lease was live.
void Release(Context& ctx) {
  auto lease = ParseBounded(ctx, "lease", ctx.args[2], 0, std::numeric_limits<int64_t>::max());
  if (!lease) return;
  bool released = false;
  Db(ctx).prefixes.With(ctx.args[1], [&](PrefixIndex& index) {
    index.ExpireLeases(CoarseNowMs());
    released = index.Release(*lease);
  });
  ctx.reply.Integer(released ? 1 : 0);
}

}  // namespace

void RegisterPrefixIndexCommands(Registry& r) {
  auto cmd = [](std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h, std::string complexity, std::vector<Arg> args) {
    // The namespace is the first and only key (first 1, last 1, step 1): cluster clients route
    // every command of a namespace to its slot.
    return WithArgs(MakeSpec("prefixindex", 1, std::move(name), arity, flags, std::move(syntax),
                             std::move(summary), h, std::move(complexity)),
                    std::move(args));
  };
  const Arg ns = KeyArg("ns"), n = IntArg("n"), hashes = StrArg("hashes"), layer = IntArg("layer"),
            lease = IntArg("lease");
  const Arg fmt_in =
      OneOfArg("fmt", kArgOptional,
               {TokenArg("f16", "F16"), TokenArg("bf16", "BF16"), TokenArg("f32", "F32")});
  const Arg fmt_native = Tokened(TokenArg("native", "NATIVE"), "FMT");
  const Arg layer_blobs = BlockArg("state", kArgMultiple, {layer, StrArg("blob")});
  const Arg tail = BlockArg("tail", kArgOptional,
                            {BlockArg("rows", kArgMultiple, {layer, StrArg("rows")})}, "TAIL");
  Arg fmt_native_opt = fmt_native;
  fmt_native_opt.flags = kArgOptional;
  Arg fmt_in_opt = Tokened(fmt_in, "FMT");
  r.Add(cmd("kv.prefix.namespace", -10, kWrite | kDenyOom,
            "<ns> BLOCK <bs> ATTN <layers> KVDIM <dim> RECURRENT <layers> [VQUANT <tier>] "
            "[MAXMEMORY <bytes>]",
            "Creates a prefix-index namespace (the model's shape); again with the same shape: no "
            "change.",
            Namespace, "O(1)",
            {ns, Tokened(IntArg("bs"), "BLOCK"), Tokened(IntArg("attn"), "ATTN"),
             Tokened(IntArg("kv_dim"), "KVDIM"), Tokened(IntArg("recurrent"), "RECURRENT"),
             Tokened(StrArg("tier", kArgOptional), "VQUANT"),
             Tokened(IntArg("bytes", kArgOptional), "MAXMEMORY")}));
  r.Add(cmd("kv.prefix.nsinfo", 2, kReadonly, "<ns>",
            "Describes a prefix-index namespace as k:v lines, or nil.", NsInfo, "O(1)", {ns}));
  r.Add(
      cmd("kv.prefix.bstore", -5, kWrite | kDenyOom,
          "<ns> <parent> <n> <hashes> <layer> <rows> [<layer> <rows> ...] [FMT F16|BF16|F32]",
          "Stores n consecutive full token blocks' K/V after the parent block; returns how many "
          "were new.",
          BStore, "O(N) in the rows",
          {ns, StrArg("parent"), n, hashes,
           BlockArg("layers", kArgMultiple | kArgOptional, {layer, StrArg("rows")}), fmt_in_opt}));
  r.Add(cmd("kv.prefix.bdrop", 4, kWrite, "<ns> <n> <hashes>",
            "Removes blocks, their descendants and every checkpoint anchored on them; returns how "
            "many of the listed blocks were stored.",
            BDrop, "O(N) in the entries removed", {ns, n, hashes}));
  r.Add(cmd("kv.prefix.bfetch", -5, kReadonly, "<ns> <n> <hashes> <layer> [FMT NATIVE]",
            "Returns one layer's K rows then V rows of the listed blocks, or nil if one is "
            "missing (no state is promised).",
            BFetch, "O(N) in the rows", {ns, n, hashes, layer, fmt_native_opt}));
  Arg checksum = TokenArg("checksum", "CHECKSUM");
  checksum.flags = kArgOptional;
  r.Add(
      cmd("kv.prefix.shmbfetch", -5, kReadonly, "<ns> <n> <hashes> <layer> [FMT NATIVE] [CHECKSUM]",
          "After SHM.HELLO: KV.PREFIX.BFETCH's rows as 2n pieces, every block's K rows then "
          "every block's V rows, each [arena, offset, length, generation, checksum, lease] "
          "(one lease for the call; checksum the piece's XXH3-64 hex with CHECKSUM, else nil) "
          "or its bytes; nil if a block is missing. Rows as stored only (fp32, or fp16/bf16 "
          "with FMT NATIVE).",
          ShmBFetch, "O(N) in the blocks; no byte is read or copied (CHECKSUM: O(N) in the bytes)",
          {ns, n, hashes, layer, fmt_native_opt, checksum}));
  r.Add(cmd(
      "ssm.prefix.ckpt.store", -5, kWrite | kDenyOom,
      "<ns> <anchor> <L> <pos> <layer> <blob> [<layer> <blob> ...] [TAIL <layer> <rows> "
      "...] [FMT F16|BF16|F32]",
      "Stores a checkpoint at position L: every recurrent layer's state and the partial "
      "block's K/V.",
      CkptStore, "O(N) in the bytes",
      {ns, StrArg("anchor"), IntArg("length"), StrArg("position"), layer_blobs, tail, fmt_in_opt}));
  r.Add(cmd("ssm.prefix.ckpt.mstore", -6, kWrite | kDenyOom,
            "<ns> <anchor> <L0> <k> <positions> <layer> <blob> [...] [TAIL <layer> <rows> ...] "
            "[FMT F16|BF16|F32]",
            "Stores k checkpoints at L0 .. L0+k-1 (a speculative window) in one record; returns "
            "k.",
            CkptMStore, "O(N) in the bytes",
            {ns, StrArg("anchor"), IntArg("first_length"), IntArg("k"), StrArg("positions"),
             layer_blobs, tail, fmt_in_opt}));
  r.Add(cmd("ssm.prefix.ckpt.drop", 4, kWrite, "<ns> <k> <positions>",
            "Drops checkpoints by position hash; returns how many were stored.", CkptDrop,
            "O(N) in the positions", {ns, IntArg("k"), StrArg("positions")}));
  r.Add(cmd(
      "ssm.prefix.ckpt.fetch", -3, kReadonly, "<ns> <pos> [LAYERS <layer> ...]",
      "Returns a checkpoint's recurrent blobs (all, or the listed layers), or nil.", CkptFetch,
      "O(N) in the layers",
      {ns, StrArg("position"), Tokened(IntArg("layer", kArgOptional | kArgMultiple), "LAYERS")}));
  r.Add(cmd("ssm.prefix.ckpt.shmfetch", -3, kReadonly, "<ns> <pos> [LAYERS <layer> ...] [CHECKSUM]",
            "After SHM.HELLO: SSM.PREFIX.CKPT.FETCH's blobs (all, or the listed layers), each "
            "answered as SSM.PREFIX.SHMFETCH answers a layer: [arena, offset, length, "
            "generation, checksum, lease] (one lease for the call; checksum the blob's XXH3-64 "
            "hex with CHECKSUM, else nil) or its bytes; nil when no checkpoint is there.",
            CkptShmFetch,
            "O(N) in the layers; no byte is read or copied (CHECKSUM: O(N) in the bytes)",
            {ns, StrArg("position"),
             Tokened(IntArg("layer", kArgOptional | kArgMultiple), "LAYERS"), checksum}));
  r.Add(cmd("kv.prefix.match", -4, kReadonly,
            "<ns> <n> <hashes> [AT <k> <positions> <pos-hashes>] [LEASE <ms>] [NOLEASE]",
            "Returns [L, lease, matched_blocks, pos, kv_bytes, state_bytes]: the longest L with "
            "K/V for [0, L) and a checkpoint at exactly L, pinned by a lease.",
            Match, "O(log N + K + D) for N hashes, K candidates, D blocks walked",
            {ns, n, hashes,
             BlockArg("at", kArgOptional,
                      {IntArg("k"), StrArg("positions"), StrArg("position_hashes")}, "AT"),
             Tokened(IntArg("ms", kArgOptional), "LEASE"), [] {
               Arg a = TokenArg("nolease", "NOLEASE");
               a.flags = kArgOptional;
               return a;
             }()}));
  // LFETCH's and SHMLFETCH's arguments after the lease.
  const Arg what = OneOfArg(
      "what", 0,
      {BlockArg("attn", 0,
                {layer, BlockArg("range", kArgOptional, {IntArg("start"), IntArg("end")}, "RANGE"),
                 fmt_native_opt},
                "ATTN"),
       BlockArg("state", 0, {Tokened(IntArg("layer", kArgOptional | kArgMultiple), "LAYERS")},
                "STATE")});
  Arg release = TokenArg("release", "RELEASE");
  release.flags = kArgOptional;
  r.Add(cmd("kv.prefix.lfetch", -4, kReadonly,
            "<ns> <lease> ATTN <layer> [RANGE <start> <end>] [FMT NATIVE] [RELEASE] | <ns> "
            "<lease> STATE [LAYERS <layer> ...] [RELEASE]",
            "Returns a leased answer's K rows then V rows for one layer, or its recurrent blobs.",
            LFetch, "O(N) in the rows", {ns, lease, what, release}));
  r.Add(cmd(
      "kv.prefix.shmlfetch", -4, kReadonly,
      "<ns> <lease> ATTN <layer> [RANGE <start> <end>] [FMT NATIVE] [CHECKSUM] [RELEASE] | "
      "<ns> <lease> STATE [LAYERS <layer> ...] [CHECKSUM] [RELEASE]",
      "After SHM.HELLO: KV.PREFIX.LFETCH's answer as pieces, each [arena, offset, length, "
      "generation, checksum, lease] or its bytes: ATTN the K rows then the V rows by block and "
      "tail, STATE one per recurrent layer. One SHM lease for the call; checksum is the piece's "
      "XXH3-64 hex with CHECKSUM, else nil. Rows as stored only (fp32, or fp16/bf16 with FMT "
      "NATIVE).",
      ShmLFetch, "O(N) in the blocks; no byte is read or copied (CHECKSUM: O(N) in the bytes)",
      {ns, lease, what, checksum, release}));
  r.Add(cmd("kv.prefix.release", 3, kReadonly | kFast, "<ns> <lease>",
            "Ends a lease; returns 1 when it was live.", Release, "O(1)", {ns, lease}));
}

}  // namespace prefixd::commands
