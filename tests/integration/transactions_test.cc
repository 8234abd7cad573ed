// Transactions over real sockets: MULTI/EXEC/DISCARD/WATCH/UNWATCH replies byte for byte against
// a real redis-server 7.0.15 (Debian's, started here), isolation of EXEC under concurrent
// writers and readers on several io threads, WATCH broken by writes, expiry and FLUSHALL, CLIENT
// LIST while queueing, MONITOR's order, and a transaction's writes surviving a restart.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

using namespace std::chrono_literals;
using Args = std::vector<std::string>;

class TransactionsTest : public ServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartServer({.flags = {"--appendonly", "yes", "--io-threads", "4"}}));
  }
  std::unique_ptr<RawConnection> Connect() {
    auto c = RawConnection::Tcp(server_.port());
    EXPECT_NE(c, nullptr);
    return c;
  }
};

// One step of a two-client script: which connection sends it, and whether its reply is compared
// (HELLO's reply names the server's own id).
struct Step {
  int conn;
  Args args;
  bool compare = true;
};

const std::vector<Step>& ReferenceScript() {
  static const std::vector<Step> script = {
      {0, {"FLUSHALL"}},
      {0, {"COMMAND", "INFO", "multi", "exec", "discard", "watch", "unwatch"}},
      {0, {"COMMAND", "GETKEYS", "WATCH", "a", "b"}},
      {0, {"EXEC"}},
      {0, {"DISCARD"}},
      {0, {"MULTI"}},
      {0, {"SET", "a", "1"}},
      {0, {"INCR", "a"}},
      {0, {"INCRBYFLOAT", "a", "1.5"}},
      {0, {"GET", "a"}},
      {0, {"MULTI"}},       // nested: an error, the transaction goes on
      {0, {"WATCH", "a"}},  // inside MULTI: an error, the transaction goes on
      {0, {"EXEC"}},
      {0, {"MULTI"}},
      {0, {"SET", "b"}},  // arity: EXEC aborts
      {0, {"SET", "b", "2"}},
      {0, {"EXEC"}},
      {0, {"GET", "b"}},
      {0, {"MULTI"}},
      {0, {"NOSUCHCOMMAND", "x"}},
      {0, {"EXEC"}},
      {0, {"MULTI"}},
      {0, {"SAVE"}},  // no-multi
      {0, {"EXEC"}},
      {0, {"MULTI"}},
      {0, {"SET", "s", "str"}},
      {0, {"INCR", "s"}},  // an error inside the array; the rest still runs
      {0, {"SET", "t", "after"}},
      {0, {"EXEC"}},
      {0, {"GET", "t"}},
      {0, {"MULTI"}},
      {0, {"DISCARD"}},
      {0, {"MULTI"}},
      {0, {"EXEC"}},  // empty transaction
      {0, {"MULTI"}},
      {0, {"MONITOR"}},  // queued; refused when EXEC runs it
      {0, {"EXEC"}},
      // WATCH: another client's write breaks it; an untouched key does not.
      {0, {"WATCH", "w", "other"}},
      {1, {"SET", "w", "x"}},
      {0, {"MULTI"}},
      {0, {"GET", "w"}},
      {0, {"EXEC"}},
      {0, {"WATCH", "quiet"}},
      {1, {"SET", "unrelated", "x"}},
      {0, {"MULTI"}},
      {0, {"PING"}},
      {0, {"EXEC"}},
      // The client's own write before MULTI breaks it too.
      {0, {"WATCH", "w"}},
      {0, {"SET", "w", "y"}},
      {0, {"MULTI"}},
      {0, {"PING"}},
      {0, {"EXEC"}},
      // UNWATCH and DISCARD clear it.
      {0, {"WATCH", "w"}},
      {1, {"SET", "w", "z"}},
      {0, {"UNWATCH"}},
      {0, {"MULTI"}},
      {0, {"PING"}},
      {0, {"EXEC"}},
      {0, {"WATCH", "w"}},
      {1, {"SET", "w", "z"}},
      {0, {"MULTI"}},
      {0, {"DISCARD"}},
      {0, {"MULTI"}},
      {0, {"INCR", "n"}},
      {0, {"EXEC"}},
      // EXPIRE, DEL and FLUSHALL touch; DEL of a missing key and FLUSHALL over a missing key
      // do not.
      {0, {"WATCH", "w"}},
      {1, {"EXPIRE", "w", "100"}},
      {0, {"MULTI"}},
      {0, {"EXEC"}},
      {0, {"WATCH", "missing"}},
      {1, {"DEL", "missing"}},
      {0, {"MULTI"}},
      {0, {"EXEC"}},
      {0, {"WATCH", "w"}},
      {1, {"FLUSHALL"}},
      {0, {"MULTI"}},
      {0, {"EXEC"}},
      {0, {"WATCH", "w"}},
      {1, {"FLUSHALL"}},
      {0, {"MULTI"}},
      {0, {"PING"}},
      {0, {"EXEC"}},
      // The database is part of the watched key.
      {0, {"SET", "w", "1"}},
      {0, {"WATCH", "w"}},
      {1, {"SELECT", "1"}},
      {1, {"SET", "w", "2"}},
      {0, {"MULTI"}},
      {0, {"GET", "w"}},
      {0, {"EXEC"}},
      {0, {"WATCH", "w"}},
      {1, {"SWAPDB", "0", "1"}},
      {0, {"MULTI"}},
      {0, {"GET", "w"}},
      {0, {"EXEC"}},
      // RESP3: the aborted EXEC is a null, the rest as RESP2 with RESP3 types.
      {0, {"HELLO", "3"}, false},
      {0, {"WATCH", "w"}},
      {1, {"SET", "w", "3"}},
      {0, {"MULTI"}},
      {0, {"EXEC"}},
      {0, {"MULTI"}},
      {0, {"SET", "f", "1.5"}},
      {0, {"INCRBYFLOAT", "f", "1"}},
      {0, {"GET", "nothing"}},
      {0, {"EXEC"}},
      // RESET ends a transaction; a later EXEC has no MULTI.
      {0, {"MULTI"}},
      {0, {"SET", "r", "1"}},
      {0, {"RESET"}},
      {0, {"EXEC"}},
      {0, {"GET", "r"}},
  };
  return script;
}

