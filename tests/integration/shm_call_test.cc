// Zero-copy arguments for every command (docs/shm-transport.md, "Writes"): SHM.CALL against the
// real server over its real unix socket. Each state store (SSM layers, V-store rows, prefix-index
// blocks and checkpoints, strings) whose blobs go through a memfd reads back byte for byte as the
// same store sent over the socket, live and after a restart from the log, and replicas receive
// the carried command with its bytes; sealed arguments from 32 KiB are adopted, the rest copied;
// every refusal is a clear error that claims its descriptor; the limits are exact; and INFO
// commandstats and MONITOR show the carried command.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "integration/shm_write_fixture.h"

namespace prefixd::it {
namespace {

using Words = std::vector<std::string>;

constexpr size_t kDim = 1024, kRow = kDim * 4;  // V-store and prefix-index rows: fp32, 4 KiB
constexpr size_t kBlock = 16;                   // tokens per prefix-index block
constexpr size_t kAdoptFrom = size_t{32} << 10;

std::string Hash(char id) { return std::string(16, id); }

// A reply as text that two replies share only when they are equal: type, number, bytes, elements.
std::string Flat(const Reply& r) {
  std::string out = std::to_string(static_cast<int>(r.type)) + ":" + std::to_string(r.integer) +
                    ":" + std::to_string(r.str.size()) + ":" + r.str;
  for (const Reply& e : r.elements) out += "[" + Flat(e) + "]";
  return out;
}

// One state store: what it needs first (over the socket), the store itself with the arguments
// `from_file` sends through the memfd under SHM.CALL, and the plain fetches that read it back;
// each of them for the key, session or namespace `name`.
struct StoreCase {
  std::string what;
  std::function<std::vector<Words>(const std::string& name)> setup;
  std::function<Words(const std::string& name)> store;
  std::vector<size_t> from_file;
  std::function<std::vector<Words>(const std::string& name)> fetches;
};

std::vector<StoreCase> StoreCases() {
  const std::string layer = Pattern((size_t{1} << 20) + 5, 1);
  const std::string mlayer0 = Pattern(40000, 2), mlayer1 = Pattern(100, 3),
                    mlayer2 = Pattern(kAdoptFrom, 4);
  const std::string rows = Pattern(64 * kRow, 5);
  // fp32 values the fp16 tier encodes (Pattern's bytes read as floats may be NaN or Inf).
  std::string floats(64 * kRow, '\0');
  for (size_t i = 0; i < floats.size() / 4; ++i) {
    const float v = static_cast<float>(i % 1000) / 8.0f;
    std::memcpy(floats.data() + 4 * i, &v, 4);
  }
  const std::string hashes = Hash('a') + Hash('b');
  const std::string block_rows0 = Pattern(2 * 2 * kBlock * kRow, 6),
                    block_rows1 = Pattern(2 * 2 * kBlock * kRow, 7);
  const std::string state = Pattern(200000, 8);
  const std::string value = Pattern(100000, 9);
  auto ns = [](const std::string& name) {
    return Words{"KV.PREFIX.NAMESPACE",
                 name,
                 "BLOCK",
                 std::to_string(kBlock),
                 "ATTN",
                 "2",
                 "KVDIM",
                 std::to_string(kDim),
                 "RECURRENT",
                 "1",
                 "VQUANT",
                 "fp32"};
  };
  auto bstore = [=](const std::string& name) {
    return Words{"KV.PREFIX.BSTORE", name, Hash('\0'), "2", hashes, "0",
                 block_rows0,        "1",  block_rows1};
  };
  auto none = [](const std::string&) { return std::vector<Words>{}; };
  return {
      {"SSM.PREFIX.STORE",
       none,
       [=](const std::string& n) {
         return Words{"SSM.PREFIX.STORE", n, "3", layer};
       },
       {3},
       [](const std::string& n) {
         return std::vector<Words>{{"SSM.PREFIX.FETCH", n, "3"}};
       }},
      // Two of three blobs through the file, one over the socket beside them.
      {"SSM.PREFIX.MSTORE",
       none,
       [=](const std::string& n) {
         return Words{"SSM.PREFIX.MSTORE", n, "0", mlayer0, "1", mlayer1, "2", mlayer2};
       },
       {3, 7},
       [](const std::string& n) {
         return std::vector<Words>{{"SSM.PREFIX.MFETCH", n, "0", "1", "2"}};
       }},
      {"V.STOREBATCH",
       [](const std::string& n) {
         return std::vector<Words>{{"V.CREATE", n, std::to_string(kDim), "VQUANT", "fp32"}};
       },
       [=](const std::string& n) { return Words{"V.STOREBATCH", n, "1", "5", "64", rows}; },
       {5},
       [](const std::string& n) {
         return std::vector<Words>{{"V.FETCH", n, "1", "RANGE", "0", "80"}};
       }},
      // Rows the handler encodes (fp32 in, fp16 stored): a copy of the server's own.
      {"V.STOREBATCH encoded",
       [](const std::string& n) {
         return std::vector<Words>{{"V.CREATE", n, std::to_string(kDim), "VQUANT", "fp16"}};
       },
       [=](const std::string& n) {
         return Words{"V.STOREBATCH", n, "0", "0", "64", floats, "FMT", "F32"};
       },
       {5},
       [](const std::string& n) {
         return std::vector<Words>{{"V.FETCH", n, "0", "RANGE", "0", "64"},
                                   {"V.FETCH", n, "0", "RANGE", "0", "64", "FMT", "NATIVE"}};
       }},
      {"KV.PREFIX.BSTORE",
       [=](const std::string& n) { return std::vector<Words>{ns(n)}; },
       bstore,
       {4, 6, 8},
       [=](const std::string& n) {
         return std::vector<Words>{{"KV.PREFIX.BFETCH", n, "2", hashes, "0"},
                                   {"KV.PREFIX.BFETCH", n, "2", hashes, "1"}};
       }},
      {"SSM.PREFIX.CKPT.STORE",
       [=](const std::string& n) {
         return std::vector<Words>{ns(n), bstore(n)};
       },
       [=](const std::string& n) {
         return Words{
             "SSM.PREFIX.CKPT.STORE", n, Hash('a'), std::to_string(kBlock), Hash('a'), "0", state};
       },
       {6},
       [](const std::string& n) {
         return std::vector<Words>{{"SSM.PREFIX.CKPT.FETCH", n, Hash('a')}};
       }},
      {"SET",
       none,
       [=](const std::string& n) {
         return Words{"SET", n, value};
       },
       {2},
       [](const std::string& n) {
         return std::vector<Words>{{"GET", n}};
       }},
  };
}

// A connection that asked for the replication stream (SYNC) and read its RDB: what arrives next
// is what replicas receive.
std::unique_ptr<RawConnection> ReplicationStream(int port) {
  auto conn = RawConnection::Tcp(port);
  if (conn == nullptr || !conn->Send(Multibulk({"SYNC"}))) return nullptr;
  std::string header;
  while (!header.ends_with("\r\n")) {
    const std::string c = conn->Read(1);
    if (c.empty()) return nullptr;
    header += c;
  }
  if (header[0] != '$') return nullptr;
  const size_t length = std::stoul(header.substr(1));
  if (conn->Read(length).size() != length) return nullptr;
  return conn;
}

// The next command of the stream that is not a PING or a SELECT, raw; empty when none came.
std::string NextWrite(RawConnection& stream) {
  while (true) {
    const std::string raw = stream.ReadReply().value_or("");
    if (raw.empty() ||
        (raw.find("PING") == std::string::npos && raw.find("SELECT") == std::string::npos)) {
      return raw;
    }
  }
}

class ShmCallTest : public ShmWriteTest {
 protected:
  Reply CommandOk(ShmClient& client, const Words& args) {
    const std::vector<std::string_view> views(args.begin(), args.end());
    auto r = client.Command(views);
    EXPECT_TRUE(r.ok()) << args[0] << ": " << r.status().ToString();
    return r.ok() ? std::move(r).value() : Reply{};
  }
  Reply CallOk(ShmClient& client, const Words& args, const std::vector<size_t>& from_file) {
    const std::vector<std::string_view> views(args.begin(), args.end());
    auto r = client.Call(views, from_file);
    EXPECT_TRUE(r.ok()) << "SHM.CALL " << args[0] << ": " << r.status().ToString();
    return r.ok() ? std::move(r).value() : Reply{};
  }
  // Every store of StoreCases() twice, over the socket under "s<i>" and through SHM.CALL under
  // "f<i>": the replies must match.
  void StoreBothWays(ShmClient& client, const std::vector<StoreCase>& cases) {
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(cases[i].what);
      const std::string socket_name = "s" + std::to_string(i), file_name = "f" + std::to_string(i);
      for (const std::string& name : {socket_name, file_name}) {
        for (const Words& setup : cases[i].setup(name)) CommandOk(client, setup);
      }
      const Reply over_socket = CommandOk(client, cases[i].store(socket_name));
      const Reply through_file = CallOk(client, cases[i].store(file_name), cases[i].from_file);
      EXPECT_EQ(Flat(over_socket), Flat(through_file));
    }
  }
  // Each case's fetches of "f<i>" must answer what those of "s<i>" answer, and hold bytes.
  void ExpectSameFetches(ShmClient& client, const std::vector<StoreCase>& cases) {
    for (size_t i = 0; i < cases.size(); ++i) {
      SCOPED_TRACE(cases[i].what);
      const auto socket_fetches = cases[i].fetches("s" + std::to_string(i));
      const auto file_fetches = cases[i].fetches("f" + std::to_string(i));
      for (size_t f = 0; f < socket_fetches.size(); ++f) {
        const Reply want = CommandOk(client, socket_fetches[f]);
        const Reply got = CommandOk(client, file_fetches[f]);
        EXPECT_FALSE(want.is_nil()) << socket_fetches[f][0] << " found nothing";
        EXPECT_TRUE(Flat(want) == Flat(got)) << file_fetches[f][0] << " differs";
      }
    }
  }
  // A greeted raw connection: requests sent by hand, descriptors passed on them by hand.
  std::unique_ptr<RawConnection> Greeted() {
    auto raw = RawConnection::Unix(server_.unix_socket_path());
    EXPECT_NE(raw, nullptr);
    if (raw != nullptr) EXPECT_EQ(raw->Call(Multibulk({"SHM.HELLO"})).substr(0, 1), "*");
    return raw;
  }
  // `words` sent with `fd` passed on them (none when -1); the reply.
  std::string Send(RawConnection& raw, const Words& words, int fd) {
    if (fd < 0) return raw.Call(Multibulk(words));
    SendWithFds(raw.fd(), Multibulk(words), {fd});
    return raw.ReadReply().value_or("(no reply)");
  }
};

TEST_F(ShmCallTest, StoresReadBackAsOverTheSocketLiveAndAfterARestartFromTheLog) {
  ASSERT_NO_FATAL_FAILURE(Start({"--appendonly", "yes", "--appendfsync", "always"}));
  const auto cases = StoreCases();
  {
    ShmClient client;
    ASSERT_NO_FATAL_FAILURE(Connect(client));
    ASSERT_NO_FATAL_FAILURE(StoreBothWays(client, cases));
    ExpectSameFetches(client, cases);
    // And against the bytes sent, where the fetch answers them as they were stored.
    EXPECT_TRUE(CommandOk(client, {"SSM.PREFIX.FETCH", "f0", "3"}).str == cases[0].store("f0")[3]);
    EXPECT_TRUE(CommandOk(client, {"GET", "f6"}).str == cases[6].store("f6")[2]);
  }
  ASSERT_NO_FATAL_FAILURE(Restart({"--appendonly", "yes"}));
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  ExpectSameFetches(client, cases);
  EXPECT_TRUE(CommandOk(client, {"SSM.PREFIX.FETCH", "f0", "3"}).str == cases[0].store("f0")[3]);
}

TEST_F(ShmCallTest, ReplicasReceiveTheCarriedCommandWithItsBytes) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto stream = ReplicationStream(server_.port());
  ASSERT_NE(stream, nullptr);
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  const std::string layer = Pattern(300000, 31), value = Pattern(50000, 32);
  CallOk(client, {"SSM.PREFIX.STORE", "r", "2", layer}, {3});
  EXPECT_TRUE(NextWrite(*stream) == Multibulk({"SSM.PREFIX.STORE", "r", "2", layer}))
      << "the stream does not carry SSM.PREFIX.STORE with the layer's bytes";
  CallOk(client, {"SET", "k", value}, {2});
  EXPECT_TRUE(NextWrite(*stream) == Multibulk({"SET", "k", value}))
      << "the stream does not carry SET with the value's bytes";
}

