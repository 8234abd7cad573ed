// KV.PREFIX.*: attention-layer prompt prefixes in Pion's syntax. A prefix `<ns>` is a pair of
// V-store sessions, `<ns>_pk` (keys) and `<ns>_pv` (values), one layer per softmax-attention
// layer; REGISTER creates them, clients fill them with V.STOREBATCH and read them with V.FETCH.
// Also the value receipt (PION.STATS, INFO's # Pion and # Vstore sections) and clear errors for
// the commands that need Pion's Metal attention engine.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "commands/arg_reader.h"
#include "commands/families.h"
#include "commands/vstore_shared.h"
#include "common/ascii.h"
#include "common/key_slot.h"
#include "common/numbers.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/keys.h"
#include "engine/write_path.h"

namespace prefixd::commands {
namespace {

using store::VectorStore;

constexpr size_t kNamespaceSuffix = 3;  // "_pk" / "_pv"
constexpr uint64_t kMaxBlocks = uint64_t{1} << 24;
constexpr uint64_t kMaxBlockSize = uint64_t{1} << 31;
constexpr double kMaxPrefillMs = 86'400'000.0;  // a day, as Pion

void Line(std::string& out, std::string_view key, std::string_view value) {
  out.append(key).append(":").append(value).append("\r\n");
}
void Line(std::string& out, std::string_view key, uint64_t value) {
  Line(out, key, std::to_string(value));
}

bool ValidNamespace(Context& ctx, std::string_view ns) {
  return vstore::ValidSid(ctx, ns, "namespace", kNamespaceSuffix);
}

// PREFILL_MS: milliseconds, integral or decimal, 0 to a day; returns microseconds.
std::optional<uint64_t> ParsePrefillMs(Context& ctx, std::string_view command,
                                       std::string_view text) {
  std::string s(text.substr(0, 64));
  char* end = nullptr;
  errno = 0;
  const double ms = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || errno != 0 || !(ms >= 0.0) ||
      ms > kMaxPrefillMs) {
    ctx.reply.Error(errors::InvalidPrefillMs(command, s));
    return std::nullopt;
  }
  return static_cast<uint64_t>(std::llround(ms * 1000.0));
}

// KV.PREFIX.REGISTER <ns> <kv_dim> <vquant> [BLOCKS <bs> <n> <blob>] [PREFILL_MS <ms>]
void Register(Context& ctx) {
  const auto& args = ctx.args;
  const std::string_view ns = args[1];
  if (!ValidNamespace(ctx, ns)) return;
  // In a cluster the registration and its two V-store halves must share a node: only a hash tag
  // guarantees their slots agree.
  if (ctx.engine.cluster != nullptr && (KeySlot(std::string(ns) + "_pk") != KeySlot(ns) ||
                                        KeySlot(std::string(ns) + "_pv") != KeySlot(ns))) {
    return ctx.reply.Error(errors::KvNamespaceNeedsHashTag(ns));
  }
  const vstore::Limits limits = vstore::LimitsOf(ctx.engine);
  auto dim = vstore::ParseCount(args[2]);
  if (!dim || *dim < 1 || *dim > limits.max_dim) {
    return ctx.reply.Error(errors::KvInvalidKvDim(limits.max_dim));
  }
  auto tier = store::ParseTier(args[3]);
  if (!tier) {
    return ctx.reply.Error(vstore::UnknownTierError("KV.PREFIX.REGISTER", "vquant", args[3]));
  }
  if (std::string why = store::CheckDim(*tier, static_cast<uint32_t>(*dim)); !why.empty()) {
    return ctx.reply.Error(errors::CommandFailed("KV.PREFIX.REGISTER", why));
  }
  persist::KvRegister record;
  record.ns = ns;
  record.kv_dim = static_cast<uint32_t>(*dim);
  record.tier = static_cast<uint32_t>(*tier);
  for (ArgReader r(ctx, 4); r.more();) {
    if (r.Keyword("BLOCKS", 3)) {
      auto bs = vstore::ParseCount(r.Next());
      auto n = vstore::ParseCount(r.Next());
      if (!bs || *bs < 1 || *bs > kMaxBlockSize || !n || *n > kMaxBlocks) {
        return ctx.reply.Error(errors::KvInvalidBlocks(kMaxBlockSize, kMaxBlocks));
      }
      const size_t blob = r.position();
      if (r.Next().size() != *n * 8) {
        return ctx.reply.Error(
            errors::KvBlobSize("KV.PREFIX.REGISTER: BLOCKS", args[blob].size(), *n));
      }
      record.block_size = static_cast<uint32_t>(*bs);
      record.block_hashes.pieces = {args.TakeBytes(blob)};
    } else if (r.Keyword("PREFILL_MS", 1)) {
      auto prefill_us = ParsePrefillMs(ctx, "KV.PREFIX.REGISTER", r.Next());
      if (!prefill_us) return;
      record.prefill_us = *prefill_us;
    } else {
      return ctx.reply.Error(errors::KvUnknownOption("KV.PREFIX.REGISTER", r.Peek().substr(0, 64),
                                                     "BLOCKS <bs> <n> <blob> or PREFILL_MS <ms>"));
    }
  }
  VectorStore& vs = Db(ctx).vectors;
  record.key_index = vs.ReserveIndex();
  record.value_index = vs.ReserveIndex();
  auto done = Mutate(ctx, record);
  if (!done) return;
  if (done->kind == persist::Outcome::Kind::kLimit) {
    return ctx.reply.Error(vstore::SessionLimitError("KV.PREFIX.REGISTER", limits.max_sessions));
  }
  ctx.reply.Simple("OK");
}

// KV.PREFIX.LOOKUP <ns> [TOKENS n] [PREFILL_MS ms]: +HIT when both sessions exist and hold rows.
void Lookup(Context& ctx) {
  const auto& args = ctx.args;
  const std::string_view ns = args[1];
  if (!ValidNamespace(ctx, ns)) return;
  std::optional<uint64_t> tokens, prefill_us;
  for (ArgReader r(ctx, 2); r.more();) {
    if (r.remaining() < 2) return ctx.reply.Error(errors::kSyntax);
    if (r.Keyword("TOKENS")) {
      const std::string_view text = r.Next();
      tokens = vstore::ParseCount(text);
      if (!tokens) return ctx.reply.Error(errors::KvInvalidTokens(text.substr(0, 64)));
    } else if (r.Keyword("PREFILL_MS")) {
      prefill_us = ParsePrefillMs(ctx, "KV.PREFIX.LOOKUP", r.Next());
      if (!prefill_us) return;
    } else {
      return ctx.reply.Error(errors::KvUnknownOption("KV.PREFIX.LOOKUP", r.Peek().substr(0, 64),
                                                     "TOKENS <n> or PREFILL_MS <ms>"));
    }
  }
  const store::PrefixView view = Db(ctx).vectors.ViewPrefix(ns);
  PrefixReceipt& receipt = ctx.engine.receipt();
  // Unlike Pion, a registered prefix whose sessions hold no rows is a MISS: a HIT promises the
  // K/V is there to fetch.
  const bool hit =
      view.key_exists && view.value_exists && view.key_tokens > 0 && view.value_tokens > 0;
  if (!hit) {
    receipt.misses.Add();
    return ctx.reply.Simple("MISS");
  }
  const uint64_t served = tokens.value_or(view.key_tokens);
  receipt.hits.Add();
  receipt.tokens_served.Add(served);
  receipt.bytes_served.Add(view.bytes);
  if (!prefill_us) prefill_us = view.prefill_us;
  if (prefill_us) {
    receipt.hits_measured.Add();
    receipt.prefill_us_measured.Add(*prefill_us);
    receipt.prefill_us_saved.Add(*prefill_us);
  } else {
    const auto per_token =
        static_cast<uint64_t>(ctx.engine.settings().Int(Setting::kKvPrefixPrefillUsPerToken));
    receipt.prefill_us_saved.Add(served * per_token);
  }
  ctx.reply.Simple("HIT");
}

// KV.PREFIX.DROP <ns>...: every namespace is checked before any is dropped. A prefix-index
// namespace (KV.PREFIX.NAMESPACE) goes with its blocks and checkpoints (docs/prefix-index.md).
void DropPrefixes(Context& ctx) {
  const auto& args = ctx.args;
  for (size_t i = 1; i < args.size(); ++i) {
    if (!ValidNamespace(ctx, args[i])) return;
  }
  int64_t dropped = 0;
  for (size_t i = 1; i < args.size(); ++i) {
    const auto info = LookupKey(ctx, args[i], /*touch=*/false);
    if (info && info->type == store::KeyType::kPrefixIndex) {
      auto done = Mutate(ctx, persist::PrefixNamespaceDrop{std::string(args[i])});
      if (!done) return;
      dropped += done->kind == persist::Outcome::Kind::kApplied ? 1 : 0;
      continue;
    }
    auto done = Mutate(ctx, persist::KvDrop{std::string(args[i])});
    if (!done) return;
    const bool removed = done->kind == persist::Outcome::Kind::kApplied;
    dropped += removed ? 1 : 0;
  }
  ctx.reply.Integer(dropped);
}

// KV.PREFIX.INFO: Pion's fields, with the ones about Pion-only machinery at their idle values.
void Info(Context& ctx) {
  VectorStore& vs = Db(ctx).vectors;
  const store::VectorStoreStats s = vs.Stats();
  const auto [prefixes, prefix_tokens] = vs.PrefixTotals();
  persist::Durability* d = ctx.engine.durability();
  std::string out;
  Line(out, "registered_prefixes", prefixes);
  Line(out, "total_prefix_tokens", prefix_tokens);
  Line(out, "vstore_sessions", s.sessions);
  Line(out, "vstore_total_fetches", ctx.engine.receipt().fetches.Sum());
  Line(out, "vstore_evictions", uint64_t{0});
  Line(out, "vstore_max_sessions", vstore::LimitsOf(ctx.engine).max_sessions);
  Line(out, "vstore_bytes", s.payload_bytes);
  Line(out, "vstore_allocated_bytes", s.allocated_bytes);
  Line(out, "wal_enabled", uint64_t{d != nullptr});
  if (d != nullptr) {
    const persist::PersistStats p = d->Stats();
    Line(out, "wal_bytes", p.log.bytes);
    Line(out, "wal_appended", p.log.records_appended);
    Line(out, "wal_replayed", p.recovered_records);
  } else {
    Line(out, "wal_bytes", uint64_t{0});
    Line(out, "wal_appended", uint64_t{0});
    Line(out, "wal_replayed", uint64_t{0});
  }
  Line(out, "directory_enabled", uint64_t{0});
  Line(out, "my_worker_id", uint64_t{0});
  Line(out, "directory_entries", uint64_t{0});
  for (std::string_view metal : {"sdpa_warm", "sdpa_cold", "sdpa_demotions", "sdpa_rehydrates"}) {
    Line(out, metal, uint64_t{0});
  }
  ctx.reply.Bulk(out);
}

// KV.PREFIX.BLOCKS <ns>: [u32 bs][u32 n][n × u64], or +UNKNOWN.
void Blocks(Context& ctx) {
  const std::string_view ns = ctx.args[1];
  if (!ValidNamespace(ctx, ns)) return;
  auto spec = Db(ctx).vectors.Prefix(ns);
  if (!spec || spec->block_size == 0) return ctx.reply.Simple("UNKNOWN");
  const size_t n = spec->block_hashes.size() / 8;
  Bytes head = Bytes::Allocate(8);
  const uint32_t fields[2] = {spec->block_size, static_cast<uint32_t>(n)};
  std::memcpy(head.mutable_data(), fields, 8);  // little-endian hosts only, as the codec
  const Bytes pieces[2] = {head, spec->block_hashes};
  ctx.reply.BulkPieces(pieces);
}

// KV.PREFIX.MEMBERSHIP <ns> <n> <blob>: bit i (LSB first) set when probe i is a block of ns.
void Membership(Context& ctx) {
  const auto& args = ctx.args;
  const std::string_view ns = args[1];
  if (!ValidNamespace(ctx, ns)) return;
  auto n = vstore::ParseCount(args[2]);
  if (!n || *n > kMaxBlocks) {
    return ctx.reply.Error(errors::KvInvalidProbeCount(kMaxBlocks));
  }
  if (args[3].size() != *n * 8) {
    return ctx.reply.Error(errors::KvBlobSize("KV.PREFIX.MEMBERSHIP:", args[3].size(), *n));
  }
  std::vector<uint64_t> probes(*n);
  if (*n > 0) std::memcpy(probes.data(), args[3].data(), *n * 8);
  auto present = Db(ctx).vectors.Membership(ns, probes);
  if (!present) return ctx.reply.Simple("UNKNOWN");
  std::string bitmap((*n + 7) / 8, '\0');
  for (size_t i = 0; i < present->size(); ++i) {
    if ((*present)[i]) bitmap[i / 8] = static_cast<char>(bitmap[i / 8] | (1 << (i % 8)));
  }
  ctx.reply.Bulk(bitmap);
}

// KV.PREFIX.OWNER <ns>: the worker holding the prefix (always 0: one keyspace), or -1.
void Owner(Context& ctx) {
  const std::string_view ns = ctx.args[1];
  if (!ValidNamespace(ctx, ns)) return;
  const store::PrefixView view = Db(ctx).vectors.ViewPrefix(ns);
  ctx.reply.Simple(view.key_exists && view.value_exists ? "0" : "-1");
}

// KV.PREFIX.SAVE: a snapshot of everything (SSM state included), as SAVE.
void Save(Context& ctx) {
  persist::Durability* d = ctx.engine.durability();
  if (ctx.args.size() > 1) {
    return ctx.reply.Error(errors::kKvSaveNoPath);
  }
  if (d == nullptr) {
    return ctx.reply.Error(errors::kKvSavePersistenceOff);
  }
  if (d->Stats().bgsave_in_progress) {
    return ctx.reply.Error(errors::kBgsaveInProgress);
  }
  if (Status saved = d->Save(); !saved.ok())
    return ctx.reply.Error(errors::Because(saved.message()));
  ctx.reply.Simple("OK");
}

// KV.PREFIX.COMMIT: everything acknowledged so far is fsynced before the reply, whatever
// appendfsync says.
void Commit(Context& ctx) {
  persist::Durability* d = ctx.engine.durability();
  if (d == nullptr) {
    return ctx.reply.Error(errors::kKvCommitPersistenceOff);
  }
  d->Sync();
  if (!d->healthy())
    return ctx.reply.Error(errors::CommandFailed("KV.PREFIX.COMMIT", d->last_error()));
  ctx.reply.Simple("OK");
}

void NeedsMetal(Context& ctx) {
  ctx.reply.Error(errors::NeedsAttentionEngine(AsciiUpper(ctx.spec.full_name)));
}

std::string SecondsText(uint64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llu.%03llu", static_cast<unsigned long long>(us / 1000000),
                static_cast<unsigned long long>(us / 1000 % 1000));
  return buf;
}

