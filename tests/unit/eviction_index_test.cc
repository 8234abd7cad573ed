// EvictionIndex against a plain model (a scan of every entry) under random operations for every
// policy, Redis's LFU counter curve and decay as OBJECT FREQ reports them, pins, the expiry
// heap, policy switches, handle reuse, memory per entry, and the cross-shard EvictionRound.
#include "store/eviction_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

namespace prefixd::store {
namespace {

constexpr uint64_t kMinute = 60'000'000;

TEST(EvictionPolicyTest, RedisNamesRoundTripInAnyCase) {
  for (auto p :
       {EvictionPolicy::kNoEviction, EvictionPolicy::kAllKeysLru, EvictionPolicy::kAllKeysLfu,
        EvictionPolicy::kAllKeysRandom, EvictionPolicy::kVolatileLru, EvictionPolicy::kVolatileLfu,
        EvictionPolicy::kVolatileRandom, EvictionPolicy::kVolatileTtl}) {
    EXPECT_EQ(ParseEvictionPolicy(EvictionPolicyName(p)), p);
  }
  EXPECT_EQ(ParseEvictionPolicy("AllKeys-LRU"), EvictionPolicy::kAllKeysLru);
  // Every listed choice parses (the list is Redis's CONFIG SET error text).
  std::string_view rest = kEvictionPolicyChoices;
  int listed = 0;
  while (!rest.empty()) {
    const size_t comma = rest.find(", ");
    EXPECT_TRUE(ParseEvictionPolicy(rest.substr(0, comma))) << rest.substr(0, comma);
    ++listed;
    rest = comma == std::string_view::npos ? "" : rest.substr(comma + 2);
  }
  EXPECT_EQ(listed, 8);
  EXPECT_EQ(ParseEvictionPolicy("allkeys-lru "), std::nullopt);
  EXPECT_EQ(ParseEvictionPolicy("lru"), std::nullopt);
  EXPECT_EQ(ParseEvictionPolicy(""), std::nullopt);
  EXPECT_TRUE(EvictsVolatileOnly(EvictionPolicy::kVolatileTtl));
  EXPECT_FALSE(EvictsVolatileOnly(EvictionPolicy::kAllKeysLfu));
  EXPECT_TRUE(TracksFrequency(EvictionPolicy::kVolatileLfu));
  EXPECT_FALSE(TracksFrequency(EvictionPolicy::kAllKeysLru));
}

TEST(EvictionIndexTest, LruPicksTheLeastRecentlyTouchedAndSkipsPins) {
  EvictionIndex index(EvictionPolicy::kAllKeysLru);
  const auto a = index.Insert(1), b = index.Insert(2), c = index.Insert(3);
  EXPECT_EQ(index.PickVictim()->handle, a);
  index.Touch(a, 4);
  EXPECT_EQ(index.PickVictim()->handle, b);
  EXPECT_EQ(index.PickVictim()->score, 2u);
  ASSERT_TRUE(index.Pin(b));
  EXPECT_EQ(index.PickVictim()->handle, c);
  ASSERT_TRUE(index.Pin(b));
  index.Unpin(b);
  EXPECT_EQ(index.PickVictim()->handle, c);  // pins count
  index.Unpin(b);
  EXPECT_EQ(index.PickVictim()->handle, b);
  // Microsecond stamps: two touches 1 µs apart are ordered.
  index.Touch(b, 10);
  index.Touch(c, 11);
  EXPECT_EQ(index.PickVictim()->handle, a);
  index.Erase(a);
  EXPECT_EQ(index.PickVictim()->handle, b);
  EXPECT_EQ(index.size(), 2u);
  EXPECT_EQ(index.IdleMicros(b, 1'000'010), 1'000'000u);
}

TEST(EvictionIndexTest, AllPinnedOrEmptyHasNoVictim) {
  EvictionIndex index(EvictionPolicy::kAllKeysLfu);
  EXPECT_EQ(index.PickVictim(), std::nullopt);
  const auto a = index.Insert(1);
  ASSERT_TRUE(index.Pin(a));
  EXPECT_EQ(index.PickVictim(), std::nullopt);
  index.SetPolicy(EvictionPolicy::kNoEviction);
  index.Unpin(a);
  EXPECT_EQ(index.PickVictim(), std::nullopt);
}

TEST(EvictionIndexTest, PinLimitIsReportedNotWrapped) {
  EvictionIndex index(EvictionPolicy::kAllKeysRandom);
  const auto a = index.Insert(1);
  for (int i = 0; i < 65535; ++i) ASSERT_TRUE(index.Pin(a));
  EXPECT_FALSE(index.Pin(a));
  EXPECT_EQ(index.PickVictim(), std::nullopt);
  for (int i = 0; i < 65534; ++i) index.Unpin(a);
  EXPECT_TRUE(index.IsPinned(a));
  index.Unpin(a);
  EXPECT_FALSE(index.IsPinned(a));
  index.Unpin(a);  // one too many: ignored
  EXPECT_EQ(index.PickVictim()->handle, a);
}

TEST(EvictionIndexTest, VolatileScopeOnlyHoldsEntriesWithAnExpiry) {
  for (auto policy : {EvictionPolicy::kVolatileLru, EvictionPolicy::kVolatileLfu,
                      EvictionPolicy::kVolatileRandom, EvictionPolicy::kVolatileTtl}) {
    SCOPED_TRACE(EvictionPolicyName(policy));
    EvictionIndex index(policy);
    const auto a = index.Insert(1), b = index.Insert(2);
    EXPECT_EQ(index.PickVictim(), std::nullopt);
    index.SetExpiry(b, 5000);
    EXPECT_EQ(index.PickVictim()->handle, b);
    EXPECT_EQ(index.ExpiryMs(b), 5000);
    EXPECT_EQ(index.ExpiryMs(a), std::nullopt);
    index.ClearExpiry(b);
    EXPECT_EQ(index.PickVictim(), std::nullopt);
    EXPECT_EQ(index.volatile_size(), 0u);
  }
}

TEST(EvictionIndexTest, SetExpiryKeepsRecencyOrder) {
  EvictionIndex index(EvictionPolicy::kVolatileLru);
  const auto a = index.Insert(1), b = index.Insert(2), c = index.Insert(3);
  index.SetExpiry(c, 100);
  index.SetExpiry(a, 100);  // a is older than c: it is placed before c, not at the tail
  index.SetExpiry(b, 100);
  EXPECT_EQ(index.PickVictim()->handle, a);
  index.Erase(a);
  EXPECT_EQ(index.PickVictim()->handle, b);
}

TEST(EvictionIndexTest, LfuCounterFollowsRedisCurveAndDecay) {
  EvictionIndex index(EvictionPolicy::kAllKeysLfu, LfuSettings{10, 1});
  const auto a = index.Insert(0);
  EXPECT_EQ(index.Frequency(a, 0), 5);  // LFU_INIT_VAL
  index.Touch(a, 1);
  EXPECT_EQ(index.Frequency(a, 1), 6);  // at or below LFU_INIT_VAL every hit steps
  for (int i = 0; i < 10; ++i) index.Touch(a, 2);
  EXPECT_EQ(index.Frequency(a, 2), 6);  // the 11th hit at 6 steps: 1/((6-5)*10+1)
  index.Touch(a, 2);
  EXPECT_EQ(index.Frequency(a, 2), 7);
  for (int i = 0; i < 21; ++i) index.Touch(a, 3);
  EXPECT_EQ(index.Frequency(a, 3), 8);
  // Decay: one step per whole minute since the last access, reported without touching.
  EXPECT_EQ(index.Frequency(a, kMinute - 1), 8);
  EXPECT_EQ(index.Frequency(a, kMinute), 7);
  EXPECT_EQ(index.Frequency(a, 5 * kMinute + 3), 3);
  EXPECT_EQ(index.Frequency(a, 100 * kMinute), 0);
  // A touch applies the decay first, then steps (at 0 every hit steps).
  index.Touch(a, 100 * kMinute);
  EXPECT_EQ(index.Frequency(a, 100 * kMinute), 1);
  index.SetLfuSettings(LfuSettings{10, 0});
  EXPECT_EQ(index.Frequency(a, 1000 * kMinute), 1);  // decay 0: never decays
  index.SetLfuSettings(LfuSettings{10, 3});
  EXPECT_EQ(index.Frequency(a, 102 * kMinute), 1);
  EXPECT_EQ(index.Frequency(a, 103 * kMinute), 0);
}

TEST(EvictionIndexTest, LfuCounterSaturatesAndMatchesRedisTable) {
  // Redis's documented table for lfu-log-factor 10: about 10 after 100 hits, 18 after 1000,
  // 255 after a million. The deterministic counter tracks the expectation within a step.
  EvictionIndex index(EvictionPolicy::kAllKeysLfu, LfuSettings{10, 0});
  const auto a = index.Insert(0);
  int hits = 0;
  auto hit_until = [&](int n) {
    for (; hits < n; ++hits) index.Touch(a, 0);
    return index.Frequency(a, 0);
  };
  EXPECT_NEAR(hit_until(100), 10, 1);
  EXPECT_NEAR(hit_until(1000), 18, 1);
  EXPECT_NEAR(hit_until(100000), 142, 6);
  EXPECT_EQ(hit_until(1000000), 255);
  EXPECT_EQ(hit_until(1000100), 255);
  // log_factor 0: every hit steps.
  EvictionIndex flat(EvictionPolicy::kAllKeysLfu, LfuSettings{0, 0});
  const auto b = flat.Insert(0);
  for (int i = 0; i < 300; ++i) flat.Touch(b, 0);
  EXPECT_EQ(flat.Frequency(b, 0), 255);
}

TEST(EvictionIndexTest, LfuEvictsLowestDecayedCounterThenLeastRecent) {
  EvictionIndex index(EvictionPolicy::kAllKeysLfu, LfuSettings{10, 1});
  const auto hot = index.Insert(0);
  for (int i = 0; i < 40; ++i) index.Touch(hot, 0);  // count 8
  const auto cold = index.Insert(1);                 // count 5
  EXPECT_EQ(index.PickVictim()->handle, cold);
  // Four minutes later both have decayed (no sweep ran) and the order still follows the
  // decayed counters: cold 1, hot 4, the new entry 5.
  const auto later = index.Insert(4 * kMinute);
  EXPECT_EQ(index.Frequency(hot, 4 * kMinute), 4);
  EXPECT_EQ(index.Frequency(cold, 4 * kMinute), 1);  // cold decayed too: 5 - 4 whole minutes
  EXPECT_EQ(index.PickVictim()->handle, cold);
  index.Erase(cold);
  EXPECT_EQ(index.PickVictim()->handle, hot);
  index.Erase(hot);
  EXPECT_EQ(index.PickVictim()->handle, later);
  // Equal counters: the least recently touched goes first.
  const auto x = index.Insert(4 * kMinute + 5);
  EXPECT_EQ(index.PickVictim()->handle, later);
  index.Touch(later, 4 * kMinute + 6);
  index.Touch(x, 4 * kMinute + 7);
  EXPECT_EQ(index.PickVictim()->handle, later);
}

TEST(EvictionIndexTest, TtlAndActiveExpiryUseTheEarliestExpiry) {
  EvictionIndex index(EvictionPolicy::kVolatileTtl);
  std::vector<EvictionIndex::Handle> h;
  for (int i = 0; i < 6; ++i) h.push_back(index.Insert(i));
  const int64_t at[] = {500, 100, 300, 200, 600, 400};
  for (int i = 0; i < 6; ++i) index.SetExpiry(h[i], at[i]);
  EXPECT_EQ(index.NextExpiryMs(), 100);
  EXPECT_EQ(index.PickVictim()->handle, h[1]);
  EXPECT_EQ(index.PickVictim()->score, 100u);
  ASSERT_TRUE(index.Pin(h[1]));
  ASSERT_TRUE(index.Pin(h[3]));
  EXPECT_EQ(index.PickVictim()->handle, h[2]);  // skips the two pinned soonest
  // Expiry ignores pins: an expired entry is never served, pinned or not.
  EXPECT_EQ(index.PeekExpired(99), std::nullopt);
  EXPECT_EQ(index.PeekExpired(100), h[1]);
  index.Erase(h[1]);
  EXPECT_EQ(index.PeekExpired(250), h[3]);
  index.SetExpiry(h[3], 1000);  // moved later
  EXPECT_EQ(index.PeekExpired(250), std::nullopt);
  EXPECT_EQ(index.NextExpiryMs(), 300);
  index.SetExpiry(h[4], -5);  // a past time (EXPIREAT in the past): expired at once
  EXPECT_EQ(index.PeekExpired(0), h[4]);
  EXPECT_EQ(index.PickVictim()->score, 0u);
}

// Expired(now, limit) against a sorted list: the earliest `limit` of those due, in order, however
// the heap happens to be laid out after inserts, changes and removals; RemainingTtlSumMs sums the
// future ones.
TEST(EvictionIndexTest, ExpiredListsTheEarliestDueInOrder) {
  std::mt19937_64 rng(5);
  EvictionIndex index;
  std::map<EvictionIndex::Handle, int64_t> expiry;
  for (int i = 0; i < 3000; ++i) {
    const EvictionIndex::Handle h = index.Insert(static_cast<uint64_t>(i));
    if (rng() % 4 != 0) {
      const auto at = static_cast<int64_t>(rng() % 100000);
      index.SetExpiry(h, at);
      expiry[h] = at;
    }
  }
  for (auto it = expiry.begin(); it != expiry.end();) {  // change some, clear or erase others
    const uint64_t roll = rng() % 10;
    if (roll == 0) {
      index.ClearExpiry(it->first);
      it = expiry.erase(it);
    } else if (roll == 1) {
      index.Erase(it->first);
      it = expiry.erase(it);
    } else {
      if (roll == 2) index.SetExpiry(it->first, it->second = static_cast<int64_t>(rng() % 100000));
      ++it;
    }
  }
  for (const int64_t now : {-1L, 0L, 500L, 50000L, 99999L, 200000L}) {
    std::vector<std::pair<int64_t, EvictionIndex::Handle>> due;
    uint64_t future = 0;
    for (const auto& [h, at] : expiry) {
      if (at <= now) due.emplace_back(at, h);
      if (at > now) future += static_cast<uint64_t>(at - now);
    }
    std::sort(due.begin(), due.end());
    EXPECT_EQ(index.RemainingTtlSumMs(now), future);
    for (const size_t limit : {size_t{0}, size_t{1}, size_t{20}, size_t{100000}}) {
      const auto got = index.Expired(now, limit);
      ASSERT_EQ(got.size(), std::min(limit, due.size())) << now << " " << limit;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].first, due[i].first) << now << " " << limit << " at " << i;
        EXPECT_EQ(index.ExpiryMs(got[i].second), got[i].first);
      }
    }
  }
}

