// ShmClient's CHECKSUM check (include/prefixd/shm.h) against a scripted server on a unix socket:
// the real server hashes the bytes it lends and cannot answer a wrong checksum, so a server that
// lies is the only way to show that the client compares the mapped bytes with the checksum, and
// that a mismatch (or a missing checksum it asked for) is an error its caller sees, with the
// call's one lease released, once. The scripted server passes a memfd as its only arena.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/descriptor_passing.h"
#include "prefixd/shm.h"

namespace prefixd {
namespace {

constexpr size_t kArenaBytes = 64 << 10;
constexpr uint64_t kLease = 7;

std::string Hex(const uint8_t* data, size_t size) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(data, size)));
  return std::string(hex, 16);
}

std::string Bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}

// One connection, one request at a time. Answers SHM.HELLO with its arena (a memfd of a known
// pattern), V.SHMFETCH with two places in it whose checksum slots are what the test set, and
// SHM.RELEASE with 1, recording the ids it was asked to release.
class ScriptedServer {
 public:
  ScriptedServer() {
    char dir_template[] = "/tmp/prefixd-shm-checksum-XXXXXX";
    dir_ = ::mkdtemp(dir_template);
    path_ = dir_ + "/sock";
    arena_fd_ = ::memfd_create("scripted-arena", MFD_CLOEXEC);
    pattern_.resize(kArenaBytes);
    for (size_t i = 0; i < pattern_.size(); ++i) pattern_[i] = static_cast<uint8_t>(i * 31 + 7);
    if (arena_fd_ < 0 || ::pwrite(arena_fd_, pattern_.data(), pattern_.size(), 0) !=
                             static_cast<ssize_t>(pattern_.size())) {
      std::perror("memfd");
      std::abort();
    }
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listen_fd_, 4) != 0) {
      std::perror("scripted server");
      std::abort();
    }
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    if (conn_fd_ >= 0) ::shutdown(conn_fd_, SHUT_RDWR);
    thread_.join();
    if (conn_fd_ >= 0) ::close(conn_fd_);
    ::close(listen_fd_);
    ::close(arena_fd_);
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }

  const std::string& path() const { return path_; }
  const std::vector<uint8_t>& pattern() const { return pattern_; }
  // The checksum slots of the two places V.SHMFETCH answers next: a bulk string, or nil when
  // empty.
  void SetChecksums(std::string first, std::string second) {
    std::lock_guard lock(mu_);
    checksums_ = {std::move(first), std::move(second)};
  }
  std::vector<std::string> Released() {
    std::lock_guard lock(mu_);
    return released_;
  }
  // The words of every request received, in order.
  std::vector<std::vector<std::string>> Requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

  // The two places: [0, 4096) and [8192, 8192 + 1000) of the arena, both under kLease.
  static constexpr size_t kFirstOffset = 0, kFirstSize = 4096;
  static constexpr size_t kSecondOffset = 8192, kSecondSize = 1000;

 private:
  void Serve() {
    conn_fd_ = ::accept(listen_fd_, nullptr, nullptr);
    if (conn_fd_ < 0) return;
    std::string in;
    while (true) {
      std::vector<std::string> words;
      if (!ReadRequest(in, words)) return;
      {
        std::lock_guard lock(mu_);
        requests_.push_back(words);
      }
      if (words.empty()) return;
      if (words[0] == "SHM.HELLO") {
        SendWithFd("*1\r\n*2\r\n:0\r\n:" + std::to_string(kArenaBytes) + "\r\n");
      } else if (words[0] == "V.SHMFETCH") {
        std::string reply = "*2\r\n";
        std::lock_guard lock(mu_);
        const size_t offsets[] = {kFirstOffset, kSecondOffset};
        const size_t sizes[] = {kFirstSize, kSecondSize};
        for (int i = 0; i < 2; ++i) {
          reply += "*6\r\n:0\r\n:" + std::to_string(offsets[i]) +
                   "\r\n:" + std::to_string(sizes[i]) + "\r\n:1\r\n";
          reply += checksums_[i].empty() ? "$-1\r\n" : Bulk(checksums_[i]);
          reply += ":" + std::to_string(kLease) + "\r\n";
        }
        Send(reply);
      } else if (words[0] == "SHM.RELEASE") {
        {
          std::lock_guard lock(mu_);
          released_.insert(released_.end(), words.begin() + 1, words.end());
        }
        Send(":1\r\n");
      } else {
        Send("-ERR unknown command\r\n");
      }
    }
  }

  // A RESP multibulk request into `words`; false when the connection ends.
  bool ReadRequest(std::string& in, std::vector<std::string>& words) {
    size_t at = 0;
    auto line = [&](std::string& out) {
      while (true) {
        const size_t end = in.find("\r\n", at);
        if (end != std::string::npos) {
          out = in.substr(at, end - at);
          at = end + 2;
          return true;
        }
        if (!Fill(in)) return false;
      }
    };
    std::string header;
    if (!line(header) || header.empty() || header[0] != '*') return false;
    const long count = std::strtol(header.c_str() + 1, nullptr, 10);
    for (long i = 0; i < count; ++i) {
      std::string length;
      if (!line(length) || length.empty() || length[0] != '$') return false;
      const size_t n = std::strtoul(length.c_str() + 1, nullptr, 10);
      while (in.size() < at + n + 2) {
        if (!Fill(in)) return false;
      }
      words.push_back(in.substr(at, n));
      at += n + 2;
    }
    in.erase(0, at);
    return true;
  }
  bool Fill(std::string& in) {
    char buffer[4096];
    const ssize_t n = ::recv(conn_fd_, buffer, sizeof buffer, 0);
    if (n <= 0) return false;
    in.append(buffer, static_cast<size_t>(n));
    return true;
  }
  void Send(const std::string& bytes) {
    (void)!::send(conn_fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  // The arena's descriptor rides on the reply's first byte, as the real server sends it.
  void SendWithFd(const std::string& bytes) {
    const DescriptorMessage message(bytes.data(), 1, std::span(&arena_fd_, 1));
    if (::sendmsg(conn_fd_, message.get(), MSG_NOSIGNAL) != 1) return;
    Send(bytes.substr(1));
  }

  std::string dir_, path_;
  int listen_fd_ = -1, arena_fd_ = -1;
  std::atomic<int> conn_fd_{-1};
  std::vector<uint8_t> pattern_;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> checksums_{"", ""};
  std::vector<std::string> released_;
  std::vector<std::vector<std::string>> requests_;
};

TEST(ShmClientChecksumTest, MatchingChecksumsPassAndAMismatchIsTheCallersError) {
  ScriptedServer server;
  ShmClient client;
  Status st = client.Connect(server.path());
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(client.arena_count(), 1u);
  const uint8_t* bytes = server.pattern().data();
  const std::string first = Hex(bytes + ScriptedServer::kFirstOffset, ScriptedServer::kFirstSize);
  const std::string second =
      Hex(bytes + ScriptedServer::kSecondOffset, ScriptedServer::kSecondSize);

  // Both right: the views are the mapped bytes, with their checksums; CHECKSUM was asked for.
  server.SetChecksums(first, second);
  std::vector<ShmView> pieces;
  st = client.FetchRows("v", 0, 0, 16, pieces, false, /*checksum=*/true);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].checksum, first);
  EXPECT_EQ(pieces[1].checksum, second);
  EXPECT_EQ(std::memcmp(pieces[1].data, bytes + ScriptedServer::kSecondOffset,
                        ScriptedServer::kSecondSize),
            0);
  EXPECT_EQ(server.Requests().back().back(), "CHECKSUM");
  // Released through the client: the call's one lease, once, for its two views.
  std::vector<uint64_t> leases = {pieces[0].lease, pieces[1].lease};
  ASSERT_TRUE(client.Release(leases).ok());
  EXPECT_EQ(server.Released(), std::vector<std::string>{std::to_string(kLease)});

  // The second place's checksum is another piece's: the call fails with kCorruption, nothing is
  // returned, and its lease is released (sent before the next request).
  server.SetChecksums(first, first);
  st = client.FetchRows("v", 0, 0, 16, pieces, false, /*checksum=*/true);
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.ToString();
  EXPECT_NE(st.message().find(first), std::string::npos) << st.message();
  EXPECT_TRUE(pieces.empty());
  ASSERT_TRUE(client.Command({"PING"}).status().code() == StatusCode::kServerError);
  EXPECT_EQ(server.Released(),
            (std::vector<std::string>{std::to_string(kLease), std::to_string(kLease)}));

  // Asked for and not given: a protocol error, not a silent pass.
  server.SetChecksums(first, "");
  st = client.FetchRows("v", 0, 0, 16, pieces, false, /*checksum=*/true);
  EXPECT_EQ(st.code(), StatusCode::kProtocolError) << st.ToString();
  EXPECT_TRUE(pieces.empty());

  // Not asked for: nil slots, no CHECKSUM word sent, and nothing to check.
  server.SetChecksums("", "");
  st = client.FetchRows("v", 0, 0, 16, pieces);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(pieces[0].checksum.empty() && pieces[1].checksum.empty());
  EXPECT_NE(server.Requests().back().back(), "CHECKSUM");
}

}  // namespace
}  // namespace prefixd
