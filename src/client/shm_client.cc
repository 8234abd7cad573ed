// ShmClient (include/prefixd/shm.h): a RESP2 connection over a unix socket that reads with
// recvmsg, so the arena descriptors SHM.HELLO passes (SCM_RIGHTS) are kept, and maps each arena
// once, read-only.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <utility>

#include "common/descriptor_passing.h"
#include "common/shared_mapping.h"
#include "connection.h"
#include "prefix_store_args.h"
#include "prefixd/shm.h"

namespace prefixd {
namespace {

std::string Errno(std::string_view what) { return std::string(what) + ": " + std::strerror(errno); }

std::string Encode(std::span<const std::string_view> args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (std::string_view a : args) {
    out += "$" + std::to_string(a.size()) + "\r\n";
    out.append(a);
    out += "\r\n";
  }
  return out;
}

// The generation table's word for the page at `offset` (docs/shm-transport.md, "Generations").
constexpr uint64_t kPageBytes = 4096;

// The leases of `views`, each id once: the pieces of one call share theirs.
std::vector<uint64_t> DistinctLeases(std::span<const ShmView> views) {
  std::vector<uint64_t> ids;
  for (const ShmView& v : views) {
    if (v.lease != 0 && std::find(ids.begin(), ids.end(), v.lease) == ids.end()) {
      ids.push_back(v.lease);
    }
  }
  return ids;
}

std::vector<uint64_t> Distinct(std::span<const uint64_t> leases) {
  std::vector<uint64_t> ids(leases.begin(), leases.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

// XXH3-64 of `bytes` as the server writes it: 16 lower-case hex digits.
std::string ChecksumOf(std::span<const uint8_t> bytes) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(bytes.data(), bytes.size())));
  return std::string(hex, 16);
}

}  // namespace

ShmClient::~ShmClient() {
  for (const Arena& a : arenas_) ::munmap(const_cast<uint8_t*>(a.base), a.size);
  for (const Arena& z : zero_maps_) ::munmap(const_cast<uint8_t*>(z.base), z.size);
  for (const FileMapping& f : files_) ::munmap(const_cast<uint8_t*>(f.base), f.size);
  for (int fd : received_fds_) ::close(fd);
  if (fd_ >= 0) ::close(fd_);
}

