// The typed keyspace over real sockets: TYPE across every type, -WRONGTYPE between them, the
// generic key commands' replies byte for byte against a real redis-server (Debian's, started
// here; an SSM session in prefixd plays the part of a string key in Redis), lazy and active
// expiry, and expiry times that survive a restart through the log and through a snapshot.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

using namespace std::chrono_literals;

class KeyspaceTest : public ServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer({.flags = {"--appendonly", "yes"}}));
    conn_ = RawConnection::Tcp(server_.port());
    ASSERT_NE(conn_, nullptr);
  }
  std::string Call(const std::vector<std::string>& args) { return conn_->Call(args); }
  void Reconnect() {
    conn_ = RawConnection::Tcp(server_.port());
    ASSERT_NE(conn_, nullptr);
  }
  std::unique_ptr<RawConnection> conn_;
};

constexpr std::string_view kWrongType =
    "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

TEST_F(KeyspaceTest, EveryEntryIsAKeyWithAType) {
  EXPECT_EQ(Call({"SSM.PREFIX.MSTORE", "ssm", "0", "a", "1", "b"}), "+OK\r\n");
  EXPECT_EQ(Call({"V.CREATE", "vec", "8"}).substr(0, 1), ":");
  EXPECT_EQ(Call({"TYPE", "ssm"}), "+ssm-prefix\r\n");
  EXPECT_EQ(Call({"TYPE", "vec"}), "+vstore\r\n");
  EXPECT_EQ(Call({"TYPE", "missing"}), "+none\r\n");
  // One session with two layers is one key.
  EXPECT_EQ(Call({"DBSIZE"}), ":2\r\n");
  EXPECT_EQ(Call({"EXISTS", "ssm", "vec", "ssm", "missing"}), ":3\r\n");
  EXPECT_EQ(Call({"SCAN", "0", "TYPE", "vstore"}), "*2\r\n$1\r\n0\r\n*1\r\n$3\r\nvec\r\n");
  EXPECT_EQ(Call({"KEYS", "s*"}), "*1\r\n$3\r\nssm\r\n");
  // DEL removes a session whole, every layer.
  EXPECT_EQ(Call({"DEL", "ssm", "ssm", "missing"}), ":1\r\n");
  EXPECT_EQ(Call({"SSM.PREFIX.FETCH", "ssm", "1"}), "$-1\r\n");
  EXPECT_EQ(Call({"UNLINK", "vec"}), ":1\r\n");
  EXPECT_EQ(Call({"DBSIZE"}), ":0\r\n");
  // A KV.PREFIX registration is a key tying its two V-store sessions; deleting or expiring it
  // removes all three.
  ASSERT_EQ(Call({"KV.PREFIX.REGISTER", "ns", "8", "fp16"}), "+OK\r\n");
  EXPECT_EQ(Call({"TYPE", "ns"}), "+kvprefix\r\n");
  EXPECT_EQ(Call({"TYPE", "ns_pk"}), "+vstore\r\n");
  EXPECT_EQ(Call({"DBSIZE"}), ":3\r\n");
  EXPECT_EQ(Call({"V.CREATE", "ns", "8"}), kWrongType);
  // SSM state under the registration's name is the hybrid prefix's own (Pion stores it there).
  EXPECT_EQ(Call({"SSM.PREFIX.STORE", "ns", "0", "x"}), "+OK\r\n");
  EXPECT_EQ(Call({"TYPE", "ns"}), "+kvprefix\r\n");
  EXPECT_EQ(Call({"DBSIZE"}), ":3\r\n");
  EXPECT_EQ(Call({"DEL", "ns"}), ":1\r\n");
  EXPECT_EQ(Call({"SSM.PREFIX.FETCH", "ns", "0"}), "$-1\r\n");
  EXPECT_EQ(Call({"DBSIZE"}), ":0\r\n");
  ASSERT_EQ(Call({"KV.PREFIX.REGISTER", "ns2", "8", "fp16"}), "+OK\r\n");
  ASSERT_EQ(Call({"PEXPIRE", "ns2", "1"}), ":1\r\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(Call({"EXISTS", "ns2", "ns2_pk", "ns2_pv"}), ":0\r\n");
  EXPECT_EQ(Call({"RANDOMKEY"}), "$-1\r\n");
}

// A small session lives in its key's entry; a registration that takes its name takes its state
// too (it moves to the store with the registration's parts), and deleting it takes all of it.
TEST_F(KeyspaceTest, ARegistrationOverASmallSessionKeepsItsStateAsItsOwn) {
  ASSERT_EQ(Call({"SSM.PREFIX.MSTORE", "hy", "0", "state0", "3", "state3"}), "+OK\r\n");
  EXPECT_EQ(Call({"TYPE", "hy"}), "+ssm-prefix\r\n");
  ASSERT_EQ(Call({"KV.PREFIX.REGISTER", "hy", "8", "fp16"}), "+OK\r\n");
  EXPECT_EQ(Call({"TYPE", "hy"}), "+kvprefix\r\n");
  EXPECT_EQ(Call({"DBSIZE"}), ":3\r\n");
  EXPECT_EQ(Call({"SSM.PREFIX.MFETCH", "hy", "0", "3"}), "*2\r\n$6\r\nstate0\r\n$6\r\nstate3\r\n");
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "hy", "1", "state1"}), "+OK\r\n");
  EXPECT_EQ(Call({"TYPE", "hy"}), "+kvprefix\r\n");
  EXPECT_EQ(Call({"SSM.PREFIX.LAYERS", "hy"}), "*6\r\n:0\r\n:6\r\n:1\r\n:6\r\n:3\r\n:6\r\n");
  EXPECT_EQ(Call({"DEL", "hy"}), ":1\r\n");
  EXPECT_EQ(Call({"SSM.PREFIX.FETCH", "hy", "0"}), "$-1\r\n");
  EXPECT_EQ(Call({"DBSIZE"}), ":0\r\n");
}

