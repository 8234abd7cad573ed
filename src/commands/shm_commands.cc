// Same-host transport (docs/shm-transport.md): SHM.HELLO hands a unix-socket client read-only
// descriptors of the arenas values live in, SHM.GET (strings) and SSM.PREFIX.SHMFETCH (recurrent
// state layers) answer where the bytes lie under a lease instead of the bytes, SHM.RELEASE ends
// leases. Served only on the unix socket, only to a
// peer whose uid shm-allow-uids names.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "commands/families.h"
#include "common/ascii.h"
#include "common/bytes.h"
#include "common/clock.h"
#include "common/numbers.h"
#include "common/shm_arena.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/keys.h"
#include "engine/memory_policy.h"
#include "engine/shm_leases.h"
#include "engine/write_path.h"
#include "store/compact_session.h"

namespace prefixd::commands {
namespace {

// SCM_RIGHTS carries at most this many descriptors in one message (the kernel's SCM_MAX_FD);
// SHM.HELLO passes no more at once, and a client asks again for the rest.
constexpr uint32_t kFdsPerHello = 253;

void CountLookup(Context& ctx, bool hit) {
  (hit ? ctx.engine.stats().keyspace_hits : ctx.engine.stats().keyspace_misses).Add();
}

// Whether the connection may use SHM.* at all; the error queued when not.
bool Served(Context& ctx) {
  if (!ctx.client.unix_socket) {
    ctx.reply.Error(errors::kShmUnixOnly);
    return false;
  }
  if (!shm::ArenasEnabled()) {
    ctx.reply.Error(errors::kShmArenasOff);
    return false;
  }
  return true;
}

// Served, and SHM.HELLO has passed this connection's credentials.
bool Greeted(Context& ctx) {
  if (!Served(ctx)) return false;
  if (!ctx.session.shm_hello) {
    ctx.reply.Error(errors::kShmHelloFirst);
    return false;
  }
  return true;
}

void Hello(Context& ctx) {
  if (!Served(ctx)) return;
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
  ctx.client.accepts_fds = true;  // SHM.SET's memfds: the connection receives them from now on
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

// A value's answer: where it lies under a new lease (`place` set, `lease` its id, 0 when the cap
// refused it), or its bytes (`place` empty: not in an arena).
struct Lent {
  std::optional<shm::Place> place;
  uint64_t lease = 0;
};

Lent Lend(Context& ctx, const Bytes& value) {
  Lent lent;
  if (!value.empty()) lent.place = shm::Locate(value.data(), value.size());
  if (!lent.place) return lent;
  auto& table = ctx.session.shm_leases;
  if (table == nullptr) table = NewShmLeaseTable();
  const int64_t cap = ctx.engine.settings().Int(Setting::kShmMaxLeases);
  const int64_t expires = CoarseNowMs() + ctx.engine.settings().Int(Setting::kShmLeaseTimeout);
  lent.lease = table->Add(value, expires, static_cast<size_t>(cap));
  return lent;
}

void ReplyLent(Context& ctx, const Bytes& value, const Lent& lent, bool checksum) {
  if (!lent.place) return ctx.reply.Bulk(value);
  ctx.reply.ArrayLen(6);
  ctx.reply.Integer(lent.place->arena);
  ctx.reply.Integer(static_cast<int64_t>(lent.place->offset));
  ctx.reply.Integer(static_cast<int64_t>(value.size()));
  ctx.reply.Integer(static_cast<int64_t>(lent.place->generation));
  if (checksum) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx",
                  static_cast<unsigned long long>(XXH3_64bits(value.data(), value.size())));
    ctx.reply.Bulk(std::string_view(hex, 16));
  } else {
    ctx.reply.Null();
  }
  ctx.reply.Integer(static_cast<int64_t>(lent.lease));
}

void Get(Context& ctx) {
  if (!Greeted(ctx)) return;
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
  const Lent lent = Lend(ctx, info->value);
  if (lent.place && lent.lease == 0) {
    return ctx.reply.Error(
        errors::ShmTooManyLeases(ctx.engine.settings().Int(Setting::kShmMaxLeases)));
  }
  ReplyLent(ctx, info->value, lent, checksum);
}

// SSM.PREFIX.SHMFETCH <sid> <layer> [<layer> ...]: MFETCH's consistent snapshot of the layers,
// each answered as SHM.GET answers a string (nil when absent). All leases or none: past the cap,
// the ones this call took are given back and the error answered.
void SsmFetch(Context& ctx) {
  if (!Greeted(ctx)) return;
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
  std::vector<Lent> lent(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i]) continue;
    lent[i] = Lend(ctx, *values[i]);
    if (lent[i].place && lent[i].lease == 0) {
      for (const Lent& taken : lent) {
        if (taken.lease != 0) ctx.session.shm_leases->Release(taken.lease);
      }
      return ctx.reply.Error(
          errors::ShmTooManyLeases(ctx.engine.settings().Int(Setting::kShmMaxLeases)));
    }
  }
  ctx.reply.ArrayLen(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    CountLookup(ctx, values[i].has_value());
    values[i] ? ReplyLent(ctx, *values[i], lent[i], false) : ctx.reply.Null();
  }
}

