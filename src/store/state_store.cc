#include "store/state_store.h"

#include <xxhash.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace prefixd::store {
namespace {

// A layer's slot in its session's array (the value's handle and disk reference), and a
// session's hash node (key, layer array, link and cached hash: an 80-byte chunk) with its bucket
// slot; a session id over std::string's inline buffer adds its own allocation (counted by size).
constexpr int64_t kEntryOverhead = 88;
constexpr int64_t kSessionOverhead = 96;

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

void StateStore::Account(const Layer* removed, const Layer* added) {
  const auto apply = [this](const Layer& l, int64_t sign) {
    if (l.cold) {
      cold_bytes_ += sign * static_cast<int64_t>(l.length);
      cold_layers_ += sign;
      overhead_bytes_ += sign * kEntryOverhead;
    } else {
      payload_bytes_ += sign * static_cast<int64_t>(l.value.size());
      overhead_bytes_ +=
          sign * (static_cast<int64_t>(l.value.capacity() - l.value.size()) + kEntryOverhead);
    }
    entries_ += sign;
  };
  if (removed != nullptr) apply(*removed, -1);
  if (added != nullptr) apply(*added, 1);
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
  std::vector<Layer> replaced;
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
      Layer fresh;
      fresh.length = value.size();
      fresh.value = std::move(value);
      auto [slot, inserted] = it->second.layers.try_emplace(layer);
      Account(inserted ? nullptr : &slot->second, &fresh);
      if (!inserted) replaced.push_back(std::move(slot->second));
      slot->second = std::move(fresh);
    }
  }
}

void StateStore::PutCold(std::string_view sid, uint32_t layer, uint64_t length,
                         std::shared_ptr<const ColdFile> file, uint64_t offset,
                         const Hook& under_lock) {
  Shard& shard = ShardFor(sid);
  Layer replaced;
  std::lock_guard lock(shard.mu);
  if (under_lock) under_lock();
  auto it = shard.sessions.find(sid);
  if (it == shard.sessions.end()) {
    it = shard.sessions.emplace(std::string(sid), Session{}).first;
    sessions_ += 1;
    overhead_bytes_ += kSessionOverhead + static_cast<int64_t>(sid.size());
  }
  Layer fresh{Bytes(), std::move(file), offset, length, true};
  auto [slot, inserted] = it->second.layers.try_emplace(layer);
  Account(inserted ? nullptr : &slot->second, &fresh);
  if (!inserted) replaced = std::move(slot->second);
  slot->second = std::move(fresh);
}

StateStore::Pending StateStore::PendingOf(const Layer& l) {
  return Pending{l.value, l.file, l.offset, l.length, l.cold};
}

Bytes StateStore::Resolve(const Pending& p, uint64_t from, uint64_t length) const {
  from = std::min(from, p.length);
  length = std::min(length, p.length - from);
  if (!p.cold) return from == 0 && length == p.length ? p.value : p.value.Slice(from, length);
  Bytes out;
  std::string error;
  if (!p.file->Read(p.offset + from, length, out, error)) {
    throw std::runtime_error("reading a stored value from disk failed: " + error);
  }
  cold_bytes_read_.fetch_add(length, std::memory_order_relaxed);
  return out;
}

FetchedLayer StateStore::ResolveOrStream(const Pending& p, uint64_t from, uint64_t length,
                                         uint64_t stream_from) const {
  from = std::min(from, p.length);
  length = std::min(length, p.length - from);
  if (!p.cold || length < stream_from) return FetchedLayer{Resolve(p, from, length), {}};
  cold_bytes_read_.fetch_add(length, std::memory_order_relaxed);
  return FetchedLayer{Bytes(), ColdExtent{p.file, p.offset + from, length}};
}

std::optional<Bytes> StateStore::Get(std::string_view sid, uint32_t layer) const {
  return GetRange(sid, layer, 0, ColdFile::kAllDurable);
}

std::optional<Bytes> StateStore::GetRange(std::string_view sid, uint32_t layer, uint64_t offset,
                                          uint64_t length) const {
  auto fetched = FetchRange(sid, layer, offset, length, kNeverStreamed);
  if (!fetched) return std::nullopt;
  return std::move(fetched->value);
}

