// Tests for prefixd::Client (prefixd/client.h) without a prefixd server: a scripted RESP2 server
// in a thread, on a unix socket, implements SSM.PREFIX.* over a map and misbehaves on request,
// so the client's framing, zero-copy paths, pipelining and error handling can be checked exactly.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "prefixd/client.h"

namespace prefixd {
namespace {

using std::chrono::milliseconds;

// ---------------------------------------------------------------------------------------------
// The scripted server

class FakeServer {
 public:
  explicit FakeServer(std::string password = "") : password_(std::move(password)) {
    char dir_template[] = "/tmp/prefixd-client-test-XXXXXX";
    dir_ = ::mkdtemp(dir_template);
    path_ = dir_ + "/sock";
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listen_fd_, 16) != 0) {
      std::perror("fake server");
      std::abort();
    }
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }

  ~FakeServer() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    {
      std::lock_guard lock(mu_);
      for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : workers_) t.join();
    ::close(listen_fd_);
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }

  const std::string& path() const { return path_; }

  // Every command received, blobs summarized as "<N bytes>".
  std::vector<std::string> log() {
    std::lock_guard lock(mu_);
    return log_;
  }
  void ClearLog() {
    std::lock_guard lock(mu_);
    log_.clear();
  }
  int connections() const { return connections_.load(); }

 private:
  struct Conn {
    explicit Conn(int socket) : fd(socket) {}
    int fd;
    bool authed = false;
    bool trickle = false;  // write replies a few bytes at a time
    int hold = 0;          // hold this many replies, then send them together
    std::string held;
  };

  void AcceptLoop() {
    for (;;) {
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      ++connections_;
      std::lock_guard lock(mu_);
      conn_fds_.push_back(fd);
      workers_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  static bool WriteAll(int fd, std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Parses one `*N $len data...` command from `buf` at `pos`; false when incomplete.
  static bool ParseCommand(const std::string& buf, size_t& pos, std::vector<std::string>& argv) {
    size_t p = pos;
    auto line = [&](char type, long long& value) {
      if (p >= buf.size() || buf[p] != type) return false;
      size_t end = buf.find("\r\n", p);
      if (end == std::string::npos) return false;
      value = std::stoll(buf.substr(p + 1, end - p - 1));
      p = end + 2;
      return true;
    };
    long long n = 0;
    if (!line('*', n)) return false;
    argv.clear();
    for (long long i = 0; i < n; ++i) {
      long long len = 0;
      if (!line('$', len)) return false;
      if (buf.size() < p + static_cast<size_t>(len) + 2) return false;
      argv.push_back(buf.substr(p, static_cast<size_t>(len)));
      p += static_cast<size_t>(len) + 2;
    }
    pos = p;
    return true;
  }

  static std::string Bulk(std::string_view s) {
    return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
  }

  void Serve(int fd) {
    Conn conn{fd};
    std::string buf;
    char chunk[65536];
    for (;;) {
      ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) break;
      buf.append(chunk, static_cast<size_t>(n));
      size_t pos = 0;
      std::vector<std::string> argv;
      bool keep_open = true;
      while (keep_open && ParseCommand(buf, pos, argv)) keep_open = Reply(conn, argv);
      buf.erase(0, pos);
      if (!keep_open) break;
    }
    ::shutdown(fd, SHUT_RDWR);
    std::lock_guard lock(mu_);
    conn_fds_.erase(std::find(conn_fds_.begin(), conn_fds_.end(), fd));
    ::close(fd);
  }

  // Handles one command; false closes the connection.
  bool Reply(Conn& conn, const std::vector<std::string>& argv) {
    {
      std::string entry;
      for (const auto& a : argv) {
        if (!entry.empty()) entry += ' ';
        entry += a.size() > 64 ? "<" + std::to_string(a.size()) + " bytes>" : a;
      }
      std::lock_guard lock(mu_);
      log_.push_back(entry);
    }
    std::string out;
    bool close_after = false;
    bool reply = true;
    const std::string& cmd = argv[0];
    if (!password_.empty() && !conn.authed && cmd != "AUTH") {
      out = "-NOAUTH Authentication required.\r\n";
    } else if (cmd == "PING") {
      out = "+PONG\r\n";
    } else if (cmd == "AUTH") {
      conn.authed = argv.back() == password_;
      out = conn.authed ? "+OK\r\n" : "-WRONGPASS invalid username-password pair\r\n";
    } else if (cmd == "ECHO") {
      out = Bulk(argv[1]);
    } else if (cmd == "TRICKLE") {
      conn.trickle = true;
      out = "+OK\r\n";
    } else if (cmd == "HOLD") {
      conn.hold = std::stoi(argv[1]);
      out = "+OK\r\n";
    } else if (cmd == "MIXED") {
      out = std::string("*6\r\n:42\r\n$3\r\na") + '\0' +
            "c\r\n$-1\r\n-ERR inner\r\n+fine\r\n*1\r\n*0\r\n";
    } else if (cmd == "ERRCMD") {
      out = "-ERR something went wrong\r\n";
    } else if (cmd == "GARBAGE") {
      out = "!what\r\n";
    } else if (cmd == "TWOREPLIES") {
      out = "+OK\r\n+OK\r\n";
    } else if (cmd == "INTREPLY") {
      out = ":7\r\n";
    } else if (cmd == "CLOSE") {
      return false;
    } else if (cmd == "SLEEP") {
      reply = false;
    } else if (cmd == "QUIT") {
      out = "+OK\r\n";
      close_after = true;
    } else if (cmd.rfind("SSM.PREFIX.", 0) == 0) {
      out = Ssm(argv);
    } else {
      out = "-ERR unknown command '" + cmd + "'\r\n";
    }
    if (!reply) return true;
    if (conn.hold > 0 && cmd != "HOLD") {
      conn.held += out;
      if (--conn.hold > 0) return true;
      out = std::move(conn.held);
      conn.held.clear();
    }
    bool ok = true;
    if (conn.trickle) {
      for (size_t i = 0; ok && i < out.size(); i += 7) ok = WriteAll(conn.fd, out.substr(i, 7));
    } else {
      ok = WriteAll(conn.fd, out);
    }
    return ok && !close_after;
  }

  std::string Ssm(const std::vector<std::string>& argv) {
    const std::string sub = argv[0].substr(11);
    std::lock_guard lock(mu_);
    if (sub == "STORE" && argv[1] == "badreply") return ":1\r\n";  // a reply of the wrong type
    if (sub == "STORE" && argv.size() == 4) {
      data_[{argv[1], std::stoul(argv[2])}] = argv[3];
      return "+OK\r\n";
    }
    if (sub == "MSTORE" && argv.size() >= 4 && argv.size() % 2 == 0) {
      for (size_t i = 2; i < argv.size(); i += 2)
        data_[{argv[1], std::stoul(argv[i])}] = argv[i + 1];
      return "+OK\r\n";
    }
    if (sub == "FETCH" && (argv.size() == 3 || argv.size() == 6)) {
      auto it = data_.find({argv[1], std::stoul(argv[2])});
      if (it == data_.end()) return "$-1\r\n";
      if (argv.size() == 3) return Bulk(it->second);
      const size_t offset = std::stoull(argv[4]);
      const size_t length = std::stoull(argv[5]);
      if (length == 0) return "-ERR RANGE length must be positive\r\n";
      std::string slice = offset >= it->second.size() ? "" : it->second.substr(offset, length);
      // Test hooks: a session named "vanishing" loses the layer after its first chunk, and
      // one named "growing" gains bytes once a chunk has shown its end.
      if (argv[1] == "vanishing") data_.erase(it);
      if (argv[1] == "growing" && slice.size() < length) it->second += std::string(1000, 'g');
      return Bulk(slice);
    }
    if (sub == "MFETCH" && argv.size() >= 3) {
      std::string out = "*" + std::to_string(argv.size() - 2) + "\r\n";
      for (size_t i = 2; i < argv.size(); ++i) {
        auto it = data_.find({argv[1], std::stoul(argv[i])});
        out += it == data_.end() ? "$-1\r\n" : Bulk(it->second);
      }
      return out;
    }
    if (sub == "DROP" && (argv.size() == 2 || argv.size() == 3)) {
      for (auto it = data_.begin(); it != data_.end();) {
        bool match = it->first.first == argv[1] &&
                     (argv.size() == 2 || it->first.second == std::stoul(argv[2]));
        it = match ? data_.erase(it) : std::next(it);
      }
      return "+OK\r\n";
    }
    if (sub == "LAYERS" && argv.size() == 2) {
      std::string body;
      size_t n = 0;
      for (const auto& [key, value] : data_) {
        if (key.first != argv[1]) continue;
        body += ":" + std::to_string(key.second) + "\r\n:" + std::to_string(value.size()) + "\r\n";
        n += 2;
      }
      return "*" + std::to_string(n) + "\r\n" + body;
    }
    return "-ERR wrong number of arguments for '" + argv[0] + "' command\r\n";
  }

  const std::string password_;
  std::string dir_;
  std::string path_;
  int listen_fd_ = -1;
  std::thread acceptor_;
  std::atomic<int> connections_{0};

  std::mutex mu_;
  std::vector<int> conn_fds_;
  std::vector<std::thread> workers_;
  std::vector<std::string> log_;
  std::map<std::pair<std::string, unsigned long>, std::string> data_;
};

// ---------------------------------------------------------------------------------------------
// Helpers

Blob RandomBlob(size_t size, uint32_t seed) {
  Blob blob(size);
  std::mt19937 rng(seed);
  for (auto& b : blob) b = static_cast<uint8_t>(rng());
  return blob;
}

class ClientTest : public ::testing::Test {
 protected:
  Client Connect(ClientOptions options = {}) {
    auto client = Client::ConnectUnix(server_.path(), options);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return std::move(client).value();
  }

  FakeServer server_;
};

#define ASSERT_OK(expr)                                       \
  do {                                                        \
    const ::prefixd::Status st_ = (expr);                     \
    ASSERT_TRUE(st_.ok()) << #expr << ": " << st_.ToString(); \
  } while (false)

// ---------------------------------------------------------------------------------------------
// Status and Result

TEST(StatusTest, Basics) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.ToString(), "OK");
  Status err = Status::ServerError("ERR boom");
  EXPECT_FALSE(err.ok());
  EXPECT_EQ(err.code(), StatusCode::kServerError);
  EXPECT_EQ(err.ToString(), "ServerError: ERR boom");

  Result<int> value = 5;
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 5);
  EXPECT_TRUE(value.status().ok());
  Result<int> failed = Status::NotFound("x");
  EXPECT_EQ(failed.status().code(), StatusCode::kNotFound);
  Result<int> misuse = Status();  // an OK status with no value is a bug, reported as one
  EXPECT_EQ(misuse.status().code(), StatusCode::kInternal);
  Result<std::optional<Blob>> absent = std::nullopt;
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->has_value());
}

