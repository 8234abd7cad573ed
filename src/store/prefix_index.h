// PrefixIndex: one prefix-index namespace (docs/prefix-index.md): attention K/V per token block,
// shared by every sequence whose chained block hash reaches it, recurrent-state checkpoints at
// any position, the match that answers the longest length whose every layer can be restored,
// and the leases that pin an answer until it is fetched. PrefixStore: the namespaces by name.
// A PrefixIndex is not thread-safe: its owner (PrefixStore) hands it out under its own mutex.
// PrefixStore is thread-safe: any thread may call any method.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "store/prefix_index_slabs.h"
#include "store/vector_codec.h"

namespace prefixd::store {

// `count` hashes from `raw` (count × 16 bytes, checked by the caller).
std::vector<Hash128> ReadHashes(std::string_view raw);

// The model shape a namespace was created with.
struct PrefixShape {
  uint32_t block = 0;      // tokens per block
  uint32_t attn = 0;       // attention layers
  uint32_t kv_dim = 0;     // values per K (or V) row
  uint32_t recurrent = 0;  // recurrent layers a checkpoint holds
  Tier tier = Tier::kFp32;
  uint64_t max_bytes = 0;  // per-namespace budget for K/V and states (0: none)

  size_t row_bytes() const { return RowBytes(tier, kv_dim); }
  // One block's K/V for every attention layer: per layer, bs K rows then bs V rows.
  size_t page_bytes() const { return size_t{2} * block * row_bytes() * attn; }
  // The model part (everything but max_bytes) is equal.
  bool SameModel(const PrefixShape& o) const {
    return block == o.block && attn == o.attn && kv_dim == o.kv_dim && recurrent == o.recurrent &&
           tier == o.tier;
  }
  // "BLOCK 256 ATTN 6 KVDIM 512 RECURRENT 18 VQUANT fp32", as KV.PREFIX.NAMESPACE spells it.
  std::string Describe() const;
};

// Full blocks to store: `layers[l]` holds attention layer l's encoded K rows for the
// hashes.size() · bs positions, then its V rows.
struct BlockBatch {
  Hash128 parent;
  std::vector<Hash128> hashes;
  std::vector<Bytes> layers;
};

// Checkpoints at the consecutive positions first_length .. first_length + k − 1 (k =
// positions.size()), all anchored on `anchor` (the block ⌊L/bs⌋, the root when that is 0).
// `states[r]`: recurrent layer r's k blobs back to back, equal sizes. `tails[l]`: attention
// layer l's encoded K rows for the longest tail [⌊L0/bs⌋·bs, L0+k−1) then its V rows; each
// checkpoint's tail (position L: [⌊L0/bs⌋·bs, L)) is a prefix of it. Empty when that is empty.
struct CheckpointBatch {
  Hash128 anchor;
  uint64_t first_length = 0;
  std::vector<Hash128> positions;
  std::vector<Bytes> states;
  std::vector<Bytes> tails;

  // Tokens of the longest tail.
  uint64_t TailRows(uint32_t block) const;
};

struct MatchResult {
  uint64_t length = 0;          // L (0: no complete prefix)
  uint64_t lease = 0;           // 0: none
  uint64_t matched_blocks = 0;  // how deep the chain matched (statistics)
  Hash128 position;             // p(L)
  uint64_t kv_bytes = 0;        // what an ATTN fetch of every layer moves, as stored
  uint64_t state_bytes = 0;     // what a STATE fetch moves
};

struct PrefixStats {
  uint64_t blocks = 0;
  uint64_t checkpoints = 0;
  uint64_t kv_bytes = 0;     // pages and tails
  uint64_t state_bytes = 0;  // recurrent blobs (a shared window buffer counted once per slice)
  uint64_t index_bytes = 0;  // records, tables and lists: what indexing costs beyond the payload
  uint64_t leases = 0;
  uint64_t evicted_blocks = 0;
  uint64_t evicted_checkpoints = 0;
  uint64_t dropped_blocks = 0;
  uint64_t dropped_checkpoints = 0;
};

// What a lease holds: its blocks, pinned (a drop hides them from matches but keeps their K/V
// page until the lease ends), and references to the checkpoint's bytes.
struct LeaseView {
  uint64_t length = 0;
  std::vector<uint32_t> pages;  // the records of blocks 1 .. ⌊L/bs⌋ in order
  std::vector<Bytes> states;
  std::vector<Bytes> tail_k, tail_v;  // per attention layer; empty without a tail
};

class PrefixIndex {
 public:
  static constexpr uint32_t kNone = 0xffffffffu;
  static constexpr size_t kDefaultMaxLeases = 65536;

