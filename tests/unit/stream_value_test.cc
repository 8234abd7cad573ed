// Streams' values (store/stream.h) and their records (type 19): every operation, encoded,
// decoded, checked and applied as replay does, gives what the commands computed; an append into a
// large value's room gives the same bytes in use as a rebuilt value; damaged records are refused
// before they are applied.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "persist/mutation.h"
#include "store/keyspace.h"
#include "store/state_store.h"
#include "store/stream.h"

namespace prefixd {
namespace {

using persist::StreamValue;
using store::StreamId;

persist::Mutation RoundTrip(const persist::Mutation& m) {
  std::string joined;
  for (const Bytes& piece : persist::EncodePayload(m)) joined.append(piece.view());
  persist::Mutation out;
  EXPECT_EQ(persist::DecodePayload(persist::TypeOf(m), Bytes::CopyOf(joined), out).ToString(),
            "OK");
  return out;
}

persist::Blob Entry(StreamId id, std::vector<std::string_view> fields) {
  const Bytes body = store::EncodeStreamBody(fields);
  return persist::Blob{{store::EncodeStreamEntry(id, body.view())}};
}

class StreamValueTest : public ::testing::Test {
 protected:
  void Apply(const persist::Mutation& m) {
    const persist::Mutation read = RoundTrip(m);
    ASSERT_TRUE(persist::Check(read, persist::Limits::Hard()).ok);
    persist::Apply(read, stores_, {});
  }
  std::optional<store::StreamReader> Reader(const std::string& key) {
    auto info = keys_.Find(key);
    if (!info) return std::nullopt;
    value_ = info->value;
    return store::StreamReader::Open(value_.view());
  }
  store::Keyspace keys_;
  store::StateStore state_{1};
  const persist::Stores stores_{state_, nullptr, 0, &keys_, nullptr};
  Bytes value_;
};

TEST_F(StreamValueTest, OperationsApplyToTheCurrentValue) {
  for (uint64_t i = 1; i <= 5; ++i) {
    ASSERT_NO_FATAL_FAILURE(
        Apply(StreamValue{"s", StreamValue::kAppend, 0, Entry({i, 0}, {"f", "v"})}));
  }
  ASSERT_NO_FATAL_FAILURE(Apply(StreamValue{
      "s", StreamValue::kDelete, 0, persist::Blob{{store::EncodeStreamIds({{1, 0}, {4, 0}})}}}));
  ASSERT_NO_FATAL_FAILURE(Apply(StreamValue{"s", StreamValue::kTrim, 1, {}}));
  // An append that trims: the new entry in, then two from the front.
  ASSERT_NO_FATAL_FAILURE(
      Apply(StreamValue{"s", StreamValue::kAppend, 2, Entry({9, 9}, {"a", "", "b", "c"})}));
  auto r = Reader("s");
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->entries().size(), 1u);
  EXPECT_EQ(r->entries()[0].id, (StreamId{9, 9}));
  EXPECT_EQ(r->entries()[0].Fields(), (std::vector<std::string>{"a", "", "b", "c"}));
  EXPECT_EQ(r->meta().last, (StreamId{9, 9}));
  EXPECT_EQ(r->meta().first, (StreamId{9, 9}));
  EXPECT_EQ(r->meta().max_deleted, (StreamId{4, 0}));
  EXPECT_EQ(r->meta().entries_added, 6u);