// Database 0 is the only one: FLUSHDB empties it as FLUSHALL does, SELECT 0 is the only index.
TEST_F(KeyspaceTest, FlushDbEmptiesTheSelectedDatabase) {
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "s", "0", "x"}), "+OK\r\n");
  ASSERT_EQ(Call({"V.CREATE", "v", "8"}).substr(0, 1), ":");
  EXPECT_EQ(Call({"FLUSHDB"}), "+OK\r\n");
  EXPECT_EQ(Call({"DBSIZE"}), ":0\r\n");
  EXPECT_EQ(Call({"SSM.PREFIX.FETCH", "s", "0"}), "$-1\r\n");
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "s", "0", "x"}), "+OK\r\n");
  EXPECT_EQ(Call({"FLUSHDB", "async"}), "+OK\r\n");
  EXPECT_EQ(Call({"FLUSHDB", "SYNC"}), "+OK\r\n");
  EXPECT_EQ(Call({"DBSIZE"}), ":0\r\n");
  EXPECT_EQ(Call({"FLUSHDB", "LAZY"}), "-ERR syntax error\r\n");
  EXPECT_EQ(Call({"FLUSHDB", "SYNC", "ASYNC"}), "-ERR syntax error\r\n");
  EXPECT_EQ(Call({"SELECT", "0"}), "+OK\r\n");
  EXPECT_EQ(Call({"SELECT", "16"}), "-ERR DB index is out of range\r\n");
  EXPECT_EQ(Call({"SELECT", "99"}), "-ERR DB index is out of range\r\n");
}

TEST_F(KeyspaceTest, ACommandOfAnotherTypeAnswersWrongType) {
  EXPECT_EQ(Call({"SSM.PREFIX.STORE", "s", "0", "x"}), "+OK\r\n");
  EXPECT_EQ(Call({"V.CREATE", "v", "8"}).substr(0, 1), ":");
  EXPECT_EQ(Call({"V.CREATE", "s", "8"}), kWrongType);
  EXPECT_EQ(Call({"V.DROP", "s"}), kWrongType);
  EXPECT_EQ(Call({"SSM.PREFIX.STORE", "v", "0", "x"}), kWrongType);
  EXPECT_EQ(Call({"SSM.PREFIX.FETCH", "v", "0"}), kWrongType);
  EXPECT_EQ(Call({"SSM.PREFIX.MFETCH", "v", "0", "1"}), kWrongType);
  // Nothing was changed by the refused commands.
  EXPECT_EQ(Call({"TYPE", "s"}), "+ssm-prefix\r\n");
  EXPECT_EQ(Call({"TYPE", "v"}), "+vstore\r\n");
  EXPECT_EQ(Call({"SSM.PREFIX.FETCH", "s", "0"}), "$1\r\nx\r\n");
}