std::optional<FetchedLayer> StateStore::FetchRange(std::string_view sid, uint32_t layer,
                                                   uint64_t offset, uint64_t length,
                                                   uint64_t stream_from) const {
  Pending found;
  {
    Shard& shard = ShardFor(sid);
    std::lock_guard lock(shard.mu);
    auto it = shard.sessions.find(sid);
    if (it == shard.sessions.end()) return std::nullopt;
    auto slot = it->second.layers.find(layer);
    if (slot == it->second.layers.end()) return std::nullopt;
    found = PendingOf(slot->second);
  }
  if (found.cold) cold_reads_.fetch_add(1, std::memory_order_relaxed);
  return ResolveOrStream(found, offset, length, stream_from);
}

std::vector<std::optional<Bytes>> StateStore::GetMany(std::string_view sid,
                                                      std::span<const uint32_t> layers) const {
  auto fetched = FetchMany(sid, layers, kNeverStreamed);
  std::vector<std::optional<Bytes>> out(fetched.size());
  for (size_t i = 0; i < fetched.size(); ++i) {
    if (fetched[i]) out[i] = std::move(fetched[i]->value);
  }
  return out;
}

std::vector<std::optional<FetchedLayer>> StateStore::FetchMany(std::string_view sid,
                                                               std::span<const uint32_t> layers,
                                                               uint64_t stream_from) const {
  std::vector<std::optional<Pending>> found(layers.size());
  {
    Shard& shard = ShardFor(sid);
    std::lock_guard lock(shard.mu);
    auto it = shard.sessions.find(sid);
    if (it == shard.sessions.end()) return std::vector<std::optional<FetchedLayer>>(layers.size());
    for (size_t i = 0; i < layers.size(); ++i) {
      auto slot = it->second.layers.find(layers[i]);
      if (slot != it->second.layers.end()) found[i] = PendingOf(slot->second);
    }
  }
  // Cold references copied under the lock point at immutable file bytes, so reading them now
  // (or while the reply is sent) still gives the session as it was at that instant: whole,
  // never a mix.
  std::vector<std::optional<FetchedLayer>> out(layers.size());
  std::vector<size_t> cold;
  bool any_cold = false;
  for (size_t i = 0; i < found.size(); ++i) {
    if (!found[i]) continue;
    any_cold |= found[i]->cold;
    if (found[i]->cold && found[i]->length < stream_from) {
      cold.push_back(i);
    } else {
      out[i] = ResolveOrStream(*found[i], 0, found[i]->length, stream_from);
    }
  }
  if (any_cold) cold_reads_.fetch_add(1, std::memory_order_relaxed);
  if (cold.empty()) return out;
  // Layers stored by one MSTORE sit back to back in one record (12 bytes apart): one read of
  // the run serves them all, and a larger request keeps more of the disk busy.
  std::sort(cold.begin(), cold.end(), [&](size_t a, size_t b) {
    return std::pair(found[a]->file.get(), found[a]->offset) <
           std::pair(found[b]->file.get(), found[b]->offset);
  });
  constexpr uint64_t kMaxGap = 4096;
  for (size_t first = 0; first < cold.size();) {
    const Pending& head = *found[cold[first]];
    uint64_t end = head.offset + head.length;
    size_t last = first + 1;
    while (last < cold.size()) {
      const Pending& next = *found[cold[last]];
      if (next.file != head.file || next.offset < end || next.offset - end > kMaxGap) break;
      end = next.offset + next.length;
      ++last;
    }
    if (last - first == 1) {
      out[cold[first]] = FetchedLayer{Resolve(head, 0, head.length), {}};
    } else {
      const Bytes run = Resolve(Pending{Bytes(), head.file, head.offset, end - head.offset, true},
                                0, end - head.offset);
      for (size_t k = first; k < last; ++k) {
        const Pending& p = *found[cold[k]];
        out[cold[k]] = FetchedLayer{run.Slice(p.offset - head.offset, p.length), {}};
      }
    }
    first = last;
  }
  return out;
}

