// Strings in the disk tier over real sockets: with appendonly on and a memory budget, LMCache's
// 1 MiB `kv_bytes` chunks evicted from memory go cold (their bytes stay in the log or snapshot)
// and GET serves them bit-exact, before and after a restart from the log, a SAVE and a restart,
// and a kill; STRLEN and GETRANGE answer without reading the whole value; a small string is
// still deleted; concurrent GETs never see a partial value while values go cold and come back.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

std::string Chunk(int chunk, size_t size, int version = 0) {
  std::mt19937_64 rng(static_cast<uint64_t>(chunk) * 1000003 + version);
  std::string out(size, '\0');
  for (size_t i = 0; i < size; i += 8) {
    const uint64_t r = rng();
    for (size_t k = 0; k < 8 && i + k < size; ++k) out[i + k] = static_cast<char>(r >> (8 * k));
  }
  return out;
}

// LMCache's key shape: <model>@<world_size>@<worker_id>@<chunk_hash_hex>@<dtype>, then the
// suffix.
std::string Key(int chunk, const std::string& suffix) {
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(chunk) * 0x9e37);
  return std::string("meta-llama/Llama-3.1-8B@1@0@") + hash + "@bfloat16" + suffix;
}

// How many string set records (type 6) of the snapshot at `path` carry the cold flag (header:
// 32 bytes, type at byte 12, flags at 13, payload length at 24; docs/storage-format.md).
int ColdStringRecords(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(f)), {});
  int cold = 0;
  for (uint64_t at = 32; at + 32 <= file.size();) {
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i)
      length = (length << 8) | static_cast<unsigned char>(file[at + 24 + i]);
    if (file[at + 12] == 6 && file[at + 13] == 1) ++cold;
    at += 32 + length;
  }
  return cold;
}

class StringDiskTierTest : public ServerTest {
 protected:
  static constexpr int kChunks = 24;
  static constexpr size_t kChunk = 1 << 20;
  static constexpr size_t kMetadata = 28;

  ServerProcess::Options Options() {
    return {.flags = {"--appendonly", "yes", "--maxmemory", "8mb", "--maxmemory-policy",
                      "allkeys-lru"}};
  }
  void StoreAll(redisContext* c) {
    for (int i = 0; i < kChunks; ++i) {
      RedisReply r = HiredisCommand(c, {"SET", Key(i, "kv_bytes"), Chunk(i, kChunk)});
      ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS) << DescribeReply(r.get());
      r = HiredisCommand(c, {"SET", Key(i, "metadata"), Chunk(i, kMetadata, 1)});
      ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS) << DescribeReply(r.get());
    }
  }
  // Every chunk bit-exact (the 28-byte metadata may have been evicted: small values are).
  void CheckAll(redisContext* c) {
    for (int i = 0; i < kChunks; ++i) {
      RedisReply r = HiredisCommand(c, {"GET", Key(i, "kv_bytes")});
      ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING) << i << " " << DescribeReply(r.get());
      ASSERT_EQ(std::string(r->str, r->len), Chunk(i, kChunk)) << i;
    }
  }
};

