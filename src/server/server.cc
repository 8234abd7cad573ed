#include "server/server.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asio.hpp>

#include "server/connection.h"

namespace prefixd::server {
namespace {

std::string Describe(const asio::ip::tcp::endpoint& ep) {
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

}  // namespace

struct Server::Impl {
  Impl(ServerOptions o, Dispatcher& d) : options(std::move(o)), dispatcher(d) {
    int n = std::max(1, options.io_threads);
    for (int i = 0; i < n; ++i) contexts.push_back(std::make_unique<asio::io_context>(1));
  }

  asio::io_context& NextContext() { return *contexts[next++ % contexts.size()]; }

  asio::awaitable<void> AcceptTcp(asio::ip::tcp::acceptor& acceptor) {
    while (acceptor.is_open()) {
      asio::error_code ec;
      auto& context = NextContext();
      asio::ip::tcp::socket socket(context);
      co_await acceptor.async_accept(socket, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (ec == asio::error::operation_aborted) co_return;
        spdlog::warn("Accepting a client connection failed: {}", ec.message());
        continue;
      }
      socket.set_option(asio::ip::tcp::no_delay(true), ec);
      std::string addr = Describe(socket.remote_endpoint(ec));
      std::string laddr = Describe(socket.local_endpoint(ec));
      // The socket already belongs to its io context; the connection starts there.
      asio::post(context, [this, s = std::move(socket), addr, laddr]() mutable {
        StartConnection(std::move(s), dispatcher, addr, laddr, false);
      });
    }
  }

  asio::awaitable<void> AcceptUnix(asio::local::stream_protocol::acceptor& acceptor) {
    while (acceptor.is_open()) {
      asio::error_code ec;
      auto& context = NextContext();
      asio::local::stream_protocol::socket socket(context);
      co_await acceptor.async_accept(socket, asio::redirect_error(asio::use_awaitable, ec));
      if (ec) {
        if (ec == asio::error::operation_aborted) co_return;
        spdlog::warn("Accepting a unix socket connection failed: {}", ec.message());
        continue;
      }
      std::string path = options.unix_socket + ":0";
      asio::post(context, [this, s = std::move(socket), path]() mutable {
        StartConnection(std::move(s), dispatcher, path, path, true);
      });
    }
  }

  ServerOptions options;
  Dispatcher& dispatcher;
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::atomic<size_t> next{0};
  std::unique_ptr<asio::ip::tcp::acceptor> tcp;
  std::unique_ptr<asio::local::stream_protocol::acceptor> unix_acceptor;
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

void Server::Start() {
  auto& o = impl_->options;
  auto& accept_context = *impl_->contexts[0];
  if (o.port != 0 || o.unix_socket.empty()) {
    asio::ip::tcp::endpoint endpoint(asio::ip::make_address(o.bind), o.port);
    auto acceptor = std::make_unique<asio::ip::tcp::acceptor>(accept_context);
    acceptor->open(endpoint.protocol());
    acceptor->set_option(asio::socket_base::reuse_address(true));
    asio::error_code ec;
    acceptor->bind(endpoint, ec);
    if (ec) throw std::system_error(ec, "bind " + Describe(endpoint));
    acceptor->listen(o.backlog);
    bound_port_ = acceptor->local_endpoint().port();
    impl_->tcp = std::move(acceptor);
    asio::co_spawn(accept_context, impl_->AcceptTcp(*impl_->tcp), asio::detached);
  }
  if (!o.unix_socket.empty()) {
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
    asio::co_spawn(accept_context, impl_->AcceptUnix(*impl_->unix_acceptor), asio::detached);
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