// Where a fetch answers places, an adopted argument lies in the file the client wrote (arena -1,
// ShmView::kInFile): from 32 KiB of a sealed memfd; a smaller argument, or one of a memfd that is
// not sealed, is copied (an arena, or bytes).
TEST_F(ShmCallTest, SealedArgumentsFrom32KiBAreAdoptedTheRestCopied) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  auto in_file = [&](const std::string& key) {
    ShmView view;
    Status st = client.Get(key, view);
    EXPECT_TRUE(st.ok()) << st.ToString();
    const bool adopted = view.arena == ShmView::kInFile;
    EXPECT_TRUE(client.Release(view).ok());
    return adopted;
  };
  for (size_t size : {kAdoptFrom - 1, kAdoptFrom, size_t{1} << 20}) {
    SCOPED_TRACE(size);
    const std::string key = "k" + std::to_string(size), value = Pattern(size, size);
    CallOk(client, {"SET", key, value}, {2});
    EXPECT_EQ(in_file(key), size >= kAdoptFrom);
    EXPECT_TRUE(Get(client, key) == value);
  }
  // The same bytes from a memfd that is not sealed: copied.
  const std::string value = Pattern(size_t{1} << 20, 5);
  const int unsealed = UnsealedMemfd(value);
  auto raw = Greeted();
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(
      Send(*raw, {"SHM.CALL", "1", "2", "0", std::to_string(value.size()), "SET", "unsealed", ""},
           unsealed),
      "+OK\r\n");
  ::close(unsealed);
  EXPECT_FALSE(in_file("unsealed"));
  EXPECT_TRUE(Get(client, "unsealed") == value);

  // An SSM layer is kept as sent: read in place from the file too.
  const std::string layer = Pattern(size_t{1} << 20, 6);
  CallOk(client, {"SSM.PREFIX.STORE", "s", "0", layer}, {3});
  std::vector<ShmView> views;
  const uint32_t layers[] = {0};
  ASSERT_TRUE(client.FetchLayers("s", layers, views).ok());
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].arena, ShmView::kInFile);
  EXPECT_TRUE(std::string(reinterpret_cast<const char*>(views[0].data), views[0].size) == layer);
  ASSERT_TRUE(client.Release(views[0]).ok());
  // V-store rows are written into the session's chunks (one copy, out of the mapping): an arena.
  CommandOk(client, {"V.CREATE", "v", std::to_string(kDim), "VQUANT", "fp32"});
  const std::string rows = Pattern(64 * kRow, 7);
  CallOk(client, {"V.STOREBATCH", "v", "0", "0", "64", rows}, {5});
  ASSERT_TRUE(client.FetchRows("v", 0, 0, 64, views).ok());
  std::string joined;
  for (ShmView& piece : views) {
    joined.append(reinterpret_cast<const char*>(piece.data), piece.size);
    EXPECT_NE(piece.arena, ShmView::kInFile);
    ASSERT_TRUE(client.Release(piece).ok());
  }
  EXPECT_TRUE(joined == rows);
}

