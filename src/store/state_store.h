// StateStore: the sharded keyspace of recurrent-state blobs, keyed by (session id, layer).
// Every layer of a session lives in one shard, so multi-layer stores and fetches are atomic under
// that shard's lock. A layer is hot (its bytes in memory) or cold (only a reference to its bytes
// in a log or snapshot file, the disk tier: docs/cache-design.md); a cold layer is read with a
// positional read after the lock is released. Thread-safe: any io thread may call any method;
// locks are held only to swap or copy a handle, never across I/O. Knows no RESP.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "store/cold_file.h"
#include "store/small_chunks.h"

namespace prefixd::store {

struct LayerSize {
  uint32_t layer;
  uint64_t size;
};

struct StoreStats {
  uint64_t sessions = 0;
  uint64_t entries = 0;
  uint64_t payload_bytes = 0;
  // Estimated bookkeeping bytes beyond the payload (keys, map nodes, buffer padding).
  uint64_t overhead_bytes = 0;
  // The disk tier: layers whose bytes are only on disk, and those bytes.
  uint64_t cold_layers = 0;
  uint64_t cold_bytes = 0;
  uint64_t cold_reads = 0;       // fetches that read at least one cold layer
  uint64_t cold_bytes_read = 0;  // bytes read from disk for them
  uint64_t promotions = 0;       // sessions read back into memory whole
  // Of `payload_bytes`, what compact sessions hold: their keyspace entries' memory counts it.
  uint64_t compact_bytes = 0;
};

// One layer as a snapshot sees it: its bytes in memory, or where they sit on disk.
struct LayerPlace {
  uint32_t layer = 0;
  Bytes value;                           // empty when cold
  std::shared_ptr<const ColdFile> file;  // set when the bytes are on disk
  uint64_t offset = 0;                   // of the value bytes in `file`
  uint64_t length = 0;
  bool cold = false;
};

// A layer as a fetch serves it: its bytes (in memory, or read from disk), or, for a cold value
// the caller streams, where they sit (`extent.file` set, `value` empty).
struct FetchedLayer {
  Bytes value;
  ColdExtent extent;
  bool streamed() const { return extent.file != nullptr; }
  uint64_t size() const { return streamed() ? extent.length : value.size(); }
};

// What turning a session cold did.
struct ColdOutcome {
  bool ok = false;  // false: some hot layer is not durable on disk yet (nothing changed)
  bool existed = false;
  uint64_t freed = 0;  // payload bytes dropped from memory
};

class Keyspace;

class StateStore {
 public:
  explicit StateStore(size_t shard_count = 64);
  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  // `under_lock`, when given, runs while the change is applied under the shard lock: the
  // durability log appends its record there, so log order matches the order of changes.
  using Hook = std::function<void()>;

  // Small sessions (store/compact_session.h) live from now on in their keys' entries in `keys`,
  // the directory of the database this store belongs to; every method below finds them there
  // (docs/cache-design.md, "Small SSM sessions in their keyspace entry"). A session moves here
  // when a write makes it too large, and stays. Call once, before any other call. Without it
  // (a store of its own, as the unit tests make) every session lives here.
  void KeepSmallSessionsIn(Keyspace* keys) { keys_ = keys; }
  // A compact session of `sid` moves here (a KV.PREFIX registration takes its name: its state
  // is kept with the registration's parts). Nothing is logged: replay makes the same move.
  void Uncompact(std::string_view sid);

  void Put(std::string_view sid, uint32_t layer, Bytes value, const Hook& under_lock = {});
  // All layers become visible at once: a concurrent GetMany sees all of them or none.
  void PutMany(std::string_view sid, std::vector<std::pair<uint32_t, Bytes>> layers,
               const Hook& under_lock = {});

  // Cold layers are read from disk after the lock is released; a failed read throws
  // std::runtime_error (the handler's exception boundary answers -ERR).
  std::optional<Bytes> Get(std::string_view sid, uint32_t layer) const;
  // `length` bytes from `offset` (clamped to the value): a cold layer reads only those bytes.
  std::optional<Bytes> GetRange(std::string_view sid, uint32_t layer, uint64_t offset,
                                uint64_t length) const;
  // A consistent snapshot of the requested layers (one shard lock for all of them).
  std::vector<std::optional<Bytes>> GetMany(std::string_view sid,
                                            std::span<const uint32_t> layers) const;
  static constexpr uint64_t kNeverStreamed = std::numeric_limits<uint64_t>::max();
  // GetRange and GetMany for a reply that streams large cold values: a cold value (or range) of
  // `stream_from` bytes or more is not read but given as its extent (counted as read: the caller
  // reads every byte of it); the rest as GetRange/GetMany give them. The extents point at
  // immutable file bytes, so reading them later still gives the session as it was at the call.
  std::optional<FetchedLayer> FetchRange(std::string_view sid, uint32_t layer, uint64_t offset,
                                         uint64_t length, uint64_t stream_from) const;
  std::vector<std::optional<FetchedLayer>> FetchMany(std::string_view sid,
                                                     std::span<const uint32_t> layers,
                                                     uint64_t stream_from) const;