Status ShmClient::Open(const std::string& path, std::chrono::milliseconds io_timeout) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return Status::InvalidArgument("socket path too long");
  std::memcpy(addr.sun_path, path.data(), path.size());
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return Status::IoError(Errno("socket"));
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return Status::Unavailable(Errno("connect " + path));
  }
  if (io_timeout.count() > 0) {
    timeval tv{static_cast<time_t>(io_timeout.count() / 1000),
               static_cast<suseconds_t>(io_timeout.count() % 1000 * 1000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  return Status::Ok();
}

Status ShmClient::Connect(const std::string& path, std::string_view password,
                          std::chrono::milliseconds io_timeout) {
  if (Status st = Open(path, io_timeout); !st.ok()) return st;
  if (!password.empty()) {
    auto auth = Command({"AUTH", password});
    if (!auth.ok()) return auth.status();
  }
  return Hello();
}

Status ShmClient::ConnectBeside(const Client& client) {
  if (!client.impl_ || !client.impl_->unix_socket()) {
    return Status::InvalidArgument("the client does not talk over a unix socket");
  }
  const Client::Impl& c = *client.impl_;
  if (Status st = Open(c.address(), c.options().io_timeout); !st.ok()) return st;
  if (c.has_auth()) {
    auto auth = c.username().empty() ? Command({"AUTH", c.password()})
                                     : Command({"AUTH", c.username(), c.password()});
    if (!auth.ok()) return auth.status();
  }
  return Hello();
}

Status ShmClient::Hello() {
  auto reply = Command({"SHM.HELLO"});
  if (!reply.ok()) return reply.status();
  const auto& arenas = reply.value().elements;
  // The descriptors came with the reply's first byte, one per arena, in order: the last ones
  // received, since each command waits for its reply. Any before them belong to places of an
  // earlier reply not looked at yet (a passed file's) or came with a reply read by hand.
  if (received_fds_.size() < arenas.size()) {
    return Status::ProtocolError("SHM.HELLO named " + std::to_string(arenas.size()) +
                                 " arenas but passed " + std::to_string(received_fds_.size()) +
                                 " descriptors");
  }
  for (size_t i = 0; i < arenas.size(); ++i) {
    const Reply& entry = arenas[i];
    if (entry.elements.size() != 2) return Status::ProtocolError("bad SHM.HELLO entry");
    const auto id = static_cast<uint64_t>(entry.elements[0].integer);
    const auto size = static_cast<uint64_t>(entry.elements[1].integer);
    if (id != arenas_.size()) return Status::ProtocolError("SHM.HELLO skipped an arena");
    const int fd = received_fds_[received_fds_.size() - arenas.size() + i];
    // As the server maps it (common/shared_mapping.h): a copy out of huge pages is faster.
    void* mapped = MapSharedHugeAligned(fd, size, PROT_READ, true);
    if (mapped == MAP_FAILED) return Status::IoError(Errno("mmap of an arena"));
    arenas_.push_back({static_cast<const uint8_t*>(mapped), size});
  }
  // A mapping outlives its descriptor.
  const auto first = received_fds_.end() - static_cast<std::ptrdiff_t>(arenas.size());
  for (auto fd = first; fd != received_fds_.end(); ++fd) ::close(*fd);
  received_fds_.erase(first, received_fds_.end());
  return Status::Ok();
}

Status ShmClient::Get(std::string_view key, ShmView& view, bool checksum) {
  view = ShmView{};
  auto reply = checksum ? Command({"SHM.GET", key, "CHECKSUM"}) : Command({"SHM.GET", key});
  if (!reply.ok()) return reply.status();
  if (reply.value().is_nil()) return Status::NotFound("no such key");
  if (Status st = ViewOf(reply.value(), view, checksum); !st.ok()) {
    std::vector<ShmView> failed{std::move(view)};
    view = ShmView{};
    return Abandon(failed, st);
  }
  return Status::Ok();
}

Status ShmClient::FetchLayers(std::string_view sid, std::span<const uint32_t> layers,
                              std::vector<ShmView>& views, bool checksum) {
  views.assign(layers.size(), ShmView{});
  std::vector<std::string> words{"SSM.PREFIX.SHMFETCH", std::string(sid)};
  for (uint32_t layer : layers) words.push_back(std::to_string(layer));
  if (checksum) words.push_back("CHECKSUM");
  std::vector<std::string_view> args(words.begin(), words.end());
  auto reply = Command(args);
  if (!reply.ok()) return reply.status();
  Reply& r = reply.value();
  if (r.type != Reply::Type::kArray || r.elements.size() != layers.size()) {
    return Status::ProtocolError("unexpected SSM.PREFIX.SHMFETCH reply");
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    if (r.elements[i].is_nil()) continue;
    if (Status st = ViewOf(r.elements[i], views[i], checksum); !st.ok()) {
      return Abandon(views, st);
    }
  }
  return Status::Ok();
}

Status ShmClient::RowPiecesOf(Reply& r, std::vector<ShmView>& pieces, bool checksum) {
  if (r.type != Reply::Type::kArray) return Status::ProtocolError("unexpected V.SHMFETCH reply");
  pieces.resize(r.elements.size());
  for (size_t i = 0; i < r.elements.size(); ++i) {
    Reply& piece = r.elements[i];
    if (piece.type == Reply::Type::kInteger) {
      if (piece.integer <= 0) return Status::ProtocolError("bad zero run in a V.SHMFETCH reply");
      pieces[i].size = static_cast<size_t>(piece.integer);
      pieces[i].data = Zeros(pieces[i].size);
      if (pieces[i].data == nullptr) return Status::IoError(Errno("mmap of zeros"));
      pieces[i].zeros = true;
      continue;
    }
    if (Status st = ViewOf(piece, pieces[i], checksum); !st.ok()) return st;
  }
  return Status::Ok();
}

Status ShmClient::FetchRows(std::string_view sid, uint32_t layer, uint64_t start, uint64_t end,
                            std::vector<ShmView>& pieces, bool native, bool checksum) {
  pieces.clear();
  const std::string layer_text = std::to_string(layer), start_text = std::to_string(start),
                    end_text = std::to_string(end);
  std::vector<std::string_view> args{"V.SHMFETCH", sid, layer_text, "RANGE", start_text, end_text};
  if (native) args.insert(args.end(), {"FMT", "NATIVE"});
  if (checksum) args.push_back("CHECKSUM");
  auto reply = Command(args);
  if (!reply.ok()) return reply.status();
  Reply& r = reply.value();
  if (r.is_nil()) return Status::Ok();
  if (Status st = RowPiecesOf(r, pieces, checksum); !st.ok()) return Abandon(pieces, st);
  return Status::Ok();
}

Status ShmClient::FetchBatch(std::string_view sid, uint64_t start, uint64_t end,
                             std::vector<std::vector<ShmView>>& layers, uint32_t layer_count,
                             bool native, bool checksum) {
  layers.clear();
  const std::string start_text = std::to_string(start), end_text = std::to_string(end),
                    count_text = std::to_string(layer_count);
  std::vector<std::string_view> args{"V.SHMFETCH", sid, "BATCH", start_text, end_text};
  if (layer_count != 0) args.push_back(count_text);
  if (native) args.insert(args.end(), {"FMT", "NATIVE"});
  if (checksum) args.push_back("CHECKSUM");
  auto reply = Command(args);
  if (!reply.ok()) return reply.status();
  Reply& r = reply.value();
  if (r.type != Reply::Type::kArray) return Status::ProtocolError("unexpected V.SHMFETCH reply");
  layers.resize(r.elements.size());
  Status failed = Status::Ok();
  for (size_t i = 0; i < r.elements.size() && failed.ok(); ++i) {
    if (!r.elements[i].is_nil()) failed = RowPiecesOf(r.elements[i], layers[i], checksum);
  }
  if (failed.ok()) return failed;
  // The call's one lease holds every layer's places: all of them are abandoned together.
  std::vector<ShmView> all;
  for (auto& layer : layers) std::move(layer.begin(), layer.end(), std::back_inserter(all));
  layers.clear();
  return Abandon(all, failed);
}

Status ShmClient::FetchCheckpoint(std::string_view ns, const PrefixHash& position,
                                  std::span<const uint32_t> layers, std::vector<ShmView>& views,
                                  bool checksum) {
  views.clear();
  std::vector<std::string> words{"SSM.PREFIX.CKPT.SHMFETCH", std::string(ns),
                                 std::string(position.begin(), position.end())};
  if (!layers.empty()) words.push_back("LAYERS");
  for (uint32_t layer : layers) words.push_back(std::to_string(layer));
  if (checksum) words.push_back("CHECKSUM");
  std::vector<std::string_view> args(words.begin(), words.end());
  auto reply = Command(args);
  if (!reply.ok()) return reply.status();
  if (reply.value().is_nil()) return Status::NotFound("no checkpoint at that position");
  return ViewsOf(reply.value(), views, "SSM.PREFIX.CKPT.SHMFETCH", checksum);
}

Status ShmClient::FetchBlocks(std::string_view ns, std::string_view hashes, uint32_t layer,
                              std::vector<ShmView>& pieces, bool native, bool checksum) {
  pieces.clear();
  const std::string count = std::to_string(hashes.size() / 16), layer_text = std::to_string(layer);
  std::vector<std::string_view> args{"KV.PREFIX.SHMBFETCH", ns, count, hashes, layer_text};
  if (native) args.insert(args.end(), {"FMT", "NATIVE"});
  if (checksum) args.push_back("CHECKSUM");
  auto reply = Command(args);
  if (!reply.ok()) return reply.status();
  Reply& r = reply.value();
  if (r.is_nil()) return Status::NotFound("a block is missing");
  return ViewsOf(r, pieces, "KV.PREFIX.SHMBFETCH", checksum);
}

Status ShmClient::ViewsOf(Reply& r, std::vector<ShmView>& views, std::string_view command,
                          bool checksum) {
  if (r.type != Reply::Type::kArray) {
    return Status::ProtocolError("unexpected " + std::string(command) + " reply");
  }
  views.resize(r.elements.size());
  for (size_t i = 0; i < r.elements.size(); ++i) {
    if (Status st = ViewOf(r.elements[i], views[i], checksum); !st.ok()) {
      return Abandon(views, st);
    }
  }
  return Status::Ok();
}

Status ShmClient::Abandon(std::vector<ShmView>& views, Status why) {
  const std::vector<uint64_t> leases = DistinctLeases(views);
  if (!file_leases_.empty()) {
    for (uint64_t lease : leases) DropFileView(lease);
  }
  (void)ReleaseLater(leases);
  views.clear();
  return why;
}

Status ShmClient::FetchLeaseRows(std::string_view ns, uint64_t lease, uint32_t layer,
                                 std::vector<ShmView>& pieces, bool native, uint64_t start,
                                 uint64_t end, bool release, bool checksum) {
  pieces.clear();
  const std::string lease_text = std::to_string(lease), layer_text = std::to_string(layer),
                    start_text = std::to_string(start), end_text = std::to_string(end);
  std::vector<std::string_view> args{"KV.PREFIX.SHMLFETCH", ns, lease_text, "ATTN", layer_text};
  if (end != kToLength) args.insert(args.end(), {"RANGE", start_text, end_text});
  if (native) args.insert(args.end(), {"FMT", "NATIVE"});
  if (checksum) args.push_back("CHECKSUM");
  if (release) args.push_back("RELEASE");
  auto reply = Command(args);
  if (!reply.ok()) return reply.status();
  return ViewsOf(reply.value(), pieces, "KV.PREFIX.SHMLFETCH", checksum);
}

Status ShmClient::FetchLeaseState(std::string_view ns, uint64_t lease,
                                  std::span<const uint32_t> layers, std::vector<ShmView>& views,
                                  bool release, bool checksum) {
  views.clear();
  std::vector<std::string> words{"KV.PREFIX.SHMLFETCH", std::string(ns), std::to_string(lease),
                                 "STATE"};
  if (!layers.empty()) words.push_back("LAYERS");
  for (uint32_t layer : layers) words.push_back(std::to_string(layer));
  if (checksum) words.push_back("CHECKSUM");
  if (release) words.push_back("RELEASE");
  std::vector<std::string_view> args(words.begin(), words.end());
  auto reply = Command(args);
  if (!reply.ok()) return reply.status();
  return ViewsOf(reply.value(), views, "KV.PREFIX.SHMLFETCH", checksum);
}

namespace {

// Copies `pieces`, joined, into the concatenation of `first` and `second`, which must be exactly
// their size.
Status CopyPieces(std::span<const ShmView> pieces, std::span<uint8_t> first,
                  std::span<uint8_t> second, ShmScatterStats& stats) {
  size_t total = 0;
  for (const ShmView& p : pieces) total += p.size;
  if (total != first.size() + second.size()) {
    return Status::OutOfRange("the server answered " + std::to_string(total) + " bytes where " +
                              std::to_string(first.size() + second.size()) + " were expected");
  }
  size_t at = 0;  // bytes written so far, across both
  for (const ShmView& p : pieces) {
    size_t done = 0;
    while (done < p.size) {
      const bool in_first = at < first.size();
      const std::span<uint8_t> to =
          in_first ? first.subspan(at) : second.subspan(at - first.size());
      const size_t take = std::min(to.size(), p.size - done);
      std::memcpy(to.data(), p.data + done, take);
      done += take;
      at += take;
    }
    ++stats.pieces;
    if (p.lease != 0) {
      ++stats.leased;
      stats.mapped_bytes += p.size;
    } else {
      stats.reply_bytes += p.size;
    }
  }
  return Status::Ok();
}

}  // namespace

Status ShmClient::ScatterLease(std::string_view ns, uint64_t lease,
                               std::span<const PrefixLeaseRows> attention,
                               std::span<const PrefixLeaseBlob> state, bool release,
                               ShmScatterStats* stats, bool checksum) {
  ShmScatterStats local;
  ShmScatterStats& s = stats != nullptr ? *stats : local;
  std::vector<ShmView> pieces;
  // The lease of the last answer (one per call), released as the next request goes out (or at
  // the end).
  std::vector<uint64_t> held;
  auto hold = [&] { held = DistinctLeases(pieces); };
  // A leased place cannot be freed or reused while its lease lives: a failed check is a server
  // that broke that promise, never bytes to keep.
  auto still_valid = [&]() -> Status {
    for (const ShmView& p : pieces) {
      if (!Valid(p)) return Status::Corruption("a leased place changed while it was read");
    }
    return Status::Ok();
  };
  Status st = Status::Ok();
  for (size_t i = 0; i < attention.size() && st.ok(); ++i) {
    st = ReleaseLater(held);
    held.clear();
    const bool last = state.empty() && i + 1 == attention.size();
    if (st.ok()) {
      st = FetchLeaseRows(ns, lease, attention[i].layer, pieces, true, 0, kToLength,
                          release && last, checksum);
    }
    if (!st.ok()) break;
    hold();
    st = CopyPieces(pieces, attention[i].k_rows, attention[i].v_rows, s);
    if (st.ok()) st = still_valid();
  }
  if (st.ok() && !state.empty()) {
    st = ReleaseLater(held);
    held.clear();
    if (st.ok()) st = FetchLeaseState(ns, lease, {}, pieces, release, checksum);
    if (st.ok()) {
      hold();
      if (pieces.size() != state.size()) {
        st = Status::OutOfRange("the checkpoint has " + std::to_string(pieces.size()) +
                                " recurrent layers where " + std::to_string(state.size()) +
                                " were expected");
      }
    }
    for (size_t i = 0; st.ok() && i < state.size(); ++i) {
      st = CopyPieces(std::span(&pieces[i], 1), state[i].first, state[i].second, s);
    }
    if (st.ok()) st = still_valid();
  }
  // The last answer's leases: released without waiting for the reply.
  Status released = ReleaseLater(held);
  return st.ok() ? released : st;
}

Status ShmClient::ReleaseLater(std::span<const uint64_t> leases) {
  if (leases.empty()) return Status::Ok();
  if (fd_ < 0) return Status::Unavailable("not connected");
  std::vector<std::string> ids{"SHM.RELEASE"};
  for (uint64_t id : Distinct(leases)) ids.push_back(std::to_string(id));
  std::vector<std::string_view> args(ids.begin(), ids.end());
  if (Status st = SendAll(Encode(args)); !st.ok()) return st;
  ++replies_to_drop_;
  return Status::Ok();
}

const uint8_t* ShmClient::Zeros(size_t size) {
  for (const Arena& z : zero_maps_) {
    if (z.size >= size) return z.base;
  }
  // At least 1 MiB, so runs of zeros of the usual sizes share one mapping.
  const size_t length =
      std::max<size_t>(size_t{1} << 20, (size + kPageBytes - 1) & ~(kPageBytes - 1));
  void* mapped =
      ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) return nullptr;
  zero_maps_.push_back({static_cast<const uint8_t*>(mapped), length});
  return static_cast<const uint8_t*>(mapped);
}

Status ShmClient::ViewOf(Reply& r, ShmView& view, bool checksum) {
  if (r.type == Reply::Type::kString) {
    view.copy.assign(r.str.begin(), r.str.end());
    view.data = view.copy.data();
    view.size = view.copy.size();
    return Status::Ok();
  }
  if (r.type != Reply::Type::kArray || r.elements.size() != 6) {
    return Status::ProtocolError("unexpected place in a SHM reply");
  }
  view.arena = static_cast<uint32_t>(r.elements[0].integer);
  view.offset = static_cast<uint64_t>(r.elements[1].integer);
  view.size = static_cast<size_t>(r.elements[2].integer);
  view.generation = static_cast<uint64_t>(r.elements[3].integer);
  view.checksum = r.elements[4].str;
  view.lease = static_cast<uint64_t>(r.elements[5].integer);
  if (checksum && r.elements[4].type != Reply::Type::kString) {
    return Status::ProtocolError("a SHM place came without the checksum asked for");
  }
  if (r.elements[0].integer == -1) {
    if (Status st = FileViewOf(view); !st.ok()) return st;
  } else {
    // An arena made since the last SHM.HELLO: ask for it.
    if (view.arena >= arenas_.size()) {
      if (Status st = Hello(); !st.ok()) return st;
      if (view.arena >= arenas_.size()) return Status::ProtocolError("arena not passed");
    }
    const Arena& a = arenas_[view.arena];
    if (view.offset > a.size || view.size > a.size - view.offset) {
      return Status::ProtocolError("a SHM place outside its arena");
    }
    view.data = a.base + view.offset;
  }
  // The server hashed the bytes it lent; the mapping must show the same ones.
  if (r.elements[4].type == Reply::Type::kString && ChecksumOf(view.bytes()) != view.checksum) {
    return Status::Corruption("the mapped bytes do not match the server's checksum " +
                              view.checksum + " (" + std::to_string(view.size) + " bytes)");
  }
  return Status::Ok();
}

Status ShmClient::FileViewOf(ShmView& view) {
  view.arena = ShmView::kInFile;
  // The descriptor came no later than the reply's first byte, after those of earlier replies;
  // the place's generation is the file's inode. Older descriptors that do not match came with
  // replies read through Command() (an SHM.GET sent by hand) and are dropped.
  int fd = -1;
  struct stat st {};
  while (!received_fds_.empty() && fd < 0) {
    const int candidate = received_fds_.front();
    received_fds_.erase(received_fds_.begin());
    if (::fstat(candidate, &st) == 0 && static_cast<uint64_t>(st.st_ino) == view.generation) {
      fd = candidate;
    } else {
      ::close(candidate);
    }
  }
  if (fd < 0) return Status::ProtocolError("a place in a passed file came without its descriptor");
  const auto device = static_cast<uint64_t>(st.st_dev), inode = static_cast<uint64_t>(st.st_ino);
  auto known = std::find_if(files_.begin(), files_.end(), [&](const FileMapping& f) {
    return f.device == device && f.inode == inode;
  });
  if (known == files_.end()) {
    const auto size = static_cast<uint64_t>(st.st_size);
    void* mapped = size == 0 ? MAP_FAILED : ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (mapped == MAP_FAILED) {
      ::close(fd);
      return Status::IoError(Errno("mmap of a passed file"));
    }
    files_.push_back({static_cast<const uint8_t*>(mapped), size, device, inode, 0, 0});
    known = files_.end() - 1;
  }
  ::close(fd);  // the mapping keeps the file
  if (view.offset > known->size || view.size > known->size - view.offset) {
    return Status::ProtocolError("a SHM place outside its file");
  }
  view.data = known->base + view.offset;
  ++known->views;
  known->last_used = ++file_clock_;
  file_leases_.emplace_back(view.lease, known->base);
  return Status::Ok();
}

void ShmClient::DropFileView(uint64_t lease) {
  // Every view under the lease: the pieces of one call share it.
  for (auto held = file_leases_.begin(); held != file_leases_.end();) {
    if (held->first != lease) {
      ++held;
      continue;
    }
    for (FileMapping& f : files_) {
      if (f.base == held->second && f.views > 0) --f.views;
    }
    held = file_leases_.erase(held);
  }
  // Unmap the least recently used mappings no view holds, past the ones kept for reuse.
  while (files_.size() > kKeptFiles) {
    auto oldest = files_.end();
    for (auto f = files_.begin(); f != files_.end(); ++f) {
      if (f->views == 0 && (oldest == files_.end() || f->last_used < oldest->last_used)) oldest = f;
    }
    if (oldest == files_.end()) break;
    ::munmap(const_cast<uint8_t*>(oldest->base), oldest->size);
    files_.erase(oldest);
  }
}

bool ShmClient::Valid(const ShmView& view) const {
  if (view.lease == 0) return view.data != nullptr;
  if (view.arena == ShmView::kInFile) return view.data != nullptr;
  if (view.arena >= arenas_.size()) return false;
  const auto* words = reinterpret_cast<const std::atomic<uint64_t>*>(arenas_[view.arena].base);
  return words[view.offset / kPageBytes].load(std::memory_order_acquire) == view.generation;
}

Status ShmClient::Release(ShmView& view) {
  const uint64_t lease = view.lease;
  view = ShmView{};
  if (lease == 0) return Status::Ok();
  return Release(std::span(&lease, 1));
}

Status ShmClient::Release(std::span<const uint64_t> leases) {
  if (leases.empty()) return Status::Ok();
  const std::vector<uint64_t> distinct = Distinct(leases);
  if (!file_leases_.empty()) {
    for (uint64_t lease : distinct) DropFileView(lease);
  }
  std::vector<std::string> ids{"SHM.RELEASE"};
  for (uint64_t id : distinct) ids.push_back(std::to_string(id));
  std::vector<std::string_view> args(ids.begin(), ids.end());
  auto reply = Command(args);
  return reply.ok() ? Status::Ok() : reply.status();
}

Result<Reply> ShmClient::Command(std::span<const std::string_view> args) {
  if (fd_ < 0) return Status::Unavailable("not connected");
  if (Status st = SendAll(Encode(args)); !st.ok()) return st;
  if (Status st = DropReleased(); !st.ok()) return st;
  auto reply = ReadReply();
  if (!reply.ok()) return reply;
  if (reply.value().type == Reply::Type::kError) {
    return Status::ServerError(reply.value().str);
  }
  return reply;
}

Status ShmClient::DropReleased() {
  for (; replies_to_drop_ > 0; --replies_to_drop_) {
    auto dropped = ReadReply();
    if (!dropped.ok()) return dropped.status();
  }
  return Status::Ok();
}

Status ShmClient::SendAll(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IoError(Errno("send"));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status ShmClient::Fill() {
  if (in_at_ == in_.size()) in_.clear(), in_at_ = 0;
  char buffer[64 * 1024];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 253)];
  iovec iov{buffer, sizeof buffer};
  msghdr message{};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(fd_, &message, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    return errno == EAGAIN ? Status::Timeout("recv timed out") : Status::IoError(Errno("recv"));
  }
  if (n == 0) return Status::Unavailable("the server closed the connection");
  ReceivedDescriptors(message, received_fds_);
  if (message.msg_flags & MSG_CTRUNC) return Status::ProtocolError("descriptors truncated");
  in_.append(buffer, static_cast<size_t>(n));
  return Status::Ok();
}