TEST_F(StringDiskTierTest, LmcacheChunksPastMaxmemoryComeBackBitExactAcrossRestarts) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  // 24 MiB of chunks under an 8 MiB budget: most went cold, none was deleted.
  EXPECT_GE(InfoNumber(c.get(), "cold_keys"), uint64_t{kChunks / 2});
  EXPECT_GE(InfoNumber(c.get(), "cold_string_bytes"), uint64_t{kChunks / 2} * kChunk);
  EXPECT_GT(InfoNumber(c.get(), "cold_evictions"), 0u);
  // LMCache's lookup (EXISTS metadata, chunk by chunk) finds every chunk: the small metadata
  // keys were parked beside their cold chunks, not deleted.
  for (int i = 0; i < kChunks; ++i) {
    RedisReply r = HiredisCommand(c.get(), {"EXISTS", Key(i, "metadata"), Key(i, "kv_bytes")});
    ASSERT_EQ(r->integer, 2) << i;
    r = HiredisCommand(c.get(), {"GET", Key(i, "metadata")});
    ASSERT_EQ(std::string(r->str, r->len), Chunk(i, kMetadata, 1)) << i;
  }
  EXPECT_EQ(InfoNumber(c.get(), "evicted_keys"), 0u);
  // The first chunk is cold: STRLEN and GETRANGE read nothing / only the asked bytes.
  const std::string first = Chunk(0, kChunk);
  const uint64_t read_before = InfoNumber(c.get(), "cold_bytes_read");
  RedisReply r = HiredisCommand(c.get(), {"STRLEN", Key(0, "kv_bytes")});
  EXPECT_EQ(r->integer, static_cast<long long>(kChunk));
  r = HiredisCommand(c.get(), {"GETRANGE", Key(0, "kv_bytes"), "1000", "1999"});
  ASSERT_EQ(r->type, REDIS_REPLY_STRING);
  EXPECT_EQ(std::string(r->str, r->len), first.substr(1000, 1000));
  r = HiredisCommand(c.get(), {"GETRANGE", Key(0, "kv_bytes"), "-10", "-1"});
  EXPECT_EQ(std::string(r->str, r->len), first.substr(kChunk - 10));
  EXPECT_EQ(InfoNumber(c.get(), "cold_bytes_read") - read_before, 1010u);
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
  EXPECT_GT(InfoNumber(c.get(), "cold_hits"), 0u);

  // A restart replays the log and keeps what is past maxmemory on disk.
  c.reset();
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart(Options()));
  c = ConnectHiredis(server_.port());
  EXPECT_GE(InfoNumber(c.get(), "cold_keys"), uint64_t{kChunks / 2});
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));

  // SAVE writes the cold chunks flagged cold; the restart loads none of them into memory.
  r = HiredisCommand(c.get(), {"SAVE"});
  ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
  EXPECT_GE(ColdStringRecords(server_.data_dir() + "/snapshot.pds"), kChunks / 2);
  c.reset();
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart(Options()));
  c = ConnectHiredis(server_.port());
  EXPECT_LE(InfoNumber(c.get(), "used_memory"), uint64_t{8} << 20);
  // Only the hot records were read: the cold chunks' bytes were not.
  EXPECT_LE(InfoNumber(c.get(), "recovered_bytes"), uint64_t{kChunks - kChunks / 2} * kChunk);
  EXPECT_GE(InfoNumber(c.get(), "cold_keys"), uint64_t{kChunks / 2});
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
  // And again, once the chunks sit in the snapshot.
  r = HiredisCommand(c.get(), {"SAVE"});
  ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
  c.reset();
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart(Options()));
  c = ConnectHiredis(server_.port());
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
}

// Stored without a budget, restarted with one: recovery sends chunks to disk past the small
// metadata keys between them (which the disk tier does not hold, and a start never deletes).
TEST_F(StringDiskTierTest, RecoveryUnderANewBudgetSendsChunksToDiskPastSmallKeys) {
  ASSERT_NO_FATAL_FAILURE(StartServer({.flags = {"--appendonly", "yes"}}));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  EXPECT_EQ(InfoNumber(c.get(), "cold_keys"), 0u);
  c.reset();
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart(Options()));
  c = ConnectHiredis(server_.port());
  EXPECT_LE(InfoNumber(c.get(), "used_memory"), uint64_t{8} << 20);
  EXPECT_GE(InfoNumber(c.get(), "cold_keys"), uint64_t{kChunks / 2});
  RedisReply r = HiredisCommand(c.get(), {"DBSIZE"});
  EXPECT_EQ(r->integer, 2 * kChunks) << "nothing deleted at start";
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
}

