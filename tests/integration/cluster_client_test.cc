// prefixd::ClusterClient against a real 3-node redis-server 7 cluster on loopback (started from
// hand-written nodes.conf files, the format prefixd's cluster mode reads too): routing by slot and
// hash tag, byte-exact values, MOVED after a slot is moved by hand, ASK during a hand-made
// migration (the map unchanged), the retry bound at its limit and one past, a dropped
// connection, a paused node, and bad seeds. Skipped when redis-server is not installed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"
#include "prefixd/client.h"
#include "prefixd/cluster_client.h"

namespace prefixd::it {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kRedisServer = "/usr/bin/redis-server";
constexpr int kNodes = 3;
constexpr std::array<std::pair<int, int>, kNodes> kRanges{
    {{0, 5460}, {5461, 10922}, {10923, 16383}}};

std::string Address(int port) { return "127.0.0.1:" + std::to_string(port); }

// Three redis-server cluster nodes on loopback, each started with a nodes.conf that already holds
// the whole topology (so no CLUSTER MEET or `redis-cli --cluster create` is needed: the nodes
// connect their buses and report cluster_state:ok once Redis's 2 s rejoin delay is over).
class RedisCluster {
 public:
  RedisCluster() = default;
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;
  ~RedisCluster() { Stop(); }

  // Empty on success, else why not.
  std::string Start() {
    char tmpl[] = "/tmp/prefixd-cluster-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return "mkdtemp failed";
    root_ = tmpl;
    std::mt19937 rng(static_cast<uint32_t>(::getpid()) ^
                     static_cast<uint32_t>(Clock::now().time_since_epoch().count()));
    for (int attempt = 0; attempt < 5; ++attempt) {
      // Client ports base..base+2 and bus ports (+10000) below the kernel's ephemeral range
      // (32768 up), where the ports of other tests' servers and of every connection come from.
      const int base = 20000 + static_cast<int>(rng() % 2700);
      for (int i = 0; i < kNodes; ++i) ports_[i] = base + i;
      if (Launch() && WaitReady(15s)) return {};
      Stop();
    }
    std::string why = "the cluster did not come up in 5 tries; the last one's logs:";
    for (int i = 0; i < kNodes; ++i) {
      std::ifstream log(root_ + "/redis-" + std::to_string(i) + ".log");
      why += "\n--- node " + std::to_string(i) + "\n";
      why.append(std::istreambuf_iterator<char>(log), std::istreambuf_iterator<char>());
    }
    return why;
  }

  void Stop() {
    for (pid_t& pid : pids_) {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
      pid = -1;
    }
  }

  const std::string& root() const { return root_; }
  int port(int i) const { return ports_[static_cast<size_t>(i)]; }
  std::string address(int i) const { return Address(port(i)); }
  static std::string id(int i) { return std::string(40, static_cast<char>('a' + i)); }
  static int OwnerOf(uint16_t slot) {
    for (int i = 0; i < kNodes; ++i) {
      if (slot >= kRanges[static_cast<size_t>(i)].first &&
          slot <= kRanges[static_cast<size_t>(i)].second) {
        return i;
      }
    }
    return -1;
  }

  // A plain (non-cluster) connection to node i, for setting up and checking behind the client.
  Client Admin(int i) const {
    auto c = Client::Connect("127.0.0.1", port(i), 5000ms);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }

  // Runs `argv` on node i and expects `want` as its status or string reply.
  void Expect(int i, const std::vector<std::string_view>& argv, std::string_view want) const {
    Client c = Admin(i);
    auto reply = c.Command(argv);
    ASSERT_TRUE(reply.ok()) << argv[0] << " on node " << i << ": " << reply.status().ToString();
    EXPECT_EQ(reply->str, want) << argv[0] << " " << (argv.size() > 1 ? argv[1] : "");
  }

  // CLUSTER SETSLOT <slot> NODE <node> on every node: how a slot is moved by hand.
  void AssignSlot(uint16_t slot, int node) const {
    const std::string s = std::to_string(slot), owner = id(node);
    for (int i = 0; i < kNodes; ++i) Expect(i, {"CLUSTER", "SETSLOT", s, "NODE", owner}, "OK");
  }

