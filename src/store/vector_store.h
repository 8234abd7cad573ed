// VectorStore: the attention-layer V-store. Sessions (binary-safe sid) have a value_dim and a
// storage tier and hold, per layer, a growable array of encoded rows (one per token); KV.PREFIX
// registrations pair the `<ns>_pk` and `<ns>_pv` sessions of a prompt prefix. Thread-safe: any io
// thread may call any method. Knows no RESP and no settings: callers pass the limits.
//
// Consistency without copies: a layer's rows sit in chunks of whole rows (shared Bytes). A chunk
// is changed in place only where rows lie at or past the layer's length, which no reader has
// seen; rows a reader may have seen are rewritten copy-on-write into a new chunk. A read takes
// the session lock just long enough to copy chunk handles and the length, so a reply is one
// consistent state of the layer (never a mix of two STOREBATCHes) and is sent from the stored
// buffers themselves.
//
// Locks, always taken in this order: prefixes_mu_, shard locks (ascending), one session lock.
// `under_lock` hooks run while the change is applied under the locks that order it against every
// other change to the same session, so the durability log's order is the order of changes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "store/cold_file.h"
#include "store/row_places.h"
#include "store/vector_codec.h"

namespace prefixd::store {

struct VectorSessionInfo {
  uint64_t index = 0;
  uint32_t dim = 0;
  Tier tier = Tier::kFp16;
  size_t row_bytes = 0;
};

// Consecutive stored rows, copy-free: pieces (chunk slices and shared zero bytes) whose sizes are
// whole rows, all read from one state of the layer.
struct RowSpan {
  uint64_t rows = 0;
  std::vector<Bytes> pieces;
  uint64_t bytes() const;
};

// Consecutive stored rows from `start`.
struct RowRun {
  uint64_t start = 0;
  RowSpan rows;
};

struct LayerRead {
  uint32_t layer = 0;
  uint64_t length = 0;  // the layer's stored length; 0 when it holds no tokens
  RowSpan rows;         // the rows asked for (empty when length is 0; ForEachSession: empty)
  // ForEachSession only: the stored chunks as ascending runs, gaps left out, the last one
  // ending at `length` (one zero row when nothing is stored there). Written as records, a
  // sparse layer's snapshot is as small as what it stores, and replays the same layer.
  std::vector<RowRun> runs;
  // ForEachSession only: the layer's write count (the snapshot's Repoint names the state it
  // copied by it) and whether its rows were on disk (the disk tier) when copied.
  uint64_t version = 0;
  bool cold = false;
  // ForEachSession without reading cold layers: a cold layer's extents (first row, where its
  // rows are), to be read with ReadPieces; `runs` is then empty.
  std::vector<std::pair<uint64_t, RowPiece>> cold_extents;
  // ReadRange/ReadBatch with `stream_from`: the rows asked for of a cold layer, where they sit,
  // not read (rows.rows counts them, rows.pieces is empty); the caller streams them or reads
  // them with ReadPieces.
  std::vector<RowPiece> unread;
};

// Where a run of rows a snapshot copied sits in it (VectorStore::Repoint).
struct PlacedRun {
  uint64_t start = 0, rows = 0;
  uint64_t offset = 0;  // of the first row's bytes in the file
};

struct SessionDetail {
  VectorSessionInfo info;
  std::vector<std::pair<uint32_t, uint64_t>> layer_lengths;  // ascending by layer
  uint64_t payload_bytes = 0;                                // stored rows
  uint64_t allocated_bytes = 0;                              // chunks, incl. unused capacity
};

// A KV.PREFIX registration.
struct PrefixSpec {
  uint32_t kv_dim = 0;
  Tier tier = Tier::kFp16;
  uint32_t block_size = 0;  // 0: no BLOCKS given
  Bytes block_hashes;       // n × u64 little-endian, as registered
  std::optional<uint64_t> prefill_us;
};

// What LOOKUP needs about a prefix, read under its locks.
struct PrefixView {
  bool registered = false;
  bool key_exists = false, value_exists = false;
  uint64_t key_tokens = 0, value_tokens = 0;  // the longest layer of each session
  uint64_t bytes = 0;                         // stored rows of both sessions
  std::optional<uint64_t> prefill_us;         // from REGISTER ... PREFILL_MS
};

struct VectorStoreStats {
  uint64_t sessions = 0;
  uint64_t layers = 0;
  uint64_t tokens = 0;           // rows over all layers of all sessions
  uint64_t payload_bytes = 0;    // tokens × row bytes
  uint64_t allocated_bytes = 0;  // chunk buffers
  uint64_t overhead_bytes = 0;   // estimated bookkeeping
  uint64_t prefixes = 0;
  // The disk tier: layers whose rows are only on disk, and the bytes of those rows there.
  uint64_t cold_layers = 0;
  uint64_t cold_bytes = 0;
  uint64_t cold_reads = 0;       // reads that read at least one cold layer
  uint64_t cold_bytes_read = 0;  // bytes read from disk for them
  uint64_t promotions = 0;       // sessions read back into memory whole
};

// What turning a session cold did.
struct VectorColdOutcome {
  bool ok = false;  // false: some hot layer's rows are not durable on disk yet (nothing changed)
  bool existed = false;
  uint64_t freed = 0;  // chunk bytes dropped from memory
};

class VectorStore {
 public:
  using Hook = std::function<void()>;

