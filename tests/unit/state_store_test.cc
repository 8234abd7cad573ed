// StateStore alone: values stored and returned bit for bit, MSTORE visible all at once to a
// concurrent MFETCH, drops with their counts, the under-lock hook (the durability log's place
// in the order of changes), the memory accounting back to zero, snapshot iteration, and the disk
// tier's rules (a session leaves memory only once every value is placed and durable; places
// are taken only by the buffer they were made for; ranged cold reads; promotion).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "store/key_entry.h"
#include "store/state_store.h"

namespace prefixd::store {
namespace {

Bytes B(std::string_view s) { return Bytes::CopyOf(s); }

// A file image in memory: the store sees only ColdFile, whose real implementation (persist)
// the integration tests drive through the server.
class ImageFile : public ColdFile {
 public:
  explicit ImageFile(std::string image) : image_(std::move(image)) {}
  bool Read(uint64_t offset, uint64_t length, Bytes& out, std::string& error) const override {
    reads += 1, bytes_read += length;
    if (offset + length > image_.size()) return (error = "past the end"), false;
    out = Bytes::CopyOf(std::string_view(image_).substr(offset, length));
    return true;
  }
  mutable int reads = 0;
  mutable uint64_t bytes_read = 0;

 private:
  std::string image_;
};

TEST(StateStoreTest, StoresAndReturnsValuesBitForBit) {
  StateStore store(4);
  const std::string binary("\0\r\n\xff", 4);
  store.Put(std::string("s\0id", 4), 7, B(binary));
  auto value = store.Get(std::string("s\0id", 4), 7);
  ASSERT_TRUE(value.has_value());
  EXPECT_EQ(value->view(), binary);
  EXPECT_FALSE(store.Get("sid", 7).has_value()) << "sids compared only up to a NUL";
  EXPECT_FALSE(store.Get(std::string("s\0id", 4), 8).has_value());
  store.Put(std::string("s\0id", 4), 7, B("new"));
  EXPECT_EQ(store.Get(std::string("s\0id", 4), 7)->view(), "new");
}

TEST(StateStoreTest, LayersAreListedInOrderAndDropsCountWhatTheyRemoved) {
  StateStore store(4);
  store.PutMany("s", {{9, B("nine")}, {0, B("")}, {3, B("333")}});
  const auto layers = store.Layers("s");
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[0].layer, 0u);
  EXPECT_EQ(layers[1].layer, 3u);
  EXPECT_EQ(layers[1].size, 3u);
  EXPECT_EQ(layers[2].layer, 9u);
  EXPECT_EQ(store.Drop("s", 3), 1u);
  EXPECT_EQ(store.Drop("s", 3), 0u);
  EXPECT_EQ(store.DropSession("s"), 2u);
  EXPECT_EQ(store.DropSession("s"), 0u);
  EXPECT_TRUE(store.Layers("s").empty());
}

TEST(StateStoreTest, TheHookRunsUnderTheLockOnEveryChangeEvenADropOfNothing) {
  StateStore store(1);
  int calls = 0;
  std::vector<std::thread> readers;
  std::vector<std::unique_ptr<std::atomic<bool>>> done;
  auto hook = [&] {
    ++calls;
    // The shard lock is held: another thread's read of the same shard must wait for it.
    auto& read = *done.emplace_back(std::make_unique<std::atomic<bool>>(false));
    readers.emplace_back([&store, &read] {
      (void)store.Get("s", 0);
      read = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(read.load()) << "the hook ran without the shard lock";
  };
  store.Put("s", 0, B("x"), hook);
  store.Drop("absent", 1, hook);
  store.DropSession("absent", hook);
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(calls, 3);
}

TEST(StateStoreTest, AccountingFollowsEveryChangeBackToZero) {
  StateStore store(4);
  store.PutMany("a", {{0, B(std::string(1000, 'a'))}, {1, B(std::string(24, 'b'))}});
  store.Put("b", 0, B(std::string(500, 'c')));
  StoreStats s = store.Stats();
  EXPECT_EQ(s.sessions, 2u);
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.payload_bytes, 1524u);
  EXPECT_GT(s.overhead_bytes, 0u);
  store.Put("a", 0, B("x"));  // an overwrite replaces the size
  EXPECT_EQ(store.Stats().payload_bytes, 525u);
  store.Drop("a", 1);
  store.DropSession("b");
  store.Clear();
  s = store.Stats();
  EXPECT_EQ(s.sessions, 0u);
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.payload_bytes, 0u);
  EXPECT_EQ(s.overhead_bytes, 0u);
}

TEST(StateStoreTest, ForEachSessionVisitsEveryLayerOnce) {
  StateStore store(8);
  for (int i = 0; i < 50; ++i) store.PutMany("s" + std::to_string(i), {{0, B("a")}, {1, B("bb")}});
  size_t sessions = 0, bytes = 0;
  store.ForEachSession([&](const std::string&, const std::vector<std::pair<uint32_t, Bytes>>& l) {
    ++sessions;
    for (const auto& [layer, blob] : l) bytes += blob.size();
  });
  EXPECT_EQ(sessions, 50u);
  EXPECT_EQ(bytes, 150u);
}

TEST(StateStoreTest, AConcurrentMfetchSeesAnMstoreWholeOrNotAtAll) {
  StateStore store(4);
  std::atomic<bool> stop{false};
  std::atomic<int> mixed{0};
  std::thread reader([&] {
    const uint32_t layers[] = {0, 1, 2};
    while (!stop.load()) {
      auto values = store.GetMany("s", layers);
      std::string first = values[0] ? std::string(values[0]->view()) : "";
      for (const auto& v : values) {
        if ((v ? std::string(v->view()) : "") != first) ++mixed;
      }
    }
  });
  for (int i = 0; i < 20000; ++i) {
    const std::string v = std::to_string(i);
    store.PutMany("s", {{0, B(v)}, {1, B(v)}, {2, B(v)}});
  }
  stop = true;
  reader.join();
  EXPECT_EQ(mixed.load(), 0);
}

TEST(StateStoreTest, DiskTierSessionLeavesMemoryOnlyOnceDurableAndReadsBackWhole) {
  StateStore store(4);
  auto file = std::make_shared<ImageFile>("....hello world....layer-one");
  Bytes v0 = B("hello world"), v1 = B("layer-one");
  store.PutMany("s", {{0, v0}, {1, v1}});
  EXPECT_FALSE(store.MakeCold("s").ok) << "no value is placed on disk yet";
  store.Place("s", 0, v0.data(), file, 4);
  store.Place("s", 1, B("layer-one").data(), file, 19);  // another buffer: not this value's place
  EXPECT_FALSE(store.MakeCold("s").ok);
  store.Place("s", 1, v1.data(), file, 19);
  EXPECT_FALSE(store.MakeCold("s").ok) << "placed but not fsynced";
  file->MarkDurable(27);
  EXPECT_FALSE(store.MakeCold("s").ok) << "layer 1 ends at 28";
  file->MarkDurable(28);
  const ColdOutcome cold = store.MakeCold("s");
  ASSERT_TRUE(cold.ok);
  EXPECT_EQ(cold.freed, 20u);
  EXPECT_EQ(store.Stats().payload_bytes, 0u);
  EXPECT_EQ(store.Stats().cold_bytes, 20u);
  EXPECT_EQ(store.ColdBytes("s"), 20u);
  // Whole and bit-exact from the file; a range reads only its bytes.
  const uint32_t both[] = {0, 1};
  auto values = store.GetMany("s", both);
  EXPECT_EQ(values[0]->view(), "hello world");
  EXPECT_EQ(values[1]->view(), "layer-one");
  const uint64_t before = file->bytes_read;
  EXPECT_EQ(store.GetRange("s", 0, 6, 100)->view(), "world");
  EXPECT_EQ(file->bytes_read - before, 5u);
  EXPECT_EQ(store.Layers("s")[1].size, 9u);
  // Compaction moves a cold reference only from where it was.
  auto moved = std::make_shared<ImageFile>("layer-one");
  store.Repoint("s", 1, file.get(), 4, moved, 0);  // wrong old place: ignored
  EXPECT_EQ(store.Get("s", 1)->view(), "layer-one");
  store.Repoint("s", 1, file.get(), 19, moved, 0);
  EXPECT_EQ(store.Get("s", 1)->view(), "layer-one");
  EXPECT_GT(moved->reads, 0);
  // A write makes that layer hot; promotion reads the rest back.
  store.Put("s", 0, B("fresh"));
  EXPECT_EQ(store.ColdBytes("s"), 9u);
  EXPECT_TRUE(store.Promote("s"));
  EXPECT_EQ(store.ColdBytes("s"), 0u);
  EXPECT_EQ(store.Stats().cold_bytes, 0u);
  EXPECT_EQ(store.Get("s", 0)->view(), "fresh");
  EXPECT_EQ(store.Get("s", 1)->view(), "layer-one");
  EXPECT_EQ(store.Stats().payload_bytes, 14u);
  store.DropSession("s");
  EXPECT_EQ(store.Stats().entries, 0u);
  EXPECT_EQ(store.Stats().overhead_bytes, 0u);
}

TEST(StateStoreTest, FailedColdReadThrowsAndPutColdIsRecovery) {
  StateStore store(4);
  auto file = std::make_shared<ImageFile>("abc");
  store.PutCold("s", 3, 10, file, 0);
  EXPECT_TRUE(store.Contains("s"));
  EXPECT_EQ(store.Stats().cold_layers, 1u);
  EXPECT_THROW(store.Get("s", 3), std::runtime_error);
  store.Clear();
  EXPECT_EQ(store.Stats().cold_bytes, 0u);
  EXPECT_EQ(store.Stats().entries, 0u);
}

// A 13-byte session id, as benchmarks/entry_cost.py stores them.
std::string Sid(int i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "sess:%08d", i);
  return buf;
}

