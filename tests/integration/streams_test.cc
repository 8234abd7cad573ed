// Streams over real sockets: replies byte for byte against a real redis-server (Debian's 7.0,
// started here; explicit ids, so both servers hold the same entries), ids at their limit and one
// past, XINFO STREAM FULL unchanged by a restart through the log and through a snapshot (with a
// stream large enough to be appended in place), and the generic key commands on a stream.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

using Args = std::vector<std::string>;

class StreamsTest : public LoggedServerTest {};

const std::string kMaxId = "18446744073709551615-18446744073709551615";

// Every command runs on both servers in order and must answer the same bytes. No reply here
// holds a time (delivery and seen times differ between two servers).
TEST_F(StreamsTest, RepliesAsRedisDoes) {
  RedisServer redis;
  PREFIXD_START_REFERENCE_REDIS(redis);
  auto r = RawConnection::Tcp(redis.port());
  ASSERT_NE(r, nullptr);
  const std::vector<Args> commands = {
      // XADD: explicit ids, ms-*, the id errors, options and their errors.
      {"XADD", "s", "100", "a", "1"},
      {"XADD", "s", "101-5", "b", "2", "c", "3"},
      {"XADD", "s", "101-*", "d", "4"},
      {"XADD", "s", "101-6", "x", "y"},
      {"XADD", "s", "100-*", "x", "y"},
      {"XADD", "s", "0-0", "x", "y"},
      {"XADD", "t", "0-1", "x", "y"},
      {"XADD", "s", "abc", "x", "y"},
      {"XADD", "s", "1-2-3", "x", "y"},
      {"XADD", "s", "18446744073709551616-0", "x", "y"},  // one past the largest ms
      {"XADD", "s", "200", "x"},
      {"XADD", "s", "200"},
      {"XADD", "s", "MAXLEN", "-1", "200", "x", "y"},
      {"XADD", "s", "MAXLEN", "x", "200", "x", "y"},
      {"XADD", "s", "MAXLEN", "1", "MINID", "1", "200", "x", "y"},
      {"XADD", "s", "MAXLEN", "1", "LIMIT", "1", "200", "x", "y"},
      {"XADD", "s", "MAXLEN", "~", "1", "LIMIT", "-1", "200", "x", "y"},
      {"XADD", "s", "MINID", "abc", "200", "x", "y"},
      {"XADD", "nokey", "NOMKSTREAM", "1-1", "x", "y"},
      {"EXISTS", "nokey"},
      {"XADD", "s", "NOMKSTREAM", "102-0", "e", "5"},
      {"XADD", "s", "103-0", "f", ""},
      {"XADD", "s", "MAXLEN", "=", "4", "104-0", "g", "7"},
      {"XADD", "s", "MINID", "101-6", "105-0", "h", "8"},
      {"XLEN", "s"},
      {"XLEN", "nokey"},
      // XRANGE / XREVRANGE: special and exclusive ids, COUNT, errors.
      {"XRANGE", "s", "-", "+"},
      {"XRANGE", "s", "(101-6", "+", "COUNT", "2"},
      {"XRANGE", "s", "102", "102"},
      {"XRANGE", "s", "-", "+", "COUNT", "0"},
      {"XRANGE", "s", "-", "+", "COUNT", "-3"},
      {"XRANGE", "s", "-", "+", "COUNT"},
      {"XRANGE", "s", "-", "+", "COUNT", "x"},
      {"XRANGE", "s", "+", "-"},
      {"XRANGE", "s", "(" + kMaxId, "+"},
      {"XRANGE", "s", "-", "(0-0"},
      {"XRANGE", "s", "bad", "+"},
      {"XRANGE", "nokey", "-", "+"},
      {"XREVRANGE", "s", "+", "-", "COUNT", "2"},
      {"XREVRANGE", "s", "(105", "(101-6"},
      // XDEL / XTRIM.
      {"XDEL", "s", "103-0", "103-0", "999-0"},
      {"XDEL", "s", "bad"},
      {"XDEL", "nokey", "1-1"},
      {"XTRIM", "s", "MAXLEN", "10"},
      {"XTRIM", "s"},
      {"XTRIM", "s", "FOO", "1"},
      {"XTRIM", "s", "MAXLEN", "1", "LIMIT", "1"},
      {"XTRIM", "s", "MINID", "105"},
      {"XTRIM", "nokey", "MAXLEN", "0"},
      {"XRANGE", "s", "-", "+"},
      // Groups.
      {"XADD", "g", "1-1", "a", "1"},
      {"XADD", "g", "2-1", "b", "2"},
      {"XADD", "g", "3-1", "c", "3"},
      {"XADD", "g", "4-1", "d", "4"},
      {"XGROUP", "CREATE", "g", "one", "0"},
      {"XGROUP", "CREATE", "g", "one", "0"},
      {"XGROUP", "CREATE", "g", "two", "$"},
      {"XGROUP", "CREATE", "g", "three", "0", "ENTRIESREAD", "-5"},
      {"XGROUP", "CREATE", "g", "three", "0", "ENTRIESREAD", "2"},
      {"XGROUP", "CREATE", "nokey", "one", "0"},
      {"XGROUP", "CREATE", "m", "one", "$", "MKSTREAM"},
      {"XLEN", "m"},
      {"XINFO", "GROUPS", "m"},
      {"XREADGROUP", "GROUP", "one", "alice", "COUNT", "1", "STREAMS", "g", ">"},
      {"XREADGROUP", "GROUP", "one", "bob", "COUNT", "2", "STREAMS", "g", ">"},
      {"XREADGROUP", "GROUP", "one", "bob", "NOACK", "STREAMS", "g", ">"},
      {"XREADGROUP", "GROUP", "one", "bob", "STREAMS", "g", ">"},
      {"XREADGROUP", "GROUP", "one", "bob", "STREAMS", "g", "$"},
      {"XREADGROUP", "GROUP", "nogroup", "bob", "STREAMS", "g", ">"},
      {"XREADGROUP", "GROUP", "one", "bob", "STREAMS", "g"},
      {"XINFO", "GROUPS", "g"},
      {"XPENDING", "g", "one"},
      {"XPENDING", "g", "two"},
      {"XPENDING", "g", "nogroup"},
      {"XGROUP", "SETID", "g", "two", "1-1"},
      {"XGROUP", "SETID", "g", "nogroup", "0"},
      {"XDEL", "g", "2-1"},
      {"XINFO", "GROUPS", "g"},
      {"XREADGROUP", "GROUP", "two", "carol", "STREAMS", "g", ">"},
      {"XREADGROUP", "GROUP", "one", "bob", "STREAMS", "g", "0"},
      {"XACK", "g", "one", "2-1", "9-9"},
      {"XACK", "g", "one", "bad"},
      {"XACK", "g", "nogroup", "1-1"},
      {"XGROUP", "CREATECONSUMER", "g", "one", "dave"},
      {"XGROUP", "CREATECONSUMER", "g", "one", "dave"},
      {"XGROUP", "DELCONSUMER", "g", "one", "alice"},
      {"XGROUP", "DELCONSUMER", "g", "one", "nobody"},
      {"XGROUP", "CREATECONSUMER", "g", "nogroup", "dave"},
      {"XGROUP", "DELCONSUMER", "g", "nogroup", "alice"},
      {"XGROUP", "DESTROY", "g", "three"},
      {"XGROUP", "DESTROY", "g", "three"},
      {"XINFO", "GROUPS", "g"},
      {"XINFO", "STREAM", "nokey"},
      {"XINFO", "CONSUMERS", "g", "nogroup"},
      // XCLAIM / XAUTOCLAIM (no reply here carries an idle time).
      {"XADD", "c", "1-0", "f", "v"},
      {"XADD", "c", "2-0", "f", "v"},
      {"XADD", "c", "3-0", "f", "v"},
      {"XGROUP", "CREATE", "c", "grp", "0"},
      {"XREADGROUP", "GROUP", "grp", "alice", "STREAMS", "c", ">"},
      {"XDEL", "c", "2-0"},
      {"XCLAIM", "c", "grp", "bob", "0", "1-0", "2-0", "3-0"},
      {"XCLAIM", "c", "grp", "carol", "0", "1-0", "JUSTID"},
      {"XCLAIM", "c", "grp", "carol", "0", "1-0", "RETRYCOUNT", "7"},
      {"XCLAIM", "c", "grp", "carol", "0", "9-0", "FORCE"},
      {"XCLAIM", "c", "grp", "carol", "0", "3-0", "FORCE", "JUSTID", "LASTID", "5-0"},
      {"XCLAIM", "c", "grp", "carol", "0", "1-0", "BOGUS"},
      {"XCLAIM", "c", "grp", "carol", "x", "1-0"},
      {"XCLAIM", "c", "grp", "carol", "0", "1-0", "IDLE", "x"},
      {"XCLAIM", "c", "nogroup", "carol", "0", "1-0"},
      {"XCLAIM", "c", "grp", "carol", "100000", "1-0"},
      {"XAUTOCLAIM", "c", "grp", "dan", "0", "0-0", "COUNT", "1"},
      {"XAUTOCLAIM", "c", "grp", "dan", "0", "0-0", "COUNT", "0"},
      {"XAUTOCLAIM", "c", "grp", "dan", "0", "0-0", "COUNT", "8070450532247928833"},
      {"XAUTOCLAIM", "c", "grp", "dan", "x", "0-0"},
      {"XAUTOCLAIM", "nokey", "grp", "dan", "0", "0-0", "COUNT", "0"},
      {"XAUTOCLAIM", "c", "grp", "dan", "0", "-", "JUSTID"},
      {"XDEL", "c", "3-0"},
      {"XAUTOCLAIM", "c", "grp", "eve", "0", "0-0"},
      {"XPENDING", "c", "grp"},
      {"XINFO", "GROUPS", "c"},
      // XREAD.
      {"XREAD", "COUNT", "2", "STREAMS", "g", "s", "0", "0"},
      {"XREAD", "STREAMS", "g", "nokey", "0", "0"},
      {"XREAD", "STREAMS", "g", "$"},
      {"XREAD", "STREAMS", "g", ">"},
      {"XREAD", "STREAMS", "g"},
      {"XREAD", "COUNT", "x", "STREAMS", "g", "0"},
      // XSETID.
      {"XSETID", "g", "1-0"},
      {"XSETID", "nokey", "1-0"},
      {"XSETID", "g", "9-0", "ENTRIESADDED", "1"},
      {"XSETID", "g", "9-0", "ENTRIESADDED", "-1"},
      {"XSETID", "g", "9-0", "MAXDELETEDID", "10-0"},
      {"XSETID", "g", "9-0", "ENTRIESADDED", "50", "MAXDELETEDID", "3-0"},
      {"XINFO", "STREAM", "g"},
      // Ids at the limit: the largest id is taken, then nothing is left after it.
      {"XADD", "lim", kMaxId, "a", "b"},
      {"XADD", "lim", "*", "a", "b"},
      {"XADD", "lim", "18446744073709551615-*", "a", "b"},
      {"XLEN", "lim"},
      // The type against others.
      {"SET", "str", "v"},
      {"XADD", "str", "1-1", "a", "b"},
      {"XRANGE", "str", "-", "+"},
      {"XGROUP", "CREATE", "str", "g", "0"},
      {"GET", "g"},
      {"TYPE", "g"},
      {"OBJECT", "ENCODING", "g"},
      {"XINFO", "STREAM", "s"},
  };
  for (const Args& c : commands) {
    std::string label;
    for (const std::string& a : c) label += a + " ";
    EXPECT_EQ(Call(c), r->Call(c)) << label;
  }
}

