// Replication, the primary side, over real sockets: the stream a SYNC/PSYNC connection receives
// byte for byte (the forms Redis 7.0 propagates: SET ... PXAT, PEXPIREAT, DEL for a past time,
// GETDEL, GETEX, INCRBYFLOAT, SPOP, XADD, RESTORE ... ABSTTL, MULTI/EXEC, SELECT, lazy expiry), the
// RDB checked by Redis's own redis-check-rdb, INFO/ROLE/CLIENT LIST, a replica that stops reading
// disconnected at its limit without holding writers back, and a real redis-server replica fed by
// the RDB (every Redis type, loaded with Redis's deep checks) and then the stream.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

using namespace std::chrono_literals;
using Args = std::vector<std::string>;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The arguments of one multibulk (a command in the stream).
Args ParseCommand(std::string_view raw) {
  Args out;
  size_t pos = raw.find("\r\n");
  const size_t n = std::stoul(std::string(raw.substr(1, pos - 1)));
  pos += 2;
  for (size_t i = 0; i < n; ++i) {
    const size_t end = raw.find("\r\n", pos);
    const size_t len = std::stoul(std::string(raw.substr(pos + 1, end - pos - 1)));
    out.emplace_back(raw.substr(end + 2, len));
    pos = end + 2 + len + 2;
  }
  return out;
}

std::string Join(const Args& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : " ") + a;
  return out;
}

// A connection that asked for the stream: the RDB it got, then the commands one by one.
class StreamReader {
 public:
  StreamReader(int port, const Args& handshake, bool psync) {
    conn_ = RawConnection::Tcp(port);
    if (conn_ == nullptr) return;
    for (const Args& a : {handshake}) {
      if (!a.empty()) ok_replconf_ = conn_->Call(a) == "+OK\r\n";
    }
    conn_->Send(psync ? Multibulk({"PSYNC", "?", "-1"}) : Multibulk({"SYNC"}));
    if (psync) {
      std::string line;
      while (!line.ends_with("\r\n")) {
        std::string c = conn_->Read(1, 3000ms);
        if (c.empty()) return;
        line += c;
      }
      fullresync_ = line;
    }
    std::string header;
    while (!header.ends_with("\r\n")) {
      std::string c = conn_->Read(1, 3000ms);
      if (c.empty()) return;
      header += c;
    }
    if (header[0] != '$') return;
    const size_t len = std::stoul(header.substr(1));
    rdb_ = conn_->Read(len, 5000ms);
  }
  bool ready() const { return conn_ != nullptr && !rdb_.empty(); }
  const std::string& rdb() const { return rdb_; }
  const std::string& fullresync() const { return fullresync_; }
  bool replconf_ok() const { return ok_replconf_; }
  // The next command's raw bytes; empty when none came within `timeout`.
  std::string NextRaw(Millis timeout = 3000ms) {
    auto r = conn_->ReadReply(timeout);
    if (r) received_ += r->size();
    return r.value_or("");
  }
  Args Next(Millis timeout = 3000ms) {
    std::string raw = NextRaw(timeout);
    return raw.empty() ? Args{} : ParseCommand(raw);
  }
  // Bytes of the stream received so far (the offset, counted from the RDB's).
  uint64_t received() const { return received_; }
  RawConnection& conn() { return *conn_; }

 private:
  std::unique_ptr<RawConnection> conn_;
  std::string rdb_, fullresync_;
  bool ok_replconf_ = true;
  uint64_t received_ = 0;
};

std::string InfoReplication(redisContext* c) {
  RedisReply r = HiredisCommand(c, {"INFO", "replication"});
  return r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "";
}

// Redis's DUMP of `key` as a real redis-server makes it, from the value read here; empty
// without a redis-server.
std::string RedisDumpOf(redisContext* source, const std::string& key) {
  RedisReply value = HiredisCommand(source, {"GET", key});
  RedisServer redis;
  if (!value || value->type != REDIS_REPLY_STRING || !redis.Start()) return "";
  RedisContext c = ConnectHiredis(redis.port());
  HiredisCommand(c.get(), {"SET", key, std::string_view(value->str, value->len)});
  RedisReply dump = HiredisCommand(c.get(), {"DUMP", key});
  return dump && dump->type == REDIS_REPLY_STRING ? std::string(dump->str, dump->len) : "";
}

class ReplicationTest : public ServerTest {
 protected:
  void SetUp() override {
    // More io threads than this machine's cores: a thread may be preempted between a change and
    // its feed, the window the replication order closes.
    ASSERT_NO_FATAL_FAILURE(StartServer({.flags = {"--appendonly", "no", "--io-threads", "4"}}));
    client_ = ConnectHiredis(server_.port());
    ASSERT_NE(client_, nullptr);
  }
  std::string Call(const std::vector<std::string_view>& args) {
    RedisReply r = HiredisCommand(client_.get(), args);
    return r ? DescribeReply(r.get()) : "(connection failed)";
  }
  RedisContext client_;
};

// A real redis-server following the primary on `primary_port` (its copy of the RDB in `dir`, not
// the working directory), and a connection to it. Start with FOLLOW_PRIMARY: the test skips only
// when redis-server is not installed (and fails then under CI=true), and fails when it does not
// start.
struct FollowingReplica {
  RedisServer server;
  RedisContext context;

  static std::vector<std::string> Flags(int primary_port, const std::string& dir,
                                        const std::vector<std::string>& extra = {}) {
    std::vector<std::string> flags{"--replicaof", "127.0.0.1", std::to_string(primary_port),
                                   "--dir", dir};
    flags.insert(flags.end(), extra.begin(), extra.end());
    return flags;
  }
  std::string Call(const std::vector<std::string_view>& args) {
    RedisReply reply = HiredisCommand(context.get(), args);
    return reply ? DescribeReply(reply.get()) : "(connection failed)";
  }
  // The reply to `args` once it is `want` (the stream may not have reached the replica yet), or
  // the last reply after about three seconds.
  std::string WaitFor(const std::vector<std::string_view>& args, const std::string& want) {
    std::string got;
    for (int i = 0; i < 100 && (got = Call(args)) != want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }
    return got;
  }
};

// Expects the next command in the stream to be exactly `want` (byte for byte).
#define FOLLOW_PRIMARY(follower, ...)                                                       \
  do {                                                                                      \
    PREFIXD_START_REFERENCE_REDIS((follower).server, FollowingReplica::Flags(__VA_ARGS__)); \
    (follower).context = ConnectHiredis((follower).server.port());                          \
  } while (0)

