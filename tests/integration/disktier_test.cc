// The disk tier over real sockets: with appendonly on, memory eviction turns SSM sessions cold
// (their bytes stay in the log or snapshot) and they are served from disk bit-exact, before and
// after a restart and a compaction; RANGE reads only its bytes; DEL/EXPIRE/overwrite of a cold
// key; with appendonly off eviction still deletes; a concurrent MFETCH never sees a partial
// session while sessions go cold and come back; a database other than 0 keeps its own cold
// sessions across restarts, snapshots and SWAPDB.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

using namespace std::chrono_literals;

std::string Value(int session, int layer, size_t size, int version = 0) {
  std::mt19937_64 rng(static_cast<uint64_t>(session) * 1000003 + layer * 7919 + version);
  std::string out(size, '\0');
  for (size_t i = 0; i < size; i += 8) {
    const uint64_t r = rng();
    for (size_t k = 0; k < 8 && i + k < size; ++k) out[i + k] = static_cast<char>(r >> (8 * k));
  }
  return out;
}

std::string Sid(int i) { return "sess:" + std::to_string(i); }

class DiskTierTest : public ServerTest {
 protected:
  static constexpr int kSessions = 24;
  static constexpr size_t kBig = 512 << 10;
  static constexpr size_t kSmall = 777;

  ServerProcess::Options Options(const std::string& appendonly = "yes") {
    return {.flags = {"--appendonly", appendonly, "--maxmemory", "4mb", "--maxmemory-policy",
                      "allkeys-lru"}};
  }
  void StoreAll(redisContext* c) {
    for (int i = 0; i < kSessions; ++i) {
      const std::string big = Value(i, 0, kBig), small = Value(i, 1, kSmall);
      RedisReply r = HiredisCommand(c, {"SSM.PREFIX.MSTORE", Sid(i), "0", big, "1", small});
      ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS) << DescribeReply(r.get());
    }
  }
  // A server that stored every session, wrote a snapshot and stopped.
  void StoreSaveAndStop() {
    ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
    RedisContext c = ConnectHiredis(server_.port());
    ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
    RedisReply r = HiredisCommand(c.get(), {"SAVE"});
    ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
    c.reset();
    ASSERT_TRUE(server_.Stop());
  }
  std::string SnapshotPath() const { return server_.data_dir() + "/snapshot.pds"; }
  // Every session whole and bit-exact.
  void CheckAll(redisContext* c) {
    for (int i = 0; i < kSessions; ++i) {
      RedisReply r = HiredisCommand(c, {"SSM.PREFIX.MFETCH", Sid(i), "0", "1"});
      ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) << DescribeReply(r.get());
      ASSERT_EQ(std::string(r->element[0]->str, r->element[0]->len), Value(i, 0, kBig)) << i;
      ASSERT_EQ(std::string(r->element[1]->str, r->element[1]->len), Value(i, 1, kSmall)) << i;
    }
  }
};

TEST_F(DiskTierTest, ColdSessionsAreServedBitExactBeforeAndAfterRestartAndCompaction) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_TRUE(c);
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  const uint64_t cold = InfoNumber(c.get(), "cold_keys");
  EXPECT_GE(cold, 12u) << "12 MiB of sessions under a 4 MiB budget";
  EXPECT_EQ(InfoNumber(c.get(), "evicted_keys"), 0u) << "nothing acknowledged was deleted";
  EXPECT_EQ(InfoNumber(c.get(), "cold_bytes"), cold * (kBig + kSmall));
  // As Redis, eviction runs before a write: the last write may overshoot by itself.
  EXPECT_LE(InfoNumber(c.get(), "used_memory") - InfoNumber(c.get(), "mem_not_counted_for_evict"),
            (4u << 20) + kBig + (64u << 10));
  // Keys as keys: every generic command sees the cold ones.
  RedisReply r = HiredisCommand(c.get(), {"DBSIZE"});
  EXPECT_EQ(r->integer, kSessions);
  r = HiredisCommand(c.get(), {"TYPE", Sid(0)});
  EXPECT_EQ(std::string(r->str), "ssm-prefix");
  r = HiredisCommand(c.get(), {"EXISTS", Sid(0), Sid(1), "nope"});
  EXPECT_EQ(r->integer, 2);
  r = HiredisCommand(c.get(), {"SCAN", "0", "COUNT", "1000"});
  ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(r->element[1]->elements, static_cast<size_t>(kSessions));
  // A range of a cold layer reads only its bytes, and does not promote.
  const uint64_t read_before = InfoNumber(c.get(), "cold_bytes_read");
  r = HiredisCommand(c.get(), {"SSM.PREFIX.FETCH", Sid(0), "0", "RANGE", "4097", "1000"});
  ASSERT_EQ(r->type, REDIS_REPLY_STRING);
  EXPECT_EQ(std::string(r->str, r->len), Value(0, 0, kBig).substr(4097, 1000));
  EXPECT_EQ(InfoNumber(c.get(), "cold_bytes_read") - read_before, 1000u);
  r = HiredisCommand(c.get(), {"SSM.PREFIX.LAYERS", Sid(0)});
  EXPECT_EQ(r->type, REDIS_REPLY_ARRAY);
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
  EXPECT_GE(InfoNumber(c.get(), "cold_hits"), cold);

  // Restart: recovery puts what is past maxmemory back on disk, and everything reads back.
  c.reset();
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart(Options()));
  c = ConnectHiredis(server_.port());
  EXPECT_GE(InfoNumber(c.get(), "cold_keys"), 12u);
  EXPECT_LE(InfoNumber(c.get(), "used_memory") - InfoNumber(c.get(), "mem_not_counted_for_evict"),
            4u << 20);
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));

  // Compaction copies cold values into the snapshot and cuts the log; they still read back,
  // and again after a restart from the snapshot alone.
  r = HiredisCommand(c.get(), {"SAVE"});
  ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
  c.reset();
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart(Options()));
  c = ConnectHiredis(server_.port());
  // The snapshot's cold sessions were not read at start: only the hot set's bytes were.
  EXPECT_GE(InfoNumber(c.get(), "cold_keys"), 12u);
  EXPECT_GE(InfoNumber(c.get(), "cold_bytes"), 12u * kBig);
  EXPECT_LE(InfoNumber(c.get(), "recovered_bytes"), (4u << 20) + 2 * kBig);
  EXPECT_EQ(InfoNumber(c.get(), "cold_bytes_read"), 0u);
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
}