void StateStore::Place(std::string_view sid, uint32_t layer, const uint8_t* data,
                       std::shared_ptr<const ColdFile> file, uint64_t offset) {
  Shard& shard = ShardFor(sid);
  std::shared_ptr<const ColdFile> released;
  std::lock_guard lock(shard.mu);
  Layer* l = FindLayer(shard, sid, layer);
  // The caller still holds the buffer at `data`, so no other value can sit at that address.
  if (l == nullptr || l->cold || l->value.data() != data) return;
  released = std::exchange(l->file, std::move(file));
  l->offset = offset;
}

void StateStore::Repoint(std::string_view sid, uint32_t layer, const ColdFile* old_file,
                         uint64_t old_offset, std::shared_ptr<const ColdFile> file,
                         uint64_t offset) {
  Shard& shard = ShardFor(sid);
  std::shared_ptr<const ColdFile> released;
  std::lock_guard lock(shard.mu);
  Layer* l = FindLayer(shard, sid, layer);
  // A place holds one value (hot or cold): the caller holds `old_file` open, so no other file
  // can sit at that address, and a rewritten layer has another place or none.
  if (l == nullptr || l->file.get() != old_file || l->offset != old_offset) return;
  released = std::exchange(l->file, std::move(file));
  l->offset = offset;
}

StateStore::Layer* StateStore::FindLayer(Shard& shard, std::string_view sid, uint32_t layer) {
  auto it = shard.sessions.find(sid);
  if (it == shard.sessions.end()) return nullptr;
  auto slot = it->second.layers.find(layer);
  return slot == it->second.layers.end() ? nullptr : &slot->second;
}

ColdOutcome StateStore::MakeCold(std::string_view sid) {
  Shard& shard = ShardFor(sid);
  std::vector<Bytes> released;  // freed after the lock
  ColdOutcome out;
  std::lock_guard lock(shard.mu);
  auto it = shard.sessions.find(sid);
  if (it == shard.sessions.end()) return out;
  out.existed = true;
  for (const auto& [layer, l] : it->second.layers) {
    if (l.cold) continue;
    if (l.file == nullptr || l.offset + l.length > l.file->durable_end()) return out;
  }
  for (auto& [layer, l] : it->second.layers) {
    if (l.cold) continue;
    Account(&l, nullptr);
    out.freed += l.value.size();
    released.push_back(std::move(l.value));
    l.value = Bytes();
    l.cold = true;
    Account(nullptr, &l);
  }
  out.ok = true;
  return out;
}

uint64_t StateStore::ColdBytes(std::string_view sid) const {
  Shard& shard = ShardFor(sid);
  std::lock_guard lock(shard.mu);
  auto it = shard.sessions.find(sid);
  if (it == shard.sessions.end()) return 0;
  uint64_t total = 0;
  for (const auto& [layer, l] : it->second.layers) total += l.cold ? l.length : 0;
  return total;
}

