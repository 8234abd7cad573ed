// Same-host transport (docs/shm-transport.md) against the real server over its real unix socket:
// SHM.HELLO's descriptors and what they allow, SHM.GET's views compared byte for byte, leases
// across overwrite, DEL and FLUSHALL, the cap, the time limit, a client killed while holding
// leases, a refused uid, the TCP port refusing every SHM command, V-store rows by the piece, and
// views across a restart.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"
#include "integration/shm_lease_holder.h"
#include "prefixd/shm.h"

namespace prefixd::it {
namespace {

using namespace std::chrono_literals;

std::string AsString(const ShmView& view) {
  return {reinterpret_cast<const char*>(view.data), view.size};
}

// The lease of every leased piece, in order (the pieces of one call repeat its one lease).
std::vector<uint64_t> LeasesOf(const std::vector<ShmView>& pieces) {
  std::vector<uint64_t> out;
  for (const ShmView& p : pieces) {
    if (p.lease != 0) out.push_back(p.lease);
  }
  return out;
}

// How many different leases the pieces name.
size_t DistinctLeaseCount(const std::vector<ShmView>& pieces) {
  std::vector<uint64_t> ids = LeasesOf(pieces);
  std::sort(ids.begin(), ids.end());
  return static_cast<size_t>(std::unique(ids.begin(), ids.end()) - ids.begin());
}

class ShmTest : public ServerTest {
 protected:
  void Start(std::vector<std::string> flags = {"--shm-arenas", "yes"}) {
    flags.insert(flags.end(), {"--appendonly", "no"});
    ASSERT_NO_FATAL_FAILURE(StartServer({.flags = flags, .unix_socket = true}));
    admin_ = ConnectHiredis(server_.port());
    ASSERT_NE(admin_, nullptr);
  }
  void Connect(ShmClient& client) {
    Status st = client.Connect(server_.unix_socket_path());
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_GE(client.arena_count(), 1u);
  }
  void Set(ShmClient& client, const std::string& key, const std::string& value) {
    auto r = client.Command({"SET", key, value});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r.value().str, "OK");
  }
  // Waits (bounded) until INFO's shm_leases reads `want`.
  bool LeasesBecome(uint64_t want, Millis timeout = 5000ms) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (InfoNumber(admin_.get(), "shm_leases") == want) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  RedisContext admin_;
};

// SHM.HELLO over a raw socket, keeping the descriptors it passes (they come with the reply's
// first byte, which a recvmsg receives on its own) and reading the whole reply into `reply`.
std::vector<int> RawHello(int fd, std::string* reply) {
  const std::string request = Multibulk({"SHM.HELLO"});
  EXPECT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  std::vector<int> fds;
  reply->clear();
  while (!CompleteReplyLength(*reply)) {
    char buffer[4096];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 16)];
    iovec iov{buffer, sizeof buffer};
    msghdr message{};
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
    if (n <= 0) break;
    reply->append(buffer, static_cast<size_t>(n));
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
        int passed;
        std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof passed);
        fds.push_back(passed);
      }
    }
  }
  return fds;
}

TEST_F(ShmTest, ViewsHoldEveryByteOfTheStoredValue) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  // Sizes around the pool's classes: 32 KiB (its smallest; 1 MiB under AddressSanitizer, which
  // checks heap buffers only: a sanitized server may keep a 32 KiB value on the heap), pages,
  // 64 KiB steps, 2 MiB steps.
  const std::vector<size_t> sizes = {32 << 10, (1 << 20) + 7, (3 << 20) + 4096 + 1, 33 << 20};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::string key = "blob:" + std::to_string(i);
    const std::string value = Pattern(sizes[i], i);
    ASSERT_NO_FATAL_FAILURE(Set(client, key, value));
    ShmView view;
    Status st = client.Get(key, view, /*checksum=*/true);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(view.size, value.size());
    EXPECT_TRUE(AsString(view) == value) << "bytes differ at size " << sizes[i];
    if (sizes[i] < (1 << 20) && ServerIsSanitized() && view.lease == 0) {
      EXPECT_EQ(view.lease, 0u);
      EXPECT_TRUE(view.checksum.empty());
      continue;
    }
    EXPECT_NE(view.lease, 0u) << "a value of " << sizes[i] << " bytes should lie in an arena";
    EXPECT_TRUE(view.copy.empty());
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx",
                  static_cast<unsigned long long>(XXH3_64bits(value.data(), value.size())));
    EXPECT_EQ(view.checksum, hex);
    EXPECT_TRUE(client.Valid(view));
    ASSERT_TRUE(client.Release(view).ok());
  }
  // Without CHECKSUM the server reads nothing: the field is nil.
  ShmView plain;
  ASSERT_TRUE(client.Get("blob:0", plain).ok());
  EXPECT_TRUE(plain.checksum.empty());
  // A small value is kept outside the arenas: its bytes come back, with no lease.
  ASSERT_NO_FATAL_FAILURE(Set(client, "small", "tiny value"));
  ShmView small;
  ASSERT_TRUE(client.Get("small", small).ok());
  EXPECT_EQ(small.lease, 0u);
  EXPECT_EQ(AsString(small), "tiny value");
  ShmView missing;
  EXPECT_EQ(client.Get("nothing", missing).code(), StatusCode::kNotFound);
  ASSERT_TRUE(client.Command({"SSM.PREFIX.STORE", "sess", "0", "x"}).ok());
  Status wrong = client.Get("sess", missing);
  EXPECT_EQ(wrong.code(), StatusCode::kServerError);
  EXPECT_NE(wrong.message().find("WRONGTYPE"), std::string::npos) << wrong.ToString();
  auto syntax = client.Command({"SHM.GET", "blob:0", "BOGUS"});
  EXPECT_EQ(syntax.status().message(), "ERR syntax error");
}

// One mapping of `pid`'s smaps: where it starts, what it maps and its VmFlags.
struct Mapping {
  uintptr_t start = 0;
  std::string name;
  std::string flags;
};

std::vector<Mapping> MappingsOf(const std::string& pid) {
  std::ifstream smaps("/proc/" + pid + "/smaps");
  std::vector<Mapping> out;
  for (std::string line; std::getline(smaps, line);) {
    const size_t dash = line.find('-'), space = line.find(' ');
    if (dash != std::string::npos && space != std::string::npos && dash < space &&
        line.find_first_not_of("0123456789abcdef") == dash) {
      Mapping m;
      m.start = std::stoull(line.substr(0, dash), nullptr, 16);
      const size_t name = line.find('/');
      if (name != std::string::npos) m.name = line.substr(name);
      out.push_back(m);
    } else if (line.rfind("VmFlags:", 0) == 0 && !out.empty()) {
      out.back().flags = line + " ";
    }
  }
  return out;
}

// Arenas are mapped where huge pages can back them, by the server and by each client alike
// (common/shared_mapping.h): 2 MiB-aligned, advised MADV_HUGEPAGE ("hg"), or MADV_NOHUGEPAGE
// ("nh") on the server under `huge-pages no`. Whether the kernel then gives huge pages is its
// shmem_enabled; the mappings are read here whatever it says.
TEST_F(ShmTest, ArenasAreMappedForHugePagesOnBothSides) {
  for (const bool huge : {true, false}) {
    SCOPED_TRACE(huge ? "huge-pages yes" : "huge-pages no");
    ASSERT_NO_FATAL_FAILURE(Start({"--shm-arenas", "yes", "--huge-pages", huge ? "yes" : "no"}));
    ShmClient client;
    ASSERT_NO_FATAL_FAILURE(Connect(client));
    constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
    size_t client_checked = 0;
    const std::vector<Mapping> own = MappingsOf("self");
    for (size_t id = 0; id < client.arena_count(); ++id) {
      const auto base = reinterpret_cast<uintptr_t>(client.arena(id).data());
      if (client.arena(id).size() < kHugePage) continue;
      EXPECT_EQ(base % kHugePage, 0u) << "arena " << id;
      for (const Mapping& m : own) {
        if (m.start != base) continue;
        EXPECT_NE(m.name.find("prefixd-arena"), std::string::npos) << m.name;
        EXPECT_NE(m.flags.find(" hg "), std::string::npos) << m.flags;
        ++client_checked;
      }
    }
    EXPECT_EQ(client_checked, client.arena_count());
    size_t server_checked = 0;
    for (const Mapping& m : MappingsOf(std::to_string(server_.pid()))) {
      if (m.name.find("prefixd-arena") == std::string::npos) continue;
      EXPECT_EQ(m.start % kHugePage, 0u) << m.name;
      EXPECT_NE(m.flags.find(huge ? " hg " : " nh "), std::string::npos) << m.flags;
      ++server_checked;
    }
    EXPECT_GE(server_checked, client.arena_count());
    ASSERT_TRUE(server_.Stop());
  }
}

// The shared forms read the database the connection selected, as GET does: a key of another
// database is nil until the client selects it.
TEST_F(ShmTest, ReadsOnlyTheSelectedDatabase) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  const std::string value = Pattern(2 << 20, 5), layer = Pattern(2 << 20, 6);
  ASSERT_TRUE(client.Command({"SELECT", "1"}).ok());
  ASSERT_NO_FATAL_FAILURE(Set(client, "db1", value));
  ASSERT_TRUE(client.Command({"SSM.PREFIX.STORE", "s1", "0", layer}).ok());
  ASSERT_TRUE(client.Command({"SELECT", "0"}).ok());
  ShmView view;
  EXPECT_EQ(client.Get("db1", view).code(), StatusCode::kNotFound);
  std::vector<ShmView> layers;
  const uint32_t zero = 0;
  ASSERT_TRUE(client.FetchLayers("s1", std::span(&zero, 1), layers).ok());
  ASSERT_EQ(layers.size(), 1u);
  EXPECT_EQ(layers[0].data, nullptr) << "a layer of database 1 answered in database 0";
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 0u);
  ASSERT_TRUE(client.Command({"SELECT", "1"}).ok());
  ASSERT_TRUE(client.Get("db1", view).ok());
  EXPECT_TRUE(AsString(view) == value);
  ASSERT_TRUE(client.FetchLayers("s1", std::span(&zero, 1), layers).ok());
  ASSERT_EQ(layers.size(), 1u);
  EXPECT_TRUE(AsString(layers[0]) == layer);
  ASSERT_TRUE(client.Release(view).ok());
  ASSERT_TRUE(client.Release(layers[0]).ok());
}