// A RANGE of a cold layer (512 KiB) reads only the bytes it answers (INFO's cold_bytes_read grows
// by them alone) at the limits: the first byte, the last, a range across the end (clamped), at
// the end and one past it (empty), a large range streamed from the file at an odd offset; an
// offset one past int64's range is refused. Every reply is bit-exact and none promotes.
TEST_F(DiskTierTest, ColdRangeReadsOnlyItsBytesAtTheLimits) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_TRUE(c);
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  ASSERT_GE(InfoNumber(c.get(), "cold_keys"), 12u);
  const std::string value = Value(0, 0, kBig);  // session 0 is the oldest: cold
  struct Case {
    uint64_t offset, length;
    size_t from, size;  // what the reply is: value.substr(from, size)
  };
  const std::vector<Case> cases = {
      {0, 1, 0, 1},
      {kBig - 1, 1, kBig - 1, 1},
      {kBig - 10, 100, kBig - 10, 10},
      {kBig, 1, kBig, 0},
      {kBig + 1, 1, kBig, 0},
      {1, kBig - 2, 1, kBig - 2},             // streamed (256 KiB or more)
      {3, uint64_t{INT64_MAX}, 3, kBig - 3},  // streamed, clamped
      {0, kBig + 1, 0, kBig},                 // the whole value by RANGE
      {uint64_t{INT64_MAX}, uint64_t{INT64_MAX}, kBig, 0},
  };
  for (const Case& k : cases) {
    const uint64_t before = InfoNumber(c.get(), "cold_bytes_read");
    RedisReply r = HiredisCommand(c.get(), {"SSM.PREFIX.FETCH", Sid(0), "0", "RANGE",
                                            std::to_string(k.offset), std::to_string(k.length)});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING) << DescribeReply(r.get());
    EXPECT_TRUE(std::string(r->str, r->len) == value.substr(k.from, k.size))
        << k.offset << "+" << k.length << ": " << r->len << " bytes";
    EXPECT_EQ(InfoNumber(c.get(), "cold_bytes_read") - before, k.size)
        << k.offset << "+" << k.length;
  }
  RedisReply r = HiredisCommand(
      c.get(), {"SSM.PREFIX.FETCH", Sid(0), "0", "RANGE", "9223372036854775808", "1"});
  ASSERT_EQ(r->type, REDIS_REPLY_ERROR);
  EXPECT_EQ(std::string(r->str),
            "ERR invalid offset '9223372036854775808': must be a non-negative integer");
  EXPECT_EQ(InfoNumber(c.get(), "cold_promotions"), 0u);
}

// Database 3 holds the same session names as database 0 with other values: its sessions go cold
// (its own places, its own cold loads and snapshot copies) and read back bit-exact before a
// restart, after one (the log), and after SAVE and one (the snapshot, not read at start); after
// SWAPDB they answer from the other index, also after SAVE and a restart.
TEST_F(DiskTierTest, ColdSessionsOfAnotherDatabaseReadBackBitExactAcrossRestartAndSave) {
  constexpr int kPerDb = kSessions / 2;
  ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
  const auto select = [](redisContext* c, int db) {
    RedisReply r = HiredisCommand(c, {"SELECT", std::to_string(db)});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS) << DescribeReply(r.get());
  };
  // Database `db` holds the values of `version` (the database they were written in).
  const auto store = [&](redisContext* c, int db) {
    ASSERT_NO_FATAL_FAILURE(select(c, db));
    for (int i = 0; i < kPerDb; ++i) {
      RedisReply r = HiredisCommand(c, {"SSM.PREFIX.MSTORE", Sid(i), "0", Value(i, 0, kBig, db),
                                        "1", Value(i, 1, kSmall, db)});
      ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS) << DescribeReply(r.get());
    }
  };
  // Every session of database `db` whole and bit-exact; returns through `cold` how many of
  // them held no bytes in memory (MEMORY USAGE below the large layer) before they were read.
  const auto check = [&](redisContext* c, int db, int version, int& cold) {
    ASSERT_NO_FATAL_FAILURE(select(c, db));
    cold = 0;
    for (int i = 0; i < kPerDb; ++i) {
      RedisReply r = HiredisCommand(c, {"MEMORY", "USAGE", Sid(i)});
      ASSERT_EQ(r->type, REDIS_REPLY_INTEGER) << db << " " << i << " " << DescribeReply(r.get());
      if (static_cast<size_t>(r->integer) < kBig) ++cold;
      r = HiredisCommand(c, {"SSM.PREFIX.MFETCH", Sid(i), "0", "1"});
      ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) << DescribeReply(r.get());
      // Compared whole but not printed: a mismatch names the database, session and layer.
      for (int layer = 0; layer < 2; ++layer) {
        const std::string got(r->element[layer]->str, r->element[layer]->len);
        ASSERT_TRUE(got == Value(i, layer, layer == 0 ? kBig : kSmall, version))
            << "database " << db << " session " << i << " layer " << layer << ": " << got.size()
            << " bytes, not those written in database " << version;
      }
    }
  };
  const auto restart = [&](RedisContext& c) {
    c.reset();
    ASSERT_TRUE(server_.Stop());
    ASSERT_TRUE(server_.Restart(Options()));
    c = ConnectHiredis(server_.port());
    ASSERT_TRUE(c);
  };
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_TRUE(c);
  ASSERT_NO_FATAL_FAILURE(store(c.get(), 3));
  ASSERT_NO_FATAL_FAILURE(store(c.get(), 0));
  EXPECT_GE(InfoNumber(c.get(), "cold_keys"), 12u) << "12 MiB of sessions under a 4 MiB budget";
  EXPECT_EQ(InfoNumber(c.get(), "evicted_keys"), 0u);
  int cold = 0;
  ASSERT_NO_FATAL_FAILURE(check(c.get(), 3, 3, cold));
  EXPECT_GT(cold, 0) << "database 3's sessions went to the disk tier";
  ASSERT_NO_FATAL_FAILURE(check(c.get(), 0, 0, cold));

  // From the log: each put's values are placed in its record's database.
  ASSERT_NO_FATAL_FAILURE(restart(c));
  EXPECT_GE(InfoNumber(c.get(), "cold_keys"), 12u) << "recovery sends sessions of both to disk";
  ASSERT_NO_FATAL_FAILURE(check(c.get(), 3, 3, cold));
  EXPECT_GT(cold, 0);
  ASSERT_NO_FATAL_FAILURE(check(c.get(), 0, 0, cold));

  // From the snapshot: its cold records name database 3 and are not read at start.
  RedisReply r = HiredisCommand(c.get(), {"SAVE"});
  ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
  ASSERT_NO_FATAL_FAILURE(check(c.get(), 3, 3, cold));
  ASSERT_NO_FATAL_FAILURE(restart(c));
  EXPECT_EQ(InfoNumber(c.get(), "cold_bytes_read"), 0u);
  EXPECT_GE(InfoNumber(c.get(), "cold_keys"), 12u);
  ASSERT_NO_FATAL_FAILURE(check(c.get(), 3, 3, cold));
  EXPECT_GT(cold, 0) << "database 3's cold records were loaded cold";
  ASSERT_NO_FATAL_FAILURE(check(c.get(), 0, 0, cold));

  // SWAPDB moves the cold sessions with their database; a snapshot writes them under the new
  // index.
  r = HiredisCommand(c.get(), {"SWAPDB", "3", "5"});
  ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
  ASSERT_NO_FATAL_FAILURE(check(c.get(), 5, 3, cold));
  r = HiredisCommand(c.get(), {"SAVE"});
  ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
  ASSERT_NO_FATAL_FAILURE(restart(c));
  ASSERT_NO_FATAL_FAILURE(check(c.get(), 5, 3, cold));
  EXPECT_GT(cold, 0);
  ASSERT_NO_FATAL_FAILURE(check(c.get(), 0, 0, cold));
  ASSERT_NO_FATAL_FAILURE(select(c.get(), 3));
  r = HiredisCommand(c.get(), {"DBSIZE"});
  EXPECT_EQ(r->integer, 0);
}

