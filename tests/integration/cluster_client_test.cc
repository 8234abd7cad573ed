// prefixd::ClusterClient against real clusters on loopback (cluster_nodes.h), three nodes each.
// redis-server 7: routing by slot and hash tag, byte-exact values, MOVED after a slot is moved by
// hand, ASK during a hand-made migration (the map unchanged), the retry bound at its limit and
// one past, a dropped connection, a paused node, and bad seeds (skipped when redis-server is not
// installed). prefixd: SSM sessions of up to 1.1 MiB stored and fetched byte-exact through every
// call on all three nodes, KV.PREFIX namespaces by hash tag, MOVED for a large store, ASK,
// TRYAGAIN and CLUSTERDOWN within the retry bound, and a node killed and restarted.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "integration/cluster_nodes.h"
#include "integration/server_fixture.h"
#include "prefixd/client.h"
#include "prefixd/cluster_client.h"

namespace prefixd::it {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string Address(int port) { return "127.0.0.1:" + std::to_string(port); }

// A plain (non-cluster) connection to one node, for setting up and checking behind the client.
Client Admin(int port) {
  auto c = Client::Connect("127.0.0.1", port, 5000ms);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

// Runs `argv` on the node at `port` and expects `want` as its status or string reply.
void Expect(int port, const std::vector<std::string_view>& argv, std::string_view want) {
  Client c = Admin(port);
  auto reply = c.Command(argv);
  ASSERT_TRUE(reply.ok()) << argv[0] << " on port " << port << ": " << reply.status().ToString();
  EXPECT_EQ(reply->str, want) << argv[0] << " " << (argv.size() > 1 ? argv[1] : "");
}

// CLUSTER SETSLOT <slot> NODE <node> on every node: how a slot is moved by hand.
template <typename Cluster>
void AssignSlot(const Cluster& cluster, uint16_t slot, int node) {
  const std::string s = std::to_string(slot), owner = ClusterNodeId(node);
  for (int i = 0; i < kClusterNodes; ++i) {
    Expect(cluster.port(i), {"CLUSTER", "SETSLOT", s, "NODE", owner}, "OK");
  }
}

int64_t CountKeysInSlot(int port, uint16_t slot) {
  Client c = Admin(port);
  auto reply = c.Command({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)});
  EXPECT_TRUE(reply.ok()) << reply.status().ToString();
  return reply.ok() ? reply->integer : -1;
}

std::string RandomValue(std::mt19937_64& rng, size_t size) {
  std::string out(size, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  if (size >= 4) out.replace(0, 4, std::string("\0\r\n$", 4));  // bytes RESP must carry intact
  return out;
}

class RedisClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new RedisCluster();
    start_error_ = cluster_->Start();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (::access(RedisCluster::kBinary, X_OK) != 0) {
      GTEST_SKIP() << "redis-server is not installed (" << RedisCluster::kBinary << ")";
    }
    ASSERT_EQ(start_error_, "");
  }

  static ClusterClient Connect(int seed_node, int max_retries = 5) {
    ClusterOptions options;
    options.max_retries = max_retries;
    auto c = ClusterClient::Connect(cluster_->address(seed_node), options);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }

  // The redirect checks, run by one test on one cluster (each cluster costs Redis's 2 s rejoin
  // delay); each leaves the slots as it found them.
  static void FollowsMovedToTheNewOwnerWithinTheRetryBound();
  static void FollowsAskDuringAMigrationWithoutChangingTheMap();
  static void RecoversFromLostConnectionsAndGivesUpOnAStuckNode();

  static RedisCluster* cluster_;
  static std::string start_error_;
};

RedisCluster* RedisClusterTest::cluster_ = nullptr;
std::string RedisClusterTest::start_error_;

Result<Reply> Set(ClusterClient& c, std::string_view key, std::string_view value) {
  return c.Command(key, {"SET", key, value});
}

Result<Reply> Get(ClusterClient& c, std::string_view key) { return c.Command(key, {"GET", key}); }

