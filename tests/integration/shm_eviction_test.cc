// Leases and the memory budget (docs/shm-transport.md, "Leases"), against the real server over its
// unix socket with shm-arenas on: eviction passes over a key whose bytes a lease holds and takes
// the next one; once everything left is leased a write gets -OOM; values deleted, overwritten,
// flushed or expired while leased stay in used_memory (shm_leased_orphan_bytes) until their
// leases end, a client killed with SIGKILL included. Values are 1 MiB and more: a server built
// with AddressSanitizer keeps smaller buffers on the heap, outside the arenas, and leases none.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"
#include "integration/shm_lease_holder.h"
#include "prefixd/shm.h"

namespace prefixd::it {
namespace {

using namespace std::chrono_literals;

// Every value here is one pool size class (1 MiB: 64 KiB steps), so an allocation is exactly this.
constexpr size_t kValue = 1 << 20;
const std::string kOom = "OOM command not allowed when used memory > 'maxmemory'.";

std::string AsString(const ShmView& view) {
  return {reinterpret_cast<const char*>(view.data), view.size};
}

class ShmEvictionTest : public ServerTest {
 protected:
  void Start(std::vector<std::string> flags = {}) {
    flags.insert(flags.end(), {"--shm-arenas", "yes", "--appendonly", "no", "--maxmemory-policy",
                               "allkeys-lru"});
    ASSERT_NO_FATAL_FAILURE(StartServer({.flags = flags, .unix_socket = true}));
    admin_ = ConnectHiredis(server_.port());
    ASSERT_NE(admin_, nullptr);
  }
  void Connect(ShmClient& client) {
    Status st = client.Connect(server_.unix_socket_path());
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  // SET over `client`; its reply's text (OK, or the error).
  std::string Set(ShmClient& client, const std::string& key, const std::string& value) {
    auto r = client.Command({"SET", key, value});
    return r.ok() ? r.value().str : r.status().message();
  }
  void Lease(ShmClient& client, const std::string& key, ShmView& view) {
    Status st = client.Get(key, view);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_NE(view.lease, 0u) << key << " should lie in an arena (" << kValue << " bytes)";
  }
  bool Exists(const std::string& key) {
    RedisReply r = HiredisCommand(admin_.get(), {"EXISTS", key});
    return r != nullptr && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
  }
  void SetMaxmemory(uint64_t bytes) {
    RedisReply r =
        HiredisCommand(admin_.get(), {"CONFIG", "SET", "maxmemory", std::to_string(bytes)});
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
  }
  uint64_t Info(const std::string& field) { return InfoNumber(admin_.get(), field); }
  // Waits (bounded) until INFO's `field` reads `want`.
  bool InfoBecomes(const std::string& field, uint64_t want, Millis timeout = 5000ms) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (Info(field) == want) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  RedisContext admin_;
};

TEST_F(ShmEvictionTest, ALeasedStringSurvivesEvictionAndGoesOnceReleased) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  const std::string leased = Pattern(kValue, 100);
  ASSERT_EQ(Set(client, "leased", leased), "OK");
  ShmView view;
  ASSERT_NO_FATAL_FAILURE(Lease(client, "leased", view));
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(Set(client, "k:" + std::to_string(i), Pattern(kValue, i)), "OK");
  }
  // "leased" is the least recently used key: the first victim, were it not leased.
  const uint64_t limit = Info("used_memory") + kValue / 2;
  ASSERT_NO_FATAL_FAILURE(SetMaxmemory(limit));
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(Set(client, "n:" + std::to_string(i), Pattern(kValue, 50 + i)), "OK");
    // Each write evicts first, then adds one value.
    EXPECT_LE(Info("used_memory"), limit + kValue) << "after write " << i;
  }
  EXPECT_TRUE(Exists("leased")) << "eviction took a key whose bytes a lease holds";
  EXPECT_GE(Info("evicted_keys"), 5u);
  EXPECT_FALSE(Exists("k:0")) << "the next least recently used key should have gone instead";
  EXPECT_GE(Info("shm_eviction_skips"), 5u) << "one pass over the leased key per write";
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), 0u) << "the leased value is still its key's";
  EXPECT_TRUE(AsString(view) == leased);
  EXPECT_TRUE(client.Valid(view));

  // Released: it is the least recently used key again, and the next write evicts it.
  ASSERT_TRUE(client.Release(view).ok());
  const uint64_t skips = Info("shm_eviction_skips");
  ASSERT_EQ(Set(client, "n:last", Pattern(kValue, 60)), "OK");
  EXPECT_FALSE(Exists("leased")) << "a released key is evicted as any other";
  EXPECT_EQ(Info("shm_eviction_skips"), skips);
}