// Two writers store and overwrite sessions far past maxmemory while they go cold; the server is
// then killed (SIGKILL: nothing flushed at exit). Every acknowledged session comes back with the
// value of its last acknowledged write.
TEST_F(DiskTierTest, EvictionWithPersistenceNeverLosesAnAcknowledgedSession) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
  constexpr int kWriters = 2, kPerWriter = 16;
  constexpr size_t kSize = 256 << 10;
  std::vector<std::vector<int>> acked(kWriters, std::vector<int>(kPerWriter, -1));
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      RedisContext c = ConnectHiredis(server_.port());
      for (int round = 0; round < 2; ++round) {
        for (int i = 0; i < kPerWriter; ++i) {
          const std::string sid = "w" + std::to_string(w) + ":" + std::to_string(i);
          const std::string v = Value(w * 100 + i, 0, kSize, round);
          RedisReply r = HiredisCommand(c.get(), {"SSM.PREFIX.STORE", sid, "0", v});
          if (r && r->type == REDIS_REPLY_STATUS) acked[w][i] = round;
        }
      }
    });
  }
  for (auto& t : writers) t.join();
  RedisContext c = ConnectHiredis(server_.port());
  EXPECT_GT(InfoNumber(c.get(), "cold_keys"), 0u);
  EXPECT_EQ(InfoNumber(c.get(), "evicted_keys"), 0u);
  c.reset();
  ASSERT_TRUE(server_.Kill());
  ASSERT_TRUE(server_.Restart(Options()));
  c = ConnectHiredis(server_.port());
  for (int w = 0; w < kWriters; ++w) {
    for (int i = 0; i < kPerWriter; ++i) {
      ASSERT_GE(acked[w][i], 0) << "every write was acknowledged";
      const std::string sid = "w" + std::to_string(w) + ":" + std::to_string(i);
      RedisReply r = HiredisCommand(c.get(), {"SSM.PREFIX.FETCH", sid, "0"});
      ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING) << sid << " " << DescribeReply(r.get());
      EXPECT_EQ(std::string(r->str, r->len), Value(w * 100 + i, 0, kSize, acked[w][i])) << sid;
    }
  }
}

// The snapshot's records as the tests below read and edit them (docs/storage-format.md).
struct SnapshotRecord {
  uint64_t offset = 0;
  uint8_t type = 0;
  uint8_t flags = 0;
  uint64_t length = 0;  // of the payload
  uint64_t end() const { return offset + 32 + length; }
};
constexpr uint8_t kSsmPut = 1, kSnapshotEnd = 15, kColdDirectory = 16, kColdFlag = 1;