  explicit PrefixIndex(PrefixShape shape);

  const PrefixShape& shape() const { return shape_; }
  void set_max_bytes(uint64_t bytes) { shape_.max_bytes = bytes; }

  // Blocks newly stored; those already stored are skipped. Empty error on success, else why
  // nothing was stored (the parent is missing).
  std::string StoreBlocks(const BlockBatch& batch, uint64_t* stored);
  // Removes the blocks, their subtrees and every checkpoint anchored on what goes. Returns how
  // many of the listed blocks were stored.
  uint64_t DropBlocks(std::span<const Hash128> hashes, bool evicted = false);
  bool HasBlock(const Hash128& h) const { return FindBlock(h) != kNone; }
  // The stored block's depth (1 for a first block), 0 when it is not stored.
  uint64_t BlockDepth(const Hash128& h) const {
    const uint32_t id = FindBlock(h);
    return id == kNone ? 0 : Rec(id).depth;
  }

  // Stores a window of checkpoints; positions already stored are left as they are. Empty error
  // on success (the anchor is missing or at another depth otherwise).
  std::string StoreCheckpoints(const CheckpointBatch& batch, uint64_t* stored);
  uint64_t DropCheckpoints(std::span<const Hash128> positions, bool evicted = false);
  // The recurrent blobs of the checkpoint at `position`, or nullopt; touches it.
  std::optional<std::vector<Bytes>> CheckpointStates(const Hash128& position);

  // The match (docs/prefix-index.md, "The match and its lease"). `candidates`: (L, p(L)).
  // With `lease_ms` > 0 and a hit, a lease pins the answer until `now_ms + lease_ms`; nullopt
  // when `max_leases` leases are live.
  std::optional<MatchResult> Match(std::span<const Hash128> chain,
                                   std::span<const std::pair<uint64_t, Hash128>> candidates,
                                   uint64_t lease_ms, int64_t now_ms,
                                   size_t max_leases = kDefaultMaxLeases);
  // The lease's view, or nullptr when it is unknown or expired.
  const LeaseView* Lease(uint64_t id, int64_t now_ms);
  bool Release(uint64_t id);
  void ExpireLeases(int64_t now_ms);

  // K/V of `layer` for rows [start, end) of the matched prefix: K rows then V rows, stored
  // encoding. The range must lie in [0, view.length).
  Bytes GatherRows(const LeaseView& view, uint32_t layer, uint64_t start, uint64_t end) const;
  // GatherRows as references to what is stored, not a copy: the K rows of [start, end) then its V
  // rows, one piece per block touched and one for the checkpoint's tail, each unchanged whatever
  // is stored or dropped later (a slab chunk still referenced is copied before a slot of it is
  // rewritten). Joined, the pieces are GatherRows' bytes.
  std::vector<Bytes> SharedLeaseRows(const LeaseView& view, uint32_t layer, uint64_t start,
                                     uint64_t end) const;
  // K/V of `layer` for the listed blocks (K rows of all, then V rows), or nullopt when one is
  // missing.
  std::optional<Bytes> BlockRows(std::span<const Hash128> hashes, uint32_t layer) const;
  // BlockRows into `out`, which holds BlockRowsSize(hashes.size()) bytes; false when a block is
  // missing (`out` is then partly written).
  bool CopyBlockRows(std::span<const Hash128> hashes, uint32_t layer, uint8_t* out) const;
  // BlockRows as references to the stored pages, not a copy: every block's K rows, then every
  // block's V rows (2 × hashes.size() pieces), unchanged whatever is stored later (a page still
  // referenced is copied before its slot is rewritten); nullopt when a block is missing.
  std::optional<std::vector<Bytes>> SharedBlockRows(std::span<const Hash128> hashes,
                                                    uint32_t layer) const;
  size_t BlockRowsSize(size_t blocks) const {
    return 2 * blocks * static_cast<size_t>(shape_.block) * shape_.row_bytes();
  }

