#include "server/connection.h"

#include <spdlog/spdlog.h>

#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/descriptor_passing.h"
#include "common/settings.h"
#include "protocol/resp_parser.h"
#include "server/connection_memory.h"
#include "server/log_limiter.h"
#include "server/tls_stream.h"

namespace prefixd::server {
namespace {

// Replies are written out once this much is queued, so a long pipeline of requests never makes
// the server hold more than about this much per client (plus one reply).
constexpr size_t kFlushThreshold = 256 * 1024;
// A client on the TLS port must finish its handshake within this time, so that sockets which
// never speak TLS cannot pile up.
constexpr auto kHandshakeTimeout = std::chrono::seconds(10);

using TcpSocket = asio::ip::tcp::socket;
using UnixSocket = asio::local::stream_protocol::socket;

template <typename Stream>
constexpr bool kIsTls = std::is_same_v<Stream, TlsStream>;

// A request that throws is logged at most this often (a client can repeat it at will).
LogLimiter request_failure_log(5, std::chrono::seconds(10));
LogLimiter handshake_failure_log(5, std::chrono::seconds(10));
LogLimiter refusal_log(5, std::chrono::seconds(10));
LogLimiter protocol_error_log(5, std::chrono::seconds(10));

// Writing, the same for every kind of stream: plain sockets through asio, TLS through TlsStream
// (which encrypts from the caller's buffers).
template <typename Socket>
asio::awaitable<size_t> WriteAll(Socket& socket, const std::vector<asio::const_buffer>& pieces) {
  // asio writes at most 64 KiB per call by default; a large reply should go in as few system
  // calls as the socket allows.
  auto large_writes = [](const asio::error_code& ec, size_t) -> size_t {
    return ec ? 0 : size_t{1} << 30;
  };
  co_return co_await asio::async_write(socket, pieces, large_writes, asio::use_awaitable);
}
asio::awaitable<size_t> WriteAll(TlsStream& stream, const std::vector<asio::const_buffer>& pieces) {
  return stream.WriteAll(pieces);
}
// The error a client gets for a request that threw, in place of its reply.
std::string FailureReply(const std::exception& e, const char* command) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    return std::string("OOM not enough memory to run '") + command + "'";
  }
  return std::string("ERR internal error running '") + command + "': " + e.what();
}

template <typename Stream>
class Connection : public std::enable_shared_from_this<Connection<Stream>> {
 public:
  template <typename... StreamArgs>
  Connection(Dispatcher& dispatcher, std::shared_ptr<ClientState> client,
             std::shared_ptr<void> keep_alive, StreamArgs&&... stream_args)
      : keep_alive_(std::move(keep_alive)),
        stream_(std::forward<StreamArgs>(stream_args)...),
        dispatcher_(dispatcher),
        client_(std::move(client)) {}

  asio::awaitable<void> Run() {
    auto self = this->shared_from_this();
    std::weak_ptr<Connection> weak = self;
    auto executor = stream_.get_executor();
    client_->SetKillHook([weak, executor] {
      asio::post(executor, [weak] {
        if (auto c = weak.lock()) c->Close();
      });
    });
    // Pushed bytes wait in the inbox in the order they were pushed, whichever thread pushed
    // them; only the wake-up is posted. (Two posts from different threads are not run in the
    // order they were made, and a replica's stream must not be reordered.)
    client_->SetPushHook([weak, executor, inbox = inbox_](std::string bytes) {
      bool wake = false;
      {
        std::lock_guard lock(inbox->mu);
        wake = inbox->bytes.empty();
        inbox->bytes += bytes;
      }
      if (wake) {
        asio::post(executor, [weak] {
          if (auto c = weak.lock()) c->DrainInbox();
        });
      }
    });
    // However this coroutine ends (a reply, a reset, an exception, the io context stopping),
    // the socket is closed, the hooks dropped and the client's slot given back, once.
    Release release(*this);
    try {
      if constexpr (kIsTls<Stream>) {
        if (!co_await Handshake(weak)) co_return;
      }
      std::string refusal = dispatcher_.OnConnect(client_);
      if (!refusal.empty()) {
        uint64_t suppressed = 0;
        if (refusal_log.Allow(&suppressed)) {
          spdlog::warn("Refused client {}: {}{}", client_->addr, refusal.substr(0, 80),
                       suppressed ? fmt::format(" ({} more refusals not logged)", suppressed) : "");
        }
        reply_.Error(refusal);
        co_await Flush();
        co_return;
      }
      release.registered = true;
      spdlog::debug("Accepted client id={} addr={}", client_->id, client_->addr);
      parser_.set_limits(dispatcher_.LimitsFor(*client_));
      parser_.set_large_argument_gate([this](const protocol::Request& partial) {
        return dispatcher_.RefuseBeforeLargeArgument(*client_, partial);
      });
      asio::co_spawn(executor, Watchdog(weak), asio::detached);
      co_await Serve();
    } catch (const std::system_error& e) {
      // Peer closed or reset, or the connection was killed: nothing to report to anyone.
      spdlog::debug("Client id={} closed: {}", client_->id, e.code().message());
    } catch (const std::exception& e) {
      // Outside any one request (e.g. memory for the write list ran out): close, logged.
      LogFailure("closed", e);
    }
  }