void Release(Context& ctx) {
  if (!Greeted(ctx)) return;
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

// --- Zero-copy writes: SHM.SET <key> <length> [<offset>] with a memfd passed on its bytes ---

// Below this a value is copied: a mapping of its own costs a page and a vm.max_map_count entry,
// more than copying a few KiB (the pool's own threshold for a mapping, common/bytes.cc).
constexpr uint64_t kAdoptFrom = uint64_t{32} << 10;

// The seals that make a file's bytes unchangeable: no write (through any descriptor or mapping,
// nor a hole punched), no shrinking. Growing leaves [offset, offset + length) alone.
constexpr int kAdoptSeals = F_SEAL_WRITE | F_SEAL_SHRINK;

// The claimed descriptor, closed when the command returns (an adopted mapping keeps the memory).
struct ClaimedFd {
  int fd = -1;
  ~ClaimedFd() {
    if (fd >= 0) ::close(fd);
  }
};

// [offset, offset + length) of `fd` as a value: the file's own pages mapped read-only when its
// seals say they can never change, else one copy. Sets `adopted`; an error text on failure.
std::string ValueFromFile(int fd, uint64_t offset, uint64_t length, Bytes& value, bool& adopted) {
  adopted = false;
  if (length == 0) {
    value = Bytes::CopyCompact({});
    return {};
  }
  const int seals = ::fcntl(fd, F_GET_SEALS);  // EINVAL for a file that is not a memfd
  if (length >= kAdoptFrom && seals >= 0 && (seals & kAdoptSeals) == kAdoptSeals) {
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t start = offset / page * page;
    const uint64_t mapped = (offset - start + length + page - 1) / page * page;
    void* base = ::mmap(nullptr, mapped, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(start));
    if (base != MAP_FAILED) {
      value = Bytes::AdoptMapping(base, mapped, offset - start, length);
      adopted = true;
      return {};
    }
    // Out of mappings (vm.max_map_count) or memory for page tables: a copy still stores it.
  }
  Bytes copy = length >= kAdoptFrom ? Bytes::Allocate(length) : Bytes();
  std::string small;
  uint8_t* out = nullptr;
  if (length >= kAdoptFrom) {
    out = copy.mutable_data();
  } else {
    small.resize(length);
    out = reinterpret_cast<uint8_t*>(small.data());
  }
  uint64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, out + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errors::ShmSetReadFailed(std::strerror(errno));
    if (n == 0) return errors::ShmSetReadFailed("the file ended early");
    done += static_cast<uint64_t>(n);
  }
  value = length >= kAdoptFrom ? std::move(copy) : Bytes::CopyCompact(small);
  return {};
}