  store::StreamGroups groups;
  groups["g"].last_delivered = {9, 9};
  groups["g"].entries_read = 6;
  groups["g"].pending[{9, 9}] = store::StreamPending{"alice", 1234, 2};
  groups["g"].consumers["alice"].seen_ms = 1234;
  ASSERT_NO_FATAL_FAILURE(Apply(StreamValue{"s", StreamValue::kGroups, 0,
                                            persist::Blob{{store::EncodeStreamGroups(groups)}}}));
  ASSERT_NO_FATAL_FAILURE(
      Apply(StreamValue{"s", StreamValue::kMeta, 0,
                        persist::Blob{{store::EncodeStreamMetaChange({20, 0}, {5, 0}, 40)}}}));
  r = Reader("s");
  ASSERT_TRUE(r.has_value());
  const store::StreamGroups read = r->Groups();
  ASSERT_EQ(read.size(), 1u);
  EXPECT_EQ(read.at("g").pending.at({9, 9}).consumer, "alice");
  EXPECT_EQ(read.at("g").pending.at({9, 9}).deliveries, 2u);
  EXPECT_EQ(read.at("g").entries_read, 6);
  EXPECT_EQ(r->meta().last, (StreamId{20, 0}));
  EXPECT_EQ(r->meta().entries_added, 40u);
  // The whole value, as a snapshot writes it, recreates it; no value deletes the key.
  keys_.SetExpiry("s", 99999, {});
  const Bytes whole = Bytes::CopyOf(value_.view().substr(0, store::StreamUsedBytes(value_.view())));
  ASSERT_NO_FATAL_FAILURE(Apply(StreamValue{"t", StreamValue::kWhole, 0, persist::Blob{{whole}}}));
  EXPECT_EQ(keys_.Find("t")->value.view(), whole.view());
  ASSERT_NO_FATAL_FAILURE(
      Apply(StreamValue{"s", StreamValue::kAppend, 0, Entry({30, 0}, {"x", "y"})}));
  EXPECT_EQ(keys_.Find("s")->expire_at_ms, 99999);
  ASSERT_NO_FATAL_FAILURE(Apply(StreamValue{"s", StreamValue::kWhole, 0, {}}));
  EXPECT_FALSE(keys_.Find("s").has_value());
}

// Past 16 KiB appends go into the buffer's room; the bytes in use equal a value rebuilt entry by
// entry, and a reader's copy taken before an append is not written under it.
TEST_F(StreamValueTest, AppendsIntoTheRoomMatchARebuiltValue) {
  Bytes rebuilt;
  Bytes held;
  std::string held_text;
  for (uint64_t i = 1; i <= 2000; ++i) {
    const std::string v(i % 40, 'v');
    const persist::Blob entry = Entry({i, 1}, {"field", v});
    ASSERT_NO_FATAL_FAILURE(Apply(StreamValue{"s", StreamValue::kAppend, 0, entry}));
    rebuilt = store::StreamAppend(rebuilt.view(), entry.Joined().view(), 0);
    if (i == 1000) {
      held = keys_.Find("s")->value;  // a reader holds the buffer: the next append copies
      held_text = std::string(held.view());
    }
  }
  const Bytes now = keys_.Find("s")->value;
  EXPECT_GT(now.size(), store::StreamUsedBytes(now.view()));  // it has room
  EXPECT_EQ(now.view().substr(0, store::StreamUsedBytes(now.view())),
            rebuilt.view().substr(0, store::StreamUsedBytes(rebuilt.view())));
  EXPECT_EQ(held.view(), held_text);
  auto r = Reader("s");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->entries().size(), 2000u);
  EXPECT_EQ(r->LowerBound({1500, 0}), 1499u);
}

TEST_F(StreamValueTest, DamagedRecordsAreRefused) {
  const auto refused = [](const persist::Mutation& m) {
    return !persist::Check(m, persist::Limits::Hard()).ok;
  };
  EXPECT_TRUE(refused(StreamValue{"s", 9, 0, {}}));
  EXPECT_TRUE(
      refused(StreamValue{"s", StreamValue::kWhole, 0, persist::Blob{{Bytes::CopyOf("short")}}}));
  EXPECT_TRUE(refused(StreamValue{"s", StreamValue::kAppend, 0,
                                  persist::Blob{{Bytes::CopyOf("0123456789abcdef\x05")}}}));
  EXPECT_TRUE(refused(StreamValue{"s", StreamValue::kDelete, 0,
                                  persist::Blob{{Bytes::CopyOf("17 bytes, not 16.")}}}));
  EXPECT_TRUE(refused(StreamValue{"s", StreamValue::kGroups, 0,
                                  persist::Blob{{Bytes::CopyOf("\x01\x00\x00\x00")}}}));
  EXPECT_TRUE(refused(
      StreamValue{"s", StreamValue::kMeta, 0, persist::Blob{{Bytes::CopyOf("too short")}}}));
  EXPECT_TRUE(
      refused(StreamValue{"s", StreamValue::kTrim, 1, persist::Blob{{Bytes::CopyOf("x")}}}));
  // A whole value whose entries are out of order.
  Bytes two = store::StreamAppend({}, Entry({2, 0}, {"a", "b"}).Joined().view(), 0);
  two = store::StreamAppend(two.view(), Entry({3, 0}, {"a", "b"}).Joined().view(), 0);
  std::string swapped(two.view());
  swapped[80] = 9;  // the first entry's ms becomes 9, past the second's 3
  EXPECT_FALSE(store::ValidStream(swapped));
  EXPECT_TRUE(store::ValidStream(two.view()));
  EXPECT_TRUE(
      refused(StreamValue{"s", StreamValue::kWhole, 0, persist::Blob{{Bytes::CopyOf(swapped)}}}));
}

