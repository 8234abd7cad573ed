#include "engine/replication.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

#include "common/clock.h"
#include "protocol/command_encoding.h"

namespace prefixd::commands {
namespace {

// 40 hex characters, as Redis's replication id.
std::string RandomReplid() {
  std::random_device seed;
  std::mt19937_64 gen((static_cast<uint64_t>(seed()) << 32) ^ seed());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(40, '0');
  for (char& c : id) c = kHex[gen() & 15];
  return id;
}

// This thread's depth of OrderHolds, and the commands a Transaction on it collects.
thread_local int order_depth = 0;
struct Collected {
  bool collecting = false;
  std::vector<std::pair<int, std::string>> commands;
};
thread_local Collected collected;

// The host part of "ip:port" (an IPv6 address keeps its colons).
std::string HostOf(const std::string& addr) {
  const size_t colon = addr.rfind(':');
  return colon == std::string::npos ? addr : addr.substr(0, colon);
}

}  // namespace

Replication::Replication() : replid_(RandomReplid()) {}

uint64_t Replication::offset() const {
  std::lock_guard lock(stream_mu_);
  return offset_;
}

Replication::OrderHold::OrderHold(Replication& replication, bool wanted) {
  if (!wanted || !replication.active()) return;
  feeding_ = true;
  if (order_depth++ > 0) return;
  replication.order_mu_.lock();
  owner_ = &replication;
}

Replication::OrderHold::~OrderHold() {
  if (!feeding_) return;
  --order_depth;
  if (owner_ != nullptr) owner_->order_mu_.unlock();
}

void Replication::Feed(int db, std::span<const std::string_view> argv) {
  if (!active()) return;
  FeedCommand(db, protocol::EncodeCommand(argv));
}

void Replication::FeedCommand(int db, std::string command) {
  if (!active()) return;
  if (collected.collecting) {
    collected.commands.emplace_back(db, std::move(command));
    return;
  }
  FeedEncoded(db, std::move(command));
}

void Replication::FeedEncoded(int db, std::string command) {
  std::lock_guard lock(stream_mu_);
  if (replicas_.empty()) return;
  // A SELECT goes ahead as its own push: prepending it would move a command of any size.
  std::string select;
  if (db >= 0 && db != stream_db_) {
    const std::string index = std::to_string(db);
    select = protocol::EncodeCommand(std::initializer_list<std::string_view>{"SELECT", index});
    stream_db_ = db;
  }
  offset_ += select.size() + command.size();
  // A replica whose connection has closed is dropped here as well as by its disconnect.
  std::erase_if(replicas_, [&](const Replica& r) {
    return !(select.empty() || r.client->Push(select)) || !r.client->Push(command);
  });
  if (replicas_.empty()) active_.store(false, std::memory_order_relaxed);
}

Replication::Transaction::Transaction(Replication& replication) : replication_(replication) {
  if (collected.collecting) return;
  outer_ = true;
  collected.collecting = true;
  collected.commands.clear();
}

Replication::Transaction::~Transaction() {
  if (!outer_) return;
  collected.collecting = false;
  std::vector<std::pair<int, std::string>> commands = std::move(collected.commands);
  collected.commands.clear();
  if (commands.empty() || !replication_.active()) return;
  if (commands.size() == 1) {
    replication_.FeedEncoded(commands[0].first, std::move(commands[0].second));
    return;
  }
  // One command needs no wrapping (it is atomic by itself); several go in MULTI ... EXEC, the
  // first SELECT before MULTI, as Redis propagates a transaction.
  replication_.FeedEncoded(
      commands[0].first, protocol::EncodeCommand(std::initializer_list<std::string_view>{"MULTI"}));
  for (auto& [db, command] : commands) replication_.FeedEncoded(db, std::move(command));
  replication_.FeedEncoded(
      -1, protocol::EncodeCommand(std::initializer_list<std::string_view>{"EXEC"}));
}

void Replication::Attach(const std::shared_ptr<server::ClientState>& client) {
  std::lock_guard lock(stream_mu_);
  client->replica.store(true, std::memory_order_relaxed);
  replicas_.push_back(Replica{client, offset_, CoarseNowMs()});
  // The next command selects its database again, for the new replica (as Redis's slaveseldb).
  stream_db_ = -1;
  // The first PING a period after the first replica came, not at once.
  if (replicas_.size() == 1) last_ping_ms_ = CoarseNowMs();
  active_.store(true, std::memory_order_relaxed);
}

void Replication::Detach(uint64_t client_id) {
  std::lock_guard lock(stream_mu_);
  std::erase_if(replicas_, [&](const Replica& r) { return r.client->id == client_id; });
  if (replicas_.empty()) active_.store(false, std::memory_order_relaxed);
}

void Replication::Ack(uint64_t client_id, uint64_t offset) {
  std::lock_guard lock(stream_mu_);
  for (Replica& r : replicas_) {
    if (r.client->id != client_id) continue;
    r.ack_offset = std::max(r.ack_offset, offset);
    r.ack_ms = CoarseNowMs();
  }
}

void Replication::Tick(int64_t period_s) {
  if (!active()) return;
  const int64_t now = CoarseNowMs();
  {
    std::lock_guard lock(stream_mu_);
    if (now - last_ping_ms_ < period_s * 1000) return;
    last_ping_ms_ = now;
  }
  OrderHold order(*this, true);
  if (order.feeding())
    FeedEncoded(-1, protocol::EncodeCommand(std::initializer_list<std::string_view>{"PING"}));
}

std::vector<Replication::ReplicaView> Replication::Replicas() const {
  std::vector<ReplicaView> out;
  const int64_t now = CoarseNowMs();
  std::lock_guard lock(stream_mu_);
  for (const Replica& r : replicas_) {
    ReplicaView v;
    {
      std::lock_guard names(r.client->names_mu);
      v.ip = r.client->replica_ip.empty() ? HostOf(r.client->addr) : r.client->replica_ip;
    }
    v.port = r.client->replica_listening_port.load(std::memory_order_relaxed);
    v.ack_offset = r.ack_offset;
    v.lag_s = std::max<int64_t>(0, (now - r.ack_ms) / 1000);
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace prefixd::commands
