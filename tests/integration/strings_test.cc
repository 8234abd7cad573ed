// The string type over real sockets: every string command's replies and errors byte for byte
// against a real redis-server (Debian's, started here), -WRONGTYPE between strings and the other
// types, keyspace hits/misses, OBJECT ENCODING, values and expiries that survive a restart
// (through the log and through a snapshot), MSET kept whole or dropped whole across a crash and
// a torn log, concurrent writers replayed as served, eviction of strings under maxmemory, and a
// large value returned bit-exact.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

using namespace std::chrono_literals;
using Args = std::vector<std::string>;

class StringsTest : public LoggedServerTest {
 protected:
  // A field of INFO stats (keyspace_hits, expired_keys, ...); -1 when it is missing.
  long Stat(const std::string& name) {
    const std::string info = Call({"INFO", "stats"});
    const size_t at = info.find(name + ":");
    return at == std::string::npos ? -1L : std::stol(info.substr(at + name.size() + 1));
  }
};

constexpr std::string_view kWrongType =
    "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

std::string Bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}

// Every command, valid and not, in an order that exercises each reply; sent to both servers.
const std::vector<Args>& ReferenceScript() {
  static const std::vector<Args> script = {
      {"GET", "s"},
      {"SET", "s", "hello"},
      {"GET", "s"},
      {"TYPE", "s"},
      {"OBJECT", "ENCODING", "s"},
      {"SET", "s", "v2", "NX"},
      {"SET", "s", "v2", "XX"},
      {"SET", "nx", "v", "XX"},
      {"SET", "s", "v3", "GET"},
      {"SET", "missing", "v", "XX", "GET"},
      {"SET", "s", "v4", "NX", "GET"},
      {"SET", "s", "v", "NX", "XX"},
      {"SET", "s", "v", "EX", "10", "PX", "100"},
      {"SET", "s", "v", "EX", "10", "KEEPTTL"},
      {"SET", "s", "v", "EX", "0"},
      {"SET", "s", "v", "EX", "-5"},
      {"SET", "s", "v", "EX", "abc"},
      {"SET", "s", "v", "PX", "9223372036854775807"},
      {"SET", "s", "v", "EX", "9223372036854775"},
      {"SET", "s", "v", "EXAT", "0"},
      {"SET", "s", "v", "BOGUS"},
      {"SET", "s", "v", "EX"},
      {"SET", "t", "v", "EX", "100"},
      {"TTL", "t"},
      {"SET", "t", "v2", "KEEPTTL"},
      {"TTL", "t"},
      {"SET", "t", "v3"},
      {"TTL", "t"},
      {"SET", "t", "v4", "PXAT", "99999999999000"},
      {"PEXPIRETIME", "t"},
      {"SETNX", "t", "x"},
      {"SETNX", "u", "x"},
      {"SETEX", "e", "100", "v"},
      {"TTL", "e"},
      {"SETEX", "e", "0", "v"},
      {"SETEX", "e", "x", "v"},
      {"PSETEX", "e", "-1", "v"},
      {"PSETEX", "e", "100000", "v"},
      {"TTL", "e"},  // rounded to seconds: a PTTL would depend on the milliseconds since PSETEX
      {"GETSET", "e", "new"},
      {"TTL", "e"},
      {"GETSET", "nokey", "x"},
      {"GETEX", "e", "EX", "100"},
      {"TTL", "e"},
      {"GETEX", "e", "PERSIST"},
      {"TTL", "e"},
      {"GETEX", "e", "EX", "0"},
      {"GETEX", "e", "PX", "10", "PERSIST"},
      {"GETEX", "e", "KEEPTTL"},
      {"GETEX", "nokey", "EX", "10"},
      {"GETEX", "e", "EXAT", "1"},
      {"EXISTS", "e"},
      {"GETDEL", "u"},
      {"GETDEL", "u"},
      {"MSET", "a", "1", "b", "2", "c"},
      {"MSET", "a", "1", "b", "2"},
      {"MGET", "a", "b", "nokey", "a"},
      {"MSETNX", "a", "9", "z", "9"},
      {"MSETNX", "y", "9", "z", "9"},
      {"MGET", "a", "y", "z"},
      {"STRLEN", "s"},
      {"STRLEN", "nokey"},
      {"SET", "r", "Hello World"},
      {"GETRANGE", "r", "0", "4"},
      {"GETRANGE", "r", "-5", "-1"},
      {"GETRANGE", "r", "-1", "-5"},
      {"GETRANGE", "r", "5", "3"},
      {"GETRANGE", "r", "0", "100"},
      {"GETRANGE", "r", "-100", "2"},
      {"GETRANGE", "r", "x", "2"},
      {"GETRANGE", "nokey", "0", "-1"},
      {"SET", "n", "12345"},
      {"GETRANGE", "n", "1", "2"},
      // SUBSTR: GETRANGE's old name, and its arity at the limit and one past.
      {"SUBSTR", "r", "0", "4"},
      {"SUBSTR", "r", "-5", "-1"},
      {"SUBSTR", "r", "x", "2"},
      {"SUBSTR", "nokey", "0", "-1"},
      {"SUBSTR", "r", "0"},
      {"SUBSTR", "r", "0", "4", "5"},
      {"COMMAND", "INFO", "substr"},
      {"COMMAND", "GETKEYSANDFLAGS", "substr", "r", "0", "1"},
      {"SETRANGE", "r", "6", "Redis"},
      {"GET", "r"},
      {"SETRANGE", "r", "-1", "x"},
      {"SETRANGE", "r", "x", "x"},
      {"SETRANGE", "r", "3", ""},
      {"SETRANGE", "nokey", "3", ""},
      {"EXISTS", "nokey"},
      {"SETRANGE", "pad", "5", "ab"},
      {"GET", "pad"},
      {"SETRANGE", "r", "9223372036854775807", "x"},
      {"SETRANGE", "r", "1073741824", "x"},
      {"APPEND", "ap", "abc"},
      {"APPEND", "ap", "def"},
      {"GET", "ap"},
      {"APPEND", "num", "12"},
      {"OBJECT", "ENCODING", "num"},
      {"APPEND", "num", "3"},
      {"OBJECT", "ENCODING", "num"},
      {"INCR", "num"},
      {"OBJECT", "ENCODING", "num"},
      {"INCR", "i"},
      {"INCRBY", "i", "10"},
      {"DECR", "i"},
      {"DECRBY", "i", "5"},
      {"INCRBY", "i", "abc"},
      {"INCRBY", "i", "1.5"},
      {"DECRBY", "i", "-9223372036854775808"},
      {"SET", "big", "9223372036854775807"},
      {"INCR", "big"},
      {"SET", "small", "-9223372036854775808"},
      {"DECR", "small"},
      {"INCRBY", "small", "-1"},
      {"INCR", "s"},
      {"SET", "sp", " 1"},
      {"INCR", "sp"},
      {"SET", "plus", "+1"},
      {"INCR", "plus"},
      {"SET", "lead", "01"},
      {"INCR", "lead"},
      {"INCRBYFLOAT", "f", "10.5"},
      {"INCRBYFLOAT", "f", "0.1"},
      {"INCRBYFLOAT", "f", "-5.0e3"},
      {"INCRBYFLOAT", "f", "abc"},
      {"INCRBYFLOAT", "f", " 1"},
      {"INCRBYFLOAT", "f", "inf"},
      {"INCRBYFLOAT", "f", "nan"},
      {"SET", "g", "5.0e3"},
      {"INCRBYFLOAT", "g", "2.0e2"},
      {"INCRBYFLOAT", "s", "1"},
      {"INCRBYFLOAT", "z0", "-0"},
      // A NUL inside the stored value or the increment: no number (Redis 7.0's string2ld).
      {"SET", "nul", "1"},
      {"SETRANGE", "nul", "2", "2"},
      {"INCRBYFLOAT", "nul", "1"},
      {"INCRBYFLOAT", "f", std::string("1\0", 2)},
      {"INCR", "nul"},
      {"INCRBY", "nul", std::string("1\0", 2)},
      // INCR's overflow and a non-integer, on an inline value, a missing key and a volatile one.
      {"SET", "max", "9223372036854775807"},
      {"INCR", "max"},
      {"DECRBY", "max", "-1"},
      {"INCRBY", "fresh", "-9223372036854775808"},
      {"DECR", "fresh"},
      {"GET", "fresh"},
      {"SET", "word", "ten"},
      {"INCR", "word"},
      {"SET", "vol", "41", "EX", "100"},
      {"INCR", "vol"},
      {"TTL", "vol"},
      {"SET", "e1", ""},
      {"GET", "e1"},
      {"STRLEN", "e1"},
      {"APPEND", "e1", ""},
      {"SET", "int", "1234"},
      {"OBJECT", "ENCODING", "int"},
      {"SET", "notint", "12345678901234567890"},
      {"OBJECT", "ENCODING", "notint"},
      {"SET", "emb", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
      {"OBJECT", "ENCODING", "emb"},
      {"SET", "raw", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
      {"OBJECT", "ENCODING", "raw"},
      {"SETRANGE", "emb", "0", "b"},
      {"OBJECT", "ENCODING", "emb"},
      {"SET", "neg0", "-0"},
      {"OBJECT", "ENCODING", "neg0"},
      {"SETBIT", "bits", "7", "1"},
      {"SETBIT", "bits", "7", "0"},
      {"SETBIT", "bits", "100", "1"},
      {"GET", "bits"},
      {"GETBIT", "bits", "100"},
      {"GETBIT", "bits", "101"},
      {"GETBIT", "bits", "100000"},
      {"GETBIT", "nokey", "0"},
      {"GETBIT", "int", "2"},
      {"SETBIT", "bits", "-1", "1"},
      {"SETBIT", "bits", "1", "2"},
      {"SETBIT", "bits", "x", "1"},
      {"SETBIT", "bits", "8589934592", "1"},
      {"OBJECT", "ENCODING", "bits"},
      {"MSET", "la", "ohmytext", "lb", "mynewtext"},
      {"LCS", "la", "lb"},
      {"LCS", "la", "lb", "LEN"},
      {"LCS", "la", "lb", "IDX"},
      {"LCS", "la", "lb", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"},
      {"LCS", "la", "lb", "IDX", "MINMATCHLEN", "x"},
      {"LCS", "la", "lb", "LEN", "IDX"},
      {"LCS", "la", "nokey"},
      {"LCS", "la", "lb", "BOGUS"},
      {"SET", "rn", "1", "EX", "100"},
      {"RENAME", "rn", "rn2"},
      {"TTL", "rn2"},
      {"RENAME", "nokey", "x"},
      {"RENAMENX", "rn2", "rn2"},
      {"RENAME", "rn2", "rn2"},
      {"RENAMENX", "rn2", "int"},
      {"COPY", "rn2", "cp"},
      {"COPY", "rn2", "cp"},
      {"COPY", "rn2", "cp", "REPLACE"},
      {"COPY", "rn2", "rn2"},
      {"COPY", "rn2", "rn2", "DB", "1"},
      {"COPY", "rn2", "cp", "DB", "99"},
      {"COPY", "rn2", "cp", "DB", "x"},
      {"COPY", "rn2", "cp", "BOGUS"},
      {"MOVE", "cp", "1"},
      {"MOVE", "cp", "1"},
      {"MOVE", "nokey", "1"},
      {"MOVE", "rn2", "0"},
      {"GET"},
      {"SET", "k"},
      {"MGET"},
      {"SETEX", "k", "10"},
      {"GETDEL", "a", "b"},
      {"DEL", "a", "b", "c"},
      {"DBSIZE"},
  };
  return script;
}

TEST_F(StringsTest, RepliesAsRedisDoes) {
  RedisServer redis;
  PREFIXD_START_REFERENCE_REDIS(redis);
  auto r = RawConnection::Tcp(redis.port());
  ASSERT_NE(r, nullptr);
  ExpectSameReplies(*conn_, *r, ReferenceScript());
}

// A string's delete is its own record alone: DEL of a string named "" (a name no prefix-index
// namespace may have) deletes it, where a namespace drop logged after it would be refused.
TEST_F(StringsTest, DelOfAStringLogsOnlyItsOwnDelete) {
  ASSERT_EQ(Call({"SET", "", "v"}), "+OK\r\n");
  EXPECT_EQ(Call({"DEL", ""}), ":1\r\n");
  EXPECT_EQ(Call({"GET", ""}), "$-1\r\n");
  ASSERT_EQ(Call({"SET", "s", "v"}), "+OK\r\n");
  EXPECT_EQ(Call({"UNLINK", "s"}), ":1\r\n");
  EXPECT_EQ(Call({"DBSIZE"}), ":0\r\n");
}

// SET and MSET replace a key of another type, but only once their own record is admitted: a
// write the limits refuse (here a key past max-sid-len) leaves the other type's key as it was.
TEST_F(StringsTest, ARefusedWriteLeavesAKeyOfAnotherTypeInPlace) {
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "s", "0", "state"}), "+OK\r\n");
  const std::string too_long(1025, 'k');
  EXPECT_EQ(Call({"MSET", "s", "v", too_long, "v"}).rfind("-ERR string multi set refused", 0), 0u);
  EXPECT_EQ(Call({"TYPE", "s"}), "+ssm-prefix\r\n");
  EXPECT_EQ(Call({"SSM.PREFIX.FETCH", "s", "0"}), "$5\r\nstate\r\n");
  EXPECT_EQ(Call({"MSET", "s", "v", "k", "w"}), "+OK\r\n");  // admitted: s becomes a string
  EXPECT_EQ(Call({"GET", "s"}), "$1\r\nv\r\n");
}

