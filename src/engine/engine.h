// Engine: the state every command handler shares: settings, the databases, the durability log,
// replication, watches, the exec and mutation gates, the key-lock stripes, the table of connected
// clients and monitors, server statistics and the value receipt, the cluster view, the registry,
// the shutdown hook and the active expiry thread. Thread-safe; handlers on any io thread use it.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cluster/cluster_state.h"
#include "common/settings.h"
#include "common/striped_counter.h"
#include "engine/command_stats.h"
#include "engine/exec_gate.h"
#include "engine/prefix_receipt.h"
#include "engine/replication.h"
#include "engine/watches.h"
#include "persist/durability.h"
#include "persist/logless_snapshots.h"
#include "server_api/client_state.h"
#include "store/database.h"
#include "store/keyspace.h"
#include "store/prefix_index.h"
#include "store/state_store.h"
#include "store/vector_store.h"

namespace prefixd::commands {

class Registry;

inline constexpr std::string_view kPrefixdVersion = "0.1.0";
// The Redis version reported to clients (HELLO, INFO redis_version): the wire behaviour we match.
inline constexpr std::string_view kRedisCompatVersion = "7.0.15";

struct ServerStats {
  std::atomic<uint64_t> total_connections{0};
  std::atomic<uint64_t> rejected_connections{0};
  // Bumped on every request: striped so io threads do not fight over one cache line.
  StripedCounter total_commands;
  StripedCounter rejected_calls;
  StripedCounter keyspace_hits;
  StripedCounter keyspace_misses;
  std::atomic<uint64_t> expired_keys{0};
  std::atomic<uint64_t> evicted_keys{0};
  // Eviction candidates passed over because a lease held their bytes (docs/shm-transport.md).
  std::atomic<uint64_t> shm_eviction_skips{0};
  // The disk tier: sessions turned cold by memory eviction, and cold keys maxdisk deleted.
  std::atomic<uint64_t> cold_evictions{0};
  std::atomic<uint64_t> disk_evicted_keys{0};
  // Traffic of clients that have disconnected; live clients carry their own counters.
  std::atomic<uint64_t> closed_net_input{0};
  std::atomic<uint64_t> closed_net_output{0};
  std::atomic<uint64_t> peak_memory{0};
  // Error replies by code (INFO errorstats, total_error_replies).
  ErrorStats errors;
};

class Engine {
 public:
  explicit Engine(Settings& settings);

  Settings& settings() { return settings_; }
  const Settings& settings() const { return settings_; }
  // The numbered databases (SELECT); each holds its own stores and key directory.
  store::Databases& databases() { return databases_; }
  const store::Databases& databases() const { return databases_; }
  store::Database& database(size_t index) { return databases_.At(index); }
  PrefixReceipt& receipt() { return receipt_; }
  ServerStats& stats() { return stats_; }
  // Taken shared by every change of stored state and exclusively by FLUSHALL, so that no write
  // lands between FLUSHALL's log record and the clear of the stores.
  std::shared_mutex& mutation_gate() { return mutation_gate_; }
  // Striped key locks: a string command's read-modify-write (INCR, APPEND, SET NX|GET, MSETNX)
  // holds the stripes of its keys, so it is one step against every other command that does.
  // Taken before any other lock, several only in ascending stripe order (commands::KeyLocks).
  static constexpr size_t kKeyLockStripes = 1024;
  static size_t KeyLockStripe(std::string_view key);
  std::mutex& key_lock(size_t stripe) { return key_locks_[stripe]; }
  // Held by every command while it runs, by EXEC exclusively (engine/exec_gate.h).
  ExecGate& exec_gate() { return exec_gate_; }
  // WATCH's keys; the mutation path reports changes to it.
  Watches& watches() { return watches_; }
  // The replicas and the stream of changes they receive (SYNC, PSYNC).
  Replication& replication() { return replication_; }
  // Null when appendonly is off.
  persist::Durability* durability() { return durability_.get(); }
  void set_durability(std::unique_ptr<persist::Durability> d) { durability_ = std::move(d); }
  // Null unless appendonly is off: then SAVE and BGSAVE write snapshots through it.
  persist::LoglessSnapshots* logless_snapshots() { return logless_snapshots_.get(); }
  void set_logless_snapshots(std::unique_ptr<persist::LoglessSnapshots> s) {
    logless_snapshots_ = std::move(s);
  }