  explicit VectorStore(size_t shard_count = 64);
  VectorStore(const VectorStore&) = delete;
  VectorStore& operator=(const VectorStore&) = delete;

  static std::string KeySid(std::string_view ns) { return std::string(ns) + "_pk"; }
  static std::string ValueSid(std::string_view ns) { return std::string(ns) + "_pv"; }

  // A session index never handed out before. Callers reserve it before taking any lock, so the
  // record that creates the session can carry it.
  uint64_t ReserveIndex() { return next_index_.fetch_add(1); }

  enum class CreateResult { kCreated, kExists, kLimit };
  // Creates the session unless `sid` exists; `info` (if given) receives the session's info,
  // the existing one's for kExists. `max_sessions` 0 means no limit. The hook runs only when
  // the session is created.
  CreateResult Create(std::string_view sid, uint32_t dim, Tier tier, uint64_t index,
                      uint64_t max_sessions, VectorSessionInfo* info, const Hook& under_lock = {});

  std::optional<VectorSessionInfo> Describe(std::string_view sid) const;
  std::optional<SessionDetail> Detail(std::string_view sid) const;

  // Estimated bytes a write of rows [start, start + count) may make a layer take: the chunks it
  // touches (the sparse table holds no others, however high the start) and their bookkeeping,
  // saturating. Writes are refused, before they are logged, when this passes what the process
  // may use.
  static uint64_t WriteCostEstimate(uint32_t dim, Tier tier, uint64_t start, uint64_t count);

  enum class StoreResult { kOk, kNoSession, kChanged };
  // Writes `count` encoded rows (count × row bytes of `rows`) at [start, start + count) of
  // `layer`; the layer's length becomes at least start + count, gaps read as zeros. kChanged
  // when the session no longer has `dim` and `tier` (it was dropped and created again since the
  // caller encoded the rows). The hook runs only on success.
  StoreResult Store(std::string_view sid, uint32_t layer, uint64_t start, uint64_t count,
                    const Bytes& rows, uint32_t dim, Tier tier, const Hook& under_lock = {});

  // Rows [start, end) of `layer`, zero rows past its length; nullopt without the session. The
  // rows of a cold layer that come to `stream_from` bytes or more are not read but given as
  // LayerRead::unread (counted as read: the caller sends every byte of them); the places point
  // at immutable file bytes, so reading them later still gives the layer as it was at the call.
  static constexpr uint64_t kReadAll = ~uint64_t{0};
  std::optional<std::pair<VectorSessionInfo, LayerRead>> ReadRange(
      std::string_view sid, uint32_t layer, uint64_t start, uint64_t end,
      uint64_t stream_from = kReadAll) const;
  // Whether a read's piece is a slice of the shared zeros that gaps and rows past a layer's end
  // are read from (rows wider than those zeros come as zeroed buffers of their own: false).
  static bool IsSharedZeros(const Bytes& piece);
  // ReadRange's common small case in one lookup and no allocation: rows [start, end) of a hot
  // layer that lie within the stored rows of one chunk are given to `use(info, bytes)` under the
  // session lock (`use` only copies them, e.g. into a reply, and returns false to decline).
  // kMissing: no such session. kOther: anything else (a cold or empty layer, rows past its
  // length, across chunks or in a gap, or declined), which the caller reads with ReadRange.
  enum class InPlaceRead { kCopied, kMissing, kOther };
  template <class Use>
  InPlaceRead ReadRowsInPlace(std::string_view sid, uint32_t layer, uint64_t start, uint64_t end,
                              Use&& use) const;
  // One row per id (zero rows past the length); nullopt without the session.
  std::optional<std::pair<VectorSessionInfo, LayerRead>> ReadIds(
      std::string_view sid, uint32_t layer, std::span<const uint64_t> ids) const;
  // Rows [start, end) of layers 0 .. layers-1 (default: through the highest stored layer), all
  // from one state of the session; nullopt without the session. `stream_from` as ReadRange's,
  // per layer.
  std::optional<std::pair<VectorSessionInfo, std::vector<LayerRead>>> ReadBatch(
      std::string_view sid, uint64_t start, uint64_t end, std::optional<uint32_t> layers,
      uint64_t stream_from = kReadAll) const;