uint64_t U64At(const std::string& bytes, uint64_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}
uint32_t U32At(const std::string& bytes, uint64_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}
void PutU64At(std::string& bytes, uint64_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes[at + i] = static_cast<char>(v >> (8 * i));
}
std::string ReadWhole(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void WriteWhole(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
std::vector<SnapshotRecord> Records(const std::string& file) {
  std::vector<SnapshotRecord> out;
  for (uint64_t at = 32; at + 32 <= file.size();) {
    SnapshotRecord r{at, static_cast<uint8_t>(file[at + 12]), static_cast<uint8_t>(file[at + 13]),
                     U64At(file, at + 24)};
    out.push_back(r);
    at = r.end();
  }
  return out;
}
// Recomputes the checksum of the record at `at` (seeded with the file header's XXH3-64).
void Reseal(std::string& file, uint64_t at) {
  const uint64_t seed = XXH3_64bits(file.data(), 32);
  const uint64_t length = U64At(file, at + 24);
  PutU64At(file, at, XXH3_64bits_withSeed(file.data() + at + 8, 24 + length, seed));
}

// The layout a snapshot with cold sessions has: its hot SSM puts, one directory, then exactly
// the cold puts it lists, one after another up to where it says they end, then the rest, then
// the end record counting the `entries` records that are not the directory or the end.
void ExpectHotThenDirectoryThenCold(const std::string& file, size_t entries) {
  const std::vector<SnapshotRecord> records = Records(file);
  ASSERT_GE(records.size(), 3u);
  size_t i = 0;
  while (i < records.size() && records[i].type == kSsmPut && records[i].flags == 0) ++i;
  ASSERT_LT(i, records.size());
  ASSERT_EQ(records[i].type, kColdDirectory) << "hot puts, then the cold directory";
  const SnapshotRecord directory = records[i];
  const uint64_t region_end = U64At(file, directory.offset + 32);
  const uint32_t listed = U32At(file, directory.offset + 32 + 8);
  size_t cold = 0;
  for (++i; i < records.size() && records[i].type == kSsmPut; ++i, ++cold) {
    EXPECT_EQ(records[i].flags, kColdFlag) << "only cold puts follow the directory";
  }
  EXPECT_EQ(cold, listed);
  EXPECT_GE(cold, 12u) << "12 MiB of sessions under a 4 MiB budget";
  ASSERT_LT(i, records.size());
  EXPECT_EQ(records[i].offset, region_end) << "the directory says where the cold records end";
  // Then the database's other records (expiries), none of them an SSM put, and the end record.
  for (size_t k = i; k + 1 < records.size(); ++k) EXPECT_NE(records[k].type, kSsmPut);
  const SnapshotRecord& end = records.back();
  EXPECT_EQ(end.type, kSnapshotEnd);
  EXPECT_EQ(U64At(file, end.offset + 32), records.size() - 2) << "the directory is not counted";
  EXPECT_EQ(records.size() - 2, entries) << "sessions and other records, the end not included";
}

// The snapshot of `file` as a build without the directory wrote it: the directory record cut
// out (records are found by their headers, so the cold puts moving changes nothing else).
std::string WithoutDirectory(const std::string& file) {
  for (const SnapshotRecord& r : Records(file)) {
    if (r.type == kColdDirectory) return file.substr(0, r.offset) + file.substr(r.end());
  }
  return file;
}

// SAVE writes the hot sessions, then a directory of the cold ones, then those; a restart places
// every cold layer from the directory alone (nothing of them read), and the layout and every
// byte survive SAVE after SAVE, each from the snapshot the one before wrote. An expiry on a cold
// session (written after the sessions) survives with it.
TEST_F(DiskTierTest, SnapshotListsItsColdSessionsAndRestartsFromTheListAcrossRepeatedSaves) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  RedisReply r = HiredisCommand(c.get(), {"EXPIRE", Sid(0), "100000"});
  ASSERT_EQ(r->integer, 1);
  const std::string path = server_.data_dir() + "/snapshot.pds";
  for (int round = 0; round < 3; ++round) {
    r = HiredisCommand(c.get(), {"SAVE"});
    ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
    ASSERT_NO_FATAL_FAILURE(ExpectHotThenDirectoryThenCold(ReadWhole(path), kSessions + 1))
        << "round " << round;
    c.reset();
    ASSERT_TRUE(server_.Stop());
    ASSERT_TRUE(server_.Restart(Options()));
    c = ConnectHiredis(server_.port());
    EXPECT_EQ(InfoNumber(c.get(), "cold_bytes_read"), 0u) << "no cold value read at start";
    EXPECT_GE(InfoNumber(c.get(), "cold_keys"), 12u);
    EXPECT_LE(InfoNumber(c.get(), "recovered_bytes"), (4u << 20) + 2 * kBig);
    r = HiredisCommand(c.get(), {"DBSIZE"});
    EXPECT_EQ(r->integer, kSessions);
    r = HiredisCommand(c.get(), {"TTL", Sid(0)});
    EXPECT_GT(r->integer, 99000) << "round " << round;
    ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
  }
}

// A snapshot written before the directory existed (cold puts flagged, no directory) loads as it
// did: each cold record's fields read, its values left on disk, every byte served.
TEST_F(DiskTierTest, SnapshotWithoutAColdDirectoryStillLoadsColdSessions) {
  ASSERT_NO_FATAL_FAILURE(StoreSaveAndStop());
  const std::string path = SnapshotPath();
  const std::string file = ReadWhole(path), old = WithoutDirectory(file);
  ASSERT_LT(old.size(), file.size());
  WriteWhole(path, old);
  ASSERT_TRUE(server_.Restart(Options()));
  RedisContext c = ConnectHiredis(server_.port());
  EXPECT_EQ(InfoNumber(c.get(), "cold_bytes_read"), 0u);
  EXPECT_GE(InfoNumber(c.get(), "cold_keys"), 12u);
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
  // Its next snapshot has the directory.
  RedisReply r = HiredisCommand(c.get(), {"SAVE"});
  ASSERT_EQ(r->type, REDIS_REPLY_STATUS);
  ASSERT_NO_FATAL_FAILURE(ExpectHotThenDirectoryThenCold(ReadWhole(path), kSessions));
}

// In a snapshot without a directory, a cold record is not read whole at start, but its fields
// are checked against its length: a layer length that runs past the record stops the start,
// naming file and offset.
TEST_F(DiskTierTest, DamagedColdRecordInASnapshotWithoutDirectoryStopsTheStart) {
  ASSERT_NO_FATAL_FAILURE(StoreSaveAndStop());
  const std::string path = SnapshotPath();
  std::string file = WithoutDirectory(ReadWhole(path));
  uint64_t cold_at = 0;
  for (const SnapshotRecord& rec : Records(file)) {
    if (rec.flags & kColdFlag) {
      cold_at = rec.offset;
      break;
    }
  }
  ASSERT_NE(cold_at, 0u) << "the snapshot flags its cold sessions";
  // Payload: u32 sid length, sid, u32 count, u32 layer, then the first layer's u64 length.
  const uint64_t length_at = cold_at + 32 + 4 + U32At(file, cold_at + 32) + 4 + 4;
  PutU64At(file, length_at, uint64_t{1} << 62);
  WriteWhole(path, file);
  const size_t log_mark = server_.ReadLog().size();
  EXPECT_FALSE(server_.Restart(Options())) << "the server started on a damaged snapshot";
  const std::string log = server_.ReadLog().substr(log_mark);
  EXPECT_NE(log.find("offset " + std::to_string(cold_at)), std::string::npos) << log;
  EXPECT_NE(log.find("runs past its payload"), std::string::npos) << log;
}

// A damaged cold directory stops the start, naming the file and the directory's offset: a
// flipped byte (its checksum), and, sealed again so the checksum passes, an entry that does not
// start where the record before it ends, and one whose layer runs past the cold records' end.
TEST_F(DiskTierTest, DamagedColdDirectoryStopsTheStart) {
  ASSERT_NO_FATAL_FAILURE(StoreSaveAndStop());
  const std::string path = SnapshotPath();
  const std::string good = ReadWhole(path);
  SnapshotRecord directory;
  for (const SnapshotRecord& rec : Records(good)) {
    if (rec.type == kColdDirectory) directory = rec;
  }
  ASSERT_NE(directory.offset, 0u);
  const uint64_t payload = directory.offset + 32;
  // The first entry: u64 record offset, u32 sid length, the sid, u32 layer count, then its
  // first layer's u32 layer and u64 length.
  const uint64_t entry = payload + 12;
  const uint64_t first_length_at = entry + 8 + 4 + U32At(good, entry + 8) + 4 + 4;
  struct Damage {
    const char* what;
    std::function<void(std::string&)> apply;
    const char* problem;
  };
  const std::vector<Damage> damages = {
      {"flipped byte", [&](std::string& f) { f[entry + 9] ^= 0x20; }, "checksum mismatch"},
      {"entry moved",
       [&](std::string& f) {
         PutU64At(f, entry, U64At(f, entry) + 1);
         Reseal(f, directory.offset);
       },
       "not where the record before it ends"},
      {"layer too long",
       [&](std::string& f) {
         PutU64At(f, first_length_at, U64At(f, first_length_at) + (uint64_t{1} << 40));
         Reseal(f, directory.offset);
       },
       "runs past the cold records' end"},
  };
  for (const Damage& d : damages) {
    std::string file = good;
    d.apply(file);
    WriteWhole(path, file);
    const size_t log_mark = server_.ReadLog().size();
    EXPECT_FALSE(server_.Restart(Options())) << d.what << ": started on a damaged directory";
    const std::string log = server_.ReadLog().substr(log_mark);
    EXPECT_NE(log.find("offset " + std::to_string(directory.offset)), std::string::npos)
        << d.what << "\n"
        << log;
    EXPECT_NE(log.find(d.problem), std::string::npos) << d.what << "\n" << log;
  }
  // Put back whole, it loads.
  WriteWhole(path, good);
  ASSERT_TRUE(server_.Restart(Options()));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
}

// Sessions stored without a budget, then a kill (the log alone) and a restart with one: recovery
// sends sessions to disk as it reads them and never holds much more than the budget.
TEST_F(DiskTierTest, ARestartFromTheLogNeverHoldsMoreThanTheBudget) {
  constexpr int kMany = 64;
  constexpr size_t kLayer = 1 << 20;
  ASSERT_NO_FATAL_FAILURE(StartServer({.flags = {"--appendonly", "yes"}}));
  RedisContext c = ConnectHiredis(server_.port());
  for (int i = 0; i < kMany; ++i) {
    RedisReply r = HiredisCommand(c.get(), {"SSM.PREFIX.STORE", Sid(i), "0", Value(i, 0, kLayer)});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS) << DescribeReply(r.get());
  }
  c.reset();
  ASSERT_TRUE(server_.Kill());
  ASSERT_TRUE(server_.Restart(Options()));
  c = ConnectHiredis(server_.port());
  EXPECT_LE(InfoNumber(c.get(), "used_memory_peak"), uint64_t{6} << 20);
  EXPECT_LE(InfoNumber(c.get(), "used_memory"), uint64_t{4} << 20);
  EXPECT_EQ(HiredisCommand(c.get(), {"DBSIZE"})->integer, kMany) << "nothing deleted at start";
  for (int i = 0; i < kMany; ++i) {
    RedisReply r = HiredisCommand(c.get(), {"SSM.PREFIX.FETCH", Sid(i), "0"});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING) << i << " " << DescribeReply(r.get());
    ASSERT_EQ(std::string(r->str, r->len), Value(i, 0, kLayer)) << i;
  }
}