// The adopted arguments of one call are slices of one mapping of the file: the server keeps one
// read-only descriptor for the call, however many layers it carries, and every layer reads back.
TEST_F(ShmCallTest, OneCallKeepsOneDescriptorForAllItsAdoptedArguments) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  const size_t baseline = BaselineFds();
  const std::string l0 = Pattern(kAdoptFrom, 20), l1 = Pattern(size_t{1} << 20, 21),
                    l2 = Pattern(3 * kAdoptFrom + 5, 22);
  CallOk(client, {"SSM.PREFIX.MSTORE", "many", "0", l0, "1", l1, "2", l2}, {3, 5, 7});
  EXPECT_TRUE(FdsBecome(baseline + 1))
      << OpenFds(server_.pid()) << " open, " << baseline << " before";
  const uint32_t layers[] = {0, 1, 2};
  std::vector<ShmView> views;
  ASSERT_TRUE(client.FetchLayers("many", layers, views).ok());
  ASSERT_EQ(views.size(), 3u);
  const std::string* want[] = {&l0, &l1, &l2};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(views[i].arena, ShmView::kInFile);
    EXPECT_TRUE(std::string(reinterpret_cast<const char*>(views[i].data), views[i].size) ==
                *want[i]);
  }
  ASSERT_TRUE(client.Release(views[0]).ok());
}