// Approximate trimming drops every node wholly past the threshold, the last one too when it is
// not full (two entries and `MAXLEN ~ 0` leave nothing), and stops at the node that would take
// the count past LIMIT: 250 entries are nodes of 100, 100 and 50, each threshold at its limit
// and one past. Entries trimmed exactly still count in their node. Pending entries whose entry went
// answer [id, nil] in a consumer's history.
TEST_F(StreamsTest, ApproximateTrimmingDropsWholeNodesAsRedisDoes) {
  RedisServer redis;
  PREFIXD_START_REFERENCE_REDIS(redis);
  auto r = RawConnection::Tcp(redis.port());
  ASSERT_NE(r, nullptr);
  std::vector<Args> commands = {
      {"XADD", "two", "1-1", "a", "1"},
      {"XADD", "two", "2-1", "b", "2"},
      {"XGROUP", "CREATE", "two", "g", "0"},
      {"XREADGROUP", "GROUP", "g", "c", "STREAMS", "two", ">"},
      {"XTRIM", "two", "MAXLEN", "~", "1"},
      {"XTRIM", "two", "MAXLEN", "~", "0"},
      {"XLEN", "two"},
      {"XREADGROUP", "GROUP", "g", "c", "STREAMS", "two", "0"},
      {"XINFO", "STREAM", "two"},
      {"XADD", "two", "3-1", "c", "3"},
      {"XADD", "two", "4-1", "d", "4"},
      {"XTRIM", "two", "MINID", "~", "4-1"},
      {"XTRIM", "two", "MINID", "~", "4-2"},
      {"XINFO", "STREAM", "two"},
      {"XADD", "one", "1-1", "a", "1"},
      {"XADD", "one", "MAXLEN", "~", "1", "2-1", "b", "2"},
      {"XADD", "one", "MAXLEN", "~", "0", "3-1", "c", "3"},
      {"XADD", "one", "MINID", "~", "5", "4-1", "d", "4"},
      {"XINFO", "STREAM", "one"},
  };
  const auto fill = [&commands](const std::string& key) {
    commands.push_back({"DEL", key});
    for (int i = 1; i <= 250; ++i)
      commands.push_back({"XADD", key, std::to_string(i) + "-0", "f", "v"});
  };
  fill("big");
  for (const char* n : {"151", "150", "50", "49"})
    commands.push_back({"XTRIM", "big", "MAXLEN", "~", n});
  commands.push_back({"XLEN", "big"});
  fill("big");
  for (const char* n : {"99", "100", "149", "150"}) {
    commands.push_back({"XTRIM", "big", "MAXLEN", "~", "0", "LIMIT", n});
  }
  fill("big");
  for (const char* id : {"100-0", "101-0", "200-0", "201-0"}) {
    commands.push_back({"XTRIM", "big", "MINID", "~", id});
  }
  commands.push_back({"XTRIM", "big", "MINID", "~", "251-0", "LIMIT", "0"});
  // Exact trims leave Redis's first node part full: 1000 entries, then 666 and 555 exactly leave
  // 55 in it (the entries it lost were counted), which `~ 444` drops (Redis's own unit).
  commands.push_back({"DEL", "big"});
  for (int i = 1; i <= 1000; ++i) {
    commands.push_back({"XADD", "big", std::to_string(i) + "-0", i % 10 == 0 ? "y" : "x", "v"});
  }
  commands.push_back({"XTRIM", "big", "MAXLEN", "666"});
  commands.push_back({"XTRIM", "big", "MAXLEN", "=", "555"});
  commands.push_back({"XTRIM", "big", "MAXLEN", "~", "444"});
  commands.push_back({"XTRIM", "big", "MAXLEN", "~", "400"});
  commands.push_back({"XTRIM", "big", "MAXLEN", "~", "399"});
  commands.push_back({"XLEN", "big"});
  fill("big");
  commands.push_back({"XADD", "big", "MAXLEN", "230", "251-0", "f", "v"});
  // 230 left of 251: the first node holds 79 (22-0 to 100-0), each edge at its limit and one past.
  commands.push_back({"XTRIM", "big", "MINID", "~", "100-0"});
  commands.push_back({"XTRIM", "big", "MINID", "~", "101-0"});
  commands.push_back({"XTRIM", "big", "MAXLEN", "~", "52"});
  commands.push_back({"XTRIM", "big", "MAXLEN", "~", "51"});
  commands.push_back({"XLEN", "big"});
  fill("big");
  commands.push_back({"XADD", "big", "MAXLEN", "~", "150", "251-0", "f", "v"});
  commands.push_back({"XADD", "big", "MAXLEN", "~", "50", "LIMIT", "100", "252-0", "f", "v"});
  commands.push_back({"XINFO", "STREAM", "big"});
  for (const Args& c : commands) {
    std::string label;
    for (const std::string& a : c) label += a + " ";
    EXPECT_EQ(Call(c), r->Call(c)) << label;
  }
}