TEST_F(StringDiskTierTest, ColdStringsServeEveryStringCommand) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  ASSERT_GE(InfoNumber(c.get(), "cold_keys"), 1u);
  // Chunk 0 went first (LRU); each command below finds it cold or reads it back.
  const std::string key = Key(0, "kv_bytes");
  RedisReply r = HiredisCommand(c.get(), {"MGET", key, Key(1, "kv_bytes"), "nosuch"});
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(std::string(r->element[0]->str, r->element[0]->len), Chunk(0, kChunk));
  EXPECT_EQ(std::string(r->element[1]->str, r->element[1]->len), Chunk(1, kChunk));
  EXPECT_EQ(r->element[2]->type, REDIS_REPLY_NIL);
  // APPEND reads the cold value back first.
  r = HiredisCommand(c.get(), {"APPEND", Key(2, "kv_bytes"), "tail"});
  EXPECT_EQ(r->integer, static_cast<long long>(kChunk + 4));
  r = HiredisCommand(c.get(), {"GET", Key(2, "kv_bytes")});
  EXPECT_EQ(std::string(r->str, r->len), Chunk(2, kChunk) + "tail");
  // COPY and GETDEL of a cold value.
  r = HiredisCommand(c.get(), {"COPY", Key(3, "kv_bytes"), "copy"});
  EXPECT_EQ(r->integer, 1);
  r = HiredisCommand(c.get(), {"GET", "copy"});
  EXPECT_EQ(std::string(r->str, r->len), Chunk(3, kChunk));
  r = HiredisCommand(c.get(), {"GETDEL", Key(4, "kv_bytes")});
  EXPECT_EQ(std::string(r->str, r->len), Chunk(4, kChunk));
  r = HiredisCommand(c.get(), {"EXISTS", Key(4, "kv_bytes")});
  EXPECT_EQ(r->integer, 0);
  // DEL and EXPIRE of a cold key; TYPE names it a string.
  r = HiredisCommand(c.get(), {"TYPE", Key(5, "kv_bytes")});
  EXPECT_EQ(std::string(r->str), "string");
  r = HiredisCommand(c.get(), {"DEL", Key(5, "kv_bytes")});
  EXPECT_EQ(r->integer, 1);
  r = HiredisCommand(c.get(), {"PEXPIRE", Key(6, "kv_bytes"), "1"});
  EXPECT_EQ(r->integer, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  r = HiredisCommand(c.get(), {"GET", Key(6, "kv_bytes")});
  EXPECT_EQ(r->type, REDIS_REPLY_NIL);
  // Overwriting a cold key with a small value.
  r = HiredisCommand(c.get(), {"SET", Key(7, "kv_bytes"), "small"});
  r = HiredisCommand(c.get(), {"GET", Key(7, "kv_bytes")});
  EXPECT_EQ(std::string(r->str, r->len), "small");
  // Nothing changed survives wrong after a restart.
  c.reset();
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart(Options()));
  c = ConnectHiredis(server_.port());
  r = HiredisCommand(c.get(), {"GET", Key(2, "kv_bytes")});
  EXPECT_EQ(std::string(r->str, r->len), Chunk(2, kChunk) + "tail");
  r = HiredisCommand(c.get(), {"GET", "copy"});
  EXPECT_EQ(std::string(r->str, r->len), Chunk(3, kChunk));
  for (int i : {4, 5, 6}) {
    r = HiredisCommand(c.get(), {"EXISTS", Key(i, "kv_bytes")});
    EXPECT_EQ(r->integer, 0) << i;
  }
  r = HiredisCommand(c.get(), {"GET", Key(7, "kv_bytes")});
  EXPECT_EQ(std::string(r->str, r->len), "small");
}

// Only small strings: with no large value in memory to send to disk, eviction deletes them by
// the policy, as Redis does (nothing is parked).
TEST_F(StringDiskTierTest, OnlySmallStringsAreEvictedAsInRedis) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
  RedisContext c = ConnectHiredis(server_.port());
  const std::string value(1000, 'v');
  for (int i = 0; i < 20000; ++i) {
    RedisReply r = HiredisCommand(c.get(), {"SET", "small:" + std::to_string(i), value});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS) << i << " " << DescribeReply(r.get());
  }
  EXPECT_GT(InfoNumber(c.get(), "evicted_keys"), 0u);
  EXPECT_EQ(InfoNumber(c.get(), "cold_keys"), 0u);
  EXPECT_LE(InfoNumber(c.get(), "used_memory"), uint64_t{9} << 20);
  RedisReply r = HiredisCommand(c.get(), {"EXISTS", "small:19999", "small:0"});
  EXPECT_EQ(r->integer, 1);
}

