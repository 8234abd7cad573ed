// Three prefixd nodes on loopback as a Redis Cluster: topology replies byte for byte as Redis 7,
// routing (MOVED, ASK, ASKING, CROSSSLOT, TRYAGAIN, CLUSTERDOWN), a large request for another
// node's slot refused without being held, and the topology surviving a restart.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

constexpr std::array<const char*, 3> kIds = {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1",
                                             "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb2",
                                             "ccccccccccccccccccccccccccccccccccccccc3"};
constexpr std::array<const char*, 3> kRanges = {"0-5460", "5461-10922", "10923-16383"};

// Slots of a few keys, as Redis 7.0.15 computes them.
constexpr int kSlotOfFoo = 12182;      // node 2
constexpr int kSlotOfUser1 = 8106;     // "{user1}.x", node 1
constexpr int kSlotOfBrace1 = 9842;    // "x{1}", node 1
constexpr int kSlotOfSession = 11491;  // "sess1", node 2

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int& port : ports_) port = FreeLoopbackPort();
    for (size_t i = 0; i < 3; ++i) {
      char tmpl[] = "/tmp/prefixd-cluster-XXXXXX";
      ASSERT_NE(::mkdtemp(tmpl), nullptr);
      dirs_[i] = tmpl;
      std::ofstream(dirs_[i] + "/nodes.conf") << NodesConf(i);
      ASSERT_NO_FATAL_FAILURE(StartNode(i));
    }
  }
  void TearDown() override {
    for (size_t i = 0; i < 3; ++i) {
      nodes_[i].Stop();
      std::filesystem::remove_all(dirs_[i]);
    }
  }

  // Redis's bus port is the port + 10000; past 65535 the tests name none (0).
  static int BusPort(int port) { return port + 10000 <= 65535 ? port + 10000 : 0; }

  std::string NodesConf(size_t self) const {
    std::string out;
    for (size_t j = 0; j < 3; ++j) {
      out += std::string(kIds[j]) + " 127.0.0.1:" + std::to_string(ports_[j]) + "@" +
             std::to_string(BusPort(ports_[j])) + (j == self ? " myself,master" : " master") +
             " - 0 0 " + std::to_string(j + 1) + " connected " + kRanges[j] + "\n";
    }
    return out + "vars currentEpoch 3 lastVoteEpoch 0\n";
  }

  void StartNode(size_t i) {
    ServerProcess::Options options;
    options.port = ports_[i];
    options.data_dir = dirs_[i];
    options.flags = {"--cluster-enabled", "yes", "--io-threads", "1"};
    ASSERT_TRUE(nodes_[i].Start(options));
    conns_[i] = RawConnection::Tcp(ports_[i]);
    ASSERT_NE(conns_[i], nullptr);
  }

  std::string Call(size_t node, const std::vector<std::string>& args) {
    return conns_[node]->Call(args);
  }
  std::string Moved(int slot, size_t node) const {
    return "-MOVED " + std::to_string(slot) + " 127.0.0.1:" + std::to_string(ports_[node]) + "\r\n";
  }
  static std::string Bulk(const std::string& s) {
    return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
  }

  std::array<int, 3> ports_{};
  std::array<std::string, 3> dirs_;
  std::array<ServerProcess, 3> nodes_;
  std::array<std::unique_ptr<RawConnection>, 3> conns_;
};