TEST_F(RedisClusterTest, RoutesEveryKeyToTheNodeServingItsSlot) {
  // One seed is enough: the map names the other two nodes.
  ClusterClient cc = Connect(1);
  EXPECT_EQ(cc.node_count(), 3u);

  // The slot function is Redis's, hash tags included.
  Client admin = Admin(cluster_->port(0));
  for (std::string_view key : std::initializer_list<std::string_view>{
           "", "foo", "{user1000}.following", "{user1000}.followers", "foo{}{bar}", "foo{{bar}}zap",
           "foo{bar}{zap}", "{}", "a{b", "}{", std::string_view("\0\xff{\r\n}", 6)}) {
    auto slot = admin.Command({"CLUSTER", "KEYSLOT", key});
    ASSERT_TRUE(slot.ok()) << slot.status().ToString();
    EXPECT_EQ(ClusterClient::SlotOf(key), slot->integer) << "key '" << key << "'";
  }

  // 300 keys, values 0..4 KiB of every byte, through Command: each lands on its slot's node.
  std::mt19937_64 rng(7);
  std::map<std::string, std::string> values;
  std::array<int64_t, kClusterNodes> per_node{};
  for (int n = 0; n < 300; ++n) {
    const std::string key = "k:" + std::to_string(n);
    const std::string value = RandomValue(rng, static_cast<size_t>(rng() % 4097));
    auto ok = Set(cc, key, value);
    ASSERT_TRUE(ok.ok()) << key << ": " << ok.status().ToString();
    EXPECT_EQ(ok->str, "OK");
    const int owner = ClusterOwnerOf(ClusterClient::SlotOf(key));
    EXPECT_EQ(cc.NodeOf(key), cluster_->address(owner)) << key;
    ++per_node[static_cast<size_t>(owner)];
    values[key] = value;
  }
  for (int i = 0; i < kClusterNodes; ++i) {
    Client node = Admin(cluster_->port(i));
    auto size = node.Command({"DBSIZE"});
    ASSERT_TRUE(size.ok());
    EXPECT_EQ(size->integer, per_node[static_cast<size_t>(i)]) << "node " << i;
    EXPECT_GT(per_node[static_cast<size_t>(i)], 50) << "node " << i;
  }
  for (const auto& [key, value] : values) {
    auto got = Get(cc, key);
    ASSERT_TRUE(got.ok()) << key << ": " << got.status().ToString();
    ASSERT_EQ(got->type, Reply::Type::kString);
    EXPECT_EQ(got->str, value) << key;
    // And it is there on the owner, not copied elsewhere.
    Client owner = Admin(cluster_->port(ClusterOwnerOf(ClusterClient::SlotOf(key))));
    auto direct = owner.Command({"GET", key});
    ASSERT_TRUE(direct.ok());
    EXPECT_EQ(direct->str, value);
  }

  // Keys sharing a hash tag share a node, so one multi-key command carries them.
  auto mset = cc.Command("{user7}", {"MSET", "{user7}.a", "1", "{user7}.b", "2"});
  ASSERT_TRUE(mset.ok()) << mset.status().ToString();
  auto mget = cc.Command("{user7}", {"MGET", "{user7}.a", "{user7}.b"});
  ASSERT_TRUE(mget.ok());
  ASSERT_EQ(mget->elements.size(), 2u);
  EXPECT_EQ(mget->elements[0].str, "1");
  EXPECT_EQ(mget->elements[1].str, "2");
  // Without one, the server refuses the command, and the client passes the refusal on.
  auto cross = cc.Command("a", {"MSET", "a", "1", "b", "2"});
  ASSERT_FALSE(cross.ok());
  EXPECT_EQ(cross.status().message(), "CROSSSLOT Keys in request don't hash to the same slot");
  EXPECT_FALSE(IsClusterRedirect(cross.status()));

  // Ordinary errors come back unchanged, the connection intact.
  auto wrong = cc.Command("k:0", {"LPUSH", "k:0", "x"});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kServerError);
  EXPECT_EQ(wrong.status().message(),
            "WRONGTYPE Operation against a key holding the wrong kind of value");
  EXPECT_TRUE(Get(cc, "k:0").ok());

  for (const auto& [key, value] : values) ASSERT_TRUE(cc.Command(key, {"DEL", key}).ok());
  ASSERT_TRUE(cc.Command("{user7}", {"DEL", "{user7}.a", "{user7}.b"}).ok());
}