// The same commands against redis-server and prefixd, an SSM session standing for a string.
TEST_F(KeyspaceTest, GenericCommandsReplyAsRedisDoes) {
  RedisServer redis;
  PREFIXD_START_REFERENCE_REDIS(redis);
  auto r = RawConnection::Tcp(redis.port());
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->Call({"SET", "k", "v"}), "+OK\r\n");
  ASSERT_EQ(r->Call({"SET", "k2", "v"}), "+OK\r\n");
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "k", "0", "v"}), "+OK\r\n");
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "k2", "0", "v"}), "+OK\r\n");
  const std::vector<std::vector<std::string>> commands = {
      {"EXISTS", "k", "k2", "nope", "k"},
      {"TTL", "k"},
      {"PTTL", "nope"},
      {"EXPIRETIME", "k"},
      {"PEXPIRETIME", "nope"},
      {"PERSIST", "k"},
      {"EXPIRE", "nope", "10"},
      {"EXPIRE", "k", "abc"},
      {"EXPIRE", "k", "10", "NX", "XX"},
      {"EXPIRE", "k", "10", "GT", "LT"},
      {"EXPIRE", "k", "10", "NX", "GT"},
      {"EXPIRE", "k", "10", "BOGUS"},
      {"EXPIRE", "k", "9223372036854775807"},
      {"PEXPIRE", "k", "9223372036854775807"},
      {"EXPIRE", "k", "100", "XX"},
      {"EXPIRE", "k", "100", "NX"},
      {"TTL", "k"},
      {"EXPIRE", "k", "50", "GT"},
      {"EXPIRE", "k", "200", "GT"},
      {"EXPIRE", "k", "300", "LT"},
      {"EXPIRE", "k", "100", "LT"},
      {"TTL", "k"},
      {"EXPIRE", "k2", "100", "GT"},
      {"EXPIRE", "k2", "100", "LT"},
      {"PERSIST", "k"},
      {"TTL", "k"},
      {"EXPIREAT", "k", "99999999999"},
      {"EXPIRETIME", "k"},
      {"PEXPIREAT", "k", "99999999999000"},
      {"PEXPIRETIME", "k"},
      {"TOUCH", "k", "nope", "k2"},
      {"OBJECT", "IDLETIME", "nope"},
      {"OBJECT", "FREQ", "k"},
      {"OBJECT", "REFCOUNT", "nope"},
      {"OBJECT", "ENCODING", "nope"},
      {"OBJECT", "BOGUS", "k"},
      {"MEMORY", "USAGE", "nope"},
      {"SCAN", "x"},
      {"SCAN", "0", "COUNT", "0"},
      {"SCAN", "0", "COUNT", "x"},
      {"SCAN", "0", "MATCH"},
      {"SCAN", "0", "BOGUS", "1"},
      {"SCAN", "0", "MATCH", "zz*"},
      {"KEYS", "zz*"},
      {"KEYS", "k2"},
      {"TYPE", "nope"},
      {"DEL"},
      {"TTL"},
      {"EXPIRE", "k"},
      {"EXPIRE", "k", "-1"},
      {"EXISTS", "k"},
      {"DEL", "k", "k", "nope"},
      {"UNLINK", "k2"},
      {"DBSIZE"},
      {"RANDOMKEY"},
  };
  for (const auto& command : commands) {
    std::string shown;
    for (const auto& a : command) shown += a + " ";
    EXPECT_EQ(Call(command), r->Call(command)) << shown;
  }
  // A cursor no SCAN returned is accepted as strtoul reads it ("-1" wraps); what it walks is
  // each server's own business, as Redis documents.
  EXPECT_EQ(Call({"SCAN", "-1"}).substr(0, 4), "*2\r\n");
}