TEST_F(ClusterTest, TopologyRepliesAreRedisBytesAndTheSameOnEveryNode) {
  std::string slots = "*3\r\n";
  for (size_t j = 0; j < 3; ++j) {
    std::string range = kRanges[j];
    size_t dash = range.find('-');
    slots += "*3\r\n:" + range.substr(0, dash) + "\r\n:" + range.substr(dash + 1) + "\r\n*4\r\n" +
             Bulk("127.0.0.1") + ":" + std::to_string(ports_[j]) + "\r\n" + Bulk(kIds[j]) +
             "*0\r\n";
  }
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(Call(i, {"CLUSTER", "SLOTS"}), slots) << "node " << i;
    EXPECT_EQ(Call(i, {"CLUSTER", "MYID"}), Bulk(kIds[i]));
    // CLUSTER NODES: this node's line first, then the others, each as nodes.conf lists them.
    std::string nodes = Call(i, {"CLUSTER", "NODES"});
    std::string first_line = nodes.substr(nodes.find("\r\n") + 2, 40);
    EXPECT_EQ(first_line, kIds[i]);
    EXPECT_NE(nodes.find(std::string(kIds[i]) + " 127.0.0.1:" + std::to_string(ports_[i]) + "@" +
                         std::to_string(BusPort(ports_[i])) + " myself,master - 0 0 " +
                         std::to_string(i + 1) + " connected " + kRanges[i] + "\n"),
              std::string::npos)
        << nodes;
  }
  std::string info = Call(0, {"CLUSTER", "INFO"});
  for (const char* line :
       {"cluster_state:ok\r\n", "cluster_slots_assigned:16384\r\n", "cluster_known_nodes:3\r\n",
        "cluster_size:3\r\n", "cluster_current_epoch:3\r\n", "cluster_my_epoch:1\r\n"}) {
    EXPECT_NE(info.find(line), std::string::npos) << line << " in " << info;
  }
  EXPECT_NE(Call(0, {"INFO", "cluster"}).find("cluster_enabled:1\r\n"), std::string::npos);
  EXPECT_EQ(Call(0, {"CLUSTER", "KEYSLOT", "foo"}), ":" + std::to_string(kSlotOfFoo) + "\r\n");
  EXPECT_EQ(Call(0, {"CLUSTER", "KEYSLOT", "{user1}.x"}),
            ":" + std::to_string(kSlotOfUser1) + "\r\n");
  EXPECT_EQ(Call(0, {"CLUSTER", "KEYSLOT", "sess1"}),
            ":" + std::to_string(kSlotOfSession) + "\r\n");
  // CLUSTER SHARDS: one shard per node, its ranges as integers and its node as a map.
  std::string shards = Call(1, {"CLUSTER", "SHARDS"});
  EXPECT_EQ(shards.substr(0, 4), "*3\r\n");
  EXPECT_NE(
      shards.find("*4\r\n$5\r\nslots\r\n*2\r\n:5461\r\n:10922\r\n$5\r\nnodes\r\n*1\r\n*14\r\n"
                  "$2\r\nid\r\n" +
                  Bulk(kIds[1]) + "$4\r\nport\r\n:" + std::to_string(ports_[1]) +
                  "\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\n"
                  "role\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n"
                  "$6\r\nonline\r\n"),
      std::string::npos)
      << shards;
}

