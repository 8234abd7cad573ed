#include "commands/engine.h"

#include <algorithm>

namespace prefixd::commands {

Engine::Engine(Settings& settings) : settings_(settings) {}

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
    if (auto c = it->second.lock(); c && c->push) c->push(line);
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

uint64_t Engine::UsedMemory() const {
  store::StoreStats s = state_store_.Stats();
  store::VectorStoreStats v = vector_store_.Stats();
  return s.payload_bytes + s.overhead_bytes + v.allocated_bytes + v.overhead_bytes;
}

int64_t Engine::UptimeSeconds() const {
  using namespace std::chrono;
  return duration_cast<seconds>(system_clock::now() - started_).count();
}

void Engine::RequestShutdown() {
  if (shutdown_hook_) shutdown_hook_();
}

}  // namespace prefixd::commands