// Groups round-trip through their encoding; the check replay makes of a group change (which
// builds nothing) accepts exactly what decodes: every shorter prefix and a byte more are refused.
TEST_F(StreamValueTest, GroupsRoundTripAndTheirCheckAgreesWithTheDecoder) {
  store::StreamGroups groups;
  groups["g"].last_delivered = {7, 1};
  groups["g"].entries_read = 12;
  groups["g"].pending[{5, 0}] = store::StreamPending{"alice", 100, 1};
  groups["g"].pending[{6, 2}] = store::StreamPending{"", 101, 3};
  groups["g"].consumers["alice"].seen_ms = 99;
  groups["g"].consumers["bob"].seen_ms = 98;
  groups["other"];
  const Bytes encoded = store::EncodeStreamGroups(groups);
  const auto decoded = store::DecodeStreamGroups(encoded.view());
  ASSERT_TRUE(decoded);
  EXPECT_EQ(store::EncodeStreamGroups(*decoded).view(), encoded.view());
  EXPECT_EQ(decoded->at("g").pending.at({6, 2}).deliveries, 3u);
  EXPECT_EQ(decoded->at("g").consumers.at("bob").seen_ms, 98u);
  EXPECT_EQ(decoded->at("other").entries_read, store::kEntriesReadUnknown);
  const std::string text(encoded.view());
  EXPECT_TRUE(store::ValidStreamGroups(text));
  for (size_t n = 0; n < text.size(); ++n) {
    EXPECT_EQ(store::ValidStreamGroups(text.substr(0, n)),
              store::DecodeStreamGroups(text.substr(0, n)).has_value())
        << n;
    EXPECT_FALSE(store::ValidStreamGroups(text.substr(0, n))) << n;
  }
  EXPECT_FALSE(store::ValidStreamGroups(text + "x"));
}

// A value of `n` entries with ids 10-0, 10-1, 11-0, 11-1, ... and bodies of varied lengths.
Bytes StreamOf(int n) {
  Bytes value;
  for (int i = 0; i < n; ++i) {
    const StreamId id{10 + static_cast<uint64_t>(i / 2), static_cast<uint64_t>(i % 2)};
    const std::string v(static_cast<size_t>(i % 13), 'v');
    value = store::StreamAppend(value.view(),
                                Entry(id, {"f", v, "n", std::to_string(i)}).Joined().view(), 0);
  }
  return value;
}

std::vector<StreamId> Ids(const std::vector<store::StreamEntryView>& entries) {
  std::vector<StreamId> ids;
  for (const auto& e : entries) ids.push_back(e.id);
  return ids;
}

// StreamEntriesBetween gives what the indexed reader's entries give for the same bounds, count
// and direction, bodies included.
TEST_F(StreamValueTest, EntriesBetweenMatchTheIndexedReader) {
  const Bytes value = StreamOf(301);
  const auto reader = store::StreamReader::Open(value.view());
  ASSERT_TRUE(reader);
  const auto& all = reader->entries();
  const std::vector<StreamId> bounds = {{0, 0},  {10, 0},  {10, 1},  {57, 0},        {57, 1},
                                        {58, 5}, {160, 0}, {200, 0}, StreamId::Max()};
  int cases = 0;
  for (StreamId low : bounds) {
    for (StreamId high : bounds) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{300}, size_t{1000}}) {
        for (bool reverse : {false, true}) {
          std::vector<store::StreamEntryView> want;
          for (const auto& e : all) {
            if (e.id >= low && e.id <= high) want.push_back(e);
          }
          if (reverse) std::reverse(want.begin(), want.end());
          if (count > 0 && want.size() > count) want.resize(count);
          const auto got = store::StreamEntriesBetween(value.view(), low, high, count, reverse);
          const std::string what = low.ToString() + " " + high.ToString() + " count " +
                                   std::to_string(count) + (reverse ? " reverse" : "");
          ASSERT_EQ(Ids(got), Ids(want)) << what;
          for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i].body, want[i].body) << what;
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 810);
  EXPECT_TRUE(
      store::StreamEntriesBetween(store::EmptyStream().view(), {0, 0}, StreamId::Max(), 0, false)
          .empty());
  EXPECT_TRUE(store::StreamEntriesBetween("short", {0, 0}, StreamId::Max(), 0, false).empty());
}