  // The disk tier. Place records where a hot value's bytes sit on disk, if the layer still
  // holds the buffer at `data` (a later write replaced it otherwise). Repoint moves a
  // layer's place from (`old_file`, `old_offset`) to a new one (compaction): a hot layer keeps
  // its bytes, a cold one is read from there from then on.
  void Place(std::string_view sid, uint32_t layer, const uint8_t* data,
             std::shared_ptr<const ColdFile> file, uint64_t offset);
  void Repoint(std::string_view sid, uint32_t layer, const ColdFile* old_file, uint64_t old_offset,
               std::shared_ptr<const ColdFile> file, uint64_t offset);
  // Records a cold layer outright (recovery of an entry that stays on disk).
  void PutCold(std::string_view sid, uint32_t layer, uint64_t length,
               std::shared_ptr<const ColdFile> file, uint64_t offset, const Hook& under_lock = {});
  // Drops the in-memory bytes of every layer of `sid`, keeping their disk references, when all
  // of them are durable on disk; otherwise changes nothing. `keep_unplaced_small`: a small value
  // (kInlineValueMax at most) the log never placed stays in memory instead of holding the rest
  // back — the layers a compact session brought here when it grew were logged by records that
  // named no place, and only the next snapshot places them.
  ColdOutcome MakeCold(std::string_view sid, bool keep_unplaced_small = false);
  // Payload bytes of `sid`'s cold layers (0: none, or no such session).
  uint64_t ColdBytes(std::string_view sid) const;
  // Reads every cold layer of `sid` back into memory (layers changed meanwhile are left as they
  // are). True when the session now has no cold layer.
  bool Promote(std::string_view sid);

  // Return the number of entries removed. The hook runs even when nothing was there, so the
  // log records the request as the client made it.
  size_t Drop(std::string_view sid, uint32_t layer, const Hook& under_lock = {});
  size_t DropSession(std::string_view sid, const Hook& under_lock = {});
  // Clears one shard at a time. A caller that needs the clear ordered against every other
  // change (FLUSHALL and its log record) must keep writers out itself.
  void Clear();

  // Calls `visit` for each session with handles to its layers, copied one shard at a time under
  // that shard's lock and visited after it is released (snapshots hold no lock while writing).
  // Compact sessions come first; one that moves here meanwhile may be visited twice (a
  // snapshot's later record of it holds every layer the earlier one did, or their replay does).
  void ForEachSession(
      const std::function<void(const std::string& sid,
                               const std::vector<std::pair<uint32_t, Bytes>>& layers)>& visit)
      const;

  // Like ForEachSession, but cold layers are given as their disk references, not read.
  void ForEachSessionPlace(
      const std::function<void(const std::string& sid, const std::vector<LayerPlace>& layers)>&
          visit) const;

  // One session's layers as ForEachSession gives them (cold ones read from disk; a failed read
  // throws std::runtime_error), from one state of the session; nullopt when it does not exist.
  std::optional<std::vector<std::pair<uint32_t, Bytes>>> ReadSession(std::string_view sid) const;

  std::vector<LayerSize> Layers(std::string_view sid) const;
  // Whether this store holds a session of `sid` (a compact one is the keyspace's: Keyspace::Sync
  // asks this under the key's shard lock).
  bool Contains(std::string_view sid) const;
  // Payload plus bookkeeping bytes of one session (MEMORY USAGE); 0 when it does not exist or is
  // compact (its keyspace entry holds it: Keyspace::EntryMemory counts it).
  uint64_t SessionBytes(std::string_view sid) const;
  StoreStats Stats() const;

  // Values of at most this many bytes are copied into their session's chunk (a fetch copies them
  // out again, as the string keyspace does); larger ones keep their shared buffer, so a fetch of a
  // large layer never copies it.
  static constexpr size_t kInlineValueMax = 128;

 private:
  // One session in one malloc chunk: chain link, the sid, a slot per layer sorted by layer
  // number, then the large values' buffer handles and the small values' bytes (state_store.cc).
  struct Session;
  struct Slot;
  // What a rebuilt chunk holds for one layer.
  struct Draft;
  // Handles dropped under a shard lock, freed after it is released: freeing a large buffer or
  // closing a file takes time.
  struct Released {
    std::vector<Bytes> values;
    std::vector<std::shared_ptr<const ColdFile>> files;
  };
  // A file that holds some layer's bytes; a layer names it by its index in the shard's table
  // (plus one), in 16 bits of an 8-byte place instead of a 16-byte shared_ptr.
  struct FileRef {
    std::shared_ptr<const ColdFile> file;
    uint64_t layers = 0;  // layers placed in it
  };
  struct Shard {
    mutable std::mutex mu;
    SmallChunks chunks;             // the sessions' chunks up to its kLargest
    std::vector<Session*> buckets;  // chained, a power of two, at most one session per bucket
    size_t sessions = 0;
    std::vector<FileRef> files;
    size_t last_file = 0;  // the table index the last place named (most name the log's tail)
  };
  // A session's share of the memory counters.
  struct Cost {
    int64_t sessions = 0, entries = 0, payload = 0, overhead = 0, cold_layers = 0, cold_bytes = 0;
  };
  // A layer's value or, when cold, what to read; resolved after the lock is released.
  struct Pending {
    Bytes value;
    std::shared_ptr<const ColdFile> file;
    uint64_t offset = 0, length = 0;
    bool cold = false;
  };
  struct Located {
    Shard& shard;
    uint64_t hash;
  };