// PION.STATS [RESET]: Pion's 16 fields, in its order.
void PionStats(Context& ctx) {
  PrefixReceipt& r = ctx.engine.receipt();
  ArgReader options(ctx, 1);
  if (options.remaining() == 1 && options.Keyword("RESET")) {
    r.Reset();
    return ctx.reply.Simple("OK");
  }
  if (options.more()) return ctx.reply.Error(errors::kSyntax);
  auto& w = ctx.reply;
  w.MapLen(16);
  auto integer = [&](std::string_view key, uint64_t value) {
    w.Bulk(key);
    w.Integer(static_cast<int64_t>(value));
  };
  integer("worker_id", 0);
  integer("uptime_in_seconds", static_cast<uint64_t>(ctx.engine.UptimeSeconds()));
  integer("kvprefix_hits", r.hits.Sum());
  integer("kvprefix_misses", r.misses.Sum());
  integer("kvprefix_hits_measured", r.hits_measured.Sum());
  integer("kvprefix_tokens_served", r.tokens_served.Sum());
  integer("kvprefix_bytes_served", r.bytes_served.Sum());
  integer("kvprefix_prefill_us_saved", r.prefill_us_saved.Sum());
  integer("kvprefix_prefill_us_measured", r.prefill_us_measured.Sum());
  w.Bulk("prefill_seconds_avoided");
  w.Bulk(SecondsText(r.prefill_us_saved.Sum()));
  w.Bulk("prefill_seconds_avoided_measured");
  w.Bulk(SecondsText(r.prefill_us_measured.Sum()));
  for (std::string_view none :
       {"semantic_hits", "semantic_misses", "moe_hits", "moe_misses", "vector_queries"}) {
    integer(none, 0);
  }
}

}  // namespace

