// Dispatcher: the one interface through which the network layer reaches the command layer.
// Its methods are called on the io thread that owns the connection in question.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "protocol/limits.h"
#include "protocol/reply_writer.h"
#include "protocol/request.h"
#include "server_api/client_state.h"

namespace prefixd::server {

class Dispatcher {
 public:
  virtual ~Dispatcher() = default;

  // A new connection. Returns an empty string to accept it, or the error reply (without '-')
  // to send before closing it, e.g. when maxclients is reached.
  virtual std::string OnConnect(const std::shared_ptr<ClientState>& client) = 0;
  virtual void OnDisconnect(const std::shared_ptr<ClientState>& client) = 0;

  // Runs one request and queues its reply. The client may ask to be closed through
  // client.close_after_reply.
  virtual void Dispatch(ClientState& client, protocol::Request& request,
                        protocol::ReplyWriter& reply) = 0;

  // Asked before a large argument arrives, with the arguments received so far: an error reply
  // (without '-') refuses the request without receiving the rest (a cluster redirect), empty
  // lets it go on.
  virtual std::string RefuseBeforeLargeArgument(const ClientState& /*client*/,
                                                const protocol::Request& /*partial*/) {
    return {};
  }
  // Answers a request refused that way, in its place among the replies; `partial` holds the
  // arguments received before the refusal.
  virtual void Refuse(ClientState& /*client*/, const protocol::Request& /*partial*/,
                      protocol::ReplyWriter& reply, std::string_view refusal) {
    reply.Error(refusal);
  }

  // The parser limits that apply to this client now (they change with authentication).
  virtual protocol::ParserLimits LimitsFor(const ClientState& client) const = 0;

  // Calls `resume` (from any thread) once log sequence number `lsn` is durable; returns true
  // instead, without calling it, when it already is.
  virtual bool WhenDurable(uint64_t lsn, std::function<void()> resume) = 0;
  // Whether `lsn` is durable now, after writing the log on this thread where the policy lets a
  // caller do so: the common case, answered without arranging a resumption.
  virtual bool DurableNow(uint64_t lsn) = 0;
  // Whether `lsn` is durable already; writes nothing.
  virtual bool IsDurable(uint64_t lsn) const = 0;

  // Seconds a client may stay idle (0: forever) and the unread-reply limit, read per connection.
  virtual int64_t IdleTimeoutSeconds() const = 0;
  virtual uint64_t OutputBufferLimit() const = 0;
  // The replication stream a replica may leave unsent before it is disconnected.
  virtual uint64_t ReplicaOutputBufferLimit() const { return OutputBufferLimit(); }
};

}  // namespace prefixd::server