TEST_F(StringsTest, OtherTypesAndStringsAnswerWrongType) {
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "ssm", "0", "x"}), "+OK\r\n");
  ASSERT_EQ(Call({"SET", "str", "v"}), "+OK\r\n");
  for (const Args& command : std::vector<Args>{{"GET", "ssm"},
                                               {"GETRANGE", "ssm", "0", "1"},
                                               {"SUBSTR", "ssm", "0", "1"},
                                               {"STRLEN", "ssm"},
                                               {"APPEND", "ssm", "x"},
                                               {"INCR", "ssm"},
                                               {"INCRBYFLOAT", "ssm", "1"},
                                               {"SETRANGE", "ssm", "0", "x"},
                                               {"GETDEL", "ssm"},
                                               {"GETEX", "ssm"},
                                               {"SET", "ssm", "x", "GET"},
                                               {"GETSET", "ssm", "x"},
                                               {"SSM.PREFIX.STORE", "str", "0", "x"},
                                               {"SSM.PREFIX.FETCH", "str", "0"},
                                               {"V.CREATE", "str", "8"}}) {
    EXPECT_EQ(Call(command), kWrongType) << command[0];
  }
  // MGET answers nil for a key of another type; SETNX and MSETNX see it exists.
  EXPECT_EQ(Call({"MGET", "ssm", "str"}), "*2\r\n$-1\r\n$1\r\nv\r\n");
  EXPECT_EQ(Call({"SETNX", "ssm", "x"}), ":0\r\n");
  EXPECT_EQ(Call({"MSETNX", "ssm", "x", "new", "y"}), ":0\r\n");
  EXPECT_EQ(Call({"TYPE", "ssm"}), "+ssm-prefix\r\n");
  EXPECT_EQ(Call({"TYPE", "str"}), "+string\r\n");
  // SET replaces a key of any type, as Redis's SET does.
  EXPECT_EQ(Call({"SET", "ssm", "now a string"}), "+OK\r\n");
  EXPECT_EQ(Call({"TYPE", "ssm"}), "+string\r\n");
  EXPECT_EQ(Call({"SSM.PREFIX.FETCH", "ssm", "0"}), kWrongType);
  EXPECT_EQ(Call({"DBSIZE"}), ":2\r\n");
  EXPECT_EQ(Call({"SCAN", "0", "TYPE", "string", "COUNT", "100"}).substr(0, 15),
            "*2\r\n$1\r\n0\r\n*2\r\n");
  Restart();
  EXPECT_EQ(Call({"TYPE", "ssm"}), "+string\r\n");
  EXPECT_EQ(Call({"GET", "ssm"}), Bulk("now a string"));
  EXPECT_EQ(Call({"SSM.PREFIX.FETCH", "ssm", "0"}), kWrongType);
}