TEST_F(ShmTest, LeaseKeepsOldBytesThroughOverwriteDelAndFlushall) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  const std::string first = Pattern(2 << 20, 1), second = Pattern(2 << 20, 2);
  ASSERT_NO_FATAL_FAILURE(Set(client, "k", first));
  ShmView old_view;
  ASSERT_TRUE(client.Get("k", old_view).ok());
  ASSERT_NE(old_view.lease, 0u);

  // Overwrite: a new place; the leased bytes stay as they were.
  ASSERT_NO_FATAL_FAILURE(Set(client, "k", second));
  ShmView new_view;
  ASSERT_TRUE(client.Get("k", new_view).ok());
  EXPECT_TRUE(AsString(new_view) == second);
  EXPECT_NE(new_view.data, old_view.data);
  EXPECT_TRUE(AsString(old_view) == first) << "an overwrite changed leased bytes";
  EXPECT_TRUE(client.Valid(old_view));
  // APPEND builds a new value rather than writing into the leased one.
  ASSERT_TRUE(client.Command({"APPEND", "k", "tail"}).ok());
  EXPECT_TRUE(AsString(new_view) == second) << "APPEND wrote into leased bytes";

  ASSERT_TRUE(client.Command({"DEL", "k"}).ok());
  ASSERT_TRUE(client.Command({"SET", "other", Pattern(2 << 20, 3)}).ok());
  ASSERT_TRUE(client.Command({"FLUSHALL"}).ok());
  // Fresh values of the same size must not land on leased bytes.
  for (int i = 0; i < 4; ++i) {
    ASSERT_NO_FATAL_FAILURE(Set(client, "fill:" + std::to_string(i), Pattern(2 << 20, 10 + i)));
  }
  EXPECT_TRUE(AsString(old_view) == first);
  EXPECT_TRUE(AsString(new_view) == second);
  EXPECT_TRUE(client.Valid(old_view));
  EXPECT_TRUE(client.Valid(new_view));
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 2u);
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leased_bytes"), uint64_t{4} << 20);

  // Released, and nothing else holds the bytes: the generation says so.
  ShmView kept = old_view;
  ASSERT_TRUE(client.Release(old_view).ok());
  EXPECT_FALSE(client.Valid(kept));
  ASSERT_TRUE(client.Release(new_view).ok());
  EXPECT_TRUE(LeasesBecome(0));
}

TEST_F(ShmTest, SsmLayersThroughTheArenas) {
  ASSERT_NO_FATAL_FAILURE(Start({"--shm-arenas", "yes", "--shm-max-leases", "2"}));
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  const std::string conv = Pattern((1 << 20) + 96, 20), ssm = Pattern((2 << 20) + 12, 21);
  ASSERT_TRUE(client.Command({"SSM.PREFIX.MSTORE", "s", "0", conv, "1", ssm}).ok());
  const std::vector<uint32_t> layers = {1, 7, 0};
  std::vector<ShmView> views;
  Status st = client.FetchLayers("s", layers, views);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(views.size(), 3u);
  EXPECT_NE(views[0].lease, 0u);
  EXPECT_TRUE(AsString(views[0]) == ssm);
  EXPECT_EQ(views[1].data, nullptr) << "layer 7 was never stored";
  EXPECT_EQ(views[2].lease, views[0].lease) << "one lease for the call";
  EXPECT_TRUE(AsString(views[2]) == conv);
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 1u);

  // A new store and a DROP leave the leased layers as they were.
  const std::string ssm2 = Pattern((2 << 20) + 12, 22);
  ASSERT_TRUE(client.Command({"SSM.PREFIX.STORE", "s", "1", ssm2}).ok());
  ASSERT_TRUE(client.Command({"SSM.PREFIX.DROP", "s"}).ok());
  ASSERT_TRUE(client.Command({"SSM.PREFIX.STORE", "t", "1", Pattern((2 << 20) + 12, 23)}).ok());
  EXPECT_TRUE(AsString(views[0]) == ssm);
  EXPECT_TRUE(AsString(views[2]) == conv);
  EXPECT_TRUE(client.Valid(views[0]));

  // At the cap (2: the call's lease and a string's) a call is refused and leases nothing; with
  // room for one more lease, a call of three layers takes it.
  ASSERT_TRUE(client.Command({"SSM.PREFIX.MSTORE", "u", "0", conv, "1", ssm, "2", ssm2}).ok());
  ASSERT_NO_FATAL_FAILURE(Set(client, "k", Pattern(1 << 20, 24)));
  ShmView string_view;
  ASSERT_TRUE(client.Get("k", string_view).ok());
  std::vector<ShmView> refused;
  const std::vector<uint32_t> three = {0, 1, 2};
  st = client.FetchLayers("u", three, refused);
  EXPECT_EQ(st.code(), StatusCode::kServerError);
  EXPECT_NE(st.message().find("shm-max-leases"), std::string::npos) << st.ToString();
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 2u);
  ASSERT_TRUE(client.Release(string_view).ok());
  std::vector<ShmView> taken;
  st = client.FetchLayers("u", three, taken);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(DistinctLeaseCount(taken), 1u);
  EXPECT_EQ(LeasesOf(taken).size(), 3u);
  EXPECT_TRUE(AsString(taken[0]) == conv && AsString(taken[1]) == ssm &&
              AsString(taken[2]) == ssm2);
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 2u);
  ASSERT_TRUE(client.Release(LeasesOf(taken)).ok());

  // A small session lives outside the arenas: its layers come back as bytes, without leases.
  ASSERT_TRUE(client.Command({"SSM.PREFIX.STORE", "small", "3", "abc"}).ok());
  const std::vector<uint32_t> three_only = {3, 4};
  ASSERT_TRUE(client.FetchLayers("small", three_only, views).ok());
  EXPECT_EQ(views[0].lease, 0u);
  EXPECT_EQ(AsString(views[0]), "abc");
  EXPECT_EQ(views[1].data, nullptr);
  // Another type is -WRONGTYPE, a missing session all nils.
  ASSERT_NO_FATAL_FAILURE(Set(client, "str", "x"));
  EXPECT_NE(client.FetchLayers("str", three_only, views).message().find("WRONGTYPE"),
            std::string::npos);
  ASSERT_TRUE(client.FetchLayers("nobody", three_only, views).ok());
  EXPECT_EQ(views[0].data, nullptr);
  EXPECT_EQ(client.Command({"SSM.PREFIX.SHMFETCH", "s", "-1"}).status().message(),
            client.Command({"SSM.PREFIX.FETCH", "s", "-1"}).status().message());
}

// V-store rows: 1024 fp32 values a row (4 KiB), so 64 rows a chunk (256 KiB, an arena region).
constexpr size_t kVDim = 1024, kVRow = kVDim * 4;

void StoreRows(ShmClient& client, const std::string& sid, uint64_t start, uint64_t count,
               uint64_t seed) {
  auto r = client.Command({"V.STOREBATCH", sid, "0", std::to_string(start), std::to_string(count),
                           Pattern(count * kVRow, seed)});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r.value().str, "OK");
}

std::string Joined(const std::vector<ShmView>& pieces) {
  std::string out;
  for (const ShmView& p : pieces) out += AsString(p);
  return out;
}

// V.FETCH RANGE's bytes over the same socket.
std::string FetchedOverSocket(ShmClient& client, const std::string& sid, uint64_t start,
                              uint64_t end, bool native = false) {
  std::vector<std::string_view> args{"V.FETCH", sid, "0", "RANGE"};
  const std::string s = std::to_string(start), e = std::to_string(end);
  args.insert(args.end(), {s, e});
  if (native) args.insert(args.end(), {"FMT", "NATIVE"});
  auto r = client.Command(args);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value().str : std::string();
}

// Whether V-store chunks (at most 256 KiB) lie outside the arenas: a server built with
// AddressSanitizer keeps buffers below 1 MiB on the heap, where it checks them, and answers
// their bytes instead of places. Only a sanitized server may; probed with a session of its own.
bool VChunksOnHeap(ShmClient& client) {
  EXPECT_TRUE(client.Command({"V.CREATE", "probe", std::to_string(kVDim), "VQUANT", "fp32"}).ok());
  StoreRows(client, "probe", 0, 1, 1);
  std::vector<ShmView> pieces;
  EXPECT_TRUE(client.FetchRows("probe", 0, 0, 1, pieces).ok());
  const std::vector<uint64_t> leases = LeasesOf(pieces);
  EXPECT_TRUE(client.Release(leases).ok());
  EXPECT_TRUE(client.Command({"V.DROP", "probe"}).ok());
  return leases.empty() && ServerIsSanitized();
}

