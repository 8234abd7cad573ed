// Same-host transport (docs/shm-transport.md): SHM.HELLO hands a unix-socket client read-only
// descriptors of the arenas values live in, SHM.GET (strings), SSM.PREFIX.SHMFETCH (recurrent
// state layers) and V.SHMFETCH (V-store rows) answer where the bytes lie under a lease instead of
// the bytes, SHM.RELEASE ends leases. Served only on the unix socket, only to a
// peer whose uid shm-allow-uids names.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "commands/families.h"
#include "commands/shm_lending.h"
#include "commands/vstore_shared.h"
#include "common/ascii.h"
#include "common/clock.h"
#include "common/numbers.h"
#include "common/shm_arena.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/keys.h"
#include "engine/memory_policy.h"
#include "engine/shm_leases.h"
#include "store/compact_session.h"
#include "store/vector_store.h"

namespace prefixd::commands {
namespace {

// SCM_RIGHTS carries at most this many descriptors in one message (the kernel's SCM_MAX_FD);
// SHM.HELLO passes no more at once, and a client asks again for the rest.
constexpr uint32_t kFdsPerHello = 253;
constexpr uint64_t kMaxVLayer = 0x7fffffff;  // V.FETCH's bound on a layer id

void CountLookup(Context& ctx, bool hit) {
  (hit ? ctx.engine.stats().keyspace_hits : ctx.engine.stats().keyspace_misses).Add();
}

void Hello(Context& ctx) {
  if (!ShmServed(ctx)) return;
  ucred peer{};
  socklen_t length = sizeof peer;
  if (::getsockopt(ctx.client.fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) {
    return ctx.reply.Error(errors::kShmNoPeerCredentials);
  }
  const std::string allowed = ctx.engine.settings().String(Setting::kShmAllowUids);
  if (!UidAllowed(allowed, peer.uid, static_cast<uint32_t>(::geteuid()))) {
    return ctx.reply.Error(errors::ShmUidRefused(peer.uid));
  }
  ctx.session.shm_hello = true;
  const uint32_t first = ctx.session.shm_arenas_sent;
  const uint32_t end = std::min(shm::ArenaCount(), first + kFdsPerHello);
  // Duplicates: the connection closes its copies once sent; the arenas keep theirs.
  std::vector<int> fds;
  for (uint32_t id = first; id < end; ++id) {
    const int fd = ::fcntl(shm::ReadOnlyFd(id), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
      for (int opened : fds) ::close(opened);
      return ctx.reply.Error(errors::kShmNoDescriptors);
    }
    fds.push_back(fd);
  }
  ctx.client.fds_to_send.insert(ctx.client.fds_to_send.end(), fds.begin(), fds.end());
  ctx.session.shm_arenas_sent = end;
  ctx.reply.ArrayLen(end - first);
  for (uint32_t id = first; id < end; ++id) {
    ctx.reply.ArrayLen(2);
    ctx.reply.Integer(id);
    ctx.reply.Integer(static_cast<int64_t>(shm::ArenaSize(id)));
  }
}

void Get(Context& ctx) {
  if (!ShmGreeted(ctx)) return;
  bool checksum = false;
  if (ctx.args.size() == 3) {
    if (!EqualsIgnoreCase(ctx.args[2], "checksum")) return ctx.reply.Error(errors::kSyntax);
    checksum = true;
  }
  const std::string_view key = ctx.args[1];
  auto info = LookupKeyPlace(ctx, key);
  CountLookup(ctx, info.has_value());
  if (!info) return ctx.reply.Null();
  if (info->type != store::KeyType::kString) return ctx.reply.Error(errors::kWrongType);
  LoadColdString(ctx.engine, Db(ctx), key, *info);
  const ShmLent lent = ShmLend(ctx, info->value);
  if (lent.place && lent.lease == 0) {
    return ctx.reply.Error(
        errors::ShmTooManyLeases(ctx.engine.settings().Int(Setting::kShmMaxLeases)));
  }
  ReplyShmLent(ctx, info->value, lent, checksum);
}

// SSM.PREFIX.SHMFETCH <sid> <layer> [<layer> ...]: MFETCH's consistent snapshot of the layers,
// each answered as SHM.GET answers a string (nil when absent). All leases or none: past the cap,
// the ones this call took are given back and the error answered.
void SsmFetch(Context& ctx) {
  if (!ShmGreeted(ctx)) return;
  const std::string_view sid = ctx.args[1];
  if (static_cast<int64_t>(sid.size()) > ctx.engine.settings().Int(Setting::kMaxSidLen)) {
    return ctx.reply.Error(
        errors::SidTooLong(sid.size(), ctx.engine.settings().Int(Setting::kMaxSidLen)));
  }
  std::vector<uint32_t> layers;
  for (size_t i = 2; i < ctx.args.size(); ++i) {
    auto layer = ParseInt64(ctx.args[i]);
    if (!layer || *layer < 0 || *layer > std::numeric_limits<int32_t>::max()) {
      return ctx.reply.Error(errors::NotInRange("layer", errors::Quoted(ctx.args[i]), 0,
                                                std::numeric_limits<int32_t>::max()));
    }
    layers.push_back(static_cast<uint32_t>(*layer));
  }
  // A small session lives in its keyspace entry, outside the arenas: its layers are answered
  // as bytes.
  const auto compact = Db(ctx).keys.ReadCompactSessionLive(
      sid, CommandClock::WallMs(), [&](std::string_view session) {
        ctx.reply.ArrayLen(layers.size());
        for (uint32_t layer : layers) {
          const auto bytes = store::compact_session::FindLayer(session, layer);
          CountLookup(ctx, bytes.has_value());
          bytes ? ctx.reply.Bulk(*bytes) : ctx.reply.Null();
        }
        return true;
      });
  if (compact == store::Keyspace::InlineRead::kCopied) return;
  store::Database& db = Db(ctx);
  PromoteOnRead(ctx.engine, db, sid);
  // Never streamed from disk: a cold layer is read into memory (an arena) to be leased.
  const auto values = db.state.GetMany(sid, layers);
  std::vector<const Bytes*> present(values.size(), nullptr);
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i]) present[i] = &*values[i];
  }
  std::vector<ShmLent> lent;
  if (!ShmLendAll(ctx, present, lent)) return;
  ctx.reply.ArrayLen(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    CountLookup(ctx, values[i].has_value());
    values[i] ? ReplyShmLent(ctx, *values[i], lent[i], false) : ctx.reply.Null();
  }
}

