// Server: the TCP and unix-socket acceptors and the pool of io threads that run connections.
// Knows no commands: every request goes to the Dispatcher. Start/Run on the main thread;
// Stop may be called from any thread (a signal handler's strand, a SHUTDOWN handler).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/dispatcher.h"

namespace prefixd::server {

struct ServerOptions {
  std::string bind = "127.0.0.1";
  uint16_t port = 1974;  // 0: no TCP listener
  std::string unix_socket;
  int unix_socket_perm = 0;
  int io_threads = 1;
  int backlog = 511;
};

class Server {
 public:
  Server(ServerOptions options, Dispatcher& dispatcher);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listeners; throws std::system_error naming the address on failure.
  void Start();
  // Serves until Stop(); returns after every io thread has finished.
  void Run();
  void Stop();

  // The bound TCP port (useful when options.port was 0... or to confirm the default).
  uint16_t tcp_port() const { return bound_port_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint16_t bound_port_ = 0;
};

}  // namespace prefixd::server