TEST_F(ShmTest, VStoreRowsEveryByteAsTheSocketSendsThem) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  const bool on_heap = VChunksOnHeap(client);  // then every piece comes as bytes
  ASSERT_TRUE(client.Command({"V.CREATE", "v", std::to_string(kVDim), "VQUANT", "fp32"}).ok());
  // Chunk 0 full, chunk 1 up to row 100, chunks 2 absent, chunk 3 from row 200: length 230.
  ASSERT_NO_FATAL_FAILURE(StoreRows(client, "v", 0, 100, 30));
  ASSERT_NO_FATAL_FAILURE(StoreRows(client, "v", 200, 30, 31));
  struct Case {
    uint64_t start, end;
    size_t min_places, min_zero_runs;
  };
  const Case cases[] = {
      {5, 50, 1, 0},     // inside one chunk
      {40, 90, 2, 0},    // across chunks 0 and 1
      {90, 210, 2, 1},   // over the gap after row 100
      {150, 170, 0, 1},  // only the gap
      {220, 400, 1, 1},  // past the length
      {0, 230, 3, 1},    // the whole layer
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("RANGE " + std::to_string(c.start) + " " + std::to_string(c.end));
    std::vector<ShmView> pieces;
    Status st = client.FetchRows("v", 0, c.start, c.end, pieces);
    ASSERT_TRUE(st.ok()) << st.ToString();
    size_t places = 0, zero_runs = 0;
    for (const ShmView& p : pieces) {
      ASSERT_EQ(p.size % kVRow, 0u) << "a piece of part of a row";
      if (p.zeros) {
        ++zero_runs;
        EXPECT_EQ(p.lease, 0u);
        EXPECT_EQ(AsString(p), std::string(p.size, '\0'));
      } else if (p.lease != 0) {
        ++places;
        EXPECT_TRUE(client.Valid(p));
      }
    }
    if (!on_heap) EXPECT_GE(places, c.min_places);
    EXPECT_GE(zero_runs, c.min_zero_runs);
    const std::string joined = Joined(pieces);
    EXPECT_EQ(joined.size(), (c.end - c.start) * kVRow);
    EXPECT_TRUE(joined == FetchedOverSocket(client, "v", c.start, c.end))
        << "the shared rows differ from V.FETCH's";
    ASSERT_TRUE(client.Release(LeasesOf(pieces)).ok());
  }
  EXPECT_TRUE(LeasesBecome(0));

  // A layer with no tokens is nil (no pieces); a missing session and bad arguments are errors.
  std::vector<ShmView> none;
  ASSERT_TRUE(client.FetchRows("v", 5, 0, 10, none).ok());
  EXPECT_TRUE(none.empty());
  Status missing = client.FetchRows("nosuch", 0, 0, 10, none);
  EXPECT_EQ(missing.message(), "ERR session not found");
  auto bad = client.Command({"V.SHMFETCH", "v", "0", "RANGE", "10", "10"});
  EXPECT_EQ(bad.status().message(), "ERR invalid RANGE: end must exceed start (>=0)");
  auto option = client.Command({"V.SHMFETCH", "v", "0", "RANGE", "0", "10", "FMT", "F16"});
  EXPECT_EQ(option.status().code(), StatusCode::kServerError);
  auto syntax = client.Command({"V.SHMFETCH", "v", "0", "IDS", "0", "10"});
  EXPECT_EQ(syntax.status().message(), "ERR syntax error");
  ASSERT_TRUE(client.Command({"SET", "str", "x"}).ok());
  auto wrong = client.Command({"V.SHMFETCH", "str", "0", "RANGE", "0", "10"});
  EXPECT_NE(wrong.status().message().find("WRONGTYPE"), std::string::npos);
}

TEST_F(ShmTest, VStoreDecodedTiersAreRefusedNativeOnesShared) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  ASSERT_TRUE(client.Command({"V.CREATE", "h", std::to_string(kVDim), "VQUANT", "fp16"}).ok());
  ASSERT_TRUE(client.Command({"V.CREATE", "q", std::to_string(kVDim), "VQUANT", "int8"}).ok());
  // int8 takes finite values only: zeros.
  for (const auto& [sid, blob] : {std::pair<std::string, std::string>{"h", Pattern(80 * kVRow, 40)},
                                  {"q", std::string(80 * kVRow, '\0')}}) {
    auto r = client.Command({"V.STOREBATCH", sid, "0", "0", "80", blob});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  std::vector<ShmView> pieces;
  Status decoded = client.FetchRows("h", 0, 0, 80, pieces);
  EXPECT_EQ(decoded.message(),
            "ERR V.SHMFETCH shares rows only as stored: this session's fp16 rows are decoded to "
            "fp32 (use V.FETCH, or FMT NATIVE for fp16/bf16)");
  Status int8 = client.FetchRows("q", 0, 0, 80, pieces, /*native=*/true);
  EXPECT_NE(int8.message().find("int8 rows are decoded"), std::string::npos) << int8.ToString();
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 0u);

  if (VChunksOnHeap(client))
    GTEST_SKIP() << "this sanitized server keeps V-store chunks on the heap";
  Status native = client.FetchRows("h", 0, 0, 80, pieces, /*native=*/true);
  ASSERT_TRUE(native.ok()) << native.ToString();
  EXPECT_FALSE(LeasesOf(pieces).empty());
  EXPECT_TRUE(Joined(pieces) == FetchedOverSocket(client, "h", 0, 80, /*native=*/true));
  // fp16 rows are 2 KiB: a piece starting mid-page is placed (and its generation checked) too.
  Status odd = client.FetchRows("h", 0, 3, 77, pieces, /*native=*/true);
  ASSERT_TRUE(odd.ok()) << odd.ToString();
  ASSERT_FALSE(LeasesOf(pieces).empty());
  EXPECT_NE(pieces[0].offset % 4096, 0u);
  EXPECT_TRUE(client.Valid(pieces[0]));
  EXPECT_TRUE(Joined(pieces) == FetchedOverSocket(client, "h", 3, 77, /*native=*/true));
}

TEST_F(ShmTest, VStoreLeaseKeepsRowsThroughOverwriteAndDrop) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  if (VChunksOnHeap(client)) {
    GTEST_SKIP() << "this sanitized server keeps V-store chunks on the heap";
  }
  ASSERT_TRUE(client.Command({"V.CREATE", "v", std::to_string(kVDim), "VQUANT", "fp32"}).ok());
  ASSERT_NO_FATAL_FAILURE(StoreRows(client, "v", 0, 128, 50));
  const std::string first = FetchedOverSocket(client, "v", 0, 128);
  std::vector<ShmView> old_rows;
  ASSERT_TRUE(client.FetchRows("v", 0, 0, 128, old_rows).ok());
  ASSERT_EQ(LeasesOf(old_rows).size(), 2u) << "two chunks, two leased pieces";
  ASSERT_EQ(DistinctLeaseCount(old_rows), 1u) << "one lease for the call";
  ASSERT_TRUE(Joined(old_rows) == first);

  // Rewritten rows a reader has seen go to new chunks; the leased ones stay as they were.
  ASSERT_NO_FATAL_FAILURE(StoreRows(client, "v", 0, 128, 51));
  const std::string second = FetchedOverSocket(client, "v", 0, 128);
  ASSERT_TRUE(second != first);
  std::vector<ShmView> new_rows;
  ASSERT_TRUE(client.FetchRows("v", 0, 0, 128, new_rows).ok());
  EXPECT_TRUE(Joined(new_rows) == second);
  EXPECT_TRUE(Joined(old_rows) == first) << "V.STOREBATCH changed leased rows";
  for (const ShmView& p : old_rows) EXPECT_TRUE(client.Valid(p));

  // Dropped, and new sessions' chunks allocated: leased rows unchanged, still valid.
  ASSERT_EQ(client.Command({"V.DROP", "v"}).value().integer, 1);
  for (int i = 0; i < 4; ++i) {
    const std::string sid = "fill" + std::to_string(i);
    ASSERT_TRUE(client.Command({"V.CREATE", sid, std::to_string(kVDim), "VQUANT", "fp32"}).ok());
    ASSERT_NO_FATAL_FAILURE(StoreRows(client, sid, 0, 128, 60 + i));
  }
  EXPECT_TRUE(Joined(old_rows) == first);
  EXPECT_TRUE(Joined(new_rows) == second);
  for (const ShmView& p : old_rows) EXPECT_TRUE(client.Valid(p));
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 2u);
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leased_bytes"), uint64_t{4} * 64 * kVRow);
  Status gone = client.FetchRows("v", 0, 0, 128, new_rows);
  EXPECT_EQ(gone.message(), "ERR session not found");

  // Released: nothing else holds the old chunks, and the generation says so.
  const std::vector<ShmView> kept = old_rows;
  ASSERT_TRUE(client.Release(LeasesOf(old_rows)).ok());
  for (const ShmView& p : kept) EXPECT_FALSE(client.Valid(p));
  EXPECT_TRUE(LeasesBecome(1));
}

// shm-max-leases counts calls: a call of more pieces than the cap takes one lease; at the cap a
// call is refused and leases nothing.
TEST_F(ShmTest, VStoreLeasesCountCallsAgainstTheCap) {
  ASSERT_NO_FATAL_FAILURE(Start({"--shm-arenas", "yes", "--shm-max-leases", "2"}));
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  if (VChunksOnHeap(client)) {
    GTEST_SKIP() << "this sanitized server keeps V-store chunks on the heap";
  }
  ASSERT_TRUE(client.Command({"V.CREATE", "v", std::to_string(kVDim), "VQUANT", "fp32"}).ok());
  ASSERT_NO_FATAL_FAILURE(StoreRows(client, "v", 0, 192, 70));
  std::vector<ShmView> three;
  ASSERT_TRUE(client.FetchRows("v", 0, 0, 192, three).ok());
  ASSERT_EQ(LeasesOf(three).size(), 3u) << "three pieces, more than the cap";
  EXPECT_EQ(DistinctLeaseCount(three), 1u);
  EXPECT_TRUE(Joined(three) == FetchedOverSocket(client, "v", 0, 192));
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 1u);
  ShmView string_view;
  ASSERT_NO_FATAL_FAILURE(Set(client, "k", Pattern(1 << 20, 71)));
  ASSERT_TRUE(client.Get("k", string_view).ok());  // the second lease: at the cap
  std::vector<ShmView> more;
  Status capped = client.FetchRows("v", 0, 0, 64, more);
  EXPECT_EQ(capped.message(),
            "ERR this connection holds 2 SHM leases (shm-max-leases): SHM.RELEASE some first");
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 2u);
  // One released: room for one call, of any number of pieces.
  ASSERT_TRUE(client.Release(string_view).ok());
  ASSERT_TRUE(client.FetchRows("v", 0, 32, 192, more).ok());
  EXPECT_EQ(DistinctLeaseCount(more), 1u);
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 2u);
}