TEST_F(StringsTest, HitsAndMissesAreCounted) {
  const long hits = Stat("keyspace_hits"), misses = Stat("keyspace_misses");
  ASSERT_EQ(Call({"SET", "k", "v"}), "+OK\r\n");  // a write lookup counts neither
  Call({"GET", "k"});
  Call({"GET", "nope"});
  Call({"MGET", "k", "nope", "k"});
  Call({"STRLEN", "k"});
  Call({"INCR", "counter"});  // a write lookup again
  EXPECT_EQ(Stat("keyspace_hits"), hits + 4);
  EXPECT_EQ(Stat("keyspace_misses"), misses + 2);
}

// A plain SET or MSET looks nothing up before its put (Keyspace::PutString's
// only_over_live_at_ms): over a key that has expired but is still in the table it must fall back
// to the path that expires the key first, so each such key is counted expired exactly once
// (by that write or by the active pass, whichever reached it first) and the new value keeps no
// old expiry; over a key of another type it must delete that key by its own record.
TEST_F(StringsTest, PlainWritesOverExpiredKeysAndOtherTypesTakeTheirDeletionFirst) {
  constexpr int kKeys = 400;
  const auto key = [](int i) { return "exp:" + std::to_string(i); };
  const long expired_before = Stat("expired_keys");
  for (int i = 0; i < kKeys; ++i) ASSERT_EQ(Call({"SET", key(i), "old", "PX", "1"}), "+OK\r\n");
  std::this_thread::sleep_for(5ms);  // all expired; the active pass takes ~20 a cycle
  for (int i = 0; i < kKeys / 2; ++i) ASSERT_EQ(Call({"SET", key(i), "new"}), "+OK\r\n");
  for (int i = kKeys / 2; i < kKeys; i += 2) {
    ASSERT_EQ(Call({"MSET", key(i), "new", key(i + 1), "new"}), "+OK\r\n");
  }
  EXPECT_EQ(Stat("expired_keys") - expired_before, kKeys);
  for (int i : {0, kKeys / 2 - 1, kKeys / 2, kKeys - 1}) {
    EXPECT_EQ(Call({"GET", key(i)}), Bulk("new")) << key(i);
    EXPECT_EQ(Call({"PTTL", key(i)}), ":-1\r\n") << key(i);
  }
  // Another type under SET and under one key of an MSET: gone whole, across a restart too. The
  // large value (shared with the request from 32 KiB) is handed to the put twice: by the put
  // that declines and by the one after it.
  const std::string large(64 * 1024 + 7, 'L');
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "ssm1", "0", "state"}), "+OK\r\n");
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "ssm2", "3", "state"}), "+OK\r\n");
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "ssm3", "1", "state"}), "+OK\r\n");
  ASSERT_EQ(Call({"SET", "ssm1", "s1"}), "+OK\r\n");
  ASSERT_EQ(Call({"MSET", "plain", "p", "ssm2", "s2"}), "+OK\r\n");
  ASSERT_EQ(Call({"SET", "ssm3", large}), "+OK\r\n");
  ASSERT_NO_FATAL_FAILURE(Restart());
  for (const auto& [k, v] : {std::pair<std::string, std::string>{"ssm1", "s1"},
                             {"ssm2", "s2"},
                             {"plain", "p"},
                             {"ssm3", large}}) {
    EXPECT_EQ(Call({"TYPE", k}), "+string\r\n") << k;
    EXPECT_EQ(Call({"GET", k}), Bulk(v)) << k;
  }
  EXPECT_EQ(Call({"SSM.PREFIX.LAYERS", "ssm2"}), kWrongType);
  EXPECT_EQ(Call({"DBSIZE"}), ":" + std::to_string(kKeys + 4) + "\r\n");
  // No session outlives its key in the state store.
  EXPECT_NE(Call({"INFO", "memory"}).find("ssm_sessions:0\r\n"), std::string::npos);
  ASSERT_EQ(Call({"DEL", "ssm1", "ssm2", "ssm3"}), ":3\r\n");
  EXPECT_EQ(Call({"SSM.PREFIX.FETCH", "ssm1", "0"}), "$-1\r\n");
  EXPECT_EQ(Call({"SSM.PREFIX.LAYERS", "ssm2"}).substr(0, 2), "*0");
}

