// The drift check for Mamba-2 and RWKV-7 through a real prefixd-server and two processes: this
// test is the cold process (prefill, store, suffix, greedy decode) and `prefixd-hybrid warm` the
// warm one. Every layer must be bit-exact and all 2048 decoded tokens (the seeds' drift-check
// length) the same; a partial hit must fall back to a cold prefill with the same tokens; and the
// sweep program must run end to end for each family.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
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
#include "prefixd/state_blob.h"
#include "two_process_fixture.h"
#include "weights.h"

namespace prefixd::hybrid {
namespace {

using Json = nlohmann::json;

using test::ColdRun;
using test::ReadText;
using test::RunHybrid;

class HybridFamilyAcceptance : public test::TwoProcessTest,
                               public ::testing::WithParamInterface<std::string> {
 protected:
  // One thread: decoding 2048 single tokens is dispatch-bound.
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Start(GetParam(), 1)); }

  nlohmann::json Warm(const ColdRun& run) { return TwoProcessTest::Warm(run, KvTransport::kSsm); }
};

// The drift check: 2048 greedy tokens after a hydrated prefix, all equal to the cold run's.
TEST_P(HybridFamilyAcceptance, BitExactAndAll2048TokensAgreeThroughTwoProcesses) {
  HybridPrefixCache cache(config_, {.kv = KvTransport::kSsm});
  const ColdRun run = Cold(cache, 300, 11, 2048);
  const Json warm = Warm(run);
  EXPECT_TRUE(warm["hit"].get<bool>()) << warm["miss_reason"];
  // A constant-size state: the same bytes whatever the length.
  SequenceState empty(config_);
  EXPECT_EQ(warm["state_bytes"].get<uint64_t>(), empty.bytes());
  ExpectSameAsCold(run, warm);
  // The greedy tokens are not one token repeated (the check would be weak then).
  EXPECT_GT(std::set<int32_t>(run.tokens.begin(), run.tokens.end()).size(), 8u);
}

// Each layer is one SSM.PREFIX blob of the v1 codec with the documented arrays.
TEST_P(HybridFamilyAcceptance, EachLayerIsOneV1BlobWithTheDocumentedArrays) {
  HybridPrefixCache cache(config_, {.kv = KvTransport::kSsm});
  const ColdRun run = Cold(cache, 64, 12, 1);
  for (int64_t i = 0; i < config_.num_layers(); ++i) {
    auto blob = client_->Fetch(run.ns, static_cast<uint32_t>(i));
    ASSERT_TRUE(blob.ok() && blob->has_value()) << "layer " << i;
    auto arrays = DecodeStateBlob(**blob);
    ASSERT_TRUE(arrays.ok()) << arrays.status().ToString();
    const auto specs = RecurrentStateArrays(config_, config_.layers[static_cast<size_t>(i)]);
    ASSERT_EQ(arrays->size(), specs.size());
    ASSERT_EQ(specs.size(), config_.family == ModelFamily::kRwkv7 ? 3u : 2u);
    for (size_t a = 0; a < specs.size(); ++a) {
      EXPECT_EQ((*arrays)[a].dtype, DType::kFloat32);
      EXPECT_EQ((*arrays)[a].shape, specs[a].shape);
    }
  }
}

TEST_P(HybridFamilyAcceptance, PartialHitsFallBackToColdWithTheSameTokens) {
  HybridPrefixCache cache(config_, {.kv = KvTransport::kSsm});
  // A dropped layer.
  ColdRun run = Cold(cache, 120, 21, 16);
  ASSERT_TRUE(client_->Drop(run.ns, 1).ok());
  Json warm = Warm(run);
  EXPECT_FALSE(warm["hit"].get<bool>());
  EXPECT_NE(warm["miss_reason"].get<std::string>().find("layer 1"), std::string::npos)
      << warm["miss_reason"];
  ExpectSameAsCold(run, warm);
  // A layer replaced by a blob with the wrong shapes.
  run = Cold(cache, 121, 22, 16);
  const std::vector<uint8_t> zeros(64, 0);
  const StateArray wrong[1] = {{DType::kFloat32, {1, 16}, zeros}};
  ASSERT_TRUE(client_->Store(run.ns, 2, *EncodeStateBlob(wrong)).ok());
  warm = Warm(run);
  EXPECT_FALSE(warm["hit"].get<bool>());
  EXPECT_NE(warm["miss_reason"].get<std::string>().find("layer 2"), std::string::npos)
      << warm["miss_reason"];
  ExpectSameAsCold(run, warm);
  // A layer with the right shapes but other contents: caught by the manifest's digest.
  run = Cold(cache, 122, 23, 16);
  SequenceState other(config_);
  std::vector<StateArray> arrays;
  for (const StateArraySpec& a : RecurrentStateArrays(config_, config_.layers[0])) {
    arrays.push_back({DType::kFloat32, a.shape, SlotBuffer(other.layers()[0], a.slot).byte_span()});
  }
  ASSERT_TRUE(client_->Store(run.ns, 0, *EncodeStateBlob(arrays)).ok());
  warm = Warm(run);
  EXPECT_FALSE(warm["hit"].get<bool>());
  EXPECT_NE(warm["miss_reason"].get<std::string>().find("digest"), std::string::npos)
      << warm["miss_reason"];
  ExpectSameAsCold(run, warm);
  // A prefix never stored.
  run = Cold(cache, 50, 24, 16);
  ASSERT_TRUE(cache.Drop(*client_, run.ns).ok());
  warm = Warm(run);
  EXPECT_FALSE(warm["hit"].get<bool>());
  EXPECT_NE(warm["miss_reason"].get<std::string>().find("manifest"), std::string::npos);
  ExpectSameAsCold(run, warm);
}

