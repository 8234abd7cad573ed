// The disk tier for V-store sessions and KV.PREFIX registrations over real sockets: with
// appendonly on, memory eviction turns them cold (their rows stay in the log or snapshot) and
// V.FETCH serves them from disk exactly as a hot fetch did, whole and by RANGE (reading only the
// rows asked for), before and after a restart and a snapshot; a registration goes cold whole;
// maxdisk deletes cold sessions; nothing acknowledged is lost across a crash; a concurrent fetch
// never sees a partial layer while sessions go cold and come back.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "integration/server_fixture.h"

namespace prefixd::it {
namespace {

constexpr int kDim = 256, kRows = 128, kLayers = 4;
constexpr size_t kRowBytes = kDim * 4;  // fp32

// fp32 rows of session `s`, layer `l`, from row `start`, of version `v`.
std::string Rows(int s, int l, int start, int count, int v = 0) {
  std::mt19937 rng(static_cast<uint32_t>(s * 7919 + l * 131 + start * 17 + v));
  std::normal_distribution<float> normal;
  std::string out(static_cast<size_t>(count) * kRowBytes, '\0');
  for (size_t i = 0; i < out.size(); i += 4) {
    const float x = normal(rng);
    std::memcpy(&out[i], &x, 4);
  }
  return out;
}

std::string Sid(int i) { return "vs:" + std::to_string(i); }

// A status reply, or V.CREATE's index.
void Ok(const RedisReply& r) {
  ASSERT_TRUE(r && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_INTEGER))
      << DescribeReply(r.get());
}

std::string Fetch(redisContext* c, const std::string& sid, int layer, int start, int end) {
  RedisReply r = HiredisCommand(c, {"V.FETCH", sid, std::to_string(layer), "RANGE",
                                    std::to_string(start), std::to_string(end)});
  if (!r || r->type != REDIS_REPLY_STRING) return "error: " + DescribeReply(r.get());
  return std::string(r->str, r->len);
}

// The types and flags of a snapshot's records, in file order (docs/storage-format.md).
std::vector<std::pair<int, int>> SnapshotRecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::pair<int, int>> out;
  for (uint64_t at = 32; at + 32 <= bytes.size();) {
    uint64_t length = 0;
    std::memcpy(&length, bytes.data() + at + 24, 8);
    out.emplace_back(static_cast<unsigned char>(bytes[at + 12]),
                     static_cast<unsigned char>(bytes[at + 13]));
    at += 32 + length;
  }
  return out;
}

class VstoreDiskTierTest : public ServerTest {
 protected:
  // 12 fp32 sessions of 512 KiB and 12 int8 ones of 132 KiB (7.5 MiB) under a 4 MiB budget.
  static constexpr int kSessions = 24;
  static constexpr uint64_t kBudget = 4 << 20;
  static uint64_t SessionBytes(int s) {
    return uint64_t{kLayers} * kRows * (s % 2 == 0 ? kRowBytes : kDim + 8);
  }
  // How many sessions must have gone cold, oldest first (allkeys-lru), for the others' rows
  // alone to fit the budget: a floor, as the server counts more than rows against it (its
  // entries, the clients' buffers of the moment).
  static uint64_t FewestCold() {
    uint64_t hot = 0;
    for (int s = 0; s < kSessions; ++s) hot += SessionBytes(s);
    uint64_t cold = 0;
    for (int s = 0; s < kSessions && hot > kBudget; ++s, ++cold) hot -= SessionBytes(s);
    return cold;
  }

