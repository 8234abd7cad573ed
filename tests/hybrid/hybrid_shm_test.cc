// The hybrid reference client over the same-host transport (docs/shm-transport.md): a real
// prefixd-server with a unix socket, this test as the cold process and `prefixd-hybrid warm` as
// the warm one over TCP, the unix socket and the shared arenas. The shared path must restore the
// state the socket restores, bit for bit, and must really be taken (the warm report's counters and
// the server's own command statistics say so); a server that refuses SHM.HELLO (shm-arenas off)
// or a shared call (the lease cap) is read over the socket instead, with the same result.
//
// The model is tiny except for its Gated DeltaNet state: 16 value heads of 128 × 128, so each
// recurrent layer's blob is over 1 MiB and lies in an arena even in a server built with
// AddressSanitizer, which keeps smaller buffers on the heap (and answers their bytes). There the
// V-store's rows (chunks of at most 256 KiB) come back as bytes, and the tests say so rather than
// expecting leases for them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "hybrid_test_util.h"
#include "integration/server_fixture.h"
#include "model.h"
#include "prefix_cache.h"
#include "prefixd/client.h"
#include "prefixd/shm.h"
#include "two_process_fixture.h"

namespace prefixd::hybrid {
namespace {

using Json = nlohmann::json;

using test::ColdRun;
using test::RunHybrid;

constexpr int kDecode = 8;
constexpr int64_t kPrefix = 1500;  // two V-store chunks per attention side (1024 rows each)
constexpr uint64_t kMiB = 1 << 20;

// Qwen3.5's structure at toy sizes, but with a recurrent state of 1 MiB per GDN layer.
constexpr const char* kWideStateConfig = R"({
  "model_type": "qwen3_5_text", "hidden_size": 64, "intermediate_size": 128, "vocab_size": 512,
  "num_hidden_layers": 4, "layer_types": ["linear_attention", "linear_attention",
  "linear_attention", "full_attention"], "num_attention_heads": 4, "num_key_value_heads": 2,
  "head_dim": 32, "linear_num_key_heads": 4, "linear_num_value_heads": 16,
  "linear_key_head_dim": 128, "linear_value_head_dim": 128, "tie_word_embeddings": true})";

// calls= of `command`'s line in INFO commandstats (0 when the server has not run it).
uint64_t CommandCalls(redisContext* ctx, const std::string& command) {
  it::RedisReply reply(it::HiredisCommand(ctx, {"INFO", "commandstats"}));
  if (reply == nullptr || reply->type != REDIS_REPLY_STRING) return ~uint64_t{0};
  const std::string text(reply->str, reply->len);
  const std::string key = "cmdstat_" + command + ":calls=";
  const size_t at = text.find(key);
  if (at == std::string::npos) return 0;
  return std::stoull(text.substr(at + key.size()));
}

class HybridShm : public test::TwoProcessTest {
 protected:
  void StartWith(bool arenas) {
    config_path_ = std::filesystem::temp_directory_path() /
                   ("hybrid-shm-" + std::to_string(::getpid()) + ".json");
    std::ofstream(config_path_) << kWideStateConfig;
    it::ServerProcess::Options server;
    server.unix_socket = true;
    server.flags = {"--appendonly", "no", "--shm-arenas", arenas ? "yes" : "no"};
    ASSERT_NO_FATAL_FAILURE(Start(config_path_.string(), 2, server));
    admin_ = it::ConnectHiredis(server_.port());
    ASSERT_NE(admin_, nullptr);
  }
  void TearDown() override {
    TwoProcessTest::TearDown();
    if (!config_path_.empty()) std::filesystem::remove(config_path_);
  }

  // The warm process reaching the server over `transport` (tcp: its port; else its socket).
  Json WarmVia(const ColdRun& run, KvTransport kv, const std::string& transport) {
    std::vector<std::string> extra = {"--transport", transport};
    if (transport != "tcp")
      extra.insert(extra.end(), {"--unix-socket", server_.unix_socket_path()});
    return Warm(run, kv, extra);
  }

