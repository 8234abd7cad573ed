// store::Keyspace: types, per-slot counts, SCAN cursors that survive changes between calls, the
// expiry order, the cross-shard victim under each policy, its memory figure, and multi-key puts
// across shards (whole, serialised per key, no deadlock).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/key_slot.h"
#include "store/keyspace.h"

namespace prefixd::store {
namespace {

std::string Key(int i) { return "key:" + std::to_string(i); }

TEST(KeyspaceDirectory, TypesSlotsAndMemory) {
  Keyspace keys;
  std::map<uint16_t, int> per_slot;
  for (int i = 0; i < 1000; ++i) {
    keys.Set(Key(i), i % 3 == 0 ? KeyType::kVstore : KeyType::kSsmPrefix);
    per_slot[KeySlot(Key(i))] += 1;
  }
  EXPECT_EQ(keys.size(), 1000u);
  EXPECT_EQ(keys.Find(Key(3))->type, KeyType::kVstore);
  EXPECT_EQ(keys.Find(Key(4))->type, KeyType::kSsmPrefix);
  EXPECT_FALSE(keys.Find("missing"));
  for (const auto& [slot, n] : per_slot) EXPECT_EQ(keys.CountInSlot(slot), uint64_t(n));
  // A 32-byte chunk (the 23-byte header and a key of 5 to 7 bytes) and 40 bytes of bucket,
  // index node and handle slot.
  EXPECT_EQ(keys.MemoryBytes(), 1000u * 72);
  ASSERT_TRUE(keys.SetExpiry(Key(1), 5000, {}));
  EXPECT_FALSE(keys.SetExpiry("missing", 5000, {}));
  for (int i = 0; i < 500; ++i) {
    keys.Remove(Key(i));
    per_slot[KeySlot(Key(i))] -= 1;
  }
  for (const auto& [slot, n] : per_slot) EXPECT_EQ(keys.CountInSlot(slot), uint64_t(n));
  keys.Clear();
  EXPECT_EQ(keys.size(), 0u);
  EXPECT_EQ(keys.MemoryBytes(), 0u);
  EXPECT_EQ(keys.CountInSlot(KeySlot(Key(700))), 0u);
  EXPECT_EQ(KeyTypeName(KeyType::kKvPrefix), "kvprefix");
  EXPECT_EQ(KeyTypeFromName("SSM-Prefix"), KeyType::kSsmPrefix);
  EXPECT_EQ(KeyTypeFromName("STRING"), KeyType::kString);
  EXPECT_EQ(KeyTypeFromName("List"), KeyType::kList);
  EXPECT_EQ(KeyTypeFromName("set"), KeyType::kSet);
  EXPECT_EQ(KeyTypeFromName("Hash"), KeyType::kHash);
  EXPECT_EQ(KeyTypeName(KeyType::kHash), "hash");
  EXPECT_EQ(KeyTypeFromName("ZSet"), KeyType::kZset);
  EXPECT_EQ(KeyTypeName(KeyType::kZset), "zset");
  EXPECT_FALSE(KeyTypeFromName("nosuch"));
  EXPECT_FALSE(KeyTypeFromName("none"));
  EXPECT_EQ(KeyTypeFromName("Stream"), KeyType::kStream);
  EXPECT_EQ(KeyTypeName(KeyType::kStream), "stream");
  // A value no type has names "none" and is no known type.
  EXPECT_EQ(KeyTypeName(static_cast<KeyType>(kKeyTypeCount)), "none");
  EXPECT_FALSE(KnownKeyType(kKeyTypeCount));
  EXPECT_TRUE(KnownKeyType(static_cast<size_t>(KeyType::kZset)));
  EXPECT_TRUE(KnownKeyType(static_cast<size_t>(KeyType::kStream)));
}

TEST(KeyspaceDirectory, StringsHoldTheirValueAndExpiry) {
  Keyspace keys;
  int hooks = 0;
  const auto hook = [&] { ++hooks; };
  keys.PutString("s", Bytes::CopyCompact("v1"), StringEncoding::kEmbstr, KeepTtl::kNo, 9000, hook);
  EXPECT_EQ(keys.Find("s")->type, KeyType::kString);
  EXPECT_EQ(keys.Find("s")->value.view(), "v1");
  EXPECT_EQ(keys.Find("s")->expire_at_ms, 9000);
  const uint64_t with_small = keys.MemoryBytes();
  // KEEPTTL keeps the expiry; a plain write replaces it (0: none).
  keys.PutString("s", Bytes::CopyCompact("12"), StringEncoding::kInt, KeepTtl::kYes, 0, hook);
  EXPECT_EQ(keys.Find("s")->expire_at_ms, 9000);
  EXPECT_EQ(keys.Find("s")->encoding, StringEncoding::kInt);
  keys.PutString("s", Bytes::Allocate(1 << 20), StringEncoding::kRaw, KeepTtl::kNo, 0, hook);
  EXPECT_EQ(keys.Find("s")->expire_at_ms, 0);
  EXPECT_GE(keys.MemoryBytes(), with_small + (1 << 20) - 200);  // less the expiry's bytes
  EXPECT_EQ(keys.Expired(Keyspace::ShardOf("s"), 10000, 10).size(), 0u);
  // Other types' syncs leave a string alone; RemoveString removes only strings.
  keys.Sync("s", [] { return std::nullopt; });
  EXPECT_TRUE(keys.Find("s"));
  keys.Set("ssm", KeyType::kSsmPrefix);
  EXPECT_FALSE(keys.RemoveString("ssm", hook));
  EXPECT_TRUE(keys.RemoveString("s", hook));
  EXPECT_FALSE(keys.RemoveString("s", hook));
  EXPECT_EQ(hooks, 4);
  keys.Remove("ssm");
  EXPECT_EQ(keys.MemoryBytes(), 0u);
  EXPECT_EQ(EncodingOf("123"), StringEncoding::kInt);
  EXPECT_EQ(EncodingOf("-0"), StringEncoding::kEmbstr);
  EXPECT_EQ(EncodingOf("01"), StringEncoding::kEmbstr);
  EXPECT_EQ(EncodingOf(std::string(44, 'a')), StringEncoding::kEmbstr);
  EXPECT_EQ(EncodingOf(std::string(45, 'a')), StringEncoding::kRaw);
  EXPECT_EQ(StringEncodingName(StringEncoding::kEmbstr), "embstr");
}

// A multi-key put holds every shard it touches while its hook runs (the log append) and its values
// go in. Multi-key writers list keys of 24 shards in opposite orders, single-key writers put the
// same keys one by one, and every hook appends to the plain per-key logs of the keys it changes:
// nothing deadlocks (shards are locked in one order), no two hooks of one key overlap (a data
// race under TSan otherwise, and lost entries), and each key ends with the value its log has last.
TEST(KeyspaceDirectory, MultiKeyPutsAcrossShardsAreWholeAndNeverDeadlock) {
  Keyspace keys;
  std::vector<std::string> names;
  std::set<size_t> shards;
  for (int i = 0; shards.size() < 24; ++i) {
    if (shards.insert(Keyspace::ShardOf(Key(i))).second) names.push_back(Key(i));
  }
  constexpr int kRounds = 1000;
  // Written by hooks only, under the key's shard lock.
  std::vector<std::vector<std::string>> logs(names.size());
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int round = 0; round < kRounds; ++round) {
        const std::string value = std::to_string(w) + ":" + std::to_string(round);
        if (w >= 2) {  // single-key writers
          for (size_t k = 0; k < names.size(); ++k) {
            keys.PutString(names[k], Bytes::CopyCompact(value), StringEncoding::kEmbstr,
                           KeepTtl::kNo, 0, [&] { logs[k].push_back(value); });
          }
          continue;
        }
        std::vector<Keyspace::StringPut> puts;
        for (size_t k = 0; k < names.size(); ++k) {
          const std::string& name = w == 1 ? names[names.size() - 1 - k] : names[k];
          puts.push_back({name, Bytes::CopyCompact(value), StringEncoding::kEmbstr});
        }
        ASSERT_TRUE(keys.PutStrings(puts, [&] {
          for (auto& log : logs) log.push_back(value);
        }));
      }
    });
  }
  for (std::thread& t : writers) t.join();
  for (size_t k = 0; k < names.size(); ++k) {
    ASSERT_EQ(logs[k].size(), size_t{4 * kRounds}) << names[k];
    EXPECT_EQ(keys.Find(names[k])->value.view(), logs[k].back()) << names[k];
  }
  EXPECT_EQ(keys.size(), names.size());
}

