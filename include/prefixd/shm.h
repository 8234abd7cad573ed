// prefixd::ShmClient: reads values in place from a prefixd-server on the same machine, through
// the arenas it shares read-only over its unix socket (docs/shm-transport.md). One connection;
// use it from one thread at a time. A view's bytes stay valid and unchanged until the view is
// released (or its lease runs out on the server: shm-lease-timeout), whatever writes the key
// meanwhile.
//
// It speaks RESP2 itself over the socket (recvmsg, so the arena descriptors SHM.HELLO passes
// arrive with the reply); Command() is there for anything else on the same connection.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "prefixd/client.h"
#include "prefixd/status.h"

namespace prefixd {

// A value read through the arenas: `data` points into a read-only mapping of the server's
// memory (or, for a value the server keeps outside the arenas, into `copy`, and `lease` is 0).
// Every view of one call (the pieces of a FetchRows, FetchBlocks, ...) carries the same lease:
// the server takes one per call, holding all their bytes, and releasing it releases them all.
// A string stored by SHM.SET and adopted by the server lies in the sealed file it was written
// to: `arena` is kInFile, `generation` the file's inode number, and `data` points into this
// client's read-only mapping of that file (the server passes a descriptor with each such reply).
struct ShmView {
  static constexpr uint32_t kInFile = 0xffffffffu;

  const uint8_t* data = nullptr;
  size_t size = 0;
  uint64_t lease = 0;  // 0: nothing to release
  uint32_t arena = 0;
  uint64_t offset = 0;
  uint64_t generation = 0;
  std::string checksum;       // XXH3-64 as 16 hex digits, when asked for (checked on arrival)
  std::vector<uint8_t> copy;  // the bytes, for a value outside the arenas
  // V.SHMFETCH: a run of zero rows (a gap, rows past the layer's length); `data` points at
  // read-only zero pages of the client's own, valid while the client lives, and `lease` is 0.
  bool zeros = false;

  std::span<const uint8_t> bytes() const { return {data, size}; }
};

// What ScatterLease moved, and how.
struct ShmScatterStats {
  uint64_t pieces = 0;        // pieces answered
  uint64_t leased = 0;        // of them, places in the arenas, read through the mapping
  uint64_t mapped_bytes = 0;  // bytes copied out of the mapped arenas
  uint64_t reply_bytes = 0;   // bytes that came in replies (pieces outside the arenas)
};

// A memfd a caller computes a command's large arguments into, in place, before ShmClient::Call
// sends it: no copy into a memfd in this process, and none in the server, which maps the pages
// it adopts (an argument of 32 KiB or more). For a client that produces its bytes (a model's
// state gathered from its caches), where SHM.CALL with finished buffers would copy them once.
// Take() hands out page-aligned room; Call() seals the file, after which it cannot be written
// and the spans Take() gave are gone (the writable mapping is undone so that the seal holds).
class ShmArgumentFile {
 public:
  // A file with room for `capacity` bytes of arguments, mapped writable; kIoError when the
  // kernel refuses the memfd or the mapping.
  static Result<ShmArgumentFile> Create(uint64_t capacity);
  // The capacity arguments of these sizes need, each from a page boundary.
  static uint64_t CapacityFor(std::span<const uint64_t> sizes);

  ShmArgumentFile(ShmArgumentFile&& other) noexcept;
  ShmArgumentFile& operator=(ShmArgumentFile&&) = delete;
  ShmArgumentFile(const ShmArgumentFile&) = delete;
  ShmArgumentFile& operator=(const ShmArgumentFile&) = delete;
  ~ShmArgumentFile();

  // The next `size` bytes of the file, from a page boundary, to be written before Call; empty
  // when they do not fit (or the file is sealed).
  std::span<uint8_t> Take(uint64_t size);
  // Where `bytes` lies in the file, when it lies wholly inside what Take() handed out.
  bool OffsetOf(std::string_view bytes, uint64_t& offset) const;
  // Undoes the writable mapping and seals the file against any change; idempotent.
  Status Seal();
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }

 private:
  ShmArgumentFile() = default;
  int fd_ = -1;
  uint8_t* base_ = nullptr;  // the writable mapping, until sealed
  uint64_t capacity_ = 0;
  uint64_t size_ = 0;  // handed out so far
  bool sealed_ = false;
};

class ShmClient {
 public:
  ShmClient() = default;
  ~ShmClient();
  ShmClient(const ShmClient&) = delete;
  ShmClient& operator=(const ShmClient&) = delete;

