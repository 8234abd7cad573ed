// Same-host transport (docs/shm-transport.md): SHM.HELLO hands a unix-socket client read-only
// descriptors of the arenas values live in, SHM.GET (strings), SSM.PREFIX.SHMFETCH (recurrent
// state layers) and V.SHMFETCH (V-store rows, of one layer or a BATCH of layers) answer where the
// bytes lie under a lease instead of the bytes, SHM.RELEASE ends leases. Served only on the unix
// socket, only to a peer whose uid shm-allow-uids names.
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
#include <span>
#include <string>
#include <vector>

#include "commands/families.h"
#include "commands/shm_call.h"
#include "commands/shm_lending.h"
#include "commands/string_set.h"
#include "commands/vstore_shared.h"
#include "common/ascii.h"
#include "common/bytes.h"
#include "common/clock.h"
#include "common/expiry_args.h"
#include "common/numbers.h"
#include "common/shm_arena.h"
#include "engine/engine.h"
#include "engine/errors.h"
#include "engine/keys.h"
#include "engine/memory_policy.h"
#include "engine/shm_leases.h"
#include "engine/write_path.h"
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
  const Bytes* value[] = {&info->value};
  std::vector<ShmLent> lent;
  if (!ShmLendAll(ctx, key, value, lent)) return;
  ReplyShmLent(ctx, info->value, lent[0], checksum);
}