TEST_F(ShmEvictionTest, AnSsmSessionLeasedSurvivesEviction) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  const std::string layer = Pattern(2 * kValue, 200);
  ASSERT_TRUE(client.Command({"SSM.PREFIX.STORE", "session", "0", layer}).ok());
  std::vector<ShmView> views;
  const std::vector<uint32_t> layers = {0};
  ASSERT_TRUE(client.FetchLayers("session", layers, views).ok());
  ASSERT_EQ(views.size(), 1u);
  ASSERT_NE(views[0].lease, 0u);
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(Set(client, "k:" + std::to_string(i), Pattern(kValue, i)), "OK");
  }
  ASSERT_NO_FATAL_FAILURE(SetMaxmemory(Info("used_memory") + kValue / 2));
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(Set(client, "n:" + std::to_string(i), Pattern(kValue, 50 + i)), "OK");
  }
  EXPECT_TRUE(Exists("session")) << "eviction took a session whose layer a lease holds";
  EXPECT_FALSE(Exists("k:0"));
  EXPECT_GE(Info("shm_eviction_skips"), 4u);
  EXPECT_TRUE(AsString(views[0]) == layer);

  ASSERT_TRUE(client.Release(views[0]).ok());
  ASSERT_EQ(Set(client, "n:last", Pattern(kValue, 60)), "OK");
  EXPECT_FALSE(Exists("session")) << "a released session is evicted as any other key";
}

// V-store rows and prefix-index pages: a lease holds the row chunk or slab chunk its piece lies in,
// and the session or namespace it was read through is passed over; an unleased session of the
// same shape, older still, goes. Rows are 1 MiB wide (one row a chunk) and pages 1 MiB, so they
// lie in an arena under AddressSanitizer too.
TEST_F(ShmEvictionTest, LeasedVStoreRowsAndPrefixPagesKeepTheirKeys) {
  ASSERT_NO_FATAL_FAILURE(Start({"--vstore-max-dim", "262144"}));
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  const std::string dim = std::to_string(kValue / 4);
  for (const char* sid : {"unleased", "v"}) {
    ASSERT_TRUE(client.Command({"V.CREATE", sid, dim, "VQUANT", "fp32"}).ok());
    auto r = client.Command({"V.STOREBATCH", sid, "0", "0", "1", Pattern(kValue, 400)});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  const std::string rows = Pattern(kValue, 401);
  ASSERT_TRUE(client.Command({"V.STOREBATCH", "v", "0", "0", "1", rows}).ok());
  std::vector<ShmView> row_views;
  ASSERT_TRUE(client.FetchRows("v", 0, 0, 1, row_views).ok());
  ASSERT_EQ(row_views.size(), 1u);
  ASSERT_NE(row_views[0].lease, 0u) << "a 1 MiB row chunk should lie in an arena";

  // 16 tokens of 4096 fp32 values, 2 layers: 1 MiB pages, in slab chunks of 1 MiB and more.
  constexpr size_t kHalf = 16 * 4096 * 4;
  ASSERT_TRUE(client
                  .Command({"KV.PREFIX.NAMESPACE", "ns", "BLOCK", "16", "ATTN", "2", "KVDIM",
                            "4096", "RECURRENT", "1", "VQUANT", "fp32"})
                  .ok());
  const std::string hashes = std::string(16, 'a') + std::string(16, 'b');
  const std::string layer0 = Pattern(4 * kHalf, 402), layer1 = Pattern(4 * kHalf, 403);
  auto stored = client.Command(
      {"KV.PREFIX.BSTORE", "ns", std::string(16, '\0'), "2", hashes, "0", layer0, "1", layer1});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  std::vector<ShmView> page_views;
  ASSERT_TRUE(client.FetchBlocks("ns", hashes, 0, page_views).ok());
  ASSERT_EQ(page_views.size(), 4u);
  for (const ShmView& p : page_views) ASSERT_NE(p.lease, 0u);
  const auto joined = [](const std::vector<ShmView>& views) {
    std::string out;
    for (const ShmView& v : views) out += AsString(v);
    return out;
  };
  const std::string pages = joined(page_views);

  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(Set(client, "k:" + std::to_string(i), Pattern(kValue, i)), "OK");
  }
  ASSERT_NO_FATAL_FAILURE(SetMaxmemory(Info("used_memory") + kValue / 2));
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(Set(client, "n:" + std::to_string(i), Pattern(kValue, 50 + i)), "OK");
  }
  EXPECT_FALSE(Exists("unleased")) << "the least recently used session, not leased, goes first";
  EXPECT_TRUE(Exists("v")) << "eviction took a V-store session whose rows a lease holds";
  EXPECT_TRUE(Exists("ns")) << "eviction took a namespace whose pages a lease holds";
  EXPECT_FALSE(Exists("k:0"));
  EXPECT_GE(Info("shm_eviction_skips"), 2u);
  EXPECT_TRUE(AsString(row_views[0]) == rows);
  EXPECT_TRUE(joined(page_views) == pages);
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), 0u);

  // Released: they are the least recently used keys, and go with the next writes.
  ASSERT_TRUE(client.Release(row_views[0]).ok());
  std::vector<uint64_t> leases;
  for (const ShmView& p : page_views) leases.push_back(p.lease);
  ASSERT_TRUE(client.Release(leases).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Set(client, "m:" + std::to_string(i), Pattern(kValue, 70 + i)), "OK");
  }
  EXPECT_FALSE(Exists("v"));
  EXPECT_FALSE(Exists("ns"));
}