  // The shared commands' calls so far: SSM.PREFIX.SHMFETCH, V.SHMFETCH.
  std::pair<uint64_t, uint64_t> SharedCalls() {
    return {CommandCalls(admin_.get(), "ssm.prefix.shmfetch"),
            CommandCalls(admin_.get(), "v.shmfetch")};
  }

  // Bytes of the GDN layers' blobs: each at least their state (1 MiB and more).
  uint64_t RecurrentStateBytes() const {
    uint64_t bytes = 0;
    for (const LayerState& layer : backend_->host_state().layers()) {
      if (layer.kind != LayerKind::kFullAttention)
        bytes += layer.conv.bytes() + layer.recurrent.bytes();
    }
    return bytes;
  }

  // `prefixd-hybrid chat` on the wide-state model, three multiturn turns: over TCP (--port), or
  // given the unix socket and nothing else (the shared path by itself). Its exit status; `json`
  // gets its --json report.
  int Chat(bool over_socket, const std::string& restore, const std::string& json) {
    std::vector<std::string> args = {"chat",
                                     "--model",
                                     config_path_.string(),
                                     "--threads",
                                     "2",
                                     "--workload",
                                     "multiturn",
                                     "--turns",
                                     "3",
                                     "--block",
                                     "16",
                                     "--restore",
                                     restore,
                                     "--system-tokens",
                                     "100",
                                     "--message-tokens",
                                     "40",
                                     "--reply-tokens",
                                     "4",
                                     "--loopback-mb",
                                     "1",
                                     "--json",
                                     json};
    if (over_socket) {
      args.insert(args.end(), {"--unix-socket", server_.unix_socket_path()});
    } else {
      args.insert(args.end(), {"--port", std::to_string(server_.port())});
    }
    return RunHybrid(args);
  }

  // The chat's prefix-index fetches so far: KV.PREFIX.SHMLFETCH, KV.PREFIX.SHMBFETCH.
  std::pair<uint64_t, uint64_t> ChatSharedCalls() {
    return {CommandCalls(admin_.get(), "kv.prefix.shmlfetch"),
            CommandCalls(admin_.get(), "kv.prefix.shmbfetch")};
  }

  // The two chats' turns matched the same prefixes and restored the same state (every layer's
  // digest) and the same reply tokens.
  static void ExpectSameTurns(const Json& tcp, const Json& shm) {
    ASSERT_EQ(tcp["turns"].size(), 3u);
    ASSERT_EQ(shm["turns"].size(), tcp["turns"].size());
    for (size_t t = 0; t < tcp["turns"].size(); ++t) {
      SCOPED_TRACE("turn " + std::to_string(t + 1));
      const Json& a = tcp["turns"][t];
      const Json& b = shm["turns"][t];
      EXPECT_EQ(b["matched_tokens"], a["matched_tokens"]);
      if (t > 0) {
        EXPECT_GT(b["matched_tokens"].get<int64_t>(), 0);
      }
      EXPECT_EQ(b["fetched_bytes"], a["fetched_bytes"]);
      EXPECT_EQ(b["warm_digests"].size(), 4u);
      EXPECT_EQ(b["warm_digests"], a["warm_digests"]);
      EXPECT_FALSE(b["warm_tokens"].empty());
      EXPECT_EQ(b["warm_tokens"], a["warm_tokens"]);
      EXPECT_EQ(b["states_bitexact"], a["states_bitexact"]);
    }
  }

  std::filesystem::path config_path_;
  it::RedisContext admin_;
};

