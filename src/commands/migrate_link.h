// MigrateLink: MIGRATE's connection to the target server: a blocking TCP connect, gather writes
// of stored buffers, and reading whole replies, each wait bounded by MIGRATE's timeout. Owned by
// the io thread running MIGRATE, which it blocks while it waits (Redis blocks its whole server).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "common/bytes.h"
#include "protocol/resp_value.h"

namespace prefixd::commands {

class MigrateLink {
 public:
  // Connects to host:port (a name or an address), waiting at most `timeout`; null, with `error`
  // saying why, when it cannot.
  static std::unique_ptr<MigrateLink> Connect(const std::string& host, const std::string& port,
                                              std::chrono::milliseconds timeout,
                                              std::string& error);
  ~MigrateLink();
  MigrateLink(const MigrateLink&) = delete;
  MigrateLink& operator=(const MigrateLink&) = delete;

  // Sends the pieces in order with gather writes, straight from their buffers. False when the
  // connection fails or no byte could be written for `timeout`.
  bool Send(std::span<const Bytes> pieces);
  // The next reply whole; nullopt when the connection fails, closes, sends a malformed reply or
  // nothing arrives for `timeout`.
  std::optional<protocol::RespValue> Read();

 private:
  MigrateLink(int fd, std::chrono::milliseconds timeout) : fd_(fd), timeout_(timeout) {}
  // Waits until the socket is ready for `events`; false on timeout or error.
  bool Wait(short events) const;

  int fd_;
  std::chrono::milliseconds timeout_;
  protocol::ReplyParser reader_;
  std::string unread_;  // bytes received past the last reply
};

}  // namespace prefixd::commands