// V.SHMFETCH <sid> <layer> RANGE <start> <end> [FMT NATIVE]: V.FETCH RANGE's rows, one
// consistent state of the layer, as the pieces they are stored in, in row order: a piece in an
// arena as its place under a lease of its own, shared zeros (a gap, rows past the length) as the
// count of zero bytes, any other piece as its bytes. Nil for a layer with no tokens. Only rows
// sent as stored can be shared: a decoded tier is an error. All leases or none.
void VFetch(Context& ctx) {
  if (!ShmGreeted(ctx)) return;
  const auto& args = ctx.args;
  const std::string_view sid = args[1];
  if (!vstore::ValidSid(ctx, sid)) return;
  auto layer = vstore::ParseCount(args[2]);
  if (!layer || *layer > kMaxVLayer) {
    return ctx.reply.Error(errors::NotInRange("layer_id", errors::Quoted(args[2]), 0, kMaxVLayer));
  }
  if (!EqualsIgnoreCase(args[3], "RANGE")) return ctx.reply.Error(errors::kSyntax);
  auto start = vstore::ParseCount(args[4]);
  auto end = vstore::ParseCount(args[5]);
  if (!start || !end || *end <= *start) return ctx.reply.Error(errors::kBadVRange);
  const uint64_t max_tokens = vstore::LimitsOf(ctx.engine).max_tokens;
  if (*end > max_tokens) return ctx.reply.Error(errors::RangeOverMaxTokens(*end, max_tokens));
  bool native = false;
  if (args.size() == 8 && EqualsIgnoreCase(args[6], "FMT") && EqualsIgnoreCase(args[7], "NATIVE")) {
    native = true;
  } else if (args.size() != 6) {
    return ctx.reply.Error(errors::VFetchUnknownOption(args[6].substr(0, 64)));
  }
  store::VectorStore& vs = Db(ctx).vectors;
  auto described = vs.Describe(sid);
  if (!described) return ctx.reply.Error(errors::kSessionNotFound);
  const auto as_stored = [&](const store::VectorSessionInfo& info) {
    return store::StoresValues(info.tier) && (native || info.tier == store::Tier::kFp32);
  };
  if (!as_stored(*described))
    return ctx.reply.Error(
        errors::ShmRowsDecoded("V.SHMFETCH", "session", TierName(described->tier), "V.FETCH"));
  // Cold rows are read from disk into memory of their own (an arena region when large) for
  // this answer; the session stays cold.
  auto read =
      vs.ReadRange(sid, static_cast<uint32_t>(*layer), *start, *end, store::VectorStore::kReadAll);
  if (!read) return ctx.reply.Error(errors::kSessionNotFound);
  const auto& [info, rows] = *read;
  // Dropped and created again with another tier since Describe.
  if (!as_stored(info))
    return ctx.reply.Error(
        errors::ShmRowsDecoded("V.SHMFETCH", "session", TierName(info.tier), "V.FETCH"));
  if (rows.length == 0) return ctx.reply.Null();
  const std::vector<Bytes>& pieces = rows.rows.pieces;
  std::vector<const Bytes*> lendable(pieces.size(), nullptr);
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!store::VectorStore::IsSharedZeros(pieces[i])) lendable[i] = &pieces[i];
  }
  std::vector<ShmLent> lent;
  if (!ShmLendAll(ctx, lendable, lent)) return;
  PrefixReceipt& receipt = ctx.engine.receipt();
  receipt.fetches.Add();
  receipt.fetch_bytes.Add(rows.rows.bytes());
  ctx.reply.ArrayLen(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (store::VectorStore::IsSharedZeros(pieces[i])) {
      ctx.reply.Integer(static_cast<int64_t>(pieces[i].size()));
    } else {
      ReplyShmLent(ctx, pieces[i], lent[i], false);
    }
  }
}

