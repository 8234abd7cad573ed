// EvictionIndex: the exact eviction order (LRU, LFU, random, nearest expiry) and the expiry order
// of one keyspace shard's entries, with pins. One index per shard: every method must be called
// with that shard's lock held. EvictionRound picks the global victim across the shards' indexes
// and is owned by the one thread running an eviction pass. Knows no keys, values or RESP.
//
// Layout and costs (docs/cache-design.md has the reasoning):
// - An entry is a 24-byte node in chunks of 256, named by a 32-bit handle that the keyspace
//   entry stores. Per volatile entry the expiry heap adds 12 bytes; under a random policy the
//   dense candidate arrays add 4 bytes per unpinned entry. No per-key allocation.
// - LRU: one list per scope (persistent, volatile) in touch order. Touch, insert, erase and pick
//   are O(1) (a pick skips pinned entries at the head: O(1 + pinned)).
// - LFU: one list per scope and counter value (256), each in touch order. An entry's eviction
//   score is counter * decay + last access: it is constant between touches and always orders
//   entries as Redis's decayed counter (OBJECT FREQ) does, so decay needs no sweep. Touch,
//   insert and erase are O(1); a pick reads the first unpinned node of each non-empty list.
// - volatile-ttl and active expiry share one binary heap on the absolute expiry time:
//   O(log n) set/clear, O(1) peek.
// - Random: dense arrays of unpinned candidates, O(1) uniform pick.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "store/chunked_slots.h"

namespace prefixd::store {

// Redis's maxmemory-policy values, with Redis's meanings (evict.c).
enum class EvictionPolicy : uint8_t {
  kNoEviction,
  kAllKeysLru,
  kAllKeysLfu,
  kAllKeysRandom,
  kVolatileLru,
  kVolatileLfu,
  kVolatileRandom,
  kVolatileTtl,
};

// The names in the order Redis lists them when CONFIG SET rejects a value ("argument(s) must be
// one of the following: ...").
inline constexpr std::string_view kEvictionPolicyChoices =
    "volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, "
    "allkeys-random, noeviction";

// The policy named `name` (Redis's spelling, any ASCII case), or nullopt.
std::optional<EvictionPolicy> ParseEvictionPolicy(std::string_view name);
std::string_view EvictionPolicyName(EvictionPolicy policy);
// Whether the policy only evicts entries that have an expiry (Redis's volatile-*).
bool EvictsVolatileOnly(EvictionPolicy policy);
bool TracksFrequency(EvictionPolicy policy);

// Microseconds on the process's monotonic clock (0 at first call), the time base of access
// stamps. Stamps from every shard share it, so they compare across shards.
uint64_t EvictionClockMicros();

// Redis's lfu-log-factor and lfu-decay-time (minutes; 0 = never decay).
struct LfuSettings {
  uint32_t log_factor = 10;
  uint32_t decay_minutes = 1;
};

// A new entry's counter, as Redis's LFU_INIT_VAL: room for a few hits before it is a victim.
inline constexpr uint8_t kLfuInitialCount = 5;

class EvictionIndex {
 public:
  using Handle = uint32_t;

  // A candidate and its score: the lower, the sooner it goes. Scores of indexes with the same
  // policy and settings compare with each other (random victims all score 0).
  struct Victim {
    Handle handle;
    uint64_t score;
  };

  explicit EvictionIndex(EvictionPolicy policy = EvictionPolicy::kNoEviction, LfuSettings lfu = {},
                         uint64_t random_seed = 0x9e3779b97f4a7c15ull);
  EvictionIndex(const EvictionIndex&) = delete;
  EvictionIndex& operator=(const EvictionIndex&) = delete;

  // A new entry, accessed at `now_us` (EvictionClockMicros), persistent, unpinned, with the LFU
  // counter at kLfuInitialCount.
  Handle Insert(uint64_t now_us);
  // Forgets the entry, its expiry and its pins; the handle may be reused by the next Insert.
  void Erase(Handle handle);
  // An access: becomes the most recent entry and steps its LFU counter (decayed first).
  void Touch(Handle handle, uint64_t now_us);

  // Absolute expiry in Unix milliseconds. The entry joins the volatile scope without changing
  // its recency (O(1) when it was the latest touched, as after EXPIRE's lookup).
  void SetExpiry(Handle handle, int64_t at_ms);
  void ClearExpiry(Handle handle);
  std::optional<int64_t> ExpiryMs(Handle handle) const;

  // A pinned entry (being leased, not yet durable, ...) is never picked as a victim. Pins
  // count (false when 65535 pins are already held); Erase drops them, so a holder that may
  // outlive the entry keeps a value reference rather than a pin.
  [[nodiscard]] bool Pin(Handle handle);
  void Unpin(Handle handle);
  bool IsPinned(Handle handle) const;

  // The entry the policy evicts next, or nullopt (noeviction, or nothing in scope unpinned).
  // Non-const only because random policies draw from the index's generator.
  std::optional<Victim> PickVictim();
  // Active expiry: the earliest entry whose expiry is at or before `now_ms` (pinned or not),
  // or nullopt. The caller deletes it (Erase) and asks again.
  std::optional<Handle> PeekExpired(int64_t now_ms) const;
  std::optional<int64_t> NextExpiryMs() const;
  // Up to `limit` entries whose expiry is at or before `now_ms`, earliest first, as (expiry,
  // handle): the heap walked best-first, O(limit log limit).
  std::vector<std::pair<int64_t, Handle>> Expired(int64_t now_ms, size_t limit) const;
  // The sum of (expiry - now_ms) over the volatile entries that expire after `now_ms` (avg_ttl).
  uint64_t RemainingTtlSumMs(int64_t now_ms) const;