// The same prefix through TCP, the unix socket and the shared arenas: one state, one set of
// tokens, and only the shared warm process ran the shared commands, leasing the GDN layers (and,
// outside AddressSanitizer, the V-store's rows).
TEST_F(HybridShm, SharedPathRestoresWhatTheSocketsRestoreAndIsTaken) {
  ASSERT_NO_FATAL_FAILURE(StartWith(true));
  for (KvTransport kv : {KvTransport::kVStore, KvTransport::kSsm}) {
    SCOPED_TRACE(std::string("K/V via ") + std::string(KvTransportName(kv)));
    HybridPrefixCache cache(config_, {.kv = kv});
    const ColdRun run = Cold(cache, kPrefix, kv == KvTransport::kVStore ? 5 : 6, kDecode);
    Json shared_warm;
    for (const std::string transport : {"tcp", "unix", "shm"}) {
      SCOPED_TRACE("over " + transport);
      const auto before = SharedCalls();
      const Json warm = WarmVia(run, kv, transport);
      const auto after = SharedCalls();
      ASSERT_TRUE(warm["hit"].get<bool>()) << warm["miss_reason"];
      EXPECT_EQ(warm["transport"].get<std::string>(), transport);
      ExpectSameAsCold(run, warm);
      if (transport != "shm") {
        EXPECT_EQ(after, before) << "a socket fetch ran a shared command";
        EXPECT_EQ(warm["shared_views"].get<uint64_t>(), 0u);
        continue;
      }
      shared_warm = warm;
      EXPECT_EQ(after.first, before.first + 1) << "one SSM.PREFIX.SHMFETCH";
      // One V.SHMFETCH per attention layer and side, none when K/V are SSM blobs.
      const uint64_t rows_calls =
          kv == KvTransport::kVStore ? 2 * config_.num_attention_layers() : 0;
      EXPECT_EQ(after.second, before.second + rows_calls);
      EXPECT_EQ(warm["socket_fallbacks"].get<uint64_t>(), 0u);
    }
    // What came through the arenas: every GDN layer (over 1 MiB each: in an arena even under
    // AddressSanitizer), and the attention rows unless a sanitized server kept them on the heap.
    const uint64_t state = shared_warm["state_bytes"].get<uint64_t>();
    const uint64_t shared = shared_warm["shared_bytes"].get<uint64_t>();
    const uint64_t inline_bytes = shared_warm["inline_bytes"].get<uint64_t>();
    EXPECT_GE(RecurrentStateBytes(), 3 * kMiB);
    EXPECT_GE(shared, RecurrentStateBytes());
    EXPECT_GE(shared_warm["shared_views"].get<uint64_t>(), 3u);
    EXPECT_GE(shared + inline_bytes + shared_warm["zero_bytes"].get<uint64_t>(), state);
    if (!it::ServerIsSanitized()) {
      // Only the manifest (a few hundred bytes) is small enough to come back inline.
      EXPECT_GE(shared, state);
      EXPECT_LT(inline_bytes, 4096u);
    } else if (kv == KvTransport::kVStore) {
      EXPECT_GE(inline_bytes, 2 * uint64_t(kPrefix) * config_.kv_dim() * sizeof(float));
    }
  }
}

