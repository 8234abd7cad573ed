// LMCache's native C++ RESP2 connector replayed against prefixd (issue 11, Acceptance): it sends
// `AUTH [user] pass`, SET, GET, EXISTS and DEL and parses the replies itself, byte for byte —
// `+OK\r\n`, `:0\r\n`/`:1\r\n`, and a GET that must be exactly `$<chunk bytes>\r\n…\r\n` (a size
// off by one desyncs it). Here the same bytes are checked on a raw socket, pipelined as the
// connector batches them, and through hiredis (a real client) for the same chunks: LMCache-shaped
// keys, 1-4 MiB chunks, 28-byte metadata and a hybrid model's state pages beside the KV chunks.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

using Args = std::vector<std::string>;
constexpr std::string_view kPassword = "lmcache-native";

std::string ChunkKey(uint64_t chunk_hash, int group = 0) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(chunk_hash));
  std::string key = std::string("meta-llama/Llama-3.1-8B@2@1@") + hex + "@bfloat16";
  return group == 0 ? key : key + "@g" + std::to_string(group);
}

// LMCache's RemoteMetadata: seven little-endian int32 (length, shape[4], dtype, format).
std::string Metadata(uint32_t length, int32_t format) {
  const int32_t fields[7] = {static_cast<int32_t>(length), 2, 16, 256, 1024, 5, format};
  return std::string(reinterpret_cast<const char*>(fields), sizeof fields);
}

std::string RandomBytes(std::mt19937_64& rng, size_t size) {
  std::string out(size, '\0');
  for (size_t i = 0; i + 8 <= size; i += 8) {
    const uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  return out;
}

// A Gated DeltaNet layer's state in the state-blob format v1: conv [1, 3, 96] and recurrent
// [1, 4, 32, 32], fp32.
std::string StatePage(std::mt19937_64& rng) {
  std::string out;
  auto u32 = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  u32(1), u32(2);
  for (const std::vector<uint32_t>& shape :
       {std::vector<uint32_t>{1, 3, 96}, std::vector<uint32_t>{1, 4, 32, 32}}) {
    u32(static_cast<uint32_t>(shape.size()));
    size_t count = 1;
    for (uint32_t d : shape) u32(d), count *= d;
    u32(0);
    out += RandomBytes(rng, 4 * count);
  }
  return out;
}

std::string Bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}

struct Chunk {
  uint64_t hash;
  std::string kv, page;
};

class LMCacheNativeTest : public ServerTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(
        StartServer({.flags = {"--requirepass", std::string(kPassword), "--appendonly", "yes"}}));
    std::mt19937_64 rng(21);
    const size_t sizes[] = {1 << 20, 4 << 20, 2 << 20, 3 << 20};
    for (size_t i = 0; i < 4; ++i)
      chunks_.push_back({rng(), RandomBytes(rng, sizes[i]), StatePage(rng)});
  }
  std::vector<Chunk> chunks_;
};