  // OBJECT IDLETIME (in microseconds) and OBJECT FREQ (Redis's decayed counter) of an entry.
  uint64_t IdleMicros(Handle handle, uint64_t now_us) const;
  uint8_t Frequency(Handle handle, uint64_t now_us) const;

  // Rebuilds the order for another policy: O(n log n), under the shard lock.
  void SetPolicy(EvictionPolicy policy);
  EvictionPolicy policy() const { return policy_; }
  // Takes effect at once, without a rebuild (the order does not depend on these).
  void SetLfuSettings(LfuSettings lfu) { lfu_ = lfu; }

  size_t size() const { return live_; }
  size_t volatile_size() const { return expiry_at_.size(); }
  // Unpinned entries in the policy's scope (the weight of this shard in a random pick).
  size_t RandomCandidates() const;
  // Bytes this index holds (nodes, heap, arrays), for used_memory.
  size_t MemoryBytes() const;

  static constexpr Handle kNoHandle = 0xffffffffu;
  // Nodes come in chunks of this many (6 KiB), handles in order from a chunk's first: a shard
  // holds at most one partly used chunk, so its slack per key stays small at any size.
  static constexpr uint32_t kChunkBits = 8;
  static constexpr uint32_t kHandlesPerChunk = 1u << kChunkBits;

 private:
  struct Node {
    uint64_t stamp : 48;  // last access, EvictionClockMicros
    uint64_t count : 8;   // LFU counter at the last access
    uint64_t live : 1;
    uint32_t prev;        // list links; under a random policy, prev is the dense-array slot
    uint32_t next;        // also the free-list link
    uint32_t expiry_pos;  // slot in the expiry heap, kNoHandle when persistent
    uint16_t pins;
    uint16_t hits;  // hits since the counter last stepped (the deterministic log counter)
  };
  static_assert(sizeof(Node) == 24, "a node is 24 bytes: keep small entries lean");

  struct List {
    uint32_t head = kNoHandle;
    uint32_t tail = kNoHandle;
  };
  enum class Order : uint8_t { kNone, kRecency, kFrequency, kRandom, kExpiry };
  static constexpr int kScopes = 2;  // 0: persistent, 1: volatile

  Node& node(Handle h) { return nodes_[h]; }
  const Node& node(Handle h) const { return nodes_[h]; }
  static int ScopeOf(const Node& n) { return n.expiry_pos == kNoHandle ? 0 : 1; }
  int Bucket(const Node& n) const { return order_ == Order::kFrequency ? int(n.count) : 0; }
  uint64_t NextStamp(uint64_t now_us);
  uint8_t DecayedCount(const Node& n, uint64_t now_us) const;
  uint64_t FrequencyScore(const Node& n) const;

  void Link(Handle h);
  void Unlink(Handle h);
  void ListInsertByStamp(List& list, Handle h);
  void ListRemove(List& list, Handle h);
  void RandomAdd(Handle h);
  void RandomRemove(Handle h);
  std::optional<Handle> FirstUnpinned(const List& list) const;

  void HeapSwap(uint32_t a, uint32_t b);
  void HeapUp(uint32_t pos);
  void HeapDown(uint32_t pos);
  void HeapRemove(uint32_t pos);
  std::optional<Handle> FirstUnpinnedByExpiry() const;

  EvictionPolicy policy_;
  Order order_;
  LfuSettings lfu_;
  uint64_t rng_state_;
  uint64_t last_stamp_ = 0;

  ChunkedSlots<Node, kChunkBits> nodes_;
  uint32_t free_head_ = kNoHandle;
  size_t live_ = 0;

  std::array<std::array<List, 256>, kScopes> lists_{};
  std::array<std::array<uint64_t, 4>, kScopes> nonempty_{};  // bitmap of non-empty buckets
  std::array<std::vector<Handle>, kScopes> random_;
  std::vector<int64_t> expiry_at_;  // min-heap on expiry time, parallel to expiry_handle_
  std::vector<Handle> expiry_handle_;
};

// One eviction pass across shards. The evictor offers each shard's candidate (PickVictim under
// that shard's lock), then repeatedly asks Best(), locks that shard, picks again and — when the
// fresh score is still no worse than every other shard's recorded one (Accepts) — evicts it and
// offers the shard's next candidate. Scores of existing entries only grow (a touch moves an
// entry later in LRU and LFU order), so a recorded score is a lower bound and the pass is exact
// for every entry that existed when it started; an entry inserted during the pass with a lower
// LFU score than recorded ones is seen by the next pass. Random policies weigh shards by their
// candidate counts, which keeps the pick uniform over all entries.
class EvictionRound {
 public:
  explicit EvictionRound(size_t shards) : scores_(shards), weights_(shards, 0) {}

  void Offer(size_t shard, std::optional<EvictionIndex::Victim> victim, size_t random_weight = 0);
  // The shard with the lowest recorded score, or nullopt when no shard has a candidate.
  std::optional<size_t> Best() const;
  // Whether `score`, just read from `shard`, is no worse than every other recorded candidate.
  bool Accepts(size_t shard, uint64_t score) const;
  // For random policies: the shard holding the `draw`-th candidate (draw is any 64-bit random
  // number), shards weighted by their offered candidate counts.
  std::optional<size_t> RandomShard(uint64_t draw) const;

 private:
  std::vector<std::optional<uint64_t>> scores_;
  std::vector<size_t> weights_;
};

}  // namespace prefixd::store