TEST_F(KeyspaceTest, ScanWalksEveryKeyOnceAcrossCalls) {
  std::set<std::string> stored;
  for (int i = 0; i < 300; ++i) {
    std::string key = "key:" + std::to_string(i);
    ASSERT_EQ(Call({"SSM.PREFIX.STORE", key, "0", "v"}), "+OK\r\n");
    stored.insert(key);
  }
  std::multiset<std::string> seen;
  std::string cursor = "0";
  int calls = 0;
  do {
    auto c = ConnectHiredis(server_.port());
    ASSERT_NE(c, nullptr);
    auto reply = HiredisCommand(c.get(), {"SCAN", cursor, "COUNT", "7"});
    ASSERT_NE(reply, nullptr);
    ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY) << DescribeReply(reply.get());
    cursor = std::string(reply->element[0]->str, reply->element[0]->len);
    for (size_t i = 0; i < reply->element[1]->elements; ++i) {
      seen.emplace(reply->element[1]->element[i]->str, reply->element[1]->element[i]->len);
    }
    ASSERT_LT(++calls, 1000);
  } while (cursor != "0");
  EXPECT_EQ(seen.size(), stored.size());
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()), stored);
  EXPECT_GT(calls, 300 / 7 / 2);  // COUNT bounds each step
}

// Key positions (the directory's buckets, SCAN's order) come from a hash keyed by a secret drawn
// at start, so a client cannot choose keys that pile into one bucket: two servers holding the
// same keys walk them in different orders.
TEST_F(KeyspaceTest, KeyPositionsAreKeyedPerProcess) {
  auto first_step = [](int port) {
    auto c = RawConnection::Tcp(port);
    EXPECT_NE(c, nullptr);
    if (c == nullptr) return std::string();
    for (int i = 0; i < 64; ++i) {
      EXPECT_EQ(c->Call({"SET", "key:" + std::to_string(i), "v"}), "+OK\r\n");
    }
    return c->Call({"SCAN", "0", "COUNT", "8"});
  };
  ServerProcess other;
  ASSERT_TRUE(other.Start());
  const std::string here = first_step(server_.port());
  const std::string there = first_step(other.port());
  EXPECT_NE(here, there);
  EXPECT_TRUE(other.Stop());
}

TEST_F(KeyspaceTest, AnExpiredEntryIsNeverServed) {
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "lazy", "0", "v"}), "+OK\r\n");
  ASSERT_EQ(Call({"PEXPIRE", "lazy", "150"}), ":1\r\n");
  EXPECT_EQ(Call({"SSM.PREFIX.FETCH", "lazy", "0"}), "$1\r\nv\r\n");
  std::this_thread::sleep_for(200ms);
  // Whether active expiry or this lookup removes it, it reads as gone.
  EXPECT_EQ(Call({"SSM.PREFIX.FETCH", "lazy", "0"}), "$-1\r\n");
  EXPECT_EQ(Call({"TTL", "lazy"}), ":-2\r\n");
  // Active expiry removes a key nobody reads, within a cycle or two.
  ASSERT_EQ(Call({"V.CREATE", "active", "8"}).substr(0, 1), ":");
  ASSERT_EQ(Call({"PEXPIRE", "active", "50"}), ":1\r\n");
  std::this_thread::sleep_for(400ms);
  std::string info = Call({"INFO", "keyspace"});
  EXPECT_EQ(info.find("db0:"), std::string::npos) << info;
  std::string stats = Call({"INFO", "stats"});
  EXPECT_NE(stats.find("expired_keys:2\r\n"), std::string::npos) << stats;
  // A time in the past deletes at once, as Redis's EXPIRE does.
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "past", "0", "v"}), "+OK\r\n");
  EXPECT_EQ(Call({"EXPIREAT", "past", "1"}), ":1\r\n");
  EXPECT_EQ(Call({"EXISTS", "past"}), ":0\r\n");
}

