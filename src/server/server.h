// Server: the TCP, TLS and unix-socket acceptors and the pool of io threads that run
// connections. Knows no commands: every request goes to the Dispatcher. Start/Run on the main
// thread; Stop and ConfigureTls may be called from any thread (a signal handler's strand, a
// CONFIG SET or SHUTDOWN handler).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/tls.h"
#include "server_api/dispatcher.h"

namespace prefixd::server {

struct ServerOptions {
  std::string bind = "127.0.0.1";
  uint16_t port = 1974;   // 0: no plain TCP listener
  uint16_t tls_port = 0;  // 0: no TLS listener
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

  // Binds the listeners; throws std::system_error naming the address on failure, or
  // std::runtime_error when no listener is configured or TLS cannot be set up. With a TLS port,
  // ConfigureTls must have succeeded first.
  void Start();
  // Builds the TLS context from `options`; on success new TLS clients get it (open ones keep
  // theirs). Returns an error text, or empty on success (the previous context stays then).
  std::string ConfigureTls(const TlsOptions& options);
  // Serves until Stop(); returns after every io thread has finished.
  void Run();
  void Stop();

  // The bound TCP port (useful when options.port was 0... or to confirm the default).
  uint16_t tcp_port() const { return bound_port_; }
  uint16_t tls_port() const { return bound_tls_port_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint16_t bound_port_ = 0;
  uint16_t bound_tls_port_ = 0;
};

}  // namespace prefixd::server