Result<int> Doubled(Result<int> in) {
  PREFIXD_ASSIGN_OR_RETURN(int v, std::move(in));
  return 2 * v;
}

Status FirstError(Status a, Status b) {
  PREFIXD_RETURN_IF_ERROR(a);
  PREFIXD_RETURN_IF_ERROR(b);
  return Status::Ok();
}

TEST(StatusTest, Macros) {
  EXPECT_EQ(*Doubled(21), 42);
  EXPECT_EQ(Doubled(Status::Timeout("t")).status().code(), StatusCode::kTimeout);
  EXPECT_EQ(FirstError(Status::Ok(), Status::Aborted("b")).code(), StatusCode::kAborted);
  EXPECT_EQ(FirstError(Status::IoError("a"), Status::Aborted("b")).code(), StatusCode::kIoError);
}

// ---------------------------------------------------------------------------------------------
// Connecting

TEST(ClientConnectTest, Failures) {
  auto missing = Client::ConnectUnix("/nonexistent/prefixd.sock");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(missing.status().message().find("/nonexistent/prefixd.sock"), std::string::npos);

  auto bad_port = Client::Connect("127.0.0.1", 0);
  EXPECT_EQ(bad_port.status().code(), StatusCode::kInvalidArgument);

  // Port 1 on loopback: nothing listens there in a test environment.
  auto refused = Client::Connect("127.0.0.1", 1, milliseconds(500));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("127.0.0.1:1"), std::string::npos);
}