// The active expiry pass and a command's lazy expiry race for the same key. Each expired key
// counts once, and a key written again right after it expired keeps the new value: the pass
// must never delete an entry that was written after the one it found expired.
TEST_F(KeyspaceTest, ActiveAndLazyExpiryNeverDoubleCountOrDeleteANewerValue) {
  constexpr int kKeys = 3000;
  auto pipeline = [](RawConnection& c, const std::vector<std::vector<std::string>>& calls) {
    std::string bytes;
    for (const auto& args : calls) bytes += Multibulk(args);
    EXPECT_TRUE(c.Send(bytes));
    std::vector<std::string> replies;
    for (size_t i = 0; i < calls.size(); ++i) replies.push_back(c.ReadReply().value_or(""));
    return replies;
  };
  std::vector<std::vector<std::string>> sets;
  for (int i = 0; i < kKeys; ++i) {
    sets.push_back({"SET", "k" + std::to_string(i), "old", "PX", "150"});
  }
  for (const std::string& r : pipeline(*conn_, sets)) ASSERT_EQ(r, "+OK\r\n");
  // Two clients write every key again with NX until each write lands: NX succeeds only once
  // the old value has expired, so each key ends holding "new" and no expiry.
  std::atomic<int> landed{0};
  auto rewriter = [&](int first, int step) {
    auto c = RawConnection::Tcp(server_.port());
    ASSERT_NE(c, nullptr);
    std::vector<bool> done(kKeys, false);
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    int left = 0;
    for (int i = first; i < kKeys; i += step) ++left;
    while (left > 0 && std::chrono::steady_clock::now() < deadline) {
      std::vector<std::vector<std::string>> calls;
      std::vector<int> which;
      for (int i = first; i < kKeys; i += step) {
        if (done[i]) continue;
        calls.push_back({"SET", "k" + std::to_string(i), "new", "NX"});
        which.push_back(i);
      }
      auto replies = pipeline(*c, calls);
      for (size_t j = 0; j < replies.size(); ++j) {
        if (replies[j] == "+OK\r\n") done[which[j]] = true, --left, ++landed;
      }
    }
  };
  std::thread a(rewriter, 0, 2), b(rewriter, 1, 2);
  a.join(), b.join();
  ASSERT_EQ(landed.load(), kKeys);
  // Long after: every key still holds the newer value.
  std::this_thread::sleep_for(300ms);
  std::vector<std::vector<std::string>> gets;
  for (int i = 0; i < kKeys; ++i) gets.push_back({"GET", "k" + std::to_string(i)});
  int lost = 0;
  for (const std::string& r : pipeline(*conn_, gets)) lost += r != "$3\r\nnew\r\n";
  EXPECT_EQ(lost, 0);
  const std::string stats = Call({"INFO", "stats"});
  EXPECT_NE(stats.find("expired_keys:" + std::to_string(kKeys) + "\r\n"), std::string::npos)
      << stats;
}

TEST_F(KeyspaceTest, ExpiryTimesSurviveRestartThroughLogAndSnapshot) {
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "logged", "0", "v"}), "+OK\r\n");
  ASSERT_EQ(Call({"PEXPIREAT", "logged", "99999999999000"}), ":1\r\n");
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "snap", "0", "v"}), "+OK\r\n");
  ASSERT_EQ(Call({"EXPIREAT", "snap", "88888888888"}), ":1\r\n");
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "short", "0", "v"}), "+OK\r\n");
  ASSERT_EQ(Call({"PEXPIRE", "short", "300"}), ":1\r\n");
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "kept", "0", "v"}), "+OK\r\n");
  ASSERT_EQ(Call({"EXPIRE", "kept", "100"}), ":1\r\n");
  ASSERT_EQ(Call({"PERSIST", "kept"}), ":1\r\n");
  ASSERT_EQ(Call({"SAVE"}), "+OK\r\n");
  // After the snapshot: only in the log.
  ASSERT_EQ(Call({"PEXPIREAT", "logged", "77777777777000"}), ":1\r\n");
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart({.flags = {"--appendonly", "yes"}}));
  ASSERT_NO_FATAL_FAILURE(Reconnect());
  EXPECT_EQ(Call({"PEXPIRETIME", "logged"}), ":77777777777000\r\n");
  EXPECT_EQ(Call({"EXPIRETIME", "snap"}), ":88888888888\r\n");
  EXPECT_EQ(Call({"TTL", "kept"}), ":-1\r\n");
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(Call({"EXISTS", "short"}), ":0\r\n");
  EXPECT_EQ(Call({"DBSIZE"}), ":3\r\n");
  // The deletion by expiry is logged too: it stays deleted after another restart.
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart({.flags = {"--appendonly", "yes"}}));
  ASSERT_NO_FATAL_FAILURE(Reconnect());
  EXPECT_EQ(Call({"DBSIZE"}), ":3\r\n");
  const std::string keyspace = Call({"INFO", "keyspace"});
  EXPECT_NE(keyspace.find("\r\ndb0:keys=3,expires=2,avg_ttl="), std::string::npos) << keyspace;
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The integer of a `:n` reply; -1 for any other reply.
int64_t IntegerReply(const std::string& reply) {
  if (reply.size() < 4 || reply[0] != ':') return -1;
  return std::stoll(reply.substr(1, reply.size() - 3));
}

