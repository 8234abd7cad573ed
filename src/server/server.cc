#include "server/server.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <asio.hpp>
#include <asio/ssl.hpp>
#include <cerrno>

#include "server/connection.h"
#include "server/log_limiter.h"

namespace prefixd::server {
namespace {

std::string Describe(const asio::ip::tcp::endpoint& ep) {
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

// Out of descriptors (or kernel memory) for a new socket: the listening socket stays readable,
// so accepting again at once would spin. Wait instead, longer each time, until one succeeds.
bool IsResourceExhaustion(const asio::error_code& ec) {
  if (ec.category() != asio::system_category()) return false;
  int e = ec.value();
  return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}
constexpr auto kMinAcceptBackoff = std::chrono::milliseconds(10);
constexpr auto kMaxAcceptBackoff = std::chrono::milliseconds(1000);

LogLimiter accept_failure_log(1, std::chrono::seconds(10));

}  // namespace

struct Server::Impl {
  Impl(ServerOptions o, Dispatcher& d) : options(std::move(o)), dispatcher(d) {
    int n = std::max(1, options.io_threads);
    for (int i = 0; i < n; ++i) contexts.push_back(std::make_unique<asio::io_context>(1));
  }

  asio::io_context& NextContext() { return *contexts[next++ % contexts.size()]; }

  std::shared_ptr<asio::ssl::context> CurrentTls() {
    std::lock_guard lock(tls_mu);
    return tls;
  }

  // Accepts on `acceptor` until it is closed; `start(socket, context)` hands each new socket to
  // its io context.
  template <typename Acceptor, typename Start>
  asio::awaitable<void> AcceptLoop(Acceptor& acceptor, std::string_view what, Start start) {
    auto backoff = kMinAcceptBackoff;
    asio::steady_timer pause(acceptor.get_executor());
    while (acceptor.is_open()) {
      asio::error_code ec;
      auto& context = NextContext();
      typename Acceptor::protocol_type::socket socket(context);
      co_await acceptor.async_accept(socket, asio::redirect_error(asio::use_awaitable, ec));
      if (!ec) {
        backoff = kMinAcceptBackoff;
        start(std::move(socket), context);
        continue;
      }
      if (ec == asio::error::operation_aborted) co_return;
      uint64_t suppressed = 0;
      bool exhausted = IsResourceExhaustion(ec);
      if (accept_failure_log.Allow(&suppressed)) {
        spdlog::warn(
            "Accepting a {} connection failed: {}{}{}", what, ec.message(),
            exhausted ? "; retrying with backoff (raise 'ulimit -n' or lower maxclients)" : "",
            suppressed ? fmt::format(" ({} more failures not logged)", suppressed) : "");
      }
      if (!exhausted) continue;
      pause.expires_after(backoff);
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      backoff = std::min(backoff * 2, kMaxAcceptBackoff);
    }
  }

  static Peer TcpPeer(asio::ip::tcp::socket& socket) {
    asio::error_code ec;
    socket.set_option(asio::ip::tcp::no_delay(true), ec);
    Peer peer;
    auto remote = socket.remote_endpoint(ec);
    peer.addr = Describe(remote);
    peer.laddr = Describe(socket.local_endpoint(ec));
    auto address = remote.address();
    // An IPv4 client on a dual-stack socket shows up as ::ffff:127.0.0.1.
    if (address.is_v6() && address.to_v6().is_v4_mapped()) {
      address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
    }
    peer.local = !ec && address.is_loopback();
    return peer;
  }

  void ListenTcp(uint16_t port, bool tls) {
    auto& accept_context = *contexts[0];
    asio::ip::tcp::endpoint endpoint(asio::ip::make_address(options.bind), port);
    auto acceptor = std::make_unique<asio::ip::tcp::acceptor>(accept_context);
    acceptor->open(endpoint.protocol());
    acceptor->set_option(asio::socket_base::reuse_address(true));
    asio::error_code ec;
    acceptor->bind(endpoint, ec);
    if (ec) throw std::system_error(ec, "bind " + Describe(endpoint));
    acceptor->listen(options.backlog);
    auto& slot = tls ? tls_acceptor : tcp;
    slot = std::move(acceptor);
    if (!tls) {
      asio::co_spawn(accept_context,
                     AcceptLoop(*slot, "client",
                                [this](asio::ip::tcp::socket s, asio::io_context& context) {
                                  // The socket already belongs to its io context; the
                                  // connection starts there.
                                  asio::post(context, [this, s = std::move(s)]() mutable {
                                    Peer peer = TcpPeer(s);
                                    StartConnection(std::move(s), dispatcher, std::move(peer));
                                  });
                                }),
                     asio::detached);
      return;
    }
    asio::co_spawn(accept_context,
                   AcceptLoop(*slot, "TLS client",
                              [this](asio::ip::tcp::socket s, asio::io_context& context) {
                                asio::post(context, [this, s = std::move(s)]() mutable {
                                  Peer peer = TcpPeer(s);
                                  StartTlsConnection(std::move(s), CurrentTls(), dispatcher,
                                                     std::move(peer));
                                });
                              }),
                   asio::detached);
  }

