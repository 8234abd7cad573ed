// The hash type over real sockets: replies byte for byte against a real redis-server (Debian's,
// started here) for binary fields and values the text-script parity test cannot send, and
// OBJECT ENCODING at hash-max-listpack-entries/-value and one past each; fields and values that
// survive a restart byte for byte through the log and through a snapshot, with their order,
// encoding and expiry.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

using Args = std::vector<std::string>;

class HashesTest : public LoggedServerTest {};

// HSET of `fields` fields f0.. with values v0.. (one command).
Args HSetMany(const std::string& key, int fields, int from = 0) {
  Args args = {"HSET", key};
  for (int i = from; i < from + fields; ++i) {
    args.push_back("f" + std::to_string(i));
    args.push_back("v" + std::to_string(i));
  }
  return args;
}

std::vector<Args> ReferenceScript() {
  const std::string binary_field("\0f\r\n\xff", 5), binary_value("\r\n\0\0v", 5);
  const std::string at_value(64, 'x'), past_value(65, 'x');
  std::vector<Args> script = {
      {"HSET", "bin", binary_field, binary_value, "", ""},
      {"HGETALL", "bin"},
      {"HGET", "bin", binary_field},
      {"HSTRLEN", "bin", binary_field},
      {"HEXISTS", "bin", ""},
      {"HMGET", "bin", "", binary_field, std::string("\0", 1)},
      {"HSCAN", "bin", "0", "MATCH", std::string("\0*", 2)},
      {"OBJECT", "ENCODING", "bin"},
      // hash-max-listpack-value (64): at it, then one past it in a field and in a value.
      {"HSET", "val", "f", at_value, at_value, "v"},
      {"OBJECT", "ENCODING", "val"},
      {"HSET", "val", "g", past_value},
      {"OBJECT", "ENCODING", "val"},
      {"HSET", "key", past_value, "v"},
      {"OBJECT", "ENCODING", "key"},
      {"HSETNX", "nx", "f", past_value},
      {"OBJECT", "ENCODING", "nx"},
      {"HINCRBYFLOAT", "fl", "f", "1." + std::string(70, '1')},
      {"OBJECT", "ENCODING", "fl"},
      {"HGET", "fl", "f"},
      // hash-max-listpack-entries (512): at it, then one past it.
      HSetMany("ent", 512),
      {"OBJECT", "ENCODING", "ent"},
      {"HLEN", "ent"},
      {"HSET", "ent", "f0", "again"},
      {"OBJECT", "ENCODING", "ent"},
      {"HSET", "ent", "f512", "v"},
      {"OBJECT", "ENCODING", "ent"},
      {"HDEL", "ent", "f512", "f0"},
      {"OBJECT", "ENCODING", "ent"},
      HSetMany("one", 513),
      {"OBJECT", "ENCODING", "one"},
      {"CONFIG", "SET", "hash-max-listpack-entries", "1"},
      {"HSET", "small", "a", "1"},
      {"OBJECT", "ENCODING", "small"},
      {"HINCRBY", "small", "b", "1"},
      {"OBJECT", "ENCODING", "small"},
      {"CONFIG", "SET", "hash-max-listpack-entries", "512"},
      // A listpack hash keeps insertion order on both servers: its whole reply compares.
      HSetMany("order", 20),
      {"HDEL", "order", "f3", "f7"},
      {"HSET", "order", "f3", "back", "f1", "new"},
      {"HGETALL", "order"},
      {"HKEYS", "order"},
      {"HVALS", "order"},
      {"HSCAN", "order", "0", "MATCH", "f1*", "COUNT", "2"},
      {"HRANDFIELD", "order", "100", "WITHVALUES"},
  };
  return script;
}

TEST_F(HashesTest, RepliesAsRedisDoes) {
  RedisServer redis;
  PREFIXD_START_REFERENCE_REDIS(redis);
  auto r = RawConnection::Tcp(redis.port());
  ASSERT_NE(r, nullptr);
  ExpectSameReplies(*conn_, *r, ReferenceScript());
}

TEST_F(HashesTest, RestartKeepsFieldsByteExactThroughLogAndSnapshot) {
  const std::string binary(std::string("\0\r\n", 3) + std::string(100, '\xfe'));
  ASSERT_EQ(Call({"HSET", "small", "b", binary, "a", "1", "", ""}), ":3\r\n");
  ASSERT_EQ(Call({"HINCRBY", "small", "a", "41"}), ":42\r\n");
  ASSERT_EQ(Call({"HINCRBYFLOAT", "small", "fl", "0.5"}), "$3\r\n0.5\r\n");
  ASSERT_EQ(Call({"HDEL", "small", ""}), ":1\r\n");
  ASSERT_EQ(Call({"HSET", "lp", "x", "1", "y", "2"}), ":2\r\n");
  ASSERT_EQ(Call(HSetMany("big", 600)), ":600\r\n");
  ASSERT_EQ(Call({"HDEL", "big", "f1", "f2", "f599"}), ":3\r\n");
  ASSERT_EQ(Call({"EXPIRE", "big", "1000"}), ":1\r\n");
  ASSERT_EQ(Call({"HSET", "gone", "x", "1"}), ":1\r\n");
  ASSERT_EQ(Call({"HDEL", "gone", "x"}), ":1\r\n");
  const std::vector<std::string> keys = {"small", "lp", "big"};
  std::vector<std::string> before;
  for (const std::string& key : keys) before.push_back(Call({"HGETALL", key}));
  const auto check = [&](const char* when) {
    for (size_t i = 0; i < keys.size(); ++i) {
      EXPECT_EQ(Call({"HGETALL", keys[i]}), before[i]) << keys[i] << " " << when;
    }
    EXPECT_EQ(Call({"OBJECT", "ENCODING", "small"}), "$9\r\nhashtable\r\n") << when;
    EXPECT_EQ(Call({"OBJECT", "ENCODING", "lp"}), "$8\r\nlistpack\r\n") << when;
    EXPECT_EQ(Call({"OBJECT", "ENCODING", "big"}), "$9\r\nhashtable\r\n") << when;
    EXPECT_EQ(Call({"HGET", "small", "b"}),
              "$" + std::to_string(binary.size()) + "\r\n" + binary + "\r\n")
        << when;
    EXPECT_EQ(Call({"EXISTS", "gone"}), ":0\r\n") << when;
    const std::string ttl = Call({"TTL", "big"});
    EXPECT_TRUE(ttl.rfind(":99", 0) == 0 || ttl == ":1000\r\n") << ttl << " " << when;
  };
  ASSERT_NO_FATAL_FAILURE(Restart());
  check("after replaying the log");
  ASSERT_EQ(Call({"SAVE"}), "+OK\r\n");
  ASSERT_EQ(Call({"HSET", "lp", "z", "3"}), ":1\r\n");  // in the log after the snapshot
  before[1] = Call({"HGETALL", "lp"});
  ASSERT_NO_FATAL_FAILURE(Restart());
  check("after loading the snapshot and the log after it");
}

}  // namespace
}  // namespace prefixd::it