void RedisClusterTest::FollowsMovedToTheNewOwnerWithinTheRetryBound() {
  const std::string key = ClusterKeyOnNode(0, "moved:");
  const uint16_t slot = ClusterClient::SlotOf(key);
  ClusterClient cc = Connect(0);
  ClusterClient no_retry = Connect(2, /*max_retries=*/0);
  ClusterClient one_retry = Connect(2, /*max_retries=*/1);
  ASSERT_EQ(cc.NodeOf(key), cluster_->address(0));

  // The slot moves to node 1 (empty, as Redis requires); every client's map is now stale.
  AssignSlot(*cluster_, slot, 1);
  ASSERT_EQ(cc.NodeOf(key), cluster_->address(0));

  // One try and no retry: the MOVED itself, prefixed, code kept.
  auto refused = Set(no_retry, key, "x");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kServerError);
  EXPECT_EQ(refused.status().message(), "cluster: slot " + std::to_string(slot) +
                                            ": gave up after 1 tries: MOVED " +
                                            std::to_string(slot) + " " + cluster_->address(1));
  EXPECT_EQ(CountKeysInSlot(cluster_->port(1), slot), 0);

  // One retry is enough: MOVED, then the new owner.
  auto stored = Set(one_retry, key, "after the move");
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(one_retry.NodeOf(key), cluster_->address(1));
  EXPECT_EQ(CountKeysInSlot(cluster_->port(1), slot), 1);
  EXPECT_EQ(CountKeysInSlot(cluster_->port(0), slot), 0);

  // The other stale client reads it from the new owner, and its whole map was refreshed.
  auto got = Get(cc, key);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->str, "after the move");
  EXPECT_EQ(cc.NodeOf(key), cluster_->address(1));
  EXPECT_EQ(cc.NodeOf(ClusterKeyOnNode(2, "other:")), cluster_->address(2));

  // And back.
  ASSERT_TRUE(cc.Command(key, {"DEL", key}).ok());
  AssignSlot(*cluster_, slot, 0);
  auto gone = Get(cc, key);
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_TRUE(gone->is_nil());
  EXPECT_EQ(cc.NodeOf(key), cluster_->address(0));
}

void RedisClusterTest::FollowsAskDuringAMigrationWithoutChangingTheMap() {
  // Two keys of one slot (one hash tag) on node 0; the slot is migrating to node 1.
  const std::string tag = "{" + ClusterKeyOnNode(0, "ask") + "}";
  const std::string staying = tag + ":staying", arriving = tag + ":arriving";
  const uint16_t slot = ClusterClient::SlotOf(tag);
  const std::string slot_text = std::to_string(slot);
  ClusterClient cc = Connect(0);
  ASSERT_TRUE(Set(cc, staying, "on the source").ok());
  Expect(cluster_->port(1), {"CLUSTER", "SETSLOT", slot_text, "IMPORTING", ClusterNodeId(0)}, "OK");
  Expect(cluster_->port(0), {"CLUSTER", "SETSLOT", slot_text, "MIGRATING", ClusterNodeId(1)}, "OK");

  // A key the source no longer has: ASK, then ASKING + SET on the target.
  auto stored = Set(cc, arriving, "on the target");
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(cc.NodeOf(arriving), cluster_->address(0));  // ASK leaves the map alone
  EXPECT_EQ(CountKeysInSlot(cluster_->port(0), slot), 1);
  EXPECT_EQ(CountKeysInSlot(cluster_->port(1), slot), 1);
  auto arrived = Get(cc, arriving);
  ASSERT_TRUE(arrived.ok()) << arrived.status().ToString();
  EXPECT_EQ(arrived->str, "on the target");
  // A key still on the source is served there.
  auto stayed = Get(cc, staying);
  ASSERT_TRUE(stayed.ok()) << stayed.status().ToString();
  EXPECT_EQ(stayed->str, "on the source");
  // Without ASKING the target refuses the key (MOVED back): the client did send it.
  Client target = Admin(cluster_->port(1));
  auto plain = target.Command({"GET", arriving});
  ASSERT_FALSE(plain.ok());
  EXPECT_TRUE(plain.status().message().starts_with("MOVED " + slot_text))
      << plain.status().message();

  // Finish the migration by hand: the key moves, the slot is assigned, the client follows.
  Client source = Admin(cluster_->port(0));
  auto migrated = source.Command({"MIGRATE", "127.0.0.1", std::to_string(cluster_->port(1)), "",
                                  "0", "5000", "KEYS", staying});
  ASSERT_TRUE(migrated.ok()) << migrated.status().ToString();
  AssignSlot(*cluster_, slot, 1);
  auto after = Get(cc, staying);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->str, "on the source");
  EXPECT_EQ(cc.NodeOf(staying), cluster_->address(1));

  // Restore the slot to node 0.
  ASSERT_TRUE(cc.Command(tag, {"DEL", staying, arriving}).ok());
  AssignSlot(*cluster_, slot, 0);
}