TEST_F(DiskTierTest, ColdKeysCanBeOverwrittenDeletedAndExpired) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  // The oldest sessions went cold first (LRU).
  ASSERT_GE(InfoNumber(c.get(), "cold_keys"), 3u);
  RedisReply r = HiredisCommand(c.get(), {"DEL", Sid(0)});
  EXPECT_EQ(r->integer, 1);
  r = HiredisCommand(c.get(), {"SSM.PREFIX.FETCH", Sid(0), "0"});
  EXPECT_EQ(r->type, REDIS_REPLY_NIL);
  const std::string fresh = Value(1, 1, 100, 9);
  r = HiredisCommand(c.get(), {"SSM.PREFIX.STORE", Sid(1), "1", fresh});
  ASSERT_EQ(r->type, REDIS_REPLY_STATUS);
  r = HiredisCommand(c.get(), {"SSM.PREFIX.MFETCH", Sid(1), "0", "1"});
  ASSERT_EQ(r->elements, 2u);
  EXPECT_EQ(std::string(r->element[0]->str, r->element[0]->len), Value(1, 0, kBig));
  EXPECT_EQ(std::string(r->element[1]->str, r->element[1]->len), fresh);
  r = HiredisCommand(c.get(), {"PEXPIRE", Sid(2), "50"});
  EXPECT_EQ(r->integer, 1);
  std::this_thread::sleep_for(300ms);
  r = HiredisCommand(c.get(), {"EXISTS", Sid(2)});
  EXPECT_EQ(r->integer, 0);
  c.reset();
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart(Options()));
  c = ConnectHiredis(server_.port());
  r = HiredisCommand(c.get(), {"EXISTS", Sid(0), Sid(2)});
  EXPECT_EQ(r->integer, 0) << "deleted and expired cold keys stay gone";
  r = HiredisCommand(c.get(), {"SSM.PREFIX.FETCH", Sid(1), "1"});
  EXPECT_EQ(std::string(r->str, r->len), fresh);
}