// LASTSAVE is the server's start until a snapshot is written there (Redis's answer; never 0,
// which redis-py turns into None), with or without the log, and a restart that loads a snapshot
// starts it again at the new start, not at the snapshot's time.
TEST_F(KeyspaceTest, LastSaveIsTheStartUntilASnapshotIsWritten) {
  const int64_t started = IntegerReply(Call({"LASTSAVE"}));
  EXPECT_GE(started, UnixNow() - 60);
  EXPECT_LE(started, UnixNow());
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "k", "0", "v"}), "+OK\r\n");
  ASSERT_EQ(Call({"SAVE"}), "+OK\r\n");
  const int64_t saved = IntegerReply(Call({"LASTSAVE"}));
  EXPECT_GE(saved, started);
  EXPECT_LE(saved, UnixNow());
  std::this_thread::sleep_for(1100ms);  // the restart falls in a later second than the save
  ASSERT_TRUE(server_.Stop());
  const int64_t restarted = UnixNow();
  ASSERT_TRUE(server_.Restart({.flags = {"--appendonly", "yes"}}));
  ASSERT_NO_FATAL_FAILURE(Reconnect());
  EXPECT_EQ(Call({"EXISTS", "k"}), ":1\r\n");
  const int64_t again = IntegerReply(Call({"LASTSAVE"}));
  EXPECT_GE(again, restarted);
  EXPECT_GT(again, saved);
  EXPECT_LE(again, UnixNow());
  const std::string info = Call({"INFO", "persistence"});
  EXPECT_NE(info.find("rdb_last_save_time:" + std::to_string(again) + "\r\n"), std::string::npos)
      << info;

  ServerProcess plain;
  const int64_t before = UnixNow();
  ASSERT_TRUE(plain.Start({.flags = {"--appendonly", "no"}}));
  auto c = RawConnection::Tcp(plain.port());
  ASSERT_NE(c, nullptr);
  const int64_t unlogged = IntegerReply(c->Call(std::vector<std::string>{"LASTSAVE"}));
  EXPECT_GE(unlogged, before);
  EXPECT_LE(unlogged, UnixNow());
}

// ---------------------------------------------------------------------------------------------
// Budget and eviction: whole keys, by each of Redis's eight policies.

class EvictionTest : public ServerTest {
 protected:
  static constexpr size_t kLayerBytes = 50 * 1024;  // two layers: ~100 KiB a session
  static constexpr int kSessions = 60;              // ~6 MiB offered to a 2 MiB budget