  // Connects to the unix socket at `path`, authenticates when `password` is not empty, and sends
  // SHM.HELLO, mapping the arenas it passes.
  Status Connect(const std::string& path, std::string_view password = {},
                 std::chrono::milliseconds io_timeout = std::chrono::milliseconds(30000));
  // Connect to the unix socket `client` talks to, with the same AUTH (user and password) and I/O
  // timeout. kInvalidArgument when `client` talks TCP; SHM.HELLO's refusal (shm-allow-uids,
  // arenas off) is its kServerError.
  Status ConnectBeside(const Client& client);

  // SHM.GET: a view of `key`'s value under a lease. kNotFound when the key does not exist.
  // `checksum` (here and on every fetch below) asks the server for each place's XXH3-64 (it then
  // reads every byte) and checks the mapped bytes against it: a mismatch is kCorruption (the
  // call's lease is then released and nothing returned).
  Status Get(std::string_view key, ShmView& view, bool checksum = false);
  // SSM.PREFIX.SHMFETCH: a view of each of `layers` of session `sid`, from one consistent
  // snapshot, in order; an absent layer's view is empty (data null, size 0, no lease). One lease
  // for the call: past the connection's cap (shm-max-leases counts calls) it is kServerError.
  Status FetchLayers(std::string_view sid, std::span<const uint32_t> layers,
                     std::vector<ShmView>& views, bool checksum = false);
  // V.SHMFETCH: rows [start, end) of a V-store layer as the pieces the server stores them in, in
  // row order, from one consistent state of the layer; joined they are V.FETCH RANGE's bytes
  // (with `native`, FMT NATIVE's). A piece is a view under the call's lease, a copy, or a run
  // of zeros (`zeros`). `pieces` is empty for a layer with no tokens.
  Status FetchRows(std::string_view sid, uint32_t layer, uint64_t start, uint64_t end,
                   std::vector<ShmView>& pieces, bool native = false, bool checksum = false);
  // V.SHMFETCH ... BATCH: rows [start, end) of layers 0 .. layer_count-1 (0: through the
  // highest stored layer) from one state of the session, one entry of `layers` per layer, each
  // the pieces FetchRows gives for that layer (empty for a layer with no tokens); joined, a
  // layer's pieces are that layer's bulk of V.FETCH BATCH (with `native`, FMT NATIVE's). One
  // lease for the whole call, all layers' places together.
  Status FetchBatch(std::string_view sid, uint64_t start, uint64_t end,
                    std::vector<std::vector<ShmView>>& layers, uint32_t layer_count = 0,
                    bool native = false, bool checksum = false);
  // SSM.PREFIX.CKPT.SHMFETCH: a view of each recurrent layer's blob of the checkpoint at
  // `position` in namespace `ns` (all layers, or `layers`), in order, under one lease for the
  // call; they are SSM.PREFIX.CKPT.FETCH's blobs. kNotFound when no checkpoint is there.
  Status FetchCheckpoint(std::string_view ns, const PrefixHash& position,
                         std::span<const uint32_t> layers, std::vector<ShmView>& views,
                         bool checksum = false);
  // KV.PREFIX.SHMBFETCH: `layer`'s rows of the blocks `hashes` names (n × 16 raw bytes) as 2n
  // views, every block's K rows then every block's V rows; joined they are KV.PREFIX.BFETCH's
  // bytes (with `native`, FMT NATIVE's). kNotFound when a block is missing.
  Status FetchBlocks(std::string_view ns, std::string_view hashes, uint32_t layer,
                     std::vector<ShmView>& pieces, bool native = false, bool checksum = false);
  // KV.PREFIX.SHMLFETCH ... ATTN: rows [start, end) of `layer` of the prefix a KV.PREFIX.MATCH
  // leased (end kToLength: to its length L) as pieces: the K rows, then the V rows, one piece per
  // block touched and one for the checkpoint's tail; joined they are KV.PREFIX.LFETCH's bytes
  // (with `native`, FMT NATIVE's). `release` ends the prefix lease with the answer (the pieces
  // keep their bytes). One SHM lease for the call; past the cap nothing is leased and the prefix
  // lease is not released.
  static constexpr uint64_t kToLength = ~uint64_t{0};
  Status FetchLeaseRows(std::string_view ns, uint64_t lease, uint32_t layer,
                        std::vector<ShmView>& pieces, bool native = false, uint64_t start = 0,
                        uint64_t end = kToLength, bool release = false, bool checksum = false);
  // KV.PREFIX.SHMLFETCH ... STATE: one view per recurrent layer of the leased checkpoint (all,
  // or `layers`), in order.
  Status FetchLeaseState(std::string_view ns, uint64_t lease, std::span<const uint32_t> layers,
                         std::vector<ShmView>& views, bool release = false, bool checksum = false);
  // Client::PrefixLeaseFetchAll over the shared path: each attention layer's K rows into its
  // k_rows and V rows into its v_rows (FMT NATIVE), then recurrent layer i's blob into state[i],
  // copied out of the mapped arenas; every size must match exactly (kOutOfRange otherwise).
  // `release` ends the prefix lease with the last request. One round trip per request: a
  // request's lease (one per call) is released (SHM.RELEASE, its reply not waited for) as the
  // next goes out, so at most one layer's pieces are leased at a time, whatever their number. On
  // an error the prefix lease is kept (unless the failing request was the last), so the caller
  // can fetch it over the socket. `checksum`: every piece checked as the fetches above check it.
  Status ScatterLease(std::string_view ns, uint64_t lease,
                      std::span<const PrefixLeaseRows> attention,
                      std::span<const PrefixLeaseBlob> state, bool release = true,
                      ShmScatterStats* stats = nullptr, bool checksum = false);
  // Whether the server's generation of the view's bytes is still the view's: false once the
  // region was freed or reused (after a release or an expired lease). Always true for a copy,
  // and for a view of an adopted file (sealed: its bytes never change).
  bool Valid(const ShmView& view) const;
  // SHM.RELEASE of the view's lease (nothing for a copy); the view is emptied. The lease is its
  // call's: the other views of that call lose their bytes' guarantee with it.
  Status Release(ShmView& view);
  // Each distinct id once (the pieces of a call repeat theirs); none: nothing sent.
  Status Release(std::span<const uint64_t> leases);