TEST_F(ClientTest, PingAndMove) {
  Client client = Connect();
  EXPECT_TRUE(client.connected());
  ASSERT_OK(client.Ping());
  Client moved = std::move(client);
  ASSERT_OK(moved.Ping());
  EXPECT_FALSE(client.connected());  // NOLINT(bugprone-use-after-move): the contract under test
  EXPECT_EQ(client.Ping().code(), StatusCode::kUnavailable);
}

// ---------------------------------------------------------------------------------------------
// SSM.PREFIX commands

TEST_F(ClientTest, StoreFetchDrop) {
  Client client = Connect();
  const Blob blob = RandomBlob(1000, 1);
  ASSERT_OK(client.Store("s1", 0, blob));
  ASSERT_OK(client.Store("s1", 7, std::string_view("small\0blob\r\n", 12)));
  ASSERT_OK(client.Store("s1", 8, std::string_view()));

  auto fetched = client.Fetch("s1", 0);
  ASSERT_TRUE(fetched.ok()) << fetched.status().ToString();
  ASSERT_TRUE(fetched->has_value());
  EXPECT_EQ(**fetched, blob);

  fetched = client.Fetch("s1", 7);
  ASSERT_TRUE(fetched.ok() && fetched->has_value());
  EXPECT_EQ(std::string((*fetched)->begin(), (*fetched)->end()),
            std::string("small\0blob\r\n", 12));

  fetched = client.Fetch("s1", 8);  // empty is present, not absent
  ASSERT_TRUE(fetched.ok() && fetched->has_value());
  EXPECT_TRUE((*fetched)->empty());

  fetched = client.Fetch("s1", 1);
  ASSERT_TRUE(fetched.ok());
  EXPECT_FALSE(fetched->has_value());

  ASSERT_OK(client.Drop("s1", 0));
  fetched = client.Fetch("s1", 0);
  ASSERT_TRUE(fetched.ok());
  EXPECT_FALSE(fetched->has_value());
  ASSERT_OK(client.Drop("s1"));
  fetched = client.Fetch("s1", 7);
  ASSERT_TRUE(fetched.ok());
  EXPECT_FALSE(fetched->has_value());
  ASSERT_OK(client.Drop("no-such-session"));
}