// Cold rows (the disk tier) are read into memory for the answer: the same bytes as V.FETCH's.
TEST_F(ShmTest, VStoreColdRowsAreReadIntoMemoryAndShared) {
  ASSERT_NO_FATAL_FAILURE(
      StartServer({.flags = {"--shm-arenas", "yes", "--appendonly", "yes", "--maxmemory", "4mb",
                             "--maxmemory-policy", "allkeys-lru"},
                   .unix_socket = true}));
  admin_ = ConnectHiredis(server_.port());
  ASSERT_NE(admin_, nullptr);
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  if (VChunksOnHeap(client)) {
    GTEST_SKIP() << "this sanitized server keeps V-store chunks on the heap";
  }
  ASSERT_TRUE(client.Command({"V.CREATE", "old", std::to_string(kVDim), "VQUANT", "fp32"}).ok());
  ASSERT_NO_FATAL_FAILURE(StoreRows(client, "old", 0, 256, 100));  // 1 MiB
  const std::string hot = FetchedOverSocket(client, "old", 0, 256);
  // Newer sessions push "old", the least recently used, to disk.
  for (int i = 0; i < 12 && InfoNumber(admin_.get(), "cold_keys") == 0; ++i) {
    const std::string sid = "new" + std::to_string(i);
    ASSERT_TRUE(client.Command({"V.CREATE", sid, std::to_string(kVDim), "VQUANT", "fp32"}).ok());
    ASSERT_NO_FATAL_FAILURE(StoreRows(client, sid, 0, 256, 101 + i));
  }
  ASSERT_GE(InfoNumber(admin_.get(), "cold_keys"), 1u) << "nothing went to disk";
  for (auto [start, end] : {std::pair<uint64_t, uint64_t>{10, 200}, {0, 300}}) {
    SCOPED_TRACE("RANGE " + std::to_string(start) + " " + std::to_string(end));
    const uint64_t cold_hits = InfoNumber(admin_.get(), "cold_hits");
    std::vector<ShmView> pieces;
    Status st = client.FetchRows("old", 0, start, end, pieces);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_GT(InfoNumber(admin_.get(), "cold_hits"), cold_hits) << "not read from disk";
    EXPECT_FALSE(LeasesOf(pieces).empty()) << "rows read from disk are in an arena too";
    const std::string joined = Joined(pieces);
    EXPECT_TRUE(joined == FetchedOverSocket(client, "old", start, end));
    EXPECT_TRUE(joined.substr(0, (std::min<uint64_t>(end, 256) - start) * kVRow) ==
                hot.substr(start * kVRow, (std::min<uint64_t>(end, 256) - start) * kVRow));
    ASSERT_TRUE(client.Release(LeasesOf(pieces)).ok());
  }
}

// Prefix-index blocks: 16 tokens of 1024 fp32 values, 2 attention layers: a block's page is
// 256 KiB (K and V of each layer), pages sit in 2 MiB slab chunks in an arena.
constexpr size_t kBlockTokens = 16, kHalf = kBlockTokens * kVRow;

std::string Hashes(std::initializer_list<char> ids) {
  std::string out;
  for (char id : ids) out += std::string(16, id);
  return out;
}

// A namespace of kBlockTokens-token blocks, two attention layers of kVDim fp32 rows, one
// recurrent layer.
void MakeNamespace(ShmClient& client, const std::string& ns) {
  ASSERT_TRUE(
      client
          .Command({"KV.PREFIX.NAMESPACE", ns, "BLOCK", std::to_string(kBlockTokens), "ATTN", "2",
                    "KVDIM", std::to_string(kVDim), "RECURRENT", "1", "VQUANT", "fp32"})
          .ok());
}

void StoreBlocks(ShmClient& client, const std::string& ns, const std::string& parent,
                 const std::string& hashes, uint64_t seed) {
  const std::string n = std::to_string(hashes.size() / 16);
  const size_t rows = 2 * (hashes.size() / 16) * kHalf;
  const std::string layer0 = Pattern(rows, seed), layer1 = Pattern(rows, seed + 1);
  auto r = client.Command({"KV.PREFIX.BSTORE", ns, parent, n, hashes, "0", layer0, "1", layer1});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

std::string BlocksOverSocket(ShmClient& client, const std::string& ns, const std::string& hashes,
                             const std::string& layer) {
  auto r =
      client.Command({"KV.PREFIX.BFETCH", ns, std::to_string(hashes.size() / 16), hashes, layer});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value().str : std::string();
}

TEST_F(ShmTest, PrefixBlocksEveryByteAsTheSocketSendsThemAndLeasesHoldPages) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  ASSERT_NO_FATAL_FAILURE(MakeNamespace(client, "ns"));
  const std::string root(16, '\0');
  ASSERT_NO_FATAL_FAILURE(StoreBlocks(client, "ns", root, Hashes({'a', 'b', 'c'}), 90));
  // Another chain, so dropping a's leaves the namespace's pages in place for new blocks to reuse.
  ASSERT_NO_FATAL_FAILURE(StoreBlocks(client, "ns", root, Hashes({'x'}), 92));
  for (const std::string& hashes : {Hashes({'a', 'b', 'c'}), Hashes({'c', 'a'}), Hashes({'b'})}) {
    for (uint32_t layer : {0u, 1u}) {
      std::vector<ShmView> pieces;
      Status st = client.FetchBlocks("ns", hashes, layer, pieces);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(pieces.size(), 2 * hashes.size() / 16);
      for (const ShmView& p : pieces) {
        EXPECT_NE(p.lease, 0u);
        EXPECT_EQ(p.size, kHalf);
      }
      EXPECT_TRUE(Joined(pieces) == BlocksOverSocket(client, "ns", hashes, std::to_string(layer)))
          << "the shared block rows differ from KV.PREFIX.BFETCH's";
      ASSERT_TRUE(client.Release(LeasesOf(pieces)).ok());
    }
  }
  EXPECT_TRUE(LeasesBecome(0));
  std::vector<ShmView> pieces;
  EXPECT_EQ(client.FetchBlocks("ns", Hashes({'a', 'z'}), 0, pieces).code(), StatusCode::kNotFound);
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 0u);
  auto other = client.Command({"KV.PREFIX.SHMBFETCH", "nosuch", "1", Hashes({'a'}), "0"});
  EXPECT_EQ(other.status().code(), StatusCode::kServerError);

  // Leased pages survive the blocks' drop and their slots' reuse by new blocks.
  std::vector<ShmView> old_rows;
  ASSERT_TRUE(client.FetchBlocks("ns", Hashes({'a', 'b'}), 1, old_rows).ok());
  const std::string first = Joined(old_rows);
  auto dropped = client.Command({"KV.PREFIX.BDROP", "ns", "1", Hashes({'a'})});
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  ASSERT_NO_FATAL_FAILURE(StoreBlocks(client, "ns", root, Hashes({'d', 'e', 'f'}), 95));
  std::vector<ShmView> new_rows;
  ASSERT_TRUE(client.FetchBlocks("ns", Hashes({'d', 'e'}), 1, new_rows).ok());
  EXPECT_TRUE(Joined(new_rows) == BlocksOverSocket(client, "ns", Hashes({'d', 'e'}), "1"));
  EXPECT_TRUE(Joined(new_rows) != first);
  EXPECT_TRUE(Joined(old_rows) == first) << "new blocks were written into leased pages";
  for (const ShmView& p : old_rows) EXPECT_TRUE(client.Valid(p));
  EXPECT_EQ(client.FetchBlocks("ns", Hashes({'a'}), 1, pieces).code(), StatusCode::kNotFound);
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 2u) << "one lease per call";

  // Decoded tiers are refused.
  ASSERT_TRUE(
      client
          .Command({"KV.PREFIX.NAMESPACE", "q", "BLOCK", std::to_string(kBlockTokens), "ATTN", "1",
                    "KVDIM", std::to_string(kVDim), "RECURRENT", "1", "VQUANT", "fp16"})
          .ok());
  Status decoded = client.FetchBlocks("q", Hashes({'a'}), 0, pieces);
  EXPECT_EQ(decoded.message(),
            "ERR KV.PREFIX.SHMBFETCH shares rows only as stored: this namespace's fp16 rows are "
            "decoded to fp32 (use KV.PREFIX.BFETCH, or FMT NATIVE for fp16/bf16)");
}

// --- KV.PREFIX.SHMLFETCH: a matched prefix's rows and states through the arenas ---

// A prefix of 3 blocks and a checkpoint at 3 * 16 + 13 = 61 tokens: tail rows of 13 tokens per
// attention layer, and 2 recurrent layers of 2 MiB each (in an arena even where a sanitized
// server keeps smaller buffers on the heap).
constexpr uint64_t kLeasedLength = 3 * kBlockTokens + 13;
constexpr size_t kStateBytes = size_t{2} << 20;

std::string U64Le(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (8 * i));
  return out;
}

void StorePrefix(ShmClient& client, const std::string& ns, const std::string& tier, uint64_t seed) {
  auto made =
      client.Command({"KV.PREFIX.NAMESPACE", ns, "BLOCK", std::to_string(kBlockTokens), "ATTN", "2",
                      "KVDIM", std::to_string(kVDim), "RECURRENT", "2", "VQUANT", tier});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  // fp16 rows go in as F16 (two bytes a value): half the bytes of fp32's.
  const size_t value_bytes = tier == "fp16" ? 2 : 4;
  const std::string fmt = tier == "fp16" ? "F16" : "F32";
  const size_t half = kBlockTokens * kVDim * value_bytes;
  const std::string root(16, '\0'), hashes = Hashes({'a', 'b', 'c'});
  const std::string layer0 = Pattern(2 * 3 * half, seed), layer1 = Pattern(2 * 3 * half, seed + 1);
  auto stored = client.Command(
      {"KV.PREFIX.BSTORE", ns, root, "3", hashes, "0", layer0, "1", layer1, "FMT", fmt});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  const size_t tail = 2 * 13 * kVDim * value_bytes;
  const std::string tail0 = Pattern(tail, seed + 2), tail1 = Pattern(tail, seed + 3);
  const std::string s0 = Pattern(kStateBytes, seed + 4), s1 = Pattern(kStateBytes, seed + 5);
  auto ckpt = client.Command({"SSM.PREFIX.CKPT.STORE", ns, std::string(16, 'c'),
                              std::to_string(kLeasedLength), std::string(16, 'p'), "0", s0, "1", s1,
                              "TAIL", "0", tail0, "1", tail1, "FMT", fmt});
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
}

// KV.PREFIX.MATCH of the stored prefix with a lease: its id (0 on failure).
uint64_t MatchLease(ShmClient& client, const std::string& ns, const std::string& ms = "30000") {
  auto m = client.Command({"KV.PREFIX.MATCH", ns, "3", Hashes({'a', 'b', 'c'}), "AT", "1",
                           U64Le(kLeasedLength), std::string(16, 'p'), "LEASE", ms});
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok() || m.value().elements.size() != 6) return 0;
  EXPECT_EQ(m.value().elements[0].integer, static_cast<int64_t>(kLeasedLength));
  return static_cast<uint64_t>(m.value().elements[1].integer);
}

