// StateStore alone: values stored and returned bit for bit, MSTORE visible all at once to a
// concurrent MFETCH, drops with their counts, the under-lock hook (the durability log's place
// in the order of changes), the memory accounting back to zero, snapshot iteration, and the disk
// tier's rules (a session leaves memory only once every value is placed and durable; places
// are taken only by the buffer they were made for; ranged cold reads; promotion).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

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

}  // namespace
}  // namespace prefixd::store