TEST_F(ClientTest, LargeBlobIsExact) {
  Client client = Connect();
  const Blob blob = RandomBlob(24 << 20, 2);  // past every buffer size on both sides
  ASSERT_OK(client.Store("big", 3, blob));
  auto fetched = client.Fetch("big", 3);
  ASSERT_TRUE(fetched.ok() && fetched->has_value());
  EXPECT_TRUE(**fetched == blob);
}

TEST_F(ClientTest, BinarySessionIds) {
  Client client = Connect();
  const std::string sid("a\0b c\r\n", 7);
  ASSERT_OK(client.Store(sid, 1, std::string_view("x")));
  auto fetched = client.Fetch(sid, 1);
  ASSERT_TRUE(fetched.ok() && fetched->has_value());
  auto other = client.Fetch("a", 1);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value());
}

TEST_F(ClientTest, LayerBoundsCheckedBeforeSending) {
  Client client = Connect();
  server_.ClearLog();
  EXPECT_EQ(client.Store("s", kMaxLayer + 1, std::string_view("x")).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(client.Fetch("s", 0x80000000u).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client.Drop("s", 0xffffffffu).code(), StatusCode::kInvalidArgument);
  const std::vector<uint32_t> layers = {1, 0x80000000u};
  EXPECT_EQ(client.MFetch("s", layers).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client.MStore("s", {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client.MFetch("s", {}).status().code(), StatusCode::kInvalidArgument);
  ASSERT_OK(client.Store("s", kMaxLayer, std::string_view("x")));
  EXPECT_EQ(server_.log(), std::vector<std::string>{"SSM.PREFIX.STORE s 2147483647 x"});
  EXPECT_TRUE(client.connected());
}

TEST_F(ClientTest, MStoreMFetchLayers) {
  Client client = Connect();
  const Blob a = RandomBlob(100, 3);
  const Blob b = RandomBlob(70000, 4);  // sent by reference, not copied
  const std::vector<LayerBlob> layers = {{5, a}, {2, b}, {9, {}}};
  ASSERT_OK(client.MStore("m", layers));

  const std::vector<uint32_t> want = {2, 3, 5, 9};
  auto fetched = client.MFetch("m", want);
  ASSERT_TRUE(fetched.ok()) << fetched.status().ToString();
  ASSERT_EQ(fetched->size(), 4u);
  EXPECT_EQ((*fetched)[0], b);
  EXPECT_FALSE((*fetched)[1].has_value());
  EXPECT_EQ((*fetched)[2], a);
  ASSERT_TRUE((*fetched)[3].has_value());
  EXPECT_TRUE((*fetched)[3]->empty());

  auto listed = client.Layers("m");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(*listed, (std::vector<LayerInfo>{{2, 70000}, {5, 100}, {9, 0}}));
  listed = client.Layers("nobody");
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

TEST_F(ClientTest, MStoreWithMoreIovecsThanOneSyscallTakes) {
  Client client = Connect();
  std::vector<Blob> blobs;
  std::vector<LayerBlob> layers;
  for (uint32_t i = 0; i < 700; ++i) blobs.push_back(RandomBlob(17 * 1024 + i, i));
  for (uint32_t i = 0; i < 700; ++i) layers.push_back({i, blobs[i]});
  ASSERT_OK(client.MStore("many", layers));
  const std::vector<uint32_t> probe = {0, 377, 699};
  auto fetched = client.MFetch("many", probe);
  ASSERT_TRUE(fetched.ok());
  for (size_t i = 0; i < probe.size(); ++i) EXPECT_EQ((*fetched)[i], blobs[probe[i]]) << i;
}

TEST_F(ClientTest, FetchRange) {
  Client client = Connect();
  const Blob blob = RandomBlob(1000, 5);
  ASSERT_OK(client.Store("r", 1, blob));
  std::vector<uint8_t> out(300, 0xee);

  auto got = client.FetchRange("r", 1, 100, 300, out);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(*got, std::optional<size_t>(300));
  EXPECT_TRUE(std::equal(out.begin(), out.end(), blob.begin() + 100));

  got = client.FetchRange("r", 1, 900, 300, out);  // clamped at the end
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(*got, std::optional<size_t>(100));
  EXPECT_TRUE(std::equal(out.begin(), out.begin() + 100, blob.begin() + 900));

  got = client.FetchRange("r", 1, 5000, 10, out);  // past the end
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, std::optional<size_t>(0));

  got = client.FetchRange("r", 2, 0, 10, out);  // absent
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, std::nullopt);

  got = client.FetchRange("r", 1, 0, 301, out);  // buffer too small for the request
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);

  got = client.FetchRange("r", 1, 0, 0, out);  // the server's error comes back as is
  EXPECT_EQ(got.status().code(), StatusCode::kServerError);
  EXPECT_EQ(got.status().message(), "ERR RANGE length must be positive");
  ASSERT_OK(client.Ping());
}

TEST_F(ClientTest, FetchIntoStreamsInChunks) {
  Client client = Connect();
  const Blob blob = RandomBlob(100, 6);
  ASSERT_OK(client.Store("f", 1, blob));
  std::vector<uint8_t> out(250, 0);
  server_.ClearLog();
  auto got = client.FetchInto("f", 1, out, /*chunk_bytes=*/30, /*depth=*/3);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(*got, std::optional<size_t>(100));
  EXPECT_TRUE(std::equal(blob.begin(), blob.end(), out.begin()));
  // 0,30,60 go out together; the short reply at 90 stops the issuing, and the requests already
  // in flight (120, 150) are drained.
  EXPECT_EQ(server_.log(),
            (std::vector<std::string>{
                "SSM.PREFIX.FETCH f 1 RANGE 0 30", "SSM.PREFIX.FETCH f 1 RANGE 30 30",
                "SSM.PREFIX.FETCH f 1 RANGE 60 30", "SSM.PREFIX.FETCH f 1 RANGE 90 30",
                "SSM.PREFIX.FETCH f 1 RANGE 120 30", "SSM.PREFIX.FETCH f 1 RANGE 150 30"}));
  ASSERT_OK(client.Ping());
}

TEST_F(ClientTest, FetchIntoKeepsRequestsInFlight) {
  Client client = Connect(ClientOptions{.io_timeout = milliseconds(2000)});
  const Blob blob = RandomBlob(5000, 7);
  ASSERT_OK(client.Store("p", 0, blob));
  // The server answers nothing until 4 requests have arrived: a client that waited for each
  // reply before the next request would time out here.
  ASSERT_TRUE(client.Command({"HOLD", "4"}).ok());
  std::vector<uint8_t> out(5000);
  auto got = client.FetchInto("p", 0, out, 1000, 4);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, std::optional<size_t>(5000));
  EXPECT_EQ(out, blob);
}

