// Small SSM sessions in their keyspace entry (store/compact_session.h): the encoding at and one
// past its limits, and a database's StateStore keeping such sessions in its keyspace — every read
// and write finding them there, a session moving to the store when it grows, and what one costs.
#include "store/compact_session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "store/cold_file.h"
#include "store/database.h"

namespace prefixd::store {
namespace {

namespace cs = compact_session;
using Layers = std::vector<std::pair<uint32_t, Bytes>>;

Bytes B(const std::string& s) { return Bytes::CopyOf(s); }
std::string Sid(int i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "session:%05d", i);
  return buf;
}
std::vector<std::pair<uint32_t, std::string>> Listed(std::string_view value) {
  std::vector<std::pair<uint32_t, std::string>> out;
  cs::ForEachLayer(value, [&](uint32_t l, std::string_view b) { out.emplace_back(l, b); });
  return out;
}

TEST(CompactSessionTest, LayersAreKeptInOrderAndALaterValueWins) {
  auto value = cs::Merge("", Layers{{7, B("seven")}, {0, B("")}, {7, B("SEVEN")}});
  ASSERT_TRUE(value);
  auto merged = cs::Merge(*value, Layers{{3, B("three")}, {2147483647, B("max")}});
  ASSERT_TRUE(merged);
  using L = std::vector<std::pair<uint32_t, std::string>>;
  EXPECT_EQ(Listed(*merged), (L{{0, ""}, {3, "three"}, {7, "SEVEN"}, {2147483647, "max"}}));
  EXPECT_EQ(cs::LayerCount(*merged), 4u);
  EXPECT_EQ(cs::PayloadBytes(*merged), 13u);
  EXPECT_EQ(cs::FindLayer(*merged, 3), "three");
  EXPECT_EQ(cs::FindLayer(*merged, 0), "");
  EXPECT_FALSE(cs::FindLayer(*merged, 4));
  // The walk stops at the first layer past the one asked for: the last one is still found, and
  // one past it, or between two, is not.
  EXPECT_EQ(cs::FindLayer(*merged, 7), "SEVEN");
  EXPECT_EQ(cs::FindLayer(*merged, 2147483647), "max");
  EXPECT_FALSE(cs::FindLayer(*merged, 2147483646));
  EXPECT_FALSE(cs::FindLayer(*merged, 4294967295u));
  EXPECT_FALSE(cs::FindLayer("", 0));
  bool removed = false;
  EXPECT_EQ(Listed(cs::Without(*merged, 3, removed)),
            (L{{0, ""}, {7, "SEVEN"}, {2147483647, "max"}}));
  EXPECT_TRUE(removed);
  EXPECT_EQ(cs::Without(*merged, 4, removed), *merged);
  EXPECT_FALSE(removed);
  EXPECT_EQ(cs::Without(*cs::Merge("", Layers{{1, B("x")}}), 1, removed), "");
  // One byte of layer number, one of length, the bytes.
  EXPECT_EQ(cs::Merge("", Layers{{0, B(std::string(64, 'v'))}})->size(), 66u);
}

// The encoding's varints at their size boundaries, and a value whose varint runs past 64 bits or
// past its end: the walk stops there, reading nothing past the value.
TEST(CompactSessionTest, VarintsRoundTripAndAMalformedOneEndsTheWalk) {
  for (const uint64_t v : {uint64_t{0}, uint64_t{127}, uint64_t{128}, uint64_t{16383},
                           uint64_t{16384}, ~uint64_t{0}}) {
    std::string out;
    cs::AppendVarint(out, v);
    EXPECT_EQ(out.size(), v == ~uint64_t{0} ? 10u : v < 128 ? 1u : v < 16384 ? 2u : 3u);
    size_t at = 0;
    EXPECT_EQ(cs::ReadVarint(out, at), v);
    EXPECT_EQ(at, out.size());
  }
  for (const std::string& bad :
       {std::string(11, '\xff'), std::string("\x80\x80"), std::string("\x05\x80")}) {
    int visits = 0;
    cs::ForEachLayer(bad, [&](uint32_t, std::string_view bytes) {
      ++visits;
      EXPECT_LE(bytes.size(), bad.size());
    });
    EXPECT_LE(visits, 1);
  }
}

TEST(CompactSessionTest, ALayerOrASessionOnePastItsLimitIsNotCompact) {
  EXPECT_TRUE(cs::Merge("", Layers{{0, B(std::string(cs::kMaxLayerBytes, 'a'))}}));
  EXPECT_FALSE(cs::Merge("", Layers{{0, B(std::string(cs::kMaxLayerBytes + 1, 'a'))}}));
  // Layers of 2 + 126 bytes: eight make 1,024, the limit; a ninth byte is one too many.
  Layers eight;
  for (uint32_t l = 0; l < 8; ++l) eight.emplace_back(l, B(std::string(126, 'b')));
  const auto at = cs::Merge("", eight);
  ASSERT_TRUE(at);
  EXPECT_EQ(at->size(), cs::kMaxSessionBytes);
  EXPECT_FALSE(cs::Merge(*at, Layers{{0, B(std::string(127, 'b'))}}));
  EXPECT_TRUE(cs::Merge(*at, Layers{{0, B(std::string(125, 'b'))}}));
}

TEST(CompactSessionTest, ADatabaseKeepsASmallSessionInItsKeyspaceEntry) {
  Database db;
  db.state.PutMany("s", Layers{{0, B("zero")}, {5, B("five")}});
  EXPECT_TRUE(db.keys.IsCompactSession("s"));
  EXPECT_FALSE(db.state.Contains("s"));  // the store itself holds nothing
  EXPECT_EQ(db.keys.Find("s")->type, KeyType::kSsmPrefix);
  EXPECT_EQ(db.state.Get("s", 5)->view(), "five");
  EXPECT_EQ(db.state.GetRange("s", 0, 1, 100)->view(), "ero");
  EXPECT_FALSE(db.state.Get("s", 1));
  const uint32_t asked[] = {5, 1, 0};
  const auto many = db.state.GetMany("s", asked);
  ASSERT_EQ(many.size(), 3u);
  EXPECT_EQ(many[0]->view(), "five");
  EXPECT_FALSE(many[1]);
  EXPECT_EQ(many[2]->view(), "zero");
  ASSERT_EQ(db.state.Layers("s").size(), 2u);
  EXPECT_EQ(db.state.Layers("s")[1].layer, 5u);
  EXPECT_EQ(db.state.ReadSession("s")->size(), 2u);
  EXPECT_EQ(db.state.SessionBytes("s"), 0u);  // the entry's memory is the keyspace's
  StoreStats s = db.state.Stats();
  EXPECT_EQ(s.sessions, 1u);
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.payload_bytes, 8u);
  EXPECT_EQ(s.compact_bytes, 8u);
  // Every write runs the hook (the log append) exactly once, a drop of a missing layer too.
  int hooks = 0;
  const auto hook = [&] { ++hooks; };
  EXPECT_EQ(db.state.Drop("s", 9, hook), 0u);
  EXPECT_EQ(db.state.Drop("s", 0, hook), 1u);
  EXPECT_EQ(db.state.Layers("s").size(), 1u);
  EXPECT_EQ(db.state.DropSession("s", hook), 1u);
  EXPECT_EQ(hooks, 3);
  EXPECT_FALSE(db.keys.Find("s"));
  EXPECT_EQ(db.state.Stats().sessions, 0u);
  EXPECT_EQ(db.keys.MemoryBytes(), 0u);
  // Dropping a session's last layer deletes its key.
  db.state.Put("t", 1, B("x"), hook);
  EXPECT_EQ(db.state.Drop("t", 1, hook), 1u);
  EXPECT_FALSE(db.keys.Find("t"));
  EXPECT_EQ(hooks, 5);
}

