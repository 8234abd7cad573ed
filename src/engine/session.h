// Session: one connection's command-level state (its MULTI queue and WATCH mark, CLIENT REPLY's
// switches, ASKING and READONLY), made on first use and owned by the connection's ClientState.
// Only the connection's io thread touches it; what CLIENT LIST reads from other threads
// (multi=, multi-mem) stays in ClientState's atomics.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "protocol/request.h"
#include "server_api/client_state.h"

namespace prefixd::commands {

class ShmLeaseTable;

struct Session final : server::CommandSession {
  // MULTI: the requests queued for EXEC, the union of their commands' flags (EXEC is refused
  // under OOM or MISCONF as they would be), and whether one was refused while queueing (EXEC
  // then answers EXECABORT). `watching`: WATCH named keys (Watches holds them).
  bool in_multi = false;
  bool multi_refused = false;
  uint32_t multi_flags = 0;
  std::vector<protocol::Request> multi_queue;
  bool watching = false;

  // CLIENT REPLY: OFF drops every reply; SKIP drops the next command's (and its own).
  bool reply_off = false;
  bool reply_skip = false;       // the command being run gets no reply
  bool reply_skip_next = false;  // set by CLIENT REPLY SKIP: the next command gets none

  // Cluster mode: ASKING lets the next command reach a slot being imported (asking_next is set
  // by ASKING, asking covers the command after it); READONLY is kept for clients that send it
  // (every node is a master, so it changes no routing).
  bool asking = false;
  bool asking_next = false;
  bool readonly = false;

  // Same-host transport (engine/shm_leases.h): the arenas SHM.HELLO has passed (ids below this),
  // and the values this connection holds leases on, made by its first SHM.GET.
  uint32_t shm_arenas_sent = 0;
  bool shm_hello = false;
  std::shared_ptr<ShmLeaseTable> shm_leases;
};

// The session of `client`, made the first time it is asked for.
inline Session& SessionOf(server::ClientState& client) {
  if (client.session == nullptr) client.session = std::make_unique<Session>();
  return static_cast<Session&>(*client.session);
}

// The session of `client` as it stands: a fresh one's state when none was made yet.
inline const Session& SessionOf(const server::ClientState& client) {
  static const Session fresh;
  return client.session == nullptr ? fresh : static_cast<const Session&>(*client.session);
}

}  // namespace prefixd::commands