// A client at its lease cap (4) on every key: eviction has nothing to take, writes get -OOM;
// deleting the leased keys frees nothing while the leases live, so writes stay refused until
// leases end, one value's room per lease. The write is SETRANGE making a 1 MiB value from a
// 1-byte argument: maxmemory is checked before it runs, with no large argument in the count.
TEST_F(ShmEvictionTest, WhenEverythingLeftIsLeasedWritesGetOomUntilLeasesEnd) {
  ASSERT_NO_FATAL_FAILURE(Start({"--shm-max-leases", "4"}));
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  std::vector<std::string> values;
  std::vector<ShmView> views(4);
  for (int i = 0; i < 4; ++i) {
    values.push_back(Pattern(kValue, 300 + i));
    ASSERT_EQ(Set(client, "a:" + std::to_string(i), values[i]), "OK");
    ASSERT_NO_FATAL_FAILURE(Lease(client, "a:" + std::to_string(i), views[i]));
  }
  // At the cap; one past it is refused and leases nothing.
  ShmView refused;
  EXPECT_EQ(client.Get("a:0", refused).code(), StatusCode::kServerError);
  EXPECT_EQ(Info("shm_leases"), 4u);
  const auto grow = [&] {
    auto r = client.Command({"SETRANGE", "big", std::to_string(kValue - 1), "x"});
    return r.ok() ? std::to_string(r.value().integer) : r.status().message();
  };

  // Half a value under what the four leased values hold.
  const uint64_t limit = Info("used_memory") - kValue / 2;
  ASSERT_NO_FATAL_FAILURE(SetMaxmemory(limit));
  const uint64_t skips = Info("shm_eviction_skips");
  EXPECT_EQ(grow(), kOom);
  EXPECT_EQ(Info("shm_eviction_skips"), skips + 4) << "each leased key passed over once";
  EXPECT_EQ(Info("evicted_keys"), 0u);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(Exists("a:" + std::to_string(i)));

  // Deleted, the values are no store's any more, but the leases hold them: still counted.
  RedisReply del = HiredisCommand(admin_.get(), {"DEL", "a:0", "a:1", "a:2", "a:3"});
  ASSERT_NE(del, nullptr);
  ASSERT_EQ(del->integer, 4);
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), 4 * kValue);
  EXPECT_GT(Info("used_memory"), limit);
  EXPECT_EQ(grow(), kOom) << "four leased values held: no room";
  // One lease ended: one value's room.
  ASSERT_TRUE(client.Release(views[0]).ok());
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), 3 * kValue);
  EXPECT_LE(Info("used_memory"), limit);
  EXPECT_EQ(grow(), std::to_string(kValue));
  EXPECT_LE(Info("used_memory"), limit + kValue);
  for (int i = 1; i < 4; ++i) EXPECT_TRUE(AsString(views[i]) == values[i]) << i;
  for (int i = 1; i < 4; ++i) ASSERT_TRUE(client.Release(views[i]).ok());
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), 0u);
}

