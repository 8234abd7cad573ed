// The shared forms of the multi-piece fetches against the real server over its real unix socket:
// V.SHMFETCH ... BATCH (every layer of V.FETCH BATCH, one lease for the call) and
// SSM.PREFIX.CKPT.SHMFETCH (a checkpoint's blobs), each compared byte for byte with the socket
// form's answer, with their refusals (before SHM.HELLO, a key of another type, a missing key, the
// lease cap); and COMMAND GETKEYS seeing the keys of the command SHM.CALL carries.
#include <algorithm>
#include <string>
#include <vector>

#include "integration/server_fixture.h"
#include "prefixd/client.h"
#include "prefixd/shm.h"

namespace prefixd::it {
namespace {

// 1024 fp32 values a row (4 KiB): 64 rows a chunk (256 KiB, an arena region).
constexpr size_t kDim = 1024, kRow = kDim * 4;
// Checkpoint blobs of 2 MiB: in an arena even where a sanitized server keeps smaller buffers on
// the heap.
constexpr size_t kBlobBytes = size_t{2} << 20;

std::string AsString(const ShmView& view) {
  return {reinterpret_cast<const char*>(view.data), view.size};
}

std::string Joined(const std::vector<ShmView>& pieces) {
  std::string out;
  for (const ShmView& p : pieces) out += AsString(p);
  return out;
}

// The distinct leases of the pieces of every layer.
std::vector<uint64_t> Leases(const std::vector<std::vector<ShmView>>& layers) {
  std::vector<uint64_t> ids;
  for (const auto& pieces : layers) {
    for (const ShmView& p : pieces) {
      if (p.lease != 0) ids.push_back(p.lease);
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::vector<uint64_t> Leases(const std::vector<ShmView>& pieces) {
  return Leases(std::vector<std::vector<ShmView>>{pieces});
}

class ShmFetchTest : public ServerTest {
 protected:
  void Start(std::vector<std::string> flags = {}) {
    flags.insert(flags.end(), {"--shm-arenas", "yes", "--appendonly", "no"});
    ASSERT_NO_FATAL_FAILURE(StartServer({.flags = flags, .unix_socket = true}));
    admin_ = ConnectHiredis(server_.port());
    ASSERT_NE(admin_, nullptr);
    Status st = client_.Connect(server_.unix_socket_path());
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  // The same request's error over the shared form and the socket form, both expected.
  void ExpectSameError(std::vector<std::string> shared, std::vector<std::string> socket) {
    std::vector<std::string_view> a(shared.begin(), shared.end()), b(socket.begin(), socket.end());
    auto ours = client_.Command(a);
    auto theirs = client_.Command(b);
    ASSERT_FALSE(theirs.ok()) << "the socket form answered " << socket[0];
    ASSERT_FALSE(ours.ok()) << "the shared form answered " << shared[0];
    EXPECT_EQ(ours.status().message(), theirs.status().message()) << shared[0];
  }
  Result<Reply> Call(std::vector<std::string> words) {
    std::vector<std::string_view> args(words.begin(), words.end());
    return client_.Command(args);
  }
  // Writes `count` rows of a pattern at `start` of `layer`.
  void StoreRows(const std::string& sid, uint32_t layer, uint64_t start, uint64_t count,
                 uint64_t seed, const std::string& fmt = "F32", size_t row = kRow) {
    auto r = Call({"V.STOREBATCH", sid, std::to_string(layer), std::to_string(start),
                   std::to_string(count), Pattern(count * row, seed), "FMT", fmt});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  // V.FETCH BATCH's answer over the same socket: one bulk (or nil) per layer.
  Reply SocketBatch(const std::string& sid, std::vector<std::string> options) {
    std::vector<std::string> words{"V.FETCH", sid, "BATCH"};
    words.insert(words.end(), options.begin(), options.end());
    auto r = Call(words);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : Reply{};
  }
  // Whether every layer's shared answer is the socket's: the same count, nil where nil, and
  // each layer's pieces joined equal to its bulk.
  void ExpectSameLayers(const std::vector<std::vector<ShmView>>& shared, const Reply& socket) {
    ASSERT_EQ(socket.type, Reply::Type::kArray);
    ASSERT_EQ(shared.size(), socket.elements.size());
    for (size_t i = 0; i < shared.size(); ++i) {
      SCOPED_TRACE("layer " + std::to_string(i));
      if (socket.elements[i].is_nil()) {
        EXPECT_TRUE(shared[i].empty());
        continue;
      }
      const std::string joined = Joined(shared[i]);
      EXPECT_EQ(joined.size(), socket.elements[i].str.size());
      EXPECT_TRUE(joined == socket.elements[i].str) << "the shared rows differ from V.FETCH's";
    }
  }
  // Whether V-store chunks lie outside the arenas (a sanitized server keeps buffers below 1 MiB
  // on the heap and answers their bytes): only a sanitized server may.
  bool ChunksOnHeap(const std::vector<std::vector<ShmView>>& layers) {
    return Leases(layers).empty() && ServerIsSanitized();
  }
  RedisContext admin_;
  ShmClient client_;
};

// --- V.SHMFETCH ... BATCH ---

// Layer 0 over two chunks and a gap, layer 1 empty, layer 2 short: every BATCH form answers
// V.FETCH BATCH's bytes, each layer in its pieces, all under one lease.
TEST_F(ShmFetchTest, VBatchEveryByteAsVFetchBatchUnderOneLease) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(Call({"V.CREATE", "v", std::to_string(kDim), "VQUANT", "fp32"}).ok());
  ASSERT_NO_FATAL_FAILURE(StoreRows("v", 0, 0, 100, 1));
  ASSERT_NO_FATAL_FAILURE(StoreRows("v", 0, 140, 40, 2));
  ASSERT_NO_FATAL_FAILURE(StoreRows("v", 2, 0, 70, 3));
  struct Case {
    uint64_t start, end;
    uint32_t layers;  // 0: the default, through the highest stored layer
  };
  const Case cases[] = {{0, 180, 0},  {5, 50, 0},  {40, 150, 0}, {100, 140, 0},
                        {60, 300, 0}, {0, 180, 1}, {0, 180, 5}};
  bool on_heap = false;
  for (const Case& c : cases) {
    SCOPED_TRACE("BATCH " + std::to_string(c.start) + " " + std::to_string(c.end) + " " +
                 std::to_string(c.layers));
    std::vector<std::vector<ShmView>> layers;
    Status st = client_.FetchBatch("v", c.start, c.end, layers, c.layers);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::vector<std::string> options{std::to_string(c.start), std::to_string(c.end)};
    if (c.layers != 0) options.push_back(std::to_string(c.layers));
    const Reply socket = SocketBatch("v", options);
    ASSERT_NO_FATAL_FAILURE(ExpectSameLayers(layers, socket));
    EXPECT_EQ(layers.size(), c.layers == 0 ? 3u : c.layers);
    if (layers.size() > 1) EXPECT_TRUE(layers[1].empty()) << "layer 1 has no tokens: nil";
    if (&c == &cases[0]) on_heap = ChunksOnHeap(layers);
    EXPECT_EQ(Leases(layers).size(), on_heap ? 0u : 1u) << "one lease for the whole call";
    for (const auto& pieces : layers) {
      for (const ShmView& p : pieces) {
        EXPECT_EQ(p.size % kRow, 0u) << "a piece of part of a row";
        if (p.lease != 0) EXPECT_TRUE(client_.Valid(p));
        if (p.zeros) EXPECT_EQ(p.lease, 0u);
      }
    }
    ASSERT_TRUE(client_.Release(Leases(layers)).ok());
  }
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 0u);

  // CHECKSUM: every place carries its XXH3-64, checked by the client on arrival.
  std::vector<std::vector<ShmView>> checked;
  Status st = client_.FetchBatch("v", 0, 180, checked, 0, false, /*checksum=*/true);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_NO_FATAL_FAILURE(ExpectSameLayers(checked, SocketBatch("v", {"0", "180"})));
  for (const auto& pieces : checked) {
    for (const ShmView& p : pieces) {
      if (p.lease != 0) EXPECT_EQ(p.checksum.size(), 16u);
    }
  }
  if (!on_heap) {
    // The leased rows outlive an overwrite and the session's drop.
    const std::string before = Joined(checked[0]) + Joined(checked[2]);
    ASSERT_NO_FATAL_FAILURE(StoreRows("v", 0, 0, 100, 9));
    ASSERT_EQ(Call({"V.DROP", "v"}).value().integer, 1);
    EXPECT_TRUE(Joined(checked[0]) + Joined(checked[2]) == before);
    for (const auto& pieces : checked) {
      for (const ShmView& p : pieces) EXPECT_TRUE(client_.Valid(p));
    }
  }
  ASSERT_TRUE(client_.Release(Leases(checked)).ok());
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 0u);
}

// fp16 rows go as stored with FMT NATIVE (V.FETCH BATCH ... FMT NATIVE's bytes); without it they
// would be decoded, which the shared form refuses as RANGE does.
TEST_F(ShmFetchTest, VBatchNativeRowsAsStoredDecodedRefused) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_TRUE(Call({"V.CREATE", "h", std::to_string(kDim), "VQUANT", "fp16"}).ok());
  ASSERT_NO_FATAL_FAILURE(StoreRows("h", 0, 0, 90, 20, "F16", kDim * 2));
  ASSERT_NO_FATAL_FAILURE(StoreRows("h", 1, 10, 30, 21, "F16", kDim * 2));
  std::vector<std::vector<ShmView>> layers;
  Status decoded = client_.FetchBatch("h", 0, 90, layers);
  EXPECT_EQ(decoded.message(),
            "ERR V.SHMFETCH shares rows only as stored: this session's fp16 rows are decoded to "
            "fp32 (use V.FETCH, or FMT NATIVE for fp16/bf16)");
  EXPECT_TRUE(layers.empty());
  Status native = client_.FetchBatch("h", 3, 77, layers, 0, /*native=*/true, /*checksum=*/true);
  ASSERT_TRUE(native.ok()) << native.ToString();
  ASSERT_NO_FATAL_FAILURE(ExpectSameLayers(layers, SocketBatch("h", {"3", "77", "FMT", "NATIVE"})));
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(Joined(layers[0]).size(), 74 * kDim * 2);
  ASSERT_TRUE(client_.Release(Leases(layers)).ok());
  // The layer count and the options in every order the socket form takes them.
  native = client_.FetchBatch("h", 0, 90, layers, 1, /*native=*/true);
  ASSERT_TRUE(native.ok()) << native.ToString();
  ASSERT_NO_FATAL_FAILURE(
      ExpectSameLayers(layers, SocketBatch("h", {"0", "90", "1", "FMT", "NATIVE"})));
  ASSERT_TRUE(client_.Release(Leases(layers)).ok());
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 0u);
}

// Every refusal: the socket form's error where it has one, word for word; the shared path's own
// (SHM.HELLO first, the cap) where it has not.
TEST_F(ShmFetchTest, VBatchRefusals) {
  ASSERT_NO_FATAL_FAILURE(Start({"--shm-max-leases", "1"}));
  ASSERT_TRUE(Call({"V.CREATE", "v", std::to_string(kDim), "VQUANT", "fp32"}).ok());
  ASSERT_NO_FATAL_FAILURE(StoreRows("v", 0, 0, 100, 30));
  ASSERT_TRUE(Call({"SET", "str", "x"}).ok());
  ASSERT_TRUE(Call({"V.CREATE", "empty", std::to_string(kDim), "VQUANT", "fp32"}).ok());
  const std::vector<std::vector<std::string>> wrong = {
      {"nosuch", "BATCH", "0", "10"},            // a missing session
      {"str", "BATCH", "0", "10"},               // a key of another type
      {"empty", "BATCH", "0", "10"},             // no layer stored
      {"v", "BATCH", "10", "10"},                // an empty range
      {"v", "BATCH", "-1", "10"},                // a negative start
      {"v", "BATCH", "0", "99999999999"},        // past vstore-max-tokens
      {"v", "BATCH", "0", "10", "0"},            // no layer asked for
      {"v", "BATCH", "0", "10", "x"},            // not a count
      {"v", "BATCH", "0", "10", "FMT", "F16"},   // an unknown format
      {"v", "BATCH", "0", "10", "2", "NATIVE"},  // an unknown option
      {"v", "BATCH", "0", "10", "1", "FMT"},     // FMT without its word
  };
  for (const auto& args : wrong) {
    std::vector<std::string> shared = args, socket = args;
    shared.insert(shared.begin(), "V.SHMFETCH");
    socket.insert(socket.begin(), "V.FETCH");
    SCOPED_TRACE(args[0] + " " + args[1] + " " + args[2]);
    ASSERT_NO_FATAL_FAILURE(ExpectSameError(shared, socket));
  }
  EXPECT_NE(Call({"V.SHMFETCH", "str", "BATCH", "0", "10"}).status().message().find("WRONGTYPE"),
            std::string::npos);
  // One argument short, BATCH's or RANGE's: the arity error, in the shared command's name.
  const std::string arity = "ERR wrong number of arguments for 'v.shmfetch' command";
  EXPECT_EQ(Call({"V.SHMFETCH", "v", "BATCH", "0"}).status().message(), arity);
  EXPECT_EQ(Call({"V.SHMFETCH", "v", "0", "RANGE", "0"}).status().message(), arity);
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 0u);