TEST(CompactSessionTest, ASessionThatGrowsMovesToTheStoreWithAllItsLayersAndStaysThere) {
  Database db;
  db.state.PutMany("s", Layers{{0, B("zero")}, {1, B("one")}});
  ASSERT_TRUE(db.keys.SetExpiry("s", 4102444800000, {}));
  int hooks = 0;
  const std::string large(cs::kMaxLayerBytes + 1, 'L');
  db.state.PutMany("s", Layers{{1, B("ONE")}, {2, B(large)}}, [&] { ++hooks; });
  EXPECT_EQ(hooks, 1);
  EXPECT_FALSE(db.keys.IsCompactSession("s"));
  EXPECT_TRUE(db.state.Contains("s"));
  EXPECT_EQ(db.keys.Find("s")->expire_at_ms, 4102444800000);  // the key kept its expiry
  EXPECT_EQ(db.state.Get("s", 0)->view(), "zero");
  EXPECT_EQ(db.state.Get("s", 1)->view(), "ONE");
  EXPECT_EQ(db.state.Get("s", 2)->view(), large);
  EXPECT_EQ(db.state.Stats().compact_bytes, 0u);
  EXPECT_EQ(db.state.Stats().sessions, 1u);
  // Smaller again, it stays in the store.
  db.state.Drop("s", 2);
  EXPECT_FALSE(db.keys.IsCompactSession("s"));
  EXPECT_EQ(db.state.Layers("s").size(), 2u);
  // The moved small layers were logged without a place: a second try at making the session
  // cold leaves them in memory rather than hold the session back.
  EXPECT_FALSE(db.state.MakeCold("s").ok);
  EXPECT_TRUE(db.state.MakeCold("s", /*keep_unplaced_small=*/true).ok);
  EXPECT_EQ(db.state.Get("s", 1)->view(), "ONE");
}

