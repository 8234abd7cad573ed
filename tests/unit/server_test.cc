// The network layer alone: a real Server on a loopback port driven by a fake Dispatcher, so the
// accept path, request framing, reply order, refused connections and the hold on replies until
// the log says a record is durable are tested without the command layer.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "server/server.h"
#include "server_api/dispatcher.h"

namespace prefixd::server {
namespace {

// Echoes each request as +<args joined by spaces>. "WAIT <lsn>" asks for its reply to be held
// until `Release()`; the third concurrent client is refused.
class FakeDispatcher : public Dispatcher {
 public:
  std::string OnConnect(const std::shared_ptr<ClientState>&) override {
    return connected_.fetch_add(1) >= 2 ? "ERR max number of clients reached" : "";
  }
  void OnDisconnect(const std::shared_ptr<ClientState>&) override { connected_.fetch_sub(1); }
  void Dispatch(ClientState& client, protocol::Request& request,
                protocol::ReplyWriter& reply) override {
    std::string text;
    for (size_t i = 0; i < request.size(); ++i) text += (i ? " " : "") + std::string(request[i]);
    if (request.size() == 2 && request[0] == "WAIT") client.reply_needs_lsn = 7;
    reply.Simple(text);
  }
  protocol::ParserLimits LimitsFor(const ClientState&) const override { return {}; }
  bool DurableNow(uint64_t lsn) override { return IsDurable(lsn); }
  bool IsDurable(uint64_t lsn) const override {
    std::lock_guard lock(mu_);
    return lsn <= durable_;
  }
  bool WhenDurable(uint64_t lsn, std::function<void()> resume) override {
    std::lock_guard lock(mu_);
    if (lsn <= durable_) return true;
    held_ = std::move(resume);
    return false;
  }
  int64_t IdleTimeoutSeconds() const override { return 0; }
  uint64_t OutputBufferLimit() const override { return uint64_t{1} << 30; }

  void Release() {
    std::function<void()> resume;
    {
      std::lock_guard lock(mu_);
      durable_ = 100;
      resume = std::move(held_);
    }
    if (resume) resume();
  }

 private:
  std::atomic<int> connected_{0};
  mutable std::mutex mu_;
  uint64_t durable_ = 0;
  std::function<void()> held_;
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Port 0 means "no TCP listener" (as in Redis): take a port the kernel just handed out, and
    // another if someone took it in between.
    for (int attempt = 0; attempt < 20 && runner_.get_id() == std::thread::id(); ++attempt) {
      ServerOptions options;
      options.port = FreeLoopbackPort();
      options.io_threads = 2;
      server_ = std::make_unique<Server>(options, dispatcher_);
      try {
        server_->Start();
      } catch (const std::runtime_error&) {  // the port was taken, or none was free
        continue;
      }
      runner_ = std::thread([this] { server_->Run(); });
    }
    ASSERT_TRUE(runner_.joinable()) << "no free loopback port";
  }
  void TearDown() override {
    if (!runner_.joinable()) return;
    server_->Stop();
    runner_.join();
  }

  static uint16_t FreeLoopbackPort() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    uint16_t port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    ::close(fd);
    return port;
  }

  int Connect() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(server_->tcp_port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    timeval timeout{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    return fd;
  }
  static std::string Read(int fd, size_t want) {
    std::string out;
    char buf[4096];
    while (out.size() < want) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  static void Send(int fd, std::string_view bytes) {
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }

  FakeDispatcher dispatcher_;
  std::unique_ptr<Server> server_;
  std::thread runner_;
};

TEST_F(ServerTest, PipelinedRequestsAreAnsweredInOrder) {
  ASSERT_NE(server_->tcp_port(), 0);
  int fd = Connect();
  Send(fd, "*2\r\n$1\r\na\r\n$2\r\nbc\r\n*1\r\n$1\r\nd\r\nINLINE  words\r\n");
  EXPECT_EQ(Read(fd, 21), "+a bc\r\n+d\r\n+INLINE words\r\n");
  ::close(fd);
}

TEST_F(ServerTest, ARefusedConnectionGetsTheErrorThenIsClosed) {
  int a = Connect(), b = Connect();
  Send(a, "*1\r\n$1\r\nx\r\n");
  Send(b, "*1\r\n$1\r\ny\r\n");
  EXPECT_EQ(Read(a, 4), "+x\r\n");
  EXPECT_EQ(Read(b, 4), "+y\r\n");
  int c = Connect();
  EXPECT_EQ(Read(c, 100), "-ERR max number of clients reached\r\n");
  ::close(a), ::close(b), ::close(c);
}

TEST_F(ServerTest, RepliesWaitUntilTheirRecordIsDurable) {
  int fd = Connect();
  Send(fd, "*2\r\n$4\r\nWAIT\r\n$1\r\n1\r\n");
  timeval short_wait{0, 200000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &short_wait, sizeof short_wait);
  EXPECT_EQ(Read(fd, 1), "") << "a reply left before its record was durable";
  dispatcher_.Release();
  timeval timeout{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  EXPECT_EQ(Read(fd, 9), "+WAIT 1\r\n");
  ::close(fd);
}

}  // namespace
}  // namespace prefixd::server
