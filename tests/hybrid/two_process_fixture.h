// TwoProcessTest: the fixture of the hybrid acceptance tests. It owns a real prefixd-server, the
// cold process (this test: a CPU backend of one model with synthetic weights) and runs
// `prefixd-hybrid warm` as the second process. Used from the test's thread only.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config.h"
#include "cpu_backend.h"
#include "hybrid_test_util.h"
#include "integration/server_fixture.h"
#include "model.h"
#include "prefix_cache.h"
#include "prefixd/client.h"
#include "weights.h"

namespace prefixd::hybrid::test {

// Runs prefixd-hybrid with `args`; its exit status.
inline int RunHybrid(std::vector<std::string> args) {
  return RunProgram(PREFIXD_HYBRID_BINARY, std::move(args));
}

// What the cold process saw.
struct ColdRun {
  std::string ns;
  std::vector<int32_t> prefix, suffix, tokens;
  std::vector<std::string> prefix_digests;
};

class TwoProcessTest : public it::ServerTest {
 protected:
  // Starts the server (with `server`'s options) and loads `model` (a built-in name or a
  // config.json) with `--weights synthetic` on `threads` threads (0: one per core); the warm
  // process gets the same settings.
  void Start(const std::string& model, int threads, it::ServerProcess::Options server = {}) {
    ASSERT_NO_FATAL_FAILURE(StartServer(std::move(server)));
    auto client = Client::Connect("127.0.0.1", server_.port());
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::make_unique<Client>(std::move(*client));
    model_ = model;
    threads_ = threads;
    auto config = LoadConfig(model);
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config_ = *config;
    auto weights = SyntheticWeights(config_, 0, 2);  // what --weights synthetic means
    ASSERT_TRUE(weights.ok());
    identity_ = weights->identity;
    backend_ = std::move(*MakeCpuBackend(
        config_, std::make_shared<ModelWeights>(std::move(*weights)), {.threads = threads}));
    tmp_ = std::filesystem::temp_directory_path() /
           ("hybrid-acc-" + model + "-" + std::to_string(::getpid()));
    std::filesystem::create_directories(tmp_);
  }
  void TearDown() override {
    if (!tmp_.empty()) std::filesystem::remove_all(tmp_);
  }

  // Cold: prefill the prefix, store its state, then a 7-token suffix and `decode` greedy tokens.
  ColdRun Cold(const HybridPrefixCache& cache, int64_t prefix_len, uint64_t seed, int decode) {
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
    run.tokens = *GreedyContinue(*backend_, Argmax(logits), decode);
    return run;
  }

  // The warm process for `run` (`extra`: more flags, e.g. --unix-socket); its result file as JSON.
  nlohmann::json Warm(const ColdRun& run, KvTransport kv, std::vector<std::string> extra = {}) {
    const std::string request = (tmp_ / "request.json").string();
    const std::string result = (tmp_ / "result.json").string();
    std::ofstream(request) << nlohmann::json{
        {"ns", run.ns},
        {"prefix", run.prefix},
        {"suffix", run.suffix},
        {"decode_tokens",
         run.tokens.size()}}.dump();
    std::filesystem::remove(result);
    std::vector<std::string> args = {"warm",
                                     "--model",
                                     model_,
                                     "--weights",
                                     "synthetic",
                                     "--port",
                                     std::to_string(server_.port()),
                                     "--threads",
                                     std::to_string(threads_),
                                     "--kv-via",
                                     std::string(KvTransportName(kv)),
                                     "--request",
                                     request,
                                     "--result",
                                     result};
    args.insert(args.end(), extra.begin(), extra.end());
    const int rc = RunHybrid(std::move(args));
    EXPECT_EQ(rc, 0) << "prefixd-hybrid warm failed";
    nlohmann::json out = nlohmann::json::parse(ReadText(result), nullptr, false);
    EXPECT_FALSE(out.is_discarded()) << "no result file";
    return out;
  }

  // Every layer's digest and every token of the warm process equal the cold ones.
  void ExpectSameAsCold(const ColdRun& run, const nlohmann::json& warm) {
    ASSERT_TRUE(warm.contains("layer_digests"));
    const auto digests = warm["layer_digests"].get<std::vector<std::string>>();
    ASSERT_EQ(digests.size(), run.prefix_digests.size());
    for (size_t i = 0; i < digests.size(); ++i) {
      EXPECT_EQ(digests[i], run.prefix_digests[i]) << "layer " << i << " differs";
    }
    const auto tokens = warm["tokens"].get<std::vector<int32_t>>();
    ASSERT_EQ(tokens.size(), run.tokens.size());
    size_t agree = 0;
    for (size_t i = 0; i < tokens.size(); ++i) agree += tokens[i] == run.tokens[i];
    EXPECT_EQ(agree, tokens.size()) << "token agreement " << agree << "/" << tokens.size();
  }

  std::unique_ptr<Client> client_;
  std::string model_;
  int threads_ = 0;
  ModelConfig config_;
  std::string identity_;
  std::unique_ptr<Backend> backend_;
  std::filesystem::path tmp_;
};

}  // namespace prefixd::hybrid::test
