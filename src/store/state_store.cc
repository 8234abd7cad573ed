#include "store/state_store.h"

#include <xxhash.h>

namespace prefixd::store {
namespace {

// Rough per-entry cost of a map node plus its share of the session's hash node.
constexpr int64_t kEntryOverhead = 96;
constexpr int64_t kSessionOverhead = 128;

}  // namespace

size_t StateStore::StringHash::operator()(std::string_view s) const {
  return static_cast<size_t>(XXH3_64bits(s.data(), s.size()));
}

StateStore::StateStore(size_t shard_count)
    : shards_(std::make_unique<Shard[]>(shard_count)), shard_count_(shard_count) {}

StateStore::Shard& StateStore::ShardFor(std::string_view sid) const {
  // The upper bits pick the shard so they stay independent of the table's bucket bits.
  uint64_t h = XXH3_64bits(sid.data(), sid.size());
  return shards_[(h >> 32) % shard_count_];
}

void StateStore::Account(const Bytes* removed, const Bytes* added) {
  if (removed != nullptr) {
    payload_bytes_ -= static_cast<int64_t>(removed->size());
    overhead_bytes_ -= static_cast<int64_t>(removed->capacity() - removed->size()) + kEntryOverhead;
    entries_ -= 1;
  }
  if (added != nullptr) {
    payload_bytes_ += static_cast<int64_t>(added->size());
    overhead_bytes_ += static_cast<int64_t>(added->capacity() - added->size()) + kEntryOverhead;
    entries_ += 1;
  }
}

void StateStore::ForgetSession(std::string_view sid) {
  overhead_bytes_ -= kSessionOverhead + static_cast<int64_t>(sid.size());
  sessions_ -= 1;
}

void StateStore::Put(std::string_view sid, uint32_t layer, Bytes value, const Hook& under_lock) {
  std::vector<std::pair<uint32_t, Bytes>> one;
  one.emplace_back(layer, std::move(value));
  PutMany(sid, std::move(one), under_lock);
}

void StateStore::PutMany(std::string_view sid, std::vector<std::pair<uint32_t, Bytes>> layers,
                         const Hook& under_lock) {
  Shard& shard = ShardFor(sid);
  // Old values are released after the lock is dropped: freeing a large buffer takes time.
  std::vector<Bytes> replaced;
  replaced.reserve(layers.size());
  {
    std::lock_guard lock(shard.mu);
    if (under_lock) under_lock();
    auto it = shard.sessions.find(sid);
    if (it == shard.sessions.end()) {
      it = shard.sessions.emplace(std::string(sid), Session{}).first;
      sessions_ += 1;
      overhead_bytes_ += kSessionOverhead + static_cast<int64_t>(sid.size());
    }
    for (auto& [layer, value] : layers) {
      auto [slot, inserted] = it->second.layers.try_emplace(layer);
      Account(inserted ? nullptr : &slot->second, &value);
      if (!inserted) replaced.push_back(std::move(slot->second));
      slot->second = std::move(value);
    }
  }
}

std::optional<Bytes> StateStore::Get(std::string_view sid, uint32_t layer) const {
  Shard& shard = ShardFor(sid);
  std::lock_guard lock(shard.mu);
  auto it = shard.sessions.find(sid);
  if (it == shard.sessions.end()) return std::nullopt;
  auto slot = it->second.layers.find(layer);
  if (slot == it->second.layers.end()) return std::nullopt;
  return slot->second;
}

std::vector<std::optional<Bytes>> StateStore::GetMany(std::string_view sid,
                                                      std::span<const uint32_t> layers) const {
  std::vector<std::optional<Bytes>> out(layers.size());
  Shard& shard = ShardFor(sid);
  std::lock_guard lock(shard.mu);
  auto it = shard.sessions.find(sid);
  if (it == shard.sessions.end()) return out;
  for (size_t i = 0; i < layers.size(); ++i) {
    auto slot = it->second.layers.find(layers[i]);
    if (slot != it->second.layers.end()) out[i] = slot->second;
  }
  return out;
}

size_t StateStore::Drop(std::string_view sid, uint32_t layer, const Hook& under_lock) {
  Shard& shard = ShardFor(sid);
  Bytes released;
  std::lock_guard lock(shard.mu);
  if (under_lock) under_lock();
  auto it = shard.sessions.find(sid);
  if (it == shard.sessions.end()) return 0;
  auto slot = it->second.layers.find(layer);
  if (slot == it->second.layers.end()) return 0;
  Account(&slot->second, nullptr);
  released = std::move(slot->second);
  it->second.layers.erase(slot);
  if (it->second.layers.empty()) {
    ForgetSession(sid);
    shard.sessions.erase(it);
  }
  return 1;
}

size_t StateStore::DropSession(std::string_view sid, const Hook& under_lock) {
  Shard& shard = ShardFor(sid);
  Session released;
  {
    std::lock_guard lock(shard.mu);
    if (under_lock) under_lock();
    auto it = shard.sessions.find(sid);
    if (it == shard.sessions.end()) return 0;
    for (auto& [layer, value] : it->second.layers) Account(&value, nullptr);
    ForgetSession(sid);
    released = std::move(it->second);
    shard.sessions.erase(it);
  }
  return released.layers.size();
}

void StateStore::Clear() {
  for (size_t i = 0; i < shard_count_; ++i) {
    decltype(Shard::sessions) released;  // freed after the lock
    std::lock_guard lock(shards_[i].mu);
    for (auto& [sid, session] : shards_[i].sessions) {
      for (auto& [layer, value] : session.layers) Account(&value, nullptr);
      ForgetSession(sid);
    }
    released.swap(shards_[i].sessions);
  }
}

void StateStore::ForEachSession(
    const std::function<void(const std::string&, const std::vector<std::pair<uint32_t, Bytes>>&)>&
        visit) const {
  std::vector<std::pair<std::string, std::vector<std::pair<uint32_t, Bytes>>>> copied;
  for (size_t i = 0; i < shard_count_; ++i) {
    copied.clear();
    {
      std::lock_guard lock(shards_[i].mu);
      copied.reserve(shards_[i].sessions.size());
      for (const auto& [sid, session] : shards_[i].sessions) {
        copied.emplace_back(sid, std::vector<std::pair<uint32_t, Bytes>>(session.layers.begin(),
                                                                         session.layers.end()));
      }
    }
    for (const auto& [sid, layers] : copied) visit(sid, layers);
  }
}

std::vector<LayerSize> StateStore::Layers(std::string_view sid) const {
  std::vector<LayerSize> out;
  Shard& shard = ShardFor(sid);
  std::lock_guard lock(shard.mu);
  auto it = shard.sessions.find(sid);
  if (it == shard.sessions.end()) return out;
  out.reserve(it->second.layers.size());
  for (const auto& [layer, value] : it->second.layers) out.push_back({layer, value.size()});
  return out;
}

bool StateStore::Contains(std::string_view sid) const {
  Shard& shard = ShardFor(sid);
  std::lock_guard lock(shard.mu);
  return shard.sessions.find(sid) != shard.sessions.end();
}

uint64_t StateStore::SessionBytes(std::string_view sid) const {
  Shard& shard = ShardFor(sid);
  std::lock_guard lock(shard.mu);
  auto it = shard.sessions.find(sid);
  if (it == shard.sessions.end()) return 0;
  uint64_t total = kSessionOverhead + sid.size();
  for (const auto& [layer, value] : it->second.layers) total += value.capacity() + kEntryOverhead;
  return total;
}

StoreStats StateStore::Stats() const {
  StoreStats s;
  s.sessions = static_cast<uint64_t>(sessions_.load());
  s.entries = static_cast<uint64_t>(entries_.load());
  s.payload_bytes = static_cast<uint64_t>(payload_bytes_.load());
  s.overhead_bytes = static_cast<uint64_t>(overhead_bytes_.load());
  return s;
}

}  // namespace prefixd::store
