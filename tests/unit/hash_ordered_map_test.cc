// store::HashOrderedMap against std::map as the model: lookups, inserts and erases through
// growing and shrinking, the walk order of (hash, key) that SCAN's cursor relies on, keys that
// share a hash, nodes that stay put while others come and go, and a node replaced in place.
#include "store/hash_ordered_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace prefixd::store {
namespace {

// The simplest node: the map asks only for the link, Hash, Key and Destroy.
struct TestNode {
  TestNode* next = nullptr;
  uint64_t hash = 0;
  std::string key;
  int value = 0;
  uint64_t Hash() const { return hash; }
  std::string_view Key() const { return key; }
  static void Destroy(TestNode* node) { delete node; }
};
using Map = HashOrderedMap<TestNode>;

// The node of (hash, key), made with `value` when there was none; true when it was made.
std::pair<TestNode*, bool> Emplace(Map& map, uint64_t hash, const std::string& key, int value) {
  auto* fresh = new TestNode{nullptr, hash, key, value};
  TestNode* placed = map.Insert(fresh);
  if (placed == fresh) return {placed, true};
  delete fresh;
  return {placed, false};
}
using Model = std::map<std::pair<uint64_t, std::string>, int>;
constexpr uint64_t kMask = (uint64_t{1} << Map::kHashBits) - 1;

// Every node in walk order, as the model would list them.
std::vector<std::pair<std::pair<uint64_t, std::string>, int>> Walk(const Map& map) {
  std::vector<std::pair<std::pair<uint64_t, std::string>, int>> out;
  for (const TestNode* n = map.First(); n != nullptr; n = map.Next(n)) {
    out.push_back({{n->hash, n->key}, n->value});
  }
  return out;
}

void ExpectSame(const Map& map, const Model& model) {
  ASSERT_EQ(map.size(), model.size());
  const auto walked = Walk(map);
  ASSERT_EQ(walked.size(), model.size());
  size_t i = 0;
  for (const auto& [position, value] : model) {
    EXPECT_EQ(walked[i].first, position) << "at " << i;
    EXPECT_EQ(walked[i].second, value) << "at " << i;
    ++i;
  }
}

TEST(HashOrderedMap, MatchesAnOrderedMapThroughGrowthAndShrinkage) {
  std::mt19937_64 rng(7);
  Map map;
  Model model;
  // Few distinct hashes for part of the keys, so chains hold equal hashes with different keys;
  // the rest spread over the whole range, so the table grows to many buckets.
  auto random_hash = [&] { return rng() % 4 == 0 ? (rng() % 8) << 50 : rng() & kMask; };
  std::vector<std::pair<uint64_t, std::string>> present;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 5000; ++i) {
      const uint64_t hash = random_hash();
      const std::string key = "k" + std::to_string(rng() % 100000);
      const auto [node, made] = Emplace(map, hash, key, i);
      const auto [it, model_made] = model.emplace(std::make_pair(hash, key), i);
      ASSERT_EQ(made, model_made);
      ASSERT_EQ(node->value, it->second);
      if (made) present.emplace_back(hash, key);
    }
    ExpectSame(map, model);
    // Erase most of them: the table shrinks back while the rest keep their order.
    std::shuffle(present.begin(), present.end(), rng);
    while (present.size() > 200) {
      const auto [hash, key] = present.back();
      present.pop_back();
      TestNode* node = map.Find(hash, key);
      ASSERT_NE(node, nullptr);
      map.Erase(node);
      model.erase({hash, key});
      ASSERT_EQ(map.Find(hash, key), nullptr);
    }
    ExpectSame(map, model);
  }
}

TEST(HashOrderedMap, LowerBoundIsTheFirstPositionAtOrAfterTheCursor) {
  std::mt19937_64 rng(11);
  Map map;
  Model model;
  for (int i = 0; i < 3000; ++i) {
    const uint64_t hash = rng() & kMask;
    Emplace(map, hash, "x", i);
    model.emplace(std::make_pair(hash, std::string("x")), i);
  }
  for (int probe = 0; probe < 2000; ++probe) {
    const uint64_t cursor = probe == 0 ? 0 : probe == 1 ? kMask : rng() & kMask;
    const auto expected = model.lower_bound({cursor, std::string()});
    const TestNode* got = map.LowerBound(cursor);
    if (expected == model.end()) {
      EXPECT_EQ(got, nullptr);
    } else {
      ASSERT_NE(got, nullptr);
      EXPECT_EQ(got->hash, expected->first.first);
    }
  }
}

TEST(HashOrderedMap, NodesStayWhereTheyAreWhileOthersComeAndGo) {
  Map map;
  const TestNode* kept = Emplace(map, 12345, "kept", 1).first;
  const std::string_view kept_key = kept->Key();
  for (int i = 0; i < 10000; ++i)
    Emplace(map, static_cast<uint64_t>(i) << 40, std::to_string(i), i);
  for (int i = 0; i < 10000; ++i)
    map.Erase(map.Find(static_cast<uint64_t>(i) << 40, std::to_string(i)));
  EXPECT_EQ(map.Find(12345, "kept"), kept);
  EXPECT_EQ(kept_key, "kept");
  EXPECT_EQ(map.size(), 1u);
  // An existing key is found, not made twice.
  const auto [again, made] = Emplace(map, 12345, "kept", 2);
  EXPECT_FALSE(made);
  EXPECT_EQ(again->value, 1);
}

TEST(HashOrderedMap, AReplacedNodeTakesTheOldOnesPlace) {
  Map map;
  for (int i = 0; i < 100; ++i)
    Emplace(map, static_cast<uint64_t>(i % 10) << 50, std::to_string(i), i);
  const auto before = Walk(map);
  TestNode* old = map.Find(uint64_t{3} << 50, "33");
  ASSERT_NE(old, nullptr);
  auto* fresh = new TestNode{nullptr, old->hash, old->key, 1000};
  map.Replace(old, fresh);
  delete old;
  EXPECT_EQ(map.Find(uint64_t{3} << 50, "33"), fresh);
  const auto after = Walk(map);
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].first, before[i].first);
    EXPECT_EQ(after[i].second, before[i].first.second == "33" ? 1000 : before[i].second);
  }
  map.Erase(fresh);
  EXPECT_EQ(map.Find(uint64_t{3} << 50, "33"), nullptr);
  EXPECT_EQ(map.size(), 99u);
}

TEST(HashOrderedMap, EmptyAndClearedMapsWalkNothing) {
  Map map;
  EXPECT_EQ(map.First(), nullptr);
  EXPECT_EQ(map.LowerBound(0), nullptr);
  EXPECT_EQ(map.Find(0, ""), nullptr);
  Emplace(map, 1, "a", 1);
  Emplace(map, kMask, "b", 2);
  EXPECT_EQ(map.LowerBound(2)->key, "b");
  EXPECT_EQ(map.LowerBound(kMask)->key, "b");
  Map other;
  other.swap(map);
  EXPECT_TRUE(map.empty());
  EXPECT_EQ(other.size(), 2u);
  other.Clear();
  EXPECT_EQ(other.First(), nullptr);
  Emplace(other, 3, "c", 3);  // usable after Clear
  EXPECT_EQ(other.First()->key, "c");
}

}  // namespace
}  // namespace prefixd::store