// GET's one-hold read gives only a live, hot string held in its entry; everything else goes
// the general way (kOther), which expires, reads from disk or answers -WRONGTYPE, and the value
// is not given then.
TEST(KeyspaceDirectory, ReadInlineStringTakesOnlyLiveSmallStrings) {
  Keyspace keys;
  std::string out = "stale";
  int given = 0;
  const auto copy = [&](std::string_view value) {
    out.assign(value);
    ++given;
  };
  EXPECT_EQ(keys.ReadInlineString("none", 1000, copy), Keyspace::InlineRead::kMissing);
  EXPECT_EQ(given, 0);
  const std::string largest(KeyEntry::kInlineValueBelow - 1, 'i');
  keys.PutString("s", Bytes::CopyCompact(largest), StringEncoding::kRaw, KeepTtl::kNo, 0, {});
  EXPECT_EQ(keys.ReadInlineString("s", 1000, copy), Keyspace::InlineRead::kCopied);
  EXPECT_EQ(out, largest);
  keys.PutString("s", Bytes::CopyCompact(""), StringEncoding::kEmbstr, KeepTtl::kNo, 0, {});
  EXPECT_EQ(keys.ReadInlineString("s", 1000, copy), Keyspace::InlineRead::kCopied);
  EXPECT_EQ(out, "");
  EXPECT_EQ(given, 2);
  // The expiry: live until its millisecond, due at it.
  keys.PutString("e", Bytes::CopyCompact("v"), StringEncoding::kEmbstr, KeepTtl::kNo, 5000, {});
  EXPECT_EQ(keys.ReadInlineString("e", 4999, copy), Keyspace::InlineRead::kCopied);
  EXPECT_EQ(out, "v");
  EXPECT_EQ(keys.ReadInlineString("e", 5000, copy), Keyspace::InlineRead::kOther);
  EXPECT_TRUE(keys.Find("e"));  // left for the general path to expire and log
  // A value from the inline limit on lives in its own buffer; another type is not a string.
  keys.PutString("big", Bytes::CopyCompact(std::string(KeyEntry::kInlineValueBelow, 'b')),
                 StringEncoding::kRaw, KeepTtl::kNo, 0, {});
  EXPECT_EQ(keys.ReadInlineString("big", 1000, copy), Keyspace::InlineRead::kOther);
  keys.Set("ssm", KeyType::kSsmPrefix);
  EXPECT_EQ(keys.ReadInlineString("ssm", 1000, copy), Keyspace::InlineRead::kOther);
  EXPECT_EQ(given, 3);
}