TEST_F(StreamsTest, StreamsSurviveARestartThroughTheLogAndASnapshot) {
  // A large stream (appended in place past 16 KiB), trimmed and with deletions, and a small one
  // with groups and pending entries.
  for (int i = 1; i <= 3000; ++i) {
    ASSERT_EQ(
        Call({"XADD", "big", std::to_string(i) + "-1", "field", std::string(i % 50, 'v')}),
        "$" + std::to_string(std::to_string(i).size() + 2) + "\r\n" + std::to_string(i) + "-1\r\n");
  }
  ASSERT_EQ(Call({"XDEL", "big", "10-1", "2999-1"}), ":2\r\n");
  ASSERT_EQ(Call({"XTRIM", "big", "MAXLEN", "2500"}), ":498\r\n");
  ASSERT_EQ(Call({"XADD", "big", "MAXLEN", "2400", "5000-0", "last", "one"}), "$6\r\n5000-0\r\n");
  for (int i = 1; i <= 5; ++i) Call({"XADD", "x", std::to_string(100 + i), "f", "v"});
  ASSERT_EQ(Call({"XGROUP", "CREATE", "x", "g1", "0"}), "+OK\r\n");
  ASSERT_EQ(Call({"XGROUP", "CREATE", "big", "g", "0", "ENTRIESREAD", "0"}), "+OK\r\n");
  Call({"XREADGROUP", "GROUP", "g1", "alice", "COUNT", "2", "STREAMS", "x", ">"});
  Call({"XREADGROUP", "GROUP", "g1", "bob", "NOACK", "COUNT", "1", "STREAMS", "x", ">"});
  Call({"XREADGROUP", "GROUP", "g", "carol", "COUNT", "7", "STREAMS", "big", ">"});
  ASSERT_EQ(Call({"XACK", "x", "g1", "101-0"}), ":1\r\n");
  ASSERT_EQ(Call({"XSETID", "x", "200-0", "ENTRIESADDED", "40"}), "+OK\r\n");
  ASSERT_EQ(Call({"EXPIRE", "x", "1000"}), ":1\r\n");
  const Args full_big = {"XINFO", "STREAM", "big", "FULL", "COUNT", "0"};
  const Args full_x = {"XINFO", "STREAM", "x", "FULL"};
  const std::string big = Call(full_big), x = Call(full_x);
  const std::string digest = Call({"DEBUG", "DIGEST-VALUE", "big", "x"});
  ASSERT_NE(big.find("$6\r\n5000-0"), std::string::npos) << big.substr(0, 300);
  ASSERT_EQ(Call({"XLEN", "big"}), ":2400\r\n");

  ASSERT_NO_FATAL_FAILURE(Restart());  // the log alone
  EXPECT_EQ(Call(full_big), big);
  EXPECT_EQ(Call(full_x), x);
  EXPECT_EQ(Call({"DEBUG", "DIGEST-VALUE", "big", "x"}), digest);
  EXPECT_EQ(Call({"TTL", "x"}).substr(0, 1), ":");
  EXPECT_NE(Call({"TTL", "x"}), ":-1\r\n");

  ASSERT_EQ(Call({"SAVE"}), "+OK\r\n");
  ASSERT_NO_FATAL_FAILURE(Restart());  // the snapshot
  EXPECT_EQ(Call(full_big), big);
  EXPECT_EQ(Call(full_x), x);
  EXPECT_EQ(Call({"DEBUG", "DIGEST-VALUE", "big", "x"}), digest);
  // Appends after the restart land on the recovered value.
  ASSERT_EQ(Call({"XADD", "big", "6000-0", "after", "restart"}), "$6\r\n6000-0\r\n");
  ASSERT_NO_FATAL_FAILURE(Restart());
  EXPECT_EQ(Call({"XLEN", "big"}), ":2401\r\n");
  EXPECT_EQ(Call({"XREVRANGE", "big", "+", "-", "COUNT", "1"}),
            "*1\r\n*2\r\n$6\r\n6000-0\r\n*2\r\n$5\r\nafter\r\n$7\r\nrestart\r\n");
}

