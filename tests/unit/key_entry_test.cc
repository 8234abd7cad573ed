// store::KeyEntry and the keyspace over it: a small string value inline in the entry's one chunk
// up to the threshold and its own buffer from it on, moves across it both ways with the key,
// bits and handle kept, and the accounted bytes per small entry that docs/benchmarks.md reports.
#include "store/key_entry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "store/keyspace.h"

namespace prefixd::store {
namespace {

constexpr size_t kThreshold = KeyEntry::kInlineValueBelow;

// One entry with its own SmallChunks, as a keyspace shard holds it.
struct EntryHolder {
  EntryHolder(uint64_t hash, std::string_view key, KeyType type, uint32_t handle)
      : entry(KeyEntry::Make(chunks, hash, key, type, handle)) {}
  ~EntryHolder() { KeyEntry::Destroy(entry); }
  // Gives the entry `value` as the keyspace does: a moved entry replaces the old one.
  void Put(const std::string& value) {
    Bytes released;
    KeyEntry* placed = KeyEntry::WithValue(chunks, entry, Bytes::CopyOf(value), released);
    if (placed != entry) KeyEntry::Destroy(std::exchange(entry, placed));
  }
  SmallChunks chunks;
  KeyEntry* entry;
};

TEST(KeyEntry, HeaderBitsAndKeySurviveEveryValueSize) {
  const uint64_t hash = (uint64_t{1} << KeyEntry::kHashBits) - 3;
  // Up to 254 bytes a key's size is one header byte; from 255 on it takes 4 more.
  for (const size_t key_size : {size_t{13}, size_t{254}, size_t{255}, size_t{300}, size_t{70000}}) {
    std::string key(key_size, 'k');
    key.back() = static_cast<char>('0' + key_size % 10);
    EntryHolder h(hash, key, KeyType::kString, 77);
    h.entry->set_encoding(StringEncoding::kEmbstr);
    h.entry->set_cold(true);
    for (size_t size : {size_t{0}, size_t{1}, size_t{28}, size_t{64}, size_t{200}, kThreshold - 1,
                        kThreshold, kThreshold + 1, size_t{1} << 20, size_t{5}, size_t{0}}) {
      const std::string value(size, static_cast<char>('a' + size % 26));
      h.Put(value);
      EXPECT_EQ(h.entry->Value(), value) << size;
      EXPECT_EQ(h.entry->ValueCopy().view(), value) << size;
      EXPECT_EQ(h.entry->value_inline(), size < kThreshold) << size;
      EXPECT_EQ(h.entry->Hash(), hash);
      EXPECT_EQ(h.entry->Key(), key) << key_size;
      EXPECT_EQ(h.entry->type(), KeyType::kString);
      EXPECT_EQ(h.entry->encoding(), StringEncoding::kEmbstr);
      EXPECT_TRUE(h.entry->cold());
      EXPECT_EQ(h.entry->handle, 77u);
      EXPECT_EQ(h.entry->ValueBytes(), size < kThreshold ? size : h.entry->ExternalBytes());
      const size_t key_bytes = 23 + key_size + (key_size < 255 ? 0 : 4);
      if (size < kThreshold) {
        EXPECT_EQ(h.entry->ChunkBytes(), KeyEntry::ChunkBytesFor(key_bytes + size)) << size;
      }
    }
  }
}

TEST(KeyEntry, ASmallValueIsInlineInOneChunk) {
  EntryHolder h(1, "sess:00000001", KeyType::kString, 0);
  h.Put(std::string(28, 'm'));            // LMCache's metadata value
  EXPECT_EQ(h.entry->ChunkBytes(), 64u);  // 23 + 13 + 28 = 64 bytes asked
  EXPECT_EQ(h.entry->ExternalBytes(), 0u);
  EXPECT_EQ(h.chunks.pages(), 2u);  // one page per class: the empty entry's 40, then 64
  h.Put(std::string(64, 'v'));
  EXPECT_EQ(h.entry->ChunkBytes(), 104u);  // 23 + 13 + 64 = 100
  // A value of the same size class is written in place, one longer than the first too.
  const KeyEntry* before = h.entry;
  h.Put(std::string(62, 'w'));
  EXPECT_EQ(h.entry, before);
  EXPECT_EQ(h.entry->Value(), std::string(62, 'w'));
  h.Put(std::string(68, 'u'));
  EXPECT_EQ(h.entry, before);
  EXPECT_EQ(h.entry->Value(), std::string(68, 'u'));
  EXPECT_EQ(h.entry->ChunkBytes(), 104u);
  // The largest chunk SmallChunks holds, and the first that malloc does.
  h.Put(std::string(SmallChunks::kLargest - 36, 'l'));
  EXPECT_EQ(h.entry->ChunkBytes(), SmallChunks::kLargest);
  h.Put(std::string(SmallChunks::kLargest - 35, 'l'));
  EXPECT_EQ(h.entry->ChunkBytes(), MallocChunkBytes(SmallChunks::kLargest + 1));
  EXPECT_EQ(h.entry->Value(), std::string(SmallChunks::kLargest - 35, 'l'));
  // The largest inline value and the first external one.
  h.Put(std::string(kThreshold - 1, 'x'));
  EXPECT_EQ(h.entry->ChunkBytes(), MallocChunkBytes(23 + 13 + kThreshold - 1));
  h.Put(std::string(kThreshold, 'y'));
  // The key padded to 8, the buffer handle and its place on disk, in SmallChunks again.
  EXPECT_EQ(h.entry->ChunkBytes(), 40 + sizeof(Bytes) + sizeof(StringPlace));
  EXPECT_GE(h.entry->ExternalBytes(), kThreshold);
  // A large buffer is shared with the copy (a reply by reference), not copied.
  EXPECT_EQ(h.entry->ValueCopy().data(), reinterpret_cast<const uint8_t*>(h.entry->Value().data()));
}

TEST(KeyEntry, AnEmptyKeyAndValueStillMakeAnEntry) {
  EntryHolder h(0, "", KeyType::kString, 1);
  EXPECT_EQ(h.entry->Key(), "");
  EXPECT_EQ(h.entry->Value(), "");
  EXPECT_EQ(h.entry->ChunkBytes(), sizeof(KeyEntry));
  h.Put(std::string(kThreshold, 'z'));
  EXPECT_EQ(h.entry->Key(), "");
  EXPECT_EQ(h.entry->Value().size(), kThreshold);
}

std::string Key(int i) {
  std::string key = "sess:" + std::to_string(100000000 + i).substr(1);  // 13 bytes
  return key;
}

// The accounted cost of a small string entry: the gain over the old layout (168 bytes before
// the value's own 64-byte chunk) must not regress silently.
TEST(KeyEntry, ASmallStringCostsAtMostItsChunkAndFortyBytes) {
  for (const size_t value_size : {size_t{28}, size_t{64}}) {
    Keyspace keys;
    constexpr int kCount = 10000;
    for (int i = 0; i < kCount; ++i) {
      keys.PutString(Key(i), Bytes::CopyCompact(std::string(value_size, 'v')),
                     StringEncoding::kEmbstr, KeepTtl::kNo, 0, {});
    }
    ASSERT_EQ(Key(0).size(), 13u);
    const uint64_t per_entry = keys.MemoryBytes() / kCount;
    // The chunk (64 or 104), a bucket slot (8), the 24-byte index node, the handle's slot (8).
    EXPECT_EQ(per_entry, SmallChunks::SlotBytes(23 + 13 + value_size) + 40) << value_size;
    EXPECT_LE(per_entry, value_size == 28 ? 104u : 144u);
    EXPECT_EQ(keys.EntryMemory(Key(0)), per_entry);
    keys.Clear();
    EXPECT_EQ(keys.MemoryBytes(), 0u);
  }
}

TEST(KeyEntry, AStringMovedAcrossTheThresholdKeepsItsPlaces) {
  Keyspace keys;
  const auto put = [&](const std::string& key, size_t size, KeepTtl keep, int64_t at) {
    keys.PutString(key, Bytes::CopyOf(std::string(size, 's')), StringEncoding::kRaw, keep, at, {});
  };
  for (int i = 0; i < 100; ++i) put(Key(i), 10, KeepTtl::kNo, 0);
  put("moving", 10, KeepTtl::kNo, 5000);
  const uint64_t small = keys.MemoryBytes();
  // Grows into its own buffer, then back inline, each time into a fresh chunk.
  put("moving", kThreshold, KeepTtl::kYes, 0);
  EXPECT_EQ(keys.Find("moving")->value.size(), kThreshold);
  EXPECT_EQ(keys.Find("moving")->expire_at_ms, 5000);
  EXPECT_GT(keys.MemoryBytes(), small + kThreshold);
  put("moving", kThreshold - 1, KeepTtl::kYes, 0);
  EXPECT_EQ(keys.Find("moving")->value.view(), std::string(kThreshold - 1, 's'));
  put("moving", 10, KeepTtl::kYes, 0);
  EXPECT_EQ(keys.MemoryBytes(), small);
  // The index still names the moved entry: active expiry, a victim pick, SCAN.
  const auto due = keys.Expired(Keyspace::ShardOf("moving"), 6000, 10);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].first, "moving");
  keys.FindAndTouch("moving", 0);
  for (int i = 0; i < 100; ++i) keys.Touch(Key(i));
  const auto victim = keys.PickVictim(EvictionPolicy::kVolatileLru);
  ASSERT_TRUE(victim);
  EXPECT_EQ(victim->first, "moving");
  size_t seen = 0;
  uint64_t cursor = 0;
  do {
    cursor = keys.Scan(cursor, 7, [&](const std::string&, const KeyInfo& info) {
      ++seen;
      EXPECT_TRUE(info.value.empty());  // SCAN copies no values
    });
  } while (cursor != 0);
  EXPECT_EQ(seen, 101u);
  // A string that becomes another type drops its value.
  keys.Set("moving", KeyType::kSsmPrefix);
  EXPECT_TRUE(keys.Find("moving")->value.empty());
  EXPECT_EQ(keys.Stats(0).string_bytes, 100u * 10);
  keys.Remove("moving");
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(keys.RemoveString(Key(i), {}));
  EXPECT_EQ(keys.MemoryBytes(), 0u);
  EXPECT_EQ(keys.Stats(0).string_bytes, 0u);
}