  ServerProcess::Options Options() {
    return {.flags = {"--appendonly", "yes", "--maxmemory", "4mb", "--maxmemory-policy",
                      "allkeys-lru"}};
  }
  // Session `s`: every layer in two batches, then rows 10-19 of layer 0 written again, so a
  // layer's rows sit in several places of the log, one over another. Odd sessions are int8
  // (encoded on write): their expected rows are what a hot fetch answered.
  void StoreSession(redisContext* c, const std::string& sid, int s) {
    Ok(HiredisCommand(
        c, {"V.CREATE", sid, std::to_string(kDim), "VQUANT", s % 2 == 0 ? "fp32" : "int8"}));
    for (int l = 0; l < kLayers; ++l) {
      for (int half = 0; half < 2; ++half) {
        const int start = half * (kRows / 2);
        Ok(HiredisCommand(c, {"V.STOREBATCH", sid, std::to_string(l), std::to_string(start),
                              std::to_string(kRows / 2), Rows(s, l, start, kRows / 2)}));
      }
    }
    Ok(HiredisCommand(c, {"V.STOREBATCH", sid, "0", "10", "10", Rows(s, 0, 10, 10, 1)}));
    expected_.resize(kSessions * kLayers);
    for (int l = 0; l < kLayers; ++l) expected_[s * kLayers + l] = Fetch(c, sid, l, 0, kRows);
  }
  void StoreAll(redisContext* c) {
    for (int s = 0; s < kSessions; ++s) ASSERT_NO_FATAL_FAILURE(StoreSession(c, Sid(s), s));
  }
  // Every layer of every session as first fetched, whole.
  void CheckAll(redisContext* c, const std::string& prefix = "vs:") {
    for (int s = 0; s < kSessions; ++s) {
      for (int l = 0; l < kLayers; ++l) {
        const std::string got = Fetch(c, prefix + std::to_string(s), l, 0, kRows);
        ASSERT_TRUE(got == expected_[s * kLayers + l])
            << "session " << s << " layer " << l << ": " << got.substr(0, 80);
      }
    }
  }
  void Restart(RedisContext& c, bool kill = false) {
    c.reset();
    ASSERT_TRUE(kill ? server_.Kill() : server_.Stop());
    ASSERT_TRUE(server_.Restart(Options()));
    c = ConnectHiredis(server_.port());
    ASSERT_TRUE(c);
  }
  std::vector<std::string> expected_;
};