// KV.PREFIX.LFETCH's reply over the same socket (a bulk for ATTN, an array for STATE).
Result<Reply> LFetchOverSocket(ShmClient& client, std::vector<std::string> args) {
  args.insert(args.begin(), "KV.PREFIX.LFETCH");
  std::vector<std::string_view> views(args.begin(), args.end());
  return client.Command(views);
}

// Whether the pages of a small namespace lie outside the arenas: a sanitized server keeps slab
// chunks below 1 MiB on the heap and answers their bytes. Only a sanitized server may.
bool PagesOnHeap(const std::vector<ShmView>& pieces) {
  return LeasesOf(pieces).empty() && ServerIsSanitized();
}

TEST_F(ShmTest, PrefixLeaseEveryByteAsLFetchSendsItAndLeasesOutliveDropAndReuse) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  ASSERT_NO_FATAL_FAILURE(StorePrefix(client, "ns", "fp32", 200));
  const uint64_t lease = MatchLease(client, "ns");
  ASSERT_NE(lease, 0u);
  const std::string lease_text = std::to_string(lease);

  // Whole layers and ranges: inside a block, across blocks, into the tail, the tail alone, empty.
  struct Range {
    uint64_t start, end;
  };
  const Range ranges[] = {{0, kLeasedLength}, {3, 9},  {10, 40}, {40, kLeasedLength},
                          {50, 55},           {0, 48}, {20, 20}};
  bool on_heap = false;
  for (uint32_t layer : {0u, 1u}) {
    std::vector<ShmView> pieces;
    Status st = client.FetchLeaseRows("ns", lease, layer, pieces);
    ASSERT_TRUE(st.ok()) << st.ToString();
    // One piece per block and one for the tail, for K then for V.
    ASSERT_EQ(pieces.size(), 8u);
    on_heap = PagesOnHeap(pieces);
    for (size_t i = 0; i < pieces.size(); ++i) {
      EXPECT_EQ(pieces[i].size, (i % 4 == 3 ? 13 : kBlockTokens) * kVRow) << i;
      if (i % 4 != 3 && !on_heap) EXPECT_NE(pieces[i].lease, 0u) << "a block's rows not leased";
    }
    auto socket = LFetchOverSocket(client, {"ns", lease_text, "ATTN", std::to_string(layer)});
    ASSERT_TRUE(socket.ok()) << socket.status().ToString();
    EXPECT_TRUE(Joined(pieces) == socket.value().str)
        << "the shared rows differ from KV.PREFIX.LFETCH's";
    ASSERT_TRUE(client.Release(LeasesOf(pieces)).ok());
    for (const Range& r : ranges) {
      st = client.FetchLeaseRows("ns", lease, layer, pieces, false, r.start, r.end);
      ASSERT_TRUE(st.ok()) << st.ToString();
      auto ranged =
          LFetchOverSocket(client, {"ns", lease_text, "ATTN", std::to_string(layer), "RANGE",
                                    std::to_string(r.start), std::to_string(r.end)});
      ASSERT_TRUE(ranged.ok()) << ranged.status().ToString();
      EXPECT_EQ(ranged.value().str.size(), 2 * (r.end - r.start) * kVRow);
      EXPECT_TRUE(Joined(pieces) == ranged.value().str)
          << "RANGE " << r.start << " " << r.end << " differs from KV.PREFIX.LFETCH's";
      ASSERT_TRUE(client.Release(LeasesOf(pieces)).ok());
    }
  }
  // The states, all and by layer, each a place under a lease (2 MiB: in an arena everywhere).
  std::vector<ShmView> states;
  ASSERT_TRUE(client.FetchLeaseState("ns", lease, {}, states).ok());
  auto socket_states = LFetchOverSocket(client, {"ns", lease_text, "STATE"});
  ASSERT_TRUE(socket_states.ok());
  ASSERT_EQ(states.size(), 2u);
  ASSERT_EQ(socket_states.value().elements.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NE(states[i].lease, 0u);
    EXPECT_TRUE(AsString(states[i]) == socket_states.value().elements[i].str) << i;
  }
  ASSERT_TRUE(client.Release(LeasesOf(states)).ok());
  const uint32_t second[] = {1};
  ASSERT_TRUE(client.FetchLeaseState("ns", lease, second, states).ok());
  ASSERT_EQ(states.size(), 1u);
  EXPECT_TRUE(AsString(states[0]) == socket_states.value().elements[1].str);
  ASSERT_TRUE(client.Release(LeasesOf(states)).ok());
  EXPECT_TRUE(LeasesBecome(0));

  // RELEASE ends the prefix lease with the answer; the pieces keep every byte through the
  // blocks' drop, new blocks in their slots and the namespace's removal.
  std::vector<ShmView> rows;
  ASSERT_TRUE(client.FetchLeaseRows("ns", lease, 1, rows).ok());
  const std::string rows_before = Joined(rows);
  ASSERT_TRUE(client.FetchLeaseState("ns", lease, {}, states, true).ok());
  const std::string states_before = Joined(states);
  EXPECT_EQ(LFetchOverSocket(client, {"ns", lease_text, "STATE"}).status().message(),
            "ERR unknown or expired prefix lease");
  auto dropped = client.Command({"KV.PREFIX.BDROP", "ns", "1", Hashes({'a'})});
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_EQ(dropped.value().integer, 1);
  ASSERT_NO_FATAL_FAILURE(
      StoreBlocks(client, "ns", std::string(16, '\0'), Hashes({'d', 'e', 'f'}), 300));
  auto other = client.Command({"SSM.PREFIX.CKPT.STORE", "ns", std::string(16, 'f'), "48",
                               std::string(16, 'f'), "0", Pattern(kStateBytes, 301), "1",
                               Pattern(kStateBytes, 302)});
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_TRUE(Joined(rows) == rows_before) << "new blocks were written into leased pages";
  EXPECT_TRUE(Joined(states) == states_before) << "a leased state changed";
  ASSERT_TRUE(client.Command({"DEL", "ns"}).ok());
  EXPECT_TRUE(Joined(rows) == rows_before);
  EXPECT_TRUE(Joined(states) == states_before);
  for (const ShmView& p : rows) EXPECT_TRUE(client.Valid(p));
  for (const ShmView& p : states) EXPECT_TRUE(client.Valid(p));
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), on_heap ? 1u : 2u) << "one lease per call";
  ASSERT_TRUE(client.Release(LeasesOf(rows)).ok());
  ASSERT_TRUE(client.Release(LeasesOf(states)).ok());
  EXPECT_TRUE(LeasesBecome(0));
}

TEST_F(ShmTest, PrefixLeaseSharedFetchAnswersLFetchsErrors) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  ASSERT_NO_FATAL_FAILURE(StorePrefix(client, "ns", "fp32", 210));
  const uint64_t lease = MatchLease(client, "ns");
  ASSERT_NE(lease, 0u);
  const std::string lease_text = std::to_string(lease);
  // Each request answers SHMLFETCH's error exactly as LFETCH answers it.
  const std::vector<std::vector<std::string>> wrong = {
      {"nosuch", lease_text, "ATTN", "0"},
      {"ns", "999999", "ATTN", "0"},
      {"ns", "999999", "STATE"},
      {"ns", "0", "ATTN", "0"},
      {"ns", lease_text, "ATTN", "2"},
      {"ns", lease_text, "ATTN", "0", "RANGE", "5", "70"},
      {"ns", lease_text, "ATTN", "0", "RANGE", "9", "5"},
      {"ns", lease_text, "ATTN", "0", "FMT", "F16"},
      {"ns", lease_text, "STATE", "LAYERS", "2"},
      {"ns", lease_text, "STATE", "LAYERS"},
      {"ns", lease_text, "BOTH"},
  };
  for (const auto& args : wrong) {
    auto socket = LFetchOverSocket(client, args);
    std::vector<std::string> shm_args = args;
    shm_args.insert(shm_args.begin(), "KV.PREFIX.SHMLFETCH");
    std::vector<std::string_view> views(shm_args.begin(), shm_args.end());
    auto shared = client.Command(views);
    ASSERT_FALSE(socket.ok()) << args[2] << " " << args[3];
    EXPECT_EQ(shared.status().message(), socket.status().message());
  }
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 0u);
  // An expired lease is gone for both.
  const uint64_t brief = MatchLease(client, "ns", "50");
  ASSERT_NE(brief, 0u);
  std::this_thread::sleep_for(150ms);
  std::vector<ShmView> pieces;
  EXPECT_EQ(client.FetchLeaseRows("ns", brief, 0, pieces).message(),
            "ERR unknown or expired prefix lease");
  EXPECT_EQ(client.FetchLeaseState("ns", brief, {}, pieces).message(),
            "ERR unknown or expired prefix lease");

  // Decoded tiers are refused; FMT NATIVE shares fp16 rows as stored, byte for byte.
  ASSERT_NO_FATAL_FAILURE(StorePrefix(client, "half", "fp16", 220));
  const uint64_t half_lease = MatchLease(client, "half");
  ASSERT_NE(half_lease, 0u);
  EXPECT_EQ(client.FetchLeaseRows("half", half_lease, 0, pieces).message(),
            "ERR KV.PREFIX.SHMLFETCH shares rows only as stored: this namespace's fp16 rows are "
            "decoded to fp32 (use KV.PREFIX.LFETCH, or FMT NATIVE for fp16/bf16)");
  ASSERT_TRUE(client.FetchLeaseRows("half", half_lease, 1, pieces, true).ok());
  auto native =
      LFetchOverSocket(client, {"half", std::to_string(half_lease), "ATTN", "1", "FMT", "NATIVE"});
  ASSERT_TRUE(native.ok());
  EXPECT_EQ(native.value().str.size(), 2 * kLeasedLength * kVDim * 2);
  EXPECT_TRUE(Joined(pieces) == native.value().str);
}

