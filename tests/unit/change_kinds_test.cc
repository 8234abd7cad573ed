// engine/change_kinds.h: every kind of change has its one line, a kind without one is caught at
// compile time, and the facts the write path, WATCH and the disk tier read follow from it.
#include "engine/change_kinds.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

#include "store/key_entry.h"

namespace prefixd::commands {
namespace {

// A kind of change persist might add: without its KindOf, a Mutation holding it is refused by the
// same check engine/change_kinds.h makes of persist::Mutation.
struct AKindNobodyDescribed {
  std::string key;
};
static_assert(kEveryKindKnown<std::variant<persist::StringSet, persist::SsmPut>>);
static_assert(!kEveryKindKnown<std::variant<persist::StringSet, AKindNobodyDescribed>>);

std::vector<std::string> NamedKeys(const persist::Mutation& m) {
  std::vector<std::string> keys;
  ForEachNamedKey(m, [&](std::string_view key) { keys.emplace_back(key); });
  return keys;
}

TEST(ChangeKinds, WholeDatabaseChangesAreTheFlushesAndTheSwap) {
  EXPECT_TRUE(KindOf(persist::Mutation(persist::FlushAll{})).whole_databases());
  EXPECT_TRUE(KindOf(persist::Mutation(persist::FlushDb{})).whole_databases());
  EXPECT_TRUE(KindOf(persist::Mutation(persist::SwapDb{0, 1})).whole_databases());
  EXPECT_FALSE(KindOf(persist::Mutation(persist::StringDel{"k"})).whole_databases());
  EXPECT_FALSE(KindOf(persist::Mutation(persist::SnapshotEnd{})).whole_databases());
  EXPECT_TRUE(NamedKeys(persist::FlushAll{}).empty());
  EXPECT_TRUE(NamedKeys(persist::SwapDb{0, 1}).empty());
}

TEST(ChangeKinds, EachKindNamesTheKeysWatchSeesChange) {
  EXPECT_EQ(NamedKeys(persist::StringDel{"k"}), std::vector<std::string>{"k"});
  EXPECT_EQ(NamedKeys(persist::SsmDropSession{"s"}), std::vector<std::string>{"s"});
  EXPECT_EQ(NamedKeys(persist::PrefixNamespaceDrop{"ns"}), std::vector<std::string>{"ns"});
  persist::KvDrop drop;
  drop.ns = "kv";
  EXPECT_EQ(NamedKeys(drop), (std::vector<std::string>{"kv", "kv_pk", "kv_pv"}));
  persist::StringMultiSet mset;
  mset.entries.resize(2);
  mset.entries[0].key = "a";
  mset.entries[1].key = "b";
  EXPECT_EQ(NamedKeys(mset), (std::vector<std::string>{"a", "b"}));
}

TEST(ChangeKinds, OnlyValuesLeftOutOfTheirEntryArePlacedByTheDiskTier) {
  persist::SsmPut put;
  put.sid = "s";
  put.layers.emplace_back(0, Bytes::CopyOf("abc"));
  EXPECT_EQ(KeysPlacedBy(put), std::vector<std::string>{"s"});
  EXPECT_TRUE(KeysPlacedBy(persist::SsmDropLayer{"s", 0}).empty());

  persist::StringSet small;
  small.key = "small";
  small.value.pieces.push_back(Bytes::CopyOf("v"));
  EXPECT_TRUE(KeysPlacedBy(small).empty());
  persist::StringSet large;
  large.key = "large";
  large.value.pieces.push_back(Bytes::CopyOf(std::string(store::KeyEntry::kInlineValueBelow, 'x')));
  EXPECT_EQ(KeysPlacedBy(large), std::vector<std::string>{"large"});
}

}  // namespace
}  // namespace prefixd::commands