TEST_F(ShmCallTest, RefusalsAreClearErrorsAndClaimTheirDescriptor) {
  ASSERT_NO_FATAL_FAILURE(Start());
  const size_t baseline = BaselineFds();
  auto raw = Greeted();
  ASSERT_NE(raw, nullptr);
  const std::string file = "hello" + Pattern(65531, 1);  // 64 KiB
  const int fd = ShmClient::SealedMemfd(AsBytes(file));
  ASSERT_GE(fd, 0);
  const std::string not_integer = "-ERR value is not an integer or out of range\r\n";
  const std::vector<std::pair<Words, std::string>> refused = {
      {{"SHM.CALL", "0", "2", "0", "1", "SET", "k", ""},
       "-ERR SHM.CALL: the count of file arguments must be a positive integer\r\n"},
      {{"SHM.CALL", "x", "2", "0", "1", "SET", "k", ""},
       "-ERR SHM.CALL: the count of file arguments must be a positive integer\r\n"},
      {{"SHM.CALL", "2", "2", "0", "1", "SET", "k", ""},
       "-ERR wrong number of arguments for 'shm.call' command\r\n"},
      {{"SHM.CALL", "1", "2", "0", "1"},
       "-ERR wrong number of arguments for 'shm.call' command\r\n"},
      {{"SHM.CALL", "1", "2", "x", "1", "SET", "k", ""}, not_integer},
      {{"SHM.CALL", "1", "2", "0", "-1", "SET", "k", ""}, not_integer},
      {{"SHM.CALL", "1", "x", "0", "1", "SET", "k", ""}, not_integer},
      {{"SHM.CALL", "1", "0", "0", "1", "SET", "k", ""},
       "-ERR SHM.CALL: argument index 0 is not an argument of the carried command (1 to 2)\r\n"},
      {{"SHM.CALL", "1", "3", "0", "1", "SET", "k", ""},
       "-ERR SHM.CALL: argument index 3 is not an argument of the carried command (1 to 2)\r\n"},
      {{"SHM.CALL", "2", "2", "0", "1", "2", "5", "1", "SET", "k", ""},
       "-ERR SHM.CALL: argument index 2 is given twice\r\n"},
      {{"SHM.CALL", "1", "2", "1", "65536", "SET", "k", ""},
       "-ERR SHM.CALL: offset 1 + length 65536 is past the end of the passed file (65536 "
       "bytes)\r\n"},
      {{"SHM.CALL", "1", "2", "65537", "0", "SET", "k", ""},
       "-ERR SHM.CALL: offset 65537 + length 0 is past the end of the passed file (65536 "
       "bytes)\r\n"},
      {{"SHM.CALL", "1", "1", "0", "5", "NOSUCH", ""},
       "-ERR unknown command 'NOSUCH', with args beginning with: 'hello' \r\n"},
      {{"SHM.CALL", "1", "1", "0", "5", "GET", "", "extra"},
       "-ERR wrong number of arguments for 'get' command\r\n"},
      {{"SHM.CALL", "1", "1", "0", "5", "SHM.SET", "", "5"},
       "-ERR SHM.CALL cannot carry SHM.SET: it deals in passed descriptors itself\r\n"},
      {{"SHM.CALL", "1", "1", "0", "1", "SHM.CALL", "", "1", "2", "0", "1", "SET", "k", ""},
       "-ERR SHM.CALL cannot carry SHM.CALL: it deals in passed descriptors itself\r\n"},
      {{"SHM.CALL", "1", "1", "0", "1", "SHM.HELLO", ""},
       "-ERR SHM.CALL cannot carry SHM.HELLO: it deals in passed descriptors itself\r\n"},
  };
  for (const auto& [words, error] : refused) {
    EXPECT_EQ(Send(*raw, words, fd), error) << words[1] << " " << words[2];
    EXPECT_EQ(raw->Call(Multibulk({"PING"})), "+PONG\r\n");
  }
  EXPECT_EQ(raw->Call(Multibulk({"EXISTS", "k"})), ":0\r\n");
  // No descriptor, or one of a pipe.
  EXPECT_EQ(Send(*raw, {"SHM.CALL", "1", "2", "0", "1", "SET", "k", ""}, -1),
            "-ERR SHM.CALL needs a file descriptor passed with the request (SCM_RIGHTS on its "
            "bytes)\r\n");
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  EXPECT_EQ(Send(*raw, {"SHM.CALL", "1", "2", "0", "1", "SET", "k", ""}, pipe_fds[0]),
            "-ERR SHM.CALL: the passed descriptor is not a regular file (pass a memfd)\r\n");
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  // Inside MULTI: refused, and EXEC then aborts.
  EXPECT_EQ(raw->Call(Multibulk({"MULTI"})), "+OK\r\n");
  EXPECT_EQ(Send(*raw, {"SHM.CALL", "1", "2", "0", "5", "SET", "k", ""}, fd),
            "-ERR Command not allowed inside a transaction\r\n");
  EXPECT_EQ(raw->Call(Multibulk({"EXEC"})).substr(0, 10), "-EXECABORT");

  // A refused request takes its own descriptor with it: two requests in one message with two
  // descriptors (so that one read brings both, the refused one first), and the second reads its
  // own file, whether the refusal was SHM.CALL's, the carried command's or MULTI's (SHM.SET's
  // too: the registry claims for both before any check).
  const std::string other = "other" + Pattern(100, 2);
  const int other_fd = ShmClient::SealedMemfd(AsBytes(other));
  const std::string good =
      Multibulk({"SHM.CALL", "1", "2", "0", std::to_string(other.size()), "SET", "k", ""});
  const std::vector<std::pair<std::string, int>> refused_first = {
      {Multibulk({"SHM.CALL", "1", "0", "0", "5", "SET", "k", ""}), 1},
      {Multibulk({"SHM.CALL", "1", "1", "0", "5", "NOSUCH", ""}), 1},
      {Multibulk({"MULTI"}) + Multibulk({"SHM.CALL", "1", "2", "0", "5", "SET", "k", ""}) +
           Multibulk({"EXEC"}),
       3},
      {Multibulk({"MULTI"}) + Multibulk({"SHM.SET", "k", "5"}) + Multibulk({"EXEC"}), 3},
  };
  for (const auto& [bad, replies] : refused_first) {
    ASSERT_NO_FATAL_FAILURE(SendWithFds(raw->fd(), bad + good, {fd, other_fd}));
    std::string answered;
    for (int i = 0; i < replies; ++i) answered += raw->ReadReply().value_or("(none)");
    EXPECT_NE(answered.find("-ERR"), std::string::npos) << answered;
    EXPECT_EQ(raw->ReadReply().value_or(""), "+OK\r\n") << bad;
    EXPECT_TRUE(raw->Call(Multibulk({"GET", "k"})) == Multibulk({other}).substr(4))
        << "the second request read the first one's file: " << bad;
    EXPECT_EQ(raw->Call(Multibulk({"DEL", "k"})), ":1\r\n");
  }
  ::close(other_fd);

  // Before SHM.HELLO, and on the TCP port: SHM.SET's refusals.
  auto early = RawConnection::Unix(server_.unix_socket_path());
  ASSERT_NE(early, nullptr);
  EXPECT_EQ(Send(*early, {"SHM.CALL", "1", "2", "0", "5", "SET", "k", ""}, fd),
            "-ERR send SHM.HELLO first\r\n");
  auto tcp = RawConnection::Tcp(server_.port());
  ASSERT_NE(tcp, nullptr);
  EXPECT_EQ(tcp->Call(Multibulk({"SHM.CALL", "1", "2", "0", "5", "SET", "k", ""})),
            "-ERR SHM commands are served on the unix socket only\r\n");
  ::close(fd);
  raw.reset();
  early.reset();
  tcp.reset();
  EXPECT_TRUE(FdsBecome(baseline)) << OpenFds(server_.pid()) << " open, " << baseline << " before";
}