  // Returns whether the session existed. The hook runs only when it did.
  bool Drop(std::string_view sid, const Hook& under_lock = {});
  // Removes every session and prefix, one shard at a time. A caller that needs the clear
  // ordered against every other change (FLUSHALL) must keep writers out itself.
  void Clear();

  enum class RegisterResult { kCreated, kExists, kLimit };
  // Registers `ns` with `spec` and creates `<ns>_pk` / `<ns>_pv` (indices `key_index` and
  // `value_index`) where missing. An existing registration keeps its parameters, and existing
  // sessions are kept as they are. kExists (no hook, no change) when the registration and both
  // sessions are already there.
  RegisterResult Register(std::string_view ns, const PrefixSpec& spec, uint64_t key_index,
                          uint64_t value_index, uint64_t max_sessions, const Hook& under_lock = {});
  // Replay of a snapshot's registration: records `ns` unless registered, creating no session.
  void RestorePrefix(std::string_view ns, const PrefixSpec& spec);
  std::optional<PrefixSpec> Prefix(std::string_view ns) const;
  PrefixView ViewPrefix(std::string_view ns) const;
  // Each probe's presence among the prefix's block hashes; nullopt when it has none.
  std::optional<std::vector<bool>> Membership(std::string_view ns,
                                              std::span<const uint64_t> probes) const;
  // Removes the registration and both sessions; returns whether anything was there. The hook
  // runs only then.
  bool DropPrefix(std::string_view ns, const Hook& under_lock = {});
  // Registered prefixes and the tokens their `_pk` sessions hold.
  std::pair<uint64_t, uint64_t> PrefixTotals() const;

  // Snapshot support: each session with its whole layers as stored runs (chunk handles copied
  // one shard at a time, visited with no lock held; a gap costs nothing), then each
  // registration.
  // With `read_cold` false, a cold layer comes as its extents (LayerRead::cold_extents), read
  // by the caller when it needs them (a snapshot writes cold sessions after the hot ones).
  void ForEachSession(const std::function<void(const std::string& sid, const VectorSessionInfo&,
                                               const std::vector<LayerRead>&)>& visit,
                      bool read_cold = true) const;
  // Reads cold rows (zero pieces as zeros); a read error throws std::runtime_error.
  RowSpan ReadPieces(const std::vector<RowPiece>& pieces, size_t row_bytes) const {
    return ReadCold(pieces, row_bytes);
  }
  void ForEachPrefix(
      const std::function<void(const std::string& ns, const PrefixSpec&)>& visit) const;
  // One session as ForEachSession gives it; nullopt when it does not exist.
  std::optional<std::pair<VectorSessionInfo, std::vector<LayerRead>>> ReadSessionRuns(
      std::string_view sid) const;