// A SET over an existing key counts as an access of it (Redis's lookupKeyWrite), for LFU too.
TEST_F(StringsTest, PlainSetTouchesTheKeyItReplaces) {
  ASSERT_EQ(Call({"CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"}), "+OK\r\n");
  ASSERT_EQ(Call({"SET", "once", "v"}), "+OK\r\n");
  for (int i = 0; i < 50; ++i) ASSERT_EQ(Call({"SET", "often", std::to_string(i)}), "+OK\r\n");
  for (int i = 0; i < 5; ++i) ASSERT_EQ(Call({"MSET", "often", "m", "x", "y"}), "+OK\r\n");
  const std::string once = Call({"OBJECT", "FREQ", "once"});
  const std::string often = Call({"OBJECT", "FREQ", "often"});
  ASSERT_EQ(once[0], ':') << once;
  ASSERT_EQ(often[0], ':') << often;
  EXPECT_GT(std::stoll(often.substr(1)), std::stoll(once.substr(1)));
}

// A value is inline in the key's entry below 16 KiB (KeyEntry::kInlineValueBelow) and its own
// buffer from there: growing across the line by APPEND and SETRANGE, and shrinking back by SET,
// keeps every byte, the expiry and the encoding, through a restart too.
TEST_F(StringsTest, ValuesGrowAndShrinkAcrossTheInlineThreshold) {
  constexpr size_t kInline = 16 * 1024;
  std::string value(kInline - 1, 'a');
  ASSERT_EQ(Call({"SET", "g", value, "EX", "1000"}), "+OK\r\n");
  EXPECT_EQ(Call({"OBJECT", "ENCODING", "g"}), Bulk("raw"));
  value += 'b';
  ASSERT_EQ(Call({"APPEND", "g", "b"}), ":" + std::to_string(kInline) + "\r\n");
  EXPECT_EQ(Call({"GET", "g"}), Bulk(value));
  EXPECT_EQ(Call({"GETRANGE", "g", std::to_string(kInline - 2), "-1"}), Bulk("ab"));
  value += std::string(1, '\0') + "c";
  ASSERT_EQ(Call({"SETRANGE", "g", std::to_string(kInline + 1), "c"}),
            ":" + std::to_string(kInline + 2) + "\r\n");
  EXPECT_EQ(Call({"GET", "g"}), Bulk(value));
  const std::string ttl = Call({"PEXPIRETIME", "g"});
  EXPECT_NE(ttl, ":-1\r\n");
  ASSERT_EQ(Call({"SET", "g", "12", "KEEPTTL"}), "+OK\r\n");
  EXPECT_EQ(Call({"OBJECT", "ENCODING", "g"}), Bulk("int"));
  EXPECT_EQ(Call({"INCR", "g"}), ":13\r\n");
  ASSERT_EQ(Call({"SETRANGE", "e", "0", ""}), ":0\r\n");  // no key made
  ASSERT_EQ(Call({"SET", "e", ""}), "+OK\r\n");
  ASSERT_EQ(Call({"APPEND", "s", std::string(kInline - 1, 'x')}),
            ":" + std::to_string(kInline - 1) + "\r\n");
  ASSERT_EQ(Call({"SETRANGE", "s", std::to_string(kInline - 1), "y"}),
            ":" + std::to_string(kInline) + "\r\n");
  Restart();
  EXPECT_EQ(Call({"GET", "g"}), Bulk("13"));
  EXPECT_EQ(Call({"PEXPIRETIME", "g"}), ttl);
  EXPECT_EQ(Call({"GET", "e"}), Bulk(""));
  EXPECT_EQ(Call({"GET", "s"}), Bulk(std::string(kInline - 1, 'x') + "y"));
}