TEST(StateStoreTest, ASmallSessionCostsOneChunkAndABucketSlot) {
  StateStore store(4);
  constexpr int kCount = 10000;
  for (int i = 0; i < kCount; ++i) store.Put(Sid(i), 0, B(std::string(64, 'v')));
  ASSERT_EQ(Sid(0).size(), 13u);
  const StoreStats s = store.Stats();
  const uint64_t per_session = (s.payload_bytes + s.overhead_bytes) / kCount;
  // Link 8, sid size and layer count 8, the sid padded to 16, one 24-byte slot, the value: 120,
  // in a 120-byte SmallChunks slot (glibc's malloc would take 128).
  EXPECT_EQ(per_session, SmallChunks::SlotBytes(16 + 16 + 24 + 64) + 8);
  EXPECT_LE(per_session, 128u);
  EXPECT_EQ((s.payload_bytes + s.overhead_bytes) % kCount, 0u);
  EXPECT_EQ(store.SessionBytes(Sid(0)), per_session);
  // A large value keeps its buffer: a 40-byte handle in the chunk instead of its bytes.
  const Bytes large = B(std::string(1 << 20, 'L'));
  store.Put("large", 0, large);
  EXPECT_EQ(store.SessionBytes("large"),
            SmallChunks::SlotBytes(16 + 8 + 24 + 40) + 8 + large.capacity());
  // A session past SmallChunks's largest slot comes from malloc.
  for (uint32_t layer = 0; layer < 12; ++layer) store.Put("many", layer, B("x"));
  EXPECT_EQ(store.SessionBytes("many"), MallocChunkBytes(16 + 8 + 12 * (24 + 1)) + 8);
  EXPECT_EQ(store.Get("many", 11)->view(), "x");
  store.Clear();
  EXPECT_EQ(store.Stats().overhead_bytes, 0u);
}