  // The cap: one call holds the one lease, the next is refused and leases nothing; a release
  // makes room again.
  std::vector<std::vector<ShmView>> held, refused;
  ASSERT_TRUE(client_.FetchBatch("v", 0, 100, held).ok());
  if (!ChunksOnHeap(held)) {
    EXPECT_EQ(client_.FetchBatch("v", 0, 100, refused).message(),
              "ERR this connection holds 1 SHM leases (shm-max-leases): SHM.RELEASE some first");
    EXPECT_TRUE(refused.empty());
    EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 1u);
    ASSERT_TRUE(client_.Release(Leases(held)).ok());
    ASSERT_TRUE(client_.FetchBatch("v", 0, 100, held).ok());
    EXPECT_EQ(Leases(held).size(), 1u);
  }

  // Before SHM.HELLO, and over TCP: refused before anything is read.
  auto raw = RawConnection::Unix(server_.unix_socket_path());
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(raw->Call({"V.SHMFETCH", "v", "BATCH", "0", "10"}), "-ERR send SHM.HELLO first\r\n");
  auto tcp = RawConnection::Tcp(server_.port());
  ASSERT_NE(tcp, nullptr);
  EXPECT_EQ(tcp->Call({"V.SHMFETCH", "v", "BATCH", "0", "10"}),
            "-ERR SHM commands are served on the unix socket only\r\n");
}

