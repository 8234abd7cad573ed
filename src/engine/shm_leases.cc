#include "engine/shm_leases.h"

#include <algorithm>
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

}  // namespace

uint64_t ShmLeaseTable::Add(Bytes value, int64_t expires_ms, size_t cap) {
  std::lock_guard lock(mu_);
  if (leases_.size() >= cap) return 0;
  const uint64_t id = ++next_id_;
  bytes_ += value.size();
  leases_.emplace(id, Lease{std::move(value), expires_ms});
  return id;
}

bool ShmLeaseTable::Release(uint64_t id) {
  Bytes dropped;  // freed outside the lock
  std::lock_guard lock(mu_);
  auto it = leases_.find(id);
  if (it == leases_.end()) return false;
  bytes_ -= it->second.value.size();
  dropped = std::move(it->second.value);
  leases_.erase(it);
  return true;
}

size_t ShmLeaseTable::Clear() {
  std::unordered_map<uint64_t, Lease> dropped;
  {
    std::lock_guard lock(mu_);
    dropped.swap(leases_);
    bytes_ = 0;
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

}  // namespace prefixd::commands