  // Any command on this connection; a server error comes back as kServerError.
  Result<Reply> Command(std::span<const std::string_view> args);
  Result<Reply> Command(std::initializer_list<std::string_view> args) {
    return Command(std::span<const std::string_view>(args.begin(), args.size()));
  }

  // The arenas mapped so far, and arena `id`'s mapping (read-only; empty past arena_count()).
  size_t arena_count() const { return arenas_.size(); }
  std::span<const uint8_t> arena(size_t id) const {
    return id < arenas_.size() ? std::span<const uint8_t>(arenas_[id].base, arenas_[id].size)
                               : std::span<const uint8_t>();
  }
  // Adopted files mapped now: those under a view, and up to kKeptFiles released ones kept for
  // the next read of the same value (the server passes its descriptor with every read).
  size_t file_mapping_count() const { return files_.size(); }
  static constexpr size_t kKeptFiles = 16;

  // --- Zero-copy writes of strings (SHM.SET) ---
  // Stores [offset, offset + length) of the file `fd` (a memfd) as `key`'s string value: the
  // descriptor goes with the request (SCM_RIGHTS); the caller keeps and closes its own. A memfd
  // sealed with F_SEAL_WRITE and F_SEAL_SHRINK is adopted by the server without a copy (from 32
  // KiB); anything else is copied once. `adopted`, when given, says which happened.
  // `options` are SET's after the value, but GET (NX|XX, EX|PX|EXAT|PXAT|KEEPTTL); `stored`,
  // when given, is false when NX or XX decided against the write (the server answers nil).
  Status SetFromFd(std::string_view key, int fd, uint64_t length, uint64_t offset = 0,
                   bool* adopted = nullptr, std::span<const std::string_view> options = {},
                   bool* stored = nullptr);
  // A new memfd of `data`'s bytes, sealed (write, shrink, grow) so that the server can adopt
  // it; -1 with errno on failure. The caller closes it.
  static int SealedMemfd(std::span<const uint8_t> data);
  // SealedMemfd then SetFromFd, closing the memfd: one copy (into the memfd) in this process,
  // none in the server.
  Status Set(std::string_view key, std::span<const uint8_t> data, bool* adopted = nullptr);