// Small sessions live in their keyspace entries (docs/cache-design.md, "Small SSM sessions in
// their keyspace entry"): eviction deletes them, as small strings, and a session that grew out of
// its entry — its first layers logged with no place on disk — still goes cold whole, with no
// -OOM to the writes that push it out.
TEST_F(DiskTierTest, SmallSessionsAreEvictedWholeAndOneThatGrewGoesCold) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
  RedisContext c = ConnectHiredis(server_.port());
  const std::string first = Value(900, 0, 100), second = Value(900, 1, 100);
  const std::string large = Value(900, 2, kBig);
  const auto ok = [&](const std::vector<std::string_view>& args) {
    RedisReply r = HiredisCommand(c.get(), args);
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS) << args[1] << " " << DescribeReply(r.get());
  };
  ASSERT_NO_FATAL_FAILURE(ok({"SSM.PREFIX.MSTORE", "grown", "0", first, "1", second}));
  ASSERT_NO_FATAL_FAILURE(ok({"SSM.PREFIX.STORE", "grown", "2", large}));
  // Twice the budget in large sessions: "grown", the oldest, goes to disk first.
  for (int i = 0; i < 16; ++i) {
    ASSERT_NO_FATAL_FAILURE(ok({"SSM.PREFIX.STORE", Sid(i), "0", Value(i, 0, kBig)}));
  }
  EXPECT_GE(InfoNumber(c.get(), "cold_keys"), 1u);
  RedisReply r = HiredisCommand(c.get(), {"SSM.PREFIX.MFETCH", "grown", "0", "1", "2"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3) << DescribeReply(r.get());
  EXPECT_EQ(std::string(r->element[0]->str, r->element[0]->len), first);
  EXPECT_EQ(std::string(r->element[1]->str, r->element[1]->len), second);
  EXPECT_EQ(std::string(r->element[2]->str, r->element[2]->len), large);
  // Small sessions past the budget: the oldest are deleted whole, each write is answered OK.
  const uint64_t evicted_before = InfoNumber(c.get(), "evicted_keys");
  constexpr int kSmallSessions = 40000, kBatch = 1000;
  for (int from = 0; from < kSmallSessions; from += kBatch) {
    for (int i = from; i < from + kBatch; ++i) {
      const std::string sid = "small:" + std::to_string(i);
      const std::string a = Value(i, 0, 40), b = Value(i, 1, 20);
      const char* argv[] = {"SSM.PREFIX.MSTORE", sid.data(), "0", a.data(), "1", b.data()};
      const size_t lens[] = {17, sid.size(), 1, a.size(), 1, b.size()};
      ASSERT_EQ(redisAppendCommandArgv(c.get(), 6, argv, lens), REDIS_OK);
    }
    for (int i = from; i < from + kBatch; ++i) {
      void* raw = nullptr;
      ASSERT_EQ(redisGetReply(c.get(), &raw), REDIS_OK) << c->errstr;
      RedisReply reply(static_cast<redisReply*>(raw));
      ASSERT_EQ(reply->type, REDIS_REPLY_STATUS) << i << " " << DescribeReply(reply.get());
    }
  }
  EXPECT_GT(InfoNumber(c.get(), "evicted_keys"), evicted_before);
  // The budget, give or take what the clients' buffers hold as INFO is asked.
  EXPECT_LE(InfoNumber(c.get(), "used_memory"), (uint64_t{4} << 20) + (uint64_t{64} << 10));
  // What is left is whole: both layers or no key.
  int kept = 0;
  for (int i = 0; i < kSmallSessions; i += 97) {
    r = HiredisCommand(c.get(), {"SSM.PREFIX.MFETCH", "small:" + std::to_string(i), "0", "1"});
    ASSERT_EQ(r->elements, 2u);
    if (r->element[0]->type == REDIS_REPLY_NIL) {
      EXPECT_EQ(r->element[1]->type, REDIS_REPLY_NIL) << i;
      continue;
    }
    ++kept;
    EXPECT_EQ(std::string(r->element[0]->str, r->element[0]->len), Value(i, 0, 40)) << i;
    EXPECT_EQ(std::string(r->element[1]->str, r->element[1]->len), Value(i, 1, 20)) << i;
  }
  EXPECT_GT(kept, 0);
}

TEST_F(DiskTierTest, WithoutPersistenceEvictionStillDeletes) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Options("no")));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  EXPECT_GT(InfoNumber(c.get(), "evicted_keys"), 0u);
  EXPECT_EQ(InfoNumber(c.get(), "cold_keys"), 0u);
  RedisReply r = HiredisCommand(c.get(), {"DBSIZE"});
  EXPECT_LT(r->integer, kSessions);
}