// Oldest first, it reads no entry past the last it returns: a value damaged after its 20th entry
// (a body length running past the value's end), which the indexed reader refuses whole, still
// answers a read of the first ten, or of ten from the fifth.
TEST_F(StreamValueTest, EntriesBetweenReadOnlyWhatTheyReturnOldestFirst) {
  const Bytes good = StreamOf(2000);
  const auto reader = store::StreamReader::Open(good.view());
  ASSERT_TRUE(reader);
  const auto& entries = reader->entries();
  std::string damaged(good.view().substr(0, store::StreamUsedBytes(good.view())));
  const size_t head_of_21st =
      static_cast<size_t>(entries[20].body.data() - good.view().data()) - 20;
  for (int i = 0; i < 4; ++i) damaged[head_of_21st + 16 + i] = '\xff';
  EXPECT_FALSE(store::StreamReader::Open(damaged));

  const auto first = store::StreamEntriesBetween(damaged, {0, 0}, StreamId::Max(), 10, false);
  ASSERT_EQ(first.size(), 10u);
  EXPECT_EQ(first[0].id, (StreamId{10, 0}));
  EXPECT_EQ(first[9].id, (StreamId{14, 1}));
  EXPECT_EQ(first[9].body, entries[9].body);
  const auto from = store::StreamEntriesBetween(damaged, entries[5].id, StreamId::Max(), 10, false);
  ASSERT_EQ(from.size(), 10u);
  EXPECT_EQ(from.front().id, entries[5].id);
  EXPECT_EQ(from.back().id, entries[14].id);
  // Past the damage nothing more is read: all that comes back is the 20 entries before it.
  EXPECT_EQ(store::StreamEntriesBetween(damaged, {0, 0}, StreamId::Max(), 0, false).size(), 20u);
}

// Every read a command can ask of `value` — bounds at and beside each id given, from the first
// and to the last possible id, COUNT 0, 1, 2 and 65, both directions — answers what the entries'
// StreamReader gives (ids and bodies). Returns the number of reads compared.
int ExpectReadsMatchTheReader(std::string_view value, const std::vector<StreamId>& at) {
  const auto reader = store::StreamReader::Open(value);
  EXPECT_TRUE(reader);
  if (!reader) return 0;
  std::vector<StreamId> bounds = {{0, 0}, StreamId::Max()};
  for (StreamId id : at) {
    bounds.push_back(id);
    if (id.seq > 0) bounds.push_back({id.ms, id.seq - 1});
    bounds.push_back({id.ms, id.seq + 1});
  }
  int reads = 0;
  for (StreamId low : bounds) {
    for (StreamId high : bounds) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{65}}) {
        for (bool reverse : {false, true}) {
          std::vector<store::StreamEntryView> want;
          for (const auto& e : reader->entries()) {
            if (e.id >= low && e.id <= high) want.push_back(e);
          }
          if (reverse) std::reverse(want.begin(), want.end());
          if (count > 0 && want.size() > count) want.resize(count);
          const auto got = store::StreamEntriesBetween(value, low, high, count, reverse);
          const std::string what = low.ToString() + " " + high.ToString() + " count " +
                                   std::to_string(count) + (reverse ? " reverse" : "");
          EXPECT_EQ(Ids(got), Ids(want)) << what;
          if (Ids(got) != Ids(want)) return reads;
          for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].body, want[i].body) << what;
          ++reads;
        }
      }
    }
  }
  return reads;
}

// The id of the i-th entry the index tests add: three per millisecond (same ms, seq 0 to 2).
StreamId NthId(uint64_t i) { return {100 + i / 3, i % 3}; }