TEST_F(ClientTest, FetchIntoExactFitAndEdgeSizes) {
  Client client = Connect();
  const Blob blob = RandomBlob(4096, 8);
  ASSERT_OK(client.Store("e", 0, blob));
  ASSERT_OK(client.Store("e", 1, std::string_view()));

  std::vector<uint8_t> exact(4096);
  auto got = client.FetchInto("e", 0, exact, 1024);  // the buffer divides into whole chunks
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, std::optional<size_t>(4096));
  EXPECT_EQ(exact, blob);

  std::vector<uint8_t> byte_chunks(4096);
  got = client.FetchInto("e", 0, byte_chunks, 1, 64);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(byte_chunks, blob);

  std::vector<uint8_t> none;
  got = client.FetchInto("e", 1, none);  // empty blob, empty buffer
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, std::optional<size_t>(0));

  got = client.FetchInto("e", 2, exact);  // absent
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, std::nullopt);
}

TEST_F(ClientTest, FetchIntoRejectsBlobLargerThanBuffer) {
  Client client = Connect();
  ASSERT_OK(client.Store("t", 0, RandomBlob(1000, 9)));
  for (size_t size : {0u, 999u, 500u}) {
    std::vector<uint8_t> out(size);
    auto got = client.FetchInto("t", 0, out, 128, 4);
    EXPECT_EQ(got.status().code(), StatusCode::kOutOfRange) << size;
    ASSERT_OK(client.Ping());  // every in-flight reply was drained
  }
}