// Small strings are parked (kept, in the cold index) while a large string is in memory. A large
// string kept hot by its reader while thousands of small ones come and go parks them all; once
// nothing else is left in memory the parked ones must go by the policy: writes never answer
// -OOM under allkeys-lru, and memory stays near the budget.
TEST_F(StringDiskTierTest, ParkedSmallStringsNeverFillTheBudget) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
  RedisContext c = ConnectHiredis(server_.port());
  RedisReply r = HiredisCommand(c.get(), {"SET", "big", Chunk(0, kChunk)});
  ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
  const std::string value(1000, 'v');
  constexpr int kSmall = 30000, kBatch = 500;  // 30 MB of small values through an 8 MB budget
  for (int start = 0; start < kSmall; start += kBatch) {
    for (int i = start; i < start + kBatch; ++i) {
      const std::string key = "small:" + std::to_string(i);
      redisAppendCommand(c.get(), "SET %b %b", key.data(), key.size(), value.data(), value.size());
      redisAppendCommand(c.get(), "TOUCH big");
    }
    for (int i = 0; i < 2 * kBatch; ++i) {
      void* raw = nullptr;
      ASSERT_EQ(redisGetReply(c.get(), &raw), REDIS_OK);
      RedisReply reply(static_cast<redisReply*>(raw));
      ASSERT_NE(reply->type, REDIS_REPLY_ERROR) << start << ": " << DescribeReply(reply.get());
    }
  }
  EXPECT_GT(InfoNumber(c.get(), "evicted_keys"), 0u);
  EXPECT_LE(InfoNumber(c.get(), "used_memory"), uint64_t{9} << 20);
  const uint64_t parked = InfoNumber(c.get(), "parked_string_bytes");
  EXPECT_GT(parked, 0u) << "small strings were parked beside the large one";
  EXPECT_LE(parked, uint64_t{1} << 20) << "at most maxmemory / 8";
  r = HiredisCommand(c.get(), {"EXISTS", "small:" + std::to_string(kSmall - 1)});
  EXPECT_EQ(r->integer, 1);
  r = HiredisCommand(c.get(), {"GET", "big"});
  ASSERT_EQ(r->type, REDIS_REPLY_STRING);
  EXPECT_TRUE(std::string(r->str, r->len) == Chunk(0, kChunk));
}

TEST_F(StringDiskTierTest, SmallStringsAreStillDeletedAndWithoutPersistenceEverythingIs) {
  ASSERT_NO_FATAL_FAILURE(StartServer({.flags = {"--appendonly", "no", "--maxmemory", "8mb",
                                                 "--maxmemory-policy", "allkeys-lru"}}));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  EXPECT_EQ(InfoNumber(c.get(), "cold_keys"), 0u);
  EXPECT_GT(InfoNumber(c.get(), "evicted_keys"), 0u);
}

// Eviction fsyncs before a value goes cold, even when fsync is otherwise left to the OS: a
// kill right after the writes finds every acknowledged chunk. (That an unsynced value stays in
// memory is checked in tests/unit/keyspace_test.cc.)
// Stored without a budget, killed (no snapshot: the log alone), restarted with one: recovery
// sends chunks to disk as it reads them, so it never holds much more than the budget (before, it
// read the whole log into memory first: used_memory_peak 64 MiB past an 8 MiB budget).
TEST_F(StringDiskTierTest, ARestartFromTheLogNeverHoldsMoreThanTheBudget) {
  constexpr int kMany = 64;
  ASSERT_NO_FATAL_FAILURE(StartServer({.flags = {"--appendonly", "yes"}}));
  RedisContext c = ConnectHiredis(server_.port());
  for (int i = 0; i < kMany; ++i) {
    RedisReply r = HiredisCommand(c.get(), {"SET", Key(i, "kv_bytes"), Chunk(i, kChunk)});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS) << DescribeReply(r.get());
    r = HiredisCommand(c.get(), {"SET", Key(i, "metadata"), Chunk(i, kMetadata, 1)});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS) << DescribeReply(r.get());
  }
  c.reset();
  ASSERT_TRUE(server_.Kill());
  ASSERT_TRUE(server_.Restart(Options()));
  c = ConnectHiredis(server_.port());
  // The budget, one chunk being read, and the small keys and entries beside them.
  EXPECT_LE(InfoNumber(c.get(), "used_memory_peak"), uint64_t{11} << 20);
  EXPECT_LE(InfoNumber(c.get(), "used_memory"), uint64_t{8} << 20);
  EXPECT_EQ(HiredisCommand(c.get(), {"DBSIZE"})->integer, 2 * kMany) << "nothing deleted at start";
  for (int i = 0; i < kMany; ++i) {
    RedisReply r = HiredisCommand(c.get(), {"GET", Key(i, "kv_bytes")});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING) << i << " " << DescribeReply(r.get());
    ASSERT_EQ(std::string(r->str, r->len), Chunk(i, kChunk)) << i;
  }
}