// --- SSM.PREFIX.CKPT.SHMFETCH ---

// A namespace of 16-token blocks, one attention layer of kDim fp32 rows, two recurrent layers,
// one block, and a checkpoint at its end, 16 tokens (a block boundary: the position is the
// anchor, the block's hash), whose blobs are 2 MiB each.
void StoreCheckpoint(ShmClient& client, const std::string& ns, uint64_t seed) {
  auto made = client.Command({"KV.PREFIX.NAMESPACE", ns, "BLOCK", "16", "ATTN", "1", "KVDIM",
                              std::to_string(kDim), "RECURRENT", "2", "VQUANT", "fp32"});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  const std::string at(16, 'p');
  auto block = client.Command({"KV.PREFIX.BSTORE", ns, std::string(16, '\0'), "1", at, "0",
                               Pattern(2 * 16 * kRow, seed + 2)});
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  auto stored = client.Command({"SSM.PREFIX.CKPT.STORE", ns, at, "16", at, "0",
                                Pattern(kBlobBytes, seed), "1", Pattern(kBlobBytes, seed + 1)});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
}

PrefixHash Position(char c) {
  PrefixHash h;
  h.fill(static_cast<uint8_t>(c));
  return h;
}

TEST_F(ShmFetchTest, CheckpointBlobsEveryByteAsCkptFetchUnderOneLease) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_NO_FATAL_FAILURE(StoreCheckpoint(client_, "ns", 40));
  const std::string at(16, 'p');
  auto socket = Call({"SSM.PREFIX.CKPT.FETCH", "ns", at});
  ASSERT_TRUE(socket.ok()) << socket.status().ToString();
  ASSERT_EQ(socket.value().elements.size(), 2u);
  const std::string blob0 = socket.value().elements[0].str, blob1 = socket.value().elements[1].str;
  ASSERT_EQ(blob0.size(), kBlobBytes);

  // All layers: a place each, under one lease.
  std::vector<ShmView> views;
  Status st = client_.FetchCheckpoint("ns", Position('p'), {}, views, /*checksum=*/true);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(views.size(), 2u);
  EXPECT_TRUE(AsString(views[0]) == blob0);
  EXPECT_TRUE(AsString(views[1]) == blob1);
  for (const ShmView& v : views) {
    EXPECT_NE(v.lease, 0u) << "a 2 MiB blob lies in an arena";
    EXPECT_EQ(v.checksum.size(), 16u);
    EXPECT_TRUE(client_.Valid(v));
  }
  EXPECT_EQ(Leases(views).size(), 1u) << "one lease for the call";
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 1u);

  // The listed layers, in the order asked, repeats kept: as CKPT.FETCH LAYERS answers them.
  const uint32_t listed[] = {1, 0, 1};
  std::vector<ShmView> some;
  ASSERT_TRUE(client_.FetchCheckpoint("ns", Position('p'), listed, some).ok());
  auto socket_listed = Call({"SSM.PREFIX.CKPT.FETCH", "ns", at, "LAYERS", "1", "0", "1"});
  ASSERT_TRUE(socket_listed.ok());
  ASSERT_EQ(some.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(AsString(some[i]) == socket_listed.value().elements[i].str) << i;
    EXPECT_TRUE(some[i].checksum.empty()) << "no checksum asked for";
  }
  ASSERT_TRUE(client_.Release(Leases(some)).ok());

  // The leased blobs outlive the checkpoint's drop, a new checkpoint and the namespace's removal.
  auto dropped = Call({"SSM.PREFIX.CKPT.DROP", "ns", "1", at});
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_EQ(dropped.value().integer, 1);
  EXPECT_EQ(client_.FetchCheckpoint("ns", Position('p'), {}, some).code(), StatusCode::kNotFound);
  auto again = Call({"SSM.PREFIX.CKPT.STORE", "ns", at, "16", at, "0", Pattern(kBlobBytes, 50), "1",
                     Pattern(kBlobBytes, 51)});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE(Call({"DEL", "ns"}).ok());
  EXPECT_TRUE(AsString(views[0]) == blob0) << "a leased blob changed";
  EXPECT_TRUE(AsString(views[1]) == blob1);
  for (const ShmView& v : views) EXPECT_TRUE(client_.Valid(v));
  ASSERT_TRUE(client_.Release(Leases(views)).ok());
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 0u);
}

