// The reference redis-server the differential tests (strings_test, hashes_test, zsets_test,
// streams_test, keyspace_test, transactions_test, replication_test) compare prefixd with: a taken
// port makes it try another and then fail, never skip or talk to whatever holds the port. What a
// missing redis-server does (skip; under CI=true, fail) is checked by tests/CMakeLists.txt.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

// A loopback port held by a listening socket that accepts connections and never answers.
class HeldPort {
 public:
  HeldPort() {
    for (int attempt = 0; attempt < 16 && port_ == 0; ++attempt) {
      const int port = FreeLoopbackPort();
      fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(port));
      if (port > 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
          ::listen(fd_, 16) == 0) {
        port_ = port;
      } else {
        ::close(fd_);
        fd_ = -1;
      }
    }
  }
  ~HeldPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  HeldPort(const HeldPort&) = delete;
  HeldPort& operator=(const HeldPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// The process_id line of INFO server on `port`, e.g. "process_id:123".
std::string ProcessIdAt(int port) {
  auto c = RawConnection::Tcp(port);
  if (c == nullptr) return "(no connection)";
  const std::string reply = c->Call(std::vector<std::string>{"INFO", "server"});
  const size_t at = reply.find("process_id:");
  return at == std::string::npos ? reply : reply.substr(at, reply.find('\r', at) - at);
}

// Starts `redis` told to try `taken` first: it must start on another port, having tried the two,
// and be the process that answers there.
void StartPast(RedisServer& redis, int taken) {
  RedisServer::Options options;
  options.ports = {taken};
  ASSERT_TRUE(redis.Start(options));
  EXPECT_NE(redis.port(), taken);
  EXPECT_EQ(redis.ports_tried(), (std::vector<int>{taken, redis.port()}));
  EXPECT_EQ(ProcessIdAt(redis.port()), "process_id:" + std::to_string(redis.pid()));
}

// The one use of PREFIXD_START_REFERENCE_REDIS here: with PREFIXD_REDIS_SERVER naming a missing
// file, tests/CMakeLists.txt expects it skipped, and failed under CI=true.
TEST(ReferenceRedisTest, SkipsOnlyWhenNotInstalled) {
  RedisServer redis;
  PREFIXD_START_REFERENCE_REDIS(redis);
  EXPECT_EQ(ProcessIdAt(redis.port()), "process_id:" + std::to_string(redis.pid()));
}

// The port it tries first is held by a socket that never answers: its child exits (the bind
// fails) and it starts on another port.
TEST(ReferenceRedisTest, TriesAnotherPortWhenItsPortIsTaken) {
  if (!RedisServer::Installed() && !UnderCi()) GTEST_SKIP() << "redis-server is not installed";
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  RedisServer redis;
  ASSERT_NO_FATAL_FAILURE(StartPast(redis, held.port()));
}

// The port it tries first is another redis-server's, which answers PING as any Redis would:
// the reference must be its own child, not whatever answers there.
TEST(ReferenceRedisTest, DoesNotTakeAnotherServerOnItsPortForItself) {
  if (!RedisServer::Installed() && !UnderCi()) GTEST_SKIP() << "redis-server is not installed";
  RedisServer other;
  ASSERT_TRUE(other.Start());
  RedisServer redis;
  ASSERT_NO_FATAL_FAILURE(StartPast(redis, other.port()));
  EXPECT_EQ(ProcessIdAt(other.port()), "process_id:" + std::to_string(other.pid()));
}

// Every port it may try is taken: Start() fails, naming each port and why.
TEST(ReferenceRedisTest, FailsWhenEveryPortItTriesIsTaken) {
  if (!RedisServer::Installed() && !UnderCi()) GTEST_SKIP() << "redis-server is not installed";
  HeldPort silent;
  RedisServer other;
  ASSERT_TRUE(other.Start());
  ASSERT_GT(silent.port(), 0);
  RedisServer redis;
  RedisServer::Options options;
  options.ports = {silent.port(), other.port()};
  options.attempts = 2;
  const ::testing::AssertionResult started = redis.Start(options);
  ASSERT_FALSE(started);
  const std::string why = started.message();
  EXPECT_NE(why.find("did not start in 2 tries"), std::string::npos) << why;
  EXPECT_NE(why.find("port " + std::to_string(silent.port()) + ": exited"), std::string::npos)
      << why;
  EXPECT_NE(why.find("Address already in use"), std::string::npos) << why;
  EXPECT_NE(why.find("port " + std::to_string(other.port()) + ": answered by another process"),
            std::string::npos)
      << why;
  EXPECT_EQ(redis.pid(), -1);
}

}  // namespace
}  // namespace prefixd::it