Result<std::string> ShmClient::Line() {
  while (true) {
    const size_t end = in_.find("\r\n", in_at_);
    if (end != std::string::npos) {
      std::string line = in_.substr(in_at_, end - in_at_);
      in_at_ = end + 2;
      return line;
    }
    if (Status st = Fill(); !st.ok()) return st;
  }
}

Result<Reply> ShmClient::ReadReply() {
  auto line = Line();
  if (!line.ok()) return line.status();
  const std::string& text = line.value();
  if (text.empty()) return Status::ProtocolError("empty reply line");
  Reply r;
  int64_t number = 0;
  const char* first = text.data() + 1;
  const char* last = text.data() + text.size();
  const bool numeric = text.size() > 1 && std::from_chars(first, last, number).ptr == last;
  switch (text[0]) {
    case '+':
      r.type = Reply::Type::kStatus, r.str = text.substr(1);
      return r;
    case '-':
      r.type = Reply::Type::kError, r.str = text.substr(1);
      return r;
    case ':':
      if (!numeric) return Status::ProtocolError("bad integer reply");
      r.type = Reply::Type::kInteger, r.integer = number;
      return r;
    case '$': {
      if (!numeric) return Status::ProtocolError("bad bulk header");
      if (number < 0) return r;  // nil
      const auto length = static_cast<size_t>(number);
      while (in_.size() - in_at_ < length + 2) {
        if (Status st = Fill(); !st.ok()) return st;
      }
      r.type = Reply::Type::kString, r.str = in_.substr(in_at_, length);
      in_at_ += length + 2;
      return r;
    }
    case '*': {
      if (!numeric) return Status::ProtocolError("bad array header");
      if (number < 0) return r;  // nil
      r.type = Reply::Type::kArray;
      for (int64_t i = 0; i < number; ++i) {
        auto element = ReadReply();
        if (!element.ok()) return element.status();
        r.elements.push_back(std::move(element).value());
      }
      return r;
    }
  }
  return Status::ProtocolError("unknown reply type '" + text.substr(0, 1) + "'");
}

