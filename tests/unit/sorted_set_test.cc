// Sorted sets' values (store/sorted_set.h) and their record (type 18): pairs round-trip any
// member bytes and any score bit for bit, a damaged value (cut, NaN, out of order, a member twice)
// is refused before it is applied, the records replay to the value the commands made, the
// encoding follows Redis 7.0's limits at and one past them, and scores and bounds parse as
// Redis's strtod-based readers do.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "persist/mutation.h"
#include "store/keyspace.h"
#include "store/members.h"
#include "store/sorted_set.h"
#include "store/state_store.h"

namespace prefixd {
namespace {

using store::ScoredMember;
using store::ScoredView;
using store::ZsetEncoding;

uint64_t Bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

TEST(SortedSetTest, PairsRoundTripBitForBit) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::string crlf("\0\r\n", 3), big(70000, 'x');
  const std::vector<ScoredView> pairs = {{-inf, "low"}, {-0.0, "negzero"}, {5e-324, ""},
                                         {0.1, crlf},   {0.1, "zz"},       {1.0 / 3, big},
                                         {inf, "high"}};
  const Bytes value = store::EncodeZset(pairs);
  EXPECT_EQ(value.size(), 7 * (4 + 8 + 4) + 3 + 7 + 3 + 2 + 70000 + 4u);
  auto back = store::DecodeZset(value.view());
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_EQ(Bits((*back)[i].score), Bits(pairs[i].score)) << i;
    EXPECT_EQ((*back)[i].member, pairs[i].member) << i;
  }
  EXPECT_EQ(store::CountZset(value.view()), pairs.size());
  EXPECT_EQ(store::DecodeZset("")->size(), 0u);
}

TEST(SortedSetTest, DamagedValuesAreRefused) {
  const std::string good(store::EncodeZset({{1, "a"}, {2, "b"}}).view());
  EXPECT_TRUE(store::ValidZset(good));
  EXPECT_FALSE(store::ValidZset(good.substr(0, good.size() - 1))) << "cut";
  EXPECT_FALSE(store::ValidZset(std::string(store::EncodeMembers({"12345678"}).view())))
      << "a score without its member";
  EXPECT_FALSE(store::ValidZset(std::string(store::EncodeMembers({"1234567", "a"}).view())))
      << "a 7-byte score";
  EXPECT_FALSE(store::ValidZset(store::EncodeZset({{NAN, "a"}}).view())) << "NaN";
  EXPECT_FALSE(store::ValidZset(store::EncodeZset({{2, "a"}, {1, "b"}}).view())) << "order";
  EXPECT_FALSE(store::ValidZset(store::EncodeZset({{1, "b"}, {1, "a"}}).view())) << "tie order";
  EXPECT_FALSE(store::ValidZset(store::EncodeZset({{1, "a"}, {2, "a"}}).view())) << "repeat";
  const auto check = [](persist::ZsetValue r) {
    return persist::Check(r, persist::Limits::Hard()).ok;
  };
  const auto blob = [](std::string_view bytes) { return persist::Blob{{Bytes::CopyOf(bytes)}}; };
  EXPECT_TRUE(check({"z", 1, persist::ZsetValue::kScores, blob(good)}));
  EXPECT_FALSE(check({"z", 1, persist::ZsetValue::kScores, blob(good.substr(0, 9))}));
  EXPECT_FALSE(check({"z", 2, persist::ZsetValue::kWhole, blob(good)})) << "encoding 2";
  EXPECT_FALSE(check({"z", 0, 3, blob(good)})) << "op 3";
  EXPECT_TRUE(
      check({"z", 0, persist::ZsetValue::kRemove, persist::Blob{{store::EncodeMembers({"a"})}}}));
  EXPECT_FALSE(check({"z", 0, persist::ZsetValue::kRemove, blob("\x05\0\0\0ab")}));
}

persist::Mutation ThroughCodec(const persist::Mutation& m) {
  std::string payload;
  for (const Bytes& piece : persist::EncodePayload(m)) payload.append(piece.view());
  persist::Mutation decoded;
  EXPECT_EQ(persist::DecodePayload(persist::TypeOf(m), Bytes::CopyOf(payload), decoded).ToString(),
            "OK");
  return decoded;
}

std::vector<std::pair<std::string, double>> Pairs(const store::Keyspace& keys,
                                                  const std::string& key) {
  std::vector<std::pair<std::string, double>> out;
  auto info = keys.Find(key);
  if (!info) return out;
  const auto pairs = store::DecodeZset(info->value.view());
  for (const ScoredMember& m : pairs.value()) out.emplace_back(m.member, m.score);
  return out;
}

