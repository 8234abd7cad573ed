// Acceptance of the hybrid reference client on the tiny model, through a real prefixd-server and
// two processes: this test is the cold process (prefill, store, suffix, greedy decode) and
// `prefixd-hybrid warm` the warm one (fetch, hydrate, suffix, decode). Every layer must be
// bit-exact and every token the same; a partial hit (a layer dropped or corrupted) must fall back
// to a cold prefill with the same tokens. Also runs the `sweep` program end to end.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "config.h"
#include "cpu_backend.h"
#include "hybrid_test_util.h"
#include "integration/server_fixture.h"
#include "model.h"
#include "prefix_cache.h"
#include "prefixd/client.h"
#include "two_process_fixture.h"
#include "weights.h"

namespace prefixd::hybrid {
namespace {

using Json = nlohmann::json;

using test::ColdRun;
using test::ReadText;
using test::RunHybrid;

class HybridAcceptance : public test::TwoProcessTest {
 protected:
  static constexpr int kDecode = 12;

  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Start("tiny", 0)); }

  bool HasVStore() {
    auto has = ServerHasVStore(*client_);
    return has.ok() && *has;
  }

  ColdRun Cold(const HybridPrefixCache& cache, int64_t prefix_len, uint64_t seed) {
    return TwoProcessTest::Cold(cache, prefix_len, seed, kDecode);
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

// chat --compare --align-block 48, against the chat's own rows: the exact-key client finds
// nothing (no prompt repeats), the aligned policy's match is a multiple of 48 (in multiturn, the
// last boundary of the turn before), and the TTFT bound has its inputs.
void ExpectComparison(const std::string& workload,
                      const std::vector<std::vector<std::string>>& rows,
                      const std::string& compare_csv) {
  std::istringstream lines(ReadText(compare_csv));
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line,
            "turn,prompt_tokens,index_matched,index_warm_ttft_ms,exact_matched,exact_ttft_ms,"
            "aligned_matched,aligned_ttft_ms,fetched_bytes,restore_ms,prefill_ms,bound_ms,"
            "bound_ratio,within_bound");
  size_t t = 0;
  for (; std::getline(lines, line) && t < rows.size(); ++t) {
    std::vector<std::string> c;
    std::istringstream cols(line);
    for (std::string cell; std::getline(cols, cell, ',');) c.push_back(cell);
    ASSERT_EQ(c.size(), 14u) << line;
    const std::string at = workload + " turn " + std::to_string(t + 1);
    EXPECT_EQ(c[1], rows[t][1]) << at;
    EXPECT_EQ(c[2], rows[t][2]) << at;
    EXPECT_EQ(c[4], "0") << at;                               // exact key
    EXPECT_GE(std::stod(c[5]), std::stod(rows[t][4])) << at;  // a miss costs the cold prefill
    const int64_t aligned = std::stoll(c[6]);
    EXPECT_EQ(aligned % 48, 0) << at;
    EXPECT_LT(aligned, std::stoll(c[1])) << at;
    if (workload != "branch") {
      EXPECT_LE(aligned, std::stoll(c[2])) << at;
    }
    if (workload == "multiturn" && t > 0) {
      EXPECT_EQ(aligned, std::stoll(rows[t - 1][1]) / 48 * 48) << at;
    }
    if (workload == "fanout" && t > 0) {
      EXPECT_EQ(aligned, 96) << at;
    }
    // branch: the edit at 146 + 20 cuts the chain of 48-blocks at 144, where turn 2's prefill
    // left a state; the index stops at turn 1's end, 140, its last checkpoint before the edit.
    if (workload == "branch" && t == 3) {
      EXPECT_EQ(aligned, 144) << at;
    }
    EXPECT_GT(std::stod(c[7]), 0) << at;
    EXPECT_EQ(std::stoll(c[8]) > 0, t > 0) << at;  // fetched bytes
    EXPECT_GT(std::stod(c[11]), 0) << at;          // bound
  }
  EXPECT_EQ(t, rows.size()) << workload;
}

// `prefixd-hybrid chat` over the prefix index: every workload exits 0 (each later turn matched,
// bit-exact, every token agreeing), the CSV has the columns, the branch turn stops at
// or before its edit, and the kv-only control runs but is not bit-exact.
TEST_F(HybridAcceptance, ChatProgramEndToEnd) {
  const std::string port = std::to_string(server_.port());
  auto rows_of = [&](const std::string& csv) {
    std::istringstream lines(ReadText(csv));
    std::string line;
    std::getline(lines, line);
    EXPECT_EQ(line,
              "turn,prompt_tokens,matched_tokens,prefilled_tokens,cold_ttft_ms,warm_ttft_ms,"
              "speedup,states_bitexact,token_agreement");
    std::vector<std::vector<std::string>> rows;
    while (std::getline(lines, line)) {
      std::vector<std::string> cells;
      std::istringstream cols(line);
      for (std::string cell; std::getline(cols, cell, ',');) cells.push_back(cell);
      EXPECT_EQ(cells.size(), 9u) << line;
      rows.push_back(cells);
    }
    return rows;
  };
  for (const std::string workload : {"multiturn", "fanout", "branch"}) {
    const std::string csv = (tmp_ / (workload + ".csv")).string();
    const std::string compare_csv = (tmp_ / (workload + "-compare.csv")).string();
    std::vector<std::string> args = {"chat",      "--model",         "tiny", "--weights",
                                     "synthetic", "--port",          port,   "--workload",
                                     workload,    "--turns",         "4",    "--block",
                                     "16",        "--system-tokens", "100",  "--message-tokens",
                                     "40",        "--reply-tokens",  "6",    "--threads",
                                     "2",         "--csv",           csv};
    args.insert(args.end(), {"--compare", "--align-block", "48", "--compare-csv", compare_csv,
                             "--loopback-mb", "8"});
    const std::string chart = (tmp_ / (workload + ".svg")).string();
    args.insert(args.end(), {"--chart", chart});
    const int rc = RunHybrid(args);
    EXPECT_EQ(rc, 0) << workload;
    const auto rows = rows_of(csv);
    // The chart: an SVG with a cold and a warm bar and a label per turn.
    const std::string svg = ReadText(chart);
    EXPECT_EQ(svg.rfind("<svg ", 0), 0u) << workload;
    auto count = [&svg](std::string_view what) {
      size_t n = 0;
      for (size_t at = svg.find(what); at != std::string::npos; at = svg.find(what, at + 1)) ++n;
      return n;
    };
    EXPECT_EQ(count("class=\"cold\""), 4u) << workload;
    EXPECT_EQ(count("class=\"warm\""), 4u) << workload;
    EXPECT_EQ(count("\"middle\">turn "), 4u) << workload;
    EXPECT_NE(svg.find("</svg>"), std::string::npos) << workload;
    ExpectComparison(workload, rows, compare_csv);
    ASSERT_EQ(rows.size(), 4u) << workload;
    for (size_t t = 0; t < rows.size(); ++t) {
      const auto& r = rows[t];
      EXPECT_EQ(r[0], std::to_string(t + 1));
      EXPECT_EQ(std::stoll(r[1]), std::stoll(r[2]) + std::stoll(r[3])) << workload;
      EXPECT_EQ(r[7], "true") << workload << " turn " << t + 1;
      EXPECT_EQ(r[8], "6/6") << workload << " turn " << t + 1;
      if (t == 0) {
        EXPECT_EQ(r[2], "0");
      } else {
        EXPECT_GT(std::stoll(r[2]), 0) << workload << " turn " << t + 1;
      }
    }
    if (workload == "multiturn") {  // turn k matches exactly turn k-1's prompt
      for (size_t t = 1; t < rows.size(); ++t) EXPECT_EQ(rows[t][2], rows[t - 1][1]);
    }
    if (workload == "fanout") {
      for (size_t t = 1; t < rows.size(); ++t) EXPECT_EQ(rows[t][2], "100");
    }
    if (workload == "branch") {  // the edit sits in turn 2's message: back to turn 1's end
      EXPECT_EQ(rows[3][2], rows[0][1]);
      EXPECT_LT(std::stoll(rows[3][2]), std::stoll(rows[2][2]));
    }
  }
  const std::string csv = (tmp_ / "kvonly.csv").string();
  const int rc = RunHybrid({"chat",      "--model",         "tiny",    "--weights",
                            "synthetic", "--port",          port,      "--workload",
                            "multiturn", "--turns",         "2",       "--block",
                            "16",        "--system-tokens", "100",     "--message-tokens",
                            "40",        "--restore",       "kv-only", "--threads",
                            "2",         "--csv",           csv});
  EXPECT_EQ(rc, 0);
  const auto rows = rows_of(csv);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_GT(std::stoll(rows[1][2]), 0);
  EXPECT_EQ(rows[1][7], "false");  // K/V without the recurrent state is not the prompt's state
}

}  // namespace
}  // namespace prefixd::hybrid
