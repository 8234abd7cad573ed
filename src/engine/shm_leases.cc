#include "engine/shm_leases.h"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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
  void Add(const Bytes& value, uint64_t tag) {
    std::lock_guard lock(mu_);
    Held& held = by_storage_[value.storage()];
    if (held.leases++ == 0) held.anchor = value;
    by_tag_[tag][value.storage()] += 1;
    distinct_.store(by_storage_.size(), std::memory_order_relaxed);
  }

  // Returns the register's own handle when this was the allocation's last lease, for the caller
  // to drop outside every lock (it may free the region).
  Bytes Remove(const Bytes& value, uint64_t tag) {
    Bytes last;
    {
      std::lock_guard lock(mu_);
      if (auto t = by_tag_.find(tag); t != by_tag_.end()) {
        if (auto s = t->second.find(value.storage()); s != t->second.end() && --s->second == 0) {
          t->second.erase(s);
        }
        if (t->second.empty()) by_tag_.erase(t);
      }
      if (auto s = by_storage_.find(value.storage());
          s != by_storage_.end() && --s->second.leases == 0) {
        last = std::move(s->second.anchor);
        by_storage_.erase(s);
      }
      distinct_.store(by_storage_.size(), std::memory_order_relaxed);
    }
    // An orphan's last lease ended: its bytes go with it, so the kept figure must be counted
    // again before it is next read.
    stale_.store(true, std::memory_order_relaxed);
    return last;
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

uint64_t ShmLeaseTable::Add(Bytes value, uint64_t tag, int64_t expires_ms, size_t cap) {
  std::lock_guard lock(mu_);
  if (leases_.size() >= cap) return 0;
  const uint64_t id = ++next_id_;
  bytes_ += value.size();
  Leased().Add(value, tag);
  leases_.emplace(id, Lease{std::move(value), tag, expires_ms});
  return id;
}

bool ShmLeaseTable::Release(uint64_t id) {
  Bytes dropped, last;  // freed outside the locks
  std::lock_guard lock(mu_);
  auto it = leases_.find(id);
  if (it == leases_.end()) return false;
  bytes_ -= it->second.value.size();
  last = Leased().Remove(it->second.value, it->second.tag);
  dropped = std::move(it->second.value);
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
    for (const auto& [id, lease] : dropped) last.push_back(Leased().Remove(lease.value, lease.tag));
  }
  return dropped.size();
}

void ShmLeaseTable::Sweep(int64_t now_ms) {
  std::vector<Bytes> dropped;
  std::lock_guard lock(mu_);
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.expires_ms > now_ms) {
      ++it;
      continue;
    }
    bytes_ -= it->second.value.size();
    dropped.push_back(Leased().Remove(it->second.value, it->second.tag));
    dropped.push_back(std::move(it->second.value));
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