  // The disk tier (docs/cache-design.md). Every applied write is counted unplaced until its
  // record reports where its rows went in the log (Place, from the log writer or from replay);
  // a layer keeps those places as non-overlapping extents, later writes over earlier ones. A
  // session goes cold (MakeCold) only when every hot layer's rows are placed and durable; a
  // cold layer holds no chunks and is read from its extents after the lock is released (a read
  // error throws std::runtime_error). `index` names the session written (a session created
  // again gets a new one); kAnyIndex takes the current one (single-threaded replay).
  static constexpr uint64_t kAnyIndex = ~uint64_t{0};
  void Place(std::string_view sid, uint64_t index, uint32_t layer, uint64_t start, uint64_t rows,
             std::shared_ptr<const ColdFile> file, uint64_t offset);
  // A snapshot holding the layer as copied at `version` is durable: the layer's places become
  // the snapshot's runs, unless it was written since.
  void Repoint(std::string_view sid, uint64_t index, uint32_t layer, uint64_t version,
               const std::vector<PlacedRun>& runs, std::shared_ptr<const ColdFile> file);
  // Recovery of a snapshot's cold rows: records rows [start, start + rows) of `layer` as sitting
  // at `offset` in `file` without reading them. False when the session does not exist with
  // that dim and tier, or holds the layer in memory.
  bool PutColdRows(std::string_view sid, uint32_t layer, uint64_t start, uint64_t rows,
                   uint32_t dim, Tier tier, std::shared_ptr<const ColdFile> file, uint64_t offset);
  VectorColdOutcome MakeCold(std::string_view sid);
  // Bytes of `sid`'s cold layers on disk, at least 1 per cold layer (0: none, or no such
  // session).
  uint64_t ColdBytes(std::string_view sid) const;
  // Whether any layer of any session is cold: while none is, a read needs no cold-tier plan
  // (a layer that turns cold meanwhile is read back from disk whole, still correct).
  bool HasColdLayers() const { return cold_layers_.load(std::memory_order_relaxed) > 0; }
  // Reads every cold layer of `sid` back into memory. True when it now has no cold layer.
  bool Promote(std::string_view sid);

  VectorStoreStats Stats() const;

 private:
  // A session id with its hash computed once: the shard is picked from the hash's upper bits
  // and the shard's table looks it up by the same hash (one XXH3 per lookup, not two).
  struct HashedSid {
    std::string_view sid;
    size_t hash;
    friend bool operator==(const HashedSid& a, std::string_view b) { return a.sid == b; }
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const;
    size_t operator()(const HashedSid& h) const { return h.hash; }
  };
  struct Layer {
    uint64_t length = 0;
    // Sparse: chunk c holds rows [c·R, (c+1)·R); rows past its size, and chunks never written
    // with anything but zeros (absent), read as 0. Costs what was stored, not the length.
    // Empty while the layer is cold.
    std::map<uint64_t, Bytes> chunks;
    // The disk tier: where written rows sit on disk, by first row, non-overlapping.
    RowPlaces places;
    uint64_t unplaced = 0;     // applied writes whose place has not been reported yet
    uint64_t version = 0;      // applied writes
    bool unplaceable = false;  // a write's place is unknown: the layer never goes cold
    bool cold = false;         // rows are read from `places`
    uint64_t cold_bytes = 0;   // while cold: the bytes `places` name
  };
  using ColdPiece = RowPiece;
  struct Session {
    std::string sid;
    VectorSessionInfo info;
    uint64_t chunk_rows = 1;  // R
    mutable std::mutex mu;
    bool dropped = false;              // under mu
    std::map<uint32_t, Layer> layers;  // under mu; only layers ever written
    uint64_t allocated = 0;            // under mu
    uint64_t tokens = 0;               // under mu
  };
  using SessionPtr = std::shared_ptr<Session>;
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<std::string, SessionPtr, StringHash, std::equal_to<>> sessions;
  };
  struct PrefixEntry {
    PrefixSpec spec;
    std::vector<uint64_t> sorted_hashes;
  };