void Release(Context& ctx) {
  if (!ShmGreeted(ctx)) return;
  std::vector<uint64_t> ids;
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    auto id = ParseInt64(ctx.args[i]);
    if (!id || *id <= 0) return ctx.reply.Error(errors::kNotInteger);
    ids.push_back(static_cast<uint64_t>(*id));
  }
  int64_t released = 0;
  if (auto& table = ctx.session.shm_leases; table != nullptr) {
    for (uint64_t id : ids) released += table->Release(id) ? 1 : 0;
  }
  ctx.reply.Integer(released);
}

}  // namespace

void RegisterShmCommands(Registry& r) {
  auto cmd = [](int keys, std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h) {
    return MakeSpec("shm", keys, std::move(name), arity, flags, std::move(syntax),
                    std::move(summary), h, "O(1)");
  };
  r.Add(cmd(0, "shm.hello", 1, kFast | kNoMulti | kNoScript, "",
            "Unix socket only, for a peer uid in shm-allow-uids: passes read-only descriptors "
            "of the arenas not passed yet (SCM_RIGHTS) and answers [id, size] for each.",
            Hello));
  r.Add(cmd(1, "shm.get", -2, kReadonly | kFast, "<key> [CHECKSUM]",
            "After SHM.HELLO: where a string's bytes lie, [arena, offset, length, generation, "
            "checksum (XXH3-64 hex with CHECKSUM, else nil), lease], under a lease; a value "
            "not in an arena answers its bytes; nil when missing.",
            Get));
  // In the SSM.PREFIX group, whose type check it takes (-WRONGTYPE for a key of another type).
  CommandSpec ssm_fetch =
      cmd(1, "ssm.prefix.shmfetch", -3, kReadonly | kFast, "<sid> <layer> [<layer> ...]",
          "After SHM.HELLO: SSM.PREFIX.MFETCH's snapshot of the layers, each answered as SHM.GET "
          "answers a string (its place under a lease, or its bytes), nil when absent.",
          SsmFetch);
  ssm_fetch.group = "ssm";
  r.Add(std::move(ssm_fetch));
  // In the V-store group, as V.FETCH.
  CommandSpec v_fetch = cmd(
      1, "v.shmfetch", -6, kReadonly, "<sid> <layer> RANGE <start> <end> [FMT NATIVE]",
      "After SHM.HELLO: V.FETCH RANGE's rows as the pieces they are stored in, in order: a "
      "piece in an arena as [arena, offset, length, generation, nil, lease], zero rows as their "
      "byte count, any other piece as its bytes; nil for a layer with no tokens. Rows sent as "
      "stored only (fp32, or fp16/bf16 with FMT NATIVE).",
      VFetch);
  v_fetch.group = "vstore";
  v_fetch.complexity = "O(N) in the stored pieces the rows span; no byte is read or copied";
  r.Add(std::move(v_fetch));
  r.Add(cmd(0, "shm.release", -2, kFast, "<lease> [<lease> ...]",
            "Ends leases SHM.GET gave this connection; answers how many were live.", Release));
}

}  // namespace prefixd::commands