TEST_F(ShmCallTest, RangesAndLengthsAreExact) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_EQ(
      DescribeReply(
          HiredisCommand(admin_.get(), {"CONFIG", "SET", "proto-max-bulk-len", "1048576"}).get()),
      "status 'OK'");
  auto raw = Greeted();
  ASSERT_NE(raw, nullptr);
  const std::string file = Pattern((size_t{1} << 20) + 1, 3);
  const int fd = ShmClient::SealedMemfd(AsBytes(file));
  ASSERT_GE(fd, 0);
  auto set = [&](uint64_t offset, uint64_t length) {
    return Send(
        *raw,
        {"SHM.CALL", "1", "2", std::to_string(offset), std::to_string(length), "SET", "k", ""}, fd);
  };
  // A range ending at the file's end, and one byte past it.
  EXPECT_EQ(set(1, file.size() - 1), "+OK\r\n");
  EXPECT_TRUE(raw->Call(Multibulk({"STRLEN", "k"})) ==
              ":" + std::to_string(file.size() - 1) + "\r\n");
  EXPECT_TRUE(raw->Call(Multibulk({"GETRANGE", "k", "0", "99"})) ==
              Multibulk({file.substr(1, 100)}).substr(4));
  EXPECT_EQ(set(2, file.size() - 1),
            "-ERR SHM.CALL: offset 2 + length 1048576 is past the end of the passed file "
            "(1048577 bytes)\r\n");
  // Nothing at the very end: an empty argument.
  EXPECT_EQ(set(file.size(), 0), "+OK\r\n");
  EXPECT_EQ(raw->Call(Multibulk({"STRLEN", "k"})), ":0\r\n");
  // proto-max-bulk-len exactly, and one byte more.
  EXPECT_EQ(set(0, size_t{1} << 20), "+OK\r\n");
  EXPECT_EQ(raw->Call(Multibulk({"STRLEN", "k"})), ":1048576\r\n");
  EXPECT_EQ(set(0, (size_t{1} << 20) + 1),
            "-ERR SHM.CALL: argument 2's 1048577 bytes exceed proto-max-bulk-len (1048576)\r\n");
  ::close(fd);
}