TEST_F(ShmFetchTest, CheckpointRefusals) {
  ASSERT_NO_FATAL_FAILURE(Start({"--shm-max-leases", "0"}));
  ASSERT_NO_FATAL_FAILURE(StoreCheckpoint(client_, "ns", 60));
  ASSERT_TRUE(Call({"SET", "str", "x"}).ok());
  const std::string at(16, 'p');
  // No checkpoint at a position: nil, as the socket form answers; no lease taken.
  auto none = Call({"SSM.PREFIX.CKPT.SHMFETCH", "ns", std::string(16, 'q')});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none.value().is_nil());
  EXPECT_TRUE(Call({"SSM.PREFIX.CKPT.FETCH", "ns", std::string(16, 'q')}).value().is_nil());
  std::vector<ShmView> views;
  EXPECT_EQ(client_.FetchCheckpoint("ns", Position('q'), {}, views).code(), StatusCode::kNotFound);
  const std::vector<std::vector<std::string>> wrong = {
      {"nosuch", at},              // a missing namespace
      {"str", at},                 // a key of another type
      {"ns", "short"},             // not a 16-byte position
      {"ns", at, "LAYERS"},        // LAYERS without a layer
      {"ns", at, "LAYERS", "2"},   // past the recurrent layers
      {"ns", at, "LAYERS", "-1"},  // not a layer
      {"ns", at, "BOGUS"},         // an unknown option
  };
  for (const auto& args : wrong) {
    std::vector<std::string> shared = args, socket = args;
    shared.insert(shared.begin(), "SSM.PREFIX.CKPT.SHMFETCH");
    socket.insert(socket.begin(), "SSM.PREFIX.CKPT.FETCH");
    SCOPED_TRACE(args[0] + " " + (args.size() > 2 ? args[2] : ""));
    ASSERT_NO_FATAL_FAILURE(ExpectSameError(shared, socket));
  }
  EXPECT_NE(Call({"SSM.PREFIX.CKPT.SHMFETCH", "str", at}).status().message().find("WRONGTYPE"),
            std::string::npos);
  // The cap (0 here): the blobs lie in arenas, so nothing is answered and nothing leased.
  EXPECT_EQ(client_.FetchCheckpoint("ns", Position('p'), {}, views).message(),
            "ERR this connection holds 0 SHM leases (shm-max-leases): SHM.RELEASE some first");
  EXPECT_TRUE(views.empty());
  EXPECT_EQ(InfoNumber(admin_.get(), "shm_leases"), 0u);
  ASSERT_TRUE(Call({"CONFIG", "SET", "shm-max-leases", "1"}).ok());
  ASSERT_TRUE(client_.FetchCheckpoint("ns", Position('p'), {}, views).ok());
  EXPECT_EQ(views.size(), 2u);
  // Before SHM.HELLO, and over TCP.
  auto raw = RawConnection::Unix(server_.unix_socket_path());
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(raw->Call({"SSM.PREFIX.CKPT.SHMFETCH", "ns", at}), "-ERR send SHM.HELLO first\r\n");
  auto tcp = RawConnection::Tcp(server_.port());
  ASSERT_NE(tcp, nullptr);
  EXPECT_EQ(tcp->Call({"SSM.PREFIX.CKPT.SHMFETCH", "ns", at}),
            "-ERR SHM commands are served on the unix socket only\r\n");
}