 private:
  struct Release {
    explicit Release(Connection& c) : connection(c) {}
    ~Release() {
      connection.Close();
      connection.client_->SetKillHook(nullptr);
      connection.client_->SetPushHook(nullptr);
      for (int fd : connection.client_->fds_to_send) ::close(fd);
      connection.client_->fds_to_send.clear();
      connection.CloseReceivedFds();
      if (registered) connection.dispatcher_.OnDisconnect(connection.client_);
      NoteConnectionClosed(*connection.client_);
    }
    Connection& connection;
    bool registered = false;
  };

  auto& Socket() { return stream_.lowest_layer(); }

  asio::awaitable<bool> Handshake(std::weak_ptr<Connection> weak) {
    asio::steady_timer deadline(stream_.get_executor());
    deadline.expires_after(kHandshakeTimeout);
    deadline.async_wait([weak](const asio::error_code& ec) {
      if (auto c = weak.lock(); c && !ec) c->Close();
    });
    std::string failure = co_await stream_.Handshake();
    deadline.cancel();
    if (!failure.empty()) {
      // A plain-text client on the TLS port, a bad certificate, a scanner: Redis logs these at
      // verbose level; so do we, rate-limited.
      uint64_t suppressed = 0;
      if (handshake_failure_log.Allow(&suppressed)) {
        spdlog::info("TLS handshake with {} failed: {}{}", client_->addr, failure,
                     suppressed ? fmt::format(" ({} more not logged)", suppressed) : "");
      }
      co_return false;
    }
    co_return true;
  }

  void LogFailure(std::string_view what, const std::exception& e) {
    uint64_t suppressed = 0;
    if (!request_failure_log.Allow(&suppressed)) return;
    spdlog::warn("Client id={} addr={} {}: '{}' failed: {}{}", client_->id, client_->addr, what,
                 client_->last_command.load(std::memory_order_relaxed), e.what(),
                 suppressed ? fmt::format(" ({} more failures not logged)", suppressed) : "");
  }