TEST_F(StringDiskTierTest, KillAfterEvictionLosesNoAcknowledgedChunk) {
  ASSERT_NO_FATAL_FAILURE(
      StartServer({.flags = {"--appendonly", "yes", "--appendfsync", "no", "--maxmemory", "8mb",
                             "--maxmemory-policy", "allkeys-lru"}}));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  ASSERT_GE(InfoNumber(c.get(), "cold_keys"), uint64_t{kChunks / 2});
  c.reset();
  ASSERT_TRUE(server_.Kill());
  ASSERT_TRUE(server_.Restart(Options()));
  c = ConnectHiredis(server_.port());
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
}

TEST_F(StringDiskTierTest, ConcurrentGetsNeverSeeAPartialValueWhileValuesGoCold) {
  ASSERT_NO_FATAL_FAILURE(StartServer({.flags = {"--appendonly", "yes", "--maxmemory", "2mb",
                                                 "--maxmemory-policy", "allkeys-lru"}}));
  constexpr int kKeys = 12, kVersions = 200;
  constexpr size_t kSize = 256 << 10;
  // A value whose every byte names its version, so a torn one shows.
  const auto value_of = [](int version) { return std::string(kSize, 'a' + version % 26); };
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, reads{0};
  std::thread writer([&] {
    RedisContext w = ConnectHiredis(server_.port());
    for (int version = 0; version < kVersions; ++version) {
      RedisReply r = HiredisCommand(
          w.get(), {"SET", "chunk:" + std::to_string(version % kKeys), value_of(version)});
      if (!r || r->type != REDIS_REPLY_STATUS) bad += 1000;
      if (version % 50 == 25) HiredisCommand(w.get(), {"BGSAVE"});  // moves every place
    }
  });
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&, t] {
      RedisContext rc = ConnectHiredis(server_.port());
      for (int i = 0; !stop; ++i) {
        const std::string key = "chunk:" + std::to_string((i + t) % kKeys);
        RedisReply r = t == 0 ? HiredisCommand(rc.get(), {"GET", key})
                              : HiredisCommand(rc.get(), {"GETRANGE", key, "0", "-1"});
        if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL)) {
          bad += 1;
          continue;
        }
        if (r->type == REDIS_REPLY_NIL || r->len == 0) continue;  // not written yet
        if (r->len != kSize || std::string(r->str, r->len) != std::string(kSize, r->str[0])) {
          bad += 1;
        }
        reads += 1;
      }
    });
  }
  writer.join();
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(reads.load(), 0);
  RedisContext c = ConnectHiredis(server_.port());
  EXPECT_GT(InfoNumber(c.get(), "cold_evictions"), 0u);
  EXPECT_EQ(InfoNumber(c.get(), "evicted_keys"), 0u);
}

TEST_F(StringDiskTierTest, MaxdiskCountsAndDeletesColdStrings) {
  ASSERT_NO_FATAL_FAILURE(
      StartServer({.flags = {"--appendonly", "yes", "--maxmemory", "8mb", "--maxmemory-policy",
                             "allkeys-lru", "--maxdisk", "6mb"}}));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  EXPECT_LE(InfoNumber(c.get(), "cold_string_bytes"), uint64_t{6} << 20);
  EXPECT_GT(InfoNumber(c.get(), "disk_evicted_keys"), 0u);
  // What is left reads back bit-exact; the oldest chunks are gone, and stay gone after a restart.
  int present = 0;
  for (int i = 0; i < kChunks; ++i) {
    RedisReply r = HiredisCommand(c.get(), {"GET", Key(i, "kv_bytes")});
    if (r->type == REDIS_REPLY_NIL) continue;
    ASSERT_EQ(std::string(r->str, r->len), Chunk(i, kChunk)) << i;
    ++present;
  }
  EXPECT_GT(present, 0);
  EXPECT_LT(present, kChunks);
  RedisReply r = HiredisCommand(c.get(), {"EXISTS", Key(0, "kv_bytes")});
  EXPECT_EQ(r->integer, 0);
  c.reset();
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart(Options()));
  c = ConnectHiredis(server_.port());
  r = HiredisCommand(c.get(), {"EXISTS", Key(0, "kv_bytes")});
  EXPECT_EQ(r->integer, 0);
}

}  // namespace
}  // namespace prefixd::it