// ShmClient::Call refuses, before sending anything, an index that names no argument; with no
// index at all it is Command().
TEST_F(ShmCallTest, ClientCallsNameArgumentsOnly) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  EXPECT_EQ(client.Call({"SET", "k", "v"}, {0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client.Call({"SET", "k", "v"}, {3}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CommandOk(client, {"EXISTS", "k"}).integer, 0);
  EXPECT_EQ(CallOk(client, {"SET", "k", "v"}, {}).str, "OK");
  // An empty argument through the file, beside one that is not.
  EXPECT_EQ(CallOk(client, {"SET", "", "v"}, {1}).str, "OK");
  EXPECT_EQ(CommandOk(client, {"GET", ""}).str, "v");
  EXPECT_EQ(CommandOk(client, {"GET", "k"}).str, "v");
}

// Arguments computed straight into a ShmArgumentFile go in place: the server adopts them (a
// fetch reads them from that file) and every byte reads back. An argument outside the file is
// refused before anything is sent; Take() never hands out more than the capacity, each piece
// from a page boundary; the call seals the file, after which nothing more is handed out.
TEST_F(ShmCallTest, ArgumentsComputedIntoTheirFileAreSentInPlace) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  const std::vector<uint64_t> sizes = {(1 << 20) + 3, kAdoptFrom, 5};
  const uint64_t capacity = ShmArgumentFile::CapacityFor(sizes);
  EXPECT_EQ(capacity, (1 << 20) + 4096 + kAdoptFrom + 5);
  auto file = ShmArgumentFile::Create(capacity);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  std::vector<std::string> values;
  std::vector<std::string_view> argv = {"MSET"};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::span<uint8_t> room = file.value().Take(sizes[i]);
    ASSERT_EQ(room.size(), sizes[i]);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(room.data()) % 4096, 0u);
    values.push_back(Pattern(sizes[i], 40 + i));
    std::memcpy(room.data(), values.back().data(), room.size());
    argv.push_back(i == 0 ? "a" : i == 1 ? "b" : "c");
    argv.push_back({reinterpret_cast<const char*>(room.data()), room.size()});
  }
  EXPECT_TRUE(file.value().Take(1).empty()) << "past the capacity";
  // A value that is not in the file: refused, nothing sent, the file still open to writes.
  const std::string outside = "not in the file";
  std::vector<std::string_view> wrong = argv;
  wrong[2] = outside;
  EXPECT_EQ(client.Call(wrong, std::vector<size_t>{2, 4}, file.value()).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CommandOk(client, {"EXISTS", "a"}).integer, 0);
  const std::vector<size_t> from_file = {2, 4, 6};
  auto reply = client.Call(argv, from_file, file.value());
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply.value().str, "OK");
  EXPECT_TRUE(file.value().Take(1).empty()) << "after the seal";
  EXPECT_EQ(::fcntl(file.value().fd(), F_GET_SEALS) & F_SEAL_WRITE, F_SEAL_WRITE);
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string key = i == 0 ? "a" : i == 1 ? "b" : "c";
    EXPECT_TRUE(Get(client, key) == values[i]) << key;
    ShmView view;
    ASSERT_TRUE(client.Get(key, view).ok());
    EXPECT_EQ(view.arena == ShmView::kInFile, sizes[i] >= kAdoptFrom) << key;
    ASSERT_TRUE(client.Release(view).ok());
  }
}