// In one process: the state the shared path fills is byte for byte the socket's, its leases are
// all released (the server holds none while the client stays connected), and a layer whose
// blob is missing is still a miss that leaves the state empty.
TEST_F(HybridShm, InProcessFetchMatchesTheSocketByteForByteAndReleasesItsLeases) {
  ASSERT_NO_FATAL_FAILURE(StartWith(true));
  HybridPrefixCache cache(config_, {.kv = KvTransport::kVStore});
  const ColdRun run = Cold(cache, kPrefix, 7, kDecode);
  auto unix_client = Client::ConnectUnix(server_.unix_socket_path());
  ASSERT_TRUE(unix_client.ok()) << unix_client.status().ToString();
  ShmClient shm;
  ASSERT_TRUE(shm.Connect(server_.unix_socket_path()).ok());

  SequenceState over_socket(config_), over_shm(config_);
  auto socket_report = cache.Fetch(*unix_client, run.ns, kPrefix, &over_socket);
  ASSERT_TRUE(socket_report.ok()) << socket_report.status().ToString();
  ASSERT_TRUE(socket_report->hit) << socket_report->miss_reason;
  EXPECT_FALSE(socket_report->shared);
  auto shm_report = cache.Fetch(*unix_client, run.ns, kPrefix, &over_shm, &shm);
  ASSERT_TRUE(shm_report.ok()) << shm_report.status().ToString();
  ASSERT_TRUE(shm_report->hit) << shm_report->miss_reason;
  EXPECT_TRUE(shm_report->shared);
  EXPECT_GE(shm_report->shared_views, 3u);
  EXPECT_EQ(DigestState(over_shm), run.prefix_digests);
  ASSERT_EQ(over_shm.layers().size(), over_socket.layers().size());
  for (size_t i = 0; i < over_shm.layers().size(); ++i) {
    const LayerState& a = over_shm.layers()[i];
    const LayerState& b = over_socket.layers()[i];
    for (auto [x, y] : {std::pair{&a.conv, &b.conv}, std::pair{&a.recurrent, &b.recurrent},
                        std::pair{&a.k, &b.k}, std::pair{&a.v, &b.v}}) {
      ASSERT_EQ(x->bytes(), y->bytes()) << "layer " << i;
      EXPECT_EQ(std::memcmp(x->data(), y->data(), x->bytes()), 0) << "layer " << i;
    }
  }
  EXPECT_EQ(it::InfoNumber(admin_.get(), "shm_leases"), 0u);

  // A GDN layer gone: a miss naming it, the state cleared, no lease left behind.
  ASSERT_TRUE(client_->Drop(run.ns, 1).ok());
  shm_report = cache.Fetch(*unix_client, run.ns, kPrefix, &over_shm, &shm);
  ASSERT_TRUE(shm_report.ok());
  EXPECT_FALSE(shm_report->hit);
  EXPECT_NE(shm_report->miss_reason.find("layer 1"), std::string::npos) << shm_report->miss_reason;
  EXPECT_EQ(over_shm.n_tokens(), 0);
  EXPECT_EQ(it::InfoNumber(admin_.get(), "shm_leases"), 0u);
}

// shm-arenas off: SHM.HELLO is refused, the client says so and reads over the unix socket; the
// report names the path taken and the refusal, and no shared command ran.
TEST_F(HybridShm, ArenasOffFallsBackToTheUnixSocket) {
  ASSERT_NO_FATAL_FAILURE(StartWith(false));
  HybridPrefixCache cache(config_, {.kv = KvTransport::kVStore});
  const ColdRun run = Cold(cache, kPrefix, 8, kDecode);
  for (const std::string transport : {"auto", "shm"}) {
    SCOPED_TRACE("--transport " + transport);
    const Json warm = WarmVia(run, KvTransport::kVStore, transport);
    ASSERT_TRUE(warm["hit"].get<bool>()) << warm["miss_reason"];
    EXPECT_EQ(warm["transport"].get<std::string>(), "unix");
    EXPECT_NE(warm["shm_refused"].get<std::string>().find("shared arenas are off"),
              std::string::npos)
        << warm["shm_refused"];
    EXPECT_EQ(warm["shared_views"].get<uint64_t>(), 0u);
    ExpectSameAsCold(run, warm);
  }
  EXPECT_EQ(SharedCalls(), std::make_pair(uint64_t{0}, uint64_t{0}));
  EXPECT_EQ(CommandCalls(admin_.get(), "shm.hello"), 2u);
}

