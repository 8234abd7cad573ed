#include "server/connection.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "protocol/resp_parser.h"
#include "server/connection_memory.h"

namespace prefixd::server {
namespace {

// Replies are written out once this much is queued, so a long pipeline of requests never makes
// the server hold more than about this much per client (plus one reply).
constexpr size_t kFlushThreshold = 256 * 1024;

template <typename Socket>
class Connection : public std::enable_shared_from_this<Connection<Socket>> {
 public:
  Connection(Socket socket, Dispatcher& dispatcher, std::shared_ptr<ClientState> client)
      : socket_(std::move(socket)), dispatcher_(dispatcher), client_(std::move(client)) {}

  asio::awaitable<void> Run() {
    auto self = this->shared_from_this();
    std::weak_ptr<Connection> weak = self;
    auto executor = socket_.get_executor();
    client_->kill = [weak, executor] {
      asio::post(executor, [weak] {
        if (auto c = weak.lock()) c->Close();
      });
    };
    client_->push = [weak, executor](std::string bytes) {
      asio::post(executor, [weak, bytes = std::move(bytes)]() mutable {
        if (auto c = weak.lock()) c->Push(std::move(bytes));
      });
    };
    std::string refusal = dispatcher_.OnConnect(client_);
    if (!refusal.empty()) {
      spdlog::warn("Refused client {}: {}", client_->addr, refusal);
      reply_.Error(refusal);
      co_await Flush();
      Close();
      co_return;
    }
    spdlog::debug("Accepted client id={} addr={}", client_->id, client_->addr);
    parser_.set_limits(dispatcher_.LimitsFor(*client_));
    asio::co_spawn(executor, Watchdog(weak), asio::detached);
    try {
      co_await Serve();
    } catch (const std::system_error& e) {
      // Peer closed or reset, or the connection was killed: nothing to report to anyone.
      spdlog::debug("Client id={} closed: {}", client_->id, e.code().message());
    }
    Close();
    dispatcher_.OnDisconnect(client_);
    client_->kill = nullptr;
    client_->push = nullptr;
    NoteConnectionClosed(*client_);
  }

 private:
  // Closes the connection once it has been idle for `timeout` seconds. Holds only a weak
  // reference, so it never keeps a closed connection alive.
  static asio::awaitable<void> Watchdog(std::weak_ptr<Connection> weak) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    while (true) {
      std::chrono::milliseconds wait{5000};  // re-read the setting this often when disabled
      {
        auto self = weak.lock();
        if (!self || !self->socket_.is_open()) co_return;
        int64_t timeout = self->dispatcher_.IdleTimeoutSeconds();
        if (timeout > 0) {
          int64_t idle = CoarseNowMs() - self->client_->last_interaction_ms.load();
          if (idle >= timeout * 1000) {
            spdlog::info("Closing idle client id={} addr={} after {} s", self->client_->id,
                         self->client_->addr, idle / 1000);
            self->Close();
            co_return;
          }
          wait = std::chrono::milliseconds(timeout * 1000 - idle + 10);
        }
      }
      timer.expires_after(wait);
      asio::error_code ec;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }

  asio::awaitable<void> Serve() {
    while (socket_.is_open()) {
      PublishMemory(*client_, input_, parser_, reply_, sizeof(*this));
      auto direct = parser_.DirectTarget();
      if (!direct.empty()) {
        size_t n = co_await socket_.async_read_some(asio::buffer(direct.data(), direct.size()),
                                                    asio::use_awaitable);
        Count(n);
        parser_.CommitDirect(n);
        continue;
      }
      auto target = input_.Target();
      size_t n = co_await socket_.async_read_some(asio::buffer(target.data(), target.size()),
                                                  asio::use_awaitable);
      Count(n);
      if (!co_await Process(std::string_view(target.data(), n))) co_return;
      if (!reply_.empty()) co_await Flush();
      input_.AfterRead(n, [this] {
        asio::error_code ec;
        return socket_.available(ec);
      });
    }
  }

  // Parses and runs every complete request in `input`. Returns false when the connection must
  // close (protocol error, QUIT, kill), after its replies went out.
  asio::awaitable<bool> Process(std::string_view input) {
    size_t pos = 0;
    while (pos < input.size() || parser_.has_request()) {
      pos += parser_.Feed(input.substr(pos));
      if (parser_.error() != protocol::ParseError::kNone) {
        reply_.Error(parser_.ErrorMessage());
        spdlog::info("Protocol error from client id={} addr={}: {}", client_->id, client_->addr,
                     parser_.ErrorMessage());
        co_await Flush();
        co_return false;
      }
      if (!parser_.has_request()) break;
      parser_.TakeRequest(request_);
      dispatcher_.Dispatch(*client_, request_, reply_);
      ReleaseRequest(request_, parser_);
      parser_.set_limits(dispatcher_.LimitsFor(*client_));
      if (client_->close_after_reply) {
        co_await Flush();
        co_return false;
      }
      if (reply_.held_bytes() > dispatcher_.OutputBufferLimit()) {
        spdlog::warn(
            "Client id={} addr={} closed: {} bytes of replies exceed "
            "client-output-buffer-limit",
            client_->id, client_->addr, reply_.held_bytes());
        co_return false;
      }
      if (reply_.pending_bytes() >= kFlushThreshold) co_await Flush();
    }
    co_return true;
  }