// The ids a stride's edges fall on among `n` entries (64 each): the first and last entry, and
// each side of entries 64 and 128.
std::vector<StreamId> EdgeIds(const store::StreamReader& r) {
  std::vector<StreamId> ids;
  const auto& e = r.entries();
  for (size_t i : {size_t{0}, size_t{1}, size_t{62}, size_t{63}, size_t{64}, size_t{65},
                   size_t{127}, size_t{128}, size_t{129}, e.size() - 2, e.size() - 1}) {
    if (i < e.size()) ids.push_back(e[i].id);
  }
  return ids;
}

class StreamSeekIndexTest : public StreamValueTest {
 protected:
  // Appends entries `from` to `to` - 1 to key "s" as replay applies them (into the room when
  // it has enough), each body `body` bytes.
  void Add(uint64_t from, uint64_t to, size_t body) {
    for (uint64_t i = from; i < to; ++i) {
      const std::string v(body + i % 7, static_cast<char>('a' + i % 26));
      ASSERT_NO_FATAL_FAILURE(Apply(StreamValue{
          "s", StreamValue::kAppend, 0, Entry(NthId(i), {"f", v, "n", std::to_string(i)})}));
    }
  }
  Bytes Value() { return keys_.Find("s")->value; }
  // The value of "s" has its index and answers every read as its entries do.
  void ExpectIndexedReads() {
    const Bytes value = Value();
    ASSERT_TRUE(store::StreamHasSeekIndex(value.view()));
    const auto r = store::StreamReader::Open(value.view());
    ASSERT_TRUE(r);
    EXPECT_GT(ExpectReadsMatchTheReader(value.view(), EdgeIds(*r)), 0);
  }
};

// One entry, then up to a stride and one past it, then two strides and one past (entries large
// enough that the value has room from its first entry): the index holds each stride's first
// entry as appends in place add them.
TEST_F(StreamSeekIndexTest, AppendsInPlaceKeepTheIndexAtEachStride) {
  ASSERT_NO_FATAL_FAILURE(Add(0, 1, 17000));
  ExpectIndexedReads();
  ASSERT_NO_FATAL_FAILURE(Add(1, 64, 200));
  ExpectIndexedReads();
  ASSERT_NO_FATAL_FAILURE(Add(64, 65, 200));
  ExpectIndexedReads();
  ASSERT_NO_FATAL_FAILURE(Add(65, 129, 200));
  ExpectIndexedReads();
  ASSERT_NO_FATAL_FAILURE(Add(129, 700, 30));
  ExpectIndexedReads();
  // Appends went into the room (the index was moved and extended, not rebuilt).
  EXPECT_GT(Value().size(), store::StreamUsedBytes(Value().view()));
}

// XDEL of the entries slots point at, trims by count (MAXLEN, MINID) to a stride's edge and
// beside it, an append that trims, groups written in place and groups too large for the room:
// the rebuilt or moved index answers as the entries.
TEST_F(StreamSeekIndexTest, TheIndexFollowsDeletesTrimsAndGroups) {
  ASSERT_NO_FATAL_FAILURE(Add(0, 600, 60));
  ExpectIndexedReads();
  ASSERT_NO_FATAL_FAILURE(Apply(StreamValue{
      "s", StreamValue::kDelete, 0,
      persist::Blob{{store::EncodeStreamIds({NthId(0), NthId(63), NthId(64), NthId(128)})}}}));
  ExpectIndexedReads();
  for (uint64_t trim : {uint64_t{63}, uint64_t{1}, uint64_t{64}, uint64_t{65}}) {
    ASSERT_NO_FATAL_FAILURE(Apply(StreamValue{"s", StreamValue::kTrim, trim, {}}));
    ExpectIndexedReads();
  }
  ASSERT_NO_FATAL_FAILURE(Apply(
      StreamValue{"s", StreamValue::kAppend, 3, Entry(NthId(600), {"f", std::string(50, 'z')})}));
  ExpectIndexedReads();
  store::StreamGroups groups;
  groups["g"].last_delivered = NthId(400);
  for (uint64_t i = 300; i < 400; ++i) {
    groups["g"].pending[NthId(i)] = store::StreamPending{"consumer", i, 1};
  }
  const auto set_groups = [&] {
    return Apply(StreamValue{"s", StreamValue::kGroups, 0,
                             persist::Blob{{store::EncodeStreamGroups(groups)}}});
  };
  ASSERT_NO_FATAL_FAILURE(set_groups());
  ExpectIndexedReads();
  groups["g"].pending.clear();  // smaller groups: the index moves back
  ASSERT_NO_FATAL_FAILURE(set_groups());
  ExpectIndexedReads();
  for (uint64_t i = 0; i < 3000; ++i) {  // larger than the room: rebuilt
    groups["g"].pending[NthId(i)] = store::StreamPending{std::string(20, 'c'), i, 1};
  }
  ASSERT_NO_FATAL_FAILURE(set_groups());
  ExpectIndexedReads();
  ASSERT_NO_FATAL_FAILURE(Add(601, 700, 60));  // appends after the groups
  ExpectIndexedReads();
}