// A value below 512 bytes (persist::kCopiedBlobBelow) is lent from the request to its record
// and its key's entry, which copy it before the command returns. Sent as one pipeline, so every
// later request lands in buffers an earlier one used, values at the limit and either side of it
// (SET, MSET, SETNX, SETEX, GETSET, INCR) read back whole, live and after a restart from the log.
TEST_F(StringsTest, ValuesLentFromTheRequestAreKeptWholeAtEverySize) {
  const auto value = [](size_t size, char seed) {
    std::string v(size, '\0');
    for (size_t i = 0; i < size; ++i) v[i] = static_cast<char>(seed + i * 7);
    return v;
  };
  std::vector<std::pair<std::string, std::string>> expected;
  std::string pipeline;
  size_t replies = 0;
  const auto send = [&](const Args& args) {
    pipeline += Multibulk(args);
    ++replies;
  };
  for (size_t size : {0, 1, 15, 16, 510, 511, 512, 513, 1024}) {
    const std::string n = std::to_string(size);
    send({"SET", "set:" + n, value(size, 'a')});
    send({"MSET", "m1:" + n, value(size, 'b'), "m2:" + n, value(size, 'c')});
    send({"SETNX", "nx:" + n, value(size, 'd')});
    send({"SETEX", "ex:" + n, "1000", value(size, 'e')});
    send({"SET", "gs:" + n, "first"});
    send({"GETSET", "gs:" + n, value(size, 'f')});
    for (auto [prefix, seed] : {std::pair{"set:", 'a'},
                                {"m1:", 'b'},
                                {"m2:", 'c'},
                                {"nx:", 'd'},
                                {"ex:", 'e'},
                                {"gs:", 'f'}}) {
      expected.emplace_back(prefix + n, value(size, seed));
    }
  }
  for (int64_t start : {int64_t{9}, int64_t{-10}, int64_t{99999}, int64_t{9223372036854775806}}) {
    const std::string key = "incr:" + std::to_string(start);
    send({"SET", key, std::to_string(start)});
    send({"INCR", key});
    expected.emplace_back(key, std::to_string(start + 1));
  }
  ASSERT_TRUE(conn_->Send(pipeline));
  for (size_t i = 0; i < replies; ++i) {
    const auto reply = conn_->ReadReply();
    ASSERT_TRUE(reply.has_value()) << "reply " << i;
    ASSERT_NE(reply->front(), '-') << *reply;
  }
  for (const auto& [key, v] : expected) EXPECT_EQ(Call({"GET", key}), Bulk(v)) << key;
  Restart();
  for (const auto& [key, v] : expected) EXPECT_EQ(Call({"GET", key}), Bulk(v)) << key;
}