// INFO's # Pion section: the value receipt, in PION.STATS's terms.
void PionInfoSection(Engine& e, std::string& out) {
  PrefixReceipt& r = e.receipt();
  Line(out, "stats_scope", "server");
  Line(out, "kvprefix_hits", r.hits.Sum());
  Line(out, "kvprefix_misses", r.misses.Sum());
  Line(out, "kvprefix_hits_measured", r.hits_measured.Sum());
  Line(out, "kvprefix_tokens_served", r.tokens_served.Sum());
  Line(out, "kvprefix_bytes_served", r.bytes_served.Sum());
  Line(out, "kvprefix_prefill_us_saved", r.prefill_us_saved.Sum());
  Line(out, "kvprefix_prefill_us_measured", r.prefill_us_measured.Sum());
  Line(out, "prefill_seconds_avoided", SecondsText(r.prefill_us_saved.Sum()));
  Line(out, "prefill_seconds_avoided_measured", SecondsText(r.prefill_us_measured.Sum()));
  Line(out, "prefill_us_per_token_estimate",
       static_cast<uint64_t>(e.settings().Int(Setting::kKvPrefixPrefillUsPerToken)));
}

// INFO's # Vstore section: what the V-store holds and serves.
void VstoreInfoSection(Engine& e, std::string& out) {
  const store::VectorStoreStats s = e.VectorStats();
  Line(out, "vstore_sessions", s.sessions);
  Line(out, "vstore_layers", s.layers);
  Line(out, "vstore_tokens", s.tokens);
  Line(out, "vstore_payload_bytes", s.payload_bytes);
  Line(out, "vstore_allocated_bytes", s.allocated_bytes);
  Line(out, "vstore_overhead_bytes", s.overhead_bytes);
  Line(out, "vstore_prefixes", s.prefixes);
  Line(out, "vstore_fetches", e.receipt().fetches.Sum());
  Line(out, "vstore_fetch_bytes", e.receipt().fetch_bytes.Sum());
}

