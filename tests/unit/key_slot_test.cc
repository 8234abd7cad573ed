// Hash slots against values read from a real redis-server 7.0.15 with cluster-enabled yes
// (CLUSTER KEYSLOT), including hash-tag edge cases and binary keys.
#include "common/key_slot.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace prefixd {
namespace {

using namespace std::string_literals;

TEST(KeySlotTest, Crc16IsXmodem) {
  EXPECT_EQ(Crc16Xmodem("123456789"), 0x31C3);  // the XMODEM check value
  EXPECT_EQ(Crc16Xmodem(""), 0);
}

// The eight-bytes-at-a-time CRC against the definition, bit by bit, at every length around the
// eight-byte step.
TEST(KeySlotTest, Crc16MatchesTheBitwiseDefinitionAtEveryLength) {
  auto bitwise = [](const std::string& data) {
    uint16_t crc = 0;
    for (unsigned char c : data) {
      crc ^= static_cast<uint16_t>(c << 8);
      for (int bit = 0; bit < 8; ++bit) {
        crc = static_cast<uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
      }
    }
    return crc;
  };
  std::mt19937 rng(3);
  for (size_t length = 0; length <= 70; ++length) {
    for (int sample = 0; sample < 20; ++sample) {
      std::string data(length, '\0');
      for (char& c : data) c = static_cast<char>(rng());
      ASSERT_EQ(Crc16Xmodem(data), bitwise(data)) << "length " << length;
    }
  }
}

TEST(KeySlotTest, MatchesRedisClusterKeyslot) {
  struct Case {
    std::string key;
    uint16_t slot;
  };
  const Case cases[] = {
      {"", 0},
      {"a", 15495},
      {"somekey", 11058},
      {"foo{hash_tag}", 2515},
      {"123456789", 12739},
      {"{user1000}.following", 3443},
      {"{user1000}.followers", 3443},
      {"foo{}{bar}", 8363},     // empty first tag: the whole key
      {"foo{{bar}}zap", 4015},  // tag "{bar"
      {"foo{bar}{zap}", 5061},  // first tag only
      {"{", 4092},
      {"}", 12090},
      {"{}", 15257},
      {"{a", 10276},
      {"a}", 5921},
      {"}{a}", 15495},  // a '}' before the '{' does not close it
      {"x{y}", 12222},
      {"{{}}", 4092},  // tag "{"
      {"{\0}"s, 0},    // a NUL tag byte
      {"\0"s, 0},
      {"\xff\xfe\x80", 11813},
      {"key:\r\n", 577},
      {"{a}{b}", 15495},
      {"a{b}c{d}", 3300},
      {"ssm:sess:0001", 1822},
      {std::string(1000, 'K'), 7637},
      {"{K" + std::string(300, 'x') + "}", 10667},
      {"\xff{\xff}\xff", 7920},
  };
  for (const auto& c : cases) EXPECT_EQ(KeySlot(c.key), c.slot) << c.key;
}

TEST(KeySlotTest, TenThousandKeysMatchRedis) {
  // The same keys were sent to CLUSTER KEYSLOT; these are the sums Redis's answers gave.
  uint64_t weighted = 0, sum = 0;
  for (int i = 0; i < 10000; ++i) {
    std::string key = "key:" + std::to_string(i);
    if (i % 3 == 1) key = "{t" + std::to_string(i % 97) + "}x";
    if (i % 5 == 2) {
      key.clear();
      for (int j = 0; j < i % 23; ++j) key.push_back(char((i * 7 + j * 13) & 255));
    }
    const uint16_t slot = KeySlot(key);
    weighted += uint64_t(i + 1) * slot;
    sum += slot;
  }
  EXPECT_EQ(weighted, 411209569160u);
  EXPECT_EQ(sum, 82134939u);
}

TEST(KeySlotTest, HashTagOf) {
  EXPECT_EQ(HashTagOf("plain"), "plain");
  EXPECT_EQ(HashTagOf("a{b}c"), "b");
  EXPECT_EQ(HashTagOf("a{}c"), "a{}c");
  EXPECT_EQ(HashTagOf("a{b"), "a{b");
}

TEST(KeySlotTest, SlotsSpreadOverShards) {
  EXPECT_EQ(SlotsPerShard(64), 256u);
  EXPECT_EQ(ShardOfSlot(16383, 64), 63u);
  EXPECT_EQ(ShardOfSlot(64, 64), 0u);
  EXPECT_EQ(ShardOfSlot(12345, 1), 0u);
}

}  // namespace
}  // namespace prefixd