  // Victims that bring the payload under `target` bytes: least recently used unpinned leaves
  // (checkpoints, and blocks with no children, which take their checkpoints along), never the
  // block `keep` (the parent or anchor of the write that needs the room).
  void PlanEviction(uint64_t target, const Hash128& keep, std::vector<Hash128>* blocks,
                    std::vector<Hash128>* checkpoints) const;

  PrefixStats Stats() const;
  uint64_t payload_bytes() const { return kv_bytes_ + state_bytes_; }

  // Every block, parents before children, and every checkpoint, for snapshots.
  void ForEachBlock(const std::function<void(const BlockBatch&)>& visit) const;
  void ForEachCheckpoint(const std::function<void(const CheckpointBatch&)>& visit) const;

  // The LRU clock (32 bits a record; renumbered when it would wrap). Settable for tests of the
  // wrap.
  static constexpr uint32_t kClockLimit = 0xfffffff0u;
  void set_clock(uint32_t clock) { clock_ = clock; }

 private:
  // 48 bytes: the whole per-block index record (its K/V page is the page slab's slot of the
  // same id).
  struct Block {
    Hash128 hash;
    uint32_t parent = kNone;  // kNone: the root
    uint32_t depth = 0;       // 1 for the first block
    // Intrusive lists (record ids): the children, and the checkpoints anchored here (the one at
    // exactly this block's end first, when `boundary`).
    uint32_t first_child = kNone, prev_sibling = kNone, next_sibling = kNone;
    uint32_t first_anchored = kNone;
    uint32_t last_use = 0;
    uint32_t pins : 30 = 0;  // leases whose chain holds this block
    uint32_t live : 1 = 0;
    uint32_t boundary : 1 = 0;
  };
  static_assert(sizeof(Block) == 48);
  struct Checkpoint {
    Hash128 position;
    uint64_t length = 0;
    uint32_t anchor = kNone;  // kNone: the root
    uint32_t pins = 0;
    bool live = false;
    uint32_t last_use = 0;
    uint32_t prev_anchored = kNone, next_anchored = kNone;  // in the anchor's list
    std::vector<Bytes> states;
    std::vector<Bytes> tail_k, tail_v;
  };
  struct LeaseEntry {
    LeaseView view;
    uint32_t checkpoint = kNone;
    int64_t expires_ms = 0;
  };

  Block& Rec(uint32_t id) { return *reinterpret_cast<Block*>(records_.Mutable(id)); }
  const Block& Rec(uint32_t id) const { return *reinterpret_cast<const Block*>(records_.Data(id)); }
  // The ids of `hashes`' blocks into `ids`; false at the first one not stored.
  bool FindBlocks(std::span<const Hash128> hashes, std::span<uint32_t> ids) const;
  // Layer `layer`'s K rows of blocks `ids`, then their V rows, into `out`.
  void CopyRows(std::span<const uint32_t> ids, uint32_t layer, uint8_t* out) const;
  // The runs GatherRows joins, in its order: `run(half, page, offset, length)` for each, `half`
  // 0 for K rows and 1 for V rows, `page` the record id whose page holds the run (kNone: the
  // checkpoint's tail), `offset` and `length` in bytes within that page or tail.
  template <typename Run>
  void ForEachLeaseRun(const LeaseView& view, uint32_t layer, uint64_t start, uint64_t end,
                       Run&& run) const;
  uint32_t FindBlock(const Hash128& h) const;
  uint32_t FindCheckpoint(const Hash128& h) const;
  uint32_t Tick();
  void RenumberClock();
  // A record id for a new block, and whether its slot held an earlier block.
  uint32_t NewBlock(bool* reused);
  uint32_t NewCheckpoint();
  void RemoveBlockTree(uint32_t id, bool evicted);
  void RemoveCheckpoint(uint32_t id, bool evicted);
  void FreeBlock(uint32_t id);
  void FreeCheckpoint(uint32_t id);
  // Once nothing is stored or pinned, the slabs and tables go back whole.
  void ReleaseIfEmpty();
  uint32_t& FirstAnchored(uint32_t anchor) {
    return anchor == kNone ? root_anchored_ : Rec(anchor).first_anchored;
  }
  uint32_t& FirstChild(uint32_t parent) {
    return parent == kNone ? root_children_ : Rec(parent).first_child;
  }
  void LinkChild(uint32_t parent, uint32_t id);
  void UnlinkChild(uint32_t id);
  void LinkAnchored(uint32_t anchor, uint32_t id, bool boundary);
  void UnlinkAnchored(uint32_t id);
  uint64_t CheckpointBytes(const Checkpoint& c) const;
  void EndLease(std::map<uint64_t, LeaseEntry>::iterator it);