  void Start(const std::string& policy) {
    ASSERT_NO_FATAL_FAILURE(StartServer(
        {.flags = {"--appendonly", "no", "--maxmemory", "2mb", "--maxmemory-policy", policy}}));
    conn_ = RawConnection::Tcp(server_.port());
    ASSERT_NE(conn_, nullptr);
  }
  std::string Call(const std::vector<std::string>& args) { return conn_->Call(args); }
  std::string Store(const std::string& sid) {
    return Call({"SSM.PREFIX.MSTORE", sid, "0", std::string(kLayerBytes, 'a'), "1",
                 std::string(kLayerBytes, 'b')});
  }
  static int64_t Field(const std::string& info, const std::string& field) {
    const size_t at = info.find("\r\n" + field + ":");
    if (at == std::string::npos) return -1;
    return std::stoll(info.substr(at + field.size() + 3));
  }
  int64_t Stat(const std::string& section, const std::string& field) {
    return Field(Call({"INFO", section}), field);
  }
  // Every remaining session holds both of its layers.
  void ExpectWholeSessions() {
    for (int i = 0; i < kSessions; ++i) {
      std::string reply = Call({"SSM.PREFIX.MFETCH", "s" + std::to_string(i), "0", "1"});
      const bool none = reply == "*2\r\n$-1\r\n$-1\r\n";
      const bool both =
          reply.size() == 4 + 2 * (kLayerBytes + 10) && reply.find("$-1") == std::string::npos;
      EXPECT_TRUE(none || both) << "session " << i << " came back partial";
    }
  }
  std::unique_ptr<RawConnection> conn_;
};

TEST_F(EvictionTest, NoevictionAnswersRedisOomText) {
  ASSERT_NO_FATAL_FAILURE(Start("noeviction"));
  std::string reply;
  for (int i = 0; i < kSessions && reply.empty(); ++i) {
    std::string r = Store("s" + std::to_string(i));
    if (r != "+OK\r\n") reply = r;
  }
  EXPECT_EQ(reply, "-OOM command not allowed when used memory > 'maxmemory'.\r\n");
  EXPECT_EQ(Stat("stats", "evicted_keys"), 0);
  // Reads still work, and deleting makes room again.
  EXPECT_EQ(Call({"SSM.PREFIX.FETCH", "s0", "0", "RANGE", "0", "1"}), "$1\r\na\r\n");
}

TEST_F(EvictionTest, AllKeysPoliciesEvictWholeSessionsWithinTheBudget) {
  for (const std::string policy : {"allkeys-lru", "allkeys-lfu", "allkeys-random"}) {
    SCOPED_TRACE(policy);
    ASSERT_NO_FATAL_FAILURE(Start(policy));
    ASSERT_EQ(Store("hot"), "+OK\r\n");
    for (int i = 0; i < kSessions; ++i) {
      ASSERT_EQ(Store("s" + std::to_string(i)), "+OK\r\n");
      // "hot" is read after every write: LRU and LFU keep it.
      const std::string hot = Call({"SSM.PREFIX.FETCH", "hot", "0", "RANGE", "0", "1"});
      if (policy != "allkeys-random") ASSERT_EQ(hot, "$1\r\na\r\n") << "after s" << i;
    }
    EXPECT_GT(Stat("stats", "evicted_keys"), kSessions / 2);
    // maxmemory bounds the data figure: used_memory less the client buffers it also counts.
    const std::string memory = Call({"INFO", "memory"});  // both figures from one reply
    EXPECT_LE(Field(memory, "used_memory") - Field(memory, "mem_not_counted_for_evict"),
              2 * 1024 * 1024 + 2 * int64_t{kLayerBytes} + 4096);
    EXPECT_NE(Call({"INFO", "memory"}).find("maxmemory_policy:" + policy), std::string::npos);
    ExpectWholeSessions();
    if (policy != "allkeys-random") EXPECT_EQ(Call({"EXISTS", "hot"}), ":1\r\n");
    // LRU: the oldest untouched sessions went first.
    if (policy == "allkeys-lru") {
      EXPECT_EQ(Call({"EXISTS", "s0"}), ":0\r\n");
      EXPECT_EQ(Call({"EXISTS", "s" + std::to_string(kSessions - 1)}), ":1\r\n");
    }
    ASSERT_TRUE(server_.Stop());
  }
}