TEST(StateStoreTest, AValueAtTheInlineLimitIsCopiedOneBytePastItIsShared) {
  StateStore store(2);
  const size_t limit = StateStore::kInlineValueMax;
  const Bytes at = B(std::string(limit, 'a')), past = B(std::string(limit + 1, 'p'));
  store.PutMany("s", {{0, at}, {1, past}});
  const auto got_at = store.Get("s", 0), got_past = store.Get("s", 1);
  EXPECT_EQ(got_at->view(), at.view());
  EXPECT_EQ(got_past->view(), past.view());
  EXPECT_FALSE(got_at->SharesStorage(at)) << "a small value lives in the session's chunk";
  EXPECT_TRUE(got_past->SharesStorage(past)) << "a large fetch must stay zero-copy";
  EXPECT_EQ(store.GetRange("s", 0, limit - 3, 10)->view(), "aaa");
  EXPECT_EQ(store.GetRange("s", 1, limit - 3, 10)->view(), "pppp");
  EXPECT_EQ(store.Stats().payload_bytes, 2 * limit + 1);
  // Each crosses the limit the other way, then back; in place when size and kind stay.
  const uint64_t both = store.Stats().payload_bytes + store.Stats().overhead_bytes;
  store.PutMany("s", {{0, B(std::string(limit + 1, 'A'))}, {1, B(std::string(limit, 'P'))}});
  EXPECT_EQ(store.Get("s", 0)->view(), std::string(limit + 1, 'A'));
  EXPECT_EQ(store.Get("s", 1)->view(), std::string(limit, 'P'));
  store.PutMany("s", {{0, B(std::string(limit, 'b'))}, {1, B(std::string(limit + 1, 'q'))}});
  store.Put("s", 0, B(std::string(limit, 'c')));
  EXPECT_EQ(store.Get("s", 0)->view(), std::string(limit, 'c'));
  EXPECT_EQ(store.Get("s", 1)->view(), std::string(limit + 1, 'q'));
  EXPECT_EQ(store.Stats().payload_bytes + store.Stats().overhead_bytes, both);
  EXPECT_EQ(store.SessionBytes("s"), both);
}