TEST(CompactSessionTest, ASessionTooLargeFromItsFirstWriteGoesStraightToTheStore) {
  Database db;
  db.state.Put("big", 0, B(std::string(cs::kMaxLayerBytes + 1, 'b')));
  EXPECT_FALSE(db.keys.IsCompactSession("big"));
  EXPECT_TRUE(db.state.Contains("big"));
  // Uncompact moves a compact session (a KV.PREFIX registration taking its name) and leaves
  // the others alone.
  db.state.Put("small", 0, B("s"));
  db.state.Uncompact("small");
  db.state.Uncompact("big");
  db.state.Uncompact("missing");
  EXPECT_FALSE(db.keys.IsCompactSession("small"));
  EXPECT_TRUE(db.state.Contains("small"));
  EXPECT_EQ(db.state.Get("small", 0)->view(), "s");
  EXPECT_EQ(db.state.Get("big", 0)->size(), cs::kMaxLayerBytes + 1);
  EXPECT_FALSE(db.keys.Find("missing"));
}

TEST(CompactSessionTest, SnapshotsVisitCompactSessionsWithTheOthers) {
  Database db;
  db.state.Put("compact", 3, B("c"));
  db.state.Put("stored", 4, B(std::string(200, 's')));
  std::vector<std::string> seen;
  db.state.ForEachSession([&](const std::string& sid, const auto& layers) {
    seen.push_back(sid + ":" + std::to_string(layers.size()) + ":" +
                   std::to_string(layers[0].first) + ":" + std::to_string(layers[0].second.size()));
  });
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"compact:1:3:1", "stored:1:4:200"}));
  // A keyspace clear (FLUSHALL) takes the compact ones and their figures with it.
  db.keys.Clear();
  db.state.Clear();
  EXPECT_EQ(db.state.Stats().sessions, 0u);
  EXPECT_EQ(db.state.Stats().payload_bytes, 0u);
}