TEST_F(EvictionTest, VolatilePoliciesEvictOnlyKeysWithAnExpiry) {
  for (const std::string policy :
       {"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"}) {
    SCOPED_TRACE(policy);
    ASSERT_NO_FATAL_FAILURE(Start(policy));
    // Persistent sessions fill half the budget; they must all survive.
    for (int i = 0; i < 8; ++i) ASSERT_EQ(Store("keep" + std::to_string(i)), "+OK\r\n");
    for (int i = 0; i < kSessions; ++i) {
      const std::string sid = "s" + std::to_string(i);
      ASSERT_EQ(Store(sid), "+OK\r\n") << i;
      // volatile-ttl: later sessions live longer, so the earliest go first.
      ASSERT_EQ(Call({"EXPIRE", sid, std::to_string(1000 + i)}), ":1\r\n");
    }
    for (int i = 0; i < 8; ++i) EXPECT_EQ(Call({"EXISTS", "keep" + std::to_string(i)}), ":1\r\n");
    EXPECT_GT(Stat("stats", "evicted_keys"), 0);
    ExpectWholeSessions();
    if (policy == "volatile-ttl") {
      EXPECT_EQ(Call({"EXISTS", "s0"}), ":0\r\n");
      EXPECT_EQ(Call({"EXISTS", "s" + std::to_string(kSessions - 1)}), ":1\r\n");
    }
    // With nothing volatile left to evict, a write is refused as under noeviction.
    ASSERT_EQ(Call({"FLUSHALL"}), "+OK\r\n");
    std::string refused;
    for (int i = 0; i < kSessions && refused.empty(); ++i) {
      std::string r = Store("p" + std::to_string(i));
      if (r != "+OK\r\n") refused = r;
    }
    EXPECT_EQ(refused, "-OOM command not allowed when used memory > 'maxmemory'.\r\n");
    ASSERT_TRUE(server_.Stop());
  }
}

TEST_F(EvictionTest, ObjectFreqAndIdletimeFollowThePolicy) {
  ASSERT_NO_FATAL_FAILURE(Start("allkeys-lfu"));
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "k", "0", "v"}), "+OK\r\n");
  for (int i = 0; i < 100; ++i) Call({"SSM.PREFIX.FETCH", "k", "0"});
  // Redis's counter after ~100 hits from 5 with lfu-log-factor 10: about 10.
  const std::string freq = Call({"OBJECT", "FREQ", "k"});
  ASSERT_EQ(freq.substr(0, 1), ":");
  EXPECT_GE(std::stoi(freq.substr(1)), 8);
  EXPECT_LE(std::stoi(freq.substr(1)), 12);
  EXPECT_EQ(Call({"OBJECT", "IDLETIME", "k"}).substr(0, 25), "-ERR An LFU maxmemory pol");
  ASSERT_EQ(Call({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}), "+OK\r\n");
  EXPECT_EQ(Call({"OBJECT", "IDLETIME", "k"}), ":0\r\n");
  EXPECT_EQ(Call({"OBJECT", "FREQ", "k"}).substr(0, 25), "-ERR An LFU maxmemory pol");
}

// A reader never sees part of a session while writers force evictions.
TEST_F(EvictionTest, EvictionIsAtomicWithRespectToMfetch) {
  ASSERT_NO_FATAL_FAILURE(Start("allkeys-random"));
  std::atomic<bool> stop{false};
  std::atomic<int> partial{0}, whole{0};
  std::thread reader([&] {
    auto c = RawConnection::Tcp(server_.port());
    if (!c) return;
    for (int n = 0; !stop; ++n) {
      std::string reply =
          c->Call({"SSM.PREFIX.MFETCH", "s" + std::to_string(n % kSessions), "0", "1"});
      if (reply == "*2\r\n$-1\r\n$-1\r\n") continue;
      if (reply.size() == 4 + 2 * (kLayerBytes + 10) && reply.find("$-1") == std::string::npos) {
        ++whole;
      } else {
        ++partial;
      }
    }
  });
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < kSessions; ++i) ASSERT_EQ(Store("s" + std::to_string(i)), "+OK\r\n");
  }
  stop = true;
  reader.join();
  EXPECT_EQ(partial.load(), 0);
  EXPECT_GT(whole.load(), 0);
  EXPECT_GT(Stat("stats", "evicted_keys"), kSessions);
}

}  // namespace
}  // namespace prefixd::it