// The keyspace remembers the last key it hashed on each thread: a buffer rewritten in place with
// another key of the same length, keys at the remembered length's limit and one past it, and keys
// differing in their last byte must each find their own entry.
TEST(KeyspaceDirectory, KeysHashedOneAfterAnotherFindTheirOwnEntries) {
  Keyspace keys;
  std::string buffer = "key:a";
  keys.Set(buffer, KeyType::kString);
  buffer[4] = 'b';  // same address and length, another key
  EXPECT_FALSE(keys.Find(buffer));
  keys.Set(buffer, KeyType::kSet);
  buffer[4] = 'a';
  EXPECT_EQ(keys.Find(buffer)->type, KeyType::kString);
  for (size_t length : {size_t{63}, size_t{64}, size_t{65}}) {
    const std::string one(length, 'x'), other = std::string(length - 1, 'x') + "y";
    keys.Set(one, KeyType::kList);
    EXPECT_FALSE(keys.Find(other)) << length;
    keys.Set(other, KeyType::kHash);
    EXPECT_EQ(keys.Find(one)->type, KeyType::kList) << length;
    EXPECT_EQ(keys.Find(other)->type, KeyType::kHash) << length;
    EXPECT_EQ(keys.CountInSlot(KeySlot(one)) + keys.CountInSlot(KeySlot(other)),
              KeySlot(one) == KeySlot(other) ? 4u : 2u);
    keys.Remove(one);
    keys.Remove(other);
  }
  EXPECT_EQ(keys.size(), 2u);
}

