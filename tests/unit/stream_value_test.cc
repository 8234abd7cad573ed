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

}  // namespace
}  // namespace prefixd