#define EXPECT_STREAM(stream, ...)                                                                \
  do {                                                                                            \
    const std::string want_ = Multibulk(Args{__VA_ARGS__});                                       \
    const std::string got_ = (stream).NextRaw();                                                  \
    EXPECT_EQ(got_, want_) << "got: " << (got_.empty() ? "(nothing)" : Join(ParseCommand(got_))); \
  } while (0)

// The next command is `prefix...` followed by one absolute time within [low, high].
void ExpectTimed(StreamReader& stream, const Args& prefix, int64_t low, int64_t high,
                 const Args& suffix = {}) {
  Args got = stream.Next();
  ASSERT_EQ(got.size(), prefix.size() + 1 + suffix.size()) << Join(got);
  for (size_t i = 0; i < prefix.size(); ++i) EXPECT_EQ(got[i], prefix[i]) << Join(got);
  const int64_t at = std::stoll(got[prefix.size()]);
  EXPECT_GE(at, low) << Join(got);
  EXPECT_LE(at, high) << Join(got);
  for (size_t i = 0; i < suffix.size(); ++i) {
    EXPECT_EQ(got[prefix.size() + 1 + i], suffix[i]) << Join(got);
  }
}

TEST_F(ReplicationTest, StreamCarriesWritesInTheFormsRedisPropagates) {
  Call({"SET", "old", "v"});
  StreamReader stream(server_.port(), {"REPLCONF", "listening-port", "4321"}, /*psync=*/false);
  ASSERT_TRUE(stream.ready());
  EXPECT_TRUE(stream.replconf_ok());
  EXPECT_TRUE(stream.rdb().starts_with("REDIS0010")) << stream.rdb().substr(0, 16);

  const int64_t t0 = NowMs();
  const std::string fixed_ms = std::to_string(t0 + 500000);
  const std::string fixed_s = std::to_string(t0 / 1000 + 600);
  Call({"SET", "foo", "bar"});
  EXPECT_STREAM(stream, "SELECT", "0");
  EXPECT_STREAM(stream, "SET", "foo", "bar");
  // Relative and absolute expiries: SET key value PXAT <ms>, the options spent.
  Call({"SET", "foo", "bar", "EX", "100"});
  ExpectTimed(stream, {"SET", "foo", "bar", "PXAT"}, t0 + 100000, NowMs() + 100000);
  Call({"SET", "foo", "bar", "pxat", fixed_ms});
  EXPECT_STREAM(stream, "SET", "foo", "bar", "PXAT", fixed_ms);
  Call({"SET", "foo", "bar", "XX", "EXAT", fixed_s});
  EXPECT_STREAM(stream, "SET", "foo", "bar", "PXAT", fixed_s + "000");
  Call({"SETEX", "foo", "100", "bar"});
  ExpectTimed(stream, {"SET", "foo", "bar", "PXAT"}, t0 + 100000, NowMs() + 100000);
  Call({"PSETEX", "foo", "100000", "bar"});
  ExpectTimed(stream, {"SET", "foo", "bar", "PXAT"}, t0 + 100000, NowMs() + 100000);
  // Nothing changed: nothing sent. GET dropped, GETSET as SET.
  EXPECT_EQ(Call({"SET", "foo", "x", "NX"}), "nil");
  Call({"SET", "foo", "v2", "GET"});
  EXPECT_STREAM(stream, "SET", "foo", "v2");
  Call({"GETSET", "foo", "v3"});
  EXPECT_STREAM(stream, "SET", "foo", "v3");
  // The EXPIRE family: PEXPIREAT, or DEL for a time already past; a missing key sends nothing.
  Call({"EXPIRE", "nokey", "100"});
  Call({"EXPIRE", "foo", "100", "NX"});
  ExpectTimed(stream, {"PEXPIREAT", "foo"}, t0 + 100000, NowMs() + 100000);
  Call({"EXPIREAT", "foo", fixed_s});
  EXPECT_STREAM(stream, "PEXPIREAT", "foo", fixed_s + "000");
  Call({"PEXPIRE", "foo", "100000", "GT"});  // sooner than fixed_s: not greater, no change
  Call({"PERSIST", "foo"});
  EXPECT_STREAM(stream, "PERSIST", "foo");
  Call({"PERSIST", "foo"});  // no TTL left: nothing
  // GETEX: nothing without options, PEXPIREAT, PERSIST, DEL for a past time.
  Call({"GETEX", "foo"});
  Call({"GETEX", "foo", "PXAT", fixed_ms});
  EXPECT_STREAM(stream, "PEXPIREAT", "foo", fixed_ms);
  Call({"GETEX", "foo", "PERSIST"});
  EXPECT_STREAM(stream, "PERSIST", "foo");
  Call({"GETEX", "foo", "EXAT", "1"});
  EXPECT_STREAM(stream, "DEL", "foo");
  Call({"SET", "g", "1"});
  Call({"GETDEL", "g"});
  Call({"GETDEL", "g"});  // gone: nothing
  EXPECT_STREAM(stream, "SET", "g", "1");
  EXPECT_STREAM(stream, "DEL", "g");
  Call({"EXPIREAT", "old", "1"});
  EXPECT_STREAM(stream, "DEL", "old");
  Call({"INCRBYFLOAT", "f", "1.5"});
  EXPECT_STREAM(stream, "SET", "f", "1.5", "KEEPTTL");
  Call({"DEL", "nokey"});
  // SPOP: the member popped as SREM; the whole set as DEL.
  Call({"SADD", "s", "only"});
  EXPECT_STREAM(stream, "SADD", "s", "only");
  Call({"SPOP", "s"});
  EXPECT_STREAM(stream, "SREM", "s", "only");
  Call({"SADD", "s", "a", "b"});
  EXPECT_STREAM(stream, "SADD", "s", "a", "b");
  Call({"SPOP", "s", "5"});
  EXPECT_STREAM(stream, "DEL", "s");
  // ZMPOP: a pop of the key it took from, with the count taken; nothing when none held any.
  Call({"ZADD", "z", "1", "a", "2", "b", "3", "c"});
  EXPECT_STREAM(stream, "ZADD", "z", "1", "a", "2", "b", "3", "c");
  Call({"ZMPOP", "2", "nokey", "z", "MIN"});
  EXPECT_STREAM(stream, "ZPOPMIN", "z", "1");
  Call({"ZMPOP", "1", "nokey", "MAX"});
  Call({"ZMPOP", "1", "z", "MAX", "COUNT", "5"});
  EXPECT_STREAM(stream, "ZPOPMAX", "z", "2");
  // XADD: an explicit id as received; a generated one (`*`, `ms-*`) as the id made; an
  // approximate trim as an exact one to the length it left, LIMIT dropped.
  Call({"XADD", "x", "5-1", "f", "v"});
  EXPECT_STREAM(stream, "XADD", "x", "5-1", "f", "v");
  Call({"XADD", "x", "6-*", "f", "v"});
  EXPECT_STREAM(stream, "XADD", "x", "6-0", "f", "v");
  RedisReply added = HiredisCommand(client_.get(), {"XADD", "x", "*", "f", "v"});
  ASSERT_TRUE(added && added->type == REDIS_REPLY_STRING);
  const std::string made(added->str, added->len);
  EXPECT_STREAM(stream, "XADD", "x", made, "f", "v");
  Call({"XADD", "x", "MAXLEN", "~", "1", "LIMIT", "50", "99999999999999-1", "f", "v"});
  EXPECT_STREAM(stream, "XADD", "x", "MAXLEN", "=", "4", "99999999999999-1", "f", "v");
  Call({"XADD", "x", "NOMKSTREAM", "MAXLEN", "2", "99999999999999-2", "f", "v"});
  EXPECT_STREAM(stream, "XADD", "x", "NOMKSTREAM", "MAXLEN", "2", "99999999999999-2", "f", "v");
  // RESTORE with a relative TTL: the absolute time, then ABSTTL.
  Call({"SET", "src", "payload"});
  EXPECT_STREAM(stream, "SET", "src", "payload");
  RedisReply dump = HiredisCommand(client_.get(), {"DUMP", "src"});
  ASSERT_TRUE(dump && dump->type == REDIS_REPLY_STRING);
  const std::string payload(dump->str, dump->len);
  // The payload replicas get is Redis's DUMP format (type 0, the string, RDB version 10, its
  // CRC-64), which a Redis replica can restore; prefixd's own is another format.
  const std::string redis_payload = RedisDumpOf(client_.get(), "src");
  ASSERT_TRUE(redis_payload.starts_with(std::string("\x00\x07payload\x0a\x00", 11)));
  EXPECT_EQ(redis_payload.size(), 19u);
  Call({"RESTORE", "r1", "100000", payload});
  ExpectTimed(stream, {"RESTORE", "r1"}, t0 + 100000, NowMs() + 100000, {redis_payload, "ABSTTL"});
  Call({"RESTORE", "r2", fixed_ms, payload, "absttl"});
  EXPECT_STREAM(stream, "RESTORE", "r2", fixed_ms, redis_payload, "absttl");
  // Transactions: several writes in MULTI ... EXEC, one alone, none not at all.
  Call({"MULTI"}), Call({"SET", "a", "1"}), Call({"GET", "a"}), Call({"SET", "b", "2"});
  Call({"EXEC"});
  EXPECT_STREAM(stream, "MULTI");
  EXPECT_STREAM(stream, "SET", "a", "1");
  EXPECT_STREAM(stream, "SET", "b", "2");
  EXPECT_STREAM(stream, "EXEC");
  Call({"MULTI"}), Call({"SET", "a", "3"}), Call({"EXEC"});
  EXPECT_STREAM(stream, "SET", "a", "3");
  Call({"MULTI"}), Call({"GET", "a"}), Call({"EXEC"});
  // Another database: SELECT first.
  Call({"SELECT", "5"});
  Call({"SET", "x", "1"});
  EXPECT_STREAM(stream, "SELECT", "5");
  EXPECT_STREAM(stream, "SET", "x", "1");
  // An expired key is deleted on access and the DEL reaches replicas.
  Call({"SET", "le", "v", "PX", "1"});
  ExpectTimed(stream, {"SET", "le", "v", "PXAT"}, t0, NowMs() + 1);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(Call({"GET", "le"}), "nil");
  EXPECT_STREAM(stream, "DEL", "le");
  // MIGRATE reaches replicas as the DEL of the keys that left, never as a MIGRATE of their own.
  ServerProcess target;
  ASSERT_TRUE(target.Start({.flags = {"--appendonly", "no"}}));
  Call({"SET", "mk", "v"});
  EXPECT_STREAM(stream, "SET", "mk", "v");
  EXPECT_EQ(Call({"MIGRATE", "127.0.0.1", std::to_string(target.port()), "mk", "5", "5000"}),
            "status 'OK'");
  EXPECT_STREAM(stream, "DEL", "mk");
  EXPECT_EQ(Call({"MIGRATE", "127.0.0.1", std::to_string(target.port()), "mk", "5", "5000"}),
            "status 'NOKEY'");
  Call({"SET", "end", "1"});
  EXPECT_STREAM(stream, "SET", "end", "1");
  EXPECT_EQ(stream.NextRaw(300ms), "") << "nothing more was written";

  // What the server says of its replica and its stream.
  const std::string info = InfoReplication(client_.get());
  EXPECT_NE(info.find("role:master\r\n"), std::string::npos) << info;
  EXPECT_NE(info.find("connected_slaves:1\r\n"), std::string::npos) << info;
  EXPECT_NE(info.find("slave0:ip=127.0.0.1,port=4321,state=online,offset=0,lag="),
            std::string::npos)
      << info;
  EXPECT_NE(info.find("master_repl_offset:" + std::to_string(stream.received()) + "\r\n"),
            std::string::npos)
      << info << " received " << stream.received();
  RedisReply role = HiredisCommand(client_.get(), {"ROLE"});
  ASSERT_TRUE(role && role->type == REDIS_REPLY_ARRAY && role->elements == 3);
  EXPECT_EQ(std::string(role->element[0]->str), "master");
  EXPECT_EQ(role->element[1]->integer, static_cast<long long>(stream.received()));
  ASSERT_EQ(role->element[2]->elements, 1u);
  EXPECT_EQ(std::string(role->element[2]->element[0]->element[1]->str), "4321");
  const std::string replicas = Call({"CLIENT", "LIST", "TYPE", "replica"});
  EXPECT_NE(replicas.find("flags=S"), std::string::npos) << replicas;
  EXPECT_EQ(replicas.find("flags=N"), std::string::npos) << replicas;
  // An acknowledgement gets no reply and shows as the replica's offset.
  stream.conn().Send(Multibulk({"REPLCONF", "ACK", std::to_string(stream.received())}));
  std::this_thread::sleep_for(100ms);
  EXPECT_NE(InfoReplication(client_.get())
                .find(",offset=" + std::to_string(stream.received()) + ",lag=0"),
            std::string::npos);
  EXPECT_EQ(stream.NextRaw(200ms), "") << "REPLCONF ACK is never answered";
  // The replica leaves: the server says so.
  stream.conn().Send(Multibulk({"QUIT"}));
  std::this_thread::sleep_for(200ms);
  EXPECT_NE(InfoReplication(client_.get()).find("connected_slaves:0\r\n"), std::string::npos);
}