void RedisClusterTest::RecoversFromLostConnectionsAndGivesUpOnAStuckNode() {
  // Seeds: a dead one first, then a live one; bad seeds fail with what went wrong.
  const std::string dead = Address(FreeLoopbackPort());
  const std::vector<std::string> seeds = {dead, cluster_->address(2)};
  auto via_second = ClusterClient::Connect(seeds);
  ASSERT_TRUE(via_second.ok()) << via_second.status().ToString();
  EXPECT_EQ(via_second->node_count(), 4u);  // the dead seed stays known
  auto none = ClusterClient::Connect(dead);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(none.status().message().find("no node answered CLUSTER SLOTS"), std::string::npos)
      << none.status().message();
  auto malformed = ClusterClient::Connect("127.0.0.1");
  ASSERT_FALSE(malformed.ok());
  EXPECT_EQ(malformed.status().code(), StatusCode::kInvalidArgument);
  ClusterOptions negative;
  negative.max_retries = -1;
  auto refused = ClusterClient::Connect(cluster_->address(0), negative);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  // Against a real redis-server when one is installed (and, under CI=true, always): one that
  // does not start fails the test.
  RedisServer standalone;
  if (RedisServer::Installed() || UnderCi()) {
    ASSERT_TRUE(standalone.Start());
    auto plain = ClusterClient::Connect(Address(standalone.port()));
    ASSERT_FALSE(plain.ok());
    EXPECT_NE(plain.status().message().find("cluster support disabled"), std::string::npos)
        << plain.status().message();
  }

  // The node drops the client's connection while the slot has moved elsewhere: the client asks
  // another node for the map and goes straight to the new owner (one retry, no MOVED needed).
  const std::string key = ClusterKeyOnNode(0, "lost:");
  const uint16_t slot = ClusterClient::SlotOf(key);
  ClusterClient cc = Connect(0, /*max_retries=*/1);
  ASSERT_TRUE(Set(cc, key, "v0").ok());
  ASSERT_TRUE(cc.Command(key, {"DEL", key}).ok());
  AssignSlot(*cluster_, slot, 1);
  Client node0 = Admin(cluster_->port(0));
  auto killed = node0.Command({"CLIENT", "KILL", "TYPE", "normal"});
  ASSERT_TRUE(killed.ok()) << killed.status().ToString();
  ASSERT_GE(killed->integer, 1);
  auto stored = Set(cc, key, "v1");
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(cc.NodeOf(key), cluster_->address(1));
  EXPECT_EQ(CountKeysInSlot(cluster_->port(1), slot), 1);
  ASSERT_TRUE(cc.Command(key, {"DEL", key}).ok());
  AssignSlot(*cluster_, slot, 0);

  // A node that stops answering: every try times out, and after the bound the error says so.
  ClusterOptions options;
  options.client.io_timeout = 150ms;
  options.max_retries = 2;
  auto quick = ClusterClient::Connect(cluster_->address(1), options);
  ASSERT_TRUE(quick.ok()) << quick.status().ToString();
  Client pauser = Admin(cluster_->port(0));
  ASSERT_TRUE(pauser.Command({"CLIENT", "PAUSE", "5000", "WRITE"}).ok());
  const auto start = Clock::now();
  auto stuck = Set(*quick, key, "paused");
  const auto waited = Clock::now() - start;
  ASSERT_TRUE(pauser.Command({"CLIENT", "UNPAUSE"}).ok());
  ASSERT_FALSE(stuck.ok());
  EXPECT_EQ(stuck.status().code(), StatusCode::kTimeout) << stuck.status().ToString();
  EXPECT_TRUE(stuck.status().message().starts_with("cluster: slot " + std::to_string(slot) +
                                                   ": gave up after 3 tries: "))
      << stuck.status().message();
  EXPECT_LT(waited, 3s);
  // Once it answers again, so does the client.
  auto back = Set(*quick, key, "answered");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(quick->Command(key, {"DEL", key}).ok());
}

