// RdbWriter: the CRC-64-Jones check value, the length encodings at their boundaries (6, 14 and
// 32 bits), the bytes of a hash, a sorted set and a stream, and a file with every encodable type
// (streams cut into several listpack nodes, with consumer groups) that Redis's redis-check-rdb
// accepts with its deep checks of every listpack.
#include "persist/rdb.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "store/members.h"
#include "store/sorted_set.h"
#include "store/stream.h"

namespace prefixd::persist {
namespace {

TEST(Rdb, Crc64JonesCheckValue) {
  // The check value of the CRC-64-Jones variant Redis uses (crc64.c's self test).
  EXPECT_EQ(Crc64Jones(0, "123456789"), 0xe9c6d914c4b8d9caull);
  // Fed in pieces, the same.
  EXPECT_EQ(Crc64Jones(Crc64Jones(0, "1234"), "56789"), 0xe9c6d914c4b8d9caull);
  // Eight bytes at a time equals byte by byte, for every split of a longer input.
  std::string text;
  for (int i = 0; i < 100; ++i) text.push_back(static_cast<char>(i * 37 + 11));
  const uint64_t whole = Crc64Jones(0, text);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    uint64_t bytewise = Crc64Jones(0, text.substr(0, cut));
    for (size_t i = cut; i < text.size(); ++i) bytewise = Crc64Jones(bytewise, text.substr(i, 1));
    EXPECT_EQ(bytewise, whole) << cut;
  }
}

store::KeyInfo StringInfo(const std::string& value, int64_t expire_at_ms = 0) {
  store::KeyInfo info;
  info.type = store::KeyType::kString;
  info.value = Bytes::CopyOf(value);
  info.expire_at_ms = expire_at_ms;
  return info;
}

// The bytes a key adds: the RDB with it less the RDB without it.
std::string KeyBytes(const std::string& key, const store::KeyInfo& info) {
  RdbWriter empty("7.0.15", 0, std::string(40, '0'), 0);
  RdbWriter with("7.0.15", 0, std::string(40, '0'), 0);
  EXPECT_TRUE(with.Key(key, info));
  std::string a = empty.Finish(), b = with.Finish();
  const size_t head = a.size() - 9;  // before the EOF opcode and checksum
  return b.substr(head, b.size() - a.size());
}

TEST(Rdb, LengthsAtTheirBoundaries) {
  // Type 0, key "k" (length 1), then the value's length: 6 bits up to 63, 14 bits (big-endian,
  // 0x40 flag) up to 16383, then 0x80 and 32 bits big-endian.
  EXPECT_EQ(KeyBytes("k", StringInfo(std::string(63, 'a'))),
            std::string("\x00\x01k\x3f", 4) + std::string(63, 'a'));
  EXPECT_EQ(KeyBytes("k", StringInfo(std::string(64, 'a'))),
            std::string("\x00\x01k\x40\x40", 5) + std::string(64, 'a'));
  EXPECT_EQ(KeyBytes("k", StringInfo(std::string(16383, 'a'))),
            std::string("\x00\x01k\x7f\xff", 5) + std::string(16383, 'a'));
  EXPECT_EQ(KeyBytes("k", StringInfo(std::string(16384, 'a'))),
            std::string("\x00\x01k\x80\x00\x00\x40\x00", 8) + std::string(16384, 'a'));
  // An expiry: opcode 252 and the time as 8 bytes little-endian, before the type.
  EXPECT_EQ(KeyBytes("k", StringInfo("v", 0x0102030405060708)),
            std::string("\xfc\x08\x07\x06\x05\x04\x03\x02\x01\x00\x01k\x01v", 14));
}

store::KeyInfo MembersInfo(store::KeyType type, const std::vector<std::string>& members) {
  store::KeyInfo info;
  info.type = type;
  info.value = store::EncodeMembers(members);
  return info;
}

store::KeyInfo ZsetInfo(const std::vector<store::ScoredView>& ascending) {
  store::KeyInfo info;
  info.type = store::KeyType::kZset;
  info.value = store::EncodeZset(ascending);
  return info;
}

// A stream of `entries` (id, field/value pairs), then `groups`.
store::KeyInfo StreamInfo(
    const std::vector<std::pair<store::StreamId, std::vector<std::string_view>>>& entries,
    const store::StreamGroups& groups = {}) {
  Bytes value = store::EmptyStream();
  for (const auto& [id, fields] : entries) {
    value = store::StreamAppend(
        value.view(), store::EncodeStreamEntry(id, store::EncodeStreamBody(fields).view()).view(),
        0);
  }
  if (!groups.empty()) {
    value = store::StreamReplaceGroups(value.view(), store::EncodeStreamGroups(groups).view());
  }
  store::KeyInfo info;
  info.type = store::KeyType::kStream;
  info.value = std::move(value);
  return info;
}

std::string Double(double d) {
  char bytes[8];
  std::memcpy(bytes, &d, 8);  // little-endian, as this machine
  return std::string(bytes, 8);
}

TEST(Rdb, HashIsItsPairCountThenFieldsAndValues) {
  // Type 4, the pair count, then each field and value; an empty field or value is a length 0.
  EXPECT_EQ(KeyBytes("h", MembersInfo(store::KeyType::kHash, {"f", "v", "", "x", "e", ""})),
            std::string("\x04\x01h\x03\x01"
                        "f\x01v\x00\x01x\x01"
                        "e\x00",
                        14));
}

TEST(Rdb, ZsetIsMembersAndBinaryScoresGreatestFirst) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Type 5 (ZSET_2), the count, then member and the score's 8 bytes, from the greatest down:
  // infinities and -0.0 are their own bit patterns.
  const std::string got =
      KeyBytes("z", ZsetInfo({{-kInf, "lo"}, {-0.0, "nz"}, {5e-324, "tiny"}, {kInf, "hi"}}));
  EXPECT_EQ(got, std::string("\x05\x01z\x04", 4) + "\x02hi" + Double(kInf) + "\x04tiny" +
                     Double(5e-324) + "\x02nz" + Double(-0.0) + "\x02lo" + Double(-kInf));
  EXPECT_EQ(Double(-0.0), std::string("\0\0\0\0\0\0\0\x80", 8));
  EXPECT_EQ(Double(kInf), std::string("\0\0\0\0\0\0\xf0\x7f", 8));
}