// --- COMMAND GETKEYS through SHM.CALL ---

// The keys of the carried command, as COMMAND GETKEYS finds them for that command sent alone;
// asked over TCP (GETKEYS reads only words: no SHM.HELLO, no file).
TEST_F(ShmFetchTest, GetKeysSeesTheCarriedCommandsKeys) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto tcp = RawConnection::Tcp(server_.port());
  ASSERT_NE(tcp, nullptr);
  const auto getkeys = [&](const std::string& sub, std::vector<std::string> words) {
    words.insert(words.begin(), {"COMMAND", sub});
    return tcp->Call(words);
  };
  EXPECT_EQ(getkeys("GETKEYS", {"SHM.CALL", "1", "2", "0", "5", "SET", "k", "v"}),
            "*1\r\n$1\r\nk\r\n");
  EXPECT_EQ(getkeys("GETKEYS", {"SHM.CALL", "1", "2", "0", "5", "SET", "k", "v"}),
            getkeys("GETKEYS", {"SET", "k", "v"}));
  EXPECT_EQ(getkeys("GETKEYSANDFLAGS", {"shm.call", "1", "2", "0", "5", "SET", "k", "v"}),
            getkeys("GETKEYSANDFLAGS", {"SET", "k", "v"}));
  EXPECT_EQ(getkeys("GETKEYS",
                    {"SHM.CALL", "2", "2", "0", "1", "4", "1", "1", "MSET", "a", "x", "b", "y"}),
            "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
  // A key that comes from the file cannot be known without it.
  EXPECT_EQ(getkeys("GETKEYS", {"SHM.CALL", "1", "1", "0", "5", "SET", "k", "v"}),
            "-ERR argument 1 of the carried command is a key that lies in the file SHM.CALL "
            "passes: COMMAND GETKEYS cannot read it\r\n");
  // SHM.CALL's own layout errors, as SHM.CALL answers them.
  EXPECT_EQ(getkeys("GETKEYS", {"SHM.CALL", "0", "2", "0", "5", "SET", "k", "v"}),
            "-ERR SHM.CALL: the count of file arguments must be a positive integer\r\n");
  EXPECT_EQ(getkeys("GETKEYS", {"SHM.CALL", "1", "3", "0", "5", "SET", "k", "v"}),
            "-ERR SHM.CALL: argument index 3 is not an argument of the carried command (1 to "
            "2)\r\n");
  EXPECT_EQ(getkeys("GETKEYS", {"SHM.CALL", "1", "2", "x", "5", "SET", "k", "v"}),
            "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(getkeys("GETKEYS", {"SHM.CALL", "1", "2", "0"}),
            "-ERR Invalid number of arguments specified for command\r\n");
  // The carried command's own checks, as GETKEYS makes them for it.
  EXPECT_EQ(getkeys("GETKEYS", {"SHM.CALL", "1", "1", "0", "5", "PING", "x"}),
            getkeys("GETKEYS", {"PING", "x"}));
  EXPECT_EQ(getkeys("GETKEYS", {"SHM.CALL", "1", "1", "0", "5", "NOSUCH", "x"}),
            getkeys("GETKEYS", {"NOSUCH", "x"}));
  EXPECT_EQ(getkeys("GETKEYS", {"SHM.CALL", "1", "2", "0", "5", "GET", "k", "extra"}),
            getkeys("GETKEYS", {"GET", "k", "extra"}));
  EXPECT_EQ(getkeys("GETKEYS", {"SHM.CALL", "1", "2", "0", "5", "SHM.SET", "k", "5"}),
            "-ERR SHM.CALL cannot carry SHM.SET: it deals in passed descriptors itself\r\n");
}