  int64_t CountKeysInSlot(int i, uint16_t slot) const {
    Client c = Admin(i);
    auto reply = c.Command({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)});
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    return reply.ok() ? reply->integer : -1;
  }

 private:
  bool Launch() {
    for (int i = 0; i < kNodes; ++i) {
      const std::string conf = root_ + "/nodes-" + std::to_string(i) + ".conf";
      std::ofstream out(conf, std::ios::trunc);
      for (int j = 0; j < kNodes; ++j) {
        const auto [first, last] = kRanges[static_cast<size_t>(j)];
        out << id(j) << " 127.0.0.1:" << port(j) << "@" << port(j) + 10000 << " "
            << (i == j ? "myself,master" : "master") << " - 0 0 " << j + 1 << " connected " << first
            << "-" << last << "\n";
      }
      out << "vars currentEpoch " << kNodes << " lastVoteEpoch 0\n";
      out.close();
      const std::string port_text = std::to_string(port(i));
      const std::string log = root_ + "/redis-" + std::to_string(i) + ".log";
      pids_[static_cast<size_t>(i)] = ::fork();
      if (pids_[static_cast<size_t>(i)] == 0) {
        ::execl(kRedisServer, "redis-server", "--port", port_text.c_str(), "--bind", "127.0.0.1",
                "--cluster-enabled", "yes", "--cluster-config-file", conf.c_str(), "--dir",
                root_.c_str(), "--save", "", "--appendonly", "no", "--loglevel", "warning",
                "--logfile", log.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
      }
    }
    return true;
  }

  bool WaitReady(Millis timeout) {
    const auto deadline = Clock::now() + timeout;
    for (int i = 0; i < kNodes; ++i) {
      for (;;) {
        if (Clock::now() > deadline) return false;
        if (int status = 0; ::waitpid(pids_[static_cast<size_t>(i)], &status, WNOHANG) != 0) {
          pids_[static_cast<size_t>(i)] = -1;  // exited: a port was taken
          return false;
        }
        auto c = Client::Connect("127.0.0.1", port(i), 1000ms);
        if (c.ok()) {
          auto info = c->Command({"CLUSTER", "INFO"});
          if (info.ok() && info->str.find("cluster_state:ok") != std::string::npos) break;
        }
        std::this_thread::sleep_for(50ms);
      }
    }
    return true;
  }

  std::string root_;
  std::array<int, kNodes> ports_{};
  std::array<pid_t, kNodes> pids_{-1, -1, -1};
};

// A key of the form `<prefix><n>` whose slot node `node` serves.
std::string KeyOnNode(int node, std::string_view prefix) {
  for (int n = 0;; ++n) {
    std::string key = std::string(prefix) + std::to_string(n);
    if (RedisCluster::OwnerOf(ClusterClient::SlotOf(key)) == node) return key;
  }
}

// A loopback port nothing listens on (the kernel's pick, released at once).
int UnusedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
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
    if (::access(kRedisServer, X_OK) != 0) return;
    cluster_ = new RedisCluster();
    start_error_ = cluster_->Start();
  }
  static void TearDownTestSuite() {
    if (cluster_ != nullptr) {
      cluster_->Stop();
      std::error_code ec;
      if (start_error_.empty() && std::getenv("PREFIXD_IT_KEEP") == nullptr) {
        std::filesystem::remove_all(cluster_->root(), ec);
      }
    }
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (cluster_ == nullptr)
      GTEST_SKIP() << "redis-server is not installed (" << kRedisServer << ")";
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
  Client admin = cluster_->Admin(0);
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
  std::array<int64_t, kNodes> per_node{};
  for (int n = 0; n < 300; ++n) {
    const std::string key = "k:" + std::to_string(n);
    const std::string value = RandomValue(rng, static_cast<size_t>(rng() % 4097));
    auto ok = Set(cc, key, value);
    ASSERT_TRUE(ok.ok()) << key << ": " << ok.status().ToString();
    EXPECT_EQ(ok->str, "OK");
    const int owner = RedisCluster::OwnerOf(ClusterClient::SlotOf(key));
    EXPECT_EQ(cc.NodeOf(key), cluster_->address(owner)) << key;
    ++per_node[static_cast<size_t>(owner)];
    values[key] = value;
  }
  for (int i = 0; i < kNodes; ++i) {
    Client node = cluster_->Admin(i);
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
    Client owner = cluster_->Admin(RedisCluster::OwnerOf(ClusterClient::SlotOf(key)));
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
  const std::string key = KeyOnNode(0, "moved:");
  const uint16_t slot = ClusterClient::SlotOf(key);
  ClusterClient cc = Connect(0);
  ClusterClient no_retry = Connect(2, /*max_retries=*/0);
  ClusterClient one_retry = Connect(2, /*max_retries=*/1);
  ASSERT_EQ(cc.NodeOf(key), cluster_->address(0));

  // The slot moves to node 1 (empty, as Redis requires); every client's map is now stale.
  cluster_->AssignSlot(slot, 1);
  ASSERT_EQ(cc.NodeOf(key), cluster_->address(0));

  // One try and no retry: the MOVED itself, prefixed, code kept.
  auto refused = Set(no_retry, key, "x");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kServerError);
  EXPECT_EQ(refused.status().message(), "cluster: slot " + std::to_string(slot) +
                                            ": gave up after 1 tries: MOVED " +
                                            std::to_string(slot) + " " + cluster_->address(1));
  EXPECT_EQ(cluster_->CountKeysInSlot(1, slot), 0);

  // One retry is enough: MOVED, then the new owner.
  auto stored = Set(one_retry, key, "after the move");
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(one_retry.NodeOf(key), cluster_->address(1));
  EXPECT_EQ(cluster_->CountKeysInSlot(1, slot), 1);
  EXPECT_EQ(cluster_->CountKeysInSlot(0, slot), 0);

  // The other stale client reads it from the new owner, and its whole map was refreshed.
  auto got = Get(cc, key);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->str, "after the move");
  EXPECT_EQ(cc.NodeOf(key), cluster_->address(1));
  EXPECT_EQ(cc.NodeOf(KeyOnNode(2, "other:")), cluster_->address(2));

  // And back.
  ASSERT_TRUE(cc.Command(key, {"DEL", key}).ok());
  cluster_->AssignSlot(slot, 0);
  auto gone = Get(cc, key);
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_TRUE(gone->is_nil());
  EXPECT_EQ(cc.NodeOf(key), cluster_->address(0));
}