TEST_F(RedisClusterTest, FollowsRedirectsAndRecoversFromLostNodes) {
  {
    SCOPED_TRACE("MOVED");
    ASSERT_NO_FATAL_FAILURE(FollowsMovedToTheNewOwnerWithinTheRetryBound());
  }
  {
    SCOPED_TRACE("ASK");
    ASSERT_NO_FATAL_FAILURE(FollowsAskDuringAMigrationWithoutChangingTheMap());
  }
  SCOPED_TRACE("lost connections and nodes");
  RecoversFromLostConnectionsAndGivesUpOnAStuckNode();
}

// --- Three prefixd nodes: the client's own commands, and prefixd's redirects. ---

class PrefixdClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(cluster_.Start({"--io-threads", "1", "--appendonly", "no"}));
    auto c = ClusterClient::Connect(cluster_.address(1));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cc_.emplace(std::move(c).value());
  }

  static std::span<const uint8_t> Bytes(const std::string& s) {
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
  }
  static std::string Text(const Blob& b) { return {b.begin(), b.end()}; }

  PrefixdCluster cluster_;
  std::optional<ClusterClient> cc_;
};

TEST_F(PrefixdClusterTest, StoresAndFetchesSessionsByteExactOnEveryNode) {
  ClusterClient& cc = *cc_;
  EXPECT_EQ(cc.node_count(), 3u);
  // 45 sessions of three layers; most small, every fifteenth over 1 MiB (past the server's
  // 32 KiB direct-read threshold, and five FetchInto chunks).
  std::mt19937_64 rng(11);
  struct Session {
    std::string sid;
    std::array<std::string, 3> layers;
  };
  std::vector<Session> sessions;
  std::array<int64_t, kClusterNodes> per_node{};
  for (int n = 0; n < 45; ++n) {
    Session s{"sess:" + std::to_string(n), {}};
    for (std::string& layer : s.layers) {
      const size_t size =
          n % 15 == 0 ? (size_t{1} << 20) + rng() % 65536 : static_cast<size_t>(rng() % 20000);
      layer = RandomValue(rng, size);
    }
    ASSERT_TRUE(cc.Store(s.sid, 0, Bytes(s.layers[0])).ok()) << s.sid;
    const LayerBlob rest[2] = {{1, Bytes(s.layers[1])}, {2, Bytes(s.layers[2])}};
    const Status st = cc.MStore(s.sid, rest);
    ASSERT_TRUE(st.ok()) << s.sid << ": " << st.ToString();
    const int owner = ClusterOwnerOf(ClusterClient::SlotOf(s.sid));
    EXPECT_EQ(cc.NodeOf(s.sid), cluster_.address(owner));
    ++per_node[static_cast<size_t>(owner)];
    sessions.push_back(std::move(s));
  }
  for (int i = 0; i < kClusterNodes; ++i) {
    auto size = Admin(cluster_.port(i)).Command({"DBSIZE"});
    ASSERT_TRUE(size.ok());
    EXPECT_EQ(size->integer, per_node[static_cast<size_t>(i)]) << "node " << i;
    EXPECT_GT(per_node[static_cast<size_t>(i)], 5) << "node " << i;
  }

  std::vector<Client> admins;  // one plain connection per node, to look behind the client
  for (int i = 0; i < kClusterNodes; ++i) admins.push_back(Admin(cluster_.port(i)));
  std::vector<uint8_t> buffer(2u << 20);
  for (const Session& s : sessions) {
    SCOPED_TRACE(s.sid);
    auto whole = cc.Fetch(s.sid, 0);
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    ASSERT_TRUE(whole->has_value());
    EXPECT_TRUE(Text(**whole) == s.layers[0]);
    const uint32_t wanted[4] = {2, 0, 1, 7};
    auto many = cc.MFetch(s.sid, wanted);
    ASSERT_TRUE(many.ok()) << many.status().ToString();
    ASSERT_EQ(many->size(), 4u);
    EXPECT_TRUE((*many)[0] && Text(*(*many)[0]) == s.layers[2]);
    EXPECT_TRUE((*many)[1] && Text(*(*many)[1]) == s.layers[0]);
    EXPECT_TRUE((*many)[2] && Text(*(*many)[2]) == s.layers[1]);
    EXPECT_FALSE((*many)[3].has_value());
    auto streamed = cc.FetchInto(s.sid, 1, buffer, 256u << 10, 4);
    ASSERT_TRUE(streamed.ok()) << streamed.status().ToString();
    ASSERT_EQ(**streamed, s.layers[1].size());
    EXPECT_EQ(std::memcmp(buffer.data(), s.layers[1].data(), s.layers[1].size()), 0);
    auto layers = cc.Layers(s.sid);
    ASSERT_TRUE(layers.ok());
    EXPECT_EQ(*layers,
              (std::vector<LayerInfo>{
                  {0, s.layers[0].size()}, {1, s.layers[1].size()}, {2, s.layers[2].size()}}));
    // Behind the client: the owner has it, the next node sends the caller to the owner.
    const int owner = ClusterOwnerOf(ClusterClient::SlotOf(s.sid));
    auto direct = admins[static_cast<size_t>(owner)].Fetch(s.sid, 2);
    ASSERT_TRUE(direct.ok() && direct->has_value());
    EXPECT_TRUE(Text(**direct) == s.layers[2]);
    auto elsewhere = admins[static_cast<size_t>((owner + 1) % kClusterNodes)].Fetch(s.sid, 2);
    ASSERT_FALSE(elsewhere.ok());
    EXPECT_EQ(
        elsewhere.status().message(),
        "MOVED " + std::to_string(ClusterClient::SlotOf(s.sid)) + " " + cluster_.address(owner));
  }
  for (const Session& s : sessions) {
    ASSERT_TRUE(cc.Drop(s.sid, 2).ok());
    auto layers = cc.Layers(s.sid);
    ASSERT_TRUE(layers.ok());
    EXPECT_EQ(layers->size(), 2u);
    ASSERT_TRUE(cc.Drop(s.sid).ok());
    auto gone = cc.Fetch(s.sid, 0);
    ASSERT_TRUE(gone.ok());
    EXPECT_FALSE(gone->has_value());
  }

  // A KV.PREFIX namespace named as a hash tag keeps its _pk/_pv sessions on its node, so one
  // WithKey unit registers, stores rows in both and finds them.
  const std::vector<float> rows = {1.5f, -2.25f, 3.0f, 0.125f};
  for (int i = 0; i < kClusterNodes; ++i) {
    const std::string ns = "{" + ClusterKeyOnNode(i, "prompt-") + "}";
    auto hit = cc.WithKey(ns, [&](Client& c) -> Result<bool> {
      PREFIXD_RETURN_IF_ERROR(c.KvPrefixRegister(ns, 2, "fp32"));
      PREFIXD_RETURN_IF_ERROR(c.VStoreBatch(ns + "_pk", 0, 0, 2, rows));
      PREFIXD_RETURN_IF_ERROR(c.VStoreBatch(ns + "_pv", 0, 0, 2, rows));
      return c.KvPrefixLookup(ns);
    });
    ASSERT_TRUE(hit.ok()) << ns << ": " << hit.status().ToString();
    EXPECT_TRUE(*hit) << ns;
    EXPECT_EQ(CountKeysInSlot(cluster_.port(i), ClusterClient::SlotOf(ns)), 3) << ns;
  }
  // Without a tag the server refuses the namespace, and the client passes the refusal on.
  auto untagged =
      cc.WithKey("prompt", [](Client& c) { return c.KvPrefixRegister("prompt", 2, "fp32"); });
  ASSERT_FALSE(untagged.ok());
  EXPECT_NE(untagged.message().find("needs a hash tag"), std::string::npos) << untagged.message();
}

