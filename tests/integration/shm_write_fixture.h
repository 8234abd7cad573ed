// The zero-copy write tests' fixture (shm_write_test.cc: SHM.SET, shm_call_test.cc: SHM.CALL): a
// server with shared arenas and a unix socket, memfds sealed or not, requests sent with
// descriptors passed on their bytes by hand, and the server's open descriptors counted. Used from
// the test's own thread.
#pragma once

#include <dirent.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/descriptor_passing.h"
#include "integration/server_fixture.h"
#include "prefixd/shm.h"

namespace prefixd::it {

inline std::span<const uint8_t> AsBytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// A memfd holding `data`, not sealed.
inline int UnsealedMemfd(const std::string& data) {
  const int fd = ::memfd_create("shm-write-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::pwrite(fd, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
  return fd;
}

// Sends `bytes` with `fds` passed on them (SCM_RIGHTS).
inline void SendWithFds(int socket, const std::string& bytes, const std::vector<int>& fds) {
  const DescriptorMessage message(bytes.data(), bytes.size(), fds);
  ASSERT_EQ(::sendmsg(socket, message.get(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// The descriptors the process `pid` has open.
inline size_t OpenFds(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd";
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return 0;
  size_t count = 0;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count;
}

class ShmWriteTest : public ServerTest {
 protected:
  void Start(std::vector<std::string> flags = {}) {
    flags.insert(flags.begin(), {"--shm-arenas", "yes"});
    if (std::find(flags.begin(), flags.end(), "--appendonly") == flags.end()) {
      flags.insert(flags.end(), {"--appendonly", "no"});
    }
    ServerProcess::Options options{.flags = flags, .unix_socket = true};
    options.data_dir = data_dir_;
    ASSERT_NO_FATAL_FAILURE(StartServer(options));
    admin_ = ConnectHiredis(server_.port());
    ASSERT_NE(admin_, nullptr);
  }
  // Stops the server and starts it again on the same data (the log replayed), with `flags`.
  void Restart(std::vector<std::string> flags) {
    admin_.reset();
    ASSERT_TRUE(server_.Stop());
    data_dir_ = server_.data_dir();
    ASSERT_NO_FATAL_FAILURE(Start(std::move(flags)));
  }
  void Connect(ShmClient& client) {
    Status st = client.Connect(server_.unix_socket_path());
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  std::string Get(ShmClient& client, const std::string& key) {
    auto r = client.Command({"GET", key});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r.value().str : std::string();
  }
  // The fewest descriptors the server has open over a moment: on a loaded machine one may still
  // be closing. A round trip on admin_ first: its connection is then accepted, not about to be.
  size_t BaselineFds() {
    EXPECT_NE(HiredisCommand(admin_.get(), {"PING"}), nullptr);
    size_t baseline = OpenFds(server_.pid());
    for (int i = 0; i < 10; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      baseline = std::min(baseline, OpenFds(server_.pid()));
    }
    return baseline;
  }
  // Whether the server's open descriptors come back to `want` (bounded wait: a disconnect is
  // noticed by the server a moment after the client closes).
  bool FdsBecome(size_t want, Millis timeout = Millis(5000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (OpenFds(server_.pid()) == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  std::string data_dir_;
  RedisContext admin_;
};

}  // namespace prefixd::it
