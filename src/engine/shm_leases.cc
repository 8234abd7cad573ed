#include "engine/shm_leases.h"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <vector>

namespace prefixd::commands {
namespace {

// Every live table, for the sweep and the totals: a table unregisters when its last owner drops it.
struct Tables {
  std::mutex mu;
  std::vector<std::weak_ptr<ShmLeaseTable>> all;

  template <class Visit>
  void ForEach(Visit&& visit) {
    std::vector<std::shared_ptr<ShmLeaseTable>> live;
    {
      std::lock_guard lock(mu);
      std::erase_if(all, [](const auto& weak) { return weak.expired(); });
      for (const auto& weak : all) {
        if (auto table = weak.lock()) live.push_back(std::move(table));
      }
    }
    for (const auto& table : live) visit(*table);
  }
};

Tables& AllTables() {
  static auto* tables = new Tables();
  return *tables;
}

int64_t SteadyMicros() {
  using namespace std::chrono;
  return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

// The leased allocations of every table, each once, with how many leases hold it and through
// which keys: what eviction asks before taking a key, and what used_memory adds for the bytes
// only leases keep. Tables call in under their own lock (so a table's lock comes first).
class LeasedAllocations {
 public:
  // A lease's allocations (each once) taken through `tag`.
  void Add(std::span<const Bytes> held, uint64_t tag) {
    std::lock_guard lock(mu_);
    auto& of_tag = by_tag_[tag];
    for (const Bytes& value : held) {
      Held& entry = by_storage_[value.storage()];
      if (entry.leases++ == 0) entry.anchor = value;
      of_tag[value.storage()] += 1;
    }
    distinct_.store(by_storage_.size(), std::memory_order_relaxed);
  }

  // A lease's allocations, ended. Appends the register's own handle of each allocation whose
  // last lease this was to `last`, for the caller to drop outside every lock (it may free the
  // region).
  void Remove(std::span<const Bytes> held, uint64_t tag, std::vector<Bytes>& last) {
    {
      std::lock_guard lock(mu_);
      auto t = by_tag_.find(tag);
      for (const Bytes& value : held) {
        if (t != by_tag_.end()) {
          if (auto s = t->second.find(value.storage()); s != t->second.end() && --s->second == 0) {
            t->second.erase(s);
          }
        }
        if (auto s = by_storage_.find(value.storage());
            s != by_storage_.end() && --s->second.leases == 0) {
          last.push_back(std::move(s->second.anchor));
          by_storage_.erase(s);
        }
      }
      if (t != by_tag_.end() && t->second.empty()) by_tag_.erase(t);
      distinct_.store(by_storage_.size(), std::memory_order_relaxed);
    }
    // An orphan's last lease ended: its bytes go with it, so the kept figure must be counted
    // again before it is next read.
    stale_.store(true, std::memory_order_relaxed);
  }

  bool HoldsKey(uint64_t tag) {
    if (distinct_.load(std::memory_order_relaxed) == 0) return false;
    std::lock_guard lock(mu_);
    auto t = by_tag_.find(tag);
    if (t == by_tag_.end()) return false;
    for (const auto& [storage, leases] : t->second) {
      auto s = by_storage_.find(storage);
      if (s != by_storage_.end() && !Orphan(s->second)) return true;
    }
    return false;
  }

  uint64_t OrphanBytes(bool now) {
    if (distinct_.load(std::memory_order_relaxed) == 0) return 0;
    const int64_t at = SteadyMicros();
    if (!now && !stale_.load(std::memory_order_relaxed) &&
        at - counted_at_us_.load(std::memory_order_relaxed) < kRecountAfterUs) {
      return orphan_bytes_.load(std::memory_order_relaxed);
    }
    uint64_t total = 0;
    {
      std::lock_guard lock(mu_);
      stale_.store(false, std::memory_order_relaxed);
      for (const auto& [storage, held] : by_storage_) {
        if (Orphan(held)) total += held.anchor.allocation_bytes();
      }
      orphan_bytes_.store(total, std::memory_order_relaxed);
      counted_at_us_.store(at, std::memory_order_relaxed);
    }
    return total;
  }

 private:
  struct Held {
    Bytes anchor;  // the register's own handle: how it reads the allocation's holder count
    uint64_t leases = 0;
  };
  // Every handle on the allocation is a lease's or the anchor.
  static bool Orphan(const Held& held) {
    return static_cast<uint64_t>(held.anchor.holders()) <= held.leases + 1;
  }
  // A count walks every leased allocation; writes ask for the figure before each command, so
  // between leases ending it is counted at most this often.
  static constexpr int64_t kRecountAfterUs = 1000;

  std::mutex mu_;
  std::unordered_map<const void*, Held> by_storage_;
  std::unordered_map<uint64_t, std::unordered_map<const void*, uint64_t>> by_tag_;
  std::atomic<size_t> distinct_{0};
  std::atomic<uint64_t> orphan_bytes_{0};
  std::atomic<int64_t> counted_at_us_{0};
  std::atomic<bool> stale_{false};
};

LeasedAllocations& Leased() {
  static auto* leased = new LeasedAllocations();
  return *leased;
}

}  // namespace

uint64_t ShmLeaseTag(size_t db, std::string_view key) {
  return XXH3_64bits_withSeed(key.data(), key.size(), db);
}

uint64_t ShmLeaseTable::Add(std::span<const Bytes* const> pieces, uint64_t tag, int64_t expires_ms,
                            size_t cap) {
  // One handle per allocation: the register counts a lease once per allocation it holds, which is
  // what its orphan test (every handle a lease's or its own) relies on.
  std::vector<const Bytes*> distinct(pieces.begin(), pieces.end());
  std::sort(distinct.begin(), distinct.end(), [](const Bytes* a, const Bytes* b) {
    return std::less<const void*>()(a->storage(), b->storage());
  });
  distinct.erase(
      std::unique(distinct.begin(), distinct.end(),
                  [](const Bytes* a, const Bytes* b) { return a->storage() == b->storage(); }),
      distinct.end());
  Lease lease{{}, 0, tag, expires_ms};
  lease.held.reserve(distinct.size());
  for (const Bytes* piece : distinct) lease.held.push_back(*piece);
  for (const Bytes* piece : pieces) lease.bytes += piece->size();
  std::lock_guard lock(mu_);
  if (leases_.size() >= cap) return 0;  // `lease` is dropped after the lock, with its handles
  const uint64_t id = ++next_id_;
  bytes_ += lease.bytes;
  Leased().Add(lease.held, tag);
  leases_.emplace(id, std::move(lease));
  return id;
}

bool ShmLeaseTable::Release(uint64_t id) {
  std::vector<Bytes> last;  // freed outside the locks
  Lease dropped;
  std::lock_guard lock(mu_);
  auto it = leases_.find(id);
  if (it == leases_.end()) return false;
  bytes_ -= it->second.bytes;
  Leased().Remove(it->second.held, it->second.tag, last);
  dropped = std::move(it->second);
  leases_.erase(it);
  return true;
}

size_t ShmLeaseTable::Clear() {
  std::unordered_map<uint64_t, Lease> dropped;
  std::vector<Bytes> last;
  {
    std::lock_guard lock(mu_);
    dropped.swap(leases_);
    bytes_ = 0;
    for (const auto& [id, lease] : dropped) Leased().Remove(lease.held, lease.tag, last);
  }
  return dropped.size();
}

void ShmLeaseTable::Sweep(int64_t now_ms) {
  std::vector<Bytes> last;  // freed outside the locks
  std::vector<Lease> dropped;
  std::lock_guard lock(mu_);
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.expires_ms > now_ms) {
      ++it;
      continue;
    }
    bytes_ -= it->second.bytes;
    Leased().Remove(it->second.held, it->second.tag, last);
    dropped.push_back(std::move(it->second));
    it = leases_.erase(it);
  }
}

size_t ShmLeaseTable::count() const {
  std::lock_guard lock(mu_);
  return leases_.size();
}

uint64_t ShmLeaseTable::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

std::shared_ptr<ShmLeaseTable> NewShmLeaseTable() {
  auto table = std::make_shared<ShmLeaseTable>();
  std::lock_guard lock(AllTables().mu);
  AllTables().all.push_back(table);
  return table;
}

void SweepShmLeases(int64_t now_ms) {
  AllTables().ForEach([&](ShmLeaseTable& t) { t.Sweep(now_ms); });
}

size_t ShmLeaseCount() {
  size_t n = 0;
  AllTables().ForEach([&](ShmLeaseTable& t) { n += t.count(); });
  return n;
}

uint64_t ShmLeasedBytes() {
  uint64_t n = 0;
  AllTables().ForEach([&](ShmLeaseTable& t) { n += t.bytes(); });
  return n;
}

bool ShmLeaseHoldsKey(uint64_t tag) { return Leased().HoldsKey(tag); }
uint64_t ShmLeasedOrphanBytes() { return Leased().OrphanBytes(/*now=*/false); }
uint64_t ShmLeasedOrphanBytesNow() { return Leased().OrphanBytes(/*now=*/true); }

}  // namespace prefixd::commands