  // Client table. AddClient assigns the id.
  void AddClient(const std::shared_ptr<server::ClientState>& client);
  void RemoveClient(const server::ClientState& client);
  std::vector<std::shared_ptr<server::ClientState>> Clients() const;
  size_t ClientCount() const;
  uint64_t NextClientId() { return next_client_id_.fetch_add(1) + 1; }

  // MONITOR: clients that receive a line for every command run. The count is read on every
  // command, the list only while it is not zero.
  void AddMonitor(uint64_t client_id);
  bool HasMonitors() const { return monitor_count_.load(std::memory_order_relaxed) != 0; }
  // Sends `line` to every monitor but `from`.
  void FeedMonitors(const server::ClientState& from, const std::string& line);

  // Bytes held for stored values and their bookkeeping, the figure maxmemory limits: every
  // database's, plus leased bytes no database holds any more (engine/shm_leases.h).
  uint64_t UsedMemory() const;
  // Raises used_memory_peak to `used` when it is higher; returns the peak.
  uint64_t NotePeakMemory(uint64_t used);
  static uint64_t DatabaseMemory(const store::Database& db);
  // The stores' figures summed over every database (INFO).
  store::StoreStats StateStats() const;
  store::VectorStoreStats VectorStats() const;

  std::chrono::system_clock::time_point started() const { return started_; }
  int64_t UptimeSeconds() const;

  // Installed by the application; asks the server to stop after the current replies.
  void set_shutdown_hook(std::function<void()> hook) { shutdown_hook_ = std::move(hook); }
  void RequestShutdown();

  // Starts active expiry: hz times a second, keys past their expiry are deleted through the
  // mutation path. Call once the durability log (if any) is installed; stopped by the destructor.
  // Defined beside the expiry cycle (engine/memory_policy.cc).
  void StartActiveExpiry();
  // Stops it and waits for a pass under way; before the durability log is closed.
  void StopActiveExpiry();

  // The command table, for COMMAND and HELP replies; set by the Registry that serves this engine.
  const Registry* registry = nullptr;
  // This node's view of the cluster when cluster-enabled is yes, else null. Set at start-up.
  std::unique_ptr<cluster::ClusterState> cluster;
  // Config file path, for INFO.
  std::string config_file;
  std::string executable;
  int io_threads = 1;

 private:
  Settings& settings_;
  PrefixReceipt receipt_;
  ServerStats stats_;
  mutable std::mutex clients_mu_;
  std::map<uint64_t, std::weak_ptr<server::ClientState>> clients_;
  std::atomic<uint64_t> next_client_id_{0};
  std::vector<uint64_t> monitors_;  // client ids, under clients_mu_
  std::atomic<size_t> monitor_count_{0};
  std::chrono::system_clock::time_point started_ = std::chrono::system_clock::now();
  std::function<void()> shutdown_hook_;
  std::shared_mutex mutation_gate_;
  ExecGate exec_gate_;
  Replication replication_;
  Watches watches_;
  store::Databases databases_;
  std::array<std::mutex, kKeyLockStripes> key_locks_;
  // Declared after the stores: destroyed first, syncing the log while the store it logs is still
  // alive.
  std::unique_ptr<persist::Durability> durability_;
  std::unique_ptr<persist::LoglessSnapshots> logless_snapshots_;
  // Declared last: stopped before anything it deletes through goes away.
  std::jthread active_expiry_;
};

// What maxmemory is compared with: the stores and the keyspace, plus what clients' buffers hold
// beyond values they send by reference (common/client_memory.h).
uint64_t CountedMemory(const Engine& engine);

// The database the command's client has selected.
struct Context;
store::Database& Db(Context& ctx);

}  // namespace prefixd::commands
