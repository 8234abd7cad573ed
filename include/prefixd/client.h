// prefixd::Client: a blocking client for prefixd's SSM.PREFIX commands (and any other command)
// over one RESP2 connection, built on hiredis. A Client is one connection: use it from one
// thread at a time; it may be moved between threads, never shared without a lock.
//
// Large values are not copied on the way: a blob argument goes from the caller's memory to the
// socket with a gather write, and a fetched value is read from the socket straight into its
// final buffer (the caller's, for FetchRange and FetchInto). hiredis connects and parses the
// small replies.
//
// Errors: a server error reply gives kServerError with the server's text, and the connection
// stays usable. An I/O error, a timeout or a malformed reply leaves the byte stream in an unknown
// state, so the connection is closed and every later call gives kUnavailable until Reconnect().
//
// Where things are (src/client/): the RESP encoding in resp_encoding.*, the reply reading in
// reply_reader.*, the connection in connection.*, and one file per command family, named in
// each section below.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "prefixd/status.h"

namespace prefixd {

struct ClientOptions {
  // Time allowed to establish the connection; zero waits as long as the OS does.
  std::chrono::milliseconds connect_timeout{5000};
  // Time one socket read or write may wait for progress (not a whole command: a 1 GB fetch that
  // keeps flowing never times out); zero waits forever.
  std::chrono::milliseconds io_timeout{30000};
  // A bulk reply longer than this is refused as a protocol error instead of being allocated.
  uint64_t max_bulk_bytes = uint64_t{16} << 30;
};

// Layers are non-negative 32-bit integers on the wire.
inline constexpr uint32_t kMaxLayer = 0x7fffffff;
inline constexpr size_t kDefaultFetchChunkBytes = size_t{4} << 20;
inline constexpr int kDefaultFetchDepth = 4;

using Blob = std::vector<uint8_t>;

// One layer of a multi-layer store; `bytes` is borrowed for the duration of the call.
struct LayerBlob {
  uint32_t layer = 0;
  std::span<const uint8_t> bytes;
};

// One entry of SSM.PREFIX.LAYERS.
struct LayerInfo {
  uint32_t layer = 0;
  uint64_t size = 0;
  friend bool operator==(const LayerInfo&, const LayerInfo&) = default;
};

// The row formats V.STOREBATCH accepts (its FMT option); values are little-endian.
enum class RowFormat : uint8_t { kF32, kF16, kBf16 };

// Options of KV.PREFIX.REGISTER; the hashes are borrowed for the duration of the call.
struct KvPrefixOptions {
  // The prefix's cold prefill time, credited to its hits in the server's value receipt.
  std::optional<double> prefill_ms;
  // BLOCKS: the token-block size and the blocks' hashes (both or neither).
  uint32_t block_size = 0;
  std::span<const uint64_t> block_hashes;
};

// A RESP2 reply as Command() returns it. A top-level error reply is returned as a kServerError
// Status instead; kError appears only nested in an array (e.g. inside EXEC's result).
struct Reply {
  enum class Type : uint8_t { kNil, kStatus, kError, kInteger, kString, kArray };

  Type type = Type::kNil;
  int64_t integer = 0;          // kInteger
  std::string str;              // kStatus, kError, kString
  std::vector<Reply> elements;  // kArray

