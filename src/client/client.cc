// prefixd::Client: construction, the connection's life, and the connection/server commands
// (PING, AUTH, and any command through Command()). The other command families are in
// ssm_prefix.cc, vstore.cc and kv_prefix.cc; the plumbing is in connection.h.
#include "prefixd/client.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

#include "connection.h"

namespace prefixd {

using client_internal::MovedFrom;
using client_internal::ParseInteger;

namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// Commands that would break the one-reply-per-request rule, or switch the protocol, are refused
// before anything is sent.
Status CheckCommand(const std::vector<std::string_view>& argv) {
  if (argv.empty()) return Status::InvalidArgument("Command needs a command name");
  const std::string_view name = argv[0];
  for (std::string_view refused :
       {"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "MONITOR", "SYNC", "PSYNC"}) {
    if (EqualsIgnoreCase(name, refused)) {
      return Status::InvalidArgument(std::string(name) +
                                     " streams replies; this request/reply client cannot "
                                     "carry it");
    }
  }
  if (EqualsIgnoreCase(name, "CLIENT") && argv.size() >= 2 && EqualsIgnoreCase(argv[1], "REPLY")) {
    return Status::InvalidArgument(
        "CLIENT REPLY would break the one-reply-per-request rule this client relies on");
  }
  if (EqualsIgnoreCase(name, "HELLO") && argv.size() >= 2 && ParseInteger(argv[1]) == 3) {
    return Status::InvalidArgument("HELLO 3: this client speaks RESP2 only");
  }
  return Status::Ok();
}

}  // namespace

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

Result<Client> Client::Connect(std::string_view host, int port, std::chrono::milliseconds timeout) {
  ClientOptions options;
  options.connect_timeout = timeout;
  options.io_timeout = timeout;
  return Connect(host, port, options);
}

Result<Client> Client::Connect(std::string_view host, int port, const ClientOptions& options) {
  if (port <= 0 || port > 65535) {
    return Status::InvalidArgument("port " + std::to_string(port) + " is not in 1..65535");
  }
  auto impl = std::make_unique<Impl>(false, std::string(host), port, options);
  PREFIXD_RETURN_IF_ERROR(impl->Open());
  return Client(std::move(impl));
}

Result<Client> Client::ConnectUnix(std::string_view path, const ClientOptions& options) {
  auto impl = std::make_unique<Impl>(true, std::string(path), 0, options);
  PREFIXD_RETURN_IF_ERROR(impl->Open());
  return Client(std::move(impl));
}

bool Client::connected() const { return impl_ != nullptr && impl_->connected(); }

std::string_view Client::unix_socket_path() const {
  if (!impl_ || !impl_->unix_socket()) return {};
  return impl_->address();
}

Status Client::Reconnect() { return impl_ ? impl_->Open() : MovedFrom(); }

Status Client::Ping() {
  if (!impl_) return MovedFrom();
  const std::array<std::string_view, 1> args{"PING"};
  PREFIXD_RETURN_IF_ERROR(impl_->Send(args));
  return impl_->reader().ReadStatus("PONG", "PING");
}

Status Client::Auth(std::string_view password) {
  return impl_ ? impl_->Auth({}, password) : MovedFrom();
}

Status Client::Auth(std::string_view username, std::string_view password) {
  if (username.empty()) return Status::InvalidArgument("Auth: empty username");
  return impl_ ? impl_->Auth(username, password) : MovedFrom();
}

Result<Reply> Client::Command(const std::vector<std::string_view>& argv) {
  if (!impl_) return MovedFrom();
  PREFIXD_RETURN_IF_ERROR(CheckCommand(argv));
  PREFIXD_RETURN_IF_ERROR(impl_->Send(argv));
  auto reply = impl_->reader().ReadGeneric(impl_->hiredis_reader());
  if (reply.ok() && EqualsIgnoreCase(argv[0], "QUIT")) {
    static_cast<void>(impl_->Fail(Status::Unavailable("connection closed by QUIT")));
  }
  return reply;
}

}  // namespace prefixd
