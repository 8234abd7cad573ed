// Sets', lists' and hashes' values (store/members.h) and their records (types 12, 13 and 14): the
// member encoding round-trips any bytes and rejects a cut or overlong one, Redis 7.0's intset
// and listpack rules, and a record encoded, decoded, checked and applied gives the same keyspace
// value and encoding — an empty one deletes the key, and a damaged one is refused before it is
// applied.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "persist/mutation.h"
#include "store/keyspace.h"
#include "store/members.h"
#include "store/state_store.h"

namespace prefixd {
namespace {

using store::SetEncoding;

TEST(MembersTest, EncodingRoundTripsAnyBytes) {
  const std::vector<std::string> members = {"", "a", std::string("\0\r\n", 3),
                                            std::string(70000, 'x')};
  const Bytes value = store::EncodeMembers(members);
  EXPECT_EQ(value.size(), 4 * 4 + 1 + 3 + 70000u);
  EXPECT_EQ(store::DecodeMembers(value.view()), members);
  EXPECT_TRUE(store::ValidMembers(value.view()));
  EXPECT_EQ(store::DecodeMembers(""), std::vector<std::string>{});
}

TEST(MembersTest, CutOrOverlongEncodingsAreRefused) {
  const std::string value(store::EncodeMembers({"abc", "de"}).view());
  for (size_t cut = 1; cut < value.size(); ++cut) {
    if (cut == 4 + 3) {  // "abc" whole: a valid one-member value
      EXPECT_EQ(store::DecodeMembers(value.substr(0, cut)), std::vector<std::string>{"abc"});
      continue;
    }
    EXPECT_FALSE(store::DecodeMembers(value.substr(0, cut)).has_value()) << cut;
    EXPECT_FALSE(store::ValidMembers(value.substr(0, cut))) << cut;
  }
  std::string overlong = value;
  overlong[0] = 4;  // "abc" claims 4 bytes: the next length is misread and runs past the end
  EXPECT_FALSE(store::DecodeMembers(overlong).has_value());
}

TEST(MembersTest, IntsetRulesAreRedis70s) {
  EXPECT_TRUE(store::IntsetMember("0"));
  EXPECT_TRUE(store::IntsetMember("-9223372036854775808"));
  EXPECT_FALSE(store::IntsetMember("9223372036854775808"));
  EXPECT_FALSE(store::IntsetMember("01"));
  EXPECT_FALSE(store::IntsetMember("1.0"));
  EXPECT_FALSE(store::IntsetMember(" 1"));
  std::vector<std::string> members;
  for (int i = 0; i < 512; ++i) members.push_back(std::to_string(i));
  EXPECT_EQ(store::SetEncodingAfterAdd(SetEncoding::kIntset, members, 512), SetEncoding::kIntset);
  members.push_back("512");  // one past set-max-intset-entries
  EXPECT_EQ(store::SetEncodingAfterAdd(SetEncoding::kIntset, members, 512),
            SetEncoding::kHashtable);
  EXPECT_EQ(store::SetEncodingAfterAdd(SetEncoding::kHashtable, {"1"}, 512),
            SetEncoding::kHashtable);
  EXPECT_EQ(store::SetEncodingAfterAdd(SetEncoding::kIntset, {"1", "a"}, 512),
            SetEncoding::kHashtable);
  std::vector<std::string> ints = {"10", "-3", "2"};
  store::SortIntset(ints);
  EXPECT_EQ(ints, (std::vector<std::string>{"-3", "2", "10"}));
}

// Through the record codec and Apply, as replay does.
persist::Mutation RoundTrip(const persist::Mutation& m) {
  Bytes payload;
  std::string joined;
  for (const Bytes& piece : persist::EncodePayload(m)) joined.append(piece.view());
  persist::Mutation out;
  EXPECT_EQ(persist::DecodePayload(persist::TypeOf(m), Bytes::CopyOf(joined), out).ToString(),
            "OK");
  return out;
}

TEST(MembersTest, RecordsReplayToTheSameValue) {
  store::Keyspace keys;
  store::StateStore state(1);
  const persist::Stores stores{state, nullptr, 0, &keys, nullptr};
  const Bytes set_value = store::EncodeMembers({"1", "2", "a"});
  const Bytes list_value = store::EncodeMembers({"x", "", "x"});
  for (const persist::Mutation& m :
       {persist::Mutation(
            persist::SetValue{"s", 1, persist::SetValue::kWhole, persist::Blob{{set_value}}}),
        persist::Mutation(
            persist::ListValue{"l", persist::ListValue::kWhole, 0, persist::Blob{{list_value}}})}) {
    const persist::Mutation read = RoundTrip(m);
    ASSERT_TRUE(persist::Check(read, persist::Limits::Hard()).ok);
    persist::Apply(read, stores, {});
  }
  auto set = keys.Find("s");
  ASSERT_TRUE(set.has_value());
  EXPECT_EQ(set->type, store::KeyType::kSet);
  EXPECT_EQ(static_cast<SetEncoding>(set->encoding), SetEncoding::kHashtable);
  EXPECT_EQ(set->value.view(), set_value.view());
  auto list = keys.Find("l");
  ASSERT_TRUE(list.has_value());
  EXPECT_EQ(list->type, store::KeyType::kList);
  EXPECT_EQ(list->value.view(), list_value.view());
  // The key keeps its expiry across a new value; no members deletes it.
  keys.SetExpiry("l", 123456, {});
  persist::Apply(persist::ListValue{"l", persist::ListValue::kWhole, 0,
                                    persist::Blob{{store::EncodeMembers({"y"})}}},
                 stores, {});
  EXPECT_EQ(keys.Find("l")->expire_at_ms, 123456);
  persist::Apply(RoundTrip(persist::ListValue{"l", persist::ListValue::kWhole, 0, {}}), stores, {});
  EXPECT_FALSE(keys.Find("l").has_value());
  // A list record does not delete a set of the same name.
  persist::Apply(persist::ListValue{"s", persist::ListValue::kWhole, 0, {}}, stores, {});
  EXPECT_TRUE(keys.Find("s").has_value());
}

TEST(MembersTest, DamagedRecordsAreRefused) {
  const std::string cut(store::EncodeMembers({"abc"}).view().substr(0, 5));
  EXPECT_FALSE(persist::Check(persist::SetValue{"s", 0, persist::SetValue::kWhole,
                                                persist::Blob{{Bytes::CopyOf(cut)}}},
                              persist::Limits::Hard())
                   .ok);
  EXPECT_FALSE(persist::Check(persist::ListValue{"l", persist::ListValue::kWhole, 0,
                                                 persist::Blob{{Bytes::CopyOf(cut)}}},
                              persist::Limits::Hard())
                   .ok);
  EXPECT_FALSE(persist::Check(persist::SetValue{"s", 2, 0, {}}, persist::Limits::Hard()).ok);
  EXPECT_FALSE(persist::Check(persist::SetValue{"s", 0, 3, {}}, persist::Limits::Hard()).ok);
  EXPECT_FALSE(persist::Check(persist::ListValue{"l", 5, 0, {}}, persist::Limits::Hard()).ok);
  EXPECT_FALSE(persist::Check(persist::ListValue{"l", persist::ListValue::kPopHead, 1,
                                                 persist::Blob{{store::EncodeMembers({"x"})}}},
                              persist::Limits::Hard())
                   .ok)
      << "a pop names no elements";
  EXPECT_FALSE(persist::Check(persist::ListValue{"l", persist::ListValue::kPushHead, 1, {}},
                              persist::Limits::Hard())
                   .ok)
      << "a push has no count";
}

std::vector<std::string> Members(const store::Keyspace& keys, const std::string& key) {
  auto info = keys.Find(key);
  if (!info) return {};
  return *store::DecodeMembers(info->value.view());
}

// A keyspace that records are checked and applied to after the codec's round trip, as replay
// does.
struct Replay {
  store::Keyspace keys;
  store::StateStore state{1};
  void Apply(const persist::Mutation& m) {
    const persist::Mutation read = RoundTrip(m);
    ASSERT_TRUE(persist::Check(read, persist::Limits::Hard()).ok);
    persist::Apply(read, persist::Stores{state, nullptr, 0, &keys, nullptr}, {});
  }
};

persist::Blob MembersBlob(const std::vector<std::string>& members) {
  return persist::Blob{{store::EncodeMembers(members)}};
}

// The operation records replay as the commands made them: pushes and pops at either end,
// additions that skip present members (an intset kept sorted), removals; the last member gone
// deletes the key.
TEST(MembersTest, OperationRecordsApplyToTheCurrentValue) {
  using persist::ListValue;
  using persist::SetValue;
  Replay replay;
  store::Keyspace& keys = replay.keys;
  const auto apply = [&](const persist::Mutation& m) { replay.Apply(m); };
  apply(ListValue{"l", ListValue::kPushTail, 0, MembersBlob({"a", "b"})});
  apply(ListValue{"l", ListValue::kPushHead, 0, MembersBlob({"y", "x"})});
  apply(ListValue{"l", ListValue::kPushTail, 0, MembersBlob({"c"})});
  EXPECT_EQ(Members(keys, "l"), (std::vector<std::string>{"y", "x", "a", "b", "c"}));
  EXPECT_EQ(store::EdgeMembers(keys.Find("l")->value.view(), 2, false),
            (std::vector<std::string>{"c", "b"}));
  apply(ListValue{"l", ListValue::kPopHead, 2, {}});
  apply(ListValue{"l", ListValue::kPopTail, 1, {}});
  EXPECT_EQ(Members(keys, "l"), (std::vector<std::string>{"a", "b"}));
  apply(ListValue{"l", ListValue::kPopTail, 5, {}});
  EXPECT_FALSE(keys.Find("l").has_value());

  apply(SetValue{"s", 0, SetValue::kAdd, MembersBlob({"10", "-3"})});
  apply(SetValue{"s", 0, SetValue::kAdd, MembersBlob({"2", "10"})});
  EXPECT_EQ(Members(keys, "s"), (std::vector<std::string>{"-3", "2", "10"}));
  apply(SetValue{"s", 1, SetValue::kAdd, MembersBlob({"a"})});
  EXPECT_EQ(static_cast<SetEncoding>(keys.Find("s")->encoding), SetEncoding::kHashtable);
  EXPECT_EQ(Members(keys, "s"), (std::vector<std::string>{"-3", "2", "10", "a"}));
  apply(SetValue{"s", 1, SetValue::kRemove, MembersBlob({"2", "zz"})});
  EXPECT_EQ(Members(keys, "s"), (std::vector<std::string>{"-3", "10", "a"}));
  apply(SetValue{"s", 1, SetValue::kRemove, MembersBlob({"-3", "10", "a"})});
  EXPECT_FALSE(keys.Find("s").has_value());
}

// Redis 7.0's listpack rule: a hash stays a listpack up to hash-max-listpack-entries fields and
// hash-max-listpack-value bytes per field or value, one past either makes it a hashtable, and a
// hashtable never goes back.
TEST(MembersTest, ListpackRulesAreRedis70s) {
  using store::HashEncoding;
  const auto after = store::HashEncodingAfterSet;
  EXPECT_EQ(after(HashEncoding::kListpack, 128, 64, 128, 64), HashEncoding::kListpack);
  EXPECT_EQ(after(HashEncoding::kListpack, 129, 1, 128, 64), HashEncoding::kHashtable);
  EXPECT_EQ(after(HashEncoding::kListpack, 1, 65, 128, 64), HashEncoding::kHashtable);
  EXPECT_EQ(after(HashEncoding::kListpack, 1, 0, 0, 64), HashEncoding::kHashtable);
  EXPECT_EQ(after(HashEncoding::kHashtable, 1, 1, 128, 64), HashEncoding::kHashtable);
}

// The hash records replay as the commands made them: a set field keeps its place and takes the
// new value, a new one is appended, deletions skip missing fields, and the last field gone
// deletes the key; a damaged or unpaired record is refused.
TEST(MembersTest, HashRecordsApplyToTheCurrentValue) {
  using persist::HashValue;
  Replay replay;
  store::Keyspace& keys = replay.keys;
  const auto apply = [&](const persist::Mutation& m) { replay.Apply(m); };
  const std::string nul("\0\r\n", 3);
  apply(HashValue{"h", 0, HashValue::kSet, MembersBlob({"a", "1", "b", "2"})});
  apply(HashValue{"h", 0, HashValue::kSet, MembersBlob({"a", "3", nul, "", "c", "4"})});
  EXPECT_EQ(Members(keys, "h"), (std::vector<std::string>{"a", "3", "b", "2", nul, "", "c", "4"}));
  EXPECT_EQ(keys.Find("h")->type, store::KeyType::kHash);
  EXPECT_EQ(store::FieldValue(keys.Find("h")->value.view(), nul), std::string_view(""));
  EXPECT_EQ(store::FieldValue(keys.Find("h")->value.view(), "3"), std::nullopt);  // a value
  apply(HashValue{"h", 1, HashValue::kDelete, MembersBlob({"b", "zz"})});
  EXPECT_EQ(Members(keys, "h"), (std::vector<std::string>{"a", "3", nul, "", "c", "4"}));
  EXPECT_EQ(static_cast<store::HashEncoding>(keys.Find("h")->encoding),
            store::HashEncoding::kHashtable);
  keys.SetExpiry("h", 123456, {});
  apply(HashValue{"h", 1, HashValue::kWhole, MembersBlob({"x", "y"})});
  EXPECT_EQ(Members(keys, "h"), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(keys.Find("h")->expire_at_ms, 123456);
  apply(HashValue{"h", 1, HashValue::kDelete, MembersBlob({"x"})});
  EXPECT_FALSE(keys.Find("h").has_value());

  const auto hard = persist::Limits::Hard();
  EXPECT_FALSE(persist::Check(HashValue{"h", 0, HashValue::kSet, MembersBlob({"a"})}, hard).ok)
      << "a field without its value";
  EXPECT_FALSE(
      persist::Check(HashValue{"h", 0, HashValue::kWhole, MembersBlob({"a", "1", "b"})}, hard).ok);
  EXPECT_TRUE(persist::Check(HashValue{"h", 0, HashValue::kDelete, MembersBlob({"a"})}, hard).ok);
  EXPECT_FALSE(persist::Check(HashValue{"h", 2, 0, {}}, hard).ok) << "unknown encoding";
  EXPECT_FALSE(persist::Check(HashValue{"h", 0, 3, {}}, hard).ok) << "unknown operation";
  const std::string cut(store::EncodeMembers({"abc"}).view().substr(0, 5));
  EXPECT_FALSE(persist::Check(
                   HashValue{"h", 0, HashValue::kDelete, persist::Blob{{Bytes::CopyOf(cut)}}}, hard)
                   .ok);
}

}  // namespace
}  // namespace prefixd