TEST_F(PrefixdClusterTest, FollowsMovedAndAskBetweenPrefixdNodes) {
  ClusterClient& cc = *cc_;
  std::mt19937_64 rng(5);
  // MOVED: the slot of a 2 MiB store moves; the wrong node refuses it after the key, the client
  // sends it again to the new owner.
  const std::string sid = ClusterKeyOnNode(0, "moving:");
  const uint16_t slot = ClusterClient::SlotOf(sid);
  const std::string blob = RandomValue(rng, (2u << 20) + 17);
  ASSERT_EQ(cc.NodeOf(sid), cluster_.address(0));
  AssignSlot(cluster_, slot, 1);
  const Status stored = cc.Store(sid, 0, Bytes(blob));
  ASSERT_TRUE(stored.ok()) << stored.ToString();
  EXPECT_EQ(cc.NodeOf(sid), cluster_.address(1));
  EXPECT_EQ(CountKeysInSlot(cluster_.port(1), slot), 1);
  EXPECT_EQ(CountKeysInSlot(cluster_.port(0), slot), 0);
  auto back = cc.Fetch(sid, 0);
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_TRUE(Text(**back) == blob);

  // ASK: a slot migrating from node 0 to node 2; a new session goes to the target with ASKING,
  // an old one is still served by the source, and the map stays as it was.
  const std::string tag = "{" + ClusterKeyOnNode(0, "migrating") + "}";
  const std::string old_sid = tag + ":old", new_sid = tag + ":new";
  const uint16_t moving = ClusterClient::SlotOf(tag);
  const std::string moving_text = std::to_string(moving);
  ASSERT_TRUE(cc.Store(old_sid, 0, Bytes(blob)).ok());
  Expect(cluster_.port(2), {"CLUSTER", "SETSLOT", moving_text, "IMPORTING", ClusterNodeId(0)},
         "OK");
  Expect(cluster_.port(0), {"CLUSTER", "SETSLOT", moving_text, "MIGRATING", ClusterNodeId(2)},
         "OK");
  const std::string fresh = RandomValue(rng, 70000);
  const Status asked = cc.Store(new_sid, 3, Bytes(fresh));
  ASSERT_TRUE(asked.ok()) << asked.ToString();
  EXPECT_EQ(cc.NodeOf(new_sid), cluster_.address(0));
  EXPECT_EQ(CountKeysInSlot(cluster_.port(2), moving), 1);
  EXPECT_EQ(CountKeysInSlot(cluster_.port(0), moving), 1);
  auto fetched_new = cc.Fetch(new_sid, 3);
  ASSERT_TRUE(fetched_new.ok() && fetched_new->has_value()) << fetched_new.status().ToString();
  EXPECT_TRUE(Text(**fetched_new) == fresh);
  auto fetched_old = cc.Fetch(old_sid, 0);
  ASSERT_TRUE(fetched_old.ok() && fetched_old->has_value());
  EXPECT_TRUE(Text(**fetched_old) == blob);
}