TEST(KeyEntry, HandlesInManyChunksNameTheirEntriesThroughMovesAndAClear) {
  // 700 keys a shard on average: each shard's index and handle table span several chunks.
  constexpr int kCount = 64 * 700;
  Keyspace keys;
  const auto put = [&](int i, size_t size) {
    keys.PutString(Key(i), Bytes::CopyOf(std::string(size, 'a' + i % 26)), StringEncoding::kRaw,
                   KeepTtl::kNo, 100000 + i, {});
  };
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < kCount; ++i) put(i, 10);
    // Every third entry moves to a fresh chunk twice (out to its own buffer, back inline): the
    // table must follow it.
    for (int i = 0; i < kCount; i += 3) put(i, kThreshold);
    for (int i = 0; i < kCount; i += 3) put(i, 20);
    for (int i = 1; i < kCount; i += 3) EXPECT_TRUE(keys.RemoveString(Key(i), {}));
    // The earliest deadlines of one shard, each named by the entry its handle points at.
    const size_t shard = Keyspace::ShardOf(Key(kCount - 1));
    std::vector<std::string> expected;
    for (int i = 0; i < kCount; ++i) {
      if (i % 3 != 1 && Keyspace::ShardOf(Key(i)) == shard) expected.push_back(Key(i));
    }
    ASSERT_GT(expected.size(), EvictionIndex::kHandlesPerChunk);
    const auto due = keys.Expired(shard, 100000 + kCount, expected.size() + 10);
    ASSERT_EQ(due.size(), expected.size());
    for (size_t k = 0; k < due.size(); ++k) EXPECT_EQ(due[k].first, expected[k]) << k;
    // The policy's victim is the earliest deadline of all: key 0.
    const auto victim = keys.PickVictim(EvictionPolicy::kVolatileTtl);
    ASSERT_TRUE(victim);
    EXPECT_EQ(victim->first, Key(0));
    static_assert((kCount - 2) % 3 == 2);  // never moved
    EXPECT_EQ(keys.Find(Key(kCount - 2))->value.view(), std::string(10, 'a' + (kCount - 2) % 26));
    EXPECT_EQ(keys.Find(Key(0))->value.size(), 20u);
    // A clear drops the tables; the second round fills them again from reused handles.
    keys.Clear();
    EXPECT_EQ(keys.MemoryBytes(), 0u);
  }
}