// A shared call the server refuses (no room for a lease: shm-max-leases 0) is done again over the
// socket, with the same result. The cap counts calls, not pieces: with room for one lease, every
// call goes through the arenas, each of several views (the GDN layers, a layer's row pieces),
// since the warm path releases a call's lease before its next call.
TEST_F(HybridShm, RefusedSharedCallsAreReadOverTheSocket) {
  ASSERT_NO_FATAL_FAILURE(StartWith(true));
  HybridPrefixCache cache(config_, {.kv = KvTransport::kVStore});
  const ColdRun run = Cold(cache, kPrefix, 9, kDecode);
  it::RedisReply set(it::HiredisCommand(admin_.get(), {"CONFIG", "SET", "shm-max-leases", "0"}));
  ASSERT_NE(set, nullptr);
  ASSERT_EQ(set->type, REDIS_REPLY_STATUS) << it::DescribeReply(set.get());
  const Json warm = WarmVia(run, KvTransport::kVStore, "shm");
  ASSERT_TRUE(warm["hit"].get<bool>()) << warm["miss_reason"];
  EXPECT_EQ(warm["transport"].get<std::string>(), "shm");
  EXPECT_GE(warm["socket_fallbacks"].get<uint64_t>(), 1u);
  ExpectSameAsCold(run, warm);
  EXPECT_GE(CommandCalls(admin_.get(), "ssm.prefix.shmfetch"), 1u);

  it::RedisReply one(it::HiredisCommand(admin_.get(), {"CONFIG", "SET", "shm-max-leases", "1"}));
  ASSERT_NE(one, nullptr);
  ASSERT_EQ(one->type, REDIS_REPLY_STATUS) << it::DescribeReply(one.get());
  const Json shared = WarmVia(run, KvTransport::kVStore, "shm");
  ASSERT_TRUE(shared["hit"].get<bool>()) << shared["miss_reason"];
  EXPECT_EQ(shared["socket_fallbacks"].get<uint64_t>(), 0u) << "a call was refused at cap 1";
  EXPECT_GT(shared["shared_views"].get<uint64_t>(), 1u) << "more leased views than the cap";
  ExpectSameAsCold(run, shared);
  EXPECT_EQ(it::InfoNumber(admin_.get(), "shm_leases"), 0u);
}

// What the command line refuses: the shared path without a socket, an unknown transport. The
// same request with the socket given is a hit, so the refusals are the flags'.
TEST_F(HybridShm, TransportFlagsAreChecked) {
  ASSERT_NO_FATAL_FAILURE(StartWith(true));
  HybridPrefixCache cache(config_, {.kv = KvTransport::kVStore});
  const ColdRun run = Cold(cache, 64, 10, 2);
  const std::string request = (tmp_ / "flags-request.json").string();
  const std::string result = (tmp_ / "flags-result.json").string();
  std::ofstream(request) << Json{
      {"ns", run.ns},
      {"prefix", run.prefix},
      {"suffix", run.suffix},
      {"decode_tokens", 2}}.dump();
  auto warm = [&](std::vector<std::string> flags) {
    std::vector<std::string> args = {"warm",
                                     "--model",
                                     config_path_.string(),
                                     "--threads",
                                     "2",
                                     "--port",
                                     std::to_string(server_.port()),
                                     "--request",
                                     request,
                                     "--result",
                                     result};
    args.insert(args.end(), flags.begin(), flags.end());
    std::filesystem::remove(result);
    return RunHybrid(args);
  };
  EXPECT_EQ(warm({"--transport", "shm"}), 2);
  EXPECT_EQ(warm({"--transport", "unix"}), 2);
  EXPECT_EQ(warm({"--transport", "udp", "--unix-socket", server_.unix_socket_path()}), 2);
  EXPECT_FALSE(std::filesystem::exists(result));
  ASSERT_EQ(warm({"--transport", "shm", "--unix-socket", server_.unix_socket_path()}), 0);
  const Json out = Json::parse(test::ReadText(result), nullptr, false);
  ASSERT_FALSE(out.is_discarded());
  EXPECT_TRUE(out["hit"].get<bool>()) << out["miss_reason"];
  EXPECT_EQ(out["transport"].get<std::string>(), "shm");
  // The sweep passes its transport to its warm processes: it exits 0 only when each was a
  // bit-exact hit.
  EXPECT_EQ(RunHybrid({"sweep", "--model", config_path_.string(), "--lengths", "200",
                       "--suffix-tokens", "3", "--decode-tokens", "3", "--threads", "2",
                       "--unix-socket", server_.unix_socket_path(), "--loopback-mb", "8"}),
            0);
}

