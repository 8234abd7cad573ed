// RdbWriter: the CRC-64-Jones check value, the length encodings at their boundaries (6, 14 and
// 32 bits), and a file with every encodable type that Redis's redis-check-rdb accepts.
#include "persist/rdb.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "store/members.h"

namespace prefixd::persist {
namespace {

TEST(Rdb, Crc64JonesCheckValue) {
  // The check value of the CRC-64-Jones variant Redis uses (crc64.c's self test).
  EXPECT_EQ(Crc64Jones(0, "123456789"), 0xe9c6d914c4b8d9caull);
  // Fed in pieces, the same.
  EXPECT_EQ(Crc64Jones(Crc64Jones(0, "1234"), "56789"), 0xe9c6d914c4b8d9caull);
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
  rdb.SelectDb(0, 3, 1);
  rdb.Key("str", StringInfo(std::string(70000, 's'), 4102444800000));
  store::KeyInfo set;
  set.type = store::KeyType::kSet;
  set.value = store::EncodeMembers({"1", "two", std::string(100, '3')});
  rdb.Key("set", set);
  store::KeyInfo list;
  list.type = store::KeyType::kList;
  list.value = store::EncodeMembers({"a", "b", "c"});
  rdb.Key("list", list);
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
  EXPECT_NE(out.find("4 keys read"), std::string::npos) << out;
  EXPECT_NE(out.find("1 expires"), std::string::npos) << out;
}

}  // namespace
}  // namespace prefixd::persist
