// Integration-test harness: runs the real prefixd-server binary on a free loopback port with a
// private temporary directory, and gives tests raw-byte socket clients and hiredis connections
// to talk to it.
#pragma once

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace prefixd::it {

using Millis = std::chrono::milliseconds;

// Path of the server under test: $PREFIXD_TEST_SERVER if set (ctest sets $PREFIXD_SERVER for each
// test, so this is how a run points these tests at another build's server, as CI does with the
// ASan and TSan servers), else $PREFIXD_SERVER, else the path CMake compiled in.
std::string ServerBinary();

// Whether the server under test runs under a sanitizer: this binary is sanitized itself, or
// $PREFIXD_SERVER_SANITIZED is set (a plain test binary against a sanitized server). Shadow
// memory makes RSS bounds and address-space limits meaningless there, and it runs several times
// slower.
bool ServerIsSanitized();

// A loopback port free now (the kernel's pick for port 0); another process could take it first.
int FreeLoopbackPort();

// Encodes a request as a RESP multibulk, exactly as a client library would.
std::string Multibulk(const std::vector<std::string>& args);

// `size` bytes that differ per `seed` and per position (a value whose every byte is checked).
std::string Pattern(size_t size, uint64_t seed);

// Length of the first complete RESP2/RESP3 reply in `buffer`, or nullopt while it is incomplete.
// Throws std::runtime_error on a type byte that no RESP version defines.
std::optional<size_t> CompleteReplyLength(std::string_view buffer);

// One prefixd-server child process. Start() picks a free 127.0.0.1 port, creates a temp root
// holding the data directory (`--dir`), the log file and, if asked, the unix socket, then waits
// (bounded) until the server answers PING. The destructor stops the server (SIGTERM, then
// SIGKILL after a bounded wait), reports an unclean exit as a test failure, prints the log's tail
// when the current test failed, and removes the temp root (kept if PREFIXD_IT_KEEP is set).
class ServerProcess {
 public:
  struct Options {
    // Extra command-line flags, e.g. {"--requirepass", "secret"}.
    std::vector<std::string> flags;
    // Also listen on a unix socket inside the temp root.
    bool unix_socket = false;
    // How long the server may take to start answering.
    Millis startup_timeout{10000};
    // Use this data directory (`--dir`) instead of one inside the temp root; it is not removed.
    std::string data_dir;
    // A command the server is started through, e.g. {"/usr/bin/prlimit", "--nofile=256:256",
    // "--"}: it must exec the server in the same process (pid() is the server's).
    std::vector<std::string> launcher;
    // Listen on this port (0: a free one, picked anew on each start); nodes of a cluster need
    // theirs before they start, to name each other in nodes.conf.
    int port = 0;
    // Address to bind (`--bind`); the fixture still connects to 127.0.0.1.
    std::string bind = "127.0.0.1";
  };

  ServerProcess() = default;
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  ::testing::AssertionResult Start(Options options);
  ::testing::AssertionResult Start() { return Start(Options{}); }

  // Stops the server; false (with `how` explaining) unless it exited with status 0 in time.
  bool Stop(std::string* how = nullptr);
  bool Running();
  // Kills the server with SIGKILL (a crash: nothing is flushed) and reaps it; true when it died
  // of that signal.
  bool Kill();
  // Waits up to `timeout` for the server to exit by itself (e.g. after SHUTDOWN); true once it
  // has. Stop() then reports how it exited.
  bool WaitForExit(Millis timeout);
  // The raw wait status of the last exit seen (see <sys/wait.h>), e.g. after a failed Start().
  std::optional<int> exit_status() const;
  // Starts the server again after Stop() or Kill(), with the same temp root, data directory and
  // log file (appended to), on a new port. `options.data_dir` is ignored.
  ::testing::AssertionResult Restart(Options options);
  ::testing::AssertionResult Restart() { return Restart(Options{}); }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& root() const { return root_; }
  const std::string& data_dir() const { return data_dir_; }
  const std::string& unix_socket_path() const { return unix_socket_; }
  const std::string& log_path() const { return log_path_; }
  std::string ReadLog() const;
  // Resident set size of the server process in KiB (VmRSS), or -1 when it cannot be read.
  int64_t RssKib() const;

 private:
  ::testing::AssertionResult Launch(const Options& options, bool* port_taken);
  bool WaitExit(Millis timeout, int* status);

  std::string root_;
  std::string data_dir_;
  std::string unix_socket_;
  std::string log_path_;
  int port_ = 0;
  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_status_ = 0;
};

// A gtest fixture base that owns one server, started by StartServer().
class ServerTest : public ::testing::Test {
 protected:
  // Use as ASSERT_NO_FATAL_FAILURE(StartServer(...)).
  void StartServer(ServerProcess::Options options = {});
  ServerProcess server_;
};

// A blocking socket client that sends exact bytes and reads exact bytes with timeouts, and tells
// whether the server closed the connection.
class RawConnection {
 public:
  static std::unique_ptr<RawConnection> Tcp(int port, std::string* error = nullptr);
  static std::unique_ptr<RawConnection> TcpTo(const std::string& ipv4, int port,
                                              std::string* error = nullptr);
  static std::unique_ptr<RawConnection> Unix(const std::string& path, std::string* error = nullptr);
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  int fd() const { return fd_; }
  // Sends every byte; false if the connection failed.
  bool Send(std::string_view bytes);
  // Sends without blocking longer than `timeout` in total; returns how many bytes went out.
  size_t SendFor(std::string_view bytes, Millis timeout);
  // Reads until `n` bytes arrived, the peer closed, or `timeout` passed; returns what arrived.
  std::string Read(size_t n, Millis timeout = Millis(5000));
  // Reads one complete RESP reply (its raw bytes), or nullopt on timeout or close.
  std::optional<std::string> ReadReply(Millis timeout = Millis(5000));
  // Returns whatever arrives until nothing more comes for `quiet`.
  std::string ReadQuiet(Millis quiet = Millis(200));
  // True when the peer closed (EOF or reset) within `timeout`; bytes read first go to `extra`.
  bool WaitClosed(Millis timeout = Millis(3000), std::string* extra = nullptr);
  // Send(request) and ReadReply(); an empty string on failure.
  std::string Call(std::string_view request, Millis timeout = Millis(5000));
  std::string Call(const std::vector<std::string>& args, Millis timeout = Millis(5000)) {
    return Call(Multibulk(args), timeout);
  }
  bool peer_closed() const { return peer_closed_; }

 private:
  explicit RawConnection(int fd) : fd_(fd) {}
  // Appends what arrives within `timeout` to pending_; false on timeout, EOF or error.
  bool Fill(Millis timeout);

  int fd_ = -1;
  std::string pending_;
  bool peer_closed_ = false;
};

// Sends each command of `script` to `ours` and then to `reference` (a real redis-server) and
// expects the same bytes back from both, naming the command (its words cut to 20 bytes) if not.
void ExpectSameReplies(RawConnection& ours, RawConnection& reference,
                       const std::vector<std::vector<std::string>>& script);

// A server logging every write (--appendonly yes) and one raw connection to it; Restart() stops
// it and starts it again on the same data, so a test checks what replay gives back.
class LoggedServerTest : public ServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer(Logged()));
    Reconnect();
  }
  std::string Call(const std::vector<std::string>& args) { return conn_->Call(args); }
  void Reconnect() {
    conn_ = RawConnection::Tcp(server_.port());
    ASSERT_NE(conn_, nullptr);
  }
  void Restart() {
    ASSERT_TRUE(server_.Stop());
    ServerProcess::Options again = Logged();
    again.data_dir = server_.data_dir();
    ASSERT_NO_FATAL_FAILURE(StartServer(again));
    Reconnect();
  }
  static ServerProcess::Options Logged() {
    ServerProcess::Options options;
    options.flags = {"--appendonly", "yes"};
    return options;
  }
  std::unique_ptr<RawConnection> conn_;
};