TEST_F(VstoreDiskTierTest, ColdSessionsAreServedBitExactWholeAndByRangeAcrossRestartAndSave) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_TRUE(c);
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  // The fp32 tier stores the input as given: the hot fetch was the input itself.
  ASSERT_EQ(expected_[1], Rows(0, 1, 0, 64) + Rows(0, 1, 64, 64));
  const uint64_t cold = InfoNumber(c.get(), "cold_keys");
  ASSERT_EQ(FewestCold(), 11u);  // six fp32 sessions and five int8 ones
  EXPECT_GE(cold, FewestCold()) << "7.5 MiB of sessions under a 4 MiB budget";
  EXPECT_EQ(InfoNumber(c.get(), "evicted_keys"), 0u) << "nothing acknowledged was deleted";
  EXPECT_GE(InfoNumber(c.get(), "cold_bytes"), cold * kLayers * kRows * (kDim + 8));
  RedisReply r = HiredisCommand(c.get(), {"DBSIZE"});
  EXPECT_EQ(r->integer, kSessions);
  r = HiredisCommand(c.get(), {"TYPE", Sid(0)});
  EXPECT_EQ(std::string(r->str), "vstore");
  const uint64_t cold_evictions_before = InfoNumber(c.get(), "cold_evictions");
  // Session 0 is the oldest, so cold: a RANGE reads only its rows and does not promote; one
  // that crosses the rewritten rows 10-19 gets the newer ones.
  const uint64_t read_before = InfoNumber(c.get(), "cold_bytes_read");
  EXPECT_EQ(Fetch(c.get(), Sid(0), 0, 5, 25), expected_[0].substr(5 * kRowBytes, 20 * kRowBytes));
  EXPECT_EQ(InfoNumber(c.get(), "cold_bytes_read") - read_before, 20 * kRowBytes);
  EXPECT_EQ(Fetch(c.get(), Sid(0), 0, 5, 25).substr(5 * kRowBytes, kRowBytes),
            Rows(0, 0, 10, 1, 1));
  // Rows past the length are zeros, as hot.
  EXPECT_EQ(Fetch(c.get(), Sid(0), 2, kRows - 1, kRows + 2),
            expected_[2].substr((kRows - 1) * kRowBytes) + std::string(2 * kRowBytes, '\0'));
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
  // A full fetch promotes only what fits under maxmemory without evicting for it: at the limit
  // at most what the budget's slack holds (how much that is depends on the client buffers of
  // the moment, so the check is that nothing went cold or past the budget to make room), every
  // session read once there is room.
  EXPECT_EQ(InfoNumber(c.get(), "cold_evictions"), cold_evictions_before);
  EXPECT_LE(InfoNumber(c.get(), "used_memory"), uint64_t{4} << 20);
  Ok(HiredisCommand(c.get(), {"CONFIG", "SET", "maxmemory", "0"}));
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
  EXPECT_GE(InfoNumber(c.get(), "cold_promotions"), cold);
  EXPECT_EQ(InfoNumber(c.get(), "cold_keys"), 0u);
  EXPECT_EQ(InfoNumber(c.get(), "cold_bytes"), 0u);

  // Restart (the log): what is past maxmemory goes back to disk, and everything reads back.
  ASSERT_NO_FATAL_FAILURE(Restart(c));
  EXPECT_GE(InfoNumber(c.get(), "cold_keys"), 8u);
  EXPECT_LE(InfoNumber(c.get(), "used_memory"), uint64_t{4} << 20);
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));

  // A snapshot copies cold sessions and cuts the log; after a restart from it alone, the cold
  // sessions were not read at start and read back bit-exact.
  r = HiredisCommand(c.get(), {"SAVE"});
  ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
  // The layout: hot sessions' records, one V-store cold directory (17), then the cold sessions'
  // create (32) and rows records (33, flagged cold).
  const auto records = SnapshotRecords(server_.data_dir() + "/snapshot.pds");
  size_t directory = records.size(), flagged = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].first == 17) {
      EXPECT_EQ(directory, records.size()) << "one directory";
      directory = i;
    }
    if (records[i].first == 33 && records[i].second == 1) {
      EXPECT_GT(i, directory) << "cold rows follow the directory";
      ++flagged;
    }
  }
  ASSERT_LT(directory, records.size());
  EXPECT_GE(flagged, 12u * kLayers);
  ASSERT_NO_FATAL_FAILURE(Restart(c));
  EXPECT_GE(InfoNumber(c.get(), "cold_keys"), 8u);
  EXPECT_LE(InfoNumber(c.get(), "used_memory"), uint64_t{4} << 20);
  EXPECT_EQ(InfoNumber(c.get(), "cold_bytes_read"), 0u);
  EXPECT_LE(InfoNumber(c.get(), "recovered_bytes"), 6u << 20) << "the hot set, not 12 MiB";
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
  // A write to a cold session reads it back first; the other rows stay as they were.
  ASSERT_NO_FATAL_FAILURE(Restart(c));
  Ok(HiredisCommand(c.get(), {"V.STOREBATCH", Sid(0), "1", "3", "1", Rows(0, 1, 3, 1, 2)}));
  expected_[1].replace(3 * kRowBytes, kRowBytes, Rows(0, 1, 3, 1, 2));
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
}