  // --- Zero-copy arguments for any command (SHM.CALL) ---
  // Runs the command `argv` (its name, then its arguments, as for Command()) with the arguments
  // at the indices `from_file` names (1-based: 0 is the name) written into one sealed memfd
  // instead of sent over the socket, and answers the command's reply (a server error as
  // kServerError, the command's own or SHM.CALL's). One copy here (into the memfd, each
  // argument page-aligned); the server maps an argument of 32 KiB or more instead of copying
  // it, as SHM.SET's value, so a command that keeps its argument (a layer blob, rows stored as
  // sent) keeps those pages. Everything else is as if `argv` had been sent: the same checks,
  // statistics, log and replication (with the bytes). The file lives as long as any argument
  // mapped from it: put in one call only arguments that are kept together. kInvalidArgument for
  // an index that is not an argument's; no `from_file`: Command(argv).
  Result<Reply> Call(std::span<const std::string_view> argv, std::span<const size_t> from_file);
  Result<Reply> Call(std::initializer_list<std::string_view> argv,
                     std::initializer_list<size_t> from_file) {
    return Call(std::span<const std::string_view>(argv.begin(), argv.size()),
                std::span<const size_t>(from_file.begin(), from_file.size()));
  }
  // The same with arguments already in `file` (written into what file.Take() gave): each
  // argument at an index of `from_file` must lie wholly inside it (kInvalidArgument if not) and
  // is sent as its place there, without a copy. Seals `file`; the caller keeps and closes it
  // (the message in flight holds its own reference).
  Result<Reply> Call(std::span<const std::string_view> argv, std::span<const size_t> from_file,
                     ShmArgumentFile& file);
  // Client::PrefixStoreBlocks and Client::PrefixStoreCheckpoint through Call: the same command
  // and answer, every layer's rows and state blob written into one memfd. With `file`, the rows
  // and blobs already lie in it (computed into file.Take()'s room) and are sent in place.
  Result<int64_t> PrefixStoreBlocks(std::string_view ns, const PrefixHash& parent,
                                    std::span<const PrefixHash> hashes,
                                    std::span<const LayerBlob> layers,
                                    RowFormat format = RowFormat::kF32,
                                    ShmArgumentFile* file = nullptr);
  Status PrefixStoreCheckpoint(std::string_view ns, const PrefixHash& anchor, uint64_t length,
                               const PrefixHash& position, const PrefixCheckpointParts& parts,
                               ShmArgumentFile* file = nullptr);

 private:
  struct Arena {
    const uint8_t* base = nullptr;
    uint64_t size = 0;
  };
  // A mapping of an adopted file, known by its inode; `views` counts the leases under it.
  struct FileMapping {
    const uint8_t* base = nullptr;
    uint64_t size = 0;
    uint64_t device = 0, inode = 0;
    uint32_t views = 0;
    uint64_t last_used = 0;
  };

  // The view of a place in a passed file: claims the oldest received descriptor.
  Status FileViewOf(ShmView& view);
  // One view fewer under the file mapping that holds `lease`; unmaps the oldest unused mappings
  // past kKeptFiles.
  void DropFileView(uint64_t lease);

  // Connects to `path`; no command sent.
  Status Open(const std::string& path, std::chrono::milliseconds io_timeout);
  Status Hello();
  // V.SHMFETCH's answer for one layer (places, bytes and zero runs) into `pieces`; on an error
  // the views made so far stay, for the caller to abandon.
  Status RowPiecesOf(Reply& answer, std::vector<ShmView>& pieces, bool checksum);
  // Views of an array of pieces (a place, or bytes, each); `checksum`: each place checked.
  Status ViewsOf(Reply& reply, std::vector<ShmView>& views, std::string_view command,
                 bool checksum);
  // An answer not kept: its leases released (without waiting), `views` emptied; returns `why`.
  Status Abandon(std::vector<ShmView>& views, Status why);
  // SHM.RELEASE sent now, its reply read (and dropped) before the next command's.
  Status ReleaseLater(std::span<const uint64_t> leases);
  // Reads the replies ReleaseLater left unread.
  Status DropReleased();
  // `size` bytes of read-only zeros, valid until the client is destroyed.
  const uint8_t* Zeros(size_t size);
  // Fills `view` from one value's answer (a place array or the bytes); `checksum`: the place
  // must carry one, and the mapped bytes must match it.
  Status ViewOf(Reply& answer, ShmView& view, bool checksum);
  Status SendAll(std::string_view bytes);
  // SendAll with `fd` passed on the first byte.
  Status SendWithFd(std::string_view bytes, int fd);
  // SHM.CALL of `argv` with its arguments at `from_file` passed as [offset, offset + length) of
  // the sealed memfd `fd` (`offsets`, one per index), and its reply.
  Result<Reply> SendCall(std::span<const std::string_view> argv, std::span<const size_t> from_file,
                         std::span<const uint64_t> offsets, int fd);
  // Reads one reply; descriptors that arrive meanwhile join `received_fds_`.
  Result<Reply> ReadReply();
  Status Fill();  // one recvmsg into in_
  Result<std::string> Line();

  int fd_ = -1;
  std::string in_;
  size_t in_at_ = 0;
  int replies_to_drop_ = 0;  // of ReleaseLater, read before the next command's reply
  std::vector<int> received_fds_;
  std::vector<Arena> arenas_;
  std::vector<Arena> zero_maps_;  // anonymous, read-only: the shared zero page, no memory
  std::vector<FileMapping> files_;
  std::vector<std::pair<uint64_t, const uint8_t*>> file_leases_;  // (lease, its mapping's base)
  uint64_t file_clock_ = 0;
};

}  // namespace prefixd
