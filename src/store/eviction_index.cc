#include "store/eviction_index.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <queue>

#include "common/ascii.h"
#include "common/clock.h"

namespace prefixd::store {
namespace {

struct PolicyName {
  EvictionPolicy policy;
  std::string_view name;
};
constexpr PolicyName kPolicyNames[] = {
    {EvictionPolicy::kNoEviction, "noeviction"},
    {EvictionPolicy::kAllKeysLru, "allkeys-lru"},
    {EvictionPolicy::kAllKeysLfu, "allkeys-lfu"},
    {EvictionPolicy::kAllKeysRandom, "allkeys-random"},
    {EvictionPolicy::kVolatileLru, "volatile-lru"},
    {EvictionPolicy::kVolatileLfu, "volatile-lfu"},
    {EvictionPolicy::kVolatileRandom, "volatile-random"},
    {EvictionPolicy::kVolatileTtl, "volatile-ttl"},
};

constexpr uint64_t kStampMax = (uint64_t{1} << 48) - 1;
constexpr uint64_t kMicrosPerMinute = 60'000'000;

uint64_t NextRandom(uint64_t& state) {  // splitmix64
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

std::optional<EvictionPolicy> ParseEvictionPolicy(std::string_view name) {
  for (const auto& entry : kPolicyNames) {
    if (EqualsIgnoreCase(entry.name, name)) return entry.policy;
  }
  return std::nullopt;
}

std::string_view EvictionPolicyName(EvictionPolicy policy) {
  for (const auto& entry : kPolicyNames) {
    if (entry.policy == policy) return entry.name;
  }
  return "noeviction";
}

bool EvictsVolatileOnly(EvictionPolicy policy) {
  return policy == EvictionPolicy::kVolatileLru || policy == EvictionPolicy::kVolatileLfu ||
         policy == EvictionPolicy::kVolatileRandom || policy == EvictionPolicy::kVolatileTtl;
}

bool TracksFrequency(EvictionPolicy policy) {
  return policy == EvictionPolicy::kAllKeysLfu || policy == EvictionPolicy::kVolatileLfu;
}

uint64_t EvictionClockMicros() {
  static const auto start = std::chrono::steady_clock::now();
  // A command may have started before the first call fixed `start`.
  const auto now = std::max(CommandClock::Now(), start);
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(now - start).count());
}

EvictionIndex::EvictionIndex(EvictionPolicy policy, LfuSettings lfu, uint64_t random_seed)
    : policy_(EvictionPolicy::kNoEviction),
      order_(Order::kNone),
      lfu_(lfu),
      rng_state_(random_seed) {
  SetPolicy(policy);
}

// ---- entries -----------------------------------------------------------------------------

uint64_t EvictionIndex::NextStamp(uint64_t now_us) {
  // Stamps never go back within an index, so each list stays sorted by stamp even when two
  // threads read the clock in one order and take the shard lock in the other.
  last_stamp_ = std::max(std::min(now_us, kStampMax), last_stamp_);
  return last_stamp_;
}

EvictionIndex::Handle EvictionIndex::Insert(uint64_t now_us) {
  if (free_head_ == kNoHandle) {
    constexpr uint32_t kChunk = kHandlesPerChunk;
    const auto first = static_cast<uint32_t>(nodes_.size());
    if (first > kNoHandle - 2 * kChunk) std::abort();  // 4 billion entries in one shard
    nodes_.Grow();
    for (uint32_t i = kChunk; i-- > 0;) {
      Node& n = nodes_[first + i];
      n.live = 0;
      n.next = free_head_;
      free_head_ = first + i;
    }
  }
  const Handle h = free_head_;
  Node& n = node(h);
  free_head_ = n.next;
  n.stamp = NextStamp(now_us);
  n.count = kLfuInitialCount;
  n.live = 1;
  n.prev = n.next = kNoHandle;
  n.expiry_pos = kNoHandle;
  n.pins = 0;
  n.hits = 0;
  ++live_;
  Link(h);
  return h;
}

void EvictionIndex::Erase(Handle h) {
  Node& n = node(h);
  Unlink(h);
  if (n.expiry_pos != kNoHandle) HeapRemove(n.expiry_pos);
  n.live = 0;
  n.next = free_head_;
  free_head_ = h;
  --live_;
}

uint8_t EvictionIndex::DecayedCount(const Node& n, uint64_t now_us) const {
  // Redis's LFUDecrAndReturn: one step down per whole decay period since the last access,
  // periods counted on minute boundaries.
  if (lfu_.decay_minutes == 0) return static_cast<uint8_t>(n.count);
  const uint64_t now_min = std::max(now_us, uint64_t{n.stamp}) / kMicrosPerMinute;
  const uint64_t periods = (now_min - n.stamp / kMicrosPerMinute) / lfu_.decay_minutes;
  return periods >= n.count ? 0 : static_cast<uint8_t>(n.count - periods);
}

void EvictionIndex::Touch(Handle h, uint64_t now_us) {
  const bool ordered = order_ == Order::kRecency || order_ == Order::kFrequency;
  if (ordered) Unlink(h);
  Node& n = node(h);
  const uint8_t decayed = DecayedCount(n, now_us);
  if (decayed != n.count) n.hits = 0;
  n.count = decayed;
  // The deterministic form of Redis's LFULogIncr: where Redis steps with probability
  // 1 / ((count - LFU_INIT_VAL) * log_factor + 1), this steps after exactly that many hits, so
  // the counter follows Redis's expected curve without randomness.
  if (n.count < 255) {
    const uint64_t base = n.count > kLfuInitialCount ? n.count - kLfuInitialCount : 0;
    const uint64_t needed = std::min<uint64_t>(base * lfu_.log_factor + 1, UINT16_MAX);
    if (++n.hits >= needed) {
      n.count = n.count + 1;
      n.hits = 0;
    }
  }
  n.stamp = NextStamp(now_us);
  if (ordered) Link(h);
}

void EvictionIndex::SetExpiry(Handle h, int64_t at_ms) {
  Node& n = node(h);
  if (n.expiry_pos != kNoHandle) {
    const uint32_t pos = n.expiry_pos;
    expiry_at_[pos] = at_ms;
    HeapUp(pos);
    HeapDown(n.expiry_pos);
    return;
  }
  Unlink(h);  // leaves the persistent scope
  n.expiry_pos = static_cast<uint32_t>(expiry_at_.size());
  expiry_at_.push_back(at_ms);
  expiry_handle_.push_back(h);
  HeapUp(n.expiry_pos);
  Link(h);
}

void EvictionIndex::ClearExpiry(Handle h) {
  Node& n = node(h);
  if (n.expiry_pos == kNoHandle) return;
  Unlink(h);
  HeapRemove(n.expiry_pos);
  Link(h);
}

std::optional<int64_t> EvictionIndex::ExpiryMs(Handle h) const {
  const Node& n = node(h);
  if (n.expiry_pos == kNoHandle) return std::nullopt;
  return expiry_at_[n.expiry_pos];
}

bool EvictionIndex::Pin(Handle h) {
  Node& n = node(h);
  if (n.pins == UINT16_MAX) return false;
  if (n.pins++ == 0 && order_ == Order::kRandom) RandomRemove(h);
  return true;
}

void EvictionIndex::Unpin(Handle h) {
  Node& n = node(h);
  if (n.pins == 0) return;
  if (--n.pins == 0 && order_ == Order::kRandom) RandomAdd(h);
}

bool EvictionIndex::IsPinned(Handle h) const { return node(h).pins != 0; }

uint64_t EvictionIndex::IdleMicros(Handle h, uint64_t now_us) const {
  const uint64_t stamp = node(h).stamp;
  return now_us > stamp ? now_us - stamp : 0;
}

uint8_t EvictionIndex::Frequency(Handle h, uint64_t now_us) const {
  return DecayedCount(node(h), now_us);
}

// ---- order ---------------------------------------------------------------------------------

void EvictionIndex::Link(Handle h) {
  Node& n = node(h);
  switch (order_) {
    case Order::kRecency:
    case Order::kFrequency: {
      const int scope = ScopeOf(n), bucket = Bucket(n);
      ListInsertByStamp(lists_[scope][bucket], h);
      nonempty_[scope][bucket / 64] |= uint64_t{1} << (bucket % 64);
      break;
    }
    case Order::kRandom:
      if (n.pins == 0) RandomAdd(h);
      break;
    case Order::kNone:
    case Order::kExpiry:
      break;
  }
}

void EvictionIndex::Unlink(Handle h) {
  Node& n = node(h);
  switch (order_) {
    case Order::kRecency:
    case Order::kFrequency: {
      const int scope = ScopeOf(n), bucket = Bucket(n);
      List& list = lists_[scope][bucket];
      ListRemove(list, h);
      if (list.head == kNoHandle) nonempty_[scope][bucket / 64] &= ~(uint64_t{1} << (bucket % 64));
      break;
    }
    case Order::kRandom:
      if (n.pins == 0) RandomRemove(h);
      break;
    case Order::kNone:
    case Order::kExpiry:
      break;
  }
}

void EvictionIndex::ListInsertByStamp(List& list, Handle h) {
  Node& n = node(h);
  // Walk back from the newest: a touched entry is the newest, so this is O(1) on every path
  // but SetExpiry/ClearExpiry of an entry that others were touched after.
  uint32_t after = list.tail;
  while (after != kNoHandle && node(after).stamp > n.stamp) after = node(after).prev;
  n.prev = after;
  n.next = after == kNoHandle ? list.head : node(after).next;
  if (n.prev == kNoHandle) {
    list.head = h;
  } else {
    node(n.prev).next = h;
  }
  if (n.next == kNoHandle) {
    list.tail = h;
  } else {
    node(n.next).prev = h;
  }
}

void EvictionIndex::ListRemove(List& list, Handle h) {
  Node& n = node(h);
  if (n.prev == kNoHandle) {
    list.head = n.next;
  } else {
    node(n.prev).next = n.next;
  }
  if (n.next == kNoHandle) {
    list.tail = n.prev;
  } else {
    node(n.next).prev = n.prev;
  }
  n.prev = n.next = kNoHandle;
}

void EvictionIndex::RandomAdd(Handle h) {
  Node& n = node(h);
  auto& dense = random_[ScopeOf(n)];
  n.prev = static_cast<uint32_t>(dense.size());
  dense.push_back(h);
}

void EvictionIndex::RandomRemove(Handle h) {
  Node& n = node(h);
  auto& dense = random_[ScopeOf(n)];
  const Handle moved = dense.back();
  dense[n.prev] = moved;
  node(moved).prev = n.prev;
  dense.pop_back();
  n.prev = kNoHandle;
}

std::optional<EvictionIndex::Handle> EvictionIndex::FirstUnpinned(const List& list) const {
  for (uint32_t h = list.head; h != kNoHandle; h = node(h).next) {
    if (node(h).pins == 0) return h;
  }
  return std::nullopt;
}

uint64_t EvictionIndex::FrequencyScore(const Node& n) const {
  // counter * decay + last access orders entries exactly as their decayed counters at any
  // later instant (ties broken by recency). Without decay, or with a decay longer than the
  // stamp range, it is (counter, last access) in lexicographic order.
  const uint64_t decay_us = uint64_t{lfu_.decay_minutes} * kMicrosPerMinute;
  const uint64_t weight = decay_us == 0 || decay_us > kStampMax ? kStampMax + 1 : decay_us;
  return uint64_t{n.count} * weight + n.stamp;
}

std::optional<EvictionIndex::Victim> EvictionIndex::PickVictim() {
  const int first_scope = EvictsVolatileOnly(policy_) ? 1 : 0;
  std::optional<Victim> best;
  auto consider = [&](Handle h, uint64_t score) {
    if (!best || score < best->score) best = Victim{h, score};
  };
  switch (order_) {
    case Order::kNone:
      return std::nullopt;
    case Order::kRecency:
      for (int scope = first_scope; scope < kScopes; ++scope) {
        if (auto h = FirstUnpinned(lists_[scope][0])) consider(*h, node(*h).stamp);
      }
      return best;
    case Order::kFrequency:
      for (int scope = first_scope; scope < kScopes; ++scope) {
        for (int word = 0; word < 4; ++word) {
          for (uint64_t bits = nonempty_[scope][word]; bits != 0; bits &= bits - 1) {
            const int bucket = word * 64 + __builtin_ctzll(bits);
            if (auto h = FirstUnpinned(lists_[scope][bucket])) {
              consider(*h, FrequencyScore(node(*h)));
            }
          }
        }
      }
      return best;
    case Order::kRandom: {
      size_t total = 0;
      for (int scope = first_scope; scope < kScopes; ++scope) total += random_[scope].size();
      if (total == 0) return std::nullopt;
      size_t pick = NextRandom(rng_state_) % total;
      for (int scope = first_scope; scope < kScopes; ++scope) {
        if (pick < random_[scope].size()) return Victim{random_[scope][pick], 0};
        pick -= random_[scope].size();
      }
      return std::nullopt;
    }
    case Order::kExpiry:
      if (auto h = FirstUnpinnedByExpiry()) {
        const int64_t at = expiry_at_[node(*h).expiry_pos];
        return Victim{*h, static_cast<uint64_t>(std::max<int64_t>(at, 0))};
      }
      return std::nullopt;
  }
  return std::nullopt;
}

size_t EvictionIndex::RandomCandidates() const {
  if (order_ != Order::kRandom) return 0;
  return (EvictsVolatileOnly(policy_) ? 0 : random_[0].size()) + random_[1].size();
}

void EvictionIndex::SetPolicy(EvictionPolicy policy) {
  auto order_of = [](EvictionPolicy p) {
    switch (p) {
      case EvictionPolicy::kNoEviction:
        return Order::kNone;
      case EvictionPolicy::kAllKeysLru:
      case EvictionPolicy::kVolatileLru:
        return Order::kRecency;
      case EvictionPolicy::kAllKeysLfu:
      case EvictionPolicy::kVolatileLfu:
        return Order::kFrequency;
      case EvictionPolicy::kAllKeysRandom:
      case EvictionPolicy::kVolatileRandom:
        return Order::kRandom;
      case EvictionPolicy::kVolatileTtl:
        return Order::kExpiry;
    }
    return Order::kNone;
  };
  const Order order = order_of(policy);
  policy_ = policy;
  if (order == order_) return;
  std::vector<Handle> live;
  live.reserve(live_);
  for (Handle h = 0; h < nodes_.size(); ++h) {
    if (node(h).live) live.push_back(h);
  }
  lists_ = {};
  nonempty_ = {};
  for (auto& dense : random_) dense.clear();
  order_ = order;
  // Linking oldest first appends every node at its list's tail: O(1) each after the sort.
  std::stable_sort(live.begin(), live.end(),
                   [this](Handle a, Handle b) { return node(a).stamp < node(b).stamp; });
  for (Handle h : live) Link(h);
}

// ---- expiry heap ---------------------------------------------------------------------------

void EvictionIndex::HeapSwap(uint32_t a, uint32_t b) {
  std::swap(expiry_at_[a], expiry_at_[b]);
  std::swap(expiry_handle_[a], expiry_handle_[b]);
  node(expiry_handle_[a]).expiry_pos = a;
  node(expiry_handle_[b]).expiry_pos = b;
}

void EvictionIndex::HeapUp(uint32_t pos) {
  while (pos > 0) {
    const uint32_t parent = (pos - 1) / 2;
    if (expiry_at_[parent] <= expiry_at_[pos]) break;
    HeapSwap(parent, pos);
    pos = parent;
  }
}

void EvictionIndex::HeapDown(uint32_t pos) {
  const auto size = static_cast<uint32_t>(expiry_at_.size());
  for (;;) {
    const uint32_t left = 2 * pos + 1, right = left + 1;
    uint32_t least = pos;
    if (left < size && expiry_at_[left] < expiry_at_[least]) least = left;
    if (right < size && expiry_at_[right] < expiry_at_[least]) least = right;
    if (least == pos) return;
    HeapSwap(pos, least);
    pos = least;
  }
}

void EvictionIndex::HeapRemove(uint32_t pos) {
  const Handle removed = expiry_handle_[pos];
  const auto last = static_cast<uint32_t>(expiry_at_.size() - 1);
  if (pos != last) HeapSwap(pos, last);
  expiry_at_.pop_back();
  expiry_handle_.pop_back();
  node(removed).expiry_pos = kNoHandle;
  if (pos < last) {
    HeapUp(pos);
    HeapDown(pos);
  }
}

std::optional<EvictionIndex::Handle> EvictionIndex::FirstUnpinnedByExpiry() const {
  if (expiry_at_.empty()) return std::nullopt;
  if (node(expiry_handle_[0]).pins == 0) return expiry_handle_[0];
  // Best-first walk of the heap past pinned entries: O(p log p) for p pinned entries that
  // expire sooner than the answer.
  auto later = [this](uint32_t a, uint32_t b) { return expiry_at_[a] > expiry_at_[b]; };
  std::vector<uint32_t> frontier{0};
  while (!frontier.empty()) {
    std::pop_heap(frontier.begin(), frontier.end(), later);
    const uint32_t pos = frontier.back();
    frontier.pop_back();
    if (node(expiry_handle_[pos]).pins == 0) return expiry_handle_[pos];
    for (uint32_t child : {2 * pos + 1, 2 * pos + 2}) {
      if (child < expiry_at_.size()) {
        frontier.push_back(child);
        std::push_heap(frontier.begin(), frontier.end(), later);
      }
    }
  }
  return std::nullopt;
}

std::optional<EvictionIndex::Handle> EvictionIndex::PeekExpired(int64_t now_ms) const {
  if (expiry_at_.empty() || expiry_at_[0] > now_ms) return std::nullopt;
  return expiry_handle_[0];
}

std::optional<int64_t> EvictionIndex::NextExpiryMs() const {
  if (expiry_at_.empty()) return std::nullopt;
  return expiry_at_[0];
}

std::vector<std::pair<int64_t, EvictionIndex::Handle>> EvictionIndex::Expired(int64_t now_ms,
                                                                              size_t limit) const {
  std::vector<std::pair<int64_t, Handle>> out;
  if (expiry_at_.empty() || limit == 0) return out;
  // A heap position's children expire no earlier than it: the next earliest is always among
  // the children of those taken so far.
  using Position = std::pair<int64_t, size_t>;  // (expiry, heap position)
  std::priority_queue<Position, std::vector<Position>, std::greater<>> frontier;
  frontier.emplace(expiry_at_[0], 0);
  while (!frontier.empty() && out.size() < limit) {
    const auto [at, pos] = frontier.top();
    if (at > now_ms) break;
    frontier.pop();
    out.emplace_back(at, expiry_handle_[pos]);
    for (size_t child = 2 * pos + 1; child <= 2 * pos + 2 && child < expiry_at_.size(); ++child) {
      frontier.emplace(expiry_at_[child], child);
    }
  }
  return out;
}

uint64_t EvictionIndex::RemainingTtlSumMs(int64_t now_ms) const {
  uint64_t sum = 0;
  for (int64_t at : expiry_at_) {
    if (at > now_ms) sum += static_cast<uint64_t>(at - now_ms);
  }
  return sum;
}

size_t EvictionIndex::MemoryBytes() const {
  size_t bytes = sizeof(*this) + nodes_.MemoryBytes() + expiry_at_.capacity() * sizeof(int64_t) +
                 expiry_handle_.capacity() * sizeof(Handle);
  for (const auto& dense : random_) bytes += dense.capacity() * sizeof(Handle);
  return bytes;
}

// ---- EvictionRound -------------------------------------------------------------------------

void EvictionRound::Offer(size_t shard, std::optional<EvictionIndex::Victim> victim,
                          size_t random_weight) {
  scores_[shard] = victim ? std::optional<uint64_t>(victim->score) : std::nullopt;
  weights_[shard] = random_weight;
}

std::optional<size_t> EvictionRound::Best() const {
  std::optional<size_t> best;
  for (size_t i = 0; i < scores_.size(); ++i) {
    if (scores_[i] && (!best || *scores_[i] < *scores_[*best])) best = i;
  }
  return best;
}

bool EvictionRound::Accepts(size_t shard, uint64_t score) const {
  for (size_t i = 0; i < scores_.size(); ++i) {
    if (i != shard && scores_[i] && *scores_[i] < score) return false;
  }
  return true;
}

std::optional<size_t> EvictionRound::RandomShard(uint64_t draw) const {
  const size_t total = std::accumulate(weights_.begin(), weights_.end(), size_t{0});
  if (total == 0) return std::nullopt;
  size_t pick = draw % total;
  for (size_t i = 0; i < weights_.size(); ++i) {
    if (pick < weights_[i]) return i;
    pick -= weights_[i];
  }
  return std::nullopt;
}

}  // namespace prefixd::store