TEST_F(LMCacheNativeTest, RepliesAreByteExactOnARawSocket) {
  auto conn = RawConnection::Tcp(server_.port());
  ASSERT_NE(conn, nullptr);
  EXPECT_EQ(conn->Call(Args{"GET", "x"}), "-NOAUTH Authentication required.\r\n");
  EXPECT_EQ(conn->Call(Args{"AUTH", "default", "wrong"}),
            "-WRONGPASS invalid username-password pair or user is disabled.\r\n");
  ASSERT_EQ(conn->Call(Args{"AUTH", "default", std::string(kPassword)}), "+OK\r\n");
  ASSERT_EQ(conn->Call(Args{"AUTH", std::string(kPassword)}), "+OK\r\n");
  // Store: the whole batch pipelined, then every reply read back, in order.
  std::string batch, expected;
  for (const Chunk& c : chunks_) {
    for (int group : {0, 1}) {
      const std::string& value = group == 0 ? c.kv : c.page;
      batch += Multibulk({"SET", ChunkKey(c.hash, group) + "kv_bytes", value});
      batch += Multibulk({"SET", ChunkKey(c.hash, group) + "metadata", Metadata(value.size(), 1)});
      expected += "+OK\r\n+OK\r\n";
    }
  }
  ASSERT_TRUE(conn->Send(batch));
  EXPECT_EQ(conn->Read(expected.size()), expected);
  // Lookup: EXISTS until the first miss.
  EXPECT_EQ(conn->Call(Args{"EXISTS", ChunkKey(chunks_[0].hash) + "metadata"}), ":1\r\n");
  EXPECT_EQ(conn->Call(Args{"EXISTS", ChunkKey(12345) + "metadata"}), ":0\r\n");
  // Load: GET metadata and GET kv_bytes, pipelined; each bulk exactly its size.
  batch.clear(), expected.clear();
  for (const Chunk& c : chunks_) {
    for (int group : {0, 1}) {
      const std::string& value = group == 0 ? c.kv : c.page;
      batch += Multibulk({"GET", ChunkKey(c.hash, group) + "metadata"});
      batch += Multibulk({"GET", ChunkKey(c.hash, group) + "kv_bytes"});
      expected += Bulk(Metadata(value.size(), 1)) + Bulk(value);
    }
  }
  ASSERT_TRUE(conn->Send(batch));
  const std::string got = conn->Read(expected.size(), Millis(30000));
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected) << "a GET reply differs from $<len>\\r\\n<chunk>\\r\\n";
  // Data gone, metadata left: GET is $-1 and the connector DELs the metadata (:1, then :0).
  const std::string gone = ChunkKey(chunks_[1].hash);
  EXPECT_EQ(conn->Call(Args{"DEL", gone + "kv_bytes"}), ":1\r\n");
  EXPECT_EQ(conn->Call(Args{"GET", gone + "kv_bytes"}), "$-1\r\n");
  EXPECT_EQ(conn->Call(Args{"DEL", gone + "metadata"}), ":1\r\n");
  EXPECT_EQ(conn->Call(Args{"DEL", gone + "metadata"}), ":0\r\n");
  // Nothing was left unread: the connection is still in step.
  EXPECT_EQ(conn->Call(Args{"PING"}), "+PONG\r\n");
}

TEST_F(LMCacheNativeTest, HiredisReadsTheSameChunksAfterARestart) {
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "live" : "after a restart");
    std::string error;
    RedisContext ctx = ConnectHiredis(server_.port(), Millis(30000), &error);
    ASSERT_NE(ctx, nullptr) << error;
    RedisReply auth = HiredisCommand(ctx.get(), {"AUTH", kPassword});
    ASSERT_NE(auth, nullptr);
    ASSERT_EQ(auth->type, REDIS_REPLY_STATUS);
    for (const Chunk& c : chunks_) {
      const std::string key = ChunkKey(c.hash);
      if (round == 0) {
        RedisReply set = HiredisCommand(ctx.get(), {"SET", key + "kv_bytes", c.kv});
        ASSERT_EQ(set->type, REDIS_REPLY_STATUS);
        EXPECT_STREQ(set->str, "OK");
        RedisReply meta =
            HiredisCommand(ctx.get(), {"SET", key + "metadata", Metadata(c.kv.size(), 1)});
        ASSERT_EQ(meta->type, REDIS_REPLY_STATUS);
      }
      RedisReply exists = HiredisCommand(ctx.get(), {"EXISTS", key + "metadata"});
      ASSERT_EQ(exists->type, REDIS_REPLY_INTEGER);
      EXPECT_EQ(exists->integer, 1);
      RedisReply get = HiredisCommand(ctx.get(), {"GET", key + "kv_bytes"});
      ASSERT_EQ(get->type, REDIS_REPLY_STRING) << DescribeReply(get.get());
      ASSERT_EQ(get->len, c.kv.size());
      EXPECT_EQ(std::memcmp(get->str, c.kv.data(), c.kv.size()), 0);
    }
    if (round == 0) {
      ctx.reset();
      ASSERT_TRUE(server_.Stop());
      ASSERT_TRUE(server_.Restart(
          {.flags = {"--requirepass", std::string(kPassword), "--appendonly", "yes"}}));
    }
  }
}

}  // namespace
}  // namespace prefixd::it
