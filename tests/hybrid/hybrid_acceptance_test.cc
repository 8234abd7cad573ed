// Acceptance of the hybrid reference client on the tiny model, through a real prefixd-server and
// two processes: this test is the cold process (prefill, store, suffix, greedy decode) and
// `prefixd-hybrid warm` the warm one (fetch, hydrate, suffix, decode). Every layer must be
// bit-exact and every token the same; a partial hit (a layer dropped or corrupted) must fall back
// to a cold prefill with the same tokens. Also runs the `sweep` program end to end.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "config.h"
#include "cpu_backend.h"
#include "integration/server_fixture.h"
#include "model.h"
#include "prefix_cache.h"
#include "prefixd/client.h"
#include "weights.h"

extern char** environ;

namespace prefixd::hybrid {
namespace {

using Json = nlohmann::json;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs prefixd-hybrid with `args`; its exit status (-1 if it did not exit normally).
int RunHybrid(std::vector<std::string> args) {
  args.insert(args.begin(), PREFIXD_HYBRID_BINARY);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// What the cold process saw.
struct ColdRun {
  std::string ns;
  std::vector<int32_t> prefix, suffix, tokens;
  std::vector<std::string> prefix_digests;
};

class HybridAcceptance : public it::ServerTest {
 protected:
  static constexpr int kDecode = 12;

  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer());
    auto client = Client::Connect("127.0.0.1", server_.port());
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::make_unique<Client>(std::move(*client));
    config_ = *BuiltinConfig("tiny");
    auto weights = SyntheticWeights(config_, 0, 2);  // what --weights synthetic means
    ASSERT_TRUE(weights.ok());
    identity_ = weights->identity;
    backend_ =
        std::move(*MakeCpuBackend(config_, std::make_shared<ModelWeights>(std::move(*weights))));
    tmp_ = std::filesystem::temp_directory_path() / ("hybrid-acc-" + std::to_string(::getpid()));
    std::filesystem::create_directories(tmp_);
  }
  void TearDown() override { std::filesystem::remove_all(tmp_); }

  bool HasVStore() {
    auto has = ServerHasVStore(*client_);
    return has.ok() && *has;
  }

  // Cold: prefill the prefix, store its state, then the suffix and greedy decoding.
  ColdRun Cold(const HybridPrefixCache& cache, int64_t prefix_len, uint64_t seed) {
    ColdRun run;
    run.prefix = PseudoRandomTokens(prefix_len, config_.vocab_size, seed);
    run.suffix = PseudoRandomTokens(7, config_.vocab_size, seed + 1);
    run.ns = PrefixNamespace(config_, identity_, run.prefix);
    backend_->Reset();
    EXPECT_TRUE(backend_->Forward(run.prefix, {}).ok());
    run.prefix_digests = DigestState(backend_->host_state());
    auto stored = cache.Store(*client_, run.ns, backend_->host_state());
    EXPECT_TRUE(stored.ok()) << stored.status().ToString();
    std::vector<float> logits(config_.vocab_size);
    EXPECT_TRUE(backend_->Forward(run.suffix, logits).ok());
    run.tokens = *GreedyContinue(*backend_, Argmax(logits), kDecode);
    return run;
  }

  // The warm process for `run`; its result file as JSON.
  Json Warm(const ColdRun& run, KvTransport kv) {
    const std::string request = (tmp_ / "request.json").string();
    const std::string result = (tmp_ / "result.json").string();
    std::ofstream(request) << Json{
        {"ns", run.ns},
        {"prefix", run.prefix},
        {"suffix", run.suffix},
        {"decode_tokens",
         kDecode}}.dump();
    std::filesystem::remove(result);
    const int rc =
        RunHybrid({"warm", "--model", "tiny", "--weights", "synthetic", "--port",
                   std::to_string(server_.port()), "--kv-via", std::string(KvTransportName(kv)),
                   "--request", request, "--result", result});
    EXPECT_EQ(rc, 0) << "prefixd-hybrid warm failed";
    Json out = Json::parse(ReadText(result), nullptr, false);
    EXPECT_FALSE(out.is_discarded()) << "no result file";
    return out;
  }

  void ExpectSameAsCold(const ColdRun& run, const Json& warm) {
    ASSERT_TRUE(warm.contains("layer_digests"));
    const auto digests = warm["layer_digests"].get<std::vector<std::string>>();
    ASSERT_EQ(digests.size(), run.prefix_digests.size());
    for (size_t i = 0; i < digests.size(); ++i) {
      EXPECT_EQ(digests[i], run.prefix_digests[i]) << "layer " << i << " differs";
    }
    EXPECT_EQ(warm["tokens"].get<std::vector<int32_t>>(), run.tokens);
  }

  void BitExactThroughTwoProcesses(KvTransport kv) {
    HybridPrefixCache cache(config_, {.kv = kv});
    const ColdRun run = Cold(cache, 300, 11);  // 300 tokens: several attention key blocks
    const Json warm = Warm(run, kv);
    EXPECT_TRUE(warm["hit"].get<bool>()) << warm["miss_reason"];
    EXPECT_EQ(warm["state_bytes"].get<uint64_t>(),
              backend_->host_state().bytes() - uint64_t(kDecode - 1 + 7) *
                                                   config_.num_attention_layers() * 2 *
                                                   config_.kv_dim() * 4);
    ExpectSameAsCold(run, warm);
  }