TEST_F(PrefixdClusterTest, TryAgainAndClusterDownAreRetriedWithinTheBound) {
  ClusterOptions two_retries;
  two_retries.max_retries = 2;
  auto connected = ClusterClient::Connect(cluster_.address(0), two_retries);
  ASSERT_TRUE(connected.ok()) << connected.status().ToString();
  ClusterClient& cc = *connected;

  // TRYAGAIN: a two-key command in a migrating slot with one key moved; the migration never
  // finishes here, so after the backed-off retries the TRYAGAIN comes back, prefixed.
  const std::string tag = "{" + ClusterKeyOnNode(1, "rehash") + "}";
  const uint16_t slot = ClusterClient::SlotOf(tag);
  ASSERT_TRUE(cc.Store(tag + ":here", 0, std::string_view("x")).ok());
  Expect(cluster_.port(0),
         {"CLUSTER", "SETSLOT", std::to_string(slot), "IMPORTING", ClusterNodeId(1)}, "OK");
  Expect(cluster_.port(1),
         {"CLUSTER", "SETSLOT", std::to_string(slot), "MIGRATING", ClusterNodeId(0)}, "OK");
  const auto start = Clock::now();
  auto both = cc.Command(tag, {"EXISTS", tag + ":here", tag + ":gone"});
  const auto waited = Clock::now() - start;
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().message(),
            "cluster: slot " + std::to_string(slot) +
                ": gave up after 3 tries: TRYAGAIN Multiple keys request during rehashing of slot");
  EXPECT_GE(waited, 60ms);  // 20 + 40 ms of back-off
  EXPECT_LT(waited, 2s);

  // CLUSTERDOWN: a slot deleted on every node. The client reads the map again, finds no node
  // for the slot and says so; the slot assigned again, it is served again.
  const std::string sid = ClusterKeyOnNode(2, "orphan:");
  const std::string orphan = std::to_string(ClusterClient::SlotOf(sid));
  for (int i = 0; i < kClusterNodes; ++i) {
    Expect(cluster_.port(i), {"CLUSTER", "DELSLOTS", orphan}, "OK");
  }
  auto unserved = cc.Fetch(sid, 0);
  ASSERT_FALSE(unserved.ok());
  EXPECT_EQ(unserved.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(unserved.status().message(),
            "cluster: no node serves slot " + orphan + " (CLUSTER SLOTS names none)");
  Expect(cluster_.port(2), {"CLUSTER", "ADDSLOTS", orphan}, "OK");
  for (int i = 0; i < 2; ++i) {
    Expect(cluster_.port(i), {"CLUSTER", "SETSLOT", orphan, "NODE", ClusterNodeId(2)}, "OK");
  }
  auto served = cc.Fetch(sid, 0);
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  EXPECT_FALSE(served->has_value());
  EXPECT_EQ(cc.NodeOf(sid), cluster_.address(2));
}