TEST_F(ReplicationTest, PsyncAnswersFullResyncAndReplconfAsRedis) {
  EXPECT_EQ(Call({"REPLCONF", "listening-port"}), "error 'ERR syntax error'");
  EXPECT_EQ(Call({"REPLCONF", "listening-port", "x"}),
            "error 'ERR value is not an integer or out of range'");
  EXPECT_EQ(Call({"REPLCONF", "nonsense", "1"}),
            "error 'ERR Unrecognized REPLCONF option: nonsense'");
  EXPECT_EQ(Call({"REPLCONF", "capa", "eof", "capa", "psync2"}), "status 'OK'");
  // ip-address: up to 255 bytes, as Redis's NET_HOST_STR_LEN.
  EXPECT_EQ(Call({"REPLCONF", "ip-address", std::string(255, 'h')}), "status 'OK'");
  EXPECT_EQ(Call({"REPLCONF", "ip-address", std::string(256, 'h')}),
            "error 'ERR REPLCONF ip-address provided by replica instance is too long: 256 "
            "bytes'");
  EXPECT_EQ(Call({"REPLCONF", "ip-address", "127.0.0.1"}), "status 'OK'");
  EXPECT_EQ(Call({"CONFIG", "SET", "replica-output-buffer-limit", "1024"}), "status 'OK'");
  EXPECT_NE(Call({"CONFIG", "SET", "replica-output-buffer-limit", "1023"}).find("error"),
            std::string::npos);
  EXPECT_EQ(Call({"CONFIG", "SET", "replica-output-buffer-limit", "256mb"}), "status 'OK'");
  EXPECT_NE(Call({"CONFIG", "SET", "repl-ping-replica-period", "0"}).find("error"),
            std::string::npos);
  EXPECT_EQ(Call({"REPLICAOF", "NO", "ONE"}), "status 'OK'");
  EXPECT_NE(Call({"REPLICAOF", "127.0.0.1", "6379"}).find("error 'ERR prefixd does not replicate"),
            std::string::npos);
  EXPECT_NE(Call({"SLAVEOF", "127.0.0.1", "6379"}).find("error 'ERR prefixd does not replicate"),
            std::string::npos);
  Call({"MULTI"});
  EXPECT_EQ(Call({"SYNC"}), "error 'ERR Command not allowed inside a transaction'");
  Call({"DISCARD"});

  // Two replicas at once, both fed the same stream from the offset FULLRESYNC named.
  StreamReader a(server_.port(), {}, /*psync=*/true);
  ASSERT_TRUE(a.ready());
  const std::string line = a.fullresync();
  ASSERT_TRUE(line.starts_with("+FULLRESYNC ")) << line;
  const std::string replid = line.substr(12, 40);
  EXPECT_EQ(replid.find_first_not_of("0123456789abcdef"), std::string::npos) << line;
  EXPECT_EQ(line.substr(52), " 0\r\n");
  Call({"SET", "k", "1"});
  StreamReader b(server_.port(), {}, /*psync=*/true);
  ASSERT_TRUE(b.ready());
  const uint64_t offset_b = std::stoull(b.fullresync().substr(53));
  EXPECT_EQ(b.fullresync().substr(12, 40), replid);
  EXPECT_EQ(offset_b, Multibulk({"SELECT", "0"}).size() + Multibulk({"SET", "k", "1"}).size());
  Call({"SET", "k", "2"});
  EXPECT_STREAM(a, "SELECT", "0");
  EXPECT_STREAM(a, "SET", "k", "1");
  EXPECT_STREAM(a, "SELECT", "0");  // selected again for the replica that came in between
  EXPECT_STREAM(a, "SET", "k", "2");
  EXPECT_STREAM(b, "SELECT", "0");
  EXPECT_STREAM(b, "SET", "k", "2");
  EXPECT_NE(InfoReplication(client_.get()).find("connected_slaves:2\r\n"), std::string::npos);
  EXPECT_NE(InfoReplication(client_.get()).find("master_replid:" + replid), std::string::npos);
  // CLIENT LIST TYPE normal leaves replicas out; CLIENT KILL TYPE replica takes both.
  EXPECT_EQ(Call({"CLIENT", "LIST", "TYPE", "normal"}).find("flags=S"), std::string::npos);
  EXPECT_EQ(Call({"CLIENT", "KILL", "TYPE", "replica"}), "integer 2");
  EXPECT_TRUE(a.conn().WaitClosed());
  EXPECT_TRUE(b.conn().WaitClosed());
  std::this_thread::sleep_for(50ms);
  EXPECT_NE(InfoReplication(client_.get()).find("connected_slaves:0\r\n"), std::string::npos);
}