TEST_F(ShmTest, PrefixLeaseSharedFetchPastTheCapLeasesNothingAndKeepsThePrefixLease) {
  ASSERT_NO_FATAL_FAILURE(Start({"--shm-arenas", "yes", "--shm-max-leases", "0"}));
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  ASSERT_NO_FATAL_FAILURE(StorePrefix(client, "ns", "fp32", 230));
  const uint64_t lease = MatchLease(client, "ns");
  ASSERT_NE(lease, 0u);
  // No room for a lease: two states of 2 MiB (places everywhere) are refused, nothing is leased,
  // and RELEASE did not end the prefix lease.
  std::vector<ShmView> pieces;
  Status capped = client.FetchLeaseState("ns", lease, {}, pieces, true);
  EXPECT_EQ(capped.message(),
            "ERR this connection holds 0 SHM leases (shm-max-leases): SHM.RELEASE some first");
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 0u);
  auto still = LFetchOverSocket(client, {"ns", std::to_string(lease), "STATE"});
  ASSERT_TRUE(still.ok()) << "the refused fetch ended the prefix lease";
  // Room for one: both states in one call, one lease.
  ASSERT_TRUE(client.Command({"CONFIG", "SET", "shm-max-leases", "1"}).ok());
  std::vector<ShmView> states;
  ASSERT_TRUE(client.FetchLeaseState("ns", lease, {}, states).ok());
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(DistinctLeaseCount(states), 1u);
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 1u);
  // The rows: 8 pieces (the 6 blocks' leased when the pages are in an arena), refused while the
  // states' lease holds the one room, RELEASE or not; then one lease for all of them. Under a
  // sanitizer values below 1 MiB are malloc'd (common/bytes.cc): the blocks' rows then answer as
  // bytes and need no lease, so there is nothing to refuse.
  if (!ServerIsSanitized()) {
    EXPECT_EQ(client.FetchLeaseRows("ns", lease, 0, pieces).code(), StatusCode::kServerError);
    capped = client.FetchLeaseRows("ns", lease, 0, pieces, false, 0, ShmClient::kToLength, true);
    EXPECT_EQ(capped.code(), StatusCode::kServerError);
    EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 1u);
    EXPECT_TRUE(LFetchOverSocket(client, {"ns", std::to_string(lease), "ATTN", "0"}).ok());
  }
  ASSERT_TRUE(client.Release(LeasesOf(states)).ok());
  ASSERT_TRUE(client.FetchLeaseRows("ns", lease, 0, pieces).ok());
  EXPECT_EQ(pieces.size(), 8u);
  if (!PagesOnHeap(pieces)) {
    EXPECT_GE(LeasesOf(pieces).size(), 6u) << "every block's piece in an arena";
    EXPECT_EQ(DistinctLeaseCount(pieces), 1u);
    EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 1u);
  }
  auto socket = LFetchOverSocket(client, {"ns", std::to_string(lease), "ATTN", "0"});
  ASSERT_TRUE(socket.ok());
  EXPECT_TRUE(Joined(pieces) == socket.value().str);
}

// The client's mapping is its own: a view stays readable across a restart of the server. The
// new server's arenas are new memory whose generations no earlier server gave, so an old place
// checked against them fails.
TEST_F(ShmTest, ViewsOutliveARestartAndOldGenerationsFailAfterIt) {
  const std::vector<std::string> flags = {"--shm-arenas", "yes", "--appendonly", "no"};
  ASSERT_NO_FATAL_FAILURE(Start({"--shm-arenas", "yes"}));
  ShmClient before;
  ASSERT_NO_FATAL_FAILURE(Connect(before));
  const std::string value = Pattern(2 << 20, 80);
  ASSERT_NO_FATAL_FAILURE(Set(before, "k", value));
  ShmView old_view;
  ASSERT_TRUE(before.Get("k", old_view).ok());
  ASSERT_NE(old_view.lease, 0u);
  admin_.reset();
  server_.Stop();
  ASSERT_TRUE(server_.Restart({.flags = flags, .unix_socket = true}));
  EXPECT_TRUE(AsString(old_view) == value) << "the old mapping changed after the restart";

  ShmClient after;
  ASSERT_NO_FATAL_FAILURE(Connect(after));
  ASSERT_NO_FATAL_FAILURE(Set(after, "k", value));  // the same value, stored the same way
  ShmView new_view;
  ASSERT_TRUE(after.Get("k", new_view).ok());
  EXPECT_TRUE(AsString(new_view) == value);
  EXPECT_NE(new_view.generation, old_view.generation);
  EXPECT_FALSE(after.Valid(old_view)) << "an old place passed the new server's generation check";
  EXPECT_TRUE(after.Valid(new_view));
  // The old connection is gone: its leases went with the old server.
  EXPECT_FALSE(before.Command({"PING"}).ok());
}

TEST_F(ShmTest, LeaseCapGivesAClearErrorAndReleaseMakesRoom) {
  ASSERT_NO_FATAL_FAILURE(Start({"--shm-arenas", "yes", "--shm-max-leases", "3"}));
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  ASSERT_NO_FATAL_FAILURE(Set(client, "k", Pattern(1 << 20, 4)));
  std::vector<ShmView> views(3);
  for (ShmView& v : views) ASSERT_TRUE(client.Get("k", v).ok());
  ShmView refused;
  Status st = client.Get("k", refused);
  EXPECT_EQ(st.code(), StatusCode::kServerError);
  EXPECT_EQ(st.message(),
            "ERR this connection holds 3 SHM leases (shm-max-leases): SHM.RELEASE some first");
  // SHM.RELEASE counts the leases it ended: an unknown or repeated id is not one.
  const std::string id = std::to_string(views[0].lease);
  auto released = client.Command({"SHM.RELEASE", id, id, "999999"});
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(released.value().integer, 1);
  EXPECT_EQ(client.Command({"SHM.RELEASE", "0"}).status().message(),
            "ERR value is not an integer or out of range");
  EXPECT_TRUE(client.Get("k", refused).ok());
  // The cap follows CONFIG SET.
  ASSERT_TRUE(client.Command({"CONFIG", "SET", "shm-max-leases", "4"}).ok());
  ShmView fourth;
  EXPECT_TRUE(client.Get("k", fourth).ok());
}

TEST_F(ShmTest, LeasesEndWhenTheirTimeIsUp) {
  ASSERT_NO_FATAL_FAILURE(Start({"--shm-arenas", "yes", "--shm-lease-timeout", "300"}));
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  ASSERT_NO_FATAL_FAILURE(Set(client, "k", Pattern(1 << 20, 5)));
  ShmView view;
  ASSERT_TRUE(client.Get("k", view).ok());
  ASSERT_NO_FATAL_FAILURE(Set(client, "k", Pattern(1 << 20, 6)));
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 1u);
  // The client says nothing more; the server ends the lease by itself, and the region it held
  // (overwritten meanwhile) is freed: the view's generation no longer matches.
  EXPECT_TRUE(LeasesBecome(0));
  EXPECT_FALSE(client.Valid(view));
  auto released = client.Command({"SHM.RELEASE", std::to_string(view.lease)});
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(released.value().integer, 0);
}

TEST_F(ShmTest, AKilledClientsLeasesAreFreed) {
  ASSERT_NO_FATAL_FAILURE(Start());
  {
    ShmClient setter;
    ASSERT_NO_FATAL_FAILURE(Connect(setter));
    ASSERT_NO_FATAL_FAILURE(Set(setter, "k", Pattern(4 << 20, 7)));
  }
  const LeaseHolder holder = ForkLeaseHolder(server_.unix_socket_path(), "k", 5);
  ASSERT_GT(holder.pid, 0);
  const pid_t child = holder.pid;
  EXPECT_EQ(holder.held, 5);
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 5u);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(LeasesBecome(0)) << "a dead client's leases were kept";
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leased_bytes"), 0u);
}

TEST_F(ShmTest, ArenaDescriptorsOnlyRead) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto raw = RawConnection::Unix(server_.unix_socket_path());
  ASSERT_NE(raw, nullptr);
  std::string reply;
  std::vector<int> fds = RawHello(raw->fd(), &reply);
  ASSERT_FALSE(fds.empty()) << reply;
  EXPECT_TRUE(reply.starts_with("*" + std::to_string(fds.size()) + "\r\n")) << reply;
  const int fd = fds[0];
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  const size_t size = static_cast<size_t>(st.st_size);
  EXPECT_EQ(::fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
  // Writable shared mappings are refused, now and later.
  EXPECT_EQ(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
  EXPECT_EQ(errno, EACCES);
  void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  EXPECT_NE(::mprotect(mapped, 4096, PROT_READ | PROT_WRITE), 0);
  EXPECT_EQ(errno, EACCES);
  ::munmap(mapped, size);
  // Nor can the descriptor write, resize or punch holes; the size is sealed.
  EXPECT_LT(::write(fd, "x", 1), 0);
  EXPECT_NE(::ftruncate(fd, 0), 0);
  EXPECT_NE(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), 0);
  const int seals = ::fcntl(fd, F_GET_SEALS);
  EXPECT_EQ(seals & (F_SEAL_GROW | F_SEAL_SHRINK), F_SEAL_GROW | F_SEAL_SHRINK);
  // Re-opening it for writing needs write permission on the memory, which only the server's
  // uid has (mode 0400); root passes every permission check, so this holds for other users.
  EXPECT_EQ(st.st_mode & 0777, 0400u);
  if (::geteuid() != 0 && ::geteuid() != st.st_uid) {
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    EXPECT_LT(::open(self.c_str(), O_RDWR), 0);
  }
  for (int f : fds) ::close(f);
  // A second SHM.HELLO passes only arenas made since: none.
  EXPECT_EQ(raw->Call(Multibulk({"SHM.HELLO"})), "*0\r\n");
}

