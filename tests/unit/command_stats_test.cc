// LatencyHistogram's buckets and percentiles, and ErrorStats's cap, at their limits.
#include "engine/command_stats.h"

#include <gtest/gtest.h>

namespace prefixd::commands {
namespace {

TEST(LatencyHistogram, EveryValueLandsInABucketThatHoldsIt) {
  for (uint64_t v : {0ull, 1ull, 31ull, 32ull, 33ull, 47ull, 48ull, 1000ull, 123456789ull,
                     (1ull << 39), (1ull << 40) - 1}) {
    size_t i = LatencyHistogram::Index(v);
    EXPECT_GE(LatencyHistogram::UpperBound(i), v) << v;
    if (i > 0) EXPECT_LT(LatencyHistogram::UpperBound(i - 1), v) << v;
  }
  // Past the range: the last bucket, never out of bounds.
  EXPECT_EQ(LatencyHistogram::Index(~0ull), LatencyHistogram::kBuckets - 1);
}

TEST(LatencyHistogram, BucketsAreWithinOneSixteenth) {
  for (size_t i = 33; i < LatencyHistogram::kBuckets; ++i) {
    uint64_t lo = LatencyHistogram::UpperBound(i - 1) + 1, hi = LatencyHistogram::UpperBound(i);
    EXPECT_LE(static_cast<double>(hi - lo + 1) / static_cast<double>(lo), 1.0 / 16 + 1e-9) << i;
  }
}

TEST(LatencyHistogram, Percentiles) {
  LatencyHistogram h;
  EXPECT_EQ(LatencyHistogram::Percentile(h.Snapshot(), 50), 0u);
  for (uint64_t v = 1; v <= 1000; ++v) h.Record(v * 1000);  // 1..1000 us
  auto counts = h.Snapshot();
  auto p50 = LatencyHistogram::Percentile(counts, 50);
  auto p99 = LatencyHistogram::Percentile(counts, 99);
  EXPECT_GE(p50, 500'000u);
  EXPECT_LE(p50, 500'000u * 17 / 16);
  EXPECT_GE(p99, 990'000u);
  EXPECT_LE(p99, 990'000u * 17 / 16);
  EXPECT_EQ(LatencyHistogram::Percentile(counts, 100),
            LatencyHistogram::UpperBound(LatencyHistogram::Index(1'000'000)));
  h.Reset();
  EXPECT_EQ(LatencyHistogram::Percentile(h.Snapshot(), 99.9), 0u);
}

TEST(ErrorStats, TracksAtMost128CodesButCountsAll) {
  ErrorStats e;
  for (size_t i = 0; i < ErrorStats::kMaxCodes + 1; ++i) e.Add("E" + std::to_string(i));
  e.Add("E0");
  EXPECT_EQ(e.total(), ErrorStats::kMaxCodes + 2);
  auto counts = e.Counts();
  EXPECT_EQ(counts.size(), ErrorStats::kMaxCodes);
  EXPECT_EQ(counts["E0"], 2u);
  EXPECT_EQ(counts.count("E128"), 0u);
  e.Reset();
  EXPECT_EQ(e.total(), 0u);
  EXPECT_TRUE(e.Counts().empty());
}

}  // namespace
}  // namespace prefixd::commands