// Reads by id of streams large enough for the seek index (over 16 KiB: entries of 300 bytes, three
// ids per millisecond): one entry, exactly a stride (64) and one past, 200 entries, then after
// XDEL of the entries the index points at, exact MAXLEN and MINID trims, a restart through the
// log and one from a snapshot. Every read answers as redis-server's, bounds inclusive and
// exclusive (`(`), COUNT 0, 1 and 3, both directions, and XREAD.
TEST_F(StreamsTest, ReadsByIdOfLargeStreamsAnswerAsRedisDoes) {
  RedisServer redis;
  PREFIXD_START_REFERENCE_REDIS(redis);
  auto r = RawConnection::Tcp(redis.port());
  ASSERT_NE(r, nullptr);
  const auto id = [](int i) { return std::to_string(1000 + i / 3) + "-" + std::to_string(i % 3); };
  const auto both = [&](const Args& c) {
    std::string label;
    for (const std::string& a : c) label += (a.size() > 40 ? "<value>" : a) + " ";
    const std::string theirs = r->Call(c);
    EXPECT_EQ(Call(c), theirs) << label;
    return theirs;
  };
  const auto add = [&](const std::string& key, int from, int to, size_t bytes) {
    for (int i = from; i < to; ++i) {
      both({"XADD", key, id(i), "f", std::string(bytes, static_cast<char>('a' + i % 26)), "n",
            std::to_string(i)});
    }
  };
  int compared = 0;
  const auto reads = [&](const std::string& key) {
    std::vector<std::string> bounds = {"-", "+", "999", "5000"};
    for (int i : {0, 1, 2, 62, 63, 64, 65, 66, 127, 128, 129, 149, 150, 151, 198, 199}) {
      bounds.push_back(id(i));
      bounds.push_back("(" + id(i));
      bounds.push_back(std::to_string(1000 + i / 3));  // the millisecond alone
    }
    for (const std::string& b : bounds) {
      both({"XRANGE", key, b, "+", "COUNT", "3"});
      both({"XREVRANGE", key, b, "-", "COUNT", "3"});
      both({"XREVRANGE", key, "+", b, "COUNT", "1"});
      both({"XRANGE", key, "-", b, "COUNT", "1"});
      if (b[0] != '(' && b != "-" && b != "+") {
        both({"XRANGE", key, b, b});
        both({"XREAD", "COUNT", "2", "STREAMS", key, b});
      }
      compared += 6;
    }
    both({"XRANGE", key, "-", "+", "COUNT", "0"});
    both({"XREVRANGE", key, "+", "-", "COUNT", "0"});
    both({"XRANGE", key, "-", "+"});
    both({"XREVRANGE", key, "+", "-"});
  };
  add("one", 0, 1, 17000);
  reads("one");
  add("stride", 0, 64, 300);
  reads("stride");
  add("stride", 64, 65, 300);
  reads("stride");
  add("ix", 0, 200, 300);
  reads("ix");
  both({"XDEL", "ix", id(0), id(64), id(128), id(129)});
  reads("ix");
  both({"XTRIM", "ix", "MAXLEN", "=", "150"});  // from entry 50: slots move
  reads("ix");
  both({"XTRIM", "ix", "MINID", "=", id(64)});
  reads("ix");
  ASSERT_NO_FATAL_FAILURE(Restart());  // the log
  for (const char* key : {"one", "stride", "ix"}) reads(key);
  ASSERT_EQ(Call({"SAVE"}), "+OK\r\n");
  ASSERT_NO_FATAL_FAILURE(Restart());  // the snapshot
  for (const char* key : {"one", "stride", "ix"}) reads(key);
  add("ix", 200, 300, 300);  // appends on the loaded value
  reads("ix");
  EXPECT_GT(compared, 1000);
}

