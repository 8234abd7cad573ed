// Connection: one client socket's read → parse → dispatch → gather-write loop, as a coroutine on
// the io thread that accepted it. Large arguments are read straight into their final buffer and
// large replies are written from the stored buffer. Only its own io thread touches it; Close()
// may be posted from anywhere.
#pragma once

#include <asio.hpp>
#include <memory>

#include "server/dispatcher.h"

namespace prefixd::server {

// Starts serving `socket` (a connected tcp or unix stream socket) on its executor.
template <typename Socket>
void StartConnection(Socket socket, Dispatcher& dispatcher, std::string addr, std::string laddr,
                     bool unix_socket);

}  // namespace prefixd::server