TEST_F(ShmEvictionTest, ValuesGoneWhileLeasedStayCountedUntilTheLeaseEnds) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  std::vector<std::string> values;
  std::vector<ShmView> views;
  const auto lease_new = [&](const std::string& key, uint64_t seed,
                             const std::vector<std::string>& extra = {}) {
    values.push_back(Pattern(kValue, seed));
    std::vector<std::string_view> args = {"SET", key, values.back()};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = client.Command(args);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    views.emplace_back();
    ASSERT_NO_FATAL_FAILURE(Lease(client, key, views.back()));
  };
  const uint64_t base = Info("used_memory");
  ASSERT_NO_FATAL_FAILURE(lease_new("k", 1));
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), 0u);
  const uint64_t one = Info("used_memory");
  EXPECT_GE(one, base + kValue);

  // Overwritten: the old value is held by the lease alone, and still in used_memory.
  ASSERT_NO_FATAL_FAILURE(lease_new("k", 2));
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), kValue);
  // Client buffers move used_memory by a few bytes from one reading to the next.
  constexpr uint64_t kNoise = 64 << 10;
  EXPECT_GE(Info("used_memory"), one + kValue - kNoise);
  // Deleted.
  ASSERT_TRUE(client.Command({"DEL", "k"}).ok());
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), 2 * kValue);
  // Flushed.
  ASSERT_NO_FATAL_FAILURE(lease_new("f", 3));
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), 2 * kValue);
  ASSERT_TRUE(client.Command({"FLUSHALL"}).ok());
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), 3 * kValue);
  // Expired (the active cycle deletes it; nobody reads it).
  ASSERT_NO_FATAL_FAILURE(lease_new("e", 4, {"PX", "100"}));
  EXPECT_TRUE(InfoBecomes("shm_leased_orphan_bytes", 4 * kValue)) << "an expired leased value";
  RedisReply size = HiredisCommand(admin_.get(), {"DBSIZE"});
  ASSERT_NE(size, nullptr);
  EXPECT_EQ(size->integer, 0);
  EXPECT_GE(Info("used_memory"), base + 4 * kValue - kNoise);
  EXPECT_EQ(Info("shm_leased_bytes"), 4 * kValue);
  for (size_t i = 0; i < views.size(); ++i) {
    EXPECT_TRUE(AsString(views[i]) == values[i]) << "leased bytes changed: " << i;
    EXPECT_TRUE(client.Valid(views[i])) << i;
  }

  // Each release takes its value out of the figure at once.
  ASSERT_TRUE(client.Release(views[0]).ok());
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), 3 * kValue);
  for (size_t i = 1; i < views.size(); ++i) ASSERT_TRUE(client.Release(views[i]).ok());
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), 0u);
  EXPECT_LT(Info("used_memory"), base + kValue);
}

TEST_F(ShmEvictionTest, AKilledClientsLeasedValuesLeaveTheAccount) {
  ASSERT_NO_FATAL_FAILURE(Start());
  {
    ShmClient setter;
    ASSERT_NO_FATAL_FAILURE(Connect(setter));
    ASSERT_EQ(Set(setter, "k", Pattern(4 * kValue, 7)), "OK");
  }
  const LeaseHolder holder = ForkLeaseHolder(server_.unix_socket_path(), "k", 2);
  ASSERT_GT(holder.pid, 0);
  const pid_t child = holder.pid;
  EXPECT_EQ(holder.held, 2);
  RedisReply del = HiredisCommand(admin_.get(), {"DEL", "k"});
  ASSERT_NE(del, nullptr);
  EXPECT_EQ(del->integer, 1);
  // One allocation, counted once however many leases hold it.
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), 4 * kValue);
  EXPECT_EQ(Info("shm_leased_bytes"), 8 * kValue);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(InfoBecomes("shm_leases", 0)) << "a dead client's leases were kept";
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), 0u);
}

