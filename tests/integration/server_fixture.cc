// Starts and stops prefixd-server child processes for integration tests and implements the
// raw-socket and hiredis clients the tests talk to them with.
#include "integration/server_fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace prefixd::it {
namespace {

using Clock = std::chrono::steady_clock;

// What the server logs (src/app/main.cc) once it listens on every port it was given.
constexpr std::string_view kReadyLine = "Ready to accept connections";

int RemainingMs(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

}  // namespace

int FreeLoopbackPort() {
  // Below the kernel's ephemeral range (32768 and up by default), where no client connection's
  // own port lands: a port the kernel just handed out and took back is soon some test client's
  // source port. Random, so parallel test processes rarely try the same one; a port taken
  // anyway is caught when the server's bind fails (ServerProcess::Launch tries another).
  thread_local std::mt19937 draw{std::random_device{}()};
  std::uniform_int_distribution<int> below_ephemeral(10000, 31999);
  for (int attempt = 0; attempt < 64; ++attempt) {
    const int port = below_ephemeral(draw);
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (free) return port;
  }
  return -1;
}

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Tail(const std::string& text, size_t n) {
  return text.size() <= n ? text : "...\n" + text.substr(text.size() - n);
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "status " + std::to_string(status);
}

std::optional<size_t> ReplyEnd(std::string_view b, size_t pos) {
  if (pos >= b.size()) return std::nullopt;
  size_t eol = b.find("\r\n", pos);
  if (eol == std::string_view::npos) return std::nullopt;
  char type = b[pos];
  std::string head(b.substr(pos + 1, eol - pos - 1));
  size_t next = eol + 2;
  switch (type) {
    case '+':
    case '-':
    case ':':
    case '_':
    case ',':
    case '#':
    case '(':
      return next;
    case '$':
    case '=':
    case '!': {
      long long n = std::strtoll(head.c_str(), nullptr, 10);
      if (n < 0) return next;
      if (b.size() < next + static_cast<size_t>(n) + 2) return std::nullopt;
      return next + static_cast<size_t>(n) + 2;
    }
    case '*':
    case '~':
    case '>':
    case '%':
    case '|': {
      long long n = std::strtoll(head.c_str(), nullptr, 10);
      if (n < 0) return next;
      if (type == '%' || type == '|') n *= 2;
      for (long long i = 0; i < n; ++i) {
        auto end = ReplyEnd(b, next);
        if (!end) return std::nullopt;
        next = *end;
      }
      // An attribute is followed by the reply it annotates.
      if (type == '|') return ReplyEnd(b, next);
      return next;
    }
    default:
      throw std::runtime_error("not a RESP reply type byte: '" + std::string(1, type) + "'");
  }
}

}  // namespace

std::string ServerBinary() {
  for (const char* name : {"PREFIXD_TEST_SERVER", "PREFIXD_SERVER"}) {
    if (const char* env = std::getenv(name); env != nullptr && *env != '\0') return env;
  }
#ifdef PREFIXD_SERVER_BINARY
  return PREFIXD_SERVER_BINARY;
#else
  return "prefixd-server";
#endif
}

bool ServerIsSanitized() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#endif
#endif
  const char* env = std::getenv("PREFIXD_SERVER_SANITIZED");
  return env != nullptr && *env != '\0';
}

void ExpectSameReplies(RawConnection& ours, RawConnection& reference,
                       const std::vector<std::vector<std::string>>& script) {
  for (const std::vector<std::string>& command : script) {
    std::string text;
    for (const std::string& word : command) text += word.substr(0, 20) + " ";
    EXPECT_EQ(ours.Call(command), reference.Call(command)) << text;
  }
}

std::string Pattern(size_t size, uint64_t seed) {
  std::string out(size, '\0');
  uint64_t x = 0x9e3779b97f4a7c15ULL * (seed + 1);
  for (size_t i = 0; i < size; ++i) {
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    out[i] = static_cast<char>((x * 0x2545f4914f6cdd1dULL) >> 56);
  }
  return out;
}

std::string Multibulk(const std::vector<std::string>& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) {
    out += "$" + std::to_string(a.size()) + "\r\n";
    out += a;
    out += "\r\n";
  }
  return out;
}

std::optional<size_t> CompleteReplyLength(std::string_view buffer) { return ReplyEnd(buffer, 0); }

