#include "engine/engine.h"

#include <xxhash.h>

#include <algorithm>

#include "common/client_memory.h"
#include "engine/command.h"
#include "engine/shm_leases.h"

namespace prefixd::commands {

Engine::Engine(Settings& settings)
    : settings_(settings), databases_(static_cast<size_t>(settings.Int(Setting::kDatabases))) {
  databases_.At(0);
}

store::Database& Db(Context& ctx) {
  return ctx.engine.database(static_cast<size_t>(ctx.client.db.load()));
}

size_t Engine::KeyLockStripe(std::string_view key) {
  return XXH3_64bits(key.data(), key.size()) % kKeyLockStripes;
}

void Engine::AddClient(const std::shared_ptr<server::ClientState>& client) {
  std::lock_guard lock(clients_mu_);
  clients_[client->id] = client;
}

void Engine::RemoveClient(const server::ClientState& client) {
  stats_.closed_net_input += client.net_input_bytes.load();
  stats_.closed_net_output += client.net_output_bytes.load();
  std::lock_guard lock(clients_mu_);
  clients_.erase(client.id);
  if (std::erase(monitors_, client.id) > 0) monitor_count_ = monitors_.size();
}

void Engine::AddMonitor(uint64_t client_id) {
  std::lock_guard lock(clients_mu_);
  if (std::find(monitors_.begin(), monitors_.end(), client_id) != monitors_.end()) return;
  monitors_.push_back(client_id);
  monitor_count_ = monitors_.size();
}

void Engine::FeedMonitors(const server::ClientState& from, const std::string& line) {
  std::lock_guard lock(clients_mu_);
  for (uint64_t id : monitors_) {
    if (id == from.id) continue;
    auto it = clients_.find(id);
    if (it == clients_.end()) continue;
    if (auto c = it->second.lock()) c->Push(line);
  }
}

std::vector<std::shared_ptr<server::ClientState>> Engine::Clients() const {
  std::vector<std::shared_ptr<server::ClientState>> out;
  std::lock_guard lock(clients_mu_);
  out.reserve(clients_.size());
  for (const auto& [id, weak] : clients_) {
    if (auto c = weak.lock()) out.push_back(std::move(c));
  }
  return out;
}

size_t Engine::ClientCount() const {
  std::lock_guard lock(clients_mu_);
  return clients_.size();
}

uint64_t Engine::DatabaseMemory(const store::Database& db) {
  store::StoreStats s = db.state.Stats();
  store::VectorStoreStats v = db.vectors.Stats();
  // Compact sessions' bytes are in their keyspace entries, which MemoryBytes counts.
  return s.payload_bytes - s.compact_bytes + s.overhead_bytes + v.allocated_bytes +
         v.overhead_bytes + db.keys.MemoryBytes() + db.prefixes.MemoryBytes();
}

store::StoreStats Engine::StateStats() const {
  store::StoreStats total;
  databases_.ForEach([&](size_t, store::Database& db) {
    const store::StoreStats s = db.state.Stats();
    total.sessions += s.sessions, total.entries += s.entries;
    total.payload_bytes += s.payload_bytes, total.overhead_bytes += s.overhead_bytes;
    total.cold_layers += s.cold_layers, total.cold_bytes += s.cold_bytes;
    total.cold_reads += s.cold_reads, total.cold_bytes_read += s.cold_bytes_read;
    total.promotions += s.promotions, total.compact_bytes += s.compact_bytes;
  });
  return total;
}

store::VectorStoreStats Engine::VectorStats() const {
  store::VectorStoreStats total;
  databases_.ForEach([&](size_t, store::Database& db) {
    const store::VectorStoreStats s = db.vectors.Stats();
    total.sessions += s.sessions, total.layers += s.layers, total.tokens += s.tokens;
    total.payload_bytes += s.payload_bytes, total.allocated_bytes += s.allocated_bytes;
    total.overhead_bytes += s.overhead_bytes, total.prefixes += s.prefixes;
    total.cold_layers += s.cold_layers, total.cold_bytes += s.cold_bytes;
    total.cold_reads += s.cold_reads, total.cold_bytes_read += s.cold_bytes_read;
    total.promotions += s.promotions;
  });
  return total;
}

uint64_t CountedMemory(const Engine& engine) { return engine.UsedMemory() + memory::ClientBytes(); }

uint64_t Engine::UsedMemory() const {
  uint64_t total = 0;
  databases_.ForEach([&](size_t, store::Database& db) { total += DatabaseMemory(db); });
  return total + ShmLeasedOrphanBytes();
}

uint64_t Engine::NotePeakMemory(uint64_t used) {
  uint64_t peak = stats_.peak_memory.load();
  while (used > peak && !stats_.peak_memory.compare_exchange_weak(peak, used)) {
  }
  return std::max(peak, used);
}

int64_t Engine::UptimeSeconds() const {
  using namespace std::chrono;
  return duration_cast<seconds>(system_clock::now() - started_).count();
}

void Engine::RequestShutdown() {
  if (shutdown_hook_) shutdown_hook_();
}

}  // namespace prefixd::commands