TEST(StateStoreTest, ASessionGrowsToManyLayersAndShrinksBackWithItsAccounting) {
  StateStore store(1);
  store.Put("other", 0, B("x"));
  const uint64_t base = store.Stats().payload_bytes + store.Stats().overhead_bytes;
  const auto value = [](uint32_t layer) {
    static const size_t sizes[] = {0, 1, StateStore::kInlineValueMax,
                                   StateStore::kInlineValueMax + 1, 5000};
    return std::string(sizes[layer % 5], static_cast<char>('a' + layer % 26));
  };
  constexpr uint32_t kLayers = 300;
  // Odd layers first, then the even ones between them, one by one and then all at once.
  for (uint32_t l = 1; l < kLayers; l += 2) store.Put("s", l, B(value(l)));
  std::vector<std::pair<uint32_t, Bytes>> evens;
  for (uint32_t l = 0; l < kLayers; l += 2) evens.emplace_back(l, B(value(l)));
  store.PutMany("s", std::move(evens));
  uint64_t payload = 0;
  const auto layers = store.Layers("s");
  ASSERT_EQ(layers.size(), kLayers);
  for (uint32_t l = 0; l < kLayers; ++l) {
    EXPECT_EQ(layers[l].layer, l);
    EXPECT_EQ(store.Get("s", l)->view(), value(l)) << l;
    payload += value(l).size();
  }
  EXPECT_EQ(store.Stats().entries, kLayers + 1);
  EXPECT_EQ(store.Stats().payload_bytes, payload + 1);
  const auto whole = store.ReadSession("s");
  ASSERT_TRUE(whole.has_value());
  ASSERT_EQ(whole->size(), kLayers);
  for (uint32_t l = 0; l < kLayers; ++l) EXPECT_EQ((*whole)[l].second.view(), value(l));
  for (uint32_t l = 0; l < kLayers; l += 3) EXPECT_EQ(store.Drop("s", l), 1u);
  for (uint32_t l = 0; l < kLayers; ++l) {
    EXPECT_EQ(store.Get("s", l).has_value(), l % 3 != 0) << l;
    if (l % 3 != 0) EXPECT_EQ(store.Get("s", l)->view(), value(l));
  }
  for (uint32_t l = 0; l < kLayers; ++l) store.Drop("s", l);
  EXPECT_FALSE(store.Contains("s"));
  EXPECT_EQ(store.Stats().sessions, 1u);
  EXPECT_EQ(store.Stats().payload_bytes + store.Stats().overhead_bytes, base);
  EXPECT_EQ(store.Get("other", 0)->view(), "x");
}