TEST_F(StringsTest, ValuesAndExpiriesSurviveARestart) {
  ASSERT_EQ(Call({"SET", "plain", "v"}), "+OK\r\n");
  ASSERT_EQ(Call({"SET", "ttl", "v", "EX", "1000"}), "+OK\r\n");
  ASSERT_EQ(Call({"SET", "short", "v", "PX", "300"}), "+OK\r\n");
  ASSERT_EQ(Call({"INCRBY", "n", "41"}), ":41\r\n");
  ASSERT_EQ(Call({"EXPIRE", "n", "2000"}), ":1\r\n");
  ASSERT_EQ(Call({"INCR", "n"}), ":42\r\n");  // keeps its expiry
  ASSERT_EQ(Call({"APPEND", "ap", "abc"}), ":3\r\n");
  ASSERT_EQ(Call({"APPEND", "ap", "def"}), ":6\r\n");
  ASSERT_EQ(Call({"SETRANGE", "ap", "10", "z"}), ":11\r\n");
  ASSERT_EQ(Call({"SET", "gone", "v"}), "+OK\r\n");
  ASSERT_EQ(Call({"DEL", "gone"}), ":1\r\n");
  const std::string exat = Call({"PEXPIRETIME", "ttl"});
  std::string binary(70000, '\0');
  std::mt19937 rng(7);
  for (char& c : binary) c = static_cast<char>(rng());
  ASSERT_EQ(Call({"SET", "bin", binary}), "+OK\r\n");
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "replayed from the log" : "loaded from a snapshot");
    Restart();
    EXPECT_EQ(Call({"GET", "plain"}), Bulk("v"));
    EXPECT_EQ(Call({"PEXPIRETIME", "ttl"}), exat);  // the absolute time, not a fresh TTL
    EXPECT_EQ(Call({"GET", "n"}), Bulk("42"));
    EXPECT_EQ(Call({"OBJECT", "ENCODING", "n"}), Bulk("int"));
    EXPECT_EQ(Call({"OBJECT", "ENCODING", "ap"}), Bulk("raw"));
    // The seconds left count down across restarts (slow under TSan), never back up to 2000.
    const std::string ttl = Call({"TTL", "n"});
    ASSERT_TRUE(ttl.size() > 3 && ttl[0] == ':') << ttl;
    const int left = std::stoi(ttl.substr(1));
    EXPECT_TRUE(left > 1980 && left <= 2000) << ttl;
    EXPECT_EQ(Call({"GET", "ap"}), Bulk(std::string("abcdef\0\0\0\0z", 11)));
    EXPECT_EQ(Call({"GET", "gone"}), "$-1\r\n");
    EXPECT_EQ(Call({"GET", "bin"}), Bulk(binary));
    if (round == 0) ASSERT_EQ(Call({"SAVE"}), "+OK\r\n");
  }
  std::this_thread::sleep_for(350ms);
  EXPECT_EQ(Call({"GET", "short"}), "$-1\r\n");
  EXPECT_EQ(Call({"DBSIZE"}), ":5\r\n");
}