void RedisClusterTest::FollowsAskDuringAMigrationWithoutChangingTheMap() {
  // Two keys of one slot (one hash tag) on node 0; the slot is migrating to node 1.
  const std::string tag = "{" + KeyOnNode(0, "ask") + "}";
  const std::string staying = tag + ":staying", arriving = tag + ":arriving";
  const uint16_t slot = ClusterClient::SlotOf(tag);
  const std::string slot_text = std::to_string(slot);
  ClusterClient cc = Connect(0);
  ASSERT_TRUE(Set(cc, staying, "on the source").ok());
  cluster_->Expect(1, {"CLUSTER", "SETSLOT", slot_text, "IMPORTING", RedisCluster::id(0)}, "OK");
  cluster_->Expect(0, {"CLUSTER", "SETSLOT", slot_text, "MIGRATING", RedisCluster::id(1)}, "OK");

  // A key the source no longer has: ASK, then ASKING + SET on the target.
  auto stored = Set(cc, arriving, "on the target");
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(cc.NodeOf(arriving), cluster_->address(0));  // ASK leaves the map alone
  EXPECT_EQ(cluster_->CountKeysInSlot(0, slot), 1);
  EXPECT_EQ(cluster_->CountKeysInSlot(1, slot), 1);
  auto arrived = Get(cc, arriving);
  ASSERT_TRUE(arrived.ok()) << arrived.status().ToString();
  EXPECT_EQ(arrived->str, "on the target");
  // A key still on the source is served there.
  auto stayed = Get(cc, staying);
  ASSERT_TRUE(stayed.ok()) << stayed.status().ToString();
  EXPECT_EQ(stayed->str, "on the source");
  // Without ASKING the target refuses the key (MOVED back): the client did send it.
  Client target = cluster_->Admin(1);
  auto plain = target.Command({"GET", arriving});
  ASSERT_FALSE(plain.ok());
  EXPECT_TRUE(plain.status().message().starts_with("MOVED " + slot_text))
      << plain.status().message();

  // Finish the migration by hand: the key moves, the slot is assigned, the client follows.
  Client source = cluster_->Admin(0);
  auto migrated = source.Command({"MIGRATE", "127.0.0.1", std::to_string(cluster_->port(1)), "",
                                  "0", "5000", "KEYS", staying});
  ASSERT_TRUE(migrated.ok()) << migrated.status().ToString();
  cluster_->AssignSlot(slot, 1);
  auto after = Get(cc, staying);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->str, "on the source");
  EXPECT_EQ(cc.NodeOf(staying), cluster_->address(1));

  // Restore the slot to node 0.
  ASSERT_TRUE(cc.Command(tag, {"DEL", staying, arriving}).ok());
  cluster_->AssignSlot(slot, 0);
}