TEST(StateStoreTest, ASmallValueIsPlacedByItsSourceBufferOrTheSnapshotsCopy) {
  StateStore store(2);
  auto file = std::make_shared<ImageFile>("..abc..xyz..");
  file->MarkDurable(ColdFile::kAllDurable);
  const Bytes abc = B("abc");
  store.Put("s", 0, abc);
  // A buffer that only holds the same bytes is not this value's.
  store.Place("s", 0, B("abc").data(), file, 2);
  EXPECT_FALSE(store.MakeCold("s").ok);
  // Overwritten: the old value's buffer no longer names the layer.
  const Bytes xyz = B("xyz");
  store.Put("s", 0, xyz);
  store.Place("s", 0, abc.data(), file, 2);
  EXPECT_FALSE(store.MakeCold("s").ok);
  // The snapshot's copy names it from the moment the snapshot read it.
  Bytes copy;
  store.ForEachSessionPlace([&](const std::string&, const std::vector<LayerPlace>& places) {
    ASSERT_EQ(places.size(), 1u);
    EXPECT_EQ(places[0].value.view(), "xyz");
    EXPECT_EQ(places[0].file, nullptr);
    copy = places[0].value;
  });
  store.Place("s", 0, copy.data(), file, 7);
  const ColdOutcome cold = store.MakeCold("s");
  ASSERT_TRUE(cold.ok);
  EXPECT_EQ(cold.freed, 3u);
  EXPECT_EQ(store.Stats().cold_bytes, 3u);
  EXPECT_EQ(store.Get("s", 0)->view(), "xyz");
  // Read back into the chunk, it keeps its place and may leave memory again at once.
  EXPECT_TRUE(store.Promote("s"));
  EXPECT_EQ(store.Stats().cold_layers, 0u);
  EXPECT_EQ(store.Stats().payload_bytes, 3u);
  EXPECT_EQ(store.Get("s", 0)->view(), "xyz");
  ASSERT_TRUE(store.MakeCold("s").ok);
  EXPECT_EQ(store.Get("s", 0)->view(), "xyz");
  // An empty value sits at any place.
  const Bytes four = B("four");
  store.PutMany("e", {{0, B("")}, {4, four}});
  store.Place("e", 0, nullptr, file, 0);
  EXPECT_FALSE(store.MakeCold("e").ok) << "layer 4 is not placed";
  store.Place("e", 4, four.data(), file, 7);
  ASSERT_TRUE(store.MakeCold("e").ok);
  EXPECT_EQ(store.Get("e", 0)->view(), "");
  EXPECT_EQ(store.Stats().cold_layers, 3u);
  store.DropSession("s");
  store.DropSession("e");
  EXPECT_EQ(store.Stats().overhead_bytes, 0u);
}

TEST(StateStoreTest, SessionsRebuiltWhileOthersReadTheSameShard) {
  StateStore store(1);
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::thread reader([&] {
    const uint32_t layers[] = {0, 1, 2, 3};
    while (!stop.load()) {
      for (int s = 0; s < 8; ++s) {
        for (const auto& v : store.GetMany(Sid(s), layers)) {
          if (v && !v->empty() && v->view().find_first_not_of(v->view()[0]) != std::string::npos) {
            ++wrong;
          }
        }
      }
    }
  });
  for (int i = 0; i < 4000; ++i) {
    const std::string sid = Sid(i % 8);
    const size_t size = (i * 37) % 300;
    const uint32_t layer = static_cast<uint32_t>(i % 4);
    if (i % 7 == 0) {
      store.Drop(sid, layer);
    } else {
      store.Put(sid, layer, B(std::string(size, static_cast<char>('a' + i % 26))));
    }
  }
  stop = true;
  reader.join();
  EXPECT_EQ(wrong.load(), 0);
  store.Clear();
  EXPECT_EQ(store.Stats().overhead_bytes, 0u);
  EXPECT_EQ(store.Stats().payload_bytes, 0u);
}

}  // namespace
}  // namespace prefixd::store