// Scores put (added or moved, the order kept), members removed, the whole value; the last member
// gone deletes the key, which keeps its expiry until then.
TEST(SortedSetTest, RecordsReplayToTheCurrentValue) {
  using persist::ZsetValue;
  store::Keyspace keys;
  store::StateStore state(1);
  const persist::Stores stores{state, nullptr, 0, &keys, nullptr};
  const auto apply = [&](const persist::Mutation& m) {
    const persist::Mutation read = ThroughCodec(m);
    ASSERT_TRUE(persist::Check(read, persist::Limits::Hard()).ok);
    persist::Apply(read, stores, {});
  };
  const auto scores = [](std::vector<ScoredView> pairs) {
    return persist::Blob{{store::EncodeZset(pairs)}};
  };
  apply(ZsetValue{"z", 0, ZsetValue::kScores, scores({{1, "b"}, {2, "a"}})});
  apply(ZsetValue{"z", 0, ZsetValue::kScores, scores({{0, "c"}, {1, "a"}})});
  using P = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(Pairs(keys, "z"), (P{{"c", 0}, {"a", 1}, {"b", 1}}));
  EXPECT_EQ(static_cast<ZsetEncoding>(keys.Find("z")->encoding), ZsetEncoding::kListpack);
  EXPECT_EQ(keys.Find("z")->type, store::KeyType::kZset);
  keys.SetExpiry("z", 123456, {});
  apply(ZsetValue{"z", 1, ZsetValue::kScores, scores({{-1, "d"}})});
  EXPECT_EQ(static_cast<ZsetEncoding>(keys.Find("z")->encoding), ZsetEncoding::kSkiplist);
  EXPECT_EQ(keys.Find("z")->expire_at_ms, 123456);
  apply(ZsetValue{"z", 1, ZsetValue::kRemove, persist::Blob{{store::EncodeMembers({"a", "x"})}}});
  EXPECT_EQ(Pairs(keys, "z"), (P{{"d", -1}, {"c", 0}, {"b", 1}}));
  apply(ZsetValue{"z", 1, ZsetValue::kRemove,
                  persist::Blob{{store::EncodeMembers({"b", "c", "d"})}}});
  EXPECT_FALSE(keys.Find("z").has_value());
  apply(ZsetValue{"w", 0, ZsetValue::kWhole, scores({{7, "only"}})});
  EXPECT_EQ(Pairs(keys, "w"), (P{{"only", 7}}));
  apply(ZsetValue{"w", 0, ZsetValue::kWhole, {}});
  EXPECT_FALSE(keys.Find("w").has_value());
}

TEST(SortedSetTest, EncodingAtTheLimitsAndOnePast) {
  constexpr auto kList = ZsetEncoding::kListpack, kSkip = ZsetEncoding::kSkiplist;
  EXPECT_EQ(store::ZsetEncodingAfterAdd(kList, 127, 1, 64, 128, 64), kList);
  EXPECT_EQ(store::ZsetEncodingAfterAdd(kList, 128, 1, 1, 128, 64), kSkip);
  EXPECT_EQ(store::ZsetEncodingAfterAdd(kList, 0, 1, 65, 128, 64), kSkip);
  EXPECT_EQ(store::ZsetEncodingAfterAdd(kList, 128, 0, 0, 128, 64), kList) << "an update";
  EXPECT_EQ(store::ZsetEncodingAfterAdd(kSkip, 0, 1, 1, 128, 64), kSkip) << "never back";
}

TEST(SortedSetTest, ScoresAndBoundsParseAsRedis) {
  EXPECT_EQ(store::ParseScore("1.5"), 1.5);
  EXPECT_EQ(store::ParseScore("-inf"), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(store::ParseScore("+inf"), std::numeric_limits<double>::infinity());
  EXPECT_EQ(store::ParseScore("0x10"), 16.0);
  EXPECT_EQ(store::ParseScore("4.9e-324"), 5e-324) << "a denormal is kept";
  for (const char* bad : {"", " 1", "1 ", "nan", "x", "1e400", "1e-400", "(1"}) {
    EXPECT_FALSE(store::ParseScore(bad).has_value()) << bad;
  }
  EXPECT_FALSE(store::ParseScore(std::string("1\0", 2)).has_value());
  auto open = store::ParseScoreBound("(2.5");
  ASSERT_TRUE(open.has_value());
  EXPECT_TRUE(open->exclusive);
  EXPECT_EQ(open->value, 2.5);
  EXPECT_EQ(store::ParseScoreBound("")->value, 0) << "strtod reads nothing: 0";
  EXPECT_EQ(store::ParseScoreBound(" 3")->value, 3);
  EXPECT_FALSE(store::ParseScoreBound("3x").has_value());
  EXPECT_FALSE(store::ParseScoreBound("(nan").has_value());
  EXPECT_TRUE(store::AboveMin(2.5, {2.5, false}));
  EXPECT_FALSE(store::AboveMin(2.5, {2.5, true}));
  EXPECT_FALSE(store::BelowMax(2.5, {2.5, true}));
  for (const char* bad : {"", "a", "+x", "-x"}) {
    EXPECT_FALSE(store::ParseLexBound(bad).has_value()) << bad;
  }
  auto lex = store::ParseLexBound("(b");
  ASSERT_TRUE(lex.has_value());
  EXPECT_FALSE(store::AboveMin("b", *lex));
  EXPECT_TRUE(store::AboveMin("ba", *lex));
  EXPECT_TRUE(store::BelowMax(std::string_view("\xff", 1), *store::ParseLexBound("+")));
  EXPECT_TRUE(store::ZsetLess(1, std::string_view("\x7f", 1), 1, std::string_view("\x80", 1)))
      << "members compare as unsigned bytes";
}

}  // namespace
}  // namespace prefixd