TEST_F(DiskTierTest, MaxdiskDeletesColdKeysByPolicyAndTheyStayGone) {
  ServerProcess::Options options = Options();
  options.flags.insert(options.flags.end(), {"--maxdisk", "3mb"});
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  const uint64_t deleted = InfoNumber(c.get(), "disk_evicted_keys");
  EXPECT_GE(deleted, 8u) << "12 MiB: about 4 MiB hot, at most 3 MiB cold";
  EXPECT_LE(InfoNumber(c.get(), "cold_bytes"), 3u << 20);
  EXPECT_GT(InfoNumber(c.get(), "cold_keys"), 0u);
  RedisReply r = HiredisCommand(c.get(), {"DBSIZE"});
  const long long kept = r->integer;
  EXPECT_EQ(kept, kSessions - static_cast<long long>(deleted));
  // LRU: the oldest sessions went first; the newest survive whole.
  r = HiredisCommand(c.get(), {"EXISTS", Sid(0)});
  EXPECT_EQ(r->integer, 0);
  r = HiredisCommand(c.get(), {"SSM.PREFIX.FETCH", Sid(kSessions - 1), "0"});
  EXPECT_EQ(std::string(r->str, r->len), Value(kSessions - 1, 0, kBig));
  r = HiredisCommand(c.get(), {"CONFIG", "GET", "maxdisk"});
  ASSERT_EQ(r->elements, 2u);
  EXPECT_EQ(std::string(r->element[1]->str), "3145728");
  std::vector<bool> existed(kSessions);
  for (int i = 0; i < kSessions; ++i) {
    existed[i] = HiredisCommand(c.get(), {"EXISTS", Sid(i)})->integer == 1;
  }
  c.reset();
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart(options));
  c = ConnectHiredis(server_.port());
  // Deletions by maxdisk are logged: none comes back. (Recovery trims memory to maxmemory
  // exactly, without the last write's overshoot, so one more may go cold and then be deleted.)
  for (int i = 0; i < kSessions; ++i) {
    if (!existed[i]) EXPECT_EQ(HiredisCommand(c.get(), {"EXISTS", Sid(i)})->integer, 0) << i;
  }
  r = HiredisCommand(c.get(), {"DBSIZE"});
  EXPECT_GE(r->integer, kept - 1);
  EXPECT_LE(InfoNumber(c.get(), "cold_bytes"), 3u << 20);
  // Lowering it takes effect at the next write.
  r = HiredisCommand(c.get(), {"CONFIG", "SET", "maxdisk", "1mb"});
  EXPECT_EQ(r->type, REDIS_REPLY_STATUS);
  const uint64_t deleted_before = InfoNumber(c.get(), "disk_evicted_keys");
  r = HiredisCommand(c.get(), {"SSM.PREFIX.STORE", "tiny", "0", "x"});
  EXPECT_LE(InfoNumber(c.get(), "cold_bytes"), 1u << 20);
  EXPECT_GT(InfoNumber(c.get(), "disk_evicted_keys"), deleted_before);
}

// Writers keep rewriting sessions (every layer of one version) so that eviction turns them cold
// and reads promote them back; readers must always see one version across all layers, whole.
TEST_F(DiskTierTest, ConcurrentMfetchNeverSeesAPartialSessionWhileSessionsGoCold) {
  ASSERT_NO_FATAL_FAILURE(StartServer({.flags = {"--appendonly", "yes", "--maxmemory", "2mb",
                                                 "--maxmemory-policy", "allkeys-lru"}}));
  constexpr int kKeys = 12, kLayers = 4, kVersions = 200;
  constexpr size_t kSize = 128 << 10;
  const auto layer_of = [](int version, int layer) {
    std::string v(kSize, static_cast<char>('a' + version % 26));
    v[0] = static_cast<char>(layer);
    return v;
  };
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, reads{0};
  std::thread writer([&] {
    RedisContext w = ConnectHiredis(server_.port());
    for (int version = 0; !stop && version < kVersions; ++version) {
      std::vector<std::string> layers;
      for (int l = 0; l < kLayers; ++l) layers.push_back(layer_of(version, l));
      std::vector<std::string_view> args = {"SSM.PREFIX.MSTORE"};
      const std::string sid = Sid(version % kKeys);
      args.push_back(sid);
      std::vector<std::string> ids = {"0", "1", "2", "3"};
      for (int l = 0; l < kLayers; ++l) args.push_back(ids[l]), args.push_back(layers[l]);
      RedisReply r = HiredisCommand(w.get(), args);
      if (!r || r->type != REDIS_REPLY_STATUS) bad += 1000;
      // Compactions run meanwhile: they copy cold sessions and move every place.
      if (version % 50 == 25) HiredisCommand(w.get(), {"BGSAVE"});
    }
  });
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&, t] {
      RedisContext rc = ConnectHiredis(server_.port());
      for (int i = 0; !stop; ++i) {
        RedisReply r = HiredisCommand(
            rc.get(), {"SSM.PREFIX.MFETCH", Sid((i + t) % kKeys), "0", "1", "2", "3"});
        if (!r || r->type != REDIS_REPLY_ARRAY) {
          bad += 1;
          continue;
        }
        if (r->element[0]->type == REDIS_REPLY_NIL) continue;  // not written yet
        const char version = r->element[0]->str[1];
        for (int l = 0; l < kLayers; ++l) {
          const redisReply* e = r->element[l];
          if (e->type != REDIS_REPLY_STRING || e->len != kSize || e->str[0] != l ||
              e->str[1] != version || e->str[kSize - 1] != version) {
            bad += 1;
          }
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
  // After a restart every session is whole, at its last version.
  c.reset();
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart());
  c = ConnectHiredis(server_.port());
  for (int k = 0; k < kKeys; ++k) {
    int last = k;  // the last version the writer stored under this key
    while (last + kKeys < kVersions) last += kKeys;
    RedisReply r = HiredisCommand(c.get(), {"SSM.PREFIX.MFETCH", Sid(k), "0", "1", "2", "3"});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == kLayers);
    for (int l = 0; l < kLayers; ++l) {
      EXPECT_EQ(std::string(r->element[l]->str, r->element[l]->len), layer_of(last, l)) << k;
    }
  }
}