TEST_F(StreamsTest, GenericKeyCommandsCarryAStream) {
  for (int i = 1; i <= 300; ++i) Call({"XADD", "s", std::to_string(i), "k", std::string(80, 'a')});
  ASSERT_EQ(Call({"XGROUP", "CREATE", "s", "g", "0"}), "+OK\r\n");
  Call({"XREADGROUP", "GROUP", "g", "c", "COUNT", "3", "STREAMS", "s", ">"});
  const Args full = {"XINFO", "STREAM", "s", "FULL", "COUNT", "0"};
  const std::string info = Call(full);
  EXPECT_EQ(Call({"TYPE", "s"}), "+stream\r\n");
  EXPECT_EQ(Call({"OBJECT", "ENCODING", "s"}), "$6\r\nstream\r\n");
  EXPECT_EQ(Call({"SCAN", "0", "TYPE", "stream"}), "*2\r\n$1\r\n0\r\n*1\r\n$1\r\ns\r\n");
  // MEMORY USAGE counts the entries (300 × 80 bytes of values at least).
  const std::string usage = Call({"MEMORY", "USAGE", "s"});
  ASSERT_EQ(usage[0], ':');
  EXPECT_GT(std::stoll(usage.substr(1)), 24000);

  ASSERT_EQ(Call({"COPY", "s", "c"}), ":1\r\n");
  EXPECT_EQ(Call({"XINFO", "STREAM", "c", "FULL", "COUNT", "0"}), info);
  ASSERT_EQ(Call({"RENAME", "c", "r"}), "+OK\r\n");
  EXPECT_EQ(Call({"XINFO", "STREAM", "r", "FULL", "COUNT", "0"}), info);
  const std::string dump = Call({"DUMP", "s"});
  ASSERT_EQ(dump[0], '$');
  const size_t header = dump.find("\r\n") + 2;
  const std::string payload = dump.substr(header, dump.size() - header - 2);
  ASSERT_EQ(Call({"RESTORE", "d", "0", payload}), "+OK\r\n");
  EXPECT_EQ(Call({"XINFO", "STREAM", "d", "FULL", "COUNT", "0"}), info);
  EXPECT_EQ(Call({"RESTORE", "d", "0", payload}), "-BUSYKEY Target key name already exists.\r\n");
  ASSERT_EQ(Call({"MOVE", "d", "1"}), ":1\r\n");
  ASSERT_EQ(Call({"SELECT", "1"}), "+OK\r\n");
  EXPECT_EQ(Call({"XINFO", "STREAM", "d", "FULL", "COUNT", "0"}), info);
  ASSERT_EQ(Call({"SWAPDB", "0", "1"}), "+OK\r\n");
  EXPECT_EQ(Call({"XLEN", "s"}), ":300\r\n");
  ASSERT_EQ(Call({"FLUSHDB"}), "+OK\r\n");
  EXPECT_EQ(Call({"XLEN", "s"}), ":0\r\n");
  ASSERT_EQ(Call({"SELECT", "0"}), "+OK\r\n");
  EXPECT_EQ(Call({"XLEN", "d"}), ":300\r\n");
  const std::string keyspace = Call({"INFO", "keyspace"});
  EXPECT_NE(keyspace.find("db0:keys=1,"), std::string::npos) << keyspace;
  // Expiry deletes a stream like any key.
  ASSERT_EQ(Call({"PEXPIRE", "d", "1"}), ":1\r\n");
  for (int i = 0; i < 100 && Call({"EXISTS", "d"}) != ":0\r\n"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(Call({"XLEN", "d"}), ":0\r\n");
}

// A stream counts in maxmemory: appends are refused at the budget (-OOM under noeviction), the
// commands that free memory still run, and an eviction policy evicts the stream whole.
TEST(StreamsMemoryTest, AStreamCountsInTheMemoryBudget) {
  ServerProcess server;
  ASSERT_TRUE(server.Start({.flags = {"--maxmemory", "1mb", "--maxmemory-policy", "noeviction"}}));
  auto c = RawConnection::Tcp(server.port());
  ASSERT_NE(c, nullptr);
  const std::string value(1000, 'v');
  int added = 0;
  std::string reply;
  for (int i = 1; i <= 20000; ++i) {
    reply = c->Call(Args{"XADD", "s", std::to_string(i) + "-0", "f", value});
    if (reply[0] != '$') break;
    added = i;
  }
  EXPECT_EQ(reply, "-OOM command not allowed when used memory > 'maxmemory'.\r\n");
  EXPECT_GT(added, 400);  // 1 MiB holds hundreds of 1000-byte entries
  EXPECT_EQ(c->Call(Args{"XLEN", "s"}), ":" + std::to_string(added) + "\r\n");
  const std::string usage = c->Call(Args{"MEMORY", "USAGE", "s"});
  ASSERT_EQ(usage[0], ':');
  EXPECT_GT(std::stoll(usage.substr(1)), added * 1000);
  EXPECT_EQ(c->Call(Args{"XTRIM", "s", "MAXLEN", "10"}), ":" + std::to_string(added - 10) + "\r\n");
  EXPECT_EQ(c->Call(Args{"XADD", "s", "*", "f", "v"}).substr(0, 1), "$");
  // Filled again, an eviction policy takes the stream whole to make room.
  for (int i = 0; i < 20000 && c->Call(Args{"XADD", "s", "*", "f", value})[0] == '$'; ++i) {
  }
  ASSERT_EQ(c->Call(Args{"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"}), "+OK\r\n");
  EXPECT_EQ(c->Call(Args{"SET", "k", std::string(100000, 'x')}), "+OK\r\n");
  EXPECT_EQ(c->Call(Args{"EXISTS", "s"}), ":0\r\n");
}

// BLOCK is refused only when the command would have to wait.
TEST_F(StreamsTest, BlockAnswersWhenDataIsThereAndIsRefusedOtherwise) {
  ASSERT_EQ(Call({"XADD", "s", "1-1", "a", "b"}), "$3\r\n1-1\r\n");
  EXPECT_EQ(Call({"XREAD", "BLOCK", "100", "STREAMS", "s", "0"}),
            "*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n");
  const std::string refused = Call({"XREAD", "BLOCK", "100", "STREAMS", "s", "$"});
  EXPECT_EQ(refused.rfind("-ERR BLOCK is not supported", 0), 0u) << refused;
  EXPECT_EQ(Call({"XREAD", "BLOCK", "-1", "STREAMS", "s", "$"}), "-ERR timeout is negative\r\n");
}

}  // namespace
}  // namespace prefixd::it