// `prefixd-hybrid chat` given only the unix socket reads each matched prefix through the shared
// arenas (KV.PREFIX.SHMLFETCH; for the kv-only control's whole blocks KV.PREFIX.SHMBFETCH), and
// restores what the chat over TCP restores: the same matches, layer digests and reply tokens;
// bit-exact against the cold prefill with --restore full. The TCP chat ran no shared command; the
// shared one did (its report and the server's command statistics agree), leased the GDN layers
// (over 1 MiB each: in an arena even under AddressSanitizer) and needed no socket fallback.
TEST_F(HybridShm, ChatOverTheSharedPathRestoresWhatTcpRestores) {
  ASSERT_NO_FATAL_FAILURE(StartWith(true));
  for (const std::string restore : {"full", "kv-only"}) {
    SCOPED_TRACE("--restore " + restore);
    const std::string tcp_json = (tmp_ / ("chat-tcp-" + restore + ".json")).string();
    const std::string shm_json = (tmp_ / ("chat-shm-" + restore + ".json")).string();
    auto before = ChatSharedCalls();
    ASSERT_EQ(Chat(false, restore, tcp_json), 0);
    EXPECT_EQ(ChatSharedCalls(), before) << "the TCP chat ran a shared command";
    ASSERT_EQ(Chat(true, restore, shm_json), 0);
    const auto after = ChatSharedCalls();
    const Json tcp = Json::parse(test::ReadText(tcp_json), nullptr, false);
    const Json shm = Json::parse(test::ReadText(shm_json), nullptr, false);
    ASSERT_FALSE(tcp.is_discarded());
    ASSERT_FALSE(shm.is_discarded());
    EXPECT_EQ(tcp["transport"], "tcp");
    EXPECT_EQ(tcp["shared_calls"].get<uint64_t>(), 0u);
    EXPECT_EQ(shm["transport"], "shm");
    EXPECT_EQ(shm["shm_refused"], "");
    EXPECT_EQ(shm["socket_fallbacks"].get<uint64_t>(), 0u);
    ExpectSameTurns(tcp, shm);
    // Turn 1 matches nothing (a cold start either way); later turns are bit-exact only when the
    // recurrent layers were restored too.
    for (size_t t = 1; t < shm["turns"].size(); ++t) {
      EXPECT_EQ(shm["turns"][t]["states_bitexact"].get<bool>(), restore == "full");
    }
    // Two warm starts, each of one attention layer: full reads ATTN and STATE (SHMLFETCH);
    // kv-only reads the whole blocks (SHMBFETCH) and the checkpoint's tail (SHMLFETCH).
    const uint64_t lfetch = after.first - before.first, bfetch = after.second - before.second;
    EXPECT_EQ(lfetch + bfetch, shm["shared_calls"].get<uint64_t>());
    EXPECT_EQ(lfetch, restore == "full" ? 4u : 2u);
    EXPECT_EQ(bfetch, restore == "full" ? 0u : 2u);
    if (restore == "full") {
      EXPECT_GE(shm["shared_views"].get<uint64_t>(), 2 * 3u) << "the GDN layers of two turns";
      EXPECT_GE(shm["shared_bytes"].get<uint64_t>(), 2 * RecurrentStateBytes());
    }
  }
  // Every piece's lease was given back (each chat's connection is gone by now, too).
  EXPECT_EQ(it::InfoNumber(admin_.get(), "shm_leases"), 0u);
}