// One call's lease holds every allocation its pieces lie in: a session leased by one
// SSM.PREFIX.SHMFETCH of two layers is passed over by eviction while the lease lives; once the
// session is deleted both layers stay counted, each once although a second lease (of one layer)
// shares it, and each lease's end gives back exactly what it alone held; a lease whose time is up
// ends the same way.
TEST_F(ShmEvictionTest, OneCallsLeaseHoldsEveryAllocationOfItsPiecesAndCountsEachOnce) {
  ASSERT_NO_FATAL_FAILURE(Start({"--shm-lease-timeout", "600000"}));
  ShmClient client;
  ASSERT_NO_FATAL_FAILURE(Connect(client));
  const std::string l0 = Pattern(kValue, 700), l1 = Pattern(kValue, 701);
  ASSERT_TRUE(client.Command({"SSM.PREFIX.MSTORE", "s", "0", l0, "1", l1}).ok());
  std::vector<ShmView> both, first;
  const std::vector<uint32_t> two = {0, 1}, one = {0};
  ASSERT_TRUE(client.FetchLayers("s", two, both).ok());
  ASSERT_EQ(both.size(), 2u);
  ASSERT_NE(both[0].lease, 0u);
  ASSERT_EQ(both[1].lease, both[0].lease) << "one lease for the call";
  ASSERT_TRUE(client.FetchLayers("s", one, first).ok());
  ASSERT_NE(first[0].lease, 0u);
  EXPECT_EQ(Info("shm_leases"), 2u);

  // Eviction passes over the session: it would free nothing.
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(Set(client, "k:" + std::to_string(i), Pattern(kValue, 710 + i)), "OK");
  }
  ASSERT_NO_FATAL_FAILURE(SetMaxmemory(Info("used_memory") + kValue / 2));
  const uint64_t skips = Info("shm_eviction_skips");
  ASSERT_EQ(Set(client, "n:0", Pattern(kValue, 720)), "OK");
  EXPECT_TRUE(Exists("s")) << "eviction took a session whose layers a lease holds";
  EXPECT_GT(Info("shm_eviction_skips"), skips);
  ASSERT_NO_FATAL_FAILURE(SetMaxmemory(0));

  // Deleted: both layers are the leases' alone, each counted once.
  ASSERT_TRUE(client.Command({"DEL", "s"}).ok());
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), 2 * kValue);
  // The two-layer lease ends: layer 0 stays, held by the other.
  ASSERT_TRUE(client.Release(both[1]).ok());
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), kValue);
  EXPECT_TRUE(AsString(first[0]) == l0);
  EXPECT_TRUE(client.Valid(first[0]));
  ASSERT_TRUE(client.Release(first[0]).ok());
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), 0u);
  EXPECT_EQ(Info("shm_leases"), 0u);

  // The time limit ends a lease of many allocations as any other.
  ASSERT_TRUE(client.Command({"SSM.PREFIX.MSTORE", "t", "0", l0, "1", l1}).ok());
  ASSERT_TRUE(client.Command({"CONFIG", "SET", "shm-lease-timeout", "200"}).ok());
  ASSERT_TRUE(client.FetchLayers("t", two, both).ok());
  ASSERT_TRUE(client.Command({"DEL", "t"}).ok());
  EXPECT_EQ(Info("shm_leased_orphan_bytes"), 2 * kValue);
  EXPECT_TRUE(InfoBecomes("shm_leases", 0));
  EXPECT_TRUE(InfoBecomes("shm_leased_orphan_bytes", 0));
  EXPECT_FALSE(client.Valid(both[0]));
}

}  // namespace
}  // namespace prefixd::it