  static HashedSid Hash(std::string_view sid);
  size_t ShardIndex(std::string_view sid) const { return ShardOfHash(Hash(sid).hash); }
  // Upper bits pick the shard, independent of the table's bucket bits.
  size_t ShardOfHash(size_t hash) const { return (hash >> 32) % shard_count_; }
  SessionPtr Find(std::string_view sid) const;
  // Builds a session; the caller inserts it under its shard lock.
  SessionPtr NewSession(std::string_view sid, uint32_t dim, Tier tier, uint64_t index);
  void Insert(Shard& shard, SessionPtr session);
  // Marks a session dropped and forgets its figures; caller holds its shard lock.
  void Retire(Session& session);
  bool ReserveSession(uint64_t max_sessions, uint64_t count);
  // Inserts a registration; caller holds prefixes_mu_.
  void AddPrefix(std::string_view ns, const PrefixSpec& spec);
  void WriteRows(Session& s, Layer& layer, uint64_t start, uint64_t count, const uint8_t* rows);
  RowSpan Rows(const Session& s, const Layer& layer, uint64_t start, uint64_t end) const;
  std::vector<RowRun> StoredRuns(const Session& s, const Layer& layer) const;
  // Every layer of `s` as stored runs; a cold layer's places, to be read after the lock.
  struct CopiedRuns {
    std::vector<LayerRead> layers;
    // (index in layers, its extents)
    std::vector<std::pair<size_t, std::vector<std::pair<uint64_t, RowPiece>>>> cold_places;
  };
  // Caller holds s.mu.
  CopiedRuns AllRuns(const Session& s) const;
  // Reads the cold layers' runs (no lock held).
  void ReadColdRuns(CopiedRuns& copied, size_t row_bytes) const;
  static uint64_t LongestLayer(const Session& s);
  // The disk tier's helpers; callers hold s.mu where a Session or Layer is passed.
  // RowPlaces::Insert, its memory accounted.
  void InsertPlace(Layer& layer, size_t row_bytes, uint64_t start, uint64_t rows,
                   std::shared_ptr<const ColdFile> file, uint64_t offset);
  static std::vector<ColdPiece> ColdPieces(const Layer& layer, size_t row_bytes, uint64_t start,
                                           uint64_t end) {
    return layer.places.Pieces(start, end, layer.length, row_bytes);
  }
  // Reads the pieces (after the lock is released), zero pieces as shared zeros.
  RowSpan ReadCold(const std::vector<ColdPiece>& pieces, size_t row_bytes) const;
  // Rows of a cold layer read for `read`: read now, or left as read.unread when they come to
  // `stream_from` bytes or more.
  void ReadOrLeave(std::vector<ColdPiece> pieces, size_t row_bytes, uint64_t stream_from,
                   LayerRead& read) const;
  // Brings a cold layer's rows back into chunks from `span` (rows [0, length) as read).
  void Refill(Session& s, Layer& layer, const RowSpan& span);
  // Reads a cold layer under the session lock (a write to it, or a snapshot's copy) and makes
  // it hot.
  void LoadColdLayer(Session& s, Layer& layer);
  void AccountCold(const Layer& layer, int64_t sign);

  std::unique_ptr<Shard[]> shards_;
  size_t shard_count_;
  mutable std::mutex prefixes_mu_;
  std::unordered_map<std::string, PrefixEntry, StringHash, std::equal_to<>> prefixes_;

  std::atomic<uint64_t> next_index_{0};
  std::atomic<int64_t> sessions_{0};
  std::atomic<int64_t> layers_{0};
  std::atomic<int64_t> tokens_{0};
  std::atomic<int64_t> payload_bytes_{0};
  std::atomic<int64_t> allocated_bytes_{0};
  std::atomic<int64_t> overhead_bytes_{0};
  std::atomic<int64_t> cold_layers_{0};
  std::atomic<int64_t> cold_bytes_{0};
  mutable std::atomic<uint64_t> cold_reads_{0};
  mutable std::atomic<uint64_t> cold_bytes_read_{0};
  std::atomic<uint64_t> promotions_{0};
};

template <class Use>
VectorStore::InPlaceRead VectorStore::ReadRowsInPlace(std::string_view sid, uint32_t layer,
                                                      uint64_t start, uint64_t end,
                                                      Use&& use) const {
  const HashedSid hashed = Hash(sid);
  Shard& shard = shards_[ShardOfHash(hashed.hash)];
  std::unique_lock shard_lock(shard.mu);
  auto found = shard.sessions.find(hashed);
  if (found == shard.sessions.end()) return InPlaceRead::kMissing;
  const Session& s = *found->second;
  // Hand over hand, in the lock order: a Drop waits for the session lock before it retires the
  // session, so the session outlives this read without a reference taken on it.
  std::lock_guard session_lock(s.mu);
  shard_lock.unlock();
  auto it = s.layers.find(layer);
  if (it == s.layers.end() || it->second.cold || it->second.length < end || start >= end) {
    return InPlaceRead::kOther;
  }
  const uint64_t r = s.chunk_rows;
  const uint64_t base = start / r * r;
  if (end - base > r) return InPlaceRead::kOther;  // across chunks
  auto chunk = it->second.chunks.find(start / r);
  if (chunk == it->second.chunks.end()) return InPlaceRead::kOther;
  const size_t row_bytes = s.info.row_bytes;
  if ((end - base) * row_bytes > chunk->second.size()) return InPlaceRead::kOther;  // a gap
  const std::string_view rows =
      chunk->second.view().substr((start - base) * row_bytes, (end - start) * row_bytes);
  return use(s.info, rows) ? InPlaceRead::kCopied : InPlaceRead::kOther;
}

}  // namespace prefixd::store