TEST(Rdb, StreamIsListpackNodesThenItsIdsAndGroups) {
  // One entry 1-1 {f: v}: one node keyed by 1-1 (16 bytes big-endian), its listpack (29 bytes,
  // 10 elements: count 1, deleted 0, 1 master field "f", 0; flags SAMEFIELDS, ms and seq
  // differences 0, the value "v", lp-count 4; each element then its backlen), then length 1,
  // last id 1-1, first id 1-1, max deleted id 0-0, entries added 1, no group.
  const std::string key = std::string(7, '\0') + "\x01" + std::string(7, '\0') + "\x01";
  const std::string listpack = std::string("\x1d\0\0\0\x0a\0", 6) +
                               std::string(
                                   "\x01\x01\x00\x01\x01\x01\x81"
                                   "f\x02\x00\x01",
                                   11) +
                               std::string("\x02\x01\x00\x01\x00\x01\x81v\x02\x04\x01", 11) +
                               "\xff";
  ASSERT_EQ(listpack.size(), 29u);
  EXPECT_EQ(KeyBytes("x", StreamInfo({{{1, 1}, {"f", "v"}}})),
            std::string("\x13\x01x\x01\x10", 5) + key + "\x1d" + listpack +
                std::string("\x01\x01\x01\x01\x01\x00\x00\x01\x00", 9));
}

TEST(Rdb, StreamEntriesDifferingFromTheMasterCarryTheirFields) {
  // 5-3 {a: 1}, then 6-0 {b: 2}: the second entry's seq difference is -3 (13-bit two's
  // complement 0x1ffd, two bytes, backlen 2), and its fields differ from the master's, so it
  // has flags 0, a field count, field and value (the integer 2, as Redis stores "2"), and
  // lp-count 3 + 1 + 2 = 6.
  const std::string got = KeyBytes("x", StreamInfo({{{5, 3}, {"a", "1"}}, {{6, 0}, {"b", "2"}}}));
  const std::string second = std::string(
      "\x00\x01\x01\x01\xdf\xfd\x02\x01\x01\x81"
      "b\x02\x02\x01\x06\x01",
      16);
  EXPECT_NE(got.find(second), std::string::npos);
  // The node's live count is 2.
  EXPECT_NE(got.find(std::string("\x02\x01\x00\x01\x01\x01\x81"
                                 "a\x02\x00\x01",
                                 11)),
            std::string::npos);
}