// The newest log segment of a data directory.
std::string NewestSegment(const std::string& dir) {
  std::string newest;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("log-") && name.ends_with(".seg") && entry.path().string() > newest) {
      newest = entry.path().string();
    }
  }
  return newest;
}

// MSET and MSETNX log one record for all their keys: an acknowledged MSET survives a crash whole,
// and one whose record is torn at the log's tail is gone whole, none of its keys half set.
TEST_F(StringsTest, MsetIsOneRecordKeptWholeOrDroppedWhole) {
  const auto persistence = [&](const std::string& field) {
    const std::string info = Call({"INFO", "persistence"});
    const size_t at = info.find(field + ":");
    return at == std::string::npos ? -1L : std::stol(info.substr(at + field.size() + 1));
  };
  const auto appended = [&] { return persistence("log_records_appended"); };
  const std::string large(5000, 'c');  // written from its own buffer, not copied into the record
  ASSERT_EQ(Call({"SET", "a", "old"}), "+OK\r\n");
  const long before = appended();
  const long changes = persistence("rdb_changes_since_last_save");
  ASSERT_EQ(Call({"MSET", "a", "1", "b", "2", "c", large}), "+OK\r\n");
  EXPECT_EQ(appended(), before + 1);
  EXPECT_EQ(persistence("rdb_changes_since_last_save"), changes + 3) << "Redis counts every key";
  ASSERT_EQ(Call({"MSETNX", "d", "4", "e", "5"}), ":1\r\n");
  EXPECT_EQ(appended(), before + 2);
  ASSERT_EQ(Call({"MSETNX", "e", "x", "f", "6"}), ":0\r\n");
  EXPECT_EQ(appended(), before + 2) << "MSETNX set nothing and logged something";
  ASSERT_EQ(Call({"MSET", "a", "torn", "g", "7", "b", "torn"}), "+OK\r\n");
  EXPECT_EQ(appended(), before + 3);
  // The last MSET's record is the log's tail: cut into it, as a crash mid-write would.
  ASSERT_TRUE(server_.Kill());
  const std::string segment = NewestSegment(server_.data_dir());
  ASSERT_FALSE(segment.empty());
  std::filesystem::resize_file(segment, std::filesystem::file_size(segment) - 3);
  ASSERT_TRUE(server_.Restart({.flags = {"--appendonly", "yes"}}));
  Reconnect();
  EXPECT_EQ(Call({"MGET", "a", "b", "g"}), "*3\r\n" + Bulk("1") + Bulk("2") + "$-1\r\n");
  EXPECT_EQ(Call({"MGET", "c", "d", "e", "f"}),
            "*4\r\n" + Bulk(large) + Bulk("4") + Bulk("5") + "$-1\r\n");
  EXPECT_NE(server_.ReadLog().find("torn tail"), std::string::npos);
  // Acknowledged, then SIGKILL: every key of it is there.
  ASSERT_EQ(Call({"MSET", "a", "new", "g", "7", "b", large, "d", "44"}), "+OK\r\n");
  ASSERT_TRUE(server_.Kill());
  ASSERT_TRUE(server_.Restart({.flags = {"--appendonly", "yes"}}));
  Reconnect();
  EXPECT_EQ(Call({"MGET", "a", "g", "b", "d", "e"}),
            "*5\r\n" + Bulk("new") + Bulk("7") + Bulk(large) + Bulk("44") + Bulk("5"));
  EXPECT_EQ(Call({"OBJECT", "ENCODING", "d"}), Bulk("int"));
}

// MSET replaces keys of other types (each dropped by its own record first, as SET does) and
// MSETNX leaves everything alone when one key exists, of whatever type; a restart agrees.
TEST_F(StringsTest, MsetOverOtherTypesSurvivesARestart) {
  ASSERT_EQ(Call({"SSM.PREFIX.STORE", "ssm", "0", "x"}), "+OK\r\n");
  ASSERT_EQ(Call({"V.CREATE", "vec", "8"}), ":0\r\n");
  EXPECT_EQ(Call({"MSETNX", "new", "1", "vec", "2"}), ":0\r\n");
  EXPECT_EQ(Call({"EXISTS", "new"}), ":0\r\n");
  ASSERT_EQ(Call({"SET", "ttl", "v", "EX", "1000"}), "+OK\r\n");
  ASSERT_EQ(Call({"MSET", "ssm", "s", "vec", "v", "plain", "p", "ttl", "no expiry"}), "+OK\r\n");
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "served" : "after a crash");
    EXPECT_EQ(Call({"TYPE", "ssm"}), "+string\r\n");
    EXPECT_EQ(Call({"TYPE", "vec"}), "+string\r\n");
    EXPECT_EQ(Call({"MGET", "ssm", "vec", "plain", "ttl"}),
              "*4\r\n" + Bulk("s") + Bulk("v") + Bulk("p") + Bulk("no expiry"));
    EXPECT_EQ(Call({"TTL", "ttl"}), ":-1\r\n");  // MSET clears the expiry, as Redis's
    EXPECT_EQ(Call({"SSM.PREFIX.FETCH", "ssm", "0"}), kWrongType);
    EXPECT_EQ(Call({"DBSIZE"}), ":4\r\n");
    ASSERT_TRUE(server_.Kill());
    ASSERT_TRUE(server_.Restart({.flags = {"--appendonly", "yes"}}));
    Reconnect();
  }
}

