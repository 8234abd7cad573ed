// Connection: one client socket's read → parse → dispatch → gather-write loop, as a coroutine on
// the io thread that accepted it, over plain TCP, a unix socket or TLS. Large arguments are read
// straight into their final buffer and large replies are written from the stored buffer (over
// TLS, the stored buffer is what gets encrypted). Only its own io thread touches it; the kill
// hook it installs in its ClientState may be called from anywhere.
#pragma once

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <memory>
#include <string>

#include "server_api/dispatcher.h"

namespace prefixd::server {

// Who is on the other end, as the acceptor saw it.
struct Peer {
  std::string addr;   // "ip:port", or "path:0" for a unix socket
  std::string laddr;  // the local end, same form
  bool unix_socket = false;
  bool local = false;  // loopback or unix socket
};

// Starts serving `socket` (a connected tcp or unix stream socket) on its executor.
template <typename Socket>
void StartConnection(Socket socket, Dispatcher& dispatcher, Peer peer);

// Starts serving a TCP socket accepted on the TLS port: the handshake comes first (bounded in
// time); `context` is kept alive for as long as the connection lives.
void StartTlsConnection(asio::ip::tcp::socket socket, std::shared_ptr<asio::ssl::context> context,
                        Dispatcher& dispatcher, Peer peer);

}  // namespace prefixd::server