TEST(EvictionIndexTest, RandomIsUniformAndNeverPicksPinned) {
  EvictionIndex index(EvictionPolicy::kAllKeysRandom, {}, 42);
  std::vector<EvictionIndex::Handle> h;
  for (int i = 0; i < 8; ++i) h.push_back(index.Insert(i));
  ASSERT_TRUE(index.Pin(h[0]));
  index.Erase(h[7]);
  EXPECT_EQ(index.RandomCandidates(), 6u);
  std::map<EvictionIndex::Handle, int> seen;
  for (int i = 0; i < 60000; ++i) ++seen[index.PickVictim()->handle];
  EXPECT_EQ(seen.size(), 6u);
  EXPECT_EQ(seen.count(h[0]), 0u);
  for (auto& [handle, n] : seen) EXPECT_NEAR(n, 10000, 500) << handle;
  index.Unpin(h[0]);
  index.SetPolicy(EvictionPolicy::kVolatileRandom);
  index.SetExpiry(h[3], 10);
  EXPECT_EQ(index.RandomCandidates(), 1u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(index.PickVictim()->handle, h[3]);
}

TEST(EvictionIndexTest, PolicySwitchRebuildsFromStamps) {
  EvictionIndex index(EvictionPolicy::kAllKeysRandom);
  std::vector<EvictionIndex::Handle> h;
  for (int i = 0; i < 5; ++i) h.push_back(index.Insert(10 + i));
  index.Touch(h[0], 20);
  index.Touch(h[2], 21);
  index.SetPolicy(EvictionPolicy::kAllKeysLru);
  std::vector<EvictionIndex::Handle> order;
  while (auto v = index.PickVictim()) {
    order.push_back(v->handle);
    index.Erase(v->handle);
  }
  EXPECT_EQ(order, (std::vector<EvictionIndex::Handle>{h[1], h[3], h[4], h[0], h[2]}));
}

TEST(EvictionIndexTest, HandlesAreReusedAndNodesStayLean) {
  EvictionIndex index(EvictionPolicy::kAllKeysLru);
  const size_t empty = index.MemoryBytes();
  std::vector<EvictionIndex::Handle> h;
  for (int i = 0; i < 100000; ++i) h.push_back(index.Insert(i));
  const size_t full = index.MemoryBytes();
  // 24 bytes a node plus at most one partly used chunk of 256 nodes and the chunk pointers.
  static_assert(EvictionIndex::kHandlesPerChunk == 256);
  EXPECT_LE(full - empty, 100000 * 24 + 256 * 24 + 512 * 8);
  for (auto x : h) index.Erase(x);
  for (int i = 0; i < 100000; ++i) index.Insert(200000 + i);
  EXPECT_EQ(index.MemoryBytes(), full);  // no growth: freed nodes were reused
  EXPECT_EQ(index.size(), 100000u);
}

TEST(EvictionIndexTest, ASmallIndexHoldsOneChunkOfNodes) {
  // A shard of a keyspace with few keys (64 shards, 300 keys each at 19,200 keys) must not pay
  // for thousands of nodes it does not use.
  EvictionIndex index(EvictionPolicy::kAllKeysLru);
  const size_t empty = index.MemoryBytes();
  for (int i = 0; i < 300; ++i) (void)index.Insert(i);
  EXPECT_LE(index.MemoryBytes() - empty, 512 * 24 + 64);
  EXPECT_GE(index.MemoryBytes() - empty, 300 * 24);
}

// ---- against a model -------------------------------------------------------------------

struct ModelEntry {
  uint64_t stamp;
  int count;
  int hits;
  std::optional<int64_t> expiry;
  int pins = 0;
};

class Model {
 public:
  explicit Model(LfuSettings lfu) : lfu_(lfu) {}
  std::map<EvictionIndex::Handle, ModelEntry> entries;

  int Decayed(const ModelEntry& e, uint64_t now) const {
    if (lfu_.decay_minutes == 0) return e.count;
    const uint64_t periods = (now / kMinute - e.stamp / kMinute) / lfu_.decay_minutes;
    return periods >= uint64_t(e.count) ? 0 : e.count - int(periods);
  }
  void Touch(ModelEntry& e, uint64_t now) {
    const int d = Decayed(e, now);
    if (d != e.count) e.hits = 0;
    e.count = d;
    if (e.count < 255) {
      const uint64_t needed = std::max(0, e.count - 5) * uint64_t{lfu_.log_factor} + 1;
      if (uint64_t(++e.hits) >= needed) {
        ++e.count;
        e.hits = 0;
      }
    }
    e.stamp = now;
  }
  // The lowest score over unpinned entries in scope; nullopt when none.
  std::optional<uint64_t> BestScore(EvictionPolicy policy) const {
    std::optional<uint64_t> best;
    for (auto& [h, e] : entries) {
      if (e.pins || (EvictsVolatileOnly(policy) && !e.expiry)) continue;
      uint64_t score = 0;
      switch (policy) {
        case EvictionPolicy::kAllKeysLru:
        case EvictionPolicy::kVolatileLru:
          score = e.stamp;
          break;
        case EvictionPolicy::kAllKeysLfu:
        case EvictionPolicy::kVolatileLfu: {
          const uint64_t d = lfu_.decay_minutes ? lfu_.decay_minutes * kMinute : uint64_t{1} << 48;
          score = e.count * d + e.stamp;
          break;
        }
        case EvictionPolicy::kVolatileTtl:
          score = uint64_t(std::max<int64_t>(*e.expiry, 0));
          break;
        default:
          break;
      }
      if (!best || score < *best) best = score;
    }
    return best;
  }

 private:
  LfuSettings lfu_;
};

void RunAgainstModel(EvictionPolicy policy, LfuSettings lfu, uint64_t seed) {
  SCOPED_TRACE(std::string(EvictionPolicyName(policy)) + " decay " +
               std::to_string(lfu.decay_minutes) + " seed " + std::to_string(seed));
  EvictionIndex index(policy, lfu, seed);
  Model model(lfu);
  std::mt19937_64 rng(seed);
  uint64_t now = 0;
  auto any = [&]() {
    auto it = model.entries.begin();
    std::advance(it, rng() % model.entries.size());
    return it;
  };
  for (int step = 0; step < 4000; ++step) {
    now += 1 + rng() % 20'000'000;  // up to 20 s: the minute decay matters
    const int op = int(rng() % 100);
    if (model.entries.empty() || op < 20) {
      const auto h = index.Insert(now);
      ASSERT_EQ(model.entries.count(h), 0u);
      model.entries[h] = ModelEntry{now, 5, 0, std::nullopt, 0};
    } else if (op < 55) {
      auto it = any();
      index.Touch(it->first, now);
      model.Touch(it->second, now);
    } else if (op < 62) {
      auto it = any();
      index.Erase(it->first);
      model.entries.erase(it);
    } else if (op < 72) {
      auto it = any();
      const int64_t at = int64_t(rng() % 1000);
      index.SetExpiry(it->first, at);
      it->second.expiry = at;
    } else if (op < 76) {
      auto it = any();
      index.ClearExpiry(it->first);
      it->second.expiry.reset();
    } else if (op < 82) {
      auto it = any();
      ASSERT_TRUE(index.Pin(it->first));
      ++it->second.pins;
    } else if (op < 88) {
      auto it = any();
      index.Unpin(it->first);
      if (it->second.pins) --it->second.pins;
    } else if (op < 90) {
      // Out and back: the rebuilt order must match the incremental one.
      index.SetPolicy(EvictionPolicy::kAllKeysRandom);
      index.SetPolicy(policy);
    } else {
      const auto victim = index.PickVictim();
      const auto expected = model.BestScore(policy);
      const bool random =
          policy == EvictionPolicy::kAllKeysRandom || policy == EvictionPolicy::kVolatileRandom;
      ASSERT_EQ(victim.has_value(), expected.has_value());
      if (victim) {
        const auto& e = model.entries.at(victim->handle);
        EXPECT_EQ(e.pins, 0);
        if (EvictsVolatileOnly(policy)) EXPECT_TRUE(e.expiry.has_value());
        if (!random) EXPECT_EQ(victim->score, *expected);
      }
      const auto h = any()->first;
      EXPECT_EQ(index.Frequency(h, now), model.Decayed(model.entries.at(h), now));
      EXPECT_EQ(index.ExpiryMs(h), model.entries.at(h).expiry);
      // Active expiry: the earliest expiry overall.
      std::optional<int64_t> soonest;
      for (auto& [k, e] : model.entries) {
        if (e.expiry && (!soonest || *e.expiry < *soonest)) soonest = e.expiry;
      }
      EXPECT_EQ(index.NextExpiryMs(), soonest);
      if (soonest) EXPECT_EQ(*index.ExpiryMs(*index.PeekExpired(*soonest)), *soonest);
    }
  }
  EXPECT_EQ(index.size(), model.entries.size());
}

TEST(EvictionIndexModelTest, EveryPolicyMatchesAScanOfAllEntries) {
  for (auto policy :
       {EvictionPolicy::kAllKeysLru, EvictionPolicy::kAllKeysLfu, EvictionPolicy::kVolatileLru,
        EvictionPolicy::kVolatileLfu, EvictionPolicy::kVolatileTtl, EvictionPolicy::kAllKeysRandom,
        EvictionPolicy::kVolatileRandom}) {
    for (uint32_t decay : {0u, 1u, 2u}) RunAgainstModel(policy, LfuSettings{10, decay}, 7 + decay);
  }
  RunAgainstModel(EvictionPolicy::kAllKeysLfu, LfuSettings{1, 1}, 99);
}

// ---- across shards -------------------------------------------------------------------

TEST(EvictionRoundTest, EvictsInExactGlobalLruOrderAcrossShards) {
  constexpr int kShards = 4;
  std::vector<std::unique_ptr<EvictionIndex>> shards;
  for (int i = 0; i < kShards; ++i) {
    shards.push_back(std::make_unique<EvictionIndex>(EvictionPolicy::kAllKeysLru));
  }
  std::mt19937_64 rng(3);
  std::map<uint64_t, std::pair<int, EvictionIndex::Handle>> by_stamp;  // the global order
  std::vector<std::vector<std::pair<EvictionIndex::Handle, uint64_t>>> live(kShards);
  uint64_t now = 0;
  for (int i = 0; i < 400; ++i) {
    const int s = int(rng() % kShards);
    live[s].push_back({shards[s]->Insert(++now), now});
  }
  for (int i = 0; i < 400; ++i) {  // touches reorder the global LRU
    const int s = int(rng() % kShards);
    auto& [h, stamp] = live[s][rng() % live[s].size()];
    shards[s]->Touch(h, ++now);
    stamp = now;
  }
  for (int s = 0; s < kShards; ++s) {
    for (auto [h, stamp] : live[s]) by_stamp[stamp] = {s, h};
  }
  EvictionRound round(kShards);
  for (int s = 0; s < kShards; ++s) round.Offer(s, shards[s]->PickVictim());
  // Halfway through, touch the globally oldest entry: the round sees the fresh score, declines
  // its stale record, and the entry moves to the back of the global order.
  std::vector<std::pair<int, EvictionIndex::Handle>> evicted;
  bool touched = false;
  while (auto s = round.Best()) {
    if (evicted.size() == 200 && !touched) {
      touched = true;
      // The first 200 of the global order are gone; the 201st is the oldest left.
      const auto oldest = std::next(by_stamp.begin(), 200);
      auto [ts, th] = oldest->second;
      shards[ts]->Touch(th, ++now);
      by_stamp.erase(oldest);
      by_stamp[now] = {ts, th};
    }
    const auto fresh = shards[*s]->PickVictim();
    if (!fresh || !round.Accepts(*s, fresh->score)) {
      round.Offer(*s, fresh);
      continue;
    }
    shards[*s]->Erase(fresh->handle);
    evicted.push_back({int(*s), fresh->handle});
    round.Offer(*s, shards[*s]->PickVictim());
  }
  std::vector<std::pair<int, EvictionIndex::Handle>> expected;
  for (auto& [stamp, where] : by_stamp) expected.push_back(where);
  EXPECT_EQ(evicted, expected);
}

TEST(EvictionRoundTest, RandomShardWeighsByCandidates) {
  EvictionRound round(3);
  EXPECT_EQ(round.RandomShard(5), std::nullopt);
  round.Offer(0, EvictionIndex::Victim{0, 0}, 1);
  round.Offer(1, std::nullopt, 0);
  round.Offer(2, EvictionIndex::Victim{0, 0}, 3);
  std::map<size_t, int> seen;
  for (uint64_t d = 0; d < 400; ++d) ++seen[*round.RandomShard(d)];
  EXPECT_EQ(seen[0], 100);
  EXPECT_EQ(seen[1], 0);
  EXPECT_EQ(seen[2], 300);
}

}  // namespace
}  // namespace prefixd::store