// The chat's shared calls the server refuses (no room for a lease: shm-max-leases 0) are done
// again over the socket, with the same turns as over TCP; with
// the arenas off the chat says SHM.HELLO was refused and reads everything over the unix socket.
TEST_F(HybridShm, ChatFallsBackToTheSocketWhereRefused) {
  ASSERT_NO_FATAL_FAILURE(StartWith(true));
  const std::string tcp_json = (tmp_ / "chat-tcp.json").string();
  const std::string shm_json = (tmp_ / "chat-shm.json").string();
  ASSERT_EQ(Chat(false, "full", tcp_json), 0);
  it::RedisReply set(it::HiredisCommand(admin_.get(), {"CONFIG", "SET", "shm-max-leases", "0"}));
  ASSERT_NE(set, nullptr);
  ASSERT_EQ(set->type, REDIS_REPLY_STATUS) << it::DescribeReply(set.get());
  ASSERT_EQ(Chat(true, "full", shm_json), 0);
  const Json tcp = Json::parse(test::ReadText(tcp_json), nullptr, false);
  const Json shm = Json::parse(test::ReadText(shm_json), nullptr, false);
  ASSERT_FALSE(shm.is_discarded());
  EXPECT_EQ(shm["transport"], "shm");
  EXPECT_GE(shm["socket_fallbacks"].get<uint64_t>(), 2u) << "each turn's STATE";
  ExpectSameTurns(tcp, shm);
  EXPECT_EQ(it::InfoNumber(admin_.get(), "shm_leases"), 0u);
}

TEST_F(HybridShm, ChatWithTheArenasOffReadsOverTheUnixSocket) {
  ASSERT_NO_FATAL_FAILURE(StartWith(false));
  const std::string tcp_json = (tmp_ / "chat-tcp.json").string();
  const std::string unix_json = (tmp_ / "chat-unix.json").string();
  ASSERT_EQ(Chat(false, "full", tcp_json), 0);
  ASSERT_EQ(Chat(true, "full", unix_json), 0);
  const Json tcp = Json::parse(test::ReadText(tcp_json), nullptr, false);
  const Json via = Json::parse(test::ReadText(unix_json), nullptr, false);
  ASSERT_FALSE(via.is_discarded());
  EXPECT_EQ(via["transport"], "unix");
  EXPECT_NE(via["shm_refused"].get<std::string>().find("shared arenas are off"), std::string::npos)
      << via["shm_refused"];
  EXPECT_EQ(via["shared_calls"].get<uint64_t>(), 0u);
  ExpectSameTurns(tcp, via);
  EXPECT_EQ(ChatSharedCalls(), std::make_pair(uint64_t{0}, uint64_t{0}));
}

// `prefixd-hybrid transports` (the benchmark's program) end to end, at a toy size: one row per
// transport, each the path asked for, bit-exact and with the same tokens (its exit status says
// so too), and only the shared row read in place.
TEST_F(HybridShm, TransportsCommandComparesEveryPath) {
  ASSERT_NO_FATAL_FAILURE(StartWith(true));
  const std::string md = (tmp_ / "transports.md").string();
  ASSERT_EQ(RunHybrid({"transports", "--model", config_path_.string(), "--lengths", "300",
                       "--repeats", "1", "--threads", "2", "--suffix-tokens", "3",
                       "--decode-tokens", "2", "--port", std::to_string(server_.port()),
                       "--unix-socket", server_.unix_socket_path(), "--markdown", md}),
            0);
  std::istringstream lines(test::ReadText(md));
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("| 300 |")) continue;
    std::vector<std::string> cells;
    std::istringstream cols(line);
    for (std::string cell; std::getline(cols, cell, '|');) {
      cells.push_back(cell.size() > 2 ? cell.substr(1, cell.size() - 2) : cell);
    }
    ASSERT_EQ(cells.size(), 14u) << line;
    rows.push_back(cells);
  }
  ASSERT_EQ(rows.size(), 3u);
  const std::vector<std::string> transports = {"tcp", "unix", "shm"};
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::vector<std::string>& r = rows[i];
    EXPECT_EQ(r[3], transports[i]);
    EXPECT_EQ(r[12], "yes") << "bit-exact, " << r[3];
    EXPECT_EQ(r[13], "yes") << "tokens, " << r[3];
    // MB read in place: the 3.4 MB of GDN state for the shared path, nothing for the sockets.
    if (r[3] == "shm") {
      EXPECT_GE(std::stod(r[11]), 3.0);
    } else {
      EXPECT_EQ(r[11], "0.0");
    }
  }
}

}  // namespace
}  // namespace prefixd::hybrid