TEST_F(PrefixdClusterTest, ALostNodeFailsOnlyItsOwnSlotsAndServesAgainAfterARestart) {
  ClusterClient& cc = *cc_;
  std::array<std::string, kClusterNodes> sids;
  for (int i = 0; i < kClusterNodes; ++i) {
    sids[static_cast<size_t>(i)] = ClusterKeyOnNode(i, "kept:");
    ASSERT_TRUE(cc.Store(sids[static_cast<size_t>(i)], 0, std::string_view("state")).ok());
  }
  ASSERT_TRUE(cluster_.node(2).Kill());
  const auto start = Clock::now();
  auto lost = cc.Fetch(sids[2], 0);
  EXPECT_LT(Clock::now() - start, 3s);
  ASSERT_FALSE(lost.ok());
  // Every try after the first finds the port closed.
  EXPECT_EQ(lost.status().code(), StatusCode::kUnavailable) << lost.status().ToString();
  EXPECT_NE(lost.status().message().find("Connection refused"), std::string::npos)
      << lost.status().message();
  EXPECT_TRUE(lost.status().message().starts_with("cluster: slot " +
                                                  std::to_string(ClusterClient::SlotOf(sids[2])) +
                                                  ": gave up after 6 tries"))
      << lost.status().message();
  for (int i = 0; i < 2; ++i) {
    auto kept = cc.Fetch(sids[static_cast<size_t>(i)], 0);
    ASSERT_TRUE(kept.ok() && kept->has_value()) << kept.status().ToString();
    EXPECT_EQ(Text(**kept), "state");
  }
  // Back on its port (a cache without a log: its slots start empty), and the client with it.
  ASSERT_TRUE(cluster_.Restart(2));
  auto empty = cc.Fetch(sids[2], 0);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_FALSE(empty->has_value());
  ASSERT_TRUE(cc.Store(sids[2], 0, std::string_view("again")).ok());
  auto again = Admin(cluster_.port(2)).Fetch(sids[2], 0);
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ(Text(**again), "again");
}

}  // namespace
}  // namespace prefixd::it