TEST_F(ClientTest, FetchIntoNoticesChangesInMidStream) {
  Client client = Connect();
  ASSERT_OK(client.Store("vanishing", 0, RandomBlob(1000, 10)));
  std::vector<uint8_t> out(2000);
  auto got = client.FetchInto("vanishing", 0, out, 100, 2);
  EXPECT_EQ(got.status().code(), StatusCode::kAborted) << got.status().ToString();
  ASSERT_OK(client.Ping());

  ASSERT_OK(client.Store("growing", 0, RandomBlob(150, 11)));
  got = client.FetchInto("growing", 0, out, 100, 4);
  EXPECT_EQ(got.status().code(), StatusCode::kAborted) << got.status().ToString();
  ASSERT_OK(client.Ping());
}

TEST_F(ClientTest, PartialReadsEverywhere) {
  Client client = Connect();
  const Blob blob = RandomBlob(3000, 12);
  ASSERT_OK(client.Store("slow", 4, blob));
  ASSERT_TRUE(client.Command({"TRICKLE"}).ok());  // replies now arrive 7 bytes at a time
  auto fetched = client.Fetch("slow", 4);
  ASSERT_TRUE(fetched.ok() && fetched->has_value());
  EXPECT_EQ(**fetched, blob);
  std::vector<uint8_t> out(3000);
  auto got = client.FetchInto("slow", 4, out, 512, 3);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(out, blob);
  auto listed = client.Layers("slow");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(*listed, (std::vector<LayerInfo>{{4, 3000}}));
  auto mixed = client.Command({"MIXED"});
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  EXPECT_EQ(mixed->elements.size(), 6u);
  ASSERT_OK(client.Ping());
}

// ---------------------------------------------------------------------------------------------
// Generic commands and errors

TEST_F(ClientTest, CommandConvertsReplies) {
  Client client = Connect();
  const std::string binary("x\0y\r\nz", 6);
  auto echo = client.Command({"ECHO", binary});
  ASSERT_TRUE(echo.ok());
  EXPECT_EQ(echo->type, Reply::Type::kString);
  EXPECT_EQ(echo->str, binary);

  auto mixed = client.Command({"MIXED"});
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  ASSERT_EQ(mixed->type, Reply::Type::kArray);
  const auto& e = mixed->elements;
  ASSERT_EQ(e.size(), 6u);
  EXPECT_EQ(e[0].type, Reply::Type::kInteger);
  EXPECT_EQ(e[0].integer, 42);
  EXPECT_EQ(e[1].str, std::string("a\0c", 3));
  EXPECT_TRUE(e[2].is_nil());
  EXPECT_EQ(e[3].type, Reply::Type::kError);
  EXPECT_EQ(e[3].str, "ERR inner");
  EXPECT_EQ(e[4].type, Reply::Type::kStatus);
  EXPECT_EQ(e[4].str, "fine");
  ASSERT_EQ(e[5].type, Reply::Type::kArray);
  ASSERT_EQ(e[5].elements.size(), 1u);
  EXPECT_EQ(e[5].elements[0].type, Reply::Type::kArray);
  EXPECT_TRUE(e[5].elements[0].elements.empty());

  auto err = client.Command({"ERRCMD"});
  EXPECT_EQ(err.status().code(), StatusCode::kServerError);
  EXPECT_EQ(err.status().message(), "ERR something went wrong");
  EXPECT_TRUE(client.connected());  // an error reply leaves the connection usable
  ASSERT_OK(client.Ping());
}