  bool is_nil() const { return type == Type::kNil; }
};

// --- The prefix index's types (docs/prefix-index.md). ---

// A 128-bit chained hash (a block's h_i or a position's p(L)), as the 16 little-endian bytes
// the server compares.
using PrefixHash = std::array<uint8_t, 16>;
inline constexpr PrefixHash kPrefixRoot{};  // h_0

// The design's hash chain: h_i = XXH3-128(h_{i-1} || block i's tokens as u32 LE), and for a
// position L inside a block p(L) = XXH3-128(h_{floor(L/bs)} || the r = L mod bs tokens). Pure
// functions; any thread.
PrefixHash PrefixHashBlock(const PrefixHash& parent, std::span<const uint32_t> tokens);
// h_1 .. h_n of the full blocks of `tokens`.
std::vector<PrefixHash> PrefixBlockHashes(std::span<const uint32_t> tokens, uint32_t block_size);
// p(L) for L = length (h_{L/bs} when L is a multiple of bs); `blocks` are h_1.. of the tokens.
PrefixHash PrefixPositionHash(std::span<const uint32_t> tokens, uint64_t length,
                              uint32_t block_size, std::span<const PrefixHash> blocks);

// KV.PREFIX.NAMESPACE's shape.
struct PrefixShape {
  uint32_t block_size = 16;
  uint32_t attention_layers = 0;
  uint32_t kv_dim = 0;
  uint32_t recurrent_layers = 0;
  std::string_view vquant;  // empty: the server's default
  uint64_t max_bytes = 0;   // MAXMEMORY; 0: no per-namespace budget
};

// A position where a checkpoint may exist (KV.PREFIX.MATCH ... AT).
struct PrefixCandidate {
  uint64_t length = 0;
  PrefixHash position{};
};

// One attention layer of PrefixLeaseFetchAll: where its K rows and its V rows go.
struct PrefixLeaseRows {
  uint32_t layer = 0;
  std::span<uint8_t> k_rows;
  std::span<uint8_t> v_rows;
};

// One recurrent layer's blob of PrefixLeaseFetchAll, split between two places: its first
// `first.size()` bytes, then the rest.
struct PrefixLeaseBlob {
  std::span<uint8_t> first;
  std::span<uint8_t> second;
};

// KV.PREFIX.MATCH's answer.
struct PrefixMatchResult {
  uint64_t length = 0;  // L: 0 on a miss
  uint64_t lease = 0;   // 0 on a miss or without a lease
  uint64_t matched_blocks = 0;
  PrefixHash position{};
  uint64_t kv_bytes = 0;
  uint64_t state_bytes = 0;
};

// A checkpoint's parts for SSM.PREFIX.CKPT.STORE / MSTORE, borrowed for the call. `states`: one
// blob per recurrent layer (for a window, the k states back to back); `tail`: per attention
// layer the tail's K rows then V rows in `format` (empty at a block boundary).
struct PrefixCheckpointParts {
  std::span<const LayerBlob> states;
  std::span<const LayerBlob> tail;
  RowFormat format = RowFormat::kF32;
};

class Client {
 public:
  // The connection behind a Client (src/client/connection.h); opaque to callers.
  class Impl;

  // --- Connection and server commands (client.cc). ---

  // Connects over TCP; `timeout` is both the connect and the I/O timeout.
  static Result<Client> Connect(std::string_view host, int port, std::chrono::milliseconds timeout);
  static Result<Client> Connect(std::string_view host, int port, const ClientOptions& options = {});
  // Connects to a unix-domain socket.
  static Result<Client> ConnectUnix(std::string_view path, const ClientOptions& options = {});

  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // False once an I/O or protocol error has closed the connection (or after a move).
  bool connected() const;
  // The unix socket's path for a client made by ConnectUnix, empty over TCP: a process on the
  // server's machine may then read through its shared arenas too (ShmClient::ConnectBeside).
  std::string_view unix_socket_path() const;
  // Opens a fresh connection to the same address, repeating the last successful Auth().
  Status Reconnect();

  Status Ping();
  Status Auth(std::string_view password);
  Status Auth(std::string_view username, std::string_view password);

  // --- SSM.PREFIX.*: per-layer recurrent-state blobs (ssm_prefix.cc). ---

  // SSM.PREFIX.STORE: stores (or overwrites) one layer's blob.
  Status Store(std::string_view sid, uint32_t layer, std::span<const uint8_t> blob);
  Status Store(std::string_view sid, uint32_t layer, std::string_view blob);

  // SSM.PREFIX.FETCH: the whole blob, or nullopt when the layer is absent.
  Result<std::optional<Blob>> Fetch(std::string_view sid, uint32_t layer);

  // SSM.PREFIX.FETCH ... RANGE: up to `length` bytes from `offset`, written to the start of
  // `out` (which needs at least `length` bytes); returns how many were written, fewer at the end
  // of the blob and zero past it, or nullopt when the layer is absent.
  Result<std::optional<size_t>> FetchRange(std::string_view sid, uint32_t layer, uint64_t offset,
                                           uint64_t length, std::span<uint8_t> out);

  // Streams a whole blob into `out` as RANGE fetches of `chunk_bytes` (at least 1), keeping
  // `depth` (1..1024) requests in flight so the transfer never waits a round trip. Returns the
  // blob's size, or nullopt when the layer is absent; kOutOfRange when the blob is larger than
  // `out`. The chunks are separate commands, so an overwrite of the layer during the transfer can
  // leave a mix of old and new bytes; a drop (or growth past the end already seen) in mid-stream
  // gives kAborted. Use Fetch when the value must be one atomic snapshot.
  Result<std::optional<size_t>> FetchInto(std::string_view sid, uint32_t layer,
                                          std::span<uint8_t> out,
                                          size_t chunk_bytes = kDefaultFetchChunkBytes,
                                          int depth = kDefaultFetchDepth);

  // SSM.PREFIX.DROP: every layer of the session, or one layer. Dropping nothing is not an error.
  Status Drop(std::string_view sid);
  Status Drop(std::string_view sid, uint32_t layer);