TEST(KeyEntry, AKeyPutTwiceInOneMultiPutEndsWithItsLastValue) {
  // MSET k <v1> k <v2> over a live k: the checks find k's entry once for both puts, and the first
  // put moves it to a fresh chunk (inline to its own buffer, or back). The second must look k up
  // again, not write into the freed chunk (ASan would see that).
  const std::string big(kThreshold + 100, 'B'), small(30, 's');
  for (const bool big_first : {true, false}) {
    Keyspace keys, expected;
    const std::string& first = big_first ? big : small;
    const std::string& last = big_first ? small : big;
    for (Keyspace* k : {&keys, &expected}) {
      k->PutString("other", Bytes::CopyOf(std::string(12, 'o')), StringEncoding::kRaw, KeepTtl::kNo,
                   0, {});
      k->PutString("k", Bytes::CopyOf(std::string(10, 'v')), StringEncoding::kRaw, KeepTtl::kNo, 0,
                   {});
    }
    std::vector<Keyspace::StringPut> puts(3);
    puts[0] = {"k", Bytes::CopyOf(first)};
    puts[1] = {"other", Bytes::CopyOf(std::string(13, 'p'))};
    puts[2] = {"k", Bytes::CopyOf(last)};
    ASSERT_TRUE(keys.PutStrings(puts, {}, /*only_over_live_at_ms=*/1));
    EXPECT_EQ(keys.Find("k")->value.view(), last);
    EXPECT_EQ(keys.Find("other")->value.view(), std::string(13, 'p'));
    // Accounted as if k had only ever held its last value.
    expected.PutString("k", Bytes::CopyOf(last), StringEncoding::kRaw, KeepTtl::kNo, 0, {});
    expected.PutString("other", Bytes::CopyOf(std::string(13, 'p')), StringEncoding::kRaw,
                       KeepTtl::kNo, 0, {});
    EXPECT_EQ(keys.MemoryBytes(), expected.MemoryBytes());
    EXPECT_EQ(keys.Stats(0).string_bytes, expected.Stats(0).string_bytes);
  }
}

}  // namespace
}  // namespace prefixd::store