// ---------------------------------------------------------------------------------------------
// ServerProcess

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    std::string how;
    if (!Stop(&how)) ADD_FAILURE() << "prefixd-server did not stop cleanly: " << how;
  }
  if (!log_path_.empty() && ::testing::Test::HasFailure()) {
    std::cerr << "---- prefixd-server log (" << log_path_ << ") ----\n"
              << Tail(ReadLog(), 4000) << "\n---- end of log ----\n";
  }
  if (!root_.empty() && std::getenv("PREFIXD_IT_KEEP") == nullptr) {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
}

::testing::AssertionResult ServerProcess::Start(Options options) {
  if (pid_ > 0) return ::testing::AssertionFailure() << "server already started";
  // A server that closes a connection mid-write must fail the write, not kill the test (hiredis
  // writes without MSG_NOSIGNAL).
  ::signal(SIGPIPE, SIG_IGN);
  std::string base = std::filesystem::temp_directory_path().string() + "/prefixd-it-XXXXXX";
  std::vector<char> tmpl(base.begin(), base.end());
  tmpl.push_back('\0');
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return ::testing::AssertionFailure() << "mkdtemp failed: " << std::strerror(errno);
  }
  root_ = tmpl.data();
  data_dir_ = options.data_dir.empty() ? root_ + "/data" : options.data_dir;
  log_path_ = root_ + "/server.log";
  if (options.unix_socket) unix_socket_ = root_ + "/prefixd.sock";
  for (int attempt = 0; attempt < 5; ++attempt) {
    bool port_taken = false;
    auto result = Launch(options, &port_taken);
    if (result || !port_taken) return result;
  }
  return ::testing::AssertionFailure() << "could not find a free port in 5 attempts";
}

::testing::AssertionResult ServerProcess::Restart(Options options) {
  if (pid_ > 0) return ::testing::AssertionFailure() << "server still running; Stop() or Kill()";
  if (root_.empty()) return ::testing::AssertionFailure() << "Restart() before Start()";
  if (options.unix_socket && unix_socket_.empty()) unix_socket_ = root_ + "/prefixd.sock";
  for (int attempt = 0; attempt < 5; ++attempt) {
    bool port_taken = false;
    auto result = Launch(options, &port_taken);
    if (result || !port_taken) return result;
  }
  return ::testing::AssertionFailure() << "could not find a free port in 5 attempts";
}

::testing::AssertionResult ServerProcess::Launch(const Options& options, bool* port_taken) {
  port_ = options.port > 0 ? options.port : FreeLoopbackPort();
  if (port_ <= 0) return ::testing::AssertionFailure() << "no free loopback port";
  std::vector<std::string> args = options.launcher;
  for (std::string a : {ServerBinary(), std::string("--bind"), options.bind, std::string("--port"),
                        std::to_string(port_), std::string("--dir"), data_dir_}) {
    args.push_back(std::move(a));
  }
  if (!unix_socket_.empty()) {
    args.push_back("--unixsocket");
    args.push_back(unix_socket_);
  }
  // Two io threads unless the test picks: the server's default on a 2-core machine is one, and
  // the tests (TSan's above all) must see connections served by different threads.
  if (std::find(options.flags.begin(), options.flags.end(), "--io-threads") ==
      options.flags.end()) {
    args.push_back("--io-threads");
    args.push_back("2");
  }
  args.insert(args.end(), options.flags.begin(), options.flags.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // The log is appended to across restarts: only what this launch writes tells of it.
  std::error_code size_error;
  const auto log_before = std::filesystem::file_size(log_path_, size_error);
  const size_t launch_log_at = size_error ? 0 : static_cast<size_t>(log_before);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    pid_ = -1;
    return ::testing::AssertionFailure()
           << "cannot run " << argv[0] << ": " << std::strerror(rc)
           << " (set PREFIXD_TEST_SERVER or PREFIXD_SERVER to the prefixd-server binary)";
  }
  exited_ = false;

  std::string command_line;
  for (const auto& a : args) command_line += a + " ";
  auto deadline = Clock::now() + options.startup_timeout;
  while (Clock::now() < deadline) {
    int status = 0;
    if (WaitExit(Millis(0), &status)) {
      pid_ = -1;
      std::string log = ReadLog();
      *port_taken =
          log.find("bind") != std::string::npos && log.find("in use") != std::string::npos;
      return ::testing::AssertionFailure()
             << "prefixd-server " << DescribeStatus(status)
             << " during startup\ncommand: " << command_line << "\nlog:\n"
             << Tail(log, 4000);
    }
    // Until this server logs that it is ready, whatever answers on the port is someone else's
    // (the port was taken between picking it and binding it; this one is about to fail its bind).
    if (ReadLog().find(kReadyLine, launch_log_at) == std::string::npos) {
      std::this_thread::sleep_for(Millis(10));
      continue;
    }
    if (auto conn = RawConnection::Tcp(port_)) {
      // Any reply proves it is our server answering (NOAUTH counts, with requirepass).
      std::string reply = conn->Call("PING\r\n", Millis(2000));
      if (!reply.empty() && (reply[0] == '+' || reply[0] == '-')) {
        return ::testing::AssertionSuccess();
      }
    }
    std::this_thread::sleep_for(Millis(10));
  }
  std::string how;
  Stop(&how);
  return ::testing::AssertionFailure()
         << "prefixd-server did not log \"" << kReadyLine
         << "\" and answer PING on 127.0.0.1:" << port_ << " within "
         << options.startup_timeout.count() << " ms\ncommand: " << command_line << "\nlog:\n"
         << Tail(ReadLog(), 4000);
}