TEST(Rdb, PrefixdTypesAreLeftOut) {
  RdbWriter rdb("7.0.15", 0, std::string(40, '0'), 0);
  store::KeyInfo info;
  for (auto type : {store::KeyType::kSsmPrefix, store::KeyType::kVstore, store::KeyType::kKvPrefix,
                    store::KeyType::kPrefixIndex}) {
    info.type = type;
    EXPECT_FALSE(RdbWriter::Encodable(type));
    EXPECT_FALSE(rdb.Key("x", info));
  }
}

TEST(Rdb, RedisCheckRdbAcceptsEveryType) {
  if (::access("/usr/bin/redis-check-rdb", X_OK) != 0) GTEST_SKIP() << "no redis-check-rdb";
  RdbWriter rdb("7.0.15", 1234, std::string(40, 'a'), 99);
  rdb.SelectDb(0, 7, 1);
  rdb.Key("str", StringInfo(std::string(70000, 's'), 4102444800000));
  store::KeyInfo set;
  set.type = store::KeyType::kSet;
  set.value = store::EncodeMembers({"1", "two", std::string(100, '3')});
  rdb.Key("set", set);
  store::KeyInfo list;
  list.type = store::KeyType::kList;
  list.value = store::EncodeMembers({"a", "b", "c"});
  rdb.Key("list", list);
  rdb.Key("hash",
          MembersInfo(store::KeyType::kHash, {"f", "v", "", "", "big", std::string(70000, 'h')}));
  constexpr double kInf = std::numeric_limits<double>::infinity();
  rdb.Key("zset", ZsetInfo({{-kInf, "a"}, {-0.0, ""}, {0, "b"}, {5e-324, "c"}, {kInf, "d"}}));
  // 250 entries in several nodes (100 entries, 4096 bytes), fields that change, a value past a
  // 32-bit string's threshold and a 12-bit one, ids whose ms jump past 32 bits and whose seq
  // goes back.
  std::vector<std::string> values;
  for (int i = 0; i < 250; ++i) values.push_back(std::to_string(i));
  values[7] = std::string(5000, 'x');
  values[8] = std::string(300, 'y');
  std::vector<std::pair<store::StreamId, std::vector<std::string_view>>> entries;
  for (uint64_t i = 0; i < 250; ++i) {
    const store::StreamId id{i < 200 ? 1 + i / 3 : 10000000000 + i, i < 200 ? i % 3 : 0};
    if (i % 7 == 3) {
      entries.push_back({id, {"other", values[i], "", ""}});
    } else {
      entries.push_back({id, {"f", values[i]}});
    }
  }
  store::StreamGroups groups;
  store::StreamGroup& g = groups["g1"];
  g.last_delivered = entries[10].first;
  g.entries_read = 11;
  g.pending[entries[2].first] = {"alice", 1700000000000, 3};
  g.pending[entries[9].first] = {"bob", 1700000000001, 1};
  g.consumers["alice"] = {1700000000002};
  g.consumers["bob"] = {1700000000003};
  g.consumers["idle"] = {5};
  // An owner missing from the consumers is written as one (deep checks refuse an owner-less
  // pending entry).
  g.pending[entries[20].first] = {"ghost", 1700000000004, 2};
  groups["g2"];  // entries-read unknown (-1), nothing pending, no consumer
  rdb.Key("stream", StreamInfo(entries, groups));
  rdb.Key("empty-stream", StreamInfo({}, {}));
  rdb.SelectDb(9, 1, 0);
  rdb.Key("in9", StringInfo("v"));
  const std::string file = std::filesystem::temp_directory_path() /
                           ("prefixd-rdb-test-" + std::to_string(::getpid()) + ".rdb");
  std::ofstream(file, std::ios::binary) << rdb.Finish();
  std::string out;
  FILE* p = ::popen(("/usr/bin/redis-check-rdb " + file + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ::pclose(p);
  std::filesystem::remove(file);
  EXPECT_NE(out.find("Checksum OK"), std::string::npos) << out;
  EXPECT_NE(out.find("RDB looks OK"), std::string::npos) << out;
  EXPECT_NE(out.find("8 keys read"), std::string::npos) << out;
  EXPECT_NE(out.find("1 expires"), std::string::npos) << out;
}

}  // namespace
}  // namespace prefixd::persist