// Cluster routing finds the carried command's keys where the registry dispatches it, the file's
// bytes included: a node serving only slot(a) runs SHM.CALL's SET of a, and refuses b's, whether
// the key is a word or comes from the file.
TEST_F(ShmFetchTest, ClusterRoutingSeesCarriedKeysAndKeysFromTheFile) {
  ASSERT_NO_FATAL_FAILURE(
      Start({"--cluster-enabled", "yes", "--cluster-require-full-coverage", "no"}));
  auto slot = Call({"CLUSTER", "KEYSLOT", "a"});
  ASSERT_TRUE(slot.ok()) << slot.status().ToString();
  ASSERT_TRUE(Call({"CLUSTER", "ADDSLOTS", std::to_string(slot.value().integer)}).ok());
  const std::string value(40 << 10, 'v');
  for (size_t from_file : {2, 1}) {
    SCOPED_TRACE("argument " + std::to_string(from_file) + " from the file");
    auto served = client_.Call({"SET", "a", value}, {from_file});
    ASSERT_TRUE(served.ok()) << served.status().ToString();
    EXPECT_EQ(served.value().str, "OK");
    auto refused = client_.Call({"SET", "b", value}, {from_file});
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().message().rfind("CLUSTERDOWN", 0), 0u) << refused.status().message();
  }
  auto stored = Call({"STRLEN", "a"});
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored.value().integer, static_cast<int64_t>(value.size()));
}

}  // namespace
}  // namespace prefixd::it
