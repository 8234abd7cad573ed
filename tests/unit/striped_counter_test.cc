// StripedCounter: exact sums from threads that own a stripe and from more threads than there are
// stripes (which share one), and reads and resets that race with counting threads.
#include "common/striped_counter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace prefixd {
namespace {

// Each thread counts `adds` ones into every counter, all threads at once.
void CountFrom(std::vector<StripedCounter*> counters, int threads, uint64_t adds) {
  std::atomic<bool> go{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      for (uint64_t i = 0; i < adds; ++i) {
        for (StripedCounter* c : counters) c->Add();
      }
    });
  }
  go = true;
  for (auto& w : workers) w.join();
}

TEST(StripedCounter, SumsEveryAddFromMoreThreadsThanStripes) {
  StripedCounter a, b;
  a.Add(5);
  // Forty threads: the first few own a stripe each, the rest share the last one with a locked
  // add. A lost update in either kind shows as a short sum.
  CountFrom({&a, &b}, 40, 20'000);
  EXPECT_EQ(a.Sum(), 5u + 40u * 20'000u);
  EXPECT_EQ(b.Sum(), 40u * 20'000u);
}

TEST(StripedCounter, ResetStartsFromZeroAndKeepsCounting) {
  StripedCounter c;
  c.Add(7);
  c.Reset();
  EXPECT_EQ(c.Sum(), 0u);
  c.Add();
  c.Add(2);
  EXPECT_EQ(c.Sum(), 3u);
  c.Reset();
  c.Reset();
  EXPECT_EQ(c.Sum(), 0u);
}

TEST(StripedCounter, ReadsDuringResetsAndCountingNeverGoBelowZero) {
  StripedCounter c;
  constexpr uint64_t kAdds = 200'000;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> largest_seen{0};
  std::thread resetter([&] {
    while (!stop.load()) {
      c.Reset();
      const uint64_t seen = c.Sum();  // below zero would wrap to a huge count
      if (seen > largest_seen.load()) largest_seen = seen;
    }
  });
  CountFrom({&c}, 4, kAdds);
  stop = true;
  resetter.join();
  EXPECT_LE(largest_seen.load(), 4 * kAdds);
  EXPECT_LE(c.Sum(), 4 * kAdds);
  c.Reset();
  EXPECT_EQ(c.Sum(), 0u);
  c.Add();
  EXPECT_EQ(c.Sum(), 1u);
}

}  // namespace
}  // namespace prefixd