// A snapshot walks the sessions while writers run. Every session moving from its entry to the
// store as the walk starts must still be visited with its old layers: a snapshot that missed it
// would lose what its records before the snapshot wrote (the crash test's "acknowledged state
// lost" under ASan, when the walk took the store first).
TEST(CompactSessionTest, ASnapshotSeesEverySessionThatMovesToTheStoreDuringIt) {
  Database db;
  constexpr int kSessions = 200;
  for (int i = 0; i < kSessions; ++i) db.state.Put(Sid(i), 0, B("old" + std::to_string(i)));
  db.state.Put("stored", 0, B(std::string(cs::kMaxLayerBytes + 1, 's')));
  std::vector<int> seen_old(kSessions, 0);
  bool moved = false;
  db.state.ForEachSessionPlace([&](const std::string& sid, const std::vector<LayerPlace>& layers) {
    if (!moved) {  // the first visit: every compact session grows out of its entry now
      moved = true;
      for (int i = 0; i < kSessions; ++i) {
        db.state.Put(Sid(i), 1, B(std::string(cs::kMaxLayerBytes + 1, 'n')));
      }
    }
    for (int i = 0; i < kSessions; ++i) {
      if (sid != Sid(i)) continue;
      for (const LayerPlace& p : layers) {
        if (p.layer == 0 && p.value.view() == "old" + std::to_string(i)) seen_old[i] += 1;
      }
    }
  });
  for (int i = 0; i < kSessions; ++i) EXPECT_GE(seen_old[i], 1) << Sid(i);
  EXPECT_FALSE(db.keys.IsCompactSession(Sid(0)));
}

// A file image for cold layers.
class ImageFile : public ColdFile {
 public:
  explicit ImageFile(std::string image) : image_(std::move(image)) {}
  bool Read(uint64_t offset, uint64_t length, Bytes& out, std::string&) const override {
    out = Bytes::CopyOf(std::string_view(image_).substr(offset, length));
    return true;
  }

 private:
  std::string image_;
};

// The snapshot above may then hold the session twice: compact first, then from the store, cold
// (it grew, then went to disk, while the snapshot was written). Loading it, the cold record
// joins the compact one: one home, the later layers winning.
TEST(CompactSessionTest, AColdRecordOfACompactSessionMovesItToTheStore) {
  Database db;
  db.state.PutMany("s", Layers{{0, B("old0")}, {1, B("old1")}});
  auto file = std::make_shared<ImageFile>("new1cold2");
  db.state.PutCold("s", 1, 4, file, 0);
  db.state.PutCold("s", 2, 5, file, 4);
  EXPECT_FALSE(db.keys.IsCompactSession("s"));
  EXPECT_EQ(db.state.Get("s", 0)->view(), "old0");
  EXPECT_EQ(db.state.Get("s", 1)->view(), "new1");
  EXPECT_EQ(db.state.Get("s", 2)->view(), "cold2");
  EXPECT_EQ(db.state.Stats().sessions, 1u);
  EXPECT_EQ(db.state.Stats().cold_layers, 2u);
}

TEST(CompactSessionTest, ASmallSessionCostsWhatAStringOfItsEncodingCosts) {
  Database db;
  constexpr int kCount = 10000;
  for (int i = 0; i < kCount; ++i) db.state.Put(Sid(i), 0, B(std::string(64, 'v')));
  ASSERT_EQ(Sid(0).size(), 13u);
  const uint64_t per_session = db.keys.MemoryBytes() / kCount;
  // The entry's chunk: a 23-byte header, the key, layer number and length (a byte each) and
  // the value, 102 in a 104-byte slot; then the bucket slot, the index node and the handle slot
  // (40), as a string's (KeyEntry.ASmallStringCostsAtMostItsChunkAndFortyBytes).
  EXPECT_EQ(per_session, SmallChunks::SlotBytes(23 + 13 + 2 + 64) + 40);
  EXPECT_LE(per_session, 144u);
  EXPECT_EQ(db.keys.EntryMemory(Sid(0)), per_session);
  // Nothing else holds memory for them.
  const StoreStats s = db.state.Stats();
  EXPECT_EQ(s.payload_bytes - s.compact_bytes + s.overhead_bytes, 0u);
}

}  // namespace
}  // namespace prefixd::store