// A cold fp16 layer of 4 MiB (2048 rows of 2048 bytes): a RANGE reads from disk only the rows
// asked for (INFO's cold_bytes_read grows by them alone), at the first row, the last, across the
// end (zeros, read from nowhere), past it, and up to vstore-max-tokens; one past that is refused.
// A large NATIVE range (sent as stored) is streamed from the file: one extent (sendfile), or
// several and zeros back to back (layer 1 was written in pieces), and BATCH streams each layer
// of one plan; without NATIVE the rows are read and decoded as hot. Every reply is bit-exact
// against the rows stored (NATIVE) or what the same fetch answered hot (decoded).
TEST_F(VstoreDiskTierTest, ColdRangeReadsOnlyItsRowsAndLargeNativeRangesStreamExactly) {
  constexpr int kDim16 = 1024, kRows16 = 2048, kMaxTokens = 4096;
  constexpr size_t kRow = kDim16 * 2;
  ASSERT_NO_FATAL_FAILURE(
      StartServer({.flags = {"--appendonly", "yes", "--maxmemory", "12mb", "--maxmemory-policy",
                             "allkeys-lru", "--vstore-max-tokens", std::to_string(kMaxTokens)}}));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_TRUE(c);
  const std::string sid = "big";
  Ok(HiredisCommand(c.get(), {"V.CREATE", sid, std::to_string(kDim16), "VQUANT", "fp16"}));
  // fp16 input is stored as given: random bytes are the expected NATIVE rows.
  // (Rows gives 1 KiB rows: two per fp16 row.)
  std::string layer0 = Rows(1, 0, 0, 2 * kRows16), layer1 = Rows(1, 1, 0, 2 * kRows16);
  ASSERT_EQ(layer0.size(), kRows16 * kRow);
  Ok(HiredisCommand(
      c.get(), {"V.STOREBATCH", sid, "0", "0", std::to_string(kRows16), layer0, "FMT", "F16"}));
  // Layer 1: two halves, then rows 100-109 again: three extents in two places of the log.
  for (int half = 0; half < 2; ++half) {
    Ok(HiredisCommand(
        c.get(),
        {"V.STOREBATCH", sid, "1", std::to_string(half * kRows16 / 2), std::to_string(kRows16 / 2),
         layer1.substr(half * kRows16 / 2 * kRow, kRows16 / 2 * kRow), "FMT", "F16"}));
  }
  const std::string again = Rows(1, 1, 100, 20, 1);
  ASSERT_EQ(again.size(), 10 * kRow);
  Ok(HiredisCommand(c.get(), {"V.STOREBATCH", sid, "1", "100", "10", again, "FMT", "F16"}));
  layer1.replace(100 * kRow, 10 * kRow, again);
  const auto fetch = [&](std::vector<std::string> args) {
    std::vector<std::string_view> words{"V.FETCH", sid};
    words.insert(words.end(), args.begin(), args.end());
    RedisReply r = HiredisCommand(c.get(), words);
    if (!r || r->type != REDIS_REPLY_STRING) return "error: " + DescribeReply(r.get());
    return std::string(r->str, r->len);
  };
  // Decoded (fp32) answers while hot, to compare with the same fetches cold.
  const std::string decoded_hot = fetch({"0", "RANGE", "1", "2047"});
  ASSERT_EQ(decoded_hot.size(), 2046u * kDim16 * 4);
  // Sixteen 1 MiB sessions after it: "big" (8 MiB), the least recently used, goes cold.
  for (int s = 0; s < 16; ++s) {
    Ok(HiredisCommand(c.get(), {"V.CREATE", Sid(s), std::to_string(kDim), "VQUANT", "fp32"}));
    Ok(HiredisCommand(c.get(), {"V.STOREBATCH", Sid(s), "0", "0", "1024", Rows(s, 0, 0, 1024)}));
  }
  ASSERT_GE(InfoNumber(c.get(), "cold_keys"), 1u);
  const std::string zeros(kRow, '\0');
  struct Case {
    std::vector<std::string> args;
    std::string want;
    uint64_t read;  // bytes read from disk
  };
  const std::vector<Case> cases = {
      {{"0", "RANGE", "0", "1", "FMT", "NATIVE"}, layer0.substr(0, kRow), kRow},
      {{"0", "RANGE", "2047", "2048", "FMT", "NATIVE"}, layer0.substr(2047 * kRow), kRow},
      {{"0", "RANGE", "2047", "2050", "FMT", "NATIVE"},
       layer0.substr(2047 * kRow) + zeros + zeros,
       kRow},
      {{"0", "RANGE", "2048", "2049", "FMT", "NATIVE"}, zeros, 0},
      {{"0", "RANGE", "4095", "4096", "FMT", "NATIVE"}, zeros, 0},
      // Streamed: one extent of the file, then one extent and zeros up to the limit.
      {{"0", "RANGE", "1", "2047", "FMT", "NATIVE"}, layer0.substr(kRow, 2046 * kRow), 2046 * kRow},
      {{"0", "RANGE", "1", "4096", "FMT", "NATIVE"},
       layer0.substr(kRow) + std::string((kMaxTokens - kRows16) * kRow, '\0'),
       2047 * kRow},
      // Streamed from three extents of layer 1 (rows 100-109 come from the later write).
      {{"1", "RANGE", "1", "2048", "FMT", "NATIVE"}, layer1.substr(kRow), 2047 * kRow},
      {{"1", "RANGE", "105", "106", "FMT", "NATIVE"}, again.substr(5 * kRow, kRow), kRow},
      // Decoded to fp32: read (only the rows asked for) and converted, as hot.
      {{"0", "RANGE", "1", "2047"}, decoded_hot, 2046 * kRow},
  };
  for (const Case& k : cases) {
    const uint64_t before = InfoNumber(c.get(), "cold_bytes_read");
    const std::string got = fetch(k.args);
    EXPECT_TRUE(got == k.want) << k.args[0] << " " << k.args[2] << "-" << k.args[3] << ": "
                               << got.size() << " bytes, " << got.substr(0, 60);
    EXPECT_EQ(InfoNumber(c.get(), "cold_bytes_read") - before, k.read)
        << k.args[0] << " " << k.args[2] << "-" << k.args[3];
  }
  EXPECT_EQ(InfoNumber(c.get(), "cold_promotions"), 0u) << "no range promoted the session";
  EXPECT_EQ(fetch({"0", "RANGE", "0", std::to_string(kMaxTokens + 1), "FMT", "NATIVE"}),
            "error: error 'ERR invalid RANGE: end 4097 exceeds vstore-max-tokens (4096)'");
  // BATCH from row 1: both layers streamed from one plan, in order.
  const uint64_t before = InfoNumber(c.get(), "cold_bytes_read");
  RedisReply r = HiredisCommand(c.get(), {"V.FETCH", sid, "BATCH", "1", "2048", "FMT", "NATIVE"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) << DescribeReply(r.get());
  EXPECT_TRUE(std::string(r->element[0]->str, r->element[0]->len) == layer0.substr(kRow));
  EXPECT_TRUE(std::string(r->element[1]->str, r->element[1]->len) == layer1.substr(kRow));
  EXPECT_EQ(InfoNumber(c.get(), "cold_bytes_read") - before, 2 * 2047 * kRow);
  // The session is still cold, and a whole fetch still reads back the rows stored.
  EXPECT_EQ(InfoNumber(c.get(), "cold_promotions"), 0u);
  EXPECT_TRUE(fetch({"1", "RANGE", "0", "2048", "FMT", "NATIVE"}) == layer1);
}

TEST_F(VstoreDiskTierTest, KvPrefixRegistrationGoesColdWholeAndReadsBack) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_TRUE(c);
  expected_.resize(kSessions * kLayers);
  // 12 registrations, each a _pk and a _pv session of 512 KiB.
  constexpr int kPrefixes = kSessions / 2;
  for (int p = 0; p < kPrefixes; ++p) {
    const std::string ns = "ns" + std::to_string(p);
    Ok(HiredisCommand(c.get(), {"KV.PREFIX.REGISTER", ns, std::to_string(kDim), "fp32"}));
    for (int half = 0; half < 2; ++half) {
      const int s = p * 2 + half;
      const std::string sid = ns + (half == 0 ? "_pk" : "_pv");
      for (int l = 0; l < kLayers; ++l) {
        Ok(HiredisCommand(c.get(), {"V.STOREBATCH", sid, std::to_string(l), "0",
                                    std::to_string(kRows), Rows(s, l, 0, kRows)}));
        expected_[s * kLayers + l] = Rows(s, l, 0, kRows);
      }
    }
  }
  EXPECT_EQ(InfoNumber(c.get(), "evicted_keys"), 0u);
  EXPECT_GE(InfoNumber(c.get(), "cold_keys"), 12u);
  RedisReply r = HiredisCommand(c.get(), {"KV.PREFIX.LOOKUP", "ns0"});
  EXPECT_EQ(std::string(r->str), "HIT") << "a cold prefix is still there";
  r = HiredisCommand(c.get(), {"TYPE", "ns0"});
  EXPECT_EQ(std::string(r->str), "kvprefix");
  const auto check = [&] {
    for (int p = 0; p < kPrefixes; ++p) {
      for (int half = 0; half < 2; ++half) {
        const std::string sid = "ns" + std::to_string(p) + (half == 0 ? "_pk" : "_pv");
        for (int l = 0; l < kLayers; ++l) {
          ASSERT_TRUE(Fetch(c.get(), sid, l, 0, kRows) == expected_[(p * 2 + half) * kLayers + l])
              << sid << " layer " << l;
        }
      }
    }
  };
  ASSERT_NO_FATAL_FAILURE(check());
  r = HiredisCommand(c.get(), {"SAVE"});
  ASSERT_EQ(r->type, REDIS_REPLY_STATUS) << DescribeReply(r.get());
  ASSERT_NO_FATAL_FAILURE(Restart(c));
  EXPECT_GE(InfoNumber(c.get(), "cold_keys"), 8u);
  EXPECT_LE(InfoNumber(c.get(), "used_memory"), uint64_t{4} << 20);
  EXPECT_EQ(InfoNumber(c.get(), "cold_bytes_read"), 0u);
  r = HiredisCommand(c.get(), {"KV.PREFIX.LOOKUP", "ns0"});
  EXPECT_EQ(std::string(r->str), "HIT");
  ASSERT_NO_FATAL_FAILURE(check());
}