// INFO commandstats counts the carried command as a command of its own, and SHM.CALL beside it
// (a refused one as failed); MONITOR shows the carried command with its bytes, never SHM.CALL.
TEST_F(ShmCallTest, StatisticsAndMonitorShowTheCarriedCommand) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto monitor = RawConnection::Tcp(server_.port());
  ASSERT_NE(monitor, nullptr);
  ASSERT_EQ(monitor->Call(Multibulk({"MONITOR"})), "+OK\r\n");
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  monitor->ReadQuiet();  // the client's own SHM.HELLO
  CallOk(client, {"SSM.PREFIX.STORE", "s", "0", "layer-bytes"}, {3});
  CallOk(client, {"SSM.PREFIX.STORE", "s", "1", Pattern(50000, 1)}, {3});
  auto refused = client.Call({"SSM.PREFIX.STORE", "s", "x", "layer"}, {3});
  EXPECT_EQ(refused.status().code(), StatusCode::kServerError);
  const std::string line = monitor->ReadReply().value_or("");
  EXPECT_NE(line.find("\"SSM.PREFIX.STORE\" \"s\" \"0\" \"layer-bytes\""), std::string::npos)
      << line;
  const std::string rest = monitor->ReadQuiet();
  EXPECT_EQ((line + rest).find("SHM.CALL"), std::string::npos) << line << rest;

  RedisReply info = HiredisCommand(admin_.get(), {"INFO", "commandstats"});
  ASSERT_NE(info, nullptr);
  const std::string stats(info->str, info->len);
  auto stat_line = [&](const std::string& name) {
    const size_t at = stats.find("cmdstat_" + name + ":");
    return at == std::string::npos ? std::string() : stats.substr(at, stats.find('\r', at) - at);
  };
  const std::string store = stat_line("ssm.prefix.store"), call = stat_line("shm.call");
  EXPECT_EQ(store.find("cmdstat_ssm.prefix.store:calls=3,"), 0u) << store;
  EXPECT_NE(store.find("failed_calls=1"), std::string::npos) << store;
  EXPECT_EQ(call.find("cmdstat_shm.call:calls=3,"), 0u) << call;
  EXPECT_NE(call.find("failed_calls=0"), std::string::npos) << call;
}

}  // namespace
}  // namespace prefixd::it