bool ServerProcess::WaitExit(Millis timeout, int* status) {
  if (exited_) {
    *status = exit_status_;
    return true;
  }
  if (pid_ <= 0) return true;
  auto deadline = Clock::now() + timeout;
  while (true) {
    pid_t r = ::waitpid(pid_, status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      exit_status_ = *status;
      return true;
    }
    if (r < 0 && errno != EINTR) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(Millis(5));
  }
}

bool ServerProcess::Running() {
  int status = 0;
  return pid_ > 0 && !WaitExit(Millis(0), &status);
}

bool ServerProcess::Stop(std::string* how) {
  if (pid_ <= 0) return true;
  int status = 0;
  bool clean = true;
  std::string text;
  if (WaitExit(Millis(0), &status)) {
    text = "prefixd-server had already " + DescribeStatus(status);
    clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  } else {
    ::kill(pid_, SIGTERM);
    if (WaitExit(Millis(10000), &status)) {
      text = "prefixd-server " + DescribeStatus(status) + " after SIGTERM";
      clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    } else {
      ::kill(pid_, SIGKILL);
      WaitExit(Millis(10000), &status);
      text = "prefixd-server ignored SIGTERM for 10 s and was killed with SIGKILL";
      clean = false;
    }
  }
  pid_ = -1;
  if (how) *how = text;
  return clean;
}

bool ServerProcess::Kill() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (!WaitExit(Millis(0), &status)) {
    ::kill(pid_, SIGKILL);
    WaitExit(Millis(10000), &status);
  }
  pid_ = -1;
  return exited_ && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

bool ServerProcess::WaitForExit(Millis timeout) {
  int status = 0;
  return WaitExit(timeout, &status);
}

std::optional<int> ServerProcess::exit_status() const {
  if (!exited_) return std::nullopt;
  return exit_status_;
}

std::string ServerProcess::ReadLog() const { return log_path_.empty() ? "" : ReadFile(log_path_); }

int64_t ServerProcess::RssKib() const {
  if (pid_ <= 0 || exited_) return -1;
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoll(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

void ServerTest::StartServer(ServerProcess::Options options) {
  ASSERT_TRUE(server_.Start(std::move(options)));
}

// ---------------------------------------------------------------------------------------------
// RawConnection

std::unique_ptr<RawConnection> RawConnection::Tcp(int port, std::string* error) {
  return TcpTo("127.0.0.1", port, error);
}

std::unique_ptr<RawConnection> RawConnection::TcpTo(const std::string& ipv4, int port,
                                                    std::string* error) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    if (error) *error = std::strerror(errno);
    return nullptr;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (::inet_pton(AF_INET, ipv4.c_str(), &addr.sin_addr) != 1) {
    if (error) *error = "not an IPv4 address: " + ipv4;
    ::close(fd);
    return nullptr;
  }
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (error) *error = std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return std::unique_ptr<RawConnection>(new RawConnection(fd));
}

std::unique_ptr<RawConnection> RawConnection::Unix(const std::string& path, std::string* error) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) {
    if (error) *error = "unix socket path too long";
    return nullptr;
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    if (error) *error = std::strerror(errno);
    return nullptr;
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (error) *error = std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  return std::unique_ptr<RawConnection>(new RawConnection(fd));
}

