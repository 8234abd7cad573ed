// Sorted sets over real sockets, so the sanitizer builds run them: the replies of
// zset_script.txt byte for byte against a real redis-server (Debian's, started here), scores that
// survive a restart bit for bit through the log and through a snapshot with each encoding, and
// concurrent writers to one key whose every member is there after a restart.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

using Args = std::vector<std::string>;

class ZsetsTest : public LoggedServerTest {};

// The script's commands: words split by spaces, "..." one word.
std::vector<Args> Script() {
  std::ifstream in(PREFIXD_INTEGRATION_DIR "/zset_script.txt");
  std::vector<Args> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    Args words;
    for (size_t i = 0; i < line.size();) {
      if (line[i] == ' ') {
        ++i;
      } else if (line[i] == '"') {
        const size_t end = line.find('"', i + 1);
        words.push_back(line.substr(i + 1, end - i - 1));
        i = end + 1;
      } else {
        const size_t end = std::min(line.find(' ', i), line.size());
        words.push_back(line.substr(i, end - i));
        i = end;
      }
    }
    out.push_back(std::move(words));
  }
  return out;
}

TEST_F(ZsetsTest, RepliesAsRedisDoes) {
  RedisServer redis;
  PREFIXD_START_REFERENCE_REDIS(redis);
  auto r = RawConnection::Tcp(redis.port());
  ASSERT_NE(r, nullptr);
  const std::vector<Args> script = Script();
  ASSERT_GT(script.size(), 140u);
  const Args limit = {"CONFIG", "SET", "zset-max-listpack-entries", "16"};
  ASSERT_EQ(Call(limit), r->Call(limit));
  ExpectSameReplies(*conn_, *r, script);
}

// Scores whose text form would lose bits (1/3, 0.1 + 0.2, a denormal, the largest double), and
// -0 in a skiplist, read back identically after a restart from the log and from a snapshot.
TEST_F(ZsetsTest, ScoresSurviveRestartsBitForBit) {
  const Args add = {"ZADD",
                    "lp",
                    "0.1",
                    "tenth",
                    "0.3333333333333333",
                    "third",
                    "5e-324",
                    "denormal",
                    "1.7976931348623157e308",
                    "max",
                    "-inf",
                    "low",
                    "inf",
                    "high"};
  ASSERT_EQ(Call(add), ":6\r\n");
  ASSERT_EQ(Call({"ZINCRBY", "lp", "0.2", "tenth"}), "$19\r\n0.30000000000000004\r\n");
  ASSERT_EQ(Call({"CONFIG", "SET", "zset-max-listpack-entries", "0"}), "+OK\r\n");
  Args skiplist = add;
  skiplist[1] = "sk";
  skiplist.insert(skiplist.end(), {"-0", "negzero"});
  ASSERT_EQ(Call(skiplist), ":7\r\n");
  ASSERT_EQ(Call({"ZREM", "sk", "max"}), ":1\r\n");
  ASSERT_EQ(Call({"PEXPIRE", "sk", "1000000"}), ":1\r\n");
  const std::string lp = Call({"ZRANGE", "lp", "0", "-1", "WITHSCORES"});
  const std::string sk = Call({"ZRANGE", "sk", "0", "-1", "WITHSCORES"});
  EXPECT_NE(sk.find("$7\r\nnegzero\r\n$2\r\n-0\r\n"), std::string::npos) << sk;
  EXPECT_NE(lp.find("$8\r\ndenormal\r\n$23\r\n4.9406564584124654e-324\r\n"), std::string::npos)
      << lp;
  const auto check = [&] {
    EXPECT_EQ(Call({"ZRANGE", "lp", "0", "-1", "WITHSCORES"}), lp);
    EXPECT_EQ(Call({"ZRANGE", "sk", "0", "-1", "WITHSCORES"}), sk);
    EXPECT_EQ(Call({"OBJECT", "ENCODING", "lp"}), "$8\r\nlistpack\r\n");
    EXPECT_EQ(Call({"OBJECT", "ENCODING", "sk"}), "$8\r\nskiplist\r\n");
    // Restarts under a sanitizer take seconds: the expiry is absolute, so the TTL only shrinks.
    const std::string ttl = Call({"TTL", "sk"});
    ASSERT_TRUE(ttl.starts_with(":")) << ttl;
    const long seconds = std::stol(ttl.substr(1));
    EXPECT_TRUE(seconds > 900 && seconds <= 1000) << ttl;
  };
  ASSERT_NO_FATAL_FAILURE(Restart());  // from the log
  check();
  ASSERT_EQ(Call({"SAVE"}), "+OK\r\n");
  ASSERT_EQ(Call({"ZPOPMIN", "lp"}), "*2\r\n$3\r\nlow\r\n$4\r\n-inf\r\n");
  ASSERT_NO_FATAL_FAILURE(Restart());  // from the snapshot, then the log after it
  EXPECT_EQ(Call({"ZSCORE", "lp", "low"}), "$-1\r\n");
  ASSERT_EQ(Call({"ZADD", "lp", "-inf", "low"}), ":1\r\n");
  check();
}

// Writers on four connections add to and remove from one key at once; every reply is a count and
// the key holds exactly what they left, before and after a restart.
TEST_F(ZsetsTest, ConcurrentWritersToOneKey) {
  constexpr int kWriters = 4, kEach = 200;
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      auto c = RawConnection::Tcp(server_.port());
      ASSERT_NE(c, nullptr);
      for (int i = 0; i < kEach; ++i) {
        const std::string member = "w" + std::to_string(w) + "-" + std::to_string(i);
        EXPECT_EQ(c->Call({"ZADD", "z", std::to_string(i), member}), ":1\r\n");
        if (i % 2 == 1) EXPECT_EQ(c->Call({"ZREM", "z", member}), ":1\r\n");
        if (i % 50 == 0) EXPECT_EQ(c->Call({"ZRANGE", "z", "0", "0"}).rfind("*1\r\n", 0), 0u);
      }
    });
  }
  for (auto& t : writers) t.join();
  const std::string count = ":" + std::to_string(kWriters * kEach / 2) + "\r\n";
  EXPECT_EQ(Call({"ZCARD", "z"}), count);
  EXPECT_EQ(Call({"OBJECT", "ENCODING", "z"}), "$8\r\nskiplist\r\n");
  const std::string all = Call({"ZRANGE", "z", "0", "-1", "WITHSCORES"});
  ASSERT_NO_FATAL_FAILURE(Restart());
  EXPECT_EQ(Call({"ZCARD", "z"}), count);
  EXPECT_EQ(Call({"ZRANGE", "z", "0", "-1", "WITHSCORES"}), all);
}

}  // namespace
}  // namespace prefixd::it