  // Resumes once log sequence number `lsn` is durable. The log thread's callback hops back to
  // this connection's executor.
  asio::awaitable<void> AwaitDurable(uint64_t lsn) {
    auto executor = co_await asio::this_coro::executor;
    co_await asio::async_initiate<decltype(asio::use_awaitable), void()>(
        [this, lsn, executor](auto handler) {
          auto shared = std::make_shared<decltype(handler)>(std::move(handler));
          auto resume = [shared, executor] { asio::post(executor, [shared] { (*shared)(); }); };
          if (dispatcher_.WhenDurable(lsn, resume)) resume();
        },
        asio::use_awaitable);
  }

  // MONITOR: pushed bytes wait in `pushed_` and go out between replies, never inside one.
  void Push(std::string bytes) {
    if (!socket_.is_open() || pushed_.size() > dispatcher_.OutputBufferLimit()) return;
    pushed_ += bytes;
    if (!writing_) asio::co_spawn(socket_.get_executor(), WritePushed(), asio::detached);
  }

  asio::awaitable<void> WritePushed() {
    auto self = this->shared_from_this();
    writing_ = true;
    try {
      while (!pushed_.empty() && socket_.is_open()) {
        std::string out = std::exchange(pushed_, {});
        size_t n = co_await asio::async_write(socket_, asio::buffer(out), asio::use_awaitable);
        client_->net_output_bytes.fetch_add(n, std::memory_order_relaxed);
      }
    } catch (const std::system_error&) {
      Close();
    }
    writing_ = false;
  }

  asio::awaitable<void> Flush() {
    if (reply_.empty() || !socket_.is_open()) co_return;
    // Let pushed bytes in flight finish first: one writer at a time on the socket.
    if (writing_) {
      asio::steady_timer wait(socket_.get_executor());
      while (writing_) {
        wait.expires_after(std::chrono::milliseconds(1));
        co_await wait.async_wait(asio::use_awaitable);
      }
    }
    writing_ = true;
    struct Done {
      Connection* c;
      ~Done() {
        c->writing_ = false;
        if (!c->pushed_.empty() && c->socket_.is_open()) {
          asio::co_spawn(c->socket_.get_executor(), c->WritePushed(), asio::detached);
        }
      }
    } done{this};
    // A write is acknowledged only once its log record is as durable as the policy promises.
    if (uint64_t lsn = std::exchange(client_->reply_needs_lsn, 0); lsn != 0) {
      co_await AwaitDurable(lsn);
    }
    PublishMemory(*client_, input_, parser_, reply_, sizeof(*this));
    // asio writes at most 64 KiB per call by default; a large reply should go in as few
    // system calls as the socket allows.
    auto large_writes = [](const asio::error_code& ec, size_t) -> size_t {
      return ec ? 0 : size_t{1} << 30;
    };
    // One gather write per run: everything, unless a produced reply is made window by window.
    while (reply_.NextWrite(pieces_)) {
      buffers_.clear();
      for (auto p : pieces_) buffers_.emplace_back(p.data(), p.size());
      size_t n = co_await asio::async_write(socket_, buffers_, large_writes, asio::use_awaitable);
      client_->net_output_bytes.fetch_add(n, std::memory_order_relaxed);
    }
    ReleaseReplies(reply_);
    PublishMemory(*client_, input_, parser_, reply_, sizeof(*this));
    reply_.set_protocol(client_->resp.load(std::memory_order_relaxed));
  }

  void Count(size_t n) {
    client_->net_input_bytes.fetch_add(n, std::memory_order_relaxed);
    client_->last_interaction_ms.store(CoarseNowMs(), std::memory_order_relaxed);
  }

  void Close() {
    asio::error_code ignored;
    socket_.close(ignored);
  }

  Socket socket_;
  Dispatcher& dispatcher_;
  std::shared_ptr<ClientState> client_;
  InputBuffer input_;
  protocol::RequestParser parser_;
  protocol::Request request_;
  protocol::ReplyWriter reply_;
  std::vector<std::span<const uint8_t>> pieces_;
  std::vector<asio::const_buffer> buffers_;
  std::string pushed_;
  bool writing_ = false;  // a write (replies or pushed bytes) is in flight
};

}  // namespace

template <typename Socket>
void StartConnection(Socket socket, Dispatcher& dispatcher, std::string addr, std::string laddr,
                     bool unix_socket) {
  auto client = std::make_shared<ClientState>();
  client->addr = std::move(addr);
  client->laddr = std::move(laddr);
  client->fd = static_cast<int>(socket.native_handle());
  client->unix_socket = unix_socket;
  auto executor = socket.get_executor();
  auto connection =
      std::make_shared<Connection<Socket>>(std::move(socket), dispatcher, std::move(client));
  asio::co_spawn(executor, connection->Run(), asio::detached);
}

template void StartConnection(asio::ip::tcp::socket, Dispatcher&, std::string, std::string, bool);
template void StartConnection(asio::local::stream_protocol::socket, Dispatcher&, std::string,
                              std::string, bool);

}  // namespace prefixd::server