// Trimmed to nothing, a value whose groups keep it past 16 KiB has an empty index; a value
// loaded whole (a snapshot, RESTORE, COPY) gets its index, and its bytes in use are the ones
// loaded.
TEST_F(StreamSeekIndexTest, EmptyAndWholeValuesHaveTheirIndex) {
  ASSERT_NO_FATAL_FAILURE(Add(0, 300, 60));
  store::StreamGroups groups;
  for (uint64_t i = 0; i < 1000; ++i) {
    groups["g"].pending[NthId(i)] = store::StreamPending{std::string(20, 'c'), i, 1};
  }
  ASSERT_NO_FATAL_FAILURE(Apply(StreamValue{"s", StreamValue::kGroups, 0,
                                            persist::Blob{{store::EncodeStreamGroups(groups)}}}));
  const Bytes full = Value();
  const Bytes used = Bytes::CopyOf(full.view().substr(0, store::StreamUsedBytes(full.view())));
  ASSERT_NO_FATAL_FAILURE(Apply(StreamValue{"s", StreamValue::kTrim, 300, {}}));
  ExpectIndexedReads();
  EXPECT_TRUE(
      store::StreamEntriesBetween(Value().view(), {0, 0}, StreamId::Max(), 0, true).empty());
  ASSERT_NO_FATAL_FAILURE(Add(300, 301, 10));  // one entry, in place
  ExpectIndexedReads();

  ASSERT_NO_FATAL_FAILURE(Apply(StreamValue{"s", StreamValue::kWhole, 0, persist::Blob{{used}}}));
  ExpectIndexedReads();
  EXPECT_EQ(Value().view().substr(0, store::StreamUsedBytes(Value().view())), used.view());
  ASSERT_NO_FATAL_FAILURE(Add(300, 400, 10));
  ExpectIndexedReads();
  // Small values have no index (they are read from the oldest entry), and answer the same.
  const Bytes small = StreamOf(20);
  EXPECT_FALSE(store::StreamHasSeekIndex(small.view()));
  EXPECT_GT(ExpectReadsMatchTheReader(small.view(), {{10, 0}, {15, 1}, {19, 1}}), 0);
}

// A slot that points outside the entries, or at the wrong entry, is not followed past the
// value: the reads still answer (from the oldest entry, or within the value).
TEST_F(StreamSeekIndexTest, ADamagedIndexIsNotReadPastTheValue) {
  ASSERT_NO_FATAL_FAILURE(Add(0, 400, 60));
  const Bytes value = Value();
  const size_t end = store::StreamUsedBytes(value.view());
  std::string bad(value.view());
  for (int i = 0; i < 8; ++i) bad[end + 16 + 8 * 2 + i] = '\xff';  // slot 2: far past the end
  const auto r = store::StreamReader::Open(bad);
  ASSERT_TRUE(r);
  EXPECT_TRUE(store::StreamHasSeekIndex(bad));
  EXPECT_GT(ExpectReadsMatchTheReader(bad, EdgeIds(*r)), 0);
  std::string shifted(value.view());
  shifted[end + 16 + 8 * 3] = static_cast<char>(shifted[end + 16 + 8 * 3] + 3);  // mid-entry
  for (bool reverse : {false, true}) {
    for (const auto& e :
         store::StreamEntriesBetween(shifted, {0, 0}, StreamId::Max(), 0, reverse)) {
      EXPECT_GE(e.body.data(), shifted.data());
      EXPECT_LE(e.body.data() + e.body.size(), shifted.data() + end);
    }
  }
}

}  // namespace
}  // namespace prefixd