TEST_F(ClientTest, RefusedCommandsAreNotSent) {
  Client client = Connect();
  server_.ClearLog();
  for (const std::vector<std::string_view>& argv :
       std::vector<std::vector<std::string_view>>{{},
                                                  {"subscribe", "ch"},
                                                  {"PSUBSCRIBE", "c*"},
                                                  {"MONITOR"},
                                                  {"client", "reply", "off"},
                                                  {"HELLO", "3"}}) {
    EXPECT_EQ(client.Command(argv).status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(server_.log().empty());
  EXPECT_TRUE(client.connected());
}

TEST_F(ClientTest, ProtocolViolationClosesTheConnection) {
  for (std::string_view bad : {"GARBAGE", "TWOREPLIES"}) {
    Client client = Connect();
    auto reply = client.Command({bad});
    EXPECT_EQ(reply.status().code(), StatusCode::kProtocolError) << bad;
    EXPECT_FALSE(client.connected());
    Status after = client.Ping();
    EXPECT_EQ(after.code(), StatusCode::kUnavailable);
    EXPECT_NE(after.message().find("ProtocolError"), std::string::npos) << after.message();
    ASSERT_OK(client.Reconnect());
    ASSERT_OK(client.Ping());
  }
}

TEST_F(ClientTest, UnexpectedReplyTypeIsAProtocolError) {
  Client client = Connect();
  // A Store answered with an integer: the typed reader must not take it for +OK.
  Status st = client.Store("badreply", 0, std::string_view("x"));
  EXPECT_EQ(st.code(), StatusCode::kProtocolError) << st.ToString();
  EXPECT_NE(st.message().find("expected +OK, got ':1'"), std::string::npos) << st.message();
  EXPECT_FALSE(client.connected());
  ASSERT_OK(client.Reconnect());
  // Through Command() the same reply is simply an integer.
  auto reply = client.Command({"INTREPLY"});
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->integer, 7);
}

TEST_F(ClientTest, ServerClosingIsAnIoError) {
  Client client = Connect();
  auto reply = client.Command({"CLOSE"});
  EXPECT_EQ(reply.status().code(), StatusCode::kIoError) << reply.status().ToString();
  EXPECT_FALSE(client.connected());
  ASSERT_OK(client.Reconnect());
  ASSERT_OK(client.Ping());
}

TEST_F(ClientTest, QuitClosesCleanly) {
  Client client = Connect();
  auto reply = client.Command({"QUIT"});
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->str, "OK");
  EXPECT_FALSE(client.connected());
}

TEST_F(ClientTest, Timeout) {
  Client client = Connect(ClientOptions{.io_timeout = milliseconds(200)});
  auto start = std::chrono::steady_clock::now();
  auto reply = client.Command({"SLEEP"});
  EXPECT_EQ(reply.status().code(), StatusCode::kTimeout) << reply.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_FALSE(client.connected());
  ASSERT_OK(client.Reconnect());
  ASSERT_OK(client.Ping());
}

TEST(ClientAuthTest, AuthIsRepeatedOnReconnect) {
  FakeServer server("secret");
  auto connected = Client::ConnectUnix(server.path());
  ASSERT_TRUE(connected.ok());
  Client client = std::move(connected).value();
  Status st = client.Ping();
  EXPECT_EQ(st.code(), StatusCode::kServerError);
  EXPECT_EQ(st.message(), "NOAUTH Authentication required.");

  st = client.Auth("wrong");
  EXPECT_EQ(st.code(), StatusCode::kServerError);
  EXPECT_TRUE(client.connected());
  ASSERT_OK(client.Auth("secret"));
  ASSERT_OK(client.Ping());

  ASSERT_OK(client.Reconnect());
  ASSERT_OK(client.Ping());  // authenticated again without being asked
  EXPECT_EQ(server.connections(), 2);
  EXPECT_EQ(client.Auth("", "x").code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace prefixd