  ServerOptions options;
  Dispatcher& dispatcher;
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::atomic<size_t> next{0};
  std::unique_ptr<asio::ip::tcp::acceptor> tcp;
  std::unique_ptr<asio::ip::tcp::acceptor> tls_acceptor;
  std::unique_ptr<asio::local::stream_protocol::acceptor> unix_acceptor;
  std::mutex tls_mu;
  std::shared_ptr<asio::ssl::context> tls;
  std::vector<std::thread> threads;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
};

Server::Server(ServerOptions options, Dispatcher& dispatcher)
    : impl_(std::make_unique<Impl>(std::move(options), dispatcher)) {}

Server::~Server() {
  Stop();
  for (auto& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
}

std::string Server::ConfigureTls(const TlsOptions& options) {
  std::string error;
  auto context = MakeTlsContext(options, &error);
  if (!context) return error;
  std::lock_guard lock(impl_->tls_mu);
  impl_->tls = std::move(context);
  return {};
}

void Server::Start() {
  auto& o = impl_->options;
  if (o.port == 0 && o.tls_port == 0 && o.unix_socket.empty()) {
    throw std::runtime_error("Configured to not listen anywhere, exiting.");
  }
  if (o.tls_port != 0 && !impl_->CurrentTls()) {
    throw std::runtime_error("tls-port is set but TLS is not configured");
  }
  if (o.port != 0) {
    impl_->ListenTcp(o.port, false);
    bound_port_ = impl_->tcp->local_endpoint().port();
  }
  if (o.tls_port != 0) {
    impl_->ListenTcp(o.tls_port, true);
    bound_tls_port_ = impl_->tls_acceptor->local_endpoint().port();
  }
  if (!o.unix_socket.empty()) {
    auto& accept_context = *impl_->contexts[0];
    ::unlink(o.unix_socket.c_str());
    auto acceptor = std::make_unique<asio::local::stream_protocol::acceptor>(accept_context);
    asio::local::stream_protocol::endpoint endpoint(o.unix_socket);
    acceptor->open(endpoint.protocol());
    asio::error_code ec;
    acceptor->bind(endpoint, ec);
    if (ec) throw std::system_error(ec, "bind unix socket " + o.unix_socket);
    acceptor->listen(o.backlog);
    if (o.unix_socket_perm != 0) ::chmod(o.unix_socket.c_str(), o.unix_socket_perm);
    impl_->unix_acceptor = std::move(acceptor);
    std::string path = o.unix_socket + ":0";
    asio::co_spawn(
        accept_context,
        impl_->AcceptLoop(
            *impl_->unix_acceptor, "unix socket",
            [this, path](asio::local::stream_protocol::socket s, asio::io_context& context) {
              asio::post(context, [this, s = std::move(s), path]() mutable {
                Peer peer{path, path, true, true};
                StartConnection(std::move(s), impl_->dispatcher, std::move(peer));
              });
            }),
        asio::detached);
  }
}

void Server::Run() {
  for (auto& c : impl_->contexts) impl_->guards.push_back(asio::make_work_guard(*c));
  for (size_t i = 1; i < impl_->contexts.size(); ++i) {
    impl_->threads.emplace_back([c = impl_->contexts[i].get()] { c->run(); });
  }
  impl_->contexts[0]->run();
  for (auto& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
  impl_->threads.clear();
}

void Server::Stop() {
  for (auto& c : impl_->contexts) c->stop();
  if (!impl_->options.unix_socket.empty()) ::unlink(impl_->options.unix_socket.c_str());
}

}  // namespace prefixd::server