TEST_F(TransactionsTest, RepliesMatchRedis) {
  RedisServer redis;
  PREFIXD_START_REFERENCE_REDIS(redis);
  std::unique_ptr<RawConnection> ours[2] = {Connect(), Connect()};
  std::unique_ptr<RawConnection> theirs[2] = {RawConnection::Tcp(redis.port()),
                                              RawConnection::Tcp(redis.port())};
  ASSERT_NE(theirs[0], nullptr);
  ASSERT_NE(theirs[1], nullptr);
  size_t i = 0;
  for (const Step& step : ReferenceScript()) {
    std::string got = ours[step.conn]->Call(step.args);
    std::string want = theirs[step.conn]->Call(step.args);
    ASSERT_FALSE(got.empty()) << "step " << i << ": no reply";
    if (step.compare) EXPECT_EQ(got, want) << "step " << i << ": " << step.args[0];
    ++i;
  }
}

// Two clients add to a pair of keys only in transactions; a third reads the pair in
// transactions. With EXEC isolated, the reader never sees the pair apart, and no increment is
// lost.
TEST_F(TransactionsTest, ExecIsIsolatedFromConcurrentClients) {
  constexpr int kRounds = 1500;
  std::atomic<bool> done{false};
  std::atomic<int> mismatches{0}, reads{0};
  auto writer = [&] {
    auto c = ConnectHiredis(server_.port());
    ASSERT_NE(c, nullptr);
    for (int i = 0; i < kRounds; ++i) {
      for (const char* cmd : {"MULTI", "INCR", "INCRBY", "EXEC"}) {
        if (std::string_view(cmd) == "INCR") {
          redisAppendCommand(c.get(), "INCR pair:a");
        } else if (std::string_view(cmd) == "INCRBY") {
          redisAppendCommand(c.get(), "INCRBY pair:b 1");
        } else {
          redisAppendCommand(c.get(), cmd);
        }
      }
      for (int r = 0; r < 4; ++r) {
        redisReply* reply = nullptr;
        ASSERT_EQ(redisGetReply(c.get(), reinterpret_cast<void**>(&reply)), REDIS_OK);
        RedisReply owned(reply);
        if (r == 3) {
          ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY) << DescribeReply(reply);
          ASSERT_EQ(reply->elements, 2u);
          // Within one EXEC, nobody else's increment falls between the two.
          EXPECT_EQ(reply->element[0]->integer, reply->element[1]->integer);
        }
      }
    }
  };
  auto reader = [&] {
    auto c = ConnectHiredis(server_.port());
    ASSERT_NE(c, nullptr);
    while (!done.load()) {
      redisAppendCommand(c.get(), "MULTI");
      redisAppendCommand(c.get(), "GET pair:a");
      redisAppendCommand(c.get(), "GET pair:b");
      redisAppendCommand(c.get(), "EXEC");
      for (int r = 0; r < 4; ++r) {
        redisReply* reply = nullptr;
        ASSERT_EQ(redisGetReply(c.get(), reinterpret_cast<void**>(&reply)), REDIS_OK);
        RedisReply owned(reply);
        if (r == 3) {
          ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY) << DescribeReply(reply);
          auto text = [](const redisReply* e) {
            return e->type == REDIS_REPLY_STRING ? std::string(e->str, e->len) : std::string();
          };
          if (text(reply->element[0]) != text(reply->element[1])) mismatches += 1;
          reads += 1;
        }
      }
    }
  };
  std::thread r1(reader), r2(reader);
  std::thread w1(writer), w2(writer);
  w1.join();
  w2.join();
  done = true;
  r1.join();
  r2.join();
  EXPECT_EQ(mismatches.load(), 0) << "of " << reads.load() << " reads";
  EXPECT_GT(reads.load(), 0);
  auto c = Connect();
  const std::string total = std::to_string(2 * kRounds);
  EXPECT_EQ(c->Call(Args{"GET", "pair:a"}),
            "$" + std::to_string(total.size()) + "\r\n" + total + "\r\n");
  EXPECT_EQ(c->Call(Args{"GET", "pair:b"}), c->Call(Args{"GET", "pair:a"}));
}