  // SSM.PREFIX.MSTORE: several layers atomically (a reader sees all of them or none).
  Status MStore(std::string_view sid, std::span<const LayerBlob> layers);

  // SSM.PREFIX.MFETCH: one entry per requested layer, nullopt where absent.
  Result<std::vector<std::optional<Blob>>> MFetch(std::string_view sid,
                                                  std::span<const uint32_t> layers);

  // SSM.PREFIX.LAYERS: the session's layers and blob sizes, ascending by layer.
  Result<std::vector<LayerInfo>> Layers(std::string_view sid);

  // --- The V-store V.*: attention-layer K/V rows, in Pion's commands (vstore.cc). ---
  // Rows are sent from and fetched into the caller's memory without intermediate copies. The
  // typed overloads reinterpret host floats as little-endian bytes (every supported host).

  // V.CREATE: creates a session of `dim`-value rows in the tier `vquant` (fp32, fp16, bf16, int8,
  // fp8, mlx4g32; empty: the server's default). Returns its index; for an existing sid, the
  // existing session's index (its shape unchanged).
  Result<int64_t> VCreate(std::string_view sid, uint32_t dim, std::string_view vquant = {});

  // V.STOREBATCH: `count` rows at [start, start + count) of `layer`; `rows` holds count × dim
  // values in `format`. The server encodes them to the session's tier.
  Status VStoreBatch(std::string_view sid, uint32_t layer, uint64_t start, uint64_t count,
                     RowFormat format, std::span<const uint8_t> rows);
  Status VStoreBatch(std::string_view sid, uint32_t layer, uint64_t start, uint64_t count,
                     std::span<const float> rows);
  // fp16 or bf16 bit patterns (`format` kF16 or kBf16).
  Status VStoreBatch(std::string_view sid, uint32_t layer, uint64_t start, uint64_t count,
                     RowFormat format, std::span<const uint16_t> rows);

  // V.FETCH ... RANGE: rows [start, end) of `layer` as fp32 into the start of `out`; rows past
  // the layer's end are zeros. Returns the number of floats written ((end - start) × dim), or
  // nullopt when the layer holds no rows; kOutOfRange (connection intact) when `out` is too
  // small.
  Result<std::optional<size_t>> VFetchRange(std::string_view sid, uint32_t layer, uint64_t start,
                                            uint64_t end, std::span<float> out);
  // ... FMT NATIVE: fp32, fp16 and bf16 sessions' rows as stored, other tiers' as fp32; returns
  // the byte count (the element size follows from it).
  Result<std::optional<size_t>> VFetchRangeNative(std::string_view sid, uint32_t layer,
                                                  uint64_t start, uint64_t end,
                                                  std::span<uint8_t> out);

  // V.DROP: true when the session existed.
  Result<bool> VDrop(std::string_view sid);

  // --- KV.PREFIX.*: attention-K/V namespaces, in Pion's commands (kv_prefix.cc). ---

  // KV.PREFIX.REGISTER: registers `ns` and creates `<ns>_pk` / `<ns>_pv` (kv_dim-value rows in
  // tier `vquant`); registering again changes nothing.
  Status KvPrefixRegister(std::string_view ns, uint32_t kv_dim, std::string_view vquant,
                          const KvPrefixOptions& options = {});
  // KV.PREFIX.LOOKUP: true on HIT (both sessions hold rows). `tokens` and `prefill_ms` feed the
  // server's value receipt.
  Result<bool> KvPrefixLookup(std::string_view ns, std::optional<uint64_t> tokens = {},
                              std::optional<double> prefill_ms = {});
  // KV.PREFIX.DROP: how many of the namespaces existed.
  Result<int64_t> KvPrefixDrop(std::span<const std::string_view> namespaces);

  // --- The prefix index (SSM.PREFIX.* / KV.PREFIX.* block and checkpoint commands, the match
  // and its lease): docs/prefix-index.md. Its calls go here, implemented in prefix_index.cc. ---