// Whether this run is CI's (CI=true): there a test whose dependency is missing fails instead of
// skipping, so a CI run cannot pass without having run it.
bool UnderCi();

// A redis-server child (Debian's, or $PREFIXD_REDIS_SERVER) on a free loopback port, nothing
// persisted: the reference the differential tests compare replies against.
class RedisServer {
 public:
  struct Options {
    // Go after the defaults (e.g. {"--replicaof", "127.0.0.1", "<port>"}).
    std::vector<std::string> flags;
    // Ports to try first, in order, before free ones (FreeLoopbackPort); a test occupies them.
    std::vector<int> ports;
    // How many ports to try in all before Start() fails.
    int attempts = 5;
    // How long one try may take to answer as the child it started.
    Millis startup_timeout{10000};
  };

  RedisServer() = default;
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  ~RedisServer() { Stop(); }

  // $PREFIXD_REDIS_SERVER if set, else /usr/bin/redis-server.
  static std::string Binary();
  // Whether Binary() can be run: the one reason a reference test may skip (see
  // PREFIXD_START_REFERENCE_REDIS).
  static bool Installed();

  // Starts the server and waits (bounded) until the port answers INFO as this child (its
  // process_id). A try fails when the child exits (its port was taken: the bind failed) or the port
  // answers as another process, and the next try takes another port; after `attempts` tries the
  // result is a failure naming each port and why, never a silent fallback.
  ::testing::AssertionResult Start(const Options& options);
  ::testing::AssertionResult Start(const std::vector<std::string>& extra_flags = {});
  void Stop();
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // The ports the last Start() tried, in order (the last one is port() when it succeeded).
  const std::vector<int>& ports_tried() const { return ports_tried_; }