TEST_F(ShmTest, UidNotAllowedIsRefused) {
  const uint32_t other = ::geteuid() + 1;
  ASSERT_NO_FATAL_FAILURE(
      Start({"--shm-arenas", "yes", "--shm-allow-uids", std::to_string(other)}));
  auto raw = RawConnection::Unix(server_.unix_socket_path());
  ASSERT_NE(raw, nullptr);
  const std::string refused = "-ERR uid " + std::to_string(::geteuid()) +
                              " may not map the shared arenas (shm-allow-uids)\r\n";
  std::string reply;
  std::vector<int> fds = RawHello(raw->fd(), &reply);
  EXPECT_TRUE(fds.empty()) << "a refused peer got descriptors";
  EXPECT_EQ(reply, refused);
  EXPECT_EQ(raw->Call(Multibulk({"SHM.GET", "k"})), "-ERR send SHM.HELLO first\r\n");
  EXPECT_EQ(raw->Call(Multibulk({"SHM.RELEASE", "1"})), "-ERR send SHM.HELLO first\r\n");
  // An empty list allows nobody; a malformed one is refused; "self" is the server's uid.
  EXPECT_EQ(raw->Call(Multibulk({"CONFIG", "SET", "shm-allow-uids", ""})), "+OK\r\n");
  EXPECT_EQ(raw->Call(Multibulk({"SHM.HELLO"})), refused);
  EXPECT_NE(raw->Call(Multibulk({"CONFIG", "SET", "shm-allow-uids", "12,x"})).find("-ERR"),
            std::string::npos);
  EXPECT_EQ(raw->Call(Multibulk({"CONFIG", "SET", "shm-allow-uids", "5, self"})), "+OK\r\n");
  ShmClient allowed;
  EXPECT_TRUE(allowed.Connect(server_.unix_socket_path()).ok());
}

TEST_F(ShmTest, OnlyAfterAuthentication) {
  ASSERT_NO_FATAL_FAILURE(Start({"--shm-arenas", "yes", "--requirepass", "s3cret"}));
  auto raw = RawConnection::Unix(server_.unix_socket_path());
  ASSERT_NE(raw, nullptr);
  std::string reply;
  std::vector<int> fds = RawHello(raw->fd(), &reply);
  EXPECT_TRUE(fds.empty()) << "an unauthenticated client got descriptors";
  EXPECT_EQ(reply, "-NOAUTH Authentication required.\r\n");
  ShmClient without;
  EXPECT_EQ(without.Connect(server_.unix_socket_path()).code(), StatusCode::kServerError);
  ShmClient with;
  Status st = with.Connect(server_.unix_socket_path(), "s3cret");
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_GE(with.arena_count(), 1u);
}

TEST_F(ShmTest, TcpPortRefusesShmCommands) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto tcp = RawConnection::Tcp(server_.port());
  ASSERT_NE(tcp, nullptr);
  const std::string refused = "-ERR SHM commands are served on the unix socket only\r\n";
  EXPECT_EQ(tcp->Call(Multibulk({"SHM.HELLO"})), refused);
  EXPECT_EQ(tcp->Call(Multibulk({"SHM.GET", "k"})), refused);
  EXPECT_EQ(tcp->Call(Multibulk({"SHM.RELEASE", "1"})), refused);
  EXPECT_EQ(tcp->Call(Multibulk({"SSM.PREFIX.SHMFETCH", "s", "0"})), refused);
  EXPECT_EQ(tcp->Call(Multibulk({"V.SHMFETCH", "v", "0", "RANGE", "0", "1"})), refused);
  EXPECT_EQ(tcp->Call(Multibulk({"KV.PREFIX.SHMBFETCH", "ns", "1", std::string(16, 'a'), "0"})),
            refused);
  EXPECT_EQ(tcp->Call(Multibulk({"KV.PREFIX.SHMLFETCH", "ns", "1", "ATTN", "0"})), refused);
  EXPECT_EQ(tcp->Call(Multibulk({"KV.PREFIX.SHMLFETCH", "ns", "1", "STATE"})), refused);
}

// --- One lease per call, and the cap at its limit ---

// shm-max-leases counts calls, whatever their pieces: N calls of 6 pieces each fit a cap of N,
// call N+1 is refused and leases nothing; SHM.RELEASE of a call's id (named twice) ends its one
// lease and makes room.
TEST_F(ShmTest, TheLeaseCapCountsCallsNotPieces) {
  ASSERT_NO_FATAL_FAILURE(Start({"--shm-arenas", "yes", "--shm-max-leases", "3"}));
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  ASSERT_NO_FATAL_FAILURE(MakeNamespace(client, "ns"));
  const std::string hashes = Hashes({'a', 'b', 'c'});
  ASSERT_NO_FATAL_FAILURE(StoreBlocks(client, "ns", std::string(16, '\0'), hashes, 400));
  const std::string socket = BlocksOverSocket(client, "ns", hashes, "0");
  std::vector<std::vector<ShmView>> calls(3);
  for (auto& pieces : calls) {
    Status st = client.FetchBlocks("ns", hashes, 0, pieces);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(pieces.size(), 6u);
    EXPECT_TRUE(Joined(pieces) == socket);
  }
  if (PagesOnHeap(calls[0])) {
    GTEST_SKIP() << "this sanitized server keeps the small namespace's pages on the heap";
  }
  for (const auto& pieces : calls) {
    EXPECT_EQ(LeasesOf(pieces).size(), 6u) << "6 pieces, more than the cap";
    EXPECT_EQ(DistinctLeaseCount(pieces), 1u) << "one lease per call";
  }
  EXPECT_NE(calls[0][0].lease, calls[1][0].lease);
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 3u);
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leased_bytes"), uint64_t{3} * 6 * kHalf);
  std::vector<ShmView> fourth;
  Status capped = client.FetchBlocks("ns", hashes, 0, fourth);
  EXPECT_EQ(capped.message(),
            "ERR this connection holds 3 SHM leases (shm-max-leases): SHM.RELEASE some first");
  EXPECT_TRUE(fourth.empty());
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 3u);
  // The same id twice in one SHM.RELEASE, and again: one lease was live.
  const std::string id = std::to_string(calls[0][0].lease);
  auto released = client.Command({"SHM.RELEASE", id, id});
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(released.value().integer, 1);
  EXPECT_EQ(client.Command({"SHM.RELEASE", id}).value().integer, 0);
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 2u);
  ASSERT_TRUE(client.FetchBlocks("ns", hashes, 0, fourth).ok());
  EXPECT_TRUE(Joined(fourth) == socket);
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 3u);
  // The client's Release names each distinct id once: the other calls' leases end, 0 left.
  std::vector<uint64_t> all = LeasesOf(calls[1]);
  for (uint64_t lease : LeasesOf(calls[2])) all.push_back(lease);
  for (uint64_t lease : LeasesOf(fourth)) all.push_back(lease);
  ASSERT_TRUE(client.Release(all).ok());
  EXPECT_TRUE(LeasesBecome(0));
}

// --- CHECKSUM on the piece forms ---

std::string Xxh3Hex(std::string_view bytes) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(bytes.data(), bytes.size())));
  return std::string(hex, 16);
}

// A piece form's raw reply (an array of places and bytes, or of nils and places): for every
// place, whether its checksum slot is nil, and its lease (released by the caller).
struct RawPlaces {
  size_t places = 0, nil_checksums = 0;
  std::vector<std::string> checksums;  // of the places that have one, in order
  std::vector<uint64_t> leases;
};
RawPlaces PlacesOf(const Reply& reply) {
  RawPlaces out;
  for (const Reply& piece : reply.elements) {
    if (piece.type != Reply::Type::kArray || piece.elements.size() != 6) continue;
    ++out.places;
    if (piece.elements[4].is_nil()) {
      ++out.nil_checksums;
    } else {
      out.checksums.push_back(piece.elements[4].str);
    }
    out.leases.push_back(static_cast<uint64_t>(piece.elements[5].integer));
  }
  return out;
}

// Each leased view's checksum (the client checked it against the mapped bytes on arrival) is the
// XXH3-64 of its bytes, and the raw reply of the same request with CHECKSUM carries the same
// figures; without CHECKSUM every place's checksum slot is nil.
void ExpectChecksums(ShmClient& client, const std::vector<ShmView>& checked,
                     const std::vector<ShmView>& plain, std::vector<std::string> request) {
  size_t places = 0;
  std::vector<std::string> expected;
  for (const ShmView& v : checked) {
    if (v.lease == 0) {
      EXPECT_TRUE(v.checksum.empty()) << "a piece answered as bytes has no checksum";
      continue;
    }
    ++places;
    EXPECT_EQ(v.checksum, Xxh3Hex(AsString(v)));
    expected.push_back(v.checksum);
  }
  for (const ShmView& v : plain) EXPECT_TRUE(v.checksum.empty());
  std::vector<std::string_view> args(request.begin(), request.end());
  auto without = client.Command(args);
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  const RawPlaces none = PlacesOf(without.value());
  EXPECT_EQ(none.places, places);
  EXPECT_EQ(none.nil_checksums, none.places) << "a checksum came without CHECKSUM";
  request.push_back("CHECKSUM");
  args.assign(request.begin(), request.end());
  auto with = client.Command(args);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  const RawPlaces some = PlacesOf(with.value());
  EXPECT_EQ(some.nil_checksums, 0u);
  EXPECT_EQ(some.checksums, expected);
  std::vector<uint64_t> leases = none.leases;
  leases.insert(leases.end(), some.leases.begin(), some.leases.end());
  ASSERT_TRUE(client.Release(leases).ok());
}