// --- Zero-copy writes (SHM.SET) ---

Status ShmClient::SendWithFd(std::string_view bytes, int fd) {
  if (bytes.empty()) return Status::InvalidArgument("nothing to send the descriptor with");
  // The whole request in one message where the socket takes it: the descriptor rides on its
  // first byte, which is what the server needs (it arrives with the read holding that byte).
  const DescriptorMessage message(bytes.data(), bytes.size(), std::span(&fd, 1));
  ssize_t n;
  do {
    n = ::sendmsg(fd_, message.get(), MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Status::IoError(Errno("sendmsg"));
  return SendAll(bytes.substr(static_cast<size_t>(n)));
}

Status ShmClient::SetFromFd(std::string_view key, int fd, uint64_t length, uint64_t offset,
                            bool* adopted, std::span<const std::string_view> options,
                            bool* stored) {
  if (fd_ < 0) return Status::Unavailable("not connected");
  const std::string length_text = std::to_string(length), offset_text = std::to_string(offset);
  std::vector<std::string_view> args{"SHM.SET", key, length_text, offset_text};
  args.insert(args.end(), options.begin(), options.end());
  if (Status st = SendWithFd(Encode(args), fd); !st.ok()) return st;
  if (Status st = DropReleased(); !st.ok()) return st;
  auto reply = ReadReply();
  if (!reply.ok()) return reply.status();
  if (reply.value().type == Reply::Type::kError) return Status::ServerError(reply.value().str);
  if (adopted != nullptr) *adopted = reply.value().str == "ADOPTED";
  if (stored != nullptr) *stored = !reply.value().is_nil();
  return Status::Ok();
}

namespace {

// Bytes to write into a memfd at `offset`.
struct FilePiece {
  uint64_t offset = 0;
  std::string_view bytes;
};

// A new memfd of `size` bytes holding `pieces` (zeros elsewhere), sealed against any change;
// -1 with errno on failure.
int SealedMemfdOf(std::span<const FilePiece> pieces, uint64_t size) {
  const int fd = ::memfd_create("prefixd-value", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  auto fail = [fd] {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    return -1;
  };
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return fail();
  for (const FilePiece& piece : pieces) {
    size_t done = 0;
    while (done < piece.bytes.size()) {
      const ssize_t n = ::pwrite(fd, piece.bytes.data() + done, piece.bytes.size() - done,
                                 static_cast<off_t>(piece.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return fail();
      done += static_cast<size_t>(n);
    }
  }
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW) != 0) return fail();
  return fd;
}

}  // namespace

int ShmClient::SealedMemfd(std::span<const uint8_t> data) {
  const FilePiece all{0, {reinterpret_cast<const char*>(data.data()), data.size()}};
  return SealedMemfdOf(std::span(&all, 1), data.size());
}

Status ShmClient::Set(std::string_view key, std::span<const uint8_t> data, bool* adopted) {
  const int fd = SealedMemfd(data);
  if (fd < 0) return Status::IoError(Errno("memfd"));
  Status st = SetFromFd(key, fd, data.size(), 0, adopted);
  ::close(fd);
  return st;
}

// --- Zero-copy arguments (SHM.CALL) ---

namespace {

// Whether `index` names one of `argv`'s arguments (0 is the command's name).
Status CheckArgumentIndex(std::span<const std::string_view> argv, size_t index) {
  if (index != 0 && index < argv.size()) return Status::Ok();
  return Status::InvalidArgument("SHM.CALL: " + std::to_string(index) +
                                 " is not the index of one of the command's arguments");
}

uint64_t PageUp(uint64_t n) { return (n + kPageBytes - 1) & ~(kPageBytes - 1); }

}  // namespace

Result<Reply> ShmClient::SendCall(std::span<const std::string_view> argv,
                                  std::span<const size_t> from_file,
                                  std::span<const uint64_t> offsets, int fd) {
  std::vector<std::string> numbers{std::to_string(from_file.size())};
  for (size_t i = 0; i < from_file.size(); ++i) {
    numbers.insert(numbers.end(), {std::to_string(from_file[i]), std::to_string(offsets[i]),
                                   std::to_string(argv[from_file[i]].size())});
  }
  std::vector<std::string_view> args{"SHM.CALL"};
  args.insert(args.end(), numbers.begin(), numbers.end());
  const size_t carried_at = args.size();
  args.insert(args.end(), argv.begin(), argv.end());
  for (size_t index : from_file) args[carried_at + index] = {};
  if (Status sent = SendWithFd(Encode(args), fd); !sent.ok()) return sent;
  if (Status st = DropReleased(); !st.ok()) return st;
  auto reply = ReadReply();
  if (!reply.ok()) return reply;
  if (reply.value().type == Reply::Type::kError) return Status::ServerError(reply.value().str);
  return reply;
}

Result<Reply> ShmClient::Call(std::span<const std::string_view> argv,
                              std::span<const size_t> from_file) {
  if (fd_ < 0) return Status::Unavailable("not connected");
  if (from_file.empty()) return Command(argv);
  // The file: each argument from a page boundary, so that the server maps its pages alone.
  std::vector<FilePiece> pieces;
  std::vector<uint64_t> offsets;
  uint64_t size = 0;
  for (size_t index : from_file) {
    if (Status st = CheckArgumentIndex(argv, index); !st.ok()) return st;
    size = PageUp(size);
    pieces.push_back({size, argv[index]});
    offsets.push_back(size);
    size += argv[index].size();
  }
  const int memfd = SealedMemfdOf(pieces, size);
  if (memfd < 0) return Status::IoError(Errno("memfd"));
  auto reply = SendCall(argv, from_file, offsets, memfd);
  ::close(memfd);  // the message in flight holds the file
  return reply;
}

Result<Reply> ShmClient::Call(std::span<const std::string_view> argv,
                              std::span<const size_t> from_file, ShmArgumentFile& file) {
  if (fd_ < 0) return Status::Unavailable("not connected");
  if (from_file.empty()) return Command(argv);
  std::vector<uint64_t> offsets(from_file.size());
  for (size_t i = 0; i < from_file.size(); ++i) {
    if (Status st = CheckArgumentIndex(argv, from_file[i]); !st.ok()) return st;
    if (!file.OffsetOf(argv[from_file[i]], offsets[i])) {
      return Status::InvalidArgument("SHM.CALL: argument " + std::to_string(from_file[i]) +
                                     " does not lie in the argument file");
    }
  }
  if (Status st = file.Seal(); !st.ok()) return st;
  return SendCall(argv, from_file, offsets, file.fd());
}

Result<int64_t> ShmClient::PrefixStoreBlocks(std::string_view ns, const PrefixHash& parent,
                                             std::span<const PrefixHash> hashes,
                                             std::span<const LayerBlob> layers, RowFormat format,
                                             ShmArgumentFile* file) {
  if (hashes.empty()) return Status::InvalidArgument("PrefixStoreBlocks needs a block");
  client_internal::StoreArgs args;
  client_internal::BlockStoreArgs(args, ns, parent, hashes, layers, format);
  auto reply = file ? Call(args.argv, args.blobs, *file) : Call(args.argv, args.blobs);
  if (!reply.ok()) return reply.status();
  if (reply.value().type != Reply::Type::kInteger) {
    return Status::ProtocolError("unexpected KV.PREFIX.BSTORE reply");
  }
  return reply.value().integer;
}

Status ShmClient::PrefixStoreCheckpoint(std::string_view ns, const PrefixHash& anchor,
                                        uint64_t length, const PrefixHash& position,
                                        const PrefixCheckpointParts& parts, ShmArgumentFile* file) {
  client_internal::StoreArgs args;
  client_internal::CheckpointStoreArgs(args, ns, anchor, length, position, parts);
  auto reply = file ? Call(args.argv, args.blobs, *file) : Call(args.argv, args.blobs);
  if (!reply.ok()) return reply.status();
  if (reply.value().type != Reply::Type::kStatus || reply.value().str != "OK") {
    return Status::ProtocolError("unexpected SSM.PREFIX.CKPT.STORE reply");
  }
  return Status::Ok();
}

}  // namespace prefixd