  // KV.PREFIX.NAMESPACE: creates `ns` with `shape`; again with the same shape changes nothing.
  Status PrefixNamespaceCreate(std::string_view ns, const PrefixShape& shape);
  // KV.PREFIX.NSINFO: the k:v lines, or nullopt when the namespace does not exist.
  Result<std::optional<std::string>> PrefixNamespaceInfo(std::string_view ns);
  // KV.PREFIX.BSTORE: blocks `hashes` after `parent`; `layers` holds, for every attention layer,
  // its K rows for the hashes.size() x bs positions then its V rows. Returns how many were new.
  Result<int64_t> PrefixStoreBlocks(std::string_view ns, const PrefixHash& parent,
                                    std::span<const PrefixHash> hashes,
                                    std::span<const LayerBlob> layers,
                                    RowFormat format = RowFormat::kF32);
  // KV.PREFIX.BDROP: blocks with their subtrees and checkpoints; how many listed were stored.
  Result<int64_t> PrefixDropBlocks(std::string_view ns, std::span<const PrefixHash> hashes);
  // KV.PREFIX.BFETCH: one layer's K rows then V rows (fp32) of the listed blocks into `out`;
  // the float count, or nullopt when one is missing. No state comes with it.
  Result<std::optional<size_t>> PrefixFetchBlocks(std::string_view ns,
                                                  std::span<const PrefixHash> hashes,
                                                  uint32_t layer, std::span<float> out);
  // SSM.PREFIX.CKPT.STORE: the checkpoint at `length`, anchored on h_{length / bs}.
  Status PrefixStoreCheckpoint(std::string_view ns, const PrefixHash& anchor, uint64_t length,
                               const PrefixHash& position, const PrefixCheckpointParts& parts);
  // SSM.PREFIX.CKPT.MSTORE: checkpoints at first_length .. + positions.size() - 1 (one anchor).
  Result<int64_t> PrefixStoreCheckpoints(std::string_view ns, const PrefixHash& anchor,
                                         uint64_t first_length,
                                         std::span<const PrefixHash> positions,
                                         const PrefixCheckpointParts& parts);
  // SSM.PREFIX.CKPT.DROP: how many of the positions were stored.
  Result<int64_t> PrefixDropCheckpoints(std::string_view ns, std::span<const PrefixHash> positions);
  // SSM.PREFIX.CKPT.FETCH: the recurrent blobs (all, or `layers`), or nullopt.
  Result<std::optional<std::vector<Blob>>> PrefixFetchCheckpoint(
      std::string_view ns, const PrefixHash& position, std::span<const uint32_t> layers = {});
  // KV.PREFIX.MATCH: the longest L with K/V for [0, L) and a checkpoint at L. `lease_ms`: 0 for
  // NOLEASE, nullopt for the server's default.
  Result<PrefixMatchResult> PrefixMatch(std::string_view ns, std::span<const PrefixHash> blocks,
                                        std::span<const PrefixCandidate> candidates = {},
                                        std::optional<uint32_t> lease_ms = std::nullopt);
  // KV.PREFIX.LFETCH ... ATTN: rows [start, end) of the leased prefix for `layer` (K rows then V
  // rows, fp32) into `out`; returns the float count. kOutOfRange when `out` is too small.
  Result<size_t> PrefixLeaseFetchAttention(std::string_view ns, uint64_t lease, uint32_t layer,
                                           uint64_t start, uint64_t end, std::span<float> out,
                                           bool release = false);
  // KV.PREFIX.LFETCH ... STATE: the checkpoint's recurrent blobs (all, or `layers`).
  Result<std::vector<Blob>> PrefixLeaseFetchState(std::string_view ns, uint64_t lease,
                                                  std::span<const uint32_t> layers = {},
                                                  bool release = false);
  // KV.PREFIX.RELEASE: true when the lease was live.
  Result<bool> PrefixRelease(std::string_view ns,
                             uint64_t lease);  // Everything of a leased prefix in one round trip,
                                               // read straight into the caller's memory:
  // KV.PREFIX.LFETCH ... ATTN <layer> FMT NATIVE for each of `attention` (the layer's K rows for
  // [0, L) into k_rows, then its V rows into v_rows, as the namespace stores them), then ... STATE
  // (recurrent layer i's blob into `state[i]`); all sent before the first reply is read.
  // `release` ends the lease with the last request. Every size must match exactly (kOutOfRange
  // otherwise). A server error in any reply is returned after every reply was read (the
  // connection stays usable).
  Status PrefixLeaseFetchAll(std::string_view ns, uint64_t lease,
                             std::span<const PrefixLeaseRows> attention,
                             std::span<const PrefixLeaseBlob> state, bool release = true);

  // --- Any command (client.cc). ---

  // Any request/reply command, arguments binary-safe. Commands that break the one-reply-per-
  // request rule (SUBSCRIBE and friends, MONITOR, CLIENT REPLY) and HELLO 3 (this client speaks
  // RESP2) are refused with kInvalidArgument before anything is sent.
  Result<Reply> Command(const std::vector<std::string_view>& argv);

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  // ConnectBeside opens a connection to the same socket with the same AUTH.
  friend class ShmClient;

  std::unique_ptr<Impl> impl_;
};

}  // namespace prefixd