TEST_F(ShmTest, PieceFormsAnswerChecksumsOnlyWhenAsked) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  // SSM layers of 1 MiB and more: places everywhere.
  const std::string conv = Pattern((1 << 20) + 96, 500), ssm = Pattern(2 << 20, 501);
  ASSERT_TRUE(client.Command({"SSM.PREFIX.MSTORE", "s", "0", conv, "1", ssm}).ok());
  const std::vector<uint32_t> layers = {1, 0, 5};
  std::vector<ShmView> checked, plain;
  Status st = client.FetchLayers("s", layers, checked, /*checksum=*/true);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(checked.size(), 3u);
  EXPECT_TRUE(AsString(checked[0]) == ssm && AsString(checked[1]) == conv);
  EXPECT_EQ(checked[0].checksum, Xxh3Hex(ssm));
  EXPECT_EQ(checked[1].checksum, Xxh3Hex(conv));
  ASSERT_TRUE(client.FetchLayers("s", layers, plain).ok());
  ASSERT_NO_FATAL_FAILURE(
      ExpectChecksums(client, checked, plain, {"SSM.PREFIX.SHMFETCH", "s", "1", "0", "5"}));
  ASSERT_TRUE(client.Release(LeasesOf(checked)).ok());
  ASSERT_TRUE(client.Release(LeasesOf(plain)).ok());

  // V-store rows over two chunks and past the length (a zero run), as stored and FMT NATIVE.
  ASSERT_TRUE(client.Command({"V.CREATE", "v", std::to_string(kVDim), "VQUANT", "fp32"}).ok());
  ASSERT_NO_FATAL_FAILURE(StoreRows(client, "v", 0, 128, 502));
  for (const bool native : {false, true}) {
    SCOPED_TRACE(native ? "FMT NATIVE" : "as stored");
    st = client.FetchRows("v", 0, 0, 160, checked, native, /*checksum=*/true);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(Joined(checked) == FetchedOverSocket(client, "v", 0, 160, native));
    ASSERT_TRUE(client.FetchRows("v", 0, 0, 160, plain, native).ok());
    std::vector<std::string> request = {"V.SHMFETCH", "v", "0", "RANGE", "0", "160"};
    if (native) request.insert(request.end(), {"FMT", "NATIVE"});
    ASSERT_NO_FATAL_FAILURE(ExpectChecksums(client, checked, plain, request));
    ASSERT_TRUE(client.Release(LeasesOf(checked)).ok());
    ASSERT_TRUE(client.Release(LeasesOf(plain)).ok());
  }

  // Prefix-index blocks, and a leased prefix's rows and states.
  ASSERT_NO_FATAL_FAILURE(StorePrefix(client, "ns", "fp32", 510));
  const std::string hashes = Hashes({'a', 'b', 'c'});
  ASSERT_TRUE(client.FetchBlocks("ns", hashes, 1, checked, false, /*checksum=*/true).ok());
  EXPECT_TRUE(Joined(checked) == BlocksOverSocket(client, "ns", hashes, "1"));
  ASSERT_TRUE(client.FetchBlocks("ns", hashes, 1, plain).ok());
  ASSERT_NO_FATAL_FAILURE(
      ExpectChecksums(client, checked, plain, {"KV.PREFIX.SHMBFETCH", "ns", "3", hashes, "1"}));
  ASSERT_TRUE(client.Release(LeasesOf(checked)).ok());
  ASSERT_TRUE(client.Release(LeasesOf(plain)).ok());
  const uint64_t lease = MatchLease(client, "ns");
  ASSERT_NE(lease, 0u);
  const std::string lease_text = std::to_string(lease);
  st = client.FetchLeaseRows("ns", lease, 0, checked, false, 0, ShmClient::kToLength, false,
                             /*checksum=*/true);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto socket = LFetchOverSocket(client, {"ns", lease_text, "ATTN", "0"});
  ASSERT_TRUE(socket.ok());
  EXPECT_TRUE(Joined(checked) == socket.value().str);
  ASSERT_TRUE(client.FetchLeaseRows("ns", lease, 0, plain).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectChecksums(client, checked, plain,
                                          {"KV.PREFIX.SHMLFETCH", "ns", lease_text, "ATTN", "0"}));
  ASSERT_TRUE(client.Release(LeasesOf(checked)).ok());
  ASSERT_TRUE(client.Release(LeasesOf(plain)).ok());
  ASSERT_TRUE(client.FetchLeaseState("ns", lease, {}, checked, false, /*checksum=*/true).ok());
  ASSERT_EQ(checked.size(), 2u);
  for (const ShmView& v : checked) EXPECT_EQ(v.checksum, Xxh3Hex(AsString(v)));
  ASSERT_TRUE(client.FetchLeaseState("ns", lease, {}, plain).ok());
  ASSERT_NO_FATAL_FAILURE(
      ExpectChecksums(client, checked, plain, {"KV.PREFIX.SHMLFETCH", "ns", lease_text, "STATE"}));
  ASSERT_TRUE(client.Release(LeasesOf(checked)).ok());
  ASSERT_TRUE(client.Release(LeasesOf(plain)).ok());
  // CHECKSUM and RELEASE end a SHMLFETCH in either order; the prefix lease ends with the second.
  auto first = client.Command(
      {"KV.PREFIX.SHMLFETCH", "ns", lease_text, "STATE", "LAYERS", "1", "RELEASE", "CHECKSUM"});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(PlacesOf(first.value()).checksums.size(), 1u);
  ASSERT_TRUE(client.Release(PlacesOf(first.value()).leases).ok());
  EXPECT_EQ(LFetchOverSocket(client, {"ns", lease_text, "STATE"}).status().message(),
            "ERR unknown or expired prefix lease");
  EXPECT_TRUE(LeasesBecome(0));
}

TEST_F(ShmTest, TheChecksumOptionIsParsedWhereItStandsOnly) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  ASSERT_TRUE(client.Command({"SSM.PREFIX.STORE", "s", "0", Pattern(1 << 20, 520)}).ok());
  ASSERT_TRUE(client.Command({"V.CREATE", "v", std::to_string(kVDim), "VQUANT", "fp32"}).ok());
  ASSERT_NO_FATAL_FAILURE(StoreRows(client, "v", 0, 16, 521));
  ASSERT_NO_FATAL_FAILURE(StorePrefix(client, "ns", "fp32", 522));
  const uint64_t lease = MatchLease(client, "ns");
  ASSERT_NE(lease, 0u);
  const std::string lease_text = std::to_string(lease), hashes = Hashes({'a'});
  const std::string syntax = "ERR syntax error";
  const auto error = [&](std::vector<std::string_view> args) {
    auto r = client.Command(args);
    return r.ok() ? std::string("(no error)") : r.status().message();
  };
  // Not a layer: it needs one before it.
  EXPECT_EQ(error({"SSM.PREFIX.SHMFETCH", "s", "CHECKSUM"}).find("ERR"), 0u);
  EXPECT_NE(error({"SSM.PREFIX.SHMFETCH", "s", "CHECKSUM", "0"}), "(no error)");
  // After FMT NATIVE only, once.
  EXPECT_NE(error({"V.SHMFETCH", "v", "0", "RANGE", "0", "16", "CHECKSUM", "FMT", "NATIVE"}),
            "(no error)");
  EXPECT_NE(error({"V.SHMFETCH", "v", "0", "RANGE", "0", "16", "CHECKSUM", "CHECKSUM"}),
            "(no error)");
  EXPECT_EQ(error({"KV.PREFIX.SHMBFETCH", "ns", "1", hashes, "0", "CHECKSUM", "FMT", "NATIVE"}),
            syntax);
  EXPECT_EQ(error({"KV.PREFIX.SHMBFETCH", "ns", "1", hashes, "0", "CHECKSUM", "CHECKSUM"}), syntax);
  EXPECT_EQ(error({"KV.PREFIX.SHMLFETCH", "ns", lease_text, "ATTN", "0", "CHECKSUM", "CHECKSUM"}),
            syntax);
  EXPECT_EQ(error({"KV.PREFIX.SHMLFETCH", "ns", lease_text, "STATE", "CHECKSUM", "LAYERS", "0"}),
            syntax);
  // The socket forms have no checksum to give: LFETCH and BFETCH refuse it.
  EXPECT_EQ(error({"KV.PREFIX.LFETCH", "ns", lease_text, "ATTN", "0", "CHECKSUM"}), syntax);
  EXPECT_EQ(error({"KV.PREFIX.BFETCH", "ns", "1", hashes, "0", "CHECKSUM"}), syntax);
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 0u);
  // Lower case is the same word.
  auto lower = client.Command({"V.SHMFETCH", "v", "0", "RANGE", "0", "16", "checksum"});
  ASSERT_TRUE(lower.ok()) << lower.status().ToString();
  ASSERT_EQ(lower.value().elements.size(), 1u);
  const Reply& piece = lower.value().elements[0];
  if (piece.type == Reply::Type::kArray) {
    EXPECT_EQ(piece.elements[4].str.size(), 16u);
    ASSERT_TRUE(client.Release(PlacesOf(lower.value()).leases).ok());
  }
}

// Arenas are on by default: a server started with no flags hands them over and lends a large
// value that arrived over the socket (its generation stamped once its last byte came).
TEST_F(ShmTest, ArenasAreOnByDefault) {
  ASSERT_NO_FATAL_FAILURE(Start({}));
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  const std::string value = Pattern(size_t{3} << 20, 11);
  ASSERT_NO_FATAL_FAILURE(Set(client, "big", value));
  ShmView view;
  ASSERT_TRUE(client.Get("big", view).ok());
  EXPECT_NE(view.lease, 0u) << "a 3 MiB value read over the socket lies in an arena";
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(view.bytes().data()), view.size), value);
  EXPECT_GT(view.generation, 0u);
}

// Where no arena can be made (here an address-space limit below an arena's room), the default
// does not stop the server: it warns, serves values as bytes and SHM.HELLO says the arenas are
// off.
TEST_F(ShmTest, NoArenaUnderAnAddressSpaceLimitIsAWarning) {
  if (ServerIsSanitized()) GTEST_SKIP() << "an address-space limit and shadow memory do not mix";
  ServerProcess::Options options{.flags = {"--appendonly", "no"}, .unix_socket = true};
  options.launcher = {"/usr/bin/prlimit", "--as=536870912", "--"};
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  auto raw = RawConnection::Unix(server_.unix_socket_path());
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(raw->Call(Multibulk({"SHM.HELLO"})),
            "-ERR shared arenas are off (start the server with --shm-arenas yes)\r\n");
  const std::string value = Pattern(size_t{4} << 20, 12);
  EXPECT_EQ(raw->Call(Multibulk({"SET", "big", value})), "+OK\r\n");
  EXPECT_EQ(raw->Call(Multibulk({"GET", "big"}), Millis(20000)),
            "$" + std::to_string(value.size()) + "\r\n" + value + "\r\n");
  std::ifstream log(server_.log_path());
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("running without shared arenas"), std::string::npos) << text;
}

TEST_F(ShmTest, ArenasOffIsAClearError) {
  ASSERT_NO_FATAL_FAILURE(Start({"--shm-arenas", "no"}));
  auto raw = RawConnection::Unix(server_.unix_socket_path());
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(raw->Call(Multibulk({"SHM.HELLO"})),
            "-ERR shared arenas are off (start the server with --shm-arenas yes)\r\n");
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_arenas"), 0u);
}

}  // namespace
}  // namespace prefixd::it