 private:
  // One try on `port`: true once the child answers there; else false with `why`.
  bool Launch(const Options& options, int port, std::string* why);

  int port_ = 0;
  pid_t pid_ = -1;
  std::string log_path_;
  std::vector<int> ports_tried_;
};

// Starts `redis` (a RedisServer; further arguments go to Start) in a test that compares replies
// with it. The test skips when redis-server is not installed, except under CI=true, where that
// fails it; a server that is installed and does not start fails it (Start() tried other ports).
#define PREFIXD_START_REFERENCE_REDIS(redis, ...)                                                 \
  do {                                                                                            \
    if (!::prefixd::it::RedisServer::Installed()) {                                               \
      if (::prefixd::it::UnderCi()) {                                                             \
        FAIL() << ::prefixd::it::RedisServer::Binary() << " is not installed (CI=true needs it)"; \
      }                                                                                           \
      GTEST_SKIP() << ::prefixd::it::RedisServer::Binary() << " is not installed";                \
    }                                                                                             \
    ASSERT_TRUE((redis).Start(__VA_ARGS__));                                                      \
  } while (0)

// hiredis helpers (hiredis 0.14.1: RESP2 only).
struct RedisContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct RedisReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RedisContext = std::unique_ptr<redisContext, RedisContextDeleter>;
using RedisReply = std::unique_ptr<redisReply, RedisReplyDeleter>;

// Connects with a bounded connect and read/write timeout; nullptr (error in `error`) on failure.
RedisContext ConnectHiredis(int port, Millis timeout = Millis(30000), std::string* error = nullptr);
RedisContext ConnectHiredisUnix(const std::string& path, Millis timeout = Millis(30000),
                                std::string* error = nullptr);
// Runs one binary-safe command; nullptr when the connection failed (see ctx->errstr).
RedisReply HiredisCommand(redisContext* ctx, const std::vector<std::string_view>& args);
// A reply as text for test messages: type and contents.
std::string DescribeReply(const redisReply* reply);
// A numeric field of INFO everything (e.g. "cold_keys"); ~0 when it is missing or INFO failed.
uint64_t InfoNumber(redisContext* ctx, const std::string& name);

}  // namespace prefixd::it