TEST_F(ClusterTest, KeyedCommandsAreServedByTheirSlotsNodeAndRedirectedElsewhere) {
  EXPECT_EQ(Call(0, {"GET", "foo"}), Moved(kSlotOfFoo, 2));
  EXPECT_EQ(Call(2, {"SET", "foo", "bar"}), "+OK\r\n");
  EXPECT_EQ(Call(2, {"GET", "foo"}), "$3\r\nbar\r\n");
  // Our own commands route by their first key like Redis's.
  EXPECT_EQ(Call(0, {"SSM.PREFIX.STORE", "sess1", "0", "state"}), Moved(kSlotOfSession, 2));
  EXPECT_EQ(Call(2, {"SSM.PREFIX.STORE", "sess1", "0", "state"}), "+OK\r\n");
  EXPECT_EQ(Call(1, {"EXISTS", "sess1"}), Moved(kSlotOfSession, 2));
  EXPECT_EQ(Call(2, {"EXISTS", "sess1"}), ":1\r\n");
  EXPECT_EQ(Call(0, {"MSET", "a", "1", "b", "2"}),
            "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
  EXPECT_EQ(Call(1, {"MSET", "x{1}", "1", "y{1}", "2"}), "+OK\r\n");
  EXPECT_EQ(Call(1, {"MGET", "x{1}", "y{1}"}), "*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
  EXPECT_EQ(Call(1, {"CLUSTER", "COUNTKEYSINSLOT", std::to_string(kSlotOfBrace1)}), ":2\r\n");
  std::string keys = Call(1, {"CLUSTER", "GETKEYSINSLOT", std::to_string(kSlotOfBrace1), "10"});
  EXPECT_TRUE(keys == "*2\r\n$4\r\nx{1}\r\n$4\r\ny{1}\r\n" ||
              keys == "*2\r\n$4\r\ny{1}\r\n$4\r\nx{1}\r\n")
      << keys;
  EXPECT_EQ(Call(1, {"CLUSTER", "GETKEYSINSLOT", std::to_string(kSlotOfBrace1), "1"}).substr(0, 4),
            "*1\r\n");
  // Keyless commands are served by any node; only database 0 exists.
  EXPECT_EQ(Call(0, {"PING"}), "+PONG\r\n");
  EXPECT_EQ(Call(0, {"SELECT", "1"}), "-ERR SELECT is not allowed in cluster mode\r\n");
  EXPECT_EQ(Call(0, {"SELECT", "0"}), "+OK\r\n");
  EXPECT_NE(Call(0, {"INFO", "errorstats"}).find("errorstat_MOVED:count=2"), std::string::npos);
}

// A transaction is routed as one request: a queued command for another node's slot is
// redirected and aborts EXEC; at EXEC every key of the queue must be in one slot served here,
// else EXEC answers the redirect itself and the transaction ends (Redis's getNodeByQuery).
TEST_F(ClusterTest, TransactionsAreRoutedAsOneRequest) {
  EXPECT_EQ(Call(1, {"MULTI"}), "+OK\r\n");
  EXPECT_EQ(Call(1, {"SET", "x{1}", "1"}), "+QUEUED\r\n");
  EXPECT_EQ(Call(1, {"GET", "foo"}), Moved(kSlotOfFoo, 2));
  EXPECT_EQ(Call(1, {"EXEC"}), "-EXECABORT Transaction discarded because of previous errors.\r\n");
  EXPECT_EQ(Call(1, {"MULTI"}), "+OK\r\n");
  EXPECT_EQ(Call(1, {"SET", "x{1}", "1"}), "+QUEUED\r\n");
  EXPECT_EQ(Call(1, {"INCR", "y{1}"}), "+QUEUED\r\n");
  EXPECT_EQ(Call(1, {"PING"}), "+QUEUED\r\n");
  EXPECT_EQ(Call(1, {"EXEC"}), "*3\r\n+OK\r\n:1\r\n+PONG\r\n");
  // Two keys node 1 serves, in different slots.
  std::vector<std::string> mine;
  std::string first_slot;
  for (int i = 0; i < 200 && mine.size() < 2; ++i) {
    std::string key = "k" + std::to_string(i);
    if (Call(1, {"GET", key}).starts_with("-MOVED")) continue;
    std::string slot = Call(1, {"CLUSTER", "KEYSLOT", key});
    if (mine.empty() || slot != first_slot) mine.push_back(key), first_slot = slot;
  }
  ASSERT_EQ(mine.size(), 2u);
  EXPECT_EQ(Call(1, {"MULTI"}), "+OK\r\n");
  EXPECT_EQ(Call(1, {"SET", mine[0], "1"}), "+QUEUED\r\n");
  EXPECT_EQ(Call(1, {"SET", mine[1], "1"}), "+QUEUED\r\n");
  EXPECT_EQ(Call(1, {"EXEC"}), "-CROSSSLOT Keys in request don't hash to the same slot\r\n");
  EXPECT_EQ(Call(1, {"EXEC"}), "-ERR EXEC without MULTI\r\n");
  EXPECT_EQ(Call(1, {"EXISTS", mine[0]}), ":0\r\n");
}

TEST_F(ClusterTest, ALargeRequestForAnotherNodesSlotIsRefusedWithoutBeingHeld) {
  const int64_t rss_before = nodes_[0].RssKib();
  // 96 MB for a slot node 0 does not serve: the key is read, the body dropped as it arrives.
  const std::string blob(96u << 20, 's');
  ASSERT_TRUE(conns_[0]->Send(Multibulk({"SSM.PREFIX.STORE", "sess1", "0", blob})));
  EXPECT_EQ(conns_[0]->ReadReply(Millis(30000)), Moved(kSlotOfSession, 2));
  const int64_t rss_after = nodes_[0].RssKib();
  EXPECT_LT(rss_after - rss_before, 16 * 1024) << "before " << rss_before << " KiB";
  // The connection stays in step: the next request is answered.
  EXPECT_EQ(Call(0, {"PING"}), "+PONG\r\n");
  // A second key past the large one cannot change a redirect found from the first.
  ASSERT_TRUE(conns_[0]->Send(Multibulk({"SET", "foo", blob})));
  EXPECT_EQ(conns_[0]->ReadReply(Millis(30000)), Moved(kSlotOfFoo, 2));
  EXPECT_EQ(Call(0, {"ECHO", "in step"}), "$7\r\nin step\r\n");
  // The node that serves the slot takes the same request whole.
  ASSERT_TRUE(conns_[2]->Send(Multibulk({"SSM.PREFIX.STORE", "sess1", "0", blob})));
  EXPECT_EQ(conns_[2]->ReadReply(Millis(30000)), "+OK\r\n");
  EXPECT_EQ(Call(2, {"SSM.PREFIX.LAYERS", "sess1"}).find(std::to_string(blob.size())) !=
                std::string::npos,
            true);
}

TEST_F(ClusterTest, AMigratingSlotAsksForMissingKeysAndTheImporterServesOnlyAskingClients) {
  const std::string slot = std::to_string(kSlotOfBrace1);
  ASSERT_EQ(Call(1, {"SET", "x{1}", "old"}), "+OK\r\n");
  ASSERT_EQ(Call(2, {"CLUSTER", "SETSLOT", slot, "IMPORTING", kIds[1]}), "+OK\r\n");
  ASSERT_EQ(Call(1, {"CLUSTER", "SETSLOT", slot, "MIGRATING", kIds[2]}), "+OK\r\n");
  const std::string ask = "-ASK " + slot + " 127.0.0.1:" + std::to_string(ports_[2]) + "\r\n";
  // The source serves keys it still holds and sends the rest to the target.
  EXPECT_EQ(Call(1, {"GET", "x{1}"}), "$3\r\nold\r\n");
  EXPECT_EQ(Call(1, {"GET", "y{1}"}), ask);
  EXPECT_EQ(Call(1, {"SET", "y{1}", "new"}), ask);
  EXPECT_EQ(Call(1, {"MGET", "x{1}", "y{1}"}),
            "-TRYAGAIN Multiple keys request during rehashing of slot\r\n");
  // The target redirects back unless the client asked; ASKING covers one command.
  EXPECT_EQ(Call(2, {"SET", "y{1}", "new"}), Moved(kSlotOfBrace1, 1));
  EXPECT_EQ(Call(2, {"ASKING"}), "+OK\r\n");
  EXPECT_EQ(Call(2, {"SET", "y{1}", "new"}), "+OK\r\n");
  EXPECT_EQ(Call(2, {"GET", "y{1}"}), Moved(kSlotOfBrace1, 1));
  // The migration shows in CLUSTER NODES on both sides, and survives a restart.
  EXPECT_NE(Call(1, {"CLUSTER", "NODES"}).find("[" + slot + "->-" + kIds[2] + "]"),
            std::string::npos);
  nodes_[2].Stop();
  ASSERT_NO_FATAL_FAILURE(StartNode(2));
  EXPECT_NE(Call(2, {"CLUSTER", "NODES"}).find("[" + slot + "-<-" + kIds[1] + "]"),
            std::string::npos);
  // A node that still holds keys of a slot cannot give it away.
  EXPECT_EQ(Call(1, {"CLUSTER", "SETSLOT", slot, "NODE", kIds[2]}),
            "-ERR Can't assign hashslot " + slot +
                " to a different node while I still hold keys for this hash slot.\r\n");
  EXPECT_EQ(Call(1, {"DEL", "x{1}"}), ":1\r\n");
  // Finishing as redis-cli does: the new owner on every node. The target ends its import with a
  // config epoch bump only when its epoch is not already the greatest (here it is: 3).
  for (size_t i : {2u, 1u, 0u}) {
    EXPECT_EQ(Call(i, {"CLUSTER", "SETSLOT", slot, "NODE", kIds[2]}), "+OK\r\n") << i;
  }
  EXPECT_EQ(Call(2, {"GET", "y{1}"}), "$3\r\nnew\r\n");
  EXPECT_EQ(Call(1, {"GET", "y{1}"}), Moved(kSlotOfBrace1, 2));
  EXPECT_EQ(Call(0, {"GET", "y{1}"}), Moved(kSlotOfBrace1, 2));
  EXPECT_EQ(Call(1, {"CLUSTER", "NODES"}).find("->-"), std::string::npos);
  EXPECT_NE(Call(2, {"CLUSTER", "INFO"}).find("cluster_my_epoch:3\r\n"), std::string::npos);
}

TEST_F(ClusterTest, UnservedSlotsTakeTheClusterDownAndAdminErrorsAreRedisTexts) {
  EXPECT_EQ(Call(0, {"CLUSTER", "ADDSLOTS", "1"}), "-ERR Slot 1 is already busy\r\n");
  EXPECT_EQ(Call(0, {"CLUSTER", "ADDSLOTS", "x"}), "-ERR Invalid or out of range slot\r\n");
  EXPECT_EQ(Call(0, {"CLUSTER", "ADDSLOTS", "16384"}), "-ERR Invalid or out of range slot\r\n");
  EXPECT_EQ(Call(0, {"CLUSTER", "ADDSLOTSRANGE", "5", "3"}),
            "-ERR start slot number 5 is greater than end slot number 3\r\n");
  EXPECT_EQ(Call(0, {"CLUSTER", "DELSLOTSRANGE", "1", "2", "3"}),
            "-ERR wrong number of arguments for 'cluster|delslotsrange' command\r\n");
  EXPECT_EQ(Call(0, {"CLUSTER", "SETSLOT", "1", "FOO"}),
            "-ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP\r\n");
  EXPECT_EQ(Call(0, {"CLUSTER", "SETSLOT", "1", "NODE", "zzz"}), "-ERR Unknown node zzz\r\n");
  EXPECT_EQ(Call(0, {"CLUSTER", "SETSLOT", "1", "MIGRATING", "zzz"}),
            "-ERR I don't know about node zzz\r\n");
  EXPECT_EQ(Call(0, {"CLUSTER", "SETSLOT", "1", "IMPORTING", kIds[1]}),
            "-ERR I'm already the owner of hash slot 1\r\n");
  EXPECT_EQ(Call(0, {"CLUSTER", "SETSLOT", "9000", "MIGRATING", kIds[1]}),
            "-ERR I'm not the owner of hash slot 9000\r\n");
  EXPECT_EQ(Call(0, {"CLUSTER", "COUNTKEYSINSLOT", "16384"}), "-ERR Invalid slot\r\n");
  EXPECT_EQ(Call(0, {"CLUSTER", "GETKEYSINSLOT", "1", "-1"}),
            "-ERR Invalid slot or number of keys\r\n");
  EXPECT_EQ(Call(0, {"CLUSTER", "FOO"}), "-ERR unknown subcommand 'FOO'. Try CLUSTER HELP.\r\n");
  // Slot 12182 ("foo") unassigned in node 0's view: that slot is not served, and with full
  // coverage required the whole cluster is down for keyed commands there.
  EXPECT_EQ(Call(0, {"CLUSTER", "DELSLOTS", std::to_string(kSlotOfFoo)}), "+OK\r\n");
  EXPECT_EQ(Call(0, {"CLUSTER", "DELSLOTS", std::to_string(kSlotOfFoo)}),
            "-ERR Slot 12182 is already unassigned\r\n");
  EXPECT_EQ(Call(0, {"GET", "foo"}), "-CLUSTERDOWN Hash slot not served\r\n");
  EXPECT_EQ(Call(0, {"GET", "{user1}.x"}), "-CLUSTERDOWN The cluster is down\r\n");
  EXPECT_NE(Call(0, {"CLUSTER", "INFO"}).find("cluster_state:fail\r\n"), std::string::npos);
  EXPECT_EQ(Call(0, {"CONFIG", "SET", "cluster-require-full-coverage", "no"}), "+OK\r\n");
  EXPECT_EQ(Call(0, {"GET", "{user1}.x"}), Moved(kSlotOfUser1, 1));
  EXPECT_EQ(Call(0, {"CLUSTER", "ADDSLOTS", std::to_string(kSlotOfFoo)}), "+OK\r\n");
  EXPECT_EQ(Call(0, {"GET", "foo"}), "$-1\r\n");
}

TEST(ClusterConfigTest, ANodeStartsAloneWithoutAFileAndRefusesABrokenOne) {
  ServerProcess fresh;
  ASSERT_TRUE(fresh.Start({.flags = {"--cluster-enabled", "yes"}}));
  auto conn = RawConnection::Tcp(fresh.port());
  ASSERT_NE(conn, nullptr);
  std::string nodes = conn->Call(std::vector<std::string>{"CLUSTER", "NODES"});
  EXPECT_NE(nodes.find(" myself,master - 0 0 0 connected\n"), std::string::npos) << nodes;
  EXPECT_NE(conn->Call(std::vector<std::string>{"CLUSTER", "INFO"}).find("cluster_state:fail"),
            std::string::npos);
  EXPECT_EQ(conn->Call(std::vector<std::string>{"SET", "k", "v"}),
            "-CLUSTERDOWN Hash slot not served\r\n");
  EXPECT_EQ(conn->Call(std::vector<std::string>{"CLUSTER", "ADDSLOTSRANGE", "0", "16383"}),
            "+OK\r\n");
  EXPECT_EQ(conn->Call(std::vector<std::string>{"SET", "k", "v"}), "+OK\r\n");
  EXPECT_TRUE(fresh.Stop());

  ServerProcess plain;
  ASSERT_TRUE(plain.Start());
  auto plain_conn = RawConnection::Tcp(plain.port());
  EXPECT_EQ(plain_conn->Call(std::vector<std::string>{"CLUSTER", "INFO"}),
            "-ERR This instance has cluster support disabled\r\n");
  EXPECT_EQ(plain_conn->Call(std::vector<std::string>{"ASKING"}),
            "-ERR This instance has cluster support disabled\r\n");
  EXPECT_NE(
      plain_conn->Call(std::vector<std::string>{"INFO", "cluster"}).find("cluster_enabled:0\r\n"),
      std::string::npos);

  char tmpl[] = "/tmp/prefixd-cluster-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::ofstream(std::string(tmpl) + "/nodes.conf")
      << "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1 127.0.0.1:1@2 master - 0 0 1 connected 0-5\n";
  ServerProcess broken;
  EXPECT_FALSE(broken.Start({.flags = {"--cluster-enabled", "yes"}, .data_dir = tmpl}));
  EXPECT_NE(broken.ReadLog().find("no node is marked myself"), std::string::npos)
      << broken.ReadLog();
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace prefixd::it