// Cold V-store keys are keys: DUMP/RESTORE copies one read from disk, DEL and expiry remove it
// (and stay removed after a restart), MEMORY USAGE reports what it holds in memory. SSM state
// under a registration's name goes cold with the registration and reads back.
TEST_F(VstoreDiskTierTest, ColdKeysCanBeDumpedDeletedAndExpiredAndHoldSsmState) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_TRUE(c);
  Ok(HiredisCommand(c.get(), {"KV.PREFIX.REGISTER", "hy", std::to_string(kDim), "fp32"}));
  const std::string state(300 << 10, 'q');
  Ok(HiredisCommand(c.get(), {"SSM.PREFIX.STORE", "hy", "0", state}));
  Ok(HiredisCommand(
      c.get(), {"V.STOREBATCH", "hy_pk", "0", "0", std::to_string(kRows), Rows(99, 0, 0, kRows)}));
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  ASSERT_GE(InfoNumber(c.get(), "cold_keys"), 12u);
  RedisReply r;
  // Sessions 0-3 (and the registration, older still) are cold: the oldest entries.
  r = HiredisCommand(c.get(), {"MEMORY", "USAGE", Sid(0)});
  ASSERT_EQ(r->type, REDIS_REPLY_INTEGER);
  EXPECT_LT(r->integer, 64 << 10) << "a cold session holds no rows in memory";
  const uint64_t hits = InfoNumber(c.get(), "cold_hits");
  r = HiredisCommand(c.get(), {"SSM.PREFIX.FETCH", "hy", "0"});
  ASSERT_EQ(r->type, REDIS_REPLY_STRING) << DescribeReply(r.get());
  EXPECT_TRUE(std::string(r->str, r->len) == state);
  EXPECT_TRUE(Fetch(c.get(), "hy_pk", 0, 0, kRows) == Rows(99, 0, 0, kRows));
  EXPECT_GE(InfoNumber(c.get(), "cold_hits") - hits, 2u) << "both were read from disk";
  r = HiredisCommand(c.get(), {"DUMP", Sid(1)});
  ASSERT_EQ(r->type, REDIS_REPLY_STRING) << DescribeReply(r.get());
  const std::string dump(r->str, r->len);
  Ok(HiredisCommand(c.get(), {"RESTORE", "copy", "0", dump}));
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_TRUE(Fetch(c.get(), "copy", l, 0, kRows) == expected_[1 * kLayers + l]) << l;
  }
  EXPECT_EQ(HiredisCommand(c.get(), {"DEL", Sid(2)})->integer, 1);
  EXPECT_EQ(HiredisCommand(c.get(), {"PEXPIRE", Sid(3), "1"})->integer, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(HiredisCommand(c.get(), {"EXISTS", Sid(3)})->integer, 0);
  ASSERT_NO_FATAL_FAILURE(Restart(c));
  EXPECT_EQ(HiredisCommand(c.get(), {"EXISTS", Sid(2), Sid(3)})->integer, 0);
  EXPECT_TRUE(Fetch(c.get(), Sid(0), 3, 0, kRows) == expected_[3]);
}

