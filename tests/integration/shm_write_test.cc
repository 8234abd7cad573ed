// Zero-copy writes (docs/shm-transport.md, "Writes") against the real server over its real unix
// socket: SHM.SET of a client's sealed memfd adopted and read back byte for byte (GET and
// SHM.GET), an unsealed memfd or a plain file copied once, clear errors for bad lengths and
// offsets, the value kept across a restart with the log on, no descriptor leaked by the server
// (claimed, unclaimed, past the cap, before SHM.HELLO, at disconnect), and the TCP port refusing.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "integration/shm_write_fixture.h"

namespace prefixd::it {
namespace {

using namespace std::chrono_literals;

TEST_F(ShmWriteTest, StoredBytesReadBackOverTheSocketAndShmGet) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  // 0 and below 32 KiB are copied (a mapping of their own would cost more than the copy).
  const std::vector<size_t> sizes = {0, 1, 4096, (size_t{1} << 20) + 1, size_t{64} << 20};
  for (size_t i = 0; i < sizes.size(); ++i) {
    SCOPED_TRACE("size " + std::to_string(sizes[i]));
    const std::string key = "k" + std::to_string(i);
    const std::string value = Pattern(sizes[i], i);
    const uint64_t used_before = InfoNumber(admin_.get(), "used_memory");
    bool adopted = false;
    Status st = client.Set(key, AsBytes(value), &adopted);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(adopted, sizes[i] >= (size_t{32} << 10));
    EXPECT_TRUE(Get(client, key) == value) << "GET differs";
    ShmView view;
    st = client.Get(key, view);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(view.size, value.size());
    EXPECT_TRUE(std::string(reinterpret_cast<const char*>(view.data), view.size) == value)
        << "SHM.GET differs";
    ASSERT_TRUE(client.Release(view).ok());
    if (sizes[i] >= (size_t{1} << 20)) {
      // The adopted mapping is the value's memory: used_memory counts it.
      EXPECT_GE(InfoNumber(admin_.get(), "used_memory"), used_before + sizes[i]);
    }
  }
  // An adopted value's pages are read-only: APPEND and SETRANGE build a new value.
  const std::string key = "k3";
  std::string value = Pattern(sizes[3], 3);
  auto r = client.Command({"APPEND", key, "tail"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  value += "tail";
  EXPECT_EQ(r.value().integer, static_cast<int64_t>(value.size()));
  r = client.Command({"SETRANGE", key, "5", "xyz"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  value.replace(5, 3, "xyz");
  EXPECT_TRUE(Get(client, key) == value);
}

TEST_F(ShmWriteTest, UnsealedMemfdIsCopiedAndLaterWritesDoNotReachTheValue) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  const std::string value = Pattern(size_t{1} << 20, 7);
  const int fd = UnsealedMemfd(value);
  bool adopted = true;
  Status st = client.SetFromFd("u", fd, value.size(), 0, &adopted);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(adopted);
  // The client rewrites its memfd, through write() and through a shared mapping.
  const std::string other = Pattern(value.size(), 8);
  ASSERT_EQ(::pwrite(fd, other.data(), other.size(), 0), static_cast<ssize_t>(other.size()));
  void* mapped = ::mmap(nullptr, value.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  std::memset(mapped, 'z', 4096);
  ::munmap(mapped, value.size());
  ::close(fd);
  EXPECT_TRUE(Get(client, "u") == value);

  // A sealed memfd cannot be rewritten at all; the adopted value is the sealed bytes.
  const int sealed = ShmClient::SealedMemfd(AsBytes(value));
  ASSERT_GE(sealed, 0);
  ASSERT_TRUE(client.SetFromFd("s", sealed, value.size(), 0, &adopted).ok());
  EXPECT_TRUE(adopted);
  EXPECT_LT(::pwrite(sealed, "x", 1, 0), 0);
  EXPECT_EQ(::mmap(nullptr, 4096, PROT_WRITE, MAP_SHARED, sealed, 0), MAP_FAILED);
  ::close(sealed);
  EXPECT_TRUE(Get(client, "s") == value);

  // A plain file is copied too.
  char path[] = "/tmp/prefixd-shm-write-XXXXXX";
  const int file = ::mkstemp(path);
  ASSERT_GE(file, 0);
  ::unlink(path);
  ASSERT_EQ(::pwrite(file, value.data(), value.size(), 0), static_cast<ssize_t>(value.size()));
  ASSERT_TRUE(client.SetFromFd("f", file, 100000, 12345, &adopted).ok());
  EXPECT_FALSE(adopted);
  ::close(file);
  EXPECT_TRUE(Get(client, "f") == value.substr(12345, 100000));

  // An offset that is not page-aligned is still adopted (the mapping starts a page earlier).
  const int odd = ShmClient::SealedMemfd(AsBytes(value));
  ASSERT_TRUE(client.SetFromFd("o", odd, 200000, 4097, &adopted).ok());
  EXPECT_TRUE(adopted);
  ::close(odd);
  EXPECT_TRUE(Get(client, "o") == value.substr(4097, 200000));
}

TEST_F(ShmWriteTest, BadLengthsOffsetsAndDescriptorsAreClearErrors) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  const std::string value = Pattern(65536, 1);
  const int fd = ShmClient::SealedMemfd(AsBytes(value));
  ASSERT_GE(fd, 0);
  Status st = client.SetFromFd("k", fd, 65537);
  EXPECT_EQ(st.message(),
            "ERR SHM.SET: offset 0 + length 65537 is past the end of the passed file (65536 "
            "bytes)");
  st = client.SetFromFd("k", fd, 1, 65536);
  EXPECT_EQ(st.message(),
            "ERR SHM.SET: offset 65536 + length 1 is past the end of the passed file (65536 "
            "bytes)");
  st = client.SetFromFd("k", fd, 10, 1ull << 62);
  EXPECT_NE(st.message().find("is past the end of the passed file"), std::string::npos);
  EXPECT_EQ(client.Command({"EXISTS", "k"}).value().integer, 0);
  // Zero bytes at the very end is an empty string.
  ASSERT_TRUE(client.SetFromFd("k", fd, 0, 65536).ok());
  EXPECT_EQ(Get(client, "k"), "");
  ::close(fd);

  auto r = client.Command({"SHM.SET", "k", "5"});
  EXPECT_EQ(r.status().message(),
            "ERR SHM.SET needs a file descriptor passed with the request (SCM_RIGHTS on its "
            "bytes)");
  r = client.Command({"SHM.SET", "k", "-1"});
  EXPECT_EQ(r.status().message(), "ERR value is not an integer or out of range");
  r = client.Command({"SHM.SET", "k", "5", "-1"});
  EXPECT_EQ(r.status().message(), "ERR value is not an integer or out of range");
  // After the length, a word that is not a number is one of SET's options.
  r = client.Command({"SHM.SET", "k", "5", "abc"});
  EXPECT_EQ(r.status().message(), "ERR syntax error");
  r = client.Command({"SHM.SET", "k", "5", "0", "extra"});
  EXPECT_EQ(r.status().message(), "ERR syntax error");
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  st = client.SetFromFd("k", pipe_fds[0], 1);
  EXPECT_EQ(st.message(),
            "ERR SHM.SET: the passed descriptor is not a regular file (pass a memfd)");
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  // Before SHM.HELLO: the usual error, and the descriptor never reaches the server.
  auto raw = RawConnection::Unix(server_.unix_socket_path());
  ASSERT_NE(raw, nullptr);
  const int again = ShmClient::SealedMemfd(AsBytes(value));
  ASSERT_NO_FATAL_FAILURE(SendWithFds(raw->fd(), Multibulk({"SHM.SET", "k", "1"}), {again}));
  ::close(again);
  EXPECT_EQ(raw->ReadReply().value_or(""), "-ERR send SHM.HELLO first\r\n");
}

TEST_F(ShmWriteTest, PipelinedWritesEachClaimTheirOwnDescriptor) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto raw = RawConnection::Unix(server_.unix_socket_path());
  ASSERT_NE(raw, nullptr);
  ASSERT_EQ(raw->Call(Multibulk({"SHM.HELLO"})).substr(0, 2), "*1");
  const std::string a = Pattern(50000, 21), b = Pattern(60000, 22);
  const int fa = ShmClient::SealedMemfd(AsBytes(a)), fb = ShmClient::SealedMemfd(AsBytes(b));
  const std::string bad = Pattern(b.size(), 23);  // b's size, other bytes
  const int fbad = ShmClient::SealedMemfd(AsBytes(bad));
  // A refused SHM.SET between them takes its own descriptor with it. It goes in one message
  // with the next SHM.SET and both descriptors, so that one read brings both: a read ends at a
  // message that carries descriptors, and the connection closes unclaimed ones after each read.
  ASSERT_NO_FATAL_FAILURE(
      SendWithFds(raw->fd(), Multibulk({"SHM.SET", "a", std::to_string(a.size())}), {fa}));
  ASSERT_NO_FATAL_FAILURE(SendWithFds(raw->fd(),
                                      Multibulk({"SHM.SET", "x", "nope"}) +
                                          Multibulk({"SET", "plain", "1"}) +
                                          Multibulk({"SHM.SET", "b", std::to_string(b.size())}),
                                      {fbad, fb}));
  EXPECT_EQ(raw->ReadReply().value_or(""), "+ADOPTED\r\n");
  EXPECT_EQ(raw->ReadReply().value_or(""), "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(raw->ReadReply().value_or(""), "+OK\r\n");
  EXPECT_EQ(raw->ReadReply().value_or(""), "+ADOPTED\r\n");
  for (int fd : {fa, fb, fbad}) ::close(fd);
  EXPECT_TRUE(raw->Call(Multibulk({"GET", "a"})) == "$50000\r\n" + a + "\r\n");
  EXPECT_TRUE(raw->Call(Multibulk({"GET", "b"})) == "$60000\r\n" + b + "\r\n");
}

TEST_F(ShmWriteTest, AdoptedValueSurvivesARestartWithTheLogOn) {
  ASSERT_NO_FATAL_FAILURE(Start({"--appendonly", "yes", "--appendfsync", "always"}));
  const std::string big = Pattern((size_t{3} << 20) + 17, 11), small = Pattern(100, 12);
  {
    ShmClient client;
    ASSERT_NO_FATAL_FAILURE(Connect(client));
    bool adopted = false;
    ASSERT_TRUE(client.Set("big", AsBytes(big), &adopted).ok());
    EXPECT_TRUE(adopted);
    ASSERT_TRUE(client.Set("small", AsBytes(small)).ok());
  }
  ASSERT_NO_FATAL_FAILURE(Restart({"--appendonly", "yes"}));
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  EXPECT_TRUE(Get(client, "big") == big);
  EXPECT_TRUE(Get(client, "small") == small);
}

TEST_F(ShmWriteTest, NoDescriptorLeaks) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  const size_t baseline = BaselineFds();
  ASSERT_GT(baseline, 0u);
  // 1000 writes, adopted and copied in turn, over one key.
  const std::string value = Pattern(40000, 3);
  for (int i = 0; i < 1000; ++i) {
    const int fd = i % 2 == 0 ? ShmClient::SealedMemfd(AsBytes(value)) : UnsealedMemfd(value);
    ASSERT_GE(fd, 0);
    bool adopted = false;
    Status st = client.SetFromFd("k", fd, value.size(), 0, &adopted);
    ::close(fd);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(adopted, i % 2 == 0);
  }
  EXPECT_TRUE(Get(client, "k") == value);
  EXPECT_TRUE(FdsBecome(baseline)) << OpenFds(server_.pid()) << " open, " << baseline << " before";
  // Failing writes give their descriptor back too.
  for (int i = 0; i < 50; ++i) {
    const int fd = ShmClient::SealedMemfd(AsBytes(value));
    EXPECT_FALSE(client.SetFromFd("k", fd, value.size() + 1).ok());
    ::close(fd);
  }
  EXPECT_TRUE(FdsBecome(baseline)) << OpenFds(server_.pid()) << " open, " << baseline << " before";

  // Clients that pass descriptors with no SHM.SET: with another command, with a request cut
  // short, past the cap, before SHM.HELLO; then disconnect.
  std::vector<int> memfds;
  for (int i = 0; i < 20; ++i) memfds.push_back(ShmClient::SealedMemfd(AsBytes(value)));
  for (int round = 0; round < 5; ++round) {
    auto greeted = RawConnection::Unix(server_.unix_socket_path());
    ASSERT_NE(greeted, nullptr);
    ASSERT_EQ(greeted->Call(Multibulk({"SHM.HELLO"})).substr(0, 2), "*1");
    const size_t with_one = OpenFds(server_.pid());
    ASSERT_NO_FATAL_FAILURE(SendWithFds(greeted->fd(), Multibulk({"PING"}), {memfds[0]}));
    EXPECT_EQ(greeted->ReadReply().value_or(""), "+PONG\r\n");
    EXPECT_EQ(OpenFds(server_.pid()), with_one) << "an unclaimed descriptor outlived its read";
    // 20 at once: past the cap of 16; then a request that never ends.
    ASSERT_NO_FATAL_FAILURE(SendWithFds(greeted->fd(), "*3\r\n$7\r\nSHM.S", memfds));
    auto early = RawConnection::Unix(server_.unix_socket_path());
    ASSERT_NE(early, nullptr);
    ASSERT_NO_FATAL_FAILURE(SendWithFds(early->fd(), Multibulk({"PING"}), memfds));
    EXPECT_EQ(early->ReadReply().value_or(""), "+PONG\r\n");
    greeted.reset();
    early.reset();
    EXPECT_TRUE(FdsBecome(baseline)) << "round " << round << ": " << OpenFds(server_.pid())
                                     << " open, " << baseline << " before";
  }
  for (int fd : memfds) ::close(fd);
}

// An adopted value is read in place too: SHM.GET answers arena -1, the value's offset in the file
// the client wrote, and the file's inode, and passes a read-only descriptor of that file with the
// reply. The reader maps each file once (by inode), keeps up to kKeptFiles released mappings, and
// its views stay unchanged whatever happens to the key (the file is sealed).
TEST_F(ShmWriteTest, AdoptedValuesAreReadInPlaceFromTheirFile) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient writer, reader;
  ASSERT_NO_FATAL_FAILURE(Connect(writer));
  ASSERT_NO_FATAL_FAILURE(Connect(reader));
  const size_t baseline = OpenFds(server_.pid());
  const std::string value = Pattern((size_t{3} << 20) + 5, 7);
  bool adopted = false;
  ASSERT_TRUE(writer.Set("big", AsBytes(value), &adopted).ok());
  ASSERT_TRUE(adopted);
  EXPECT_EQ(OpenFds(server_.pid()), baseline + 1) << "the value keeps one read-only descriptor";

  // By hand: the place's fields. The descriptor that came with it stays queued in the client.
  auto raw = reader.Command({"SHM.GET", "big"});
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  ASSERT_EQ(raw.value().elements.size(), 6u);
  EXPECT_EQ(raw.value().elements[0].integer, -1);
  EXPECT_EQ(raw.value().elements[1].integer, 0);
  EXPECT_EQ(raw.value().elements[2].integer, static_cast<int64_t>(value.size()));
  EXPECT_GT(raw.value().elements[3].integer, 0);
  const uint64_t raw_lease = static_cast<uint64_t>(raw.value().elements[5].integer);
  ASSERT_TRUE(reader.Release(std::span(&raw_lease, 1)).ok());

  // Through the client: the stale descriptor is told apart from this reply's by its inode.
  ShmView first, second;
  ASSERT_TRUE(reader.Get("big", first).ok());
  EXPECT_EQ(first.arena, ShmView::kInFile);
  ASSERT_EQ(first.size, value.size());
  EXPECT_TRUE(std::memcmp(first.data, value.data(), value.size()) == 0);
  ASSERT_TRUE(reader.Get("big", second).ok());
  EXPECT_EQ(second.data, first.data) << "a second read maps the same file again";
  EXPECT_EQ(reader.file_mapping_count(), 1u);
  // The key overwritten, then deleted: the views still read the old bytes.
  auto r = writer.Command({"SET", "big", "small now"});
  ASSERT_TRUE(r.ok());
  r = writer.Command({"DEL", "big"});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(reader.Valid(first));
  EXPECT_TRUE(std::memcmp(first.data, value.data(), value.size()) == 0);
  EXPECT_TRUE(std::memcmp(second.data, value.data(), value.size()) == 0);
  ASSERT_TRUE(reader.Release(first).ok());
  ASSERT_TRUE(reader.Release(second).ok());
  EXPECT_TRUE(FdsBecome(baseline)) << "the value's descriptor outlived it";

  // Released mappings kept for reuse: kKeptFiles at the limit, and still kKeptFiles one past it.
  const std::string small = Pattern(64 << 10, 9);
  for (size_t i = 0; i <= ShmClient::kKeptFiles; ++i) {
    const std::string key = "f" + std::to_string(i);
    ASSERT_TRUE(writer.Set(key, AsBytes(small + key), &adopted).ok());
    ASSERT_TRUE(adopted);
    ShmView view;
    ASSERT_TRUE(reader.Get(key, view).ok());
    EXPECT_TRUE(std::string(reinterpret_cast<const char*>(view.data), view.size) == small + key);
    ASSERT_TRUE(reader.Release(view).ok());
    // "big"'s mapping is kept too.
    EXPECT_EQ(reader.file_mapping_count(), std::min(i + 2, ShmClient::kKeptFiles)) << i;
  }
  // A value copied by the server (an unsealed memfd) is in an arena, not a file.
  const int unsealed = UnsealedMemfd(value);
  ASSERT_TRUE(writer.SetFromFd("copied", unsealed, value.size(), 0, &adopted).ok());
  ::close(unsealed);
  EXPECT_FALSE(adopted);
  ShmView copied;
  ASSERT_TRUE(reader.Get("copied", copied).ok());
  EXPECT_NE(copied.arena, ShmView::kInFile);
  EXPECT_TRUE(std::memcmp(copied.data, value.data(), value.size()) == 0);
  ASSERT_TRUE(reader.Release(copied).ok());
}

// SHM.SET takes SET's options but GET: NX and XX (nil when they decide against the write, and
// nothing stored), an expiry (EX, PX, EXAT, PXAT) or KEEPTTL, with SET's errors for bad ones.
TEST_F(ShmWriteTest, SetOptionsAreSetsButGet) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  const std::string first = Pattern(40000, 1), second = Pattern(50000, 2);
  const int fd1 = ShmClient::SealedMemfd(AsBytes(first));
  const int fd2 = ShmClient::SealedMemfd(AsBytes(second));
  ASSERT_GE(fd1, 0);
  ASSERT_GE(fd2, 0);
  using Words = std::vector<std::string_view>;
  auto set = [&](int fd, const std::string& value, const Words& options, bool* stored) {
    bool adopted = false;
    return client.SetFromFd("k", fd, value.size(), 0, &adopted, options, stored);
  };
  bool stored = true;
  // XX on a missing key, then NX: only NX stores.
  ASSERT_TRUE(set(fd1, first, {"XX"}, &stored).ok());
  EXPECT_FALSE(stored);
  EXPECT_EQ(client.Command({"EXISTS", "k"}).value().integer, 0);
  ASSERT_TRUE(set(fd1, first, {"NX"}, &stored).ok());
  EXPECT_TRUE(stored);
  ASSERT_TRUE(set(fd2, second, {"nx"}, &stored).ok());
  EXPECT_FALSE(stored);
  EXPECT_TRUE(Get(client, "k") == first);
  // XX with an expiry: stored, with a TTL; KEEPTTL keeps it; a plain SHM.SET clears it.
  ASSERT_TRUE(set(fd2, second, {"XX", "EX", "100"}, &stored).ok());
  EXPECT_TRUE(stored);
  EXPECT_TRUE(Get(client, "k") == second);
  const int64_t ttl = client.Command({"TTL", "k"}).value().integer;
  EXPECT_GE(ttl, 99);
  EXPECT_LE(ttl, 100);
  ASSERT_TRUE(set(fd1, first, {"KEEPTTL"}, &stored).ok());
  EXPECT_GE(client.Command({"TTL", "k"}).value().integer, 99);
  EXPECT_TRUE(Get(client, "k") == first);
  ASSERT_TRUE(set(fd1, first, {"PX", "100000"}, &stored).ok());
  EXPECT_GE(client.Command({"PTTL", "k"}).value().integer, 99000);
  ASSERT_TRUE(set(fd1, first, {}, &stored).ok());
  EXPECT_EQ(client.Command({"TTL", "k"}).value().integer, -1);
  // An absolute time in the past: stored, and gone at once (as SET ... PXAT 1).
  ASSERT_TRUE(set(fd2, second, {"PXAT", "1"}, &stored).ok());
  EXPECT_EQ(client.Command({"EXISTS", "k"}).value().integer, 0);
  // SET's errors; nothing stored, and the descriptor is not left to the next command.
  ASSERT_TRUE(set(fd1, first, {}, &stored).ok());
  const std::vector<std::pair<Words, std::string>> bad = {
      {{"GET"}, "ERR syntax error"},
      {{"NX", "XX"}, "ERR syntax error"},
      {{"EX", "10", "PX", "10"}, "ERR syntax error"},
      {{"EX", "0"}, "ERR invalid expire time in 'shm.set' command"},
      {{"EX", "x"}, "ERR value is not an integer or out of range"},
      {{"EX"}, "ERR syntax error"},
      {{"BOGUS"}, "ERR syntax error"},
  };
  for (const auto& [options, error] : bad) {
    Status st = set(fd2, second, options, &stored);
    EXPECT_EQ(st.code(), StatusCode::kServerError) << options.front();
    EXPECT_EQ(st.message(), error) << options.front();
  }
  EXPECT_TRUE(Get(client, "k") == first);
  EXPECT_EQ(client.Command({"TTL", "k"}).value().integer, -1);
  ::close(fd1);
  ::close(fd2);
}

TEST_F(ShmWriteTest, TcpClientGetsTheUnixOnlyError) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto tcp = RawConnection::Tcp(server_.port());
  ASSERT_NE(tcp, nullptr);
  EXPECT_EQ(tcp->Call(Multibulk({"SHM.SET", "k", "1"})),
            "-ERR SHM commands are served on the unix socket only\r\n");
  EXPECT_EQ(tcp->Call(Multibulk({"EXISTS", "k"})), ":0\r\n");
}

}  // namespace
}  // namespace prefixd::it