// A large cold session is read from disk as it is sent: to a client that does not read, the
// server holds one window of it (CLIENT LIST omem), not the session, and the bytes that come out
// once the client reads are the session's, bit-exact; all of it counts as read from disk and
// nothing is promoted (it does not fit).
TEST_F(DiskTierTest, AColdFetchToAClientThatDoesNotReadHoldsAWindowNotTheSession) {
  ASSERT_NO_FATAL_FAILURE(StartServer({.flags = {"--appendonly", "yes", "--maxmemory", "24mb",
                                                 "--maxmemory-policy", "allkeys-lru"}}));
  RedisContext c = ConnectHiredis(server_.port());
  constexpr size_t kLayer = 4 << 20;
  constexpr int kLayers = 4;
  std::vector<std::string> values;
  std::vector<std::string> ids = {"0", "1", "2", "3"};
  std::vector<std::string_view> args = {"SSM.PREFIX.MSTORE", "big"};
  for (int l = 0; l < kLayers; ++l) values.push_back(Value(100, l, kLayer));
  for (int l = 0; l < kLayers; ++l) args.push_back(ids[l]), args.push_back(values[l]);
  RedisReply r = HiredisCommand(c.get(), args);
  ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS) << DescribeReply(r.get());
  for (int i = 0; i < 6; ++i) {  // newer sessions push it to disk
    r = HiredisCommand(c.get(), {"SSM.PREFIX.STORE", Sid(i), "0", Value(i, 0, kLayer)});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS) << DescribeReply(r.get());
  }
  r = HiredisCommand(c.get(), {"MEMORY", "USAGE", "big"});
  ASSERT_EQ(r->type, REDIS_REPLY_INTEGER);
  ASSERT_LT(r->integer, 1 << 20) << "the session is on disk";
  const uint64_t read_before = InfoNumber(c.get(), "cold_bytes_read");
  const uint64_t promotions_before = InfoNumber(c.get(), "cold_promotions");

  auto stalled = RawConnection::Tcp(server_.port());
  ASSERT_TRUE(stalled);
  const int small = 16 << 10;
  ::setsockopt(stalled->fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  ASSERT_TRUE(stalled->Send(Multibulk({"SSM.PREFIX.MFETCH", "big", "0", "1", "2", "3"})));
  // The reply (16 MiB) is far more than the sockets buffer, so it waits on the client; meanwhile
  // the server holds what its output buffer says.
  int64_t omem = -1;
  for (int i = 0; i < 100 && omem < 0; ++i) {
    std::this_thread::sleep_for(50ms);
    r = HiredisCommand(c.get(), {"CLIENT", "LIST"});
    ASSERT_EQ(r->type, REDIS_REPLY_STRING);
    std::istringstream lines(std::string(r->str, r->len));
    for (std::string line; std::getline(lines, line);) {
      const size_t at = line.find(" omem=");
      if (line.find("cmd=ssm.prefix.mfetch") == std::string::npos || at == std::string::npos) {
        continue;
      }
      omem = std::stoll(line.substr(at + 6));
    }
  }
  ASSERT_GE(omem, 0) << "the fetching client never showed in CLIENT LIST";
  EXPECT_LT(omem, 2 << 20) << "a window of the reply, not the 16 MiB session";

  std::string expected = "*4\r\n";
  for (const std::string& v : values)
    expected += "$" + std::to_string(v.size()) + "\r\n" + v + "\r\n";
  const std::string got = stalled->Read(expected.size(), 30s);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected) << "the streamed session differs from what was stored";
  EXPECT_EQ(InfoNumber(c.get(), "cold_bytes_read") - read_before, kLayers * kLayer);
  EXPECT_EQ(InfoNumber(c.get(), "cold_promotions"), promotions_before);
}

// A cold value whose file was cut short (a damaged disk, an operator's mistake) cannot be read:
// each command that reads it answers an error in its place, the connection carries on, and the
// key stays, for the operator to repair or delete.
TEST_F(DiskTierTest, AColdValueThatCannotBeReadAnswersAnErrorAndTheKeyStays) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
  RedisContext c = ConnectHiredis(server_.port());
  RedisReply r = HiredisCommand(c.get(), {"SET", "chunk", Value(99, 0, kBig)});
  ASSERT_EQ(r->type, REDIS_REPLY_STATUS);
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  r = HiredisCommand(c.get(), {"SAVE"});  // the cold values now point into the snapshot
  ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
  r = HiredisCommand(c.get(), {"MEMORY", "USAGE", Sid(0)});
  ASSERT_LT(r->integer, static_cast<long long>(kBig)) << "the oldest session is on disk";
  ASSERT_EQ(::truncate(SnapshotPath().c_str(), 4096), 0);
  const std::string sid = Sid(0);  // outlives the views below
  const std::vector<std::vector<std::string_view>> reads = {
      {"SSM.PREFIX.MFETCH", sid, "0", "1"},
      {"SSM.PREFIX.FETCH", sid, "0"},
      {"SSM.PREFIX.FETCH", sid, "0", "RANGE", "10", "100"},
      {"GET", "chunk"}};
  for (const auto& read : reads) {
    r = HiredisCommand(c.get(), read);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->type, REDIS_REPLY_ERROR) << read[0] << ": " << DescribeReply(r.get());
    EXPECT_NE(std::string(r->str).find("from disk failed: "), std::string::npos) << r->str;
  }
  r = HiredisCommand(c.get(), {"EXISTS", Sid(0), "chunk"});
  EXPECT_EQ(r->integer, 2);
  r = HiredisCommand(c.get(), {"TYPE", Sid(0)});
  EXPECT_EQ(std::string(r->str), "ssm-prefix");
  r = HiredisCommand(c.get(), {"PING"});
  EXPECT_EQ(std::string(r->str), "PONG");
}

}  // namespace
}  // namespace prefixd::it
