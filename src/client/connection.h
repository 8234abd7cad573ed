// Client::Impl: one connection of prefixd::Client — the hiredis context, the request buffer
// (resp_encoding.h), the reply reader (reply_reader.h), the saved AUTH, and the rule that an
// out-of-step byte stream closes the connection. One thread at a time, like the Client.
//
// The command families build on it, each in its own file: connection and server commands
// (client.cc), SSM.PREFIX.* (ssm_prefix.cc), the V-store V.* (vstore.cc), KV.PREFIX.*
// (kv_prefix.cc), and the prefix index (docs/prefix-index.md) next, in prefix_index.cc.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "prefixd/client.h"
#include "reply_reader.h"
#include "resp_encoding.h"

namespace prefixd {

class Client::Impl {
 public:
  Impl(bool unix_socket, std::string address, int port, const ClientOptions& options);

  bool connected() const { return ctx_ != nullptr; }
  bool unix_socket() const { return unix_socket_; }
  const std::string& address() const { return address_; }
  const ClientOptions& options() const { return options_; }
  // The last successful Auth()'s credentials (has_auth false: none).
  bool has_auth() const { return has_auth_; }
  const std::string& username() const { return username_; }
  const std::string& password() const { return password_; }

  // (Re)opens the connection, repeating the last successful Auth().
  Status Open();
  Status Auth(std::string_view username, std::string_view password);

  // kUnavailable, with the reason, once the connection has been closed.
  Status Usable() const;
  // Closes the connection after an error that leaves the byte stream out of step; returns `st`.
  Status Fail(Status st);

  // Queues one request (see RequestBuffer for how long `args` must live).
  void Add(std::span<const std::string_view> args) { out_.Add(args); }
  bool has_queued() const { return !out_.empty(); }
  // Sends everything queued.
  Status Flush();
  // Add + Flush, after checking the connection is usable.
  Status Send(std::span<const std::string_view> args);

  client_internal::ReplyReader& reader() { return in_; }
  redisReader* hiredis_reader() { return ctx_->reader; }

 private:
  struct ContextDeleter {
    void operator()(redisContext* ctx) const { redisFree(ctx); }
  };

  Status SendAuth(std::string_view username, std::string_view password);

  const bool unix_socket_;
  const std::string address_;
  const int port_;
  const ClientOptions options_;

  std::unique_ptr<redisContext, ContextDeleter> ctx_;
  std::string broken_;  // why the last connection was closed
  client_internal::RequestBuffer out_;
  client_internal::ReplyReader in_;

  bool has_auth_ = false;
  std::string username_;
  std::string password_;
};

namespace client_internal {

Status MovedFrom();
Status CheckLayer(uint32_t layer);

inline std::string_view AsChars(std::span<const uint8_t> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace client_internal
}  // namespace prefixd
