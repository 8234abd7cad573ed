// prefixd-hybrid against three prefixd nodes (--cluster): the sweep (this cold process and a warm
// process per length, both through ClusterClient) and the chat run bit-exact with every token
// agreeing, and each prefix's keys — the namespace {hyb…} with its _pk/_pv V-store sessions, the
// chat's {hyb…:chat:b16} — sit together on the node that serves the namespace's slot.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "hybrid_test_util.h"
#include "integration/cluster_nodes.h"
#include "prefixd/client.h"
#include "prefixd/cluster_client.h"

namespace prefixd::hybrid {
namespace {

using test::ReadText;

int RunHybrid(std::vector<std::string> args) {
  return test::RunProgram(PREFIXD_HYBRID_BINARY, std::move(args));
}

// The CSV's rows after its header.
std::vector<std::string> Rows(const std::string& csv) {
  std::istringstream lines(ReadText(csv));
  std::string line;
  std::getline(lines, line);
  std::vector<std::string> rows;
  while (std::getline(lines, line)) rows.push_back(line);
  return rows;
}

// Every key on each node (KEYS answers for the node it is sent to).
std::vector<std::vector<std::string>> KeysByNode(const it::PrefixdCluster& cluster) {
  std::vector<std::vector<std::string>> out;
  for (int i = 0; i < it::kClusterNodes; ++i) {
    auto client = Client::Connect("127.0.0.1", cluster.port(i), std::chrono::milliseconds(5000));
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    std::vector<std::string> keys;
    if (client.ok()) {
      auto reply = client->Command({"KEYS", "*"});
      EXPECT_TRUE(reply.ok()) << reply.status().ToString();
      if (reply.ok()) {
        for (const Reply& k : reply->elements) keys.push_back(k.str);
      }
    }
    out.push_back(std::move(keys));
  }
  return out;
}

class HybridCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ =
        std::filesystem::temp_directory_path() / ("hybrid-cluster-" + std::to_string(::getpid()));
    std::filesystem::create_directories(tmp_);
    // The sweep's --keep leaves its warm request files in TMPDIR: here, removed with tmp_.
    ::setenv("TMPDIR", tmp_.c_str(), 1);
    ASSERT_TRUE(cluster_.Start({"--io-threads", "1", "--appendonly", "no"}));
  }
  void TearDown() override { std::filesystem::remove_all(tmp_); }

  std::filesystem::path tmp_;
  it::PrefixdCluster cluster_;
};

TEST_F(HybridCluster, SweepAndChatRunBitExactAcrossThreeNodes) {
  // --cluster replaces --host/--port; both together are refused before anything runs.
  EXPECT_NE(RunHybrid({"sweep", "--cluster", cluster_.address(0), "--port", "1"}), 0);

  const std::string sweep_csv = (tmp_ / "sweep.csv").string();
  const int sweep_rc =
      RunHybrid({"sweep", "--model", "tiny", "--lengths", "130,40,75", "--suffix-tokens", "5",
                 "--decode-tokens", "6", "--threads", "2", "--cluster", cluster_.address(0),
                 "--keep", "--csv", sweep_csv, "--loopback-mb", "8"});
  EXPECT_EQ(sweep_rc, 0);
  const std::vector<std::string> sweep_rows = Rows(sweep_csv);
  ASSERT_EQ(sweep_rows.size(), 3u);
  for (const std::string& r : sweep_rows) EXPECT_TRUE(r.ends_with(",true,6/6")) << r;

  const std::string chat_csv = (tmp_ / "chat.csv").string();
  const int chat_rc = RunHybrid({"chat",
                                 "--model",
                                 "tiny",
                                 "--weights",
                                 "synthetic",
                                 "--cluster",
                                 cluster_.address(2),
                                 "--workload",
                                 "multiturn",
                                 "--turns",
                                 "3",
                                 "--block",
                                 "16",
                                 "--system-tokens",
                                 "100",
                                 "--message-tokens",
                                 "40",
                                 "--reply-tokens",
                                 "6",
                                 "--threads",
                                 "2",
                                 "--csv",
                                 chat_csv});
  EXPECT_EQ(chat_rc, 0);
  const std::vector<std::string> chat_rows = Rows(chat_csv);
  ASSERT_EQ(chat_rows.size(), 3u);
  for (const std::string& r : chat_rows) EXPECT_TRUE(r.ends_with(",true,6/6")) << r;

  // Where the keys are: the sweep kept three namespaces, each with its two V-store sessions on
  // its own node; the chat's namespace is one key on its node.
  const auto keys = KeysByNode(cluster_);
  int sweep_namespaces = 0, chat_namespaces = 0;
  std::set<int> sweep_nodes;
  for (int i = 0; i < it::kClusterNodes; ++i) {
    const std::vector<std::string>& here = keys[static_cast<size_t>(i)];
    std::map<std::string, int> seen;
    for (const std::string& k : here) ++seen[k];
    for (const std::string& k : here) {
      EXPECT_EQ(it::ClusterOwnerOf(ClusterClient::SlotOf(k)), i) << k << " on node " << i;
      if (!k.starts_with("{hyb")) continue;
      if (k.find(":chat:b16}") != std::string::npos) {
        ++chat_namespaces;
      } else if (k.ends_with("}")) {
        ++sweep_namespaces;
        sweep_nodes.insert(i);
        EXPECT_EQ(seen[k + "_pk"], 1) << k << " without its _pk on node " << i;
        EXPECT_EQ(seen[k + "_pv"], 1) << k << " without its _pv on node " << i;
      }
    }
  }
  EXPECT_EQ(sweep_namespaces, 3);
  // These three prefixes (fixed model, weights and prompts) hash to more than one node, so the
  // sweep's calls were routed, not all sent to the seed.
  EXPECT_GE(sweep_nodes.size(), 2u);
  EXPECT_EQ(chat_namespaces, 1);
}

}  // namespace
}  // namespace prefixd::hybrid