  PrefixShape shape_;
  HashSlots blocks_;       // block hash → record id
  HashSlots checkpoints_;  // p(L) → checkpoint id
  Slab records_;           // Block records
  Slab pages_;             // K/V pages, one per record id
  std::vector<Checkpoint> ckpt_rec_;
  std::vector<uint32_t> free_blocks_, free_ckpts_;
  uint32_t root_children_ = kNone;  // first blocks (depth 1)
  uint32_t root_anchored_ = kNone;  // checkpoints before the first block boundary
  std::map<uint64_t, LeaseEntry> leases_;
  std::set<std::pair<int64_t, uint64_t>> lease_expiry_;  // (expires_ms, id)
  uint64_t next_lease_ = 1;
  uint64_t lease_pages_ = 0;  // page ids the live leases hold
  uint32_t clock_ = 0;        // LRU order: bumped by every store, match and fetch
  uint64_t kv_bytes_ = 0, state_bytes_ = 0;
  uint64_t checkpoint_handles_ = 0;  // Bytes handles the live checkpoints hold
  uint64_t evicted_blocks_ = 0, evicted_ckpts_ = 0, dropped_blocks_ = 0, dropped_ckpts_ = 0;
};

// The namespaces. `under_lock` hooks run under the namespace's lock (the log append), so log
// order is the order of changes.
class PrefixStore {
 public:
  enum class CreateResult { kCreated, kExists, kOtherShape };

  CreateResult Create(const std::string& ns, const PrefixShape& shape, PrefixShape* existing,
                      const std::function<void()>& under_lock);
  bool Drop(const std::string& ns, const std::function<void()>& under_lock);
  void Clear();
  bool Contains(std::string_view ns) const;
  std::optional<PrefixShape> Shape(std::string_view ns) const;

  // Runs `fn` on the namespace under its lock; false when it does not exist.
  bool With(std::string_view ns, const std::function<void(PrefixIndex&)>& fn);
  bool With(std::string_view ns, const std::function<void(const PrefixIndex&)>& fn) const;

  // With's read for a hot path: `read` is called inline (no std::function), and the namespace
  // is found once.
  template <class Reader>
  bool Read(std::string_view ns, Reader&& read) const {
    auto entry = Find(ns);
    if (!entry) return false;
    std::lock_guard lock(entry->mu);
    read(std::as_const(entry->index));
    return true;
  }

  void ForEach(const std::function<void(const std::string&, const PrefixIndex&)>& visit) const;
  // Payload and index bytes of every namespace (used_memory): kept up to date by every change,
  // so reading it costs nothing.
  uint64_t MemoryBytes() const { return static_cast<uint64_t>(std::max<int64_t>(0, bytes_)); }

 private:
  struct Entry {
    mutable std::mutex mu;
    PrefixIndex index;
    explicit Entry(PrefixShape s) : index(s) {}
  };
  std::shared_ptr<Entry> Find(std::string_view ns) const;

  // A namespace's payload and index bytes, for MemoryBytes.
  static int64_t BytesOf(const std::string_view ns, const PrefixIndex& index);

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>, std::less<>> namespaces_;
  std::atomic<int64_t> bytes_{0};  // sum of BytesOf over the namespaces
};

}  // namespace prefixd::store
