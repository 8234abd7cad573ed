// CommandStats: one command's INFO commandstats figures (calls, time, rejected and failed calls)
// and its latency histogram, and ErrorStats: the error replies by code (INFO errorstats). Bumped
// by the io thread that runs a command, read by INFO and /metrics on any thread: relaxed atomics.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/striped_counter.h"

namespace prefixd::commands {

// Latencies in nanoseconds, log-linear buckets: 16 per power of two (values within 1/16 of each
// other share a bucket), as HdrHistogram with two significant digits does for Redis.
class LatencyHistogram {
 public:
  static constexpr int kSubBuckets = 16;
  static constexpr int kPowers = 40;  // up to 2^40 ns (18 minutes); longer ones land in the last
  static constexpr size_t kBuckets = kSubBuckets * (kPowers - 3);

  void Record(uint64_t ns) { buckets_[Index(ns)].fetch_add(1, std::memory_order_relaxed); }
  void Reset() {
    for (auto& b : buckets_) b.store(0, std::memory_order_relaxed);
  }
  // The counts, bucket by bucket (a consistent-enough copy for reporting).
  std::vector<uint64_t> Snapshot() const {
    std::vector<uint64_t> out(kBuckets);
    for (size_t i = 0; i < kBuckets; ++i) out[i] = buckets_[i].load(std::memory_order_relaxed);
    return out;
  }
  // The largest value bucket `i` holds, in nanoseconds.
  static uint64_t UpperBound(size_t i) {
    if (i < 2 * kSubBuckets) return i;
    uint64_t power = i / kSubBuckets - 1 + 4;  // bucket 32.. starts at 2^5
    uint64_t sub = i % kSubBuckets;
    uint64_t width = uint64_t{1} << (power - 4);
    return (uint64_t{1} << power) + (sub + 1) * width - 1;
  }
  static size_t Index(uint64_t ns) {
    if (ns < 2 * kSubBuckets) return ns;
    int power = 63 - __builtin_clzll(ns);  // >= 5
    size_t sub = (ns >> (power - 4)) & (kSubBuckets - 1);
    size_t i = static_cast<size_t>(power - 4 + 1) * kSubBuckets + sub;
    return i < kBuckets ? i : kBuckets - 1;
  }
  // The value at percentile `p` (0..100) of `counts`, in nanoseconds; 0 when empty.
  static uint64_t Percentile(const std::vector<uint64_t>& counts, double p) {
    uint64_t total = 0;
    for (uint64_t c : counts) total += c;
    if (total == 0) return 0;
    uint64_t rank = static_cast<uint64_t>(p / 100.0 * static_cast<double>(total) + 0.5);
    if (rank == 0) rank = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      seen += counts[i];
      if (seen >= rank) return UpperBound(i);
    }
    return UpperBound(counts.size() - 1);
  }

 private:
  std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
};

struct CommandStats {
  StripedCounter calls;
  StripedCounter usec;
  StripedCounter rejected_calls;
  StripedCounter failed_calls;
  LatencyHistogram latency;

  void Reset() {
    calls.Reset(), usec.Reset(), rejected_calls.Reset(), failed_calls.Reset();
    latency.Reset();
  }
};

// Error replies by code ("ERR", "WRONGTYPE", ...). As Redis, at most 128 distinct codes are
// tracked; past that new codes are only counted in the total.
class ErrorStats {
 public:
  static constexpr size_t kMaxCodes = 128;
  void Add(std::string_view code) {
    total_.Add();
    std::lock_guard lock(mu_);
    auto it = counts_.find(code);
    if (it != counts_.end()) {
      ++it->second;
    } else if (counts_.size() < kMaxCodes) {
      counts_.emplace(std::string(code), 1);
    }
  }
  uint64_t total() const { return total_.Sum(); }
  std::map<std::string, uint64_t, std::less<>> Counts() const {
    std::lock_guard lock(mu_);
    return counts_;
  }
  void Reset() {
    total_.Reset();
    std::lock_guard lock(mu_);
    counts_.clear();
  }

 private:
  StripedCounter total_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t, std::less<>> counts_;
};

}  // namespace prefixd::commands