// SSM.PREFIX.SHMFETCH <sid> <layer> [<layer> ...] [CHECKSUM]: MFETCH's consistent snapshot of
// the layers, each answered as SHM.GET answers a string (nil when absent), all under one lease;
// past the cap nothing is leased and the error answered.
void SsmFetch(Context& ctx) {
  if (!ShmGreeted(ctx)) return;
  const std::string_view sid = ctx.args[1];
  size_t end = ctx.args.size();
  const bool checksum = TakeChecksumOption(ctx, 3, end);  // at least one layer before it
  if (static_cast<int64_t>(sid.size()) > ctx.engine.settings().Int(Setting::kMaxSidLen)) {
    return ctx.reply.Error(
        errors::SidTooLong(sid.size(), ctx.engine.settings().Int(Setting::kMaxSidLen)));
  }
  std::vector<uint32_t> layers;
  for (size_t i = 2; i < end; ++i) {
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
  if (!ShmLendAll(ctx, sid, present, lent)) return;
  ctx.reply.ArrayLen(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    CountLookup(ctx, values[i].has_value());
    values[i] ? ReplyShmLent(ctx, *values[i], lent[i], checksum) : ctx.reply.Null();
  }
}

// Whether rows of a session of `info`'s tier go as stored (fp32, or fp16/bf16 with FMT NATIVE):
// only those can be shared; a decoded tier is an error.
bool SharedAsStored(const store::VectorSessionInfo& info, bool native) {
  return store::StoresValues(info.tier) && (native || info.tier == store::Tier::kFp32);
}

// `[FMT NATIVE]` as args[first, end): whether it was given; nullopt (error queued) for anything
// else there.
std::optional<bool> ParseNativeUpTo(Context& ctx, size_t first, size_t end) {
  const auto& args = ctx.args;
  if (end == first) return false;
  if (end - first == 2 && EqualsIgnoreCase(args[first], "FMT") &&
      EqualsIgnoreCase(args[first + 1], "NATIVE")) {
    return true;
  }
  ctx.reply.Error(errors::VFetchUnknownOption(args[first].substr(0, 64)));
  return std::nullopt;
}

// The pieces of one layer's rows, in row order, each as its place under the call's lease
// (`lent`, from `first` on), shared zeros as their byte count, any other piece as its bytes.
void ReplyRowPieces(Context& ctx, const std::vector<Bytes>& pieces, const ShmLent* lent,
                    bool checksum) {
  ctx.reply.ArrayLen(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (store::VectorStore::IsSharedZeros(pieces[i])) {
      ctx.reply.Integer(static_cast<int64_t>(pieces[i].size()));
    } else {
      ReplyShmLent(ctx, pieces[i], lent[i], checksum);
    }
  }
}

// Every piece of `layers` that can be lent (not shared zeros), in order.
std::vector<const Bytes*> LendablePieces(std::span<const store::LayerRead> layers) {
  std::vector<const Bytes*> lendable;
  for (const store::LayerRead& layer : layers) {
    for (const Bytes& piece : layer.rows.pieces) {
      lendable.push_back(store::VectorStore::IsSharedZeros(piece) ? nullptr : &piece);
    }
  }
  return lendable;
}

// V.SHMFETCH <sid> BATCH <start> <end> [<layers>] [FMT NATIVE] [CHECKSUM]: V.FETCH BATCH's rows
// of layers 0 .. layers-1 (default: through the highest stored), one state of the session, each
// layer answered as V.SHMFETCH RANGE answers one (nil for a layer with no tokens), all under the
// call's one lease.
void VFetchBatch(Context& ctx) {
  const auto& args = ctx.args;
  const std::string_view sid = args[1];
  auto start = vstore::ParseCount(args[3]);
  auto end = vstore::ParseCount(args[4]);
  if (!start || !end || *end <= *start) return ctx.reply.Error(errors::kBadVRange);
  const vstore::Limits limits = vstore::LimitsOf(ctx.engine);
  if (*end > limits.max_tokens) {
    return ctx.reply.Error(errors::RangeOverMaxTokens(*end, limits.max_tokens));
  }
  size_t end_of_options = args.size();
  const bool checksum = TakeChecksumOption(ctx, 5, end_of_options);
  size_t next = 5;
  std::optional<uint32_t> layers;
  if (next < end_of_options && !EqualsIgnoreCase(args[next], "FMT")) {
    const std::string_view text = args[next++];
    auto n = vstore::ParseCount(text);
    if (!n || *n < 1 || *n > limits.max_layers) {
      return ctx.reply.Error(errors::VFetchBatchLayerCount(text.substr(0, 64), limits.max_layers));
    }
    layers = static_cast<uint32_t>(*n);
  }
  const auto native = ParseNativeUpTo(ctx, next, end_of_options);
  if (!native) return;
  store::VectorStore& vs = Db(ctx).vectors;
  auto described = vs.Describe(sid);
  if (!described) return ctx.reply.Error(errors::kSessionNotFound);
  if (!SharedAsStored(*described, *native)) {
    return ctx.reply.Error(
        errors::ShmRowsDecoded("V.SHMFETCH", "session", TierName(described->tier), "V.FETCH"));
  }
  // Cold rows are read from disk into memory of their own for this answer, as RANGE's.
  auto read = vs.ReadBatch(sid, *start, *end, layers, store::VectorStore::kReadAll);
  if (!read) return ctx.reply.Error(errors::kSessionNotFound);
  const auto& [info, per_layer] = *read;
  if (!SharedAsStored(info, *native)) {
    return ctx.reply.Error(
        errors::ShmRowsDecoded("V.SHMFETCH", "session", TierName(info.tier), "V.FETCH"));
  }
  if (per_layer.empty()) return ctx.reply.Error(errors::kVFetchBatchEmpty);
  const std::vector<const Bytes*> lendable = LendablePieces(per_layer);
  std::vector<ShmLent> lent;
  if (!ShmLendAll(ctx, sid, lendable, lent)) return;
  PrefixReceipt& receipt = ctx.engine.receipt();
  ctx.reply.ArrayLen(per_layer.size());
  size_t first = 0;  // the layer's first piece in `lent`
  for (const store::LayerRead& layer : per_layer) {
    const std::vector<Bytes>& pieces = layer.rows.pieces;
    if (layer.length == 0) {
      ctx.reply.Null();
    } else {
      receipt.fetches.Add();
      receipt.fetch_bytes.Add(layer.rows.bytes());
      ReplyRowPieces(ctx, pieces, lent.data() + first, checksum);
    }
    first += pieces.size();
  }
}

// V.SHMFETCH <sid> <layer> RANGE <start> <end> [FMT NATIVE] [CHECKSUM]: V.FETCH RANGE's rows,
// one consistent state of the layer, as the pieces they are stored in, in row order: a piece in
// an arena as its place under the call's one lease, shared zeros (a gap, rows past the length) as
// the count of zero bytes, any other piece as its bytes. Nil for a layer with no tokens. Only
// rows sent as stored can be shared: a decoded tier is an error. BATCH in the layer's place:
// VFetchBatch.
void VFetch(Context& ctx) {
  if (!ShmGreeted(ctx)) return;
  const auto& args = ctx.args;
  const std::string_view sid = args[1];
  if (!vstore::ValidSid(ctx, sid)) return;
  if (EqualsIgnoreCase(args[2], "BATCH")) return VFetchBatch(ctx);
  // BATCH takes one argument fewer: the arity admits 5.
  if (args.size() < 6) return ctx.reply.Error(errors::WrongArity(ctx.spec.full_name));
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
  size_t end_of_options = args.size();
  const bool checksum = TakeChecksumOption(ctx, 6, end_of_options);
  const auto native = ParseNativeUpTo(ctx, 6, end_of_options);
  if (!native) return;
  store::VectorStore& vs = Db(ctx).vectors;
  auto described = vs.Describe(sid);
  if (!described) return ctx.reply.Error(errors::kSessionNotFound);
  if (!SharedAsStored(*described, *native))
    return ctx.reply.Error(
        errors::ShmRowsDecoded("V.SHMFETCH", "session", TierName(described->tier), "V.FETCH"));
  // Cold rows are read from disk into memory of their own (an arena region when large) for
  // this answer; the session stays cold.
  auto read =
      vs.ReadRange(sid, static_cast<uint32_t>(*layer), *start, *end, store::VectorStore::kReadAll);
  if (!read) return ctx.reply.Error(errors::kSessionNotFound);
  const auto& [info, rows] = *read;
  // Dropped and created again with another tier since Describe.
  if (!SharedAsStored(info, *native))
    return ctx.reply.Error(
        errors::ShmRowsDecoded("V.SHMFETCH", "session", TierName(info.tier), "V.FETCH"));
  if (rows.length == 0) return ctx.reply.Null();
  const std::vector<const Bytes*> lendable = LendablePieces(std::span(&rows, 1));
  std::vector<ShmLent> lent;
  if (!ShmLendAll(ctx, sid, lendable, lent)) return;
  PrefixReceipt& receipt = ctx.engine.receipt();
  receipt.fetches.Add();
  receipt.fetch_bytes.Add(rows.rows.bytes());
  ReplyRowPieces(ctx, rows.rows.pieces, lent.data(), checksum);
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

// --- Zero-copy writes: SHM.SET and SHM.CALL, with a memfd passed on their bytes ---

// Below this a value is copied: a mapping of its own costs a page and a vm.max_map_count entry,
// more than copying a few KiB (the pool's own threshold for a mapping, common/bytes.cc).
constexpr uint64_t kAdoptFrom = uint64_t{32} << 10;

// The seals that make a file's bytes unchangeable: no write (through any descriptor or mapping,
// nor a hole punched), no shrinking. Growing leaves [offset, offset + length) alone.
constexpr int kAdoptSeals = F_SEAL_WRITE | F_SEAL_SHRINK;

// A descriptor of the file `fd` names that can only read, for SHM.GET to pass to readers (the
// client's own may be writable: a reader must not be able to grow the file or change its mode);
// -1 past the cap on such descriptors (the value is then served as bytes) or when the file's
// mode does not let this process read it.
int ReadOnlyReopen(int fd) {
  if (AdoptedFileCount() >= AdoptedFileCap()) return -1;
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  return ::open(self.c_str(), O_RDONLY | O_CLOEXEC);
}

// Whether `command` may read `ranges` of the descriptor passed with it (`fd`, -1 when none came):
// a regular file that holds every one of them. An error text when not.
std::string CheckFileRanges(std::string_view command, int fd, std::span<const FileRange> ranges) {
  if (fd < 0) return errors::ShmNoDescriptor(command);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return errors::ShmNotAFile(command);
  const auto file_size = static_cast<uint64_t>(st.st_size);
  for (const FileRange& r : ranges) {
    if (r.offset > file_size || r.length > file_size - r.offset) {
      return errors::ShmPastEnd(command, r.offset, r.length, file_size);
    }
  }
  return {};
}

// A range of `fd` as the file's own pages mapped read-only, when its seals say they can never
// change; nullopt when they can, or when the kernel refuses the mapping (vm.max_map_count,
// memory for page tables): the caller copies instead.
std::optional<Bytes> MapSealed(int fd, FileRange range) {
  const int seals = ::fcntl(fd, F_GET_SEALS);  // EINVAL for a file that is not a memfd
  if (seals < 0 || (seals & kAdoptSeals) != kAdoptSeals) return std::nullopt;
  const auto [offset, length] = range;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const uint64_t mapped = (offset - start + length + page - 1) / page * page;
  void* base = ::mmap(nullptr, mapped, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(start));
  if (base == MAP_FAILED) return std::nullopt;
  return Bytes::AdoptMapping(base, mapped, offset - start, length, ReadOnlyReopen(fd), start);
}

// A range CheckFileRanges passed, as a value: the file's own pages mapped read-only when its
// seals say they can never change and it is large enough to be worth a mapping, else one copy.
// Sets `adopted`; an error text on failure.
std::string ValueFromFile(std::string_view command, int fd, FileRange range, Bytes& value,
                          bool& adopted) {
  const auto [offset, length] = range;
  adopted = false;
  if (length == 0) {
    value = Bytes::CopyCompact({});
    return {};
  }
  if (length >= kAdoptFrom) {
    if (auto mapped = MapSealed(fd, range)) {
      value = std::move(*mapped);
      adopted = true;
      return {};
    }
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
    if (n < 0) return errors::ShmReadFailed(command, std::strerror(errno));
    if (n == 0) return errors::ShmReadFailed(command, "the file ended early");
    done += static_cast<uint64_t>(n);
  }
  value = length >= kAdoptFrom ? std::move(copy) : Bytes::CopyCompact(small);
  return {};
}

void SetFromFile(Context& ctx) {
  if (!ShmGreeted(ctx)) return;
  const std::string_view key = ctx.args[1];
  auto length = ParseInt64(ctx.args[2]);
  if (!length || *length < 0) return ctx.reply.Error(errors::kNotInteger);
  // An offset, if the next argument is a number; then SET's options but GET.
  int64_t offset = 0;
  size_t options_from = 3;
  if (const auto given = ctx.args.size() > 3 ? ParseInt64(ctx.args[3]) : std::nullopt) {
    offset = *given;
    if (offset < 0) return ctx.reply.Error(errors::kNotInteger);
    options_from = 4;
  }
  std::vector<std::string_view> rest;
  for (size_t i = options_from; i < ctx.args.size(); ++i) rest.push_back(ctx.args[i]);
  auto options = expiry::ParseStringOptions(rest, expiry::StringCommand::kSet);
  if (!options.ok()) return ctx.reply.Error(options.error);
  if (options.value.get) return ctx.reply.Error(errors::kSyntax);
  if (*length > ctx.engine.settings().Int(Setting::kProtoMaxBulkLen)) {
    return ctx.reply.Error(errors::kStringTooLong);
  }
  const FileRange range{static_cast<uint64_t>(offset), static_cast<uint64_t>(*length)};
  if (std::string why = CheckFileRanges("SHM.SET", ctx.passed_fd, std::span(&range, 1));
      !why.empty()) {
    return ctx.reply.Error(why);
  }
  Bytes value;
  bool adopted = false;
  if (std::string why = ValueFromFile("SHM.SET", ctx.passed_fd, range, value, adopted);
      !why.empty()) {
    return ctx.reply.Error(why);
  }
  // SET's write, with SET's handling of a key of another type (it is replaced); replicas get
  // SET with the bytes (a descriptor cannot travel), an expiry as PXAT as SET sends it.
  int64_t at_ms = 0;
  const store::StringEncoding encoding = store::EncodingOf(value.view());
  const auto outcome = SetStringValue(ctx, key, value, encoding, options.value, at_ms);
  if (outcome == StringSetOutcome::kRefused) return;
  if (outcome == StringSetOutcome::kSkipped) return ctx.reply.Null();
  if (ctx.propagate.wanted()) {
    if (options.value.expiry != expiry::ExpiryKind::kNone) {
      ctx.propagate.Send({"SET", key, value.view(), "PXAT", std::to_string(at_ms)});
    } else if (options.value.keepttl) {
      ctx.propagate.Send({"SET", key, value.view(), "KEEPTTL"});
    } else {
      ctx.propagate.Send({"SET", key, value.view()});
    }
  }
  ctx.reply.Simple(adopted ? "ADOPTED" : "COPIED");
}

// SHM.CALL <n> <index> <offset> <length> [...] <command> <arg> ...: builds the carried command,
// argument <index> of it (1-based in its argv) being [offset, offset + length) of the passed
// file, the word sent in its place ignored, and leaves it in ctx.carried; the registry then
// dispatches it as if it had been received (engine/registry.cc). A file argument is a large
// argument of that request, as one read from the socket would be: a handler that keeps it
// (Request::TakeBytes) keeps the adopted mapping, or the one copy.
void Call(Context& ctx) {
  if (!ShmGreeted(ctx)) return;
  // Only EXEC runs a command without the registry's dispatch, and SHM.CALL is never queued.
  if (ctx.carried == nullptr) return ctx.reply.Error(errors::kNotAllowedInMulti);
  const auto& args = ctx.args;
  ShmCallLayout layout;
  if (std::string why = ParseShmCall(args, layout); !why.empty()) return ctx.reply.Error(why);
  const size_t carried_at = layout.carried_at;
  const size_t carried_argc = layout.from_file.size();
  const std::vector<std::optional<FileRange>>& from_file = layout.from_file;
  const int64_t max_length = ctx.engine.settings().Int(Setting::kProtoMaxBulkLen);
  std::vector<FileRange> ranges;
  for (size_t i = 1; i < carried_argc; ++i) {
    if (!from_file[i]) continue;
    if (from_file[i]->length > static_cast<uint64_t>(max_length)) {
      return ctx.reply.Error(errors::ShmCallTooLong(
          static_cast<int64_t>(i), static_cast<int64_t>(from_file[i]->length), max_length));
    }
    ranges.push_back(*from_file[i]);
  }
  if (std::string why = CheckFileRanges("SHM.CALL", ctx.passed_fd, ranges); !why.empty()) {
    return ctx.reply.Error(why);
  }
  // The arguments worth adopting are slices of one mapping of the span they cover: one mapping
  // and one read-only descriptor for the call, not one of each per argument.
  uint64_t span_from = UINT64_MAX, span_to = 0;
  for (const FileRange& r : ranges) {
    if (r.length < kAdoptFrom) continue;
    span_from = std::min(span_from, r.offset);
    span_to = std::max(span_to, r.offset + r.length);
  }
  const std::optional<Bytes> span = span_to > span_from
                                        ? MapSealed(ctx.passed_fd, {span_from, span_to - span_from})
                                        : std::nullopt;
  protocol::Request& carried = *ctx.carried;
  for (size_t i = 0; i < carried_argc; ++i) {
    if (!from_file[i]) {
      carried.AddFrom(args, carried_at + i);
      continue;
    }
    if (span && from_file[i]->length >= kAdoptFrom) {
      carried.AddLarge(span->Slice(from_file[i]->offset - span_from, from_file[i]->length));
      continue;
    }
    Bytes value;
    bool adopted = false;
    if (std::string why = ValueFromFile("SHM.CALL", ctx.passed_fd, *from_file[i], value, adopted);
        !why.empty()) {
      carried.Clear();
      return ctx.reply.Error(why);
    }
    carried.AddLarge(std::move(value));
  }
}

void RegisterShmWriteCommands(Registry& r) {
  CommandSpec set = MakeSpec(
      "shm", 1, "shm.set", -3, kWrite | kDenyOom | kNoMulti | kNoScript,
      "<key> <length> [<offset>] [NX|XX] [EX seconds|PX ms|EXAT unix-s|PXAT unix-ms|KEEPTTL]",
      "After SHM.HELLO, with a file descriptor passed on the request's bytes "
      "(SCM_RIGHTS): stores [offset, offset + length) of that file as the key's "
      "string value, with SET's options but GET (nil when NX or XX decides against it). A "
      "memfd sealed with F_SEAL_WRITE and F_SEAL_SHRINK is adopted "
      "without a copy from 32 KiB (ADOPTED), anything else copied once (COPIED).",
      SetFromFile, "O(1) adopted, O(N) copied");
  set.descriptors = Descriptors::kTakes;
  r.Add(std::move(set));
  // Not a write itself, and not in MONITOR: the command it carries is, as if received.
  CommandSpec call = MakeSpec(
      "shm", 0, "shm.call", -6, kNoMulti | kNoScript | kSkipMonitor,
      "<n> <index> <offset> <length> [<index> <offset> <length> ...] <command> [<arg> ...]",
      "After SHM.HELLO, with a file descriptor passed on the request's bytes (SCM_RIGHTS): "
      "runs <command> as if it had been received, its n arguments at <index> (1-based; the "
      "word sent in place is ignored) being [offset, offset + length) of that file, adopted "
      "or copied as SHM.SET's value. Answers the command's reply. COMMAND GETKEYS answers "
      "the carried command's keys (an error for a key that lies in the file).",
      Call, "O(1) per adopted argument, O(N) copied, then the command's");
  call.descriptors = Descriptors::kCarries;
  r.Add(std::move(call));
}

}  // namespace

std::string ParseShmCall(const protocol::Request& args, ShmCallLayout& layout) {
  auto count = ParseInt64(args[1]);
  if (!count || *count < 1) return std::string(errors::kShmCallCount);
  // The triples, then at least the carried command's name.
  if (static_cast<uint64_t>(*count) > (args.size() - 3) / 3) return errors::WrongArity("shm.call");
  layout.carried_at = 2 + 3 * static_cast<size_t>(*count);
  const size_t carried_argc = args.size() - layout.carried_at;
  layout.from_file.assign(carried_argc, std::nullopt);
  for (size_t t = 2; t < layout.carried_at; t += 3) {
    auto index = ParseInt64(args[t]);
    auto offset = ParseInt64(args[t + 1]);
    auto length = ParseInt64(args[t + 2]);
    if (!index || !offset || !length || *offset < 0 || *length < 0) {
      return std::string(errors::kNotInteger);
    }
    if (*index < 1 || static_cast<uint64_t>(*index) >= carried_argc) {
      return errors::ShmCallIndex(*index, carried_argc - 1);
    }
    if (layout.from_file[*index]) return errors::ShmCallRepeated(*index);
    layout.from_file[*index] =
        FileRange{static_cast<uint64_t>(*offset), static_cast<uint64_t>(*length)};
  }
  return {};
}

void RegisterShmCommands(Registry& r) {
  RegisterShmWriteCommands(r);
  auto cmd = [](int keys, std::string name, int arity, uint32_t flags, std::string syntax,
                std::string summary, Handler h) {
    return MakeSpec("shm", keys, std::move(name), arity, flags, std::move(syntax),
                    std::move(summary), h, "O(1)");
  };
  CommandSpec hello =
      cmd(0, "shm.hello", 1, kFast | kNoMulti | kNoScript, "",
          "Unix socket only, for a peer uid in shm-allow-uids: passes read-only descriptors "
          "of the arenas not passed yet (SCM_RIGHTS) and answers [id, size] for each.",
          Hello);
  hello.descriptors = Descriptors::kGrants;
  r.Add(std::move(hello));
  r.Add(cmd(1, "shm.get", -2, kReadonly | kFast, "<key> [CHECKSUM]",
            "After SHM.HELLO: where a string's bytes lie, [arena, offset, length, generation, "
            "checksum (XXH3-64 hex with CHECKSUM, else nil), lease], under a lease; a value "
            "adopted by SHM.SET as [-1, offset, length, inode, checksum, lease] with its file's "
            "descriptor passed; any other value answers its bytes; nil when missing.",
            Get));
  // In the SSM.PREFIX group, whose type check it takes (-WRONGTYPE for a key of another type).
  CommandSpec ssm_fetch =
      cmd(1, "ssm.prefix.shmfetch", -3, kReadonly | kFast, "<sid> <layer> [<layer> ...] [CHECKSUM]",
          "After SHM.HELLO: SSM.PREFIX.MFETCH's snapshot of the layers, each answered as SHM.GET "
          "answers a string (its place, or its bytes), nil when absent; one lease for the call. "
          "CHECKSUM puts each place's XXH3-64 (hex) in its checksum slot, else nil.",
          SsmFetch);
  ssm_fetch.group = "ssm";
  r.Add(std::move(ssm_fetch));
  // In the V-store group, as V.FETCH.
  CommandSpec v_fetch = cmd(
      1, "v.shmfetch", -5, kReadonly,
      "<sid> <layer> RANGE <start> <end> [FMT NATIVE] [CHECKSUM] | "
      "<sid> BATCH <start> <end> [layers] [FMT NATIVE] [CHECKSUM]",
      "After SHM.HELLO: V.FETCH RANGE's rows as the pieces they are stored in, in order: a "
      "piece in an arena as [arena, offset, length, generation, checksum, lease] (one lease for "
      "the call; checksum the piece's XXH3-64 hex with CHECKSUM, else nil), zero rows as their "
      "byte count, any other piece as its bytes; nil for a layer with no tokens. BATCH: V.FETCH "
      "BATCH's layers, one such array (or nil) per layer, under one lease for the call. Rows "
      "sent as stored only (fp32, or fp16/bf16 with FMT NATIVE).",
      VFetch);
  v_fetch.group = "vstore";
  v_fetch.complexity = "O(N) in the stored pieces the rows span; no byte is read or copied";
  r.Add(std::move(v_fetch));
  r.Add(cmd(0, "shm.release", -2, kFast, "<lease> [<lease> ...]",
            "Ends leases the shared reads gave this connection (one per call, shared by its "
            "pieces); answers how many were live.",
            Release));
}

}  // namespace prefixd::commands