TEST_F(VstoreDiskTierTest, MaxdiskDeletesColdSessionsByPolicyAndTheyStayGone) {
  ServerProcess::Options options = Options();
  options.flags.insert(options.flags.end(), {"--maxdisk", "3mb"});
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  const uint64_t deleted = InfoNumber(c.get(), "disk_evicted_keys");
  EXPECT_GE(deleted, 1u) << "7.6 MiB: about 4 MiB hot, at most 3 MiB cold";
  EXPECT_LE(InfoNumber(c.get(), "cold_bytes"), 3u << 20);
  EXPECT_GT(InfoNumber(c.get(), "cold_keys"), 0u);
  // LRU: the oldest sessions went first.
  EXPECT_EQ(HiredisCommand(c.get(), {"EXISTS", Sid(0)})->integer, 0);
  c.reset();
  ASSERT_TRUE(server_.Stop());
  ASSERT_TRUE(server_.Restart(options));
  c = ConnectHiredis(server_.port());
  EXPECT_EQ(HiredisCommand(c.get(), {"EXISTS", Sid(0)})->integer, 0) << "the delete was logged";
  const std::string last = Sid(kSessions - 1);
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_TRUE(Fetch(c.get(), last, l, 0, kRows) == expected_[(kSessions - 1) * kLayers + l]);
  }
}