bool StateStore::Promote(std::string_view sid) {
  Shard& shard = ShardFor(sid);
  std::vector<std::pair<uint32_t, Pending>> cold;
  {
    std::lock_guard lock(shard.mu);
    auto it = shard.sessions.find(sid);
    if (it == shard.sessions.end()) return false;
    for (const auto& [layer, l] : it->second.layers) {
      if (l.cold) cold.emplace_back(layer, PendingOf(l));
    }
  }
  if (cold.empty()) return true;
  // A fetch that promotes reads the cold layers here, not in its own read: it counts as one.
  cold_reads_.fetch_add(1, std::memory_order_relaxed);
  std::vector<Bytes> read;
  read.reserve(cold.size());
  for (const auto& [layer, p] : cold) read.push_back(Resolve(p, 0, p.length));
  std::lock_guard lock(shard.mu);
  auto it = shard.sessions.find(sid);
  if (it == shard.sessions.end()) return false;
  for (size_t i = 0; i < cold.size(); ++i) {
    auto slot = it->second.layers.find(cold[i].first);
    if (slot == it->second.layers.end()) continue;
    Layer& l = slot->second;
    // Only the reference that was read: a layer rewritten or moved meanwhile keeps its state.
    if (!l.cold || l.file != cold[i].second.file || l.offset != cold[i].second.offset) continue;
    Account(&l, nullptr);
    l.value = std::move(read[i]);
    l.cold = false;
    Account(nullptr, &l);
  }
  for (const auto& [layer, l] : it->second.layers) {
    if (l.cold) return false;
  }
  promotions_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

size_t StateStore::Drop(std::string_view sid, uint32_t layer, const Hook& under_lock) {
  Shard& shard = ShardFor(sid);
  Layer released;
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

std::vector<LayerPlace> StateStore::PlacesOf(const Session& session) {
  std::vector<LayerPlace> layers;
  layers.reserve(session.layers.size());
  for (const auto& [layer, l] : session.layers) {
    layers.push_back(LayerPlace{layer, l.value, l.file, l.offset, l.length, l.cold});
  }
  return layers;
}

std::vector<std::pair<uint32_t, Bytes>> StateStore::Resolved(
    const std::vector<LayerPlace>& places) const {
  std::vector<std::pair<uint32_t, Bytes>> layers;
  layers.reserve(places.size());
  for (const LayerPlace& p : places) {
    layers.emplace_back(p.layer,
                        Resolve(Pending{p.value, p.file, p.offset, p.length, p.cold}, 0, p.length));
  }
  return layers;
}

void StateStore::ForEachSessionPlace(
    const std::function<void(const std::string&, const std::vector<LayerPlace>&)>& visit) const {
  std::vector<std::pair<std::string, std::vector<LayerPlace>>> copied;
  for (size_t i = 0; i < shard_count_; ++i) {
    copied.clear();
    {
      std::lock_guard lock(shards_[i].mu);
      copied.reserve(shards_[i].sessions.size());
      for (const auto& [sid, session] : shards_[i].sessions) {
        copied.emplace_back(sid, PlacesOf(session));
      }
    }
    for (const auto& [sid, layers] : copied) visit(sid, layers);
  }
}

void StateStore::ForEachSession(
    const std::function<void(const std::string&, const std::vector<std::pair<uint32_t, Bytes>>&)>&
        visit) const {
  ForEachSessionPlace([&](const std::string& sid, const std::vector<LayerPlace>& places) {
    visit(sid, Resolved(places));
  });
}

std::optional<std::vector<std::pair<uint32_t, Bytes>>> StateStore::ReadSession(
    std::string_view sid) const {
  std::vector<LayerPlace> places;
  {
    Shard& shard = ShardFor(sid);
    std::lock_guard lock(shard.mu);
    auto it = shard.sessions.find(sid);
    if (it == shard.sessions.end()) return std::nullopt;
    places = PlacesOf(it->second);
  }
  return Resolved(places);
}

std::vector<LayerSize> StateStore::Layers(std::string_view sid) const {
  std::vector<LayerSize> out;
  Shard& shard = ShardFor(sid);
  std::lock_guard lock(shard.mu);
  auto it = shard.sessions.find(sid);
  if (it == shard.sessions.end()) return out;
  out.reserve(it->second.layers.size());
  for (const auto& [layer, l] : it->second.layers) out.push_back({layer, l.length});
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
  for (const auto& [layer, l] : it->second.layers) total += l.value.capacity() + kEntryOverhead;
  return total;
}

StoreStats StateStore::Stats() const {
  StoreStats s;
  s.sessions = static_cast<uint64_t>(sessions_.load());
  s.entries = static_cast<uint64_t>(entries_.load());
  s.payload_bytes = static_cast<uint64_t>(payload_bytes_.load());
  s.overhead_bytes = static_cast<uint64_t>(overhead_bytes_.load());
  s.cold_layers = static_cast<uint64_t>(cold_layers_.load());
  s.cold_bytes = static_cast<uint64_t>(cold_bytes_.load());
  s.cold_reads = cold_reads_.load();
  s.cold_bytes_read = cold_bytes_read_.load();
  s.promotions = promotions_.load();
  return s;
}

}  // namespace prefixd::store