  std::unique_ptr<Client> client_;
  ModelConfig config_;
  std::string identity_;
  std::unique_ptr<Backend> backend_;
  std::filesystem::path tmp_;
};

TEST_F(HybridAcceptance, BitExactThroughTwoProcessesKvViaSsm) {
  BitExactThroughTwoProcesses(KvTransport::kSsm);
}

TEST_F(HybridAcceptance, BitExactThroughTwoProcessesKvViaVStore) {
  // The V-store is part of the server: its absence is a failure, not a reason to skip.
  ASSERT_TRUE(HasVStore()) << "this prefixd-server answers no V-store commands";
  BitExactThroughTwoProcesses(KvTransport::kVStore);
}

TEST_F(HybridAcceptance, DroppedLayerFallsBackToColdWithTheSameTokens) {
  HybridPrefixCache cache(config_, {.kv = KvTransport::kSsm});
  for (uint32_t dropped : {1u, 3u}) {  // a GDN layer, then the attention layer
    const ColdRun run = Cold(cache, 120, 20 + dropped);
    ASSERT_TRUE(client_->Drop(run.ns, dropped).ok());
    const Json warm = Warm(run, KvTransport::kSsm);
    EXPECT_FALSE(warm["hit"].get<bool>());
    EXPECT_NE(warm["miss_reason"].get<std::string>().find("layer " + std::to_string(dropped)),
              std::string::npos)
        << warm["miss_reason"];
    ExpectSameAsCold(run, warm);  // the fallback prefill is the cold computation again
  }
}

TEST_F(HybridAcceptance, CorruptedVStoreRowsAreCaughtByTheDigest) {
  // The V-store is part of the server: its absence is a failure, not a reason to skip.
  ASSERT_TRUE(HasVStore()) << "this prefixd-server answers no V-store commands";
  HybridPrefixCache cache(config_, {.kv = KvTransport::kVStore});
  const ColdRun run = Cold(cache, 90, 30);
  // Overwrite the attention layer's K rows with zeros: same length, wrong content.
  const std::string zeros(size_t(90) * config_.kv_dim() * 4, '\0');
  ASSERT_TRUE(client_->Command({"V.STOREBATCH", run.ns + "_pk", "0", "0", "90", zeros}).ok());
  const Json warm = Warm(run, KvTransport::kVStore);
  EXPECT_FALSE(warm["hit"].get<bool>());
  EXPECT_NE(warm["miss_reason"].get<std::string>().find("digest"), std::string::npos)
      << warm["miss_reason"];
  ExpectSameAsCold(run, warm);
}

TEST_F(HybridAcceptance, UnstoredPrefixIsAMiss) {
  HybridPrefixCache cache(config_, {.kv = KvTransport::kSsm});
  ColdRun run = Cold(cache, 50, 40);
  ASSERT_TRUE(cache.Drop(*client_, run.ns).ok());
  const Json warm = Warm(run, KvTransport::kSsm);
  EXPECT_FALSE(warm["hit"].get<bool>());
  EXPECT_NE(warm["miss_reason"].get<std::string>().find("manifest"), std::string::npos);
  ExpectSameAsCold(run, warm);
}

TEST_F(HybridAcceptance, InProcessRoundTripAndManifestChecks) {
  HybridPrefixCache cache(config_, {.kv = KvTransport::kSsm});
  const ColdRun run = Cold(cache, 64, 50);
  SequenceState fetched(config_);
  auto report = cache.Fetch(*client_, run.ns, 64, &fetched);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_TRUE(report->hit) << report->miss_reason;
  EXPECT_EQ(DigestState(fetched), run.prefix_digests);
  EXPECT_EQ(report->layer_digests, run.prefix_digests);
  EXPECT_EQ(report->bytes, fetched.bytes());
  EXPECT_EQ(fetched.n_tokens(), 64);
  // Asking for a different length is a miss, and leaves the state empty.
  report = cache.Fetch(*client_, run.ns, 63, &fetched);
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->hit);
  EXPECT_EQ(fetched.n_tokens(), 0);
  // A transport mismatch is a miss too, as is a garbled manifest.
  HybridPrefixCache vstore(config_, {.kv = KvTransport::kVStore});
  report = vstore.Fetch(*client_, run.ns, 64, &fetched);
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->hit);
  ASSERT_TRUE(client_->Store(run.ns, cache.manifest_layer(), std::string_view("garbage")).ok());
  report = cache.Fetch(*client_, run.ns, 64, &fetched);
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->hit);
  EXPECT_NE(report->miss_reason.find("malformed"), std::string::npos);
}

TEST_F(HybridAcceptance, SweepProgramEndToEnd) {
  const std::string csv = (tmp_ / "sweep.csv").string();
  const std::string svg = (tmp_ / "sweep.svg").string();
  const std::string md = (tmp_ / "sweep.md").string();
  const int rc = RunHybrid({"sweep", "--model", "tiny", "--lengths", "130,40", "--suffix-tokens",
                            "5", "--decode-tokens", "6", "--port", std::to_string(server_.port()),
                            "--csv", csv, "--chart", svg, "--markdown", md, "--loopback-mb", "8"});
  EXPECT_EQ(rc, 0);
  std::istringstream lines(ReadText(csv));
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line,
            "prefix_tokens,cold_ttft_ms,warm_ttft_ms,speedup,state_bytes,fetch_ms,hydrate_ms,"
            "suffix_ms,states_bitexact,token_agreement");
  std::vector<std::string> rows;
  while (std::getline(lines, line)) rows.push_back(line);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].starts_with("40,"));
  EXPECT_TRUE(rows[1].starts_with("130,"));
  for (const std::string& r : rows) EXPECT_TRUE(r.ends_with(",true,6/6")) << r;
  EXPECT_TRUE(ReadText(svg).starts_with("<svg"));
  EXPECT_NE(ReadText(md).find("| 130 |"), std::string::npos);
}

}  // namespace
}  // namespace prefixd::hybrid