RawConnection::~RawConnection() {
  if (fd_ >= 0) ::close(fd_);
}

size_t RawConnection::SendFor(std::string_view bytes, Millis timeout) {
  auto deadline = Clock::now() + timeout;
  size_t sent = 0;
  while (sent < bytes.size()) {
    pollfd p{fd_, POLLOUT, 0};
    int r = ::poll(&p, 1, RemainingMs(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      break;
    }
    sent += static_cast<size_t>(n);
  }
  return sent;
}

bool RawConnection::Send(std::string_view bytes) {
  return SendFor(bytes, Millis(60000)) == bytes.size();
}

bool RawConnection::Fill(Millis timeout) {
  if (peer_closed_) return false;
  auto deadline = Clock::now() + timeout;
  while (true) {
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, RemainingMs(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    char buf[256 * 1024];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      pending_.append(buf, static_cast<size_t>(n));
      return true;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    peer_closed_ = true;  // EOF, or a reset
    return false;
  }
}

std::string RawConnection::Read(size_t n, Millis timeout) {
  auto deadline = Clock::now() + timeout;
  while (pending_.size() < n) {
    if (!Fill(Millis(RemainingMs(deadline)))) break;
  }
  size_t take = std::min(n, pending_.size());
  std::string out = pending_.substr(0, take);
  pending_.erase(0, take);
  return out;
}

std::optional<std::string> RawConnection::ReadReply(Millis timeout) {
  auto deadline = Clock::now() + timeout;
  while (true) {
    if (auto len = CompleteReplyLength(pending_)) {
      std::string out = pending_.substr(0, *len);
      pending_.erase(0, *len);
      return out;
    }
    if (!Fill(Millis(RemainingMs(deadline)))) return std::nullopt;
  }
}

std::string RawConnection::ReadQuiet(Millis quiet) {
  while (Fill(quiet)) {
  }
  std::string out;
  out.swap(pending_);
  return out;
}

bool RawConnection::WaitClosed(Millis timeout, std::string* extra) {
  auto deadline = Clock::now() + timeout;
  while (!peer_closed_ && Clock::now() < deadline) Fill(Millis(RemainingMs(deadline)));
  if (extra) *extra = pending_;
  pending_.clear();
  return peer_closed_;
}

std::string RawConnection::Call(std::string_view request, Millis timeout) {
  if (!Send(request)) return {};
  return ReadReply(timeout).value_or("");
}

// ---------------------------------------------------------------------------------------------
// hiredis

namespace {

timeval ToTimeval(Millis t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  return tv;
}

RedisContext Checked(redisContext* raw, Millis timeout, std::string* error) {
  RedisContext ctx(raw);
  if (!ctx || ctx->err) {
    if (error) *error = ctx ? ctx->errstr : "cannot allocate a hiredis context";
    return nullptr;
  }
  redisSetTimeout(ctx.get(), ToTimeval(timeout));
  return ctx;
}

}  // namespace

RedisContext ConnectHiredis(int port, Millis timeout, std::string* error) {
  return Checked(redisConnectWithTimeout("127.0.0.1", port, ToTimeval(timeout)), timeout, error);
}

RedisContext ConnectHiredisUnix(const std::string& path, Millis timeout, std::string* error) {
  return Checked(redisConnectUnixWithTimeout(path.c_str(), ToTimeval(timeout)), timeout, error);
}

uint64_t InfoNumber(redisContext* ctx, const std::string& name) {
  RedisReply r = HiredisCommand(ctx, {"INFO", "everything"});
  if (!r || r->type != REDIS_REPLY_STRING) return ~uint64_t{0};
  const std::string text(r->str, r->len);
  const size_t at = text.find("\n" + name + ":");
  if (at == std::string::npos) return ~uint64_t{0};
  return std::stoull(text.substr(at + name.size() + 2));
}

RedisReply HiredisCommand(redisContext* ctx, const std::vector<std::string_view>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (auto a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  void* reply = redisCommandArgv(ctx, static_cast<int>(args.size()), argv.data(), lens.data());
  return RedisReply(static_cast<redisReply*>(reply));
}

std::string DescribeReply(const redisReply* r) {
  if (r == nullptr) return "(no reply)";
  auto text = [&] {
    std::string s(r->str, r->len);
    return s.size() > 200 ? s.substr(0, 200) + "...(" + std::to_string(s.size()) + " bytes)" : s;
  };
  switch (r->type) {
    case REDIS_REPLY_STATUS:
      return "status '" + text() + "'";
    case REDIS_REPLY_ERROR:
      return "error '" + text() + "'";
    case REDIS_REPLY_STRING:
      return "string '" + text() + "'";
    case REDIS_REPLY_INTEGER:
      return "integer " + std::to_string(r->integer);
    case REDIS_REPLY_NIL:
      return "nil";
    case REDIS_REPLY_ARRAY: {
      std::string out = "array[" + std::to_string(r->elements) + "] {";
      for (size_t i = 0; i < r->elements && i < 16; ++i) {
        out += (i ? ", " : "") + DescribeReply(r->element[i]);
      }
      return out + (r->elements > 16 ? ", ...}" : "}");
    }
  }
  return "type " + std::to_string(r->type);
}

bool UnderCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string_view(ci) == "true";
}

std::string RedisServer::Binary() {
  const char* path = std::getenv("PREFIXD_REDIS_SERVER");
  return path != nullptr && *path != '\0' ? path : "/usr/bin/redis-server";
}

bool RedisServer::Installed() { return ::access(Binary().c_str(), X_OK) == 0; }

::testing::AssertionResult RedisServer::Start(const std::vector<std::string>& extra_flags) {
  Options options;
  options.flags = extra_flags;
  return Start(options);
}

::testing::AssertionResult RedisServer::Start(const Options& options) {
  Stop();
  port_ = 0;
  ports_tried_.clear();
  if (!Installed()) return ::testing::AssertionFailure() << Binary() << " is not installed";
  std::string tries;
  for (int attempt = 0; attempt < options.attempts; ++attempt) {
    const size_t at = static_cast<size_t>(attempt);
    const int port = at < options.ports.size() ? options.ports[at] : FreeLoopbackPort();
    if (port <= 0) {
      tries += "\n  no free loopback port";
      continue;
    }
    ports_tried_.push_back(port);
    std::string why;
    if (Launch(options, port, &why)) {
      port_ = port;
      return ::testing::AssertionSuccess();
    }
    tries += "\n  port " + std::to_string(port) + ": " + why;
  }
  return ::testing::AssertionFailure()
         << Binary() << " did not start in " << options.attempts << " tries:" << tries;
}

bool RedisServer::Launch(const Options& options, int port, std::string* why) {
  char log_template[] = "/tmp/prefixd-redis-XXXXXX";
  const int log_fd = ::mkstemp(log_template);
  if (log_fd < 0) {
    *why = std::string("cannot create its log file: ") + std::strerror(errno);
    return false;
  }
  log_path_ = log_template;
  const std::string binary = Binary();
  std::vector<std::string> args = {binary,   "--port", std::to_string(port), "--bind", "127.0.0.1",
                                   "--save", "",       "--appendonly",       "no",     "--loglevel",
                                   "warning"};
  args.insert(args.end(), options.flags.begin(), options.flags.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // It logs to stdout (no --logfile): into the log file, which a failed try quotes.
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  if (pid_ < 0) {
    *why = std::string("fork failed: ") + std::strerror(errno);
    pid_ = -1;
    return false;
  }
  // Ready once the port answers as this child: a port taken by another server answers too.
  const std::string mine = "process_id:" + std::to_string(pid_) + "\r\n";
  const auto deadline = Clock::now() + options.startup_timeout;
  while (Clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      *why = DescribeStatus(status) + ": " + Tail(ReadFile(log_path_), 400);
      Stop();
      return false;
    }
    if (auto c = RawConnection::Tcp(port)) {
      const std::string reply = c->Call(std::vector<std::string>{"INFO", "server"}, Millis(1000));
      if (reply.find(mine) != std::string::npos) return true;
      const size_t id = reply.find("process_id:");
      if (id != std::string::npos) {
        *why = "answered by another process (" + reply.substr(id, reply.find('\r', id) - id) +
               "), not redis-server " + std::to_string(pid_);
        Stop();
        return false;
      }
    }
    std::this_thread::sleep_for(Millis(20));
  }
  *why = "did not answer as redis-server " + std::to_string(pid_) + " within " +
         std::to_string(options.startup_timeout.count()) + " ms";
  Stop();
  return false;
}

void RedisServer::Stop() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  if (!log_path_.empty()) {
    ::unlink(log_path_.c_str());
    log_path_.clear();
  }
}

}  // namespace prefixd::it