void RegisterKvPrefixCommands(Registry& r) {
  auto cmd = [](std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h, std::string complexity = "O(1)", int keys = 1) {
    return MakeSpec("kvprefix", keys, std::move(name), arity, flags, std::move(syntax),
                    std::move(summary), h, std::move(complexity));
  };
  r.Add(cmd("kv.prefix.register", -4, kWrite | kDenyOom,
            "<ns> <kv_dim> <vquant> [BLOCKS <block_size> <n> <hashes>] [PREFILL_MS <ms>]",
            "Registers a prefix and creates its <ns>_pk / <ns>_pv sessions; again: no change.",
            Register, "O(N) in the block hashes"));
  r.Add(cmd("kv.prefix.lookup", -2, kReadonly | kFast, "<ns> [TOKENS <n>] [PREFILL_MS <ms>]",
            "HIT when <ns>_pk and <ns>_pv exist and both hold rows, else MISS; counts the receipt.",
            Lookup));
  r.Add(cmd("kv.prefix.drop", -2, kWrite, "<ns> [ns ...]",
            "Removes prefixes (registration and both sessions) or prefix-index namespaces; returns "
            "how many existed.",
            DropPrefixes, "O(N) in the namespaces", -1));
  r.Add(cmd("kv.prefix.info", 1, kReadonly, "",
            "Describes the registered prefixes, the V-store and its log as k:v lines.", Info,
            "O(N) in the prefixes", 0));
  r.Add(cmd("kv.prefix.blocks", 2, kReadonly, "<ns>",
            "Returns the registered block hashes as [u32 bs][u32 n][n x u64], or UNKNOWN.",
            Blocks));
  r.Add(cmd("kv.prefix.membership", 4, kReadonly, "<ns> <n> <hashes>",
            "Returns a bitmap (LSB first) of which of n u64 hashes are blocks of the prefix, or "
            "UNKNOWN.",
            Membership, "O(N log M)"));
  r.Add(cmd("kv.prefix.owner", 2, kReadonly | kFast, "<ns>",
            "Returns the worker holding the prefix: 0 (prefixd has one keyspace), or -1.", Owner));
  r.Add(cmd("kv.prefix.save", -1, kAdmin | kNoScript, "",
            "Writes a snapshot now, as SAVE (SSM state included), and cuts the log.", Save,
            "O(N) in the stored bytes", 0));
  r.Add(cmd("kv.prefix.commit", 1, 0, "",
            "Fsyncs every write acknowledged so far, whatever appendfsync says.", Commit,
            "O(1); waits for one fsync", 0));
  r.Add(cmd("kv.prefix.warm", -2, 0, "<ns> <heads> <head_dim> [attend_sid]",
            "Pion's Metal cache warm-up: answers an error (prefixd has no attention engine).",
            NeedsMetal, "O(1)", 0));
  for (const char* name :
       {"attend.prefix.store", "attend.prefix.lookup", "attend.prefix.query",
        "attend.prefix.query_fused", "attend.prefix.query_sparse",
        "attend.prefix.query_sparse_auto", "attend.prefix.query_sparse_auto_fused"}) {
    r.Add(cmd(name, -1, 0, "...",
              "Pion's Metal attention: answers an error (prefixd has no attention engine).",
              NeedsMetal, "O(1)", 0));
  }
  r.Add(cmd("pion.stats", -1, kLoading | kStale, "[RESET]",
            "The value receipt: prefix hits, misses, tokens and bytes served, prefill time "
            "avoided, in Pion's 16 fields; RESET zeroes them.",
            PionStats, "O(1)", 0));
}

}  // namespace prefixd::commands