// Eviction under writers that are acknowledged before their fsync (appendfsync everysec): a
// session leaves memory only once its rows are durable, so after SIGKILL every acknowledged
// row is there.
TEST_F(VstoreDiskTierTest, EvictionNeverLosesAnAcknowledgedRowAcrossACrash) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Options()));
  RedisContext c = ConnectHiredis(server_.port());
  ASSERT_NO_FATAL_FAILURE(StoreAll(c.get()));
  EXPECT_GT(InfoNumber(c.get(), "cold_evictions"), 0u);
  EXPECT_EQ(InfoNumber(c.get(), "evicted_keys"), 0u);
  ASSERT_NO_FATAL_FAILURE(Restart(c, /*kill=*/true));
  ASSERT_NO_FATAL_FAILURE(CheckAll(c.get()));
}

// A writer rewrites whole layers (every row of one version) while eviction turns sessions cold
// and full fetches promote them back, with snapshots meanwhile; readers must always get one
// version for every row of a layer.
TEST_F(VstoreDiskTierTest, ConcurrentFetchNeverSeesAPartialLayerWhileSessionsGoCold) {
  ASSERT_NO_FATAL_FAILURE(StartServer({.flags = {"--appendonly", "yes", "--maxmemory", "2mb",
                                                 "--maxmemory-policy", "allkeys-lru"}}));
  constexpr int kKeys = 8, kVersions = 160, kLayerRows = 256;
  const auto layer_of = [](int version) {
    std::string rows(kLayerRows * kRowBytes, static_cast<char>(1 + version % 100));
    return rows;
  };
  {
    RedisContext w = ConnectHiredis(server_.port());
    for (int k = 0; k < kKeys; ++k) {
      Ok(HiredisCommand(w.get(), {"V.CREATE", Sid(k), std::to_string(kDim), "VQUANT", "fp32"}));
      for (int l = 0; l < 2; ++l) {
        Ok(HiredisCommand(w.get(), {"V.STOREBATCH", Sid(k), std::to_string(l), "0",
                                    std::to_string(kLayerRows), layer_of(k)}));
      }
    }
  }
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, reads{0};
  std::thread writer([&] {
    RedisContext w = ConnectHiredis(server_.port());
    for (int version = 0; !stop && version < kVersions; ++version) {
      for (int l = 0; l < 2; ++l) {
        RedisReply r =
            HiredisCommand(w.get(), {"V.STOREBATCH", Sid(version % kKeys), std::to_string(l), "0",
                                     std::to_string(kLayerRows), layer_of(version)});
        if (!r || r->type != REDIS_REPLY_STATUS) bad += 1000;
      }
      if (version % 40 == 20) HiredisCommand(w.get(), {"BGSAVE"});
    }
  });
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&, t] {
      RedisContext rc = ConnectHiredis(server_.port());
      for (int i = 0; !stop; ++i) {
        const std::string got = Fetch(rc.get(), Sid((i + t) % kKeys), i % 2, 0, kLayerRows);
        if (got.size() != kLayerRows * kRowBytes) {
          bad += 1;
          continue;
        }
        if (got.find_first_not_of(got[0]) != std::string::npos) bad += 1;
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
  ASSERT_NO_FATAL_FAILURE(Restart(c));
  for (int k = 0; k < kKeys; ++k) {
    int last = k;
    while (last + kKeys < kVersions) last += kKeys;
    for (int l = 0; l < 2; ++l) {
      EXPECT_TRUE(Fetch(c.get(), Sid(k), l, 0, kLayerRows) == layer_of(last)) << k << " " << l;
    }
  }
}

}  // namespace
}  // namespace prefixd::it