// Clients race MSETs over overlapping keys with SETs (some expiring within milliseconds), DELs,
// INCRs and MSETNXs; after a crash, the log replays to exactly what the server held.
TEST_F(StringsTest, ConcurrentStringWritersReplayToWhatWasServed) {
  constexpr int kClients = 4, kRequests = 300, kKeys = 16;
  const auto key = [](uint64_t i) { return "k" + std::to_string(i % kKeys); };
  std::vector<std::thread> clients;
  std::atomic<int> failures{0};
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto conn = RawConnection::Tcp(server_.port());
      if (conn == nullptr) return void(++failures);
      std::mt19937_64 rng(c + 1);
      for (int n = 0; n < kRequests; ++n) {
        const std::string value = std::to_string(c) + "-" + std::to_string(n);
        Args args;
        switch (rng() % 6) {
          case 0:
          case 1:
            args = {"MSET"};
            for (uint64_t i = 0, count = 2 + rng() % 5; i < count; ++i) {
              args.insert(args.end(), {key(rng()), value});
            }
            break;
          case 2:
            args = {"SET", key(rng()), value, "PX", std::to_string(1 + rng() % 20)};
            break;
          case 3:
            args = {"DEL", key(rng())};
            break;
          case 4:
            args = {"INCR", "n" + std::to_string(rng() % 3)};
            break;
          case 5:
            args = {"MSETNX", key(rng()), value, key(rng()), value};
            break;
        }
        const std::string reply = conn->Call(args);
        if (reply.empty() || reply[0] == '-') ++failures;
      }
    });
  }
  for (std::thread& client : clients) client.join();
  ASSERT_EQ(failures.load(), 0);
  std::this_thread::sleep_for(50ms);  // every key set with PX has expired
  Args everything = {"MGET", "n0", "n1", "n2"};
  for (int i = 0; i < kKeys; ++i) everything.push_back(key(i));
  const std::string served = Call(everything);
  const std::string count = Call({"DBSIZE"});
  ASSERT_TRUE(server_.Kill());
  ASSERT_TRUE(server_.Restart({.flags = {"--appendonly", "yes"}}));
  Reconnect();
  EXPECT_EQ(Call(everything), served);
  EXPECT_EQ(Call({"DBSIZE"}), count);
}

TEST_F(StringsTest, MemoryUsageCountsTheValue) {
  ASSERT_EQ(Call({"SET", "small", std::string(28, 'm')}), "+OK\r\n");
  ASSERT_EQ(Call({"SET", "large", std::string(1 << 20, 'l')}), "+OK\r\n");
  const std::string small = Call({"MEMORY", "USAGE", "small"});
  const std::string large = Call({"MEMORY", "USAGE", "large"});
  ASSERT_EQ(small[0], ':');
  ASSERT_EQ(large[0], ':');
  EXPECT_LT(std::stol(small.substr(1)), 200);
  EXPECT_GE(std::stol(large.substr(1)), 1 << 20);
  EXPECT_LT(std::stol(large.substr(1)), (1 << 20) + (128 << 10));
}

class StringEvictionTest : public ServerTest {};

// Without persistence (with it, large strings go to the disk tier instead:
// string_disktier_test.cc).
TEST_F(StringEvictionTest, StringsAreEvictedByPolicy) {
  ASSERT_NO_FATAL_FAILURE(StartServer({.flags = {"--appendonly", "no", "--maxmemory", "24mb",
                                                 "--maxmemory-policy", "allkeys-lru"}}));
  auto conn = RawConnection::Tcp(server_.port());
  ASSERT_NE(conn, nullptr);
  const std::string chunk(1 << 20, 'c');
  for (int i = 0; i < 64; ++i) {
    ASSERT_EQ(conn->Call(Args{"SET", "chunk" + std::to_string(i), chunk}), "+OK\r\n");
    // chunk0 is read after every write: LRU never evicts it.
    ASSERT_EQ(conn->Call(Args{"STRLEN", "chunk0"}), ":1048576\r\n") << i;
  }
  std::string info = conn->Call(Args{"INFO", "stats"});
  EXPECT_EQ(info.find("evicted_keys:0\r\n"), std::string::npos);
  const std::string size = conn->Call(Args{"DBSIZE"});
  // 24 MiB hold at most 24 chunks (the check runs before each write), and LRU evicts no more
  // than it must.
  EXPECT_LE(std::stol(size.substr(1)), 24);
  EXPECT_GE(std::stol(size.substr(1)), 20);
  EXPECT_EQ(conn->Call(Args{"EXISTS", "chunk63", "chunk1"}), ":1\r\n");
}

}  // namespace
}  // namespace prefixd::it