  // The public methods' work on the sessions this store holds (the compact ones aside).
  void PutManyHere(std::string_view sid, std::vector<std::pair<uint32_t, Bytes>> layers,
                   const Hook& under_lock);
  size_t DropHere(std::string_view sid, uint32_t layer, const Hook& under_lock);
  size_t DropSessionHere(std::string_view sid, const Hook& under_lock);
  std::optional<FetchedLayer> FetchRangeHere(std::string_view sid, uint32_t layer, uint64_t offset,
                                             uint64_t length, uint64_t stream_from) const;
  std::vector<std::optional<FetchedLayer>> FetchManyHere(std::string_view sid,
                                                         std::span<const uint32_t> layers,
                                                         uint64_t stream_from) const;
  // Calls `read` with `sid`'s compact session when it has one (then true).
  bool ReadCompact(std::string_view sid, const std::function<void(std::string_view)>& read) const;

  Located Locate(std::string_view sid) const;
  static Session* FindSession(const Shard& shard, uint64_t hash, std::string_view sid);
  // The link to `sid`'s session, or the null link where it would be; the caller holds the lock.
  static Session** LinkOf(Shard& shard, uint64_t hash, std::string_view sid);
  // Links a session not in the table (LinkOf made the bucket array).
  static void LinkNew(Shard& shard, uint64_t hash, Session* session);
  static void Rehash(Shard& shard, size_t buckets);
  // Unlinks the session at `link` and frees it, its places released from the file table.
  void Erase(Shard& shard, Session** link, Released& released);
  // Puts `fresh` where `*link` was and frees the old chunk (its places carried over by `fresh`).
  void Replace(Shard& shard, Session** link, Session* fresh, Released& released);
  static Session* Build(SmallChunks& chunks, std::string_view sid, std::vector<Draft>& drafts);
  // Sets `draft`'s layer in the sorted `drafts`, releasing the place of the draft it replaces.
  static void SetDraft(Shard& shard, std::vector<Draft>& drafts, Draft draft, Released& released);
  // Builds `drafts` into a chunk and puts it where `*link` is: a new session when `session` is
  // null, in place of `session` otherwise.
  void Install(Shard& shard, uint64_t hash, Session** link, const Session* session,
               std::string_view sid, std::vector<Draft>& drafts, Released& released);
  static std::vector<Draft> Drafts(const Session& session);
  static void Destroy(Session* session, Released& released);

  static uint32_t AcquireFile(Shard& shard, const std::shared_ptr<const ColdFile>& file);
  static void ReleaseFile(Shard& shard, uint32_t index, Released& released);
  static void ReleasePlaces(Shard& shard, const Session& session, Released& released);
  static const std::shared_ptr<const ColdFile>& FileOf(const Shard& shard, uint64_t place);

  static Cost CostOf(const Session& session);
  static Cost CostOf(const Slot& slot, const Session& session);
  void Charge(const Cost& cost, int64_t sign);

  static Pending PendingOf(const Shard& shard, const Session& session, const Slot& slot);
  // The snapshot's view of a session; `retag`: a small unplaced value is named, for Place, by
  // the copy handed out (the snapshot places it by that copy once it is durable).
  static std::vector<LayerPlace> PlacesOf(const Shard& shard, Session& session, bool retag);
  void ForEachPlace(bool retag,
                    const std::function<void(const std::string& sid,
                                             const std::vector<LayerPlace>& layers)>& visit) const;
  std::vector<std::pair<uint32_t, Bytes>> Resolved(const std::vector<LayerPlace>& places) const;
  Bytes Resolve(const Pending& p, uint64_t from, uint64_t length) const;
  // Resolve, or the extent to stream when the (clamped) range is `stream_from` bytes or more.
  FetchedLayer ResolveOrStream(const Pending& p, uint64_t from, uint64_t length,
                               uint64_t stream_from) const;

  Keyspace* keys_ = nullptr;  // where compact sessions live (KeepSmallSessionsIn)
  std::unique_ptr<Shard[]> shards_;
  size_t shard_count_;
  std::atomic<int64_t> sessions_{0};
  std::atomic<int64_t> entries_{0};
  std::atomic<int64_t> payload_bytes_{0};
  std::atomic<int64_t> overhead_bytes_{0};
  std::atomic<int64_t> cold_layers_{0};
  std::atomic<int64_t> cold_bytes_{0};
  mutable std::atomic<uint64_t> cold_reads_{0};
  mutable std::atomic<uint64_t> cold_bytes_read_{0};
  std::atomic<uint64_t> promotions_{0};
};

}  // namespace prefixd::store
