// ClientState: what the command layer may know and change about one connection (identity,
// protocol version, authentication, names, counters), and the owner of the command layer's own
// state of it (engine/session.h). Created by the connection that owns it; fields marked atomic
// may be read by other threads (CLIENT LIST); the rest only by the owner.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace prefixd::server {

// What the command layer keeps per connection: opaque here, owned with the connection's state.
struct CommandSession {
  virtual ~CommandSession() = default;
};

struct ClientState {
  uint64_t id = 0;
  std::string addr;  // "ip:port" or "path:0" for unix sockets
  std::string laddr;
  int fd = -1;
  bool unix_socket = false;
  // On the loopback interface or the unix socket: what protected mode and the "local" value of
  // enable-protected-configs / enable-debug-command allow.
  bool local = false;
  bool tls = false;
  std::chrono::steady_clock::time_point created = std::chrono::steady_clock::now();

  // Owner thread only.
  bool authenticated = false;
  bool close_after_reply = false;  // QUIT: reply, then close
  // The highest log sequence number this client's queued replies depend on: they are sent only
  // once it is durable (0: nothing to wait for).
  uint64_t reply_needs_lsn = 0;
  // Descriptors to pass to the client (SCM_RIGHTS, unix socket only) with the next bytes written:
  // owned here until the connection sends them with its next write, or closes them unsent.
  std::vector<int> fds_to_send;
  // Descriptors the client passed (SCM_RIGHTS, unix socket only), oldest first, for a command to
  // claim (SHM.SET): at most kMaxReceivedFds wait; the connection closes those no command took
  // once the requests that came with them have run, and all of them at disconnect. Received only
  // once `accepts_fds` (SHM.HELLO passed the peer's uid): before that the kernel discards them.
  static constexpr size_t kMaxReceivedFds = 16;
  std::vector<int> fds_received;
  bool accepts_fds = false;
  // The command layer's state of this connection (MULTI, CLIENT REPLY, ASKING: engine/session.h),
  // made by the command layer when it first needs it; owner thread only.
  std::unique_ptr<CommandSession> session;

  // Read by CLIENT LIST/INFO on any thread; written by the owner thread.
  std::atomic<int> resp{2};
  // The database SELECT chose (0 until then); CLIENT LIST reads it from other threads.
  std::atomic<int> db{0};
  // CLIENT LIST's multi=: commands queued since MULTI, -1 outside a transaction.
  std::atomic<int> multi_count{-1};
  // CLIENT LIST's multi-mem: bytes the queued requests hold.
  std::atomic<uint64_t> multi_bytes{0};
  std::atomic<int64_t> last_interaction_ms{0};
  // Memory figures (server/connection_memory.h): CLIENT LIST's qbuf, qbuf-free, argv-mem,
  // omem and tot-mem, summed in INFO's mem_clients_normal.
  std::atomic<uint64_t> query_buffer_bytes{0};
  std::atomic<uint64_t> query_buffer_free{0};
  std::atomic<uint64_t> argv_bytes{0};
  std::atomic<uint64_t> output_bytes{0};
  std::atomic<uint64_t> total_bytes{0};
  // This client's share of memory::ClientBytes() (total_bytes less values sent by reference).
  std::atomic<uint64_t> budget_bytes{0};

  // A replica (SYNC, PSYNC): CLIENT LIST's flag S; the stream is pushed to it, and past the
  // replica output limit it is disconnected instead of losing bytes. REPLCONF listening-port
  // and ip-address are what it said of itself (ROLE, INFO replication).
  std::atomic<bool> replica{false};
  std::atomic<int> replica_listening_port{0};

  // Names change rarely and are read from other threads: behind a mutex.
  std::atomic<uint64_t> net_input_bytes{0};
  std::atomic<uint64_t> net_output_bytes{0};

  mutable std::mutex names_mu;
  std::string name;
  std::string lib_name;
  std::string lib_version;
  std::string replica_ip;
  // Full name of the last command ("client|list"); points into the command table, which
  // outlives every client.
  std::atomic<const char*> last_command{"NULL"};

  // Closes the connection from any thread (CLIENT KILL); does nothing once it has closed. The
  // hooks are read and replaced under a mutex: a kill or a push may race the connection's close.
  void Kill() const {
    std::function<void()> hook;
    {
      std::lock_guard lock(hooks_mu_);
      hook = kill_hook_;
    }
    if (hook) hook();
  }
  // Queues bytes to send outside any reply (MONITOR's lines), from any thread, in order with the
  // connection's replies; false once the connection has closed.
  bool Push(std::string bytes) const {
    std::function<void(std::string)> hook;
    {
      std::lock_guard lock(hooks_mu_);
      hook = push_hook_;
    }
    if (!hook) return false;
    hook(std::move(bytes));
    return true;
  }
  // Set by the connection when it starts serving; cleared (nullptr) when it closes.
  void SetKillHook(std::function<void()> hook) {
    std::lock_guard lock(hooks_mu_);
    kill_hook_ = std::move(hook);
  }
  void SetPushHook(std::function<void(std::string)> hook) {
    std::lock_guard lock(hooks_mu_);
    push_hook_ = std::move(hook);
  }

 private:
  mutable std::mutex hooks_mu_;
  std::function<void()> kill_hook_;
  std::function<void(std::string)> push_hook_;
};

}  // namespace prefixd::server
