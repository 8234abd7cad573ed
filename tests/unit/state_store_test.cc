// StateStore alone: values stored and returned bit for bit, MSTORE visible all at once to a
// concurrent MFETCH, drops with their counts, the under-lock hook (the durability log's place
// in the order of changes), the memory accounting back to zero, and snapshot iteration.
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

}  // namespace
}  // namespace prefixd::store