void RedisClusterTest::RecoversFromLostConnectionsAndGivesUpOnAStuckNode() {
  // Seeds: a dead one first, then a live one; bad seeds fail with what went wrong.
  const std::string dead = Address(UnusedPort());
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
  RedisServer standalone;
  if (standalone.Start()) {
    auto plain = ClusterClient::Connect(Address(standalone.port()));
    ASSERT_FALSE(plain.ok());
    EXPECT_NE(plain.status().message().find("cluster support disabled"), std::string::npos)
        << plain.status().message();
  }

  // The node drops the client's connection while the slot has moved elsewhere: the client asks
  // another node for the map and goes straight to the new owner (one retry, no MOVED needed).
  const std::string key = KeyOnNode(0, "lost:");
  const uint16_t slot = ClusterClient::SlotOf(key);
  ClusterClient cc = Connect(0, /*max_retries=*/1);
  ASSERT_TRUE(Set(cc, key, "v0").ok());
  ASSERT_TRUE(cc.Command(key, {"DEL", key}).ok());
  cluster_->AssignSlot(slot, 1);
  Client node0 = cluster_->Admin(0);
  auto killed = node0.Command({"CLIENT", "KILL", "TYPE", "normal"});
  ASSERT_TRUE(killed.ok()) << killed.status().ToString();
  ASSERT_GE(killed->integer, 1);
  auto stored = Set(cc, key, "v1");
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(cc.NodeOf(key), cluster_->address(1));
  EXPECT_EQ(cluster_->CountKeysInSlot(1, slot), 1);
  ASSERT_TRUE(cc.Command(key, {"DEL", key}).ok());
  cluster_->AssignSlot(slot, 0);

  // A node that stops answering: every try times out, and after the bound the error says so.
  ClusterOptions options;
  options.client.io_timeout = 150ms;
  options.max_retries = 2;
  auto quick = ClusterClient::Connect(cluster_->address(1), options);
  ASSERT_TRUE(quick.ok()) << quick.status().ToString();
  Client pauser = cluster_->Admin(0);
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

TEST(ClusterRedirectTest, KnowsTheRedirectReplies) {
  EXPECT_TRUE(IsClusterRedirect(Status::ServerError("MOVED 3999 127.0.0.1:6381")));
  EXPECT_TRUE(IsClusterRedirect(Status::ServerError("ASK 3999 [::1]:6381")));
  EXPECT_TRUE(IsClusterRedirect(Status::ServerError("MOVED 3999 :6381")));
  EXPECT_TRUE(IsClusterRedirect(
      Status::ServerError("TRYAGAIN Multiple keys request during rehashing of slot")));
  EXPECT_TRUE(IsClusterRedirect(Status::ServerError("CLUSTERDOWN Hash slot not served")));
  EXPECT_FALSE(IsClusterRedirect(Status::ServerError("MOVED 16384 127.0.0.1:6381")));
  EXPECT_FALSE(IsClusterRedirect(Status::ServerError("MOVED 1 127.0.0.1")));
  EXPECT_FALSE(IsClusterRedirect(Status::ServerError("MOVEDX 1 127.0.0.1:1")));
  EXPECT_FALSE(IsClusterRedirect(Status::IoError("MOVED 1 127.0.0.1:1")));
  EXPECT_FALSE(IsClusterRedirect(Status::ServerError("ERR unknown command")));
}

}  // namespace
}  // namespace prefixd::it