TEST(KeyspaceDirectory, ScanReturnsEveryKeyPresentThroughoutExactlyOnce) {
  Keyspace keys;
  for (int i = 0; i < 2000; ++i) keys.Set(Key(i), KeyType::kSsmPrefix);
  std::multiset<std::string> seen;
  uint64_t cursor = 0;
  int step = 0;
  do {
    cursor =
        keys.Scan(cursor, 3, [&](const std::string& key, const KeyInfo&) { seen.insert(key); });
    // Changes between calls: keys come and go, none of the first 2000 is removed.
    keys.Set("new:" + std::to_string(step), KeyType::kVstore);
    keys.Remove("new:" + std::to_string(step / 2));
    ASSERT_LT(++step, 5000);
  } while (cursor != 0);
  for (int i = 0; i < 2000; ++i) EXPECT_EQ(seen.count(Key(i)), 1u) << Key(i);
}

TEST(KeyspaceDirectory, ExpiredKeysComeEarliestFirst) {
  Keyspace keys;
  for (int i = 0; i < 64 * 4; ++i) {
    keys.Set(Key(i), KeyType::kSsmPrefix);
    ASSERT_TRUE(keys.SetExpiry(Key(i), 1000 + i, {}));
  }
  ASSERT_TRUE(keys.SetExpiry(Key(0), 0, {}));  // PERSIST
  size_t total = 0;
  for (size_t shard = 0; shard < Keyspace::kShardCount; ++shard) {
    auto expired = keys.Expired(shard, 1100, 1000);
    for (size_t i = 1; i < expired.size(); ++i) {
      EXPECT_LT(keys.Find(expired[i - 1].first)->expire_at_ms,
                keys.Find(expired[i].first)->expire_at_ms);
    }
    total += expired.size();
  }
  EXPECT_EQ(total, 100u);  // 1001 .. 1100
  EXPECT_EQ(keys.Stats(1100).volatile_keys, 64u * 4 - 1);
}

TEST(KeyspaceDirectory, PickVictimFollowsThePolicyAcrossShards) {
  Keyspace keys;
  EXPECT_FALSE(keys.PickVictim(EvictionPolicy::kAllKeysLru));
  for (int i = 0; i < 200; ++i) keys.Set(Key(i), KeyType::kSsmPrefix);
  for (int i = 0; i < 200; ++i) {
    if (i != 17) keys.Touch(Key(i));
  }
  EXPECT_FALSE(keys.PickVictim(EvictionPolicy::kNoEviction));
  EXPECT_EQ(keys.PickVictim(EvictionPolicy::kAllKeysLru)->first, Key(17));
  EXPECT_FALSE(keys.PickVictim(EvictionPolicy::kVolatileLru));
  EXPECT_FALSE(keys.PickVictim(EvictionPolicy::kVolatileTtl));
  ASSERT_TRUE(keys.SetExpiry(Key(150), 9000, {}));
  ASSERT_TRUE(keys.SetExpiry(Key(20), 8000, {}));
  EXPECT_EQ(keys.PickVictim(EvictionPolicy::kVolatileTtl)->first, Key(20));
  EXPECT_EQ(keys.PickVictim(EvictionPolicy::kVolatileLru)->first, Key(20));
  const std::string random = keys.PickVictim(EvictionPolicy::kVolatileRandom)->first;
  EXPECT_TRUE(random == Key(20) || random == Key(150));
  // LFU: every key but one was touched once more.
  for (int i = 0; i < 200; ++i) {
    if (i != 42) keys.Touch(Key(i));
  }
  EXPECT_EQ(keys.PickVictim(EvictionPolicy::kAllKeysLfu)->first, Key(42));
  EXPECT_TRUE(keys.PickVictim(EvictionPolicy::kAllKeysRandom));
}

}  // namespace
}  // namespace prefixd::store