// The optimistic pattern of redis-py's WATCH retry loop: concurrent clients each add one through
// WATCH/GET/MULTI/SET/EXEC, retrying on a null EXEC; no addition is lost, and some retries
// happen.
TEST_F(TransactionsTest, WatchRetryLoopLosesNoUpdate) {
  constexpr int kClients = 3, kAdds = 200;
  std::atomic<int> retries{0};
  auto adder = [&] {
    auto c = ConnectHiredis(server_.port());
    ASSERT_NE(c, nullptr);
    for (int i = 0; i < kAdds; ++i) {
      while (true) {
        RedisReply(HiredisCommand(c.get(), {"WATCH", "counter"}));
        RedisReply value = HiredisCommand(c.get(), {"GET", "counter"});
        ASSERT_NE(value, nullptr);
        long long n = value->type == REDIS_REPLY_STRING ? std::stoll(value->str) : 0;
        RedisReply(HiredisCommand(c.get(), {"MULTI"}));
        const std::string next = std::to_string(n + 1);
        RedisReply(HiredisCommand(c.get(), {"SET", "counter", next}));
        RedisReply exec = HiredisCommand(c.get(), {"EXEC"});
        ASSERT_NE(exec, nullptr);
        if (exec->type == REDIS_REPLY_ARRAY) break;
        ASSERT_EQ(exec->type, REDIS_REPLY_NIL) << DescribeReply(exec.get());
        retries += 1;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) threads.emplace_back(adder);
  for (auto& t : threads) t.join();
  auto c = Connect();
  const std::string total = std::to_string(kClients * kAdds);
  EXPECT_EQ(c->Call(Args{"GET", "counter"}),
            "$" + std::to_string(total.size()) + "\r\n" + total + "\r\n");
  RecordProperty("retries", retries.load());
}

TEST_F(TransactionsTest, WatchedKeyExpiringBreaksExec) {
  auto c = Connect();
  // Lazily expired: nothing deleted it, EXEC finds it past its time.
  EXPECT_EQ(c->Call(Args{"SET", "e", "1", "PX", "100"}), "+OK\r\n");
  EXPECT_EQ(c->Call(Args{"WATCH", "e"}), "+OK\r\n");
  std::this_thread::sleep_for(150ms);
  EXPECT_EQ(c->Call(Args{"MULTI"}), "+OK\r\n");
  EXPECT_EQ(c->Call(Args{"INCR", "e"}), "+QUEUED\r\n");
  EXPECT_EQ(c->Call(Args{"EXEC"}), "*-1\r\n");
  // Watched when already expired: its deletion is no change.
  EXPECT_EQ(c->Call(Args{"SET", "s", "1", "PX", "1"}), "+OK\r\n");
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(c->Call(Args{"WATCH", "s"}), "+OK\r\n");
  EXPECT_EQ(c->Call(Args{"EXISTS", "s"}), ":0\r\n");
  EXPECT_EQ(c->Call(Args{"MULTI"}), "+OK\r\n");
  EXPECT_EQ(c->Call(Args{"PING"}), "+QUEUED\r\n");
  EXPECT_EQ(c->Call(Args{"EXEC"}), "*1\r\n+PONG\r\n");
}

TEST_F(TransactionsTest, ClientListShowsQueueAndMonitorSeesExecOrder) {
  auto a = Connect();
  auto observer = Connect();
  auto monitor = Connect();
  EXPECT_EQ(a->Call(Args{"CLIENT", "SETNAME", "txn"}), "+OK\r\n");
  EXPECT_EQ(monitor->Call(Args{"MONITOR"}), "+OK\r\n");
  EXPECT_EQ(a->Call(Args{"MULTI"}), "+OK\r\n");
  EXPECT_EQ(a->Call(Args{"SET", "m", "1"}), "+QUEUED\r\n");
  EXPECT_EQ(a->Call(Args{"GET", "m"}), "+QUEUED\r\n");
  std::string list = observer->Call(Args{"CLIENT", "LIST"});
  EXPECT_NE(list.find("name=txn age="), std::string::npos) << list;
  const size_t at = list.find("name=txn age=");
  ASSERT_NE(at, std::string::npos) << list;
  const std::string line = list.substr(at, list.find('\n', at) - at);
  EXPECT_NE(line.find("flags=x db=0 sub=0 psub=0 ssub=0 multi=2 "), std::string::npos) << line;
  EXPECT_EQ(line.find("multi-mem=0 "), std::string::npos) << line;
  EXPECT_EQ(a->Call(Args{"EXEC"}), "*2\r\n+OK\r\n$1\r\n1\r\n");
  list = observer->Call(Args{"CLIENT", "LIST"});
  EXPECT_EQ(list.find("multi=2"), std::string::npos) << list;
  // MONITOR: MULTI when it runs, the queued commands as EXEC runs them, then EXEC; nothing at
  // queue time.
  std::vector<std::string> lines;
  for (int i = 0; i < 4; ++i) {
    auto line = monitor->ReadReply();
    ASSERT_TRUE(line.has_value());
    lines.push_back(*line);
  }
  EXPECT_NE(lines[0].find("] \"MULTI\"\r\n"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("] \"SET\" \"m\" \"1\"\r\n"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("] \"GET\" \"m\"\r\n"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("] \"EXEC\"\r\n"), std::string::npos) << lines[3];
}

TEST_F(TransactionsTest, CommandStatsCountQueuedCommandsWhenTheyRun) {
  auto c = Connect();
  EXPECT_EQ(c->Call(Args{"CONFIG", "RESETSTAT"}), "+OK\r\n");
  EXPECT_EQ(c->Call(Args{"MULTI"}), "+OK\r\n");
  EXPECT_EQ(c->Call(Args{"SET", "k", "v"}), "+QUEUED\r\n");
  EXPECT_EQ(c->Call(Args{"INCR", "k"}), "+QUEUED\r\n");
  std::string stats = c->Call(Args{"INFO", "commandstats"});
  EXPECT_EQ(stats.find("cmdstat_set:"), std::string::npos) << stats;
  EXPECT_NE(c->Call(Args{"EXEC"}).find("-ERR value is not an integer"), std::string::npos);
  stats = c->Call(Args{"INFO", "commandstats"});
  EXPECT_NE(stats.find("cmdstat_multi:calls=1,"), std::string::npos) << stats;
  EXPECT_NE(stats.find("cmdstat_set:calls=1,"), std::string::npos) << stats;
  EXPECT_NE(stats.find("cmdstat_incr:calls=1,"), std::string::npos) << stats;
  EXPECT_NE(stats.find("failed_calls=1"), std::string::npos) << stats;
  // EXEC itself did not fail: the error belongs to INCR, counted once.
  auto exec = stats.find("cmdstat_exec:calls=1,");
  ASSERT_NE(exec, std::string::npos) << stats;
  EXPECT_NE(stats.find("failed_calls=0", exec), std::string::npos) << stats;
  std::string errors = c->Call(Args{"INFO", "errorstats"});
  EXPECT_NE(errors.find("errorstat_ERR:count=1\r\n"), std::string::npos) << errors;
}

// The queue is the client's memory (CLIENT LIST multi-mem and tot-mem, maxmemory): a client
// cannot queue without end; under maxmemory queueing is refused with -OOM and EXEC aborts.
TEST_F(TransactionsTest, QueuedRequestsCountAsMemory) {
  auto c = Connect();
  auto observer = Connect();
  EXPECT_EQ(observer->Call(Args{"CONFIG", "SET", "maxmemory", "8mb"}), "+OK\r\n");
  EXPECT_EQ(c->Call(Args{"CLIENT", "SETNAME", "big"}), "+OK\r\n");
  EXPECT_EQ(c->Call(Args{"MULTI"}), "+OK\r\n");
  const std::string value(1 << 20, 'v');
  EXPECT_EQ(c->Call(Args{"SET", "k0", value}), "+QUEUED\r\n");
  std::string list = observer->Call(Args{"CLIENT", "LIST"});
  const size_t at = list.find("name=big ");
  ASSERT_NE(at, std::string::npos) << list;
  const size_t mem_at = list.find("multi-mem=", at);
  ASSERT_NE(mem_at, std::string::npos) << list;
  EXPECT_GE(std::stoull(list.substr(mem_at + 10)), uint64_t{1} << 20) << list.substr(at, 400);
  int refused_at = -1;
  for (int i = 1; i < 32 && refused_at < 0; ++i) {
    std::string reply = c->Call(Args{"SET", "k" + std::to_string(i), value});
    if (reply.starts_with("-OOM")) {
      refused_at = i;
    } else {
      ASSERT_EQ(reply, "+QUEUED\r\n");
    }
  }
  EXPECT_GT(refused_at, 1);
  EXPECT_LT(refused_at, 16);
  EXPECT_EQ(c->Call(Args{"EXEC"}),
            "-EXECABORT Transaction discarded because of previous errors.\r\n");
  EXPECT_EQ(c->Call(Args{"EXISTS", "k0"}), ":0\r\n");
  // The queue's memory is given back: a new transaction queues again.
  EXPECT_EQ(c->Call(Args{"MULTI"}), "+OK\r\n");
  EXPECT_EQ(c->Call(Args{"SET", "k0", value}), "+QUEUED\r\n");
  EXPECT_EQ(c->Call(Args{"EXEC"}), "*1\r\n+OK\r\n");
}

TEST_F(TransactionsTest, ExecWritesSurviveRestart) {
  {
    auto c = Connect();
    EXPECT_EQ(c->Call(Args{"MULTI"}), "+OK\r\n");
    EXPECT_EQ(c->Call(Args{"SET", "x", "one"}), "+QUEUED\r\n");
    EXPECT_EQ(c->Call(Args{"INCRBY", "y", "41"}), "+QUEUED\r\n");
    EXPECT_EQ(c->Call(Args{"INCR", "y"}), "+QUEUED\r\n");
    EXPECT_EQ(c->Call(Args{"EXPIRE", "x", "1000"}), "+QUEUED\r\n");
    EXPECT_EQ(c->Call(Args{"EXEC"}), "*4\r\n+OK\r\n:41\r\n:42\r\n:1\r\n");
    // A discarded transaction leaves nothing behind.
    EXPECT_EQ(c->Call(Args{"MULTI"}), "+OK\r\n");
    EXPECT_EQ(c->Call(Args{"SET", "z", "never"}), "+QUEUED\r\n");
    EXPECT_EQ(c->Call(Args{"DISCARD"}), "+OK\r\n");
  }
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart({.flags = {"--appendonly", "yes", "--io-threads", "4"}}));
  auto c = Connect();
  EXPECT_EQ(c->Call(Args{"GET", "x"}), "$3\r\none\r\n");
  EXPECT_EQ(c->Call(Args{"GET", "y"}), "$2\r\n42\r\n");
  EXPECT_EQ(c->Call(Args{"GET", "z"}), "$-1\r\n");
  // A restart under a sanitizer takes seconds: the expiry is absolute, so the TTL only shrinks.
  std::string ttl = c->Call(Args{"TTL", "x"});
  ASSERT_TRUE(ttl.starts_with(":")) << ttl;
  EXPECT_TRUE(std::stol(ttl.substr(1)) > 900 && std::stol(ttl.substr(1)) <= 1000) << ttl;
}

// The newest log segment of `dir` and its bytes.
std::pair<std::string, std::string> NewestSegment(const std::string& dir) {
  std::string newest;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("log-") && name.ends_with(".seg") && entry.path().string() > newest) {
      newest = entry.path().string();
    }
  }
  std::ifstream in(newest, std::ios::binary);
  return {newest, std::string((std::istreambuf_iterator<char>(in)), {})};
}

// Where the last record of type 11 (an EXEC's group, docs/storage-format.md) starts, walking the
// segment's records by their length fields; 0 when there is none.
uint64_t LastGroupAt(const std::string& segment) {
  uint64_t last = 0;
  const auto* bytes = reinterpret_cast<const uint8_t*>(segment.data());
  for (uint64_t at = 32; at + 32 <= segment.size();) {
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | bytes[at + 24 + i];
    if (bytes[at + 12] == 11) last = at;
    at += 32 + length;
  }
  return last;
}

// A crash while an EXEC's records were being written (the log cut anywhere inside its group
// after a SIGKILL) restarts with none of the transaction, and the writes before it; the whole
// group restarts with all of it: strings, a counter and an SSM store together.
TEST_F(TransactionsTest, ExecIsAllOrNothingAcrossACrash) {
  const ServerProcess::Options options{.flags = {"--appendonly", "yes", "--io-threads", "4"}};
  const std::string blob(3000, 'z');
  {
    auto c = Connect();
    EXPECT_EQ(c->Call(Args{"SET", "before", "1"}), "+OK\r\n");
    EXPECT_EQ(c->Call(Args{"MULTI"}), "+OK\r\n");
    EXPECT_EQ(c->Call(Args{"SET", "a", "one"}), "+QUEUED\r\n");
    EXPECT_EQ(c->Call(Args{"SSM.PREFIX.STORE", "s", "0", blob}), "+QUEUED\r\n");
    EXPECT_EQ(c->Call(Args{"INCR", "n"}), "+QUEUED\r\n");
    EXPECT_EQ(c->Call(Args{"SET", "before", "2"}), "+QUEUED\r\n");
    EXPECT_EQ(c->Call(Args{"EXEC"}), "*4\r\n+OK\r\n+OK\r\n:1\r\n+OK\r\n");
  }
  ASSERT_TRUE(server_.Kill());
  const auto [path, whole] = NewestSegment(server_.data_dir());
  const uint64_t group_at = LastGroupAt(whole);
  ASSERT_GT(group_at, 0u) << "no group record in " << path;
  const uint64_t end = whole.size();
  for (uint64_t cut :
       {group_at + 1, group_at + 48, group_at + 100, (group_at + end) / 2, end - 1, end}) {
    SCOPED_TRACE("log cut at " + std::to_string(cut) + " of " + std::to_string(end));
    // The segment as the crash left it; what a restart started since is gone.
    for (const auto& entry : std::filesystem::recursive_directory_iterator(server_.data_dir())) {
      if (entry.path().string() > path && entry.path().filename().string().starts_with("log-")) {
        std::filesystem::remove(entry.path());
      }
    }
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(whole.data(), static_cast<std::streamsize>(cut));
    }
    ASSERT_TRUE(server_.Restart(options));
    auto c = Connect();
    const bool all = cut == end;
    EXPECT_EQ(c->Call(Args{"GET", "a"}), all ? "$3\r\none\r\n" : "$-1\r\n");
    EXPECT_EQ(c->Call(Args{"GET", "n"}), all ? "$1\r\n1\r\n" : "$-1\r\n");
    EXPECT_EQ(c->Call(Args{"EXISTS", "s"}), all ? ":1\r\n" : ":0\r\n");
    EXPECT_EQ(c->Call(Args{"GET", "before"}), all ? "$1\r\n2\r\n" : "$1\r\n1\r\n");
    if (all) {
      EXPECT_EQ(c->Call(Args{"SSM.PREFIX.FETCH", "s", "0"}), "$3000\r\n" + blob + "\r\n");
    }
    ASSERT_TRUE(server_.Kill());
  }
  EXPECT_NE(server_.ReadLog().find("a transaction cut off"), std::string::npos);
}

// Clients run transactions of two strings around a 256 KiB SSM store (large enough that a
// write can be cut part-way) until the server is SIGKILLed: after the restart every transaction
// is there whole or not at all, and every one EXEC acknowledged is there.
TEST_F(TransactionsTest, ConcurrentExecsSurviveSigkillWholeOrNotAtAll) {
  constexpr int kClients = 3;
  std::atomic<bool> stop{false};
  std::vector<int> sent(kClients, 0);
  std::vector<std::atomic<int>> acknowledged(kClients);
  std::vector<std::thread> clients;
  const std::string blob(256 << 10, 'q');
  for (int id = 0; id < kClients; ++id) {
    clients.emplace_back([&, id] {
      auto c = RawConnection::Tcp(server_.port());
      if (c == nullptr) return;
      for (int i = 0; !stop.load() && i < 400; ++i) {
        const std::string tx = std::to_string(id) + ":" + std::to_string(i);
        sent[id] = i + 1;
        const std::string request = Multibulk({"MULTI"}) + Multibulk({"SET", "a:" + tx, tx}) +
                                    Multibulk({"SSM.PREFIX.STORE", "s:" + tx, "0", blob}) +
                                    Multibulk({"SET", "b:" + tx, tx}) + Multibulk({"EXEC"});
        if (!c->Send(request)) return;
        for (int r = 0; r < 5; ++r) {
          auto reply = c->ReadReply(Millis(5000));
          if (!reply) return;  // killed
          if (r == 4 && reply->starts_with("*3")) acknowledged[id] = i + 1;
        }
      }
    });
  }
  // Killed while transactions are running, after the first was acknowledged (a loaded machine
  // may take longer than usual to get there).
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  const auto none_yet = [&] {
    return std::all_of(acknowledged.begin(), acknowledged.end(), [](auto& n) { return n == 0; });
  };
  while (none_yet() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(10ms);
  }
  std::this_thread::sleep_for(200ms);
  ASSERT_TRUE(server_.Kill());
  stop = true;
  for (std::thread& t : clients) t.join();
  ASSERT_TRUE(server_.Restart({.flags = {"--appendonly", "yes", "--io-threads", "4"}}));
  auto c = Connect();
  int whole = 0;
  for (int id = 0; id < kClients; ++id) {
    for (int i = 0; i < sent[id]; ++i) {
      const std::string tx = std::to_string(id) + ":" + std::to_string(i);
      const std::string a = c->Call(Args{"EXISTS", "a:" + tx});
      const std::string s = c->Call(Args{"EXISTS", "s:" + tx});
      const std::string b = c->Call(Args{"EXISTS", "b:" + tx});
      EXPECT_TRUE(a == s && s == b) << "transaction " << tx << " is half there: " << a << s << b;
      if (i < acknowledged[id]) EXPECT_EQ(a, ":1\r\n") << "acknowledged transaction " << tx;
      whole += a == ":1\r\n";
    }
  }
  EXPECT_GT(whole, 0) << "no transaction ran before the kill";
}

// A client that disconnects inside MULTI, with keys watched, leaves nothing queued or watched:
// later writes to the key and other clients' transactions are unaffected.
TEST_F(TransactionsTest, DisconnectReleasesTransaction) {
  {
    auto c = Connect();
    EXPECT_EQ(c->Call(Args{"WATCH", "gone"}), "+OK\r\n");
    EXPECT_EQ(c->Call(Args{"MULTI"}), "+OK\r\n");
    EXPECT_EQ(c->Call(Args{"SET", "gone", "1"}), "+QUEUED\r\n");
  }
  auto c = Connect();
  EXPECT_EQ(c->Call(Args{"SET", "gone", "2"}), "+OK\r\n");
  EXPECT_EQ(c->Call(Args{"GET", "gone"}), "$1\r\n2\r\n");
  EXPECT_EQ(c->Call(Args{"MULTI"}), "+OK\r\n");
  EXPECT_EQ(c->Call(Args{"QUIT"}), "+OK\r\n");
  EXPECT_TRUE(c->WaitClosed());
}

}  // namespace
}  // namespace prefixd::it