void SetFromFile(Context& ctx) {
  if (!Greeted(ctx)) return;
  // The oldest descriptor the client passed, claimed before anything can fail, so that a refused
  // SHM.SET never leaves its descriptor to the next one; the connection closes any others
  // unclaimed once the requests of their read have run.
  ClaimedFd claimed;
  if (auto& passed = ctx.client.fds_received; !passed.empty()) {
    claimed.fd = passed.front();
    passed.erase(passed.begin());
  }
  if (ctx.args.size() > 4) return ctx.reply.Error(errors::kSyntax);
  const std::string_view key = ctx.args[1];
  auto length = ParseInt64(ctx.args[2]);
  if (!length || *length < 0) return ctx.reply.Error(errors::kNotInteger);
  int64_t offset = 0;
  if (ctx.args.size() == 4) {
    auto parsed = ParseInt64(ctx.args[3]);
    if (!parsed || *parsed < 0) return ctx.reply.Error(errors::kNotInteger);
    offset = *parsed;
  }
  if (*length > ctx.engine.settings().Int(Setting::kProtoMaxBulkLen)) {
    return ctx.reply.Error(errors::kStringTooLong);
  }
  if (claimed.fd < 0) return ctx.reply.Error(errors::kShmSetNoDescriptor);
  struct stat st {};
  if (::fstat(claimed.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return ctx.reply.Error(errors::kShmSetNotAFile);
  }
  const auto file_size = static_cast<uint64_t>(st.st_size);
  const auto want = static_cast<uint64_t>(*length), at = static_cast<uint64_t>(offset);
  if (at > file_size || want > file_size - at) {
    return ctx.reply.Error(errors::ShmSetPastEnd(at, want, file_size));
  }
  Bytes value;
  bool adopted = false;
  if (std::string why = ValueFromFile(claimed.fd, at, want, value, adopted); !why.empty()) {
    return ctx.reply.Error(why);
  }
  // SET's record, with SET's handling of a key of another type (it is replaced).
  const uint32_t flags = static_cast<uint32_t>(store::EncodingOf(value.view()))
                         << persist::StringSet::kEncodingShift;
  const persist::StringSet record{persist::RecordKey::Borrow(key), flags, 0,
                                  persist::Blob{{value}}};
  KeyLocks lock(ctx.engine, key);
  const auto existing = LookupKeyToReplace(ctx, key);
  if (existing && existing->type != store::KeyType::kString) {
    if (std::string why = WritePath(ctx.engine).Refusal(record); !why.empty()) {
      return ctx.reply.Error(why);
    }
    Deleted done = DeleteKey(ctx, key, existing->type);
    if (!done.ok) return ctx.reply.Error(done.error);
    ctx.client.reply_needs_lsn = std::max(ctx.client.reply_needs_lsn, done.lsn);
  }
  if (!Mutate(ctx, record).has_value()) return;
  if (ctx.propagate.wanted()) ctx.propagate.Send({"SET", key, value.view()});
  ctx.reply.Simple(adopted ? "ADOPTED" : "COPIED");
}

void RegisterShmWriteCommands(Registry& r) {
  r.Add(MakeSpec(
      "shm", 1, "shm.set", -3, kWrite | kDenyOom | kNoMulti | kNoScript,
      "<key> <length> [<offset>]",
      "After SHM.HELLO, with a file descriptor passed on the request's bytes "
      "(SCM_RIGHTS): stores [offset, offset + length) of that file as the key's "
      "string value (as SET). A memfd sealed with F_SEAL_WRITE and F_SEAL_SHRINK is adopted "
      "without a copy from 32 KiB (ADOPTED), anything else copied once (COPIED).",
      SetFromFile, "O(1) adopted, O(N) copied"));
}

}  // namespace

void RegisterShmCommands(Registry& r) {
  RegisterShmWriteCommands(r);
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
  r.Add(cmd(0, "shm.release", -2, kFast, "<lease> [<lease> ...]",
            "Ends leases SHM.GET gave this connection; answers how many were live.", Release));
}

}  // namespace prefixd::commands
