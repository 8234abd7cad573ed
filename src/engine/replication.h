// Replication: the primary side of Redis's replication. It owns the replicas attached by SYNC or
// PSYNC, the one stream of write commands they all receive (in the forms Redis 7.0 propagates,
// a SELECT before a command of another database than the last), the stream's id and offset, and
// the order lock that makes the stream's order the order of the changes. Thread-safe: io threads
// feed it, the active expiry thread feeds it (expired keys) and pings the replicas.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server_api/client_state.h"

namespace prefixd::commands {

class Replication {
 public:
  Replication();

  // Whether a replica is attached: one relaxed load, the only cost on the write path otherwise.
  bool active() const { return active_.load(std::memory_order_relaxed); }
  const std::string& replid() const { return replid_; }
  uint64_t offset() const;

  // Held around a change that is fed to the stream (a write command, an expired or evicted key's
  // deletion) while replicas are attached, so two changes reach the stream in the order they
  // were applied. Taken after the exec gate and before any key lock; a thread that holds it
  // already takes nothing more. Attach runs under the whole exec gate, so whether a replica is
  // attached cannot change while a command runs.
  class OrderHold {
   public:
    OrderHold(Replication& replication, bool wanted);
    ~OrderHold();
    OrderHold(const OrderHold&) = delete;
    OrderHold& operator=(const OrderHold&) = delete;
    // Whether the change is to be fed (a replica is attached).
    bool feeding() const { return feeding_; }

   private:
    Replication* owner_ = nullptr;  // non-null: this hold took the lock
    bool feeding_ = false;
  };

  // Appends one command for database `db` (-1: any, as PING) to the stream. The caller holds an
  // OrderHold (or the whole exec gate).
  void Feed(int db, std::span<const std::string_view> argv);
  void Feed(int db, std::initializer_list<std::string_view> argv) {
    Feed(db, std::span<const std::string_view>(argv.begin(), argv.size()));
  }
  // The same for a command already encoded (protocol::EncodeCommand).
  void FeedCommand(int db, std::string command);

  // While it lives, what this thread feeds is collected and then fed as one MULTI ... EXEC block
  // (EXEC's queue, run under the whole exec gate). Nothing is fed when nothing was collected.
  class Transaction {
   public:
    explicit Transaction(Replication& replication);
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;

   private:
    Replication& replication_;
    bool outer_ = false;
  };

  // Adds `client` as a replica whose stream starts now, at offset(); the caller holds the whole
  // exec gate and has just made the RDB of this moment. What its REPLCONF said of itself
  // (listening port, address) is in its ClientState.
  void Attach(const std::shared_ptr<server::ClientState>& client);
  void Detach(uint64_t client_id);
  // REPLCONF ACK: the offset the replica has processed.
  void Ack(uint64_t client_id, uint64_t offset);

  // Sends PING to the replicas every `period_s` seconds (Redis's repl-ping-replica-period); called
  // about ten times a second.
  void Tick(int64_t period_s);

  struct ReplicaView {
    std::string ip;
    int port = 0;
    uint64_t ack_offset = 0;
    int64_t lag_s = 0;
  };
  std::vector<ReplicaView> Replicas() const;

 private:
  struct Replica {
    std::shared_ptr<server::ClientState> client;
    uint64_t ack_offset = 0;
    int64_t ack_ms = 0;
  };
  void FeedEncoded(int db, std::string command);

  const std::string replid_;
  std::atomic<bool> active_{false};
  std::mutex order_mu_;
  mutable std::mutex stream_mu_;  // replicas_, offset_, stream_db_, last_ping_ms_
  std::vector<Replica> replicas_;
  uint64_t offset_ = 0;
  int stream_db_ = -1;  // the database the stream last selected (-1: none since an attach)
  int64_t last_ping_ms_ = 0;
};

}  // namespace prefixd::commands
