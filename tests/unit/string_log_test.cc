// String writes through the log: a multi-key put (MSET's one StringMultiSet record) holds every
// shard of its keys while its record is appended, so under concurrent writers the log replays to
// exactly what memory held; a log of string records replays, and a multi set torn anywhere in
// the log's tail is dropped whole, never in part.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "persist/durability.h"
#include "persist/mutation.h"
#include "store/keyspace.h"
#include "store/state_store.h"

namespace prefixd::persist {
namespace {

using store::Keyspace;

std::map<std::string, std::string> Contents(const Keyspace& keys) {
  std::map<std::string, std::string> out;
  keys.ForEach([&](const std::string& key, const store::KeyInfo& info) {
    out[key] = std::string(info.value.view()) + " expires " + std::to_string(info.expire_at_ms);
  });
  return out;
}

StringSet Set(std::string key, std::string value, uint64_t at_ms = 0) {
  return StringSet{std::move(key), 0, at_ms, Blob{{Bytes::CopyOf(value)}}};
}

// Writers race multi-key puts, single puts, expiries and deletes over a few keys spread across
// shards; each change is "logged" by its hook under the keyspace's locks. After every round,
// replaying the log so far must give what the live keyspace holds: a multi-key put whose record
// was appended before another change of one of its keys also took effect before it.
TEST(StringLogTest, MultiKeyPutsLogInTheOrderTheyApply) {
  Keyspace live, replayed;
  store::StateStore state(1);
  std::mutex log_mu;
  std::vector<Mutation> log;
  // Appends the change to the log; sleeps a moment after a multi-key record, so that another
  // writer runs where one could slip between the record and the puts if the keys were not held.
  const auto logged = [&](Mutation m) {
    return [&log, &log_mu, m = std::move(m)] {
      {
        std::lock_guard lock(log_mu);
        log.push_back(m);
      }
      if (std::holds_alternative<StringMultiSet>(m)) {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    };
  };
  constexpr int kKeys = 12, kThreads = 4, kRounds = 150, kChanges = 12;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(round * kThreads + t);
        for (int n = 0; n < kChanges; ++n) {
          const std::string tag =
              std::to_string(round) + "-" + std::to_string(t) + "-" + std::to_string(n);
          const std::string key = "k" + std::to_string(rng() % kKeys);
          const int64_t at = 4102444800000 + n;
          switch (rng() % 4) {
            case 0:
            case 1: {
              StringMultiSet record;
              std::vector<Keyspace::StringPut> puts;
              for (size_t i = 0, count = 2 + rng() % 6; i < count; ++i) {
                record.entries.push_back(Set("k" + std::to_string(rng() % kKeys), tag));
              }
              for (const StringSet& entry : record.entries) {
                puts.push_back({entry.key, Bytes::CopyOf(tag)});
              }
              live.PutStrings(puts, logged(record));
              break;
            }
            case 2:
              live.PutString(key, Bytes::CopyOf(tag), store::StringEncoding::kRaw,
                             store::KeepTtl::kNo, at, logged(Set(key, tag, at)));
              break;
            case 3:
              live.RemoveString(key, logged(StringDel{key}));
              break;
          }
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (const Mutation& m : log) Apply(m, Stores{state, nullptr, 0, &replayed}, {});
    log.clear();
    ASSERT_EQ(Contents(replayed), Contents(live)) << "after round " << round;
  }
  EXPECT_GT(live.size(), 0u);
}

class StringLogDurabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/prefixd-strlog-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  struct World {
    explicit World(const std::string& dir) {
      DurabilityOptions options;
      options.dir = dir;
      options.policy = FsyncPolicy::kAlways;
      options.auto_rewrite_percentage = 0;
      durability =
          std::make_unique<Durability>(options, StoreSet(Stores{state, nullptr, 0, &keys}));
    }
    // The live path's steps (engine/write_path.cc).
    void Change(const Mutation& m) {
      ASSERT_TRUE(Check(m, Limits::Hard()).ok) << Describe(m);
      EncodedRecord record = EncodeRecord(m);
      Apply(m, Stores{state, nullptr, 0, &keys}, [&] { durability->Append(std::move(record)); });
    }
    store::StateStore state{4};
    Keyspace keys;
    std::unique_ptr<Durability> durability;
  };

  // The first log segment's path.
  std::string Segment() const { return dir_ + "/log-00000000000000000001.seg"; }
  // Leaves the first segment as `bytes`, without the ones a start added after it.
  void RewriteLog(std::string_view bytes) const {
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      if (entry.path().extension() == ".seg") std::filesystem::remove(entry.path());
    }
    std::ofstream out(Segment(), std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  std::string dir_;
};

TEST_F(StringLogDurabilityTest, AMultiSetTornAnywhereIsDroppedWhole) {
  const std::string large(20000, 'L');  // written from its own buffer, not the staging one
  uint64_t before_last = 0, end = 0;
  std::map<std::string, std::string> first_state;
  {
    World world(dir_);
    ASSERT_EQ(world.durability->Open().message(), "");
    world.Change(Set("a", "1"));
    world.Change(StringMultiSet{{Set("b", "2"), Set("a", "3", 4102444800000)}});
    world.Change(StringDel{"b"});
    world.durability->Sync();
    first_state = Contents(world.keys);
    before_last = std::filesystem::file_size(Segment());
    world.Change(StringMultiSet{{Set("c", "4"), Set("d", large), Set("a", "5"), Set("e", "6")}});
    world.durability->Sync();
    end = std::filesystem::file_size(Segment());
  }
  ASSERT_GT(end, before_last + large.size());
  const std::string path = Segment();
  std::string whole;
  {
    std::ifstream in(path, std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(in), {});
  }
  // Whole, the log replays every change; cut anywhere inside the last record, it replays the
  // changes before it and none of the multi set's keys.
  for (uint64_t cut = before_last; cut <= end; cut += (cut < before_last + 64 ? 1 : 997)) {
    SCOPED_TRACE("log cut to " + std::to_string(cut) + " of " + std::to_string(end) + " bytes");
    RewriteLog(std::string_view(whole).substr(0, cut));
    World world(dir_);
    ASSERT_EQ(world.durability->Open().message(), "");
    if (cut == end) continue;
    EXPECT_EQ(Contents(world.keys), first_state);
  }
  RewriteLog(whole);
  World world(dir_);
  ASSERT_EQ(world.durability->Open().message(), "");
  const std::map<std::string, std::string> expected = {{"a", "5 expires 0"},
                                                       {"c", "4 expires 0"},
                                                       {"d", large + " expires 0"},
                                                       {"e", "6 expires 0"}};
  EXPECT_EQ(Contents(world.keys), expected);
  EXPECT_EQ(world.keys.Find("d")->value.view(), large);
}

// Small string writes take the log's compact records: a one-byte key and value cost 38 bytes (a
// 32-byte header and six of varints, key and value), and a compact multi set cut anywhere, byte
// by byte, is dropped whole as the fieldwise one is; whole, both replay with their expiries.
TEST_F(StringLogDurabilityTest, CompactRecordsAreSmallAndATornOneIsDroppedWhole) {
  uint64_t before_last = 0, end = 0;
  std::map<std::string, std::string> first_state;
  {
    World world(dir_);
    ASSERT_EQ(world.durability->Open().message(), "");
    world.durability->Sync();
    const uint64_t start = std::filesystem::file_size(Segment());
    world.Change(Set("a", "1"));
    world.durability->Sync();
    EXPECT_EQ(std::filesystem::file_size(Segment()) - start, 38u);
    world.Change(Set("b", std::string(511, 'b'), 4102444800000));
    world.durability->Sync();
    first_state = Contents(world.keys);
    before_last = std::filesystem::file_size(Segment());
    world.Change(StringMultiSet{{Set("c", "4"), Set("a", "5", 4102444800001), Set("b", "6")}});
    world.durability->Sync();
    end = std::filesystem::file_size(Segment());
  }
  // A count byte and three entries of six or seven bytes behind the header (the expiry's varint
  // takes six).
  EXPECT_EQ(end - before_last, 32u + 1 + 6 + 11 + 6);
  std::string whole;
  {
    std::ifstream in(Segment(), std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (uint64_t cut = before_last; cut < end; ++cut) {
    SCOPED_TRACE("log cut to " + std::to_string(cut) + " of " + std::to_string(end) + " bytes");
    RewriteLog(std::string_view(whole).substr(0, cut));
    World world(dir_);
    ASSERT_EQ(world.durability->Open().message(), "");
    EXPECT_EQ(Contents(world.keys), first_state);
  }
  RewriteLog(whole);
  World world(dir_);
  ASSERT_EQ(world.durability->Open().message(), "");
  const std::map<std::string, std::string> expected = {
      {"a", "5 expires 4102444800001"}, {"b", "6 expires 0"}, {"c", "4 expires 0"}};
  EXPECT_EQ(Contents(world.keys), expected);
}

}  // namespace
}  // namespace prefixd::persist