// The RDB of every Redis type with their expiry, checked by Redis's own tool.
TEST_F(ReplicationTest, RdbPassesRedisCheckRdb) {
  if (::access("/usr/bin/redis-check-rdb", X_OK) != 0) GTEST_SKIP() << "no redis-check-rdb";
  Call({"SET", "s1", "v"});
  Call({"SET", "s2", std::string(70000, 'x'), "EX", "1000"});
  Call({"SADD", "set", "1", "2", "three"});
  Call({"RPUSH", "list", "a", std::string(300, 'b'), "c"});
  Call({"SELECT", "3"});
  Call({"SET", "in3", "v", "PX", "900000"});
  Call({"HSET", "hash", "f", "v", "", std::string(70000, 'h')});
  Call({"ZADD", "zset", "-inf", "a", "-0", "b", "+inf", "c"});
  Call({"XADD", "stream", "1-1", "f", "v"});
  Call({"XGROUP", "CREATE", "stream", "g", "0"});
  Call({"XREADGROUP", "GROUP", "g", "c", "STREAMS", "stream", ">"});
  Call({"SSM.PREFIX.STORE", "sess", "0", "blob"});  // prefixd's own type: left out
  StreamReader stream(server_.port(), {}, /*psync=*/false);
  ASSERT_TRUE(stream.ready());
  const std::string path = server_.root() + "/replica.rdb";
  std::ofstream(path, std::ios::binary) << stream.rdb();
  std::string out;
  FILE* p = ::popen(("/usr/bin/redis-check-rdb " + path + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ::pclose(p);
  EXPECT_NE(out.find("Checksum OK"), std::string::npos) << out;
  EXPECT_NE(out.find("RDB looks OK"), std::string::npos) << out;
  EXPECT_NE(out.find("8 keys read"), std::string::npos) << out;
  EXPECT_NE(out.find("2 expires"), std::string::npos) << out;
}

// A replica that stops reading is disconnected once its unsent stream passes the limit; the
// writers are not held back meanwhile.
TEST_F(ReplicationTest, StalledReplicaIsDisconnectedAtItsLimit) {
  StreamReader stalled(server_.port(), {}, /*psync=*/false);
  ASSERT_TRUE(stalled.ready());
  const std::string value(256 * 1024, 'v');
  // Under the limit, what it has not read shows as its omem (the socket's buffers hold a part).
  for (int i = 0; i < 64; ++i) ASSERT_EQ(Call({"SET", "k", value}), "status 'OK'");
  RedisReply list = HiredisCommand(client_.get(), {"CLIENT", "LIST", "TYPE", "replica"});
  ASSERT_TRUE(list && list->type == REDIS_REPLY_STRING);
  const std::string line(list->str, list->len);
  const size_t at = line.find(" omem=");
  ASSERT_NE(at, std::string::npos) << line;
  EXPECT_GT(std::stoull(line.substr(at + 6)), 4u << 20) << line;
  EXPECT_NE(InfoReplication(client_.get()).find("connected_slaves:1\r\n"), std::string::npos);
  EXPECT_EQ(Call({"CONFIG", "SET", "replica-output-buffer-limit", "1mb"}), "status 'OK'");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 160; ++i) {  // 40 MiB: far more than the socket buffers and the limit
    ASSERT_EQ(Call({"SET", "k" + std::to_string(i % 8), value}), "status 'OK'");
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    gone = InfoReplication(client_.get()).find("connected_slaves:0\r\n") != std::string::npos;
    if (!gone) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(gone) << InfoReplication(client_.get());
  EXPECT_NE(server_.ReadLog().find("replica-output-buffer-limit"), std::string::npos);
}

// A real redis-server as a replica of prefixd: the keys it holds arrive by the RDB, with their
// TTLs; later writes arrive by the stream.
TEST_F(ReplicationTest, RedisServerReplicatesFromPrefixd) {
  Call({"SET", "str", "hello"});
  Call({"SET", "ttl", "v", "EX", "1000"});
  Call({"SADD", "set", "a", "b", "c"});
  Call({"RPUSH", "list", "x", "y", "z"});
  Call({"EXPIRE", "list", "2000"});
  Call({"SELECT", "2"});
  Call({"SET", "db2", "two"});
  Call({"SELECT", "0"});
  FollowingReplica follower;
  FOLLOW_PRIMARY(follower, server_.port(), server_.root());
  RedisServer& replica = follower.server;
  RedisContext& r = follower.context;
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(follower.WaitFor({"GET", "str"}, "string 'hello'"), "string 'hello'");
  EXPECT_EQ(follower.Call({"GET", "ttl"}), "string 'v'");
  RedisReply ttl = HiredisCommand(r.get(), {"TTL", "ttl"});
  ASSERT_TRUE(ttl && ttl->type == REDIS_REPLY_INTEGER);
  EXPECT_GT(ttl->integer, 990);
  EXPECT_LE(ttl->integer, 1000);
  EXPECT_EQ(follower.Call({"PEXPIRETIME", "ttl"}), Call({"PEXPIRETIME", "ttl"}));
  EXPECT_EQ(follower.Call({"SCARD", "set"}), "integer 3");
  EXPECT_EQ(follower.Call({"LRANGE", "list", "0", "-1"}), Call({"LRANGE", "list", "0", "-1"}));
  EXPECT_EQ(follower.Call({"PEXPIRETIME", "list"}), Call({"PEXPIRETIME", "list"}));
  follower.Call({"SELECT", "2"});
  EXPECT_EQ(follower.Call({"GET", "db2"}), "string 'two'");
  follower.Call({"SELECT", "0"});

  // Later writes, by the stream.
  Call({"SET", "later", "1", "EX", "500"});
  Call({"EXPIRE", "str", "300"});
  Call({"LPUSH", "list", "w"});
  Call({"SPOP", "set"});
  Call({"INCRBYFLOAT", "fl", "2.5"});
  Call({"DEL", "ttl"});
  Call({"XADD", "xs", "*", "f", "v"});
  Call({"XADD", "xs", "MAXLEN", "~", "5", "*", "g", "w"});
  Call({"MULTI"}), Call({"SET", "m1", "1"}), Call({"SET", "m2", "2"}), Call({"EXEC"});
  RedisReply dumped = HiredisCommand(client_.get(), {"DUMP", "list"});
  ASSERT_TRUE(dumped && dumped->type == REDIS_REPLY_STRING);
  Call({"RESTORE", "list2", "400000", std::string_view(dumped->str, dumped->len)});
  Call({"SET", "last", "done"});
  EXPECT_EQ(follower.WaitFor({"GET", "last"}, "string 'done'"), "string 'done'");
  EXPECT_EQ(follower.Call({"LRANGE", "list2", "0", "-1"}), Call({"LRANGE", "list2", "0", "-1"}));
  EXPECT_EQ(follower.Call({"PEXPIRETIME", "list2"}), Call({"PEXPIRETIME", "list2"}));
  EXPECT_EQ(follower.Call({"PEXPIRETIME", "later"}), Call({"PEXPIRETIME", "later"}));
  EXPECT_EQ(follower.Call({"PEXPIRETIME", "str"}), Call({"PEXPIRETIME", "str"}));
  EXPECT_EQ(follower.Call({"LRANGE", "list", "0", "-1"}), Call({"LRANGE", "list", "0", "-1"}));
  EXPECT_EQ(follower.Call({"SMEMBERS", "set"}).size(), Call({"SMEMBERS", "set"}).size());
  EXPECT_EQ(follower.Call({"SCARD", "set"}), "integer 2");
  EXPECT_EQ(follower.Call({"GET", "fl"}), "string '2.5'");
  EXPECT_EQ(follower.Call({"EXISTS", "ttl"}), "integer 0");
  EXPECT_EQ(follower.Call({"MGET", "m1", "m2"}), Call({"MGET", "m1", "m2"}));
  EXPECT_EQ(follower.Call({"XRANGE", "xs", "-", "+"}), Call({"XRANGE", "xs", "-", "+"}));

  // The replica shows in INFO with the port it listens on, and acknowledges the whole stream.
  const std::string port = std::to_string(replica.port());
  std::string info;
  for (int i = 0; i < 60; ++i) {
    info = InfoReplication(client_.get());
    const auto at = info.find("master_repl_offset:");
    const std::string offset = info.substr(at + 19, info.find("\r\n", at) - at - 19);
    if (info.find("port=" + port + ",state=online,offset=" + offset + ",") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_NE(info.find("slave0:ip=127.0.0.1,port=" + port + ",state=online"), std::string::npos)
      << info;
  const auto at = info.find("master_repl_offset:");
  const std::string offset = info.substr(at + 19, info.find("\r\n", at) - at - 19);
  EXPECT_NE(info.find(",offset=" + offset + ","), std::string::npos) << info;
  const std::string replica_info = follower.Call({"INFO", "replication"});
  EXPECT_NE(replica_info.find("master_link_status:up"), std::string::npos) << replica_info;
}

// The field/value pairs of an HGETALL reply, sorted (a hash replies in its encoding's order).
std::vector<std::pair<std::string, std::string>> SortedPairs(redisContext* c,
                                                             const std::string& key) {
  RedisReply r = HiredisCommand(c, {"HGETALL", key});
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements; i += 2) {
    out.emplace_back(std::string(r->element[i]->str, r->element[i]->len),
                     std::string(r->element[i + 1]->str, r->element[i + 1]->len));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// XINFO STREAM <key> FULL but the radix tree's shape (a replica cuts its own nodes).
std::string StreamInfoFull(redisContext* c, const std::string& key) {
  RedisReply r = HiredisCommand(c, {"XINFO", "STREAM", key, "FULL"});
  if (!r || r->type != REDIS_REPLY_ARRAY) return r ? DescribeReply(r.get()) : "(no reply)";
  std::string out;
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    const std::string name(r->element[i]->str, r->element[i]->len);
    if (name.starts_with("radix-tree-")) continue;
    out += name + ": " + DescribeReply(r->element[i + 1]) + "\n";
  }
  return out;
}

// Hashes, sorted sets and streams written before a real redis-server replica attaches reach it
// by the RDB, which it checks deeply as it loads (--sanitize-dump-payload yes), with edge values:
// empty and binary fields, values past 64 KiB, scores -inf/+inf/-0/the smallest doubles, 1000
// members, a stream across many listpack nodes with deleted entries and consumer groups, empty
// streams. Each reads back on the replica exactly as on prefixd and takes later writes; a RESTORE
// of each type reaches it too.
TEST_F(ReplicationTest, RedisServerLoadsHashesZsetsAndStreamsFromTheRdb) {
  auto call = [&](const std::vector<std::string>& args) {
    return Call(std::vector<std::string_view>(args.begin(), args.end()));
  };
  const std::string big(70000, 'B'), binary("\x00\xff\r\n\x01", 5);
  ASSERT_EQ(call({"HSET", "h", "", "empty field", "e", "", binary, binary, "big", big}),
            "integer 4");
  ASSERT_EQ(Call({"PEXPIRE", "h", "1000000"}), "integer 1");
  std::vector<std::string> hset = {"HSET", "hl"};  // past hash-max-listpack-entries (512)
  for (int i = 0; i < 600; ++i) hset.push_back("f" + std::to_string(i)), hset.push_back("v");
  ASSERT_EQ(call(hset), "integer 600");

  ASSERT_EQ(call({"ZADD",
                  "z",
                  "-inf",
                  "lo",
                  "+inf",
                  "hi",
                  "-0",
                  "negzero",
                  "0",
                  "zero",
                  "4.9406564584124654e-324",
                  "tiny",
                  "-4.9406564584124654e-324",
                  "-tiny",
                  "1.7976931348623157e308",
                  "max",
                  "1.5",
                  binary,
                  "2.5",
                  "",
                  "3",
                  big}),
            "integer 10");
  std::vector<std::string> zadd = {"ZADD", "zbig"};
  for (int i = 0; i < 1000; ++i) {
    zadd.push_back(std::to_string((i % 97) * 0.25 - 10)), zadd.push_back("m" + std::to_string(i));
  }
  ASSERT_EQ(call(zadd), "integer 1000");

  // 300 entries over several listpack nodes: fields that change, an empty field and value,
  // binary and 70000-byte values, ids whose seq goes back as their ms moves on.
  for (int i = 0; i < 300; ++i) {
    const std::string id = std::to_string(1000 + i / 3) + "-" + std::to_string(i % 3);
    const std::string value = i == 10 ? big : i == 11 ? binary : i == 12 ? "" : std::to_string(i);
    std::vector<std::string> xadd = {"XADD", "xs", id, i == 13 ? "" : "a", value};
    if (i % 5 == 0) xadd.push_back("b"), xadd.push_back("second");
    ASSERT_EQ(call(xadd), "string '" + id + "'");
  }
  ASSERT_EQ(Call({"XDEL", "xs", "1000-1", "1010-2"}), "integer 2");
  ASSERT_EQ(Call({"XGROUP", "CREATE", "xs", "g1", "0"}), "status 'OK'");
  ASSERT_NE(Call({"XREADGROUP", "GROUP", "g1", "alice", "COUNT", "5", "STREAMS", "xs", ">"}),
            "nil");
  ASSERT_NE(Call({"XREADGROUP", "GROUP", "g1", "bob", "COUNT", "3", "STREAMS", "xs", ">"}), "nil");
  ASSERT_EQ(Call({"XACK", "xs", "g1", "1000-0"}), "integer 1");
  // A pending entry deleted from the stream stays pending.
  ASSERT_EQ(Call({"XDEL", "xs", "1001-0"}), "integer 1");
  ASSERT_EQ(Call({"XGROUP", "CREATECONSUMER", "xs", "g1", "idle"}), "integer 1");
  ASSERT_EQ(Call({"XGROUP", "CREATE", "xs", "g2", "$"}), "status 'OK'");
  ASSERT_EQ(Call({"XGROUP", "CREATE", "xs", "g3", "1050-0"}), "status 'OK'");
  // A stream without deletions, also built by a real redis-server from the same XADDs: the
  // replica's nodes (DUMP serialises them as they are) must be Redis's own, byte for byte.
  RedisServer plain;
  PREFIXD_START_REFERENCE_REDIS(plain);
  RedisContext p = ConnectHiredis(plain.port());
  ASSERT_NE(p, nullptr);
  for (int i = 0; i < 400; ++i) {
    const std::string id = std::to_string(2000 + i / 2) + "-" + std::to_string(i % 2);
    const std::string value = i % 7 == 0 ? std::string(i * 20, 'v') : std::to_string(i * 1000);
    std::vector<std::string> xadd = {"XADD", "xn", id, i % 4 == 0 ? "other" : "f", value};
    if (i % 9 == 0) xadd.push_back("-5"), xadd.push_back(binary);
    ASSERT_EQ(call(xadd), "string '" + id + "'");
    if (p != nullptr) {
      RedisReply added =
          HiredisCommand(p.get(), std::vector<std::string_view>(xadd.begin(), xadd.end()));
      ASSERT_TRUE(added && added->type == REDIS_REPLY_STRING);
    }
  }
  ASSERT_EQ(Call({"XGROUP", "CREATE", "xempty", "g", "$", "MKSTREAM"}), "status 'OK'");
  for (int i = 0; i < 3; ++i) Call({"XADD", "xtrimmed", "*", "f", "v"});
  ASSERT_EQ(Call({"XTRIM", "xtrimmed", "MAXLEN", "0"}), "integer 3");
  Call({"SET", "loaded", "yes"});

  FollowingReplica follower;
  FOLLOW_PRIMARY(follower, server_.port(), server_.root(), {"--sanitize-dump-payload", "yes"});
  RedisContext& r = follower.context;
  ASSERT_NE(r, nullptr);
  auto expect_same = [&](const std::string& when) {
    for (const std::string key : {"h", "hl"}) {
      EXPECT_EQ(SortedPairs(r.get(), key), SortedPairs(client_.get(), key)) << key << when;
    }
    for (const std::string key : {"z", "zbig"}) {
      EXPECT_EQ(follower.Call({"ZRANGE", key, "0", "-1", "WITHSCORES"}),
                Call({"ZRANGE", key, "0", "-1", "WITHSCORES"}))
          << key << when;
    }
    for (const std::string key : {"xs", "xempty", "xtrimmed"}) {
      EXPECT_EQ(follower.Call({"XRANGE", key, "-", "+"}), Call({"XRANGE", key, "-", "+"}))
          << key << when;
      // Backwards, each entry is found from its end by its element count.
      EXPECT_EQ(follower.Call({"XREVRANGE", key, "+", "-"}), Call({"XREVRANGE", key, "+", "-"}))
          << key << when;
      EXPECT_EQ(StreamInfoFull(r.get(), key), StreamInfoFull(client_.get(), key)) << key << when;
    }
    EXPECT_EQ(follower.Call({"XPENDING", "xs", "g1"}), Call({"XPENDING", "xs", "g1"})) << when;
    for (const std::string key : {"h", "hl", "z", "zbig", "xs", "xempty", "xtrimmed"}) {
      EXPECT_EQ(follower.Call({"TYPE", key}), Call({"TYPE", key})) << key << when;
      EXPECT_EQ(follower.Call({"PEXPIRETIME", key}), Call({"PEXPIRETIME", key})) << key << when;
    }
  };
  ASSERT_EQ(follower.WaitFor({"GET", "loaded"}, "string 'yes'"), "string 'yes'");
  EXPECT_EQ(follower.Call({"HLEN", "hl"}), "integer 600");
  EXPECT_EQ(follower.Call({"ZCARD", "zbig"}), "integer 1000");
  EXPECT_EQ(follower.Call({"XLEN", "xs"}), "integer 297");
  expect_same(" (from the RDB)");
  ASSERT_NE(p, nullptr);
  RedisReply dumped = HiredisCommand(r.get(), {"DUMP", "xn"});
  RedisReply redis_dump = HiredisCommand(p.get(), {"DUMP", "xn"});
  ASSERT_TRUE(dumped && dumped->type == REDIS_REPLY_STRING);
  ASSERT_TRUE(redis_dump && redis_dump->type == REDIS_REPLY_STRING);
  EXPECT_GT(dumped->len, 5000u);  // 400 entries (LZF-compressed)
  EXPECT_TRUE(std::string_view(dumped->str, dumped->len) ==
              std::string_view(redis_dump->str, redis_dump->len))
      << "the replica's nodes differ from Redis's";
  EXPECT_EQ(follower.Call({"XRANGE", "xn", "-", "+"}), Call({"XRANGE", "xn", "-", "+"}));

  // Later writes, by the stream, land on what the RDB built.
  Call({"HSET", "h", "later", "1"});
  Call({"ZADD", "z", "7", "seven"});
  Call({"XADD", "xs", "*", "a", "later"});
  Call({"XADD", "xs", "*", "other", "fields"});
  Call({"XACK", "xs", "g1", "1002-1"});
  Call({"XADD", "xempty", "5-5", "f", "v"});
  // A RESTORE (of prefixd's payload) reaches the replica with the value as Redis serialises it.
  for (const std::string key : {"h", "z", "xs"}) {
    RedisReply dump = HiredisCommand(client_.get(), {"DUMP", key});
    ASSERT_TRUE(dump && dump->type == REDIS_REPLY_STRING) << key;
    ASSERT_EQ(Call({"RESTORE", key + "2", "0", std::string_view(dump->str, dump->len)}),
              "status 'OK'");
  }
  Call({"SET", "last", "done"});
  ASSERT_EQ(follower.WaitFor({"GET", "last"}, "string 'done'"), "string 'done'");
  expect_same(" (after later writes)");
  EXPECT_EQ(SortedPairs(r.get(), "h2"), SortedPairs(client_.get(), "h"));
  EXPECT_EQ(follower.Call({"ZRANGE", "z2", "0", "-1", "WITHSCORES"}),
            Call({"ZRANGE", "z", "0", "-1", "WITHSCORES"}));
  EXPECT_EQ(follower.Call({"XRANGE", "xs2", "-", "+"}), Call({"XRANGE", "xs", "-", "+"}));
  EXPECT_EQ(StreamInfoFull(r.get(), "xs2"), StreamInfoFull(client_.get(), "xs"));
}

// Writers on several io threads racing on the same keys, with expiring keys, evictions and
// transactions meanwhile: the replica ends up with exactly the primary's keys and values, so the
// stream's order is the order of the changes.
TEST_F(ReplicationTest, ConcurrentWritersLeaveTheReplicaEqualToThePrimary) {
  ASSERT_EQ(Call({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}), "status 'OK'");
  FollowingReplica follower;
  FOLLOW_PRIMARY(follower, server_.port(), server_.root());
  RedisContext& r = follower.context;
  ASSERT_NE(r, nullptr);
  for (int i = 0; i < 100; ++i) {
    if (InfoReplication(client_.get()).find("connected_slaves:1") != std::string::npos) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_NE(InfoReplication(client_.get()).find("connected_slaves:1"), std::string::npos);
  constexpr int kThreads = 4, kBatches = 30, kBatch = 100;
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      auto c = RawConnection::Tcp(server_.port());
      if (!c) return;
      for (int b = 0; b < kBatches; ++b) {
        // Pipelined, so that the io threads run writes to the same keys at the same moments.
        std::string batch;
        size_t replies = 0;
        for (int j = 0; j < kBatch; ++j) {
          const int i = b * kBatch + j;
          const std::string key = "k" + std::to_string(i % 4);
          switch ((i + t) % 8) {
            case 0:
            case 1:
              batch += Multibulk({"SET", key, std::to_string(t * 100000 + i)});
              break;
            case 2:
              batch += Multibulk({"APPEND", key, std::to_string(t)});
              break;
            case 3:
              batch += Multibulk({"DEL", key});
              break;
            case 4:
              batch += Multibulk({"SET", "e" + std::to_string(i % 8), "v", "PX", "2"});
              break;
            case 5:
              batch += Multibulk({"RPUSH", "list" + std::to_string(i % 2), std::to_string(t)});
              break;
            case 6:
              batch += Multibulk({"MULTI"}) + Multibulk({"INCR", "counter"}) +
                       Multibulk({"SADD", "set", key}) + Multibulk({"EXEC"});
              replies += 3;
              break;
            default:
              batch += Multibulk({"GET", "e" + std::to_string(i % 8)});  // lazy expiry
              break;
          }
          ++replies;
        }
        if (t == 0 && b == kBatches * 3 / 4) {
          // From here on writes evict (and most are refused): the budget is below the keys.
          batch += Multibulk({"CONFIG", "SET", "maxmemory", "1"});
          ++replies;
        }
        c->Send(batch);
        for (size_t k = 0; k < replies; ++k) {
          if (!c->ReadReply()) return;
        }
      }
    });
  }
  for (auto& w : writers) w.join();
  ASSERT_EQ(Call({"CONFIG", "SET", "maxmemory", "0"}), "status 'OK'");
  std::this_thread::sleep_for(50ms);  // the e* keys expire; the active pass deletes them
  Call({"SET", "last", "done"});
  RedisReply last;
  for (int i = 0; i < 200; ++i) {
    last = HiredisCommand(r.get(), {"GET", "last"});
    if (last && last->type == REDIS_REPLY_STRING) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(last && last->type == REDIS_REPLY_STRING);
  EXPECT_GT(InfoNumber(client_.get(), "evicted_keys"), 0u);
  // Every key of the primary, with its value, is on the replica, and nothing else.
  auto keys_of = [](redisContext* c) {
    RedisReply keys = HiredisCommand(c, {"KEYS", "*"});
    std::vector<std::string> out;
    for (size_t i = 0; keys && i < keys->elements; ++i) out.emplace_back(keys->element[i]->str);
    std::sort(out.begin(), out.end());
    return out;
  };
  const auto primary_keys = keys_of(client_.get());
  EXPECT_EQ(keys_of(r.get()), primary_keys);
  for (const std::string& key : primary_keys) {
    RedisReply type = HiredisCommand(client_.get(), {"TYPE", key});
    const std::string t(type->str);
    const std::vector<std::string_view> read =
        t == "string" ? std::vector<std::string_view>{"GET", key}
        : t == "list" ? std::vector<std::string_view>{"LRANGE", key, "0", "-1"}
                      : std::vector<std::string_view>{"SMEMBERS", key};
    RedisReply mine = HiredisCommand(client_.get(), read);
    RedisReply theirs = HiredisCommand(r.get(), read);
    if (t == "set") {
      EXPECT_EQ(mine->elements, theirs->elements) << key;
    } else {
      EXPECT_EQ(DescribeReply(theirs.get()), DescribeReply(mine.get())) << key;
    }
  }
}

// Writers on every io thread, a replica reading at once and one reading only afterwards: both
// receive the very same bytes (pushes from several threads keep their order on each connection).
TEST_F(ReplicationTest, EveryReplicaGetsTheSameBytesInTheSameOrder) {
  StreamReader fast(server_.port(), {}, /*psync=*/false);
  StreamReader slow(server_.port(), {}, /*psync=*/false);
  ASSERT_TRUE(fast.ready() && slow.ready());
  std::string fast_bytes;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (true) {
      std::string piece = fast.conn().ReadQuiet(100ms);
      fast_bytes += piece;
      if (piece.empty() && done) break;
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      auto c = RawConnection::Tcp(server_.port());
      if (!c) return;
      for (int b = 0; b < 20; ++b) {
        std::string batch;
        for (int i = 0; i < 100; ++i) {
          batch += Multibulk({"SET", "k" + std::to_string(i % 4), std::to_string(t * 10000 + i)});
        }
        c->Send(batch);
        for (int i = 0; i < 100; ++i) {
          if (!c->ReadReply()) return;
        }
      }
    });
  }
  for (auto& w : writers) w.join();
  Call({"SET", "last", "done"});
  const std::string last = Multibulk({"SET", "last", "done"});
  std::string slow_bytes;
  while (!slow_bytes.ends_with(last)) {
    std::string piece = slow.conn().ReadQuiet(300ms);
    if (piece.empty()) break;
    slow_bytes += piece;
  }
  done = true;
  reader.join();
  EXPECT_TRUE(fast_bytes.ends_with(last));
  EXPECT_EQ(fast_bytes.size(), slow_bytes.size());
  EXPECT_TRUE(fast_bytes == slow_bytes) << "the two replicas' streams differ";
}

// Strings in the disk tier (past maxmemory, served from the log) go into the RDB whole: their
// bytes are read back from the file.
TEST(ReplicationDiskTierTest, ColdStringsAreInTheRdb) {
  ServerProcess server;
  ASSERT_TRUE(server.Start({.flags = {"--appendonly", "yes", "--maxmemory", "4mb",
                                      "--maxmemory-policy", "allkeys-lru"}}));
  RedisContext c = ConnectHiredis(server.port());
  ASSERT_NE(c, nullptr);
  constexpr int kValues = 8;
  auto value_of = [](int i) { return std::string(1 << 20, static_cast<char>('a' + i)); };
  for (int i = 0; i < kValues; ++i) {
    RedisReply r = HiredisCommand(c.get(), {"SET", "big" + std::to_string(i), value_of(i)});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS) << DescribeReply(r.get());
  }
  ASSERT_GT(InfoNumber(c.get(), "cold_keys"), 0u);
  StreamReader stream(server.port(), {}, /*psync=*/false);
  ASSERT_TRUE(stream.ready());
  for (int i = 0; i < kValues; ++i) {
    // The key, then the value's 32-bit length (1 MiB), then the value itself.
    const std::string head = "big" + std::to_string(i) + std::string("\x80\x00\x10\x00\x00", 5);
    const size_t at = stream.rdb().find(head);
    ASSERT_NE(at, std::string::npos) << i;
    EXPECT_TRUE(stream.rdb().compare(at + head.size(), 1 << 20, value_of(i)) == 0) << i;
  }
}

}  // namespace
}  // namespace prefixd::it