TEST_P(HybridFamilyAcceptance, SweepProgramEndToEnd) {
  const std::string csv = (tmp_ / "sweep.csv").string();
  const int rc =
      RunHybrid({"sweep", "--model", GetParam(), "--lengths", "130,40", "--suffix-tokens", "5",
                 "--decode-tokens", "6", "--threads", "1", "--port", std::to_string(server_.port()),
                 "--csv", csv, "--loopback-mb", "8"});
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
  // The state is the same size at both lengths.
  const std::string bytes = "," + std::to_string(SequenceState(config_).bytes()) + ",";
  for (const std::string& r : rows) {
    EXPECT_TRUE(r.ends_with(",true,6/6")) << r;
    EXPECT_NE(r.find(bytes), std::string::npos) << r;
  }
}

// `prefixd-hybrid forward` (what a check against the upstream code runs) gives this process's
// logits, state digests and greedy tokens bit for bit.
TEST_P(HybridFamilyAcceptance, ForwardCommandReportsTheSameBits) {
  const auto prompt = PseudoRandomTokens(40, config_.vocab_size, 31);
  std::string ids;
  for (int32_t t : prompt) ids += (ids.empty() ? "" : ",") + std::to_string(t);
  const std::string out = (tmp_ / "forward.json").string();
  ASSERT_EQ(RunHybrid({"forward", "--model", GetParam(), "--tokens", ids, "--decode-tokens", "5",
                       "--out", out}),
            0);
  const Json got = Json::parse(ReadText(out), nullptr, false);
  ASSERT_FALSE(got.is_discarded());
  backend_->Reset();
  std::vector<float> logits(config_.vocab_size);
  ASSERT_TRUE(backend_->Forward(prompt, logits).ok());
  EXPECT_EQ(got["logits"].get<std::vector<float>>(), logits);
  EXPECT_EQ(got["layer_digests"].get<std::vector<std::string>>(),
            DigestState(backend_->host_state()));
  EXPECT_EQ(got["argmax"].get<int32_t>(), Argmax(logits));
  EXPECT_EQ(got["greedy"].get<std::vector<int32_t>>(),
            *GreedyContinue(*backend_, Argmax(logits), 5));
  EXPECT_EQ(got["weights"].get<std::string>(), identity_);
  // Ids outside the vocabulary or not numbers are refused.
  EXPECT_EQ(
      RunHybrid({"forward", "--model", GetParam(), "--tokens", std::to_string(config_.vocab_size)}),
      2);
  EXPECT_EQ(RunHybrid({"forward", "--model", GetParam(), "--tokens", "1,,2"}), 2);
}

// The CUDA backend runs Qwen3.5 only: asking it for a family model is a clear error (exit 2), in
// builds with and without CUDA.
TEST_P(HybridFamilyAcceptance, CudaBackendIsRefusedWithAMessage) {
  EXPECT_EQ(RunHybrid({"sweep", "--model", GetParam(), "--backend", "cuda", "--lengths", "8",
                       "--port", std::to_string(server_.port())}),
            2);
  EXPECT_EQ(RunHybrid({"compare", "--model", GetParam()}), 2);
}

INSTANTIATE_TEST_SUITE_P(Families, HybridFamilyAcceptance,
                         ::testing::Values("mamba2-tiny", "rwkv7-tiny"), test::ModelParamName());

}  // namespace
}  // namespace prefixd::hybrid