  // Closes the connection once it has been idle for `timeout` seconds. Holds only a weak
  // reference, so it never keeps a closed connection alive.
  static asio::awaitable<void> Watchdog(std::weak_ptr<Connection> weak) {
    asio::steady_timer timer(co_await asio::this_coro::executor);
    while (true) {
      std::chrono::milliseconds wait{5000};  // re-read the setting this often when disabled
      {
        auto self = weak.lock();
        if (!self || !self->Socket().is_open()) co_return;
        int64_t timeout_ms = SaturatingMul(self->dispatcher_.IdleTimeoutSeconds(), 1000);
        // As Redis, `timeout` never closes a replica.
        if (timeout_ms > 0 && !self->client_->replica.load(std::memory_order_relaxed)) {
          int64_t idle = CoarseNowMs() - self->client_->last_interaction_ms.load();
          if (idle >= timeout_ms) {
            spdlog::info("Closing idle client id={} addr={} after {} s", self->client_->id,
                         self->client_->addr, idle / 1000);
            self->Close();
            co_return;
          }
          wait = std::chrono::milliseconds(SaturatingAdd(timeout_ms - idle, 10));
        }
      }
      timer.expires_after(wait);
      asio::error_code ec;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
  }

  // --- reading: a large argument goes straight into its own buffer; the rest via input_ ---
  asio::awaitable<void> Serve() {
    if constexpr (!kIsTls<Stream>) Socket().native_non_blocking(true);
    while (Socket().is_open()) {
      PublishMemory(*client_, input_, parser_, reply_, sizeof(*this), PushedBytes());
      const std::string_view input = co_await Receive(parser_.DirectTarget());
      if (input.empty()) continue;  // all of it went into a large argument
      const bool open = co_await Process(input);
      input_.Processed();
      if (!open) co_return;
      if (!reply_.empty()) co_await Flush();
    }
  }

  // Waits for the client's next bytes and reads them: into `direct` first (the room left in a
  // large argument the parser is filling), then the input buffer. A large value's last bytes and
  // whatever follows them (its CRLF, the next request) come in one read, as Redis reads a large
  // bulk with its CRLF. Returns the bytes that landed in the input buffer, to be processed.
  // The input buffer's large room is borrowed only for each read, never while waiting.
  asio::awaitable<std::string_view> Receive(std::span<uint8_t> direct) {
    while (true) {
      const std::span<char> room = input_.Room();
      const std::array<iovec, 2> pieces{iovec{direct.data(), direct.size()},
                                        iovec{room.data(), room.size()}};
      const std::span<const iovec> into = direct.empty() ? std::span(pieces).subspan(1) : pieces;
      const size_t read = TryReceive(into);
      const size_t into_value = std::min(read, direct.size());
      const std::string_view input = input_.Filled(read - into_value);
      if (read == 0) {
        if constexpr (kIsTls<Stream>) {
          co_await stream_.WaitReadable();
        } else {
          co_await Socket().async_wait(Stream::wait_read, asio::use_awaitable);
        }
        continue;
      }
      Count(read);
      if (into_value > 0) {
        parser_.CommitDirect(into_value);
        // The request about to run holds the whole value now: its memory counts (maxmemory's
        // check, CLIENT LIST) before it runs, as it does when the next read comes round the loop.
        if (!input.empty()) {
          PublishMemory(*client_, input_, parser_, reply_, sizeof(*this), PushedBytes());
        }
      }
      co_return input;
    }
  }

  // Parses and runs every complete request in `input`. Returns false when the connection must
  // close (protocol error, QUIT, kill), after its replies went out.
  asio::awaitable<bool> Process(std::string_view input) {
    // CLIENT LIST's qbuf while a command runs is, as in Redis, the bytes of the read it came in
    // (with what was left of the one before): Redis trims its query buffer only after running
    // every request of a read.
    const size_t read_bytes = parser_.pending_bytes() + input.size();
    // The requests of this read run back to back: each starts at its predecessor's end (one
    // clock reading per command, not two). Paused across every wait below.
    CommandClock::Burst burst;
    size_t pos = 0;
    while (pos < input.size() || parser_.has_request()) {
      if (!Feed(input, pos)) {
        burst.Pause();
        co_await Flush();
        co_return false;
      }
      if (parser_.error() != protocol::ParseError::kNone) {
        reply_.Error(parser_.ErrorMessage());
        uint64_t suppressed = 0;
        if (protocol_error_log.Allow(&suppressed)) {
          spdlog::info("Protocol error from client id={} addr={}: {}{}", client_->id, client_->addr,
                       parser_.ErrorMessage(),
                       suppressed ? fmt::format(" ({} more not logged)", suppressed) : "");
        }
        burst.Pause();
        co_await Flush();
        co_return false;
      }
      if (!parser_.has_request()) break;
      std::string refusal = parser_.TakeRefusal();
      parser_.TakeRequest(request_);
      client_->query_buffer_bytes.store(read_bytes, std::memory_order_relaxed);
      RunRequest(refusal);
      parser_.set_limits(dispatcher_.LimitsFor(*client_));
      if (client_->close_after_reply) {
        burst.Pause();
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
      if (reply_.pending_bytes() >= kFlushThreshold) {
        burst.Pause();
        co_await Flush();
        burst.Resume();
      }
    }
    // Every request these bytes completed has run: descriptors none of them claimed belong to
    // no command (one still being read keeps them).
    if (!client_->fds_received.empty() && parser_.pending_bytes() == 0) CloseReceivedFds();
    co_return true;
  }

  // Feeds the parser from `input` at `pos`, advancing it. False when the parser could not take
  // the request (no memory for an argument): its place in the stream is lost, so the client
  // gets an error and the connection closes.
  bool Feed(std::string_view input, size_t& pos) {
    try {
      pos += parser_.Feed(input.substr(pos));
      return true;
    } catch (const std::exception& e) {
      LogFailure("closed while reading a request", e);
      reply_.Error(FailureReply(e, "(reading the request)"));
      return false;
    }
  }

  // The exception boundary of one request: whatever a command throws, the client gets an error
  // in place of that request's (partial) reply, and the connection carries on. The request's
  // arguments are dropped either way; the rewind releases what the partial reply pinned.
  void RunRequest(std::string_view refusal) {
    auto mark = reply_.GetMark();
    try {
      if (refusal.empty()) {
        dispatcher_.Dispatch(*client_, request_, reply_);
      } else {
        dispatcher_.Refuse(*client_, request_, reply_, refusal);
      }
    } catch (const std::exception& e) {
      reply_.RewindTo(mark);
      LogFailure("request", e);
      reply_.Error(FailureReply(e, client_->last_command.load(std::memory_order_relaxed)));
    }
    ReleaseRequest(request_, parser_);
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

  // Pushed bytes not sent yet: queued here, being written, or still in the inbox.
  size_t PushedBytes() {
    std::lock_guard lock(inbox_->mu);
    return pushed_.size() + pushed_in_flight_ + inbox_->bytes.size();
  }

  void DrainInbox() {
    std::string bytes;
    {
      std::lock_guard lock(inbox_->mu);
      bytes.swap(inbox_->bytes);
    }
    if (!bytes.empty()) Push(std::move(bytes));
  }

  // MONITOR: pushed bytes wait in `pushed_` and go out between replies, never inside one.
  // A replica's stream must not lose a byte: past its limit the replica is disconnected (as
  // Redis's client-output-buffer-limit replica), and resynchronises.
  void Push(std::string bytes) {
    if (!Socket().is_open()) return;
    if (client_->replica.load(std::memory_order_relaxed)) {
      if (pushed_.size() + bytes.size() > dispatcher_.ReplicaOutputBufferLimit()) {
        spdlog::warn(
            "Replica id={} addr={} disconnected: {} bytes of replication stream unsent exceed "
            "replica-output-buffer-limit",
            client_->id, client_->addr, pushed_.size() + bytes.size());
        pushed_.clear();
        Close();
        return;
      }
    } else if (pushed_.size() > dispatcher_.OutputBufferLimit()) {
      return;
    }
    pushed_ += bytes;
    PublishMemory(*client_, input_, parser_, reply_, sizeof(*this), PushedBytes());
    if (!writing_) StartWritingPushed();
  }

  // One writer at a time on the stream: `writing_` is taken here, before the coroutine starts
  // (co_spawn only schedules it), so a second push meanwhile cannot start a second writer whose
  // bytes would overtake the first's.
  void StartWritingPushed() {
    writing_ = true;
    asio::co_spawn(stream_.get_executor(), WritePushed(), asio::detached);
  }

  asio::awaitable<void> WritePushed() {
    auto self = this->shared_from_this();
    try {
      while (!pushed_.empty() && Socket().is_open()) {
        std::string out = std::exchange(pushed_, {});
        pushed_in_flight_ = out.size();
        PublishMemory(*client_, input_, parser_, reply_, sizeof(*this), PushedBytes());
        std::vector<asio::const_buffer> one{asio::buffer(out)};
        size_t n = co_await WriteAll(stream_, one);
        pushed_in_flight_ = 0;
        client_->net_output_bytes.fetch_add(n, std::memory_order_relaxed);
      }
      PublishMemory(*client_, input_, parser_, reply_, sizeof(*this), PushedBytes());
    } catch (const std::exception&) {
      pushed_in_flight_ = 0;
      Close();
    }
    writing_ = false;
  }

  // --- writing: runs of gather writes (a produced reply window by window) ---
  asio::awaitable<void> Flush() {
    if (reply_.empty() || !Socket().is_open()) co_return;
    // Let pushed bytes in flight finish first: one writer at a time on the stream.
    if (writing_) {
      asio::steady_timer wait(stream_.get_executor());
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
        if (!c->pushed_.empty() && c->Socket().is_open()) c->StartWritingPushed();
      }
    } done{this};
    // A write is acknowledged only once its log record is as durable as the policy promises.
    if (uint64_t lsn = std::exchange(client_->reply_needs_lsn, 0);
        lsn != 0 && !dispatcher_.IsDurable(lsn)) {
      // The other connections this thread has requests from run theirs first, so one write of
      // the log acknowledges all of them (Redis writes its AOF buffer once per event-loop turn).
      co_await asio::post(stream_.get_executor(), asio::use_awaitable);
      if (!dispatcher_.DurableNow(lsn)) co_await AwaitDurable(lsn);
    }
    PublishMemory(*client_, input_, parser_, reply_, sizeof(*this), PushedBytes());
    // One write per run: everything, unless a produced reply is made window by window or sent
    // from its file.
    protocol::FileSend file;
    while (reply_.NextWrite(pieces_, kIsTls<Stream> ? nullptr : &file)) {
      if (file.fd >= 0) {
        co_await SendFile(file);
        continue;
      }
      buffers_.clear();
      for (auto p : pieces_) buffers_.emplace_back(p.data(), p.size());
      if constexpr (std::is_same_v<Stream, UnixSocket>) {
        if (!client_->fds_to_send.empty()) co_await SendDescriptors();
      }
      size_t n = co_await WriteAll(stream_, buffers_);
      client_->net_output_bytes.fetch_add(n, std::memory_order_relaxed);
    }
    ReleaseReplies(reply_);
    PublishMemory(*client_, input_, parser_, reply_, sizeof(*this), PushedBytes());
    reply_.set_protocol(client_->resp.load(std::memory_order_relaxed));
  }

  // Sends `file`'s bytes with sendfile(2): the page cache goes to the socket with no copy
  // through this process, the producer asking the disk to read ahead of each window. A file
  // that ends early or fails to read throws: part of the reply is out, so the connection
  // closes (logged); nothing about the stored value changes.
  asio::awaitable<void> SendFile(const protocol::FileSend& file) {
    auto& socket = Socket();
    socket.native_non_blocking(true);
    uint64_t sent = 0;
    while (sent < file.length) {
      const uint64_t window =
          std::min<uint64_t>(protocol::ReplyWriter::kProduceWindow, file.length - sent);
      off_t at = static_cast<off_t>(file.offset + sent);
      const ssize_t n = ::sendfile(socket.native_handle(), file.fd, &at, window);
      if (n > 0) {
        sent += static_cast<uint64_t>(n);
        client_->net_output_bytes.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        co_await socket.async_wait(std::decay_t<decltype(socket)>::wait_write, asio::use_awaitable);
      } else if (n < 0 && (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN)) {
        throw std::system_error(errno, std::generic_category());  // the peer went away
      } else {
        throw std::runtime_error(
            "reading a stored value from disk failed while sending it: " +
            (n == 0 ? std::string("the file ended early") : std::string(std::strerror(errno))));
      }
    }
  }

  // Sends the descriptors a command queued (SHM.HELLO's arenas) with SCM_RIGHTS, attached to the
  // first byte of `buffers_`, which is then left out of them: a client that reads with recvmsg
  // has the descriptors by the time it has read that byte.
  asio::awaitable<void> SendDescriptors() {
    auto first = std::find_if(buffers_.begin(), buffers_.end(),
                              [](const asio::const_buffer& b) { return b.size() != 0; });
    if (first == buffers_.end()) co_return;
    std::vector<int>& fds = client_->fds_to_send;
    const DescriptorMessage message(first->data(), 1, fds);
    auto& socket = Socket();
    socket.native_non_blocking(true);
    while (true) {
      const ssize_t n = ::sendmsg(socket.native_handle(), message.get(), MSG_NOSIGNAL);
      if (n == 1) break;
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        co_await socket.async_wait(UnixSocket::wait_write, asio::use_awaitable);
        continue;
      }
      throw std::system_error(n < 0 ? errno : EIO, std::generic_category());
    }
    for (int fd : fds) ::close(fd);
    fds.clear();
    *first += 1;
    client_->net_output_bytes.fetch_add(1, std::memory_order_relaxed);
  }

  // --- reading what has arrived, and the descriptors a unix-socket client passes ---
  // Reads what has arrived into `pieces`, in order, without waiting; 0 when nothing has. Over a
  // unix socket the descriptors passed with SCM_RIGHTS (SHM.SET's memfd) are kept in
  // client_->fds_received for a command to claim; past its cap they are closed at once. Until
  // SHM.HELLO has accepted the peer no room is offered for them, and the kernel discards them
  // without ever installing them here.
  size_t TryReceive(std::span<const iovec> pieces) {
    if constexpr (kIsTls<Stream>) {
      return stream_.TryRead(pieces);
    } else {
      constexpr size_t kRoom = CMSG_SPACE(sizeof(int) * ClientState::kMaxReceivedFds);
      alignas(cmsghdr) char control[kRoom];
      msghdr message{};
      message.msg_iov = const_cast<iovec*>(pieces.data());
      message.msg_iovlen = pieces.size();
      const bool fds = std::is_same_v<Stream, UnixSocket> && client_->accepts_fds;
      if (fds) {
        message.msg_control = control;
        message.msg_controllen = kRoom;
      }
      // One piece and no descriptors: recv, which costs the kernel less than recvmsg's header
      // and iovec copies (a few per cent of a small request's CPU).
      const bool plain = pieces.size() == 1 && !fds;
      while (true) {
        const ssize_t n =
            plain ? ::recv(Socket().native_handle(), pieces[0].iov_base, pieces[0].iov_len,
                           MSG_DONTWAIT)
                  : ::recvmsg(Socket().native_handle(), &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n > 0) {
          if (fds) KeepReceivedFds(message);
          return static_cast<size_t>(n);
        }
        if (n == 0) throw std::system_error(asio::error::make_error_code(asio::error::eof));
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        throw std::system_error(errno, std::generic_category());
      }
    }
  }

  void KeepReceivedFds(msghdr& message) {
    std::vector<int>& kept = client_->fds_received;
    const size_t had = kept.size();
    ReceivedDescriptors(message, kept);
    // Past the cap, the newest are closed at once.
    const size_t keep = std::max(had, std::min(kept.size(), ClientState::kMaxReceivedFds));
    for (size_t i = keep; i < kept.size(); ++i) ::close(kept[i]);
    kept.resize(keep);
  }

  void CloseReceivedFds() {
    for (int fd : client_->fds_received) ::close(fd);
    client_->fds_received.clear();
  }

  void Count(size_t n) {
    client_->net_input_bytes.fetch_add(n, std::memory_order_relaxed);
    client_->last_interaction_ms.store(CoarseNowMs(), std::memory_order_relaxed);
  }

  void Close() {
    asio::error_code ignored;
    Socket().close(ignored);
  }

  std::shared_ptr<void> keep_alive_;  // the TLS context the stream was made from: outlives it
  Stream stream_;
  Dispatcher& dispatcher_;
  std::shared_ptr<ClientState> client_;
  InputBuffer input_;
  protocol::RequestParser parser_;
  protocol::Request request_;
  protocol::ReplyWriter reply_;
  std::vector<std::span<const uint8_t>> pieces_;
  std::vector<asio::const_buffer> buffers_;
  struct Inbox {
    std::mutex mu;
    std::string bytes;
  };
  std::shared_ptr<Inbox> inbox_ = std::make_shared<Inbox>();
  std::string pushed_;
  size_t pushed_in_flight_ = 0;  // bytes of pushed_ handed to the write under way
  bool writing_ = false;         // a write (replies or pushed bytes) is in flight
};

std::shared_ptr<ClientState> MakeClient(Peer peer, int fd, bool tls) {
  auto client = std::make_shared<ClientState>();
  client->addr = std::move(peer.addr);
  client->laddr = std::move(peer.laddr);
  client->fd = fd;
  client->unix_socket = peer.unix_socket;
  client->local = peer.local;
  client->tls = tls;
  return client;
}

template <typename Stream, typename... StreamArgs>
void Spawn(Dispatcher& dispatcher, std::shared_ptr<ClientState> client,
           std::shared_ptr<void> keep_alive, asio::any_io_executor executor,
           StreamArgs&&... stream_args) {
  auto connection =
      std::make_shared<Connection<Stream>>(dispatcher, std::move(client), std::move(keep_alive),
                                           std::forward<StreamArgs>(stream_args)...);
  asio::co_spawn(executor, connection->Run(), asio::detached);
}

}  // namespace

template <typename Socket>
void StartConnection(Socket socket, Dispatcher& dispatcher, Peer peer) {
  auto client = MakeClient(std::move(peer), static_cast<int>(socket.native_handle()), false);
  auto executor = socket.get_executor();
  Spawn<Socket>(dispatcher, std::move(client), nullptr, executor, std::move(socket));
}

void StartTlsConnection(asio::ip::tcp::socket socket, std::shared_ptr<asio::ssl::context> context,
                        Dispatcher& dispatcher, Peer peer) {
  auto client = MakeClient(std::move(peer), static_cast<int>(socket.native_handle()), true);
  auto executor = socket.get_executor();
  SSL_CTX* native = context->native_handle();
  Spawn<TlsStream>(dispatcher, std::move(client), std::move(context), executor, std::move(socket),
                   native);
}

template void StartConnection(TcpSocket, Dispatcher&, Peer);
template void StartConnection(UnixSocket, Dispatcher&, Peer);

}  // namespace prefixd::server
